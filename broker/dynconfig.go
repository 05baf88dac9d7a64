package broker

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/config"
	"github.com/seglog/seglog/internal/docstore"
	"github.com/seglog/seglog/internal/nearest"
	"github.com/seglog/seglog/tablet"
)

// Dynamic broker configs, as Kafka's: AlterConfigs and
// IncrementalAlterConfigs on the BROKER resource change, at run time, the
// cluster-wide default (resource name "") or this broker's own (its node
// id) of the configs that are topics' defaults (log.retention.ms,
// log.cleanup.policy, message.max.bytes, …: tablet.BrokerSynonyms). They
// are kept in the data directory, over the static configs: a topic config
// takes this broker's dynamic value, else the cluster's, else the static
// one; and every topic that does not set the config itself follows the
// change at once. The other broker configs are static: a change is
// refused, as Kafka refuses one.

// dynamicConfigs are the dynamic broker configs and the topic defaults
// they apply over.
type dynamicConfigs struct {
	// doc holds both levels: in the data directory's file on a single
	// node (this broker's level is Broker), in etcd for a whole cluster
	// (every broker's level is in Brokers, by node id).
	doc *docstore.Doc[dynamicFile]
	// node is this broker's node id in a cluster, "" on a single node.
	node string

	static tablet.Config     // the topic defaults of the static configs
	set    map[string]string // the static configs the operator set, by Kafka name
	// rates, if set, takes this broker's replication throttles at each
	// apply (a cluster's replicas).
	rates func(leader, follower int64)
}

// replicationRates are the dynamic broker configs that are not topic
// defaults: the replication throttles (KIP-73), bytes a second, Kafka's
// default Long.MAX_VALUE (none).
var replicationRates = []string{"leader.replication.throttled.rate", "follower.replication.throttled.rate"}

// isDynamicBrokerConfig reports whether a broker config may be set
// dynamically (package config's table: a topic default, a replication
// throttle, a Kerberos config of Kafka's seglog keeps and describes).
func isDynamicBrokerConfig(name string) bool {
	d, ok := config.BrokerDef(name)
	return ok && d.Dynamic
}

// checkOther checks the value of a dynamic broker config that is not a
// topic default (a replication throttle, an inert config) by the table:
// ok, whether it is one.
func checkOther(name, v string) (bool, error) {
	d, ok := config.BrokerDef(name)
	if !ok || !d.Dynamic || d.Topic != "" {
		return false, nil
	}
	if err := d.Check(v); err != nil {
		return true, fmt.Errorf("%w: %s: %v", tablet.ErrConfig, name, err)
	}
	return true, nil
}

// rate is a replication throttle's value: this broker's, else the
// cluster's, else none.
func (d *dynamicConfigs) rate(name string) int64 {
	c, b := d.levels()
	for _, level := range []map[string]string{b, c} {
		if v, ok := level[name]; ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
				return n
			}
		}
	}
	return math.MaxInt64
}

// dynamicFile is the document's JSON.
type dynamicFile struct {
	Version int                          `json:"version"`
	Cluster map[string]string            `json:"cluster"`
	Broker  map[string]string            `json:"broker,omitempty"`
	Brokers map[string]map[string]string `json:"brokers,omitempty"`
}

// levels are the cluster's level and this broker's, never changed.
func (d *dynamicConfigs) levels() (cluster, broker map[string]string) {
	f := d.doc.Load()
	return f.Cluster, f.own(d.node)
}

// own is the level of broker node ("": a single node's file's own level).
func (f *dynamicFile) own(node string) map[string]string {
	if node != "" {
		return f.Brokers[node]
	}
	return f.Broker
}

// encode is the document's bytes.
func (f *dynamicFile) encode() ([]byte, error) {
	data, err := json.MarshalIndent(f, "", "  ")
	return append(data, '\n'), err
}

// openDynamicConfigs reads the dynamic configs (none if there is no
// document) from store over the static topic defaults, which come from the
// static configs set; node is this broker's id in a cluster, "" on a
// single node.
func openDynamicConfigs(m *tablet.Manager, store docstore.Store, node string, set map[string]string) (*dynamicConfigs, error) {
	d := &dynamicConfigs{node: node, static: m.DefaultConfig(), set: set}
	doc, err := docstore.Open(store, func(data []byte) (*dynamicFile, error) {
		f := &dynamicFile{Version: 1, Cluster: map[string]string{}}
		if data == nil {
			return f, nil
		}
		if err := json.Unmarshal(data, f); err != nil {
			return nil, err
		}
		if f.Version != 1 {
			return nil, fmt.Errorf("version %d, not 1", f.Version)
		}
		levels := append([]map[string]string{f.Cluster, f.Broker}, slices.Collect(maps.Values(f.Brokers))...)
		for _, level := range levels {
			for k, v := range level {
				if !isDynamicBrokerConfig(k) {
					return nil, fmt.Errorf("%s is not a dynamic broker config", k)
				}
				if _, err := checkOther(k, v); err != nil {
					return nil, err
				}
			}
		}
		if _, err := d.effective(f.Cluster, f.own(node)); err != nil {
			return nil, err
		}
		return f, nil
	})
	if err != nil {
		return nil, fmt.Errorf("broker: dynamic broker configs: %w", err)
	}
	d.doc = doc
	return d, nil
}

// apply makes the topic defaults the dynamic configs' now (and the topics
// that follow them).
func (d *dynamicConfigs) apply(m *tablet.Manager, log *slog.Logger) {
	eff, err := d.effective(d.levels())
	if err == nil {
		err = m.SetDefaults(eff)
	}
	if err != nil {
		// The topics that failed (a failed tablet) keep their config,
		// and follow at the next start.
		log.Warn("applying the dynamic broker configs to topics", "err", err)
	}
	if d.rates != nil {
		d.rates(d.rate(replicationRates[0]), d.rate(replicationRates[1]))
	}
}

// effective is the topic defaults with the dynamic configs of both levels
// over the static ones, merged as Kafka merges them: each broker config
// takes this broker's dynamic value, else the cluster's, else the static
// one; then a topic config takes the first of its synonyms that has a
// value (log.retention.ms before .minutes before .hours), so a static
// log.retention.ms still beats a dynamic log.retention.hours.
func (d *dynamicConfigs) effective(cluster, broker map[string]string) (tablet.Config, error) {
	c := d.static
	for _, topicKey := range topicKeysOfSynonyms() {
		s, src, v := d.winner(topicKey, cluster, broker)
		if src == 0 { // static or unset: the static default already
			continue
		}
		if err := s.SetFrom(&c, v); err != nil {
			return c, err
		}
	}
	if err := c.Validate(); err != nil {
		return c, err
	}
	return c.Defaults(), nil
}

// topicKeysOfSynonyms lists the topic configs broker configs set, once
// each.
func topicKeysOfSynonyms() []string {
	var keys []string
	for _, s := range tablet.BrokerSynonyms {
		if !slices.Contains(keys, s.Topic) {
			keys = append(keys, s.Topic)
		}
	}
	return keys
}

// winner is the broker config that sets a topic config's default, where
// its value comes from (DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG,
// or 0: static or unset) and the value.
func (d *dynamicConfigs) winner(topicKey string, cluster, broker map[string]string) (tablet.BrokerSynonym, kmsg.ConfigSource, string) {
	for _, s := range tablet.BrokerSynonyms {
		if s.Topic != topicKey {
			continue
		}
		if v, ok := broker[s.Broker]; ok {
			return s, kmsg.ConfigSourceDynamicBrokerConfig, v
		}
		if v, ok := cluster[s.Broker]; ok {
			return s, kmsg.ConfigSourceDynamicDefaultBrokerConfig, v
		}
		if v, ok := d.set[s.Broker]; ok {
			return s, 0, v
		}
	}
	return tablet.BrokerSynonym{}, 0, ""
}

// source is where a topic config's default comes from when a dynamic
// config sets it (DYNAMIC_BROKER_CONFIG or DYNAMIC_DEFAULT_BROKER_CONFIG),
// else 0.
func (d *dynamicConfigs) source(topicKey string) kmsg.ConfigSource {
	cluster, broker := d.levels()
	_, src, _ := d.winner(topicKey, cluster, broker)
	return src
}

// valueAt is a broker config's value at one level (cluster, or this
// broker's), if set there.
func (d *dynamicConfigs) valueAt(name string, cluster bool) (string, bool) {
	v, ok := d.level(cluster)[name]
	return v, ok
}

// level is one level's configs (cluster, or this broker's).
func (d *dynamicConfigs) level(cluster bool) map[string]string {
	c, b := d.levels()
	if cluster {
		return c
	}
	return b
}

// brokerConfigType is a broker config's type (package config's table;
// a topic default's is its topic config's).
func brokerConfigType(name string) kmsg.ConfigType { return configType(config.BrokerDef(name)) }

// names lists the configs a level sets (cluster, or this broker's),
// sorted.
func (d *dynamicConfigs) names(cluster bool) []string {
	return slices.Sorted(maps.Keys(d.level(cluster)))
}

// brokerLevel says which level a BROKER resource name is: "" the cluster
// default, this broker's node id its own; another is an error.
func (a *configAPIs) brokerLevel(name string) (cluster bool, code int16, msg *string) {
	switch name {
	case "":
		return true, 0, nil
	case strconv.Itoa(int(a.opts.NodeID)):
		return false, 0, nil
	}
	return false, kerr.InvalidRequest.Code, errText("this broker is node %d", a.opts.NodeID)
}

// alterBrokerConfig changes the dynamic configs of one level (replace:
// AlterConfigs, which sets the level's whole set), stores them, and moves
// the topic defaults (and the topics that follow them). A static or
// unknown config changes nothing.
func (a *configAPIs) alterBrokerConfig(name string, changes []configChange, replace, validateOnly bool) (int16, *string) {
	cluster, code, msg := a.brokerLevel(name)
	if code != 0 {
		return code, msg
	}
	// Only the topic defaults are dynamic: checked before the lock
	// (isBrokerConfig describes the configs, which takes it).
	var static []string
	for _, ch := range changes {
		if isDynamicBrokerConfig(ch.key) {
			continue
		}
		if !a.isBrokerConfig(ch.key) {
			return kerr.InvalidConfig.Code, errText("%s is not a broker config%s", ch.key, a.nearestBrokerConfig(ch.key))
		}
		static = append(static, ch.key)
	}
	if len(static) > 0 {
		// Kafka's words for a config that is not dynamic.
		return kerr.InvalidRequest.Code, errText("Cannot update these configs dynamically: %v", static)
	}
	d := a.dyn
	var refused *configRefusal
	err := d.doc.Update(func(f *dynamicFile) (*dynamicFile, []byte, error) {
		next, refusal := d.alter(f, cluster, changes, replace)
		if refused = refusal; refusal != nil || validateOnly {
			return nil, nil, nil
		}
		data, err := next.encode()
		return next, data, err
	})
	switch {
	case refused != nil:
		return refused.code, refused.msg
	case err != nil:
		a.opts.Logger.Error("storing the dynamic broker configs", "err", err)
		return errorCode(err), errMessage(err)
	case validateOnly:
		return 0, nil
	}
	d.apply(a.m, a.opts.Logger)
	a.opts.Logger.Info("altered the dynamic broker configs", "resource", name, "changes", len(changes))
	return 0, nil
}

// configRefusal is a change of configs refused: Kafka's code and message.
type configRefusal struct {
	code int16
	msg  *string
}

// alter is f with the changes made to one level (replace: the level's
// whole set), or why they are refused.
func (d *dynamicConfigs) alter(f *dynamicFile, cluster bool, changes []configChange, replace bool) (*dynamicFile, *configRefusal) {
	nc, nb := f.Cluster, f.own(d.node)
	level := nb
	if cluster {
		level = nc
	}
	next := maps.Clone(level)
	if replace || next == nil {
		next = map[string]string{}
	}
	for _, ch := range changes {
		switch {
		case ch.reset:
			delete(next, ch.key)
		case ch.list != 0:
			current, ok := next[ch.key]
			if syn, isSyn := tablet.BrokerSynonymOf(ch.key); !ok && isSyn {
				eff, _ := d.effective(nc, nb)
				current, _ = eff.Get(syn.Topic)
			}
			next[ch.key] = listChange(current, ch.value, ch.list)
		case ch.value == nil:
			return nil, &configRefusal{kerr.InvalidConfig.Code, errText("%s: a null value", ch.key)}
		default:
			next[ch.key] = *ch.value
		}
		// Each value is checked, even one a higher level hides.
		if v, ok := next[ch.key]; ok {
			if other, err := checkOther(ch.key, v); other {
				if err != nil {
					return nil, &configRefusal{kerr.InvalidConfig.Code, errMessage(err)}
				}
				continue
			}
			syn, _ := tablet.BrokerSynonymOf(ch.key)
			c := d.static
			if err := syn.SetFrom(&c, v); err != nil {
				return nil, &configRefusal{kerr.InvalidConfig.Code, errMessage(err)}
			}
		}
	}
	if cluster {
		nc = next
	} else {
		nb = next
	}
	if _, err := d.effective(nc, nb); err != nil {
		return nil, &configRefusal{kerr.InvalidConfig.Code, errMessage(err)}
	}
	n := &dynamicFile{Version: 1, Cluster: nc}
	if d.node == "" {
		n.Broker = nb
	} else {
		n.Brokers = maps.Clone(f.Brokers)
		if n.Brokers == nil {
			n.Brokers = map[string]map[string]string{}
		}
		n.Brokers[d.node] = nb
		if len(nb) == 0 {
			delete(n.Brokers, d.node)
		}
	}
	return n, nil
}

// isBrokerConfig says name is a broker config this broker has (one it
// lists, or one the operator set): a static one, when not dynamic.
func (a *configAPIs) isBrokerConfig(name string) bool {
	if _, ok := a.opts.Configs[name]; ok {
		return true
	}
	return slices.ContainsFunc(a.describeBrokerConfig(false), func(d describedConfig) bool { return d.name == name })
}

// nearestBrokerConfig suggests the dynamic config nearest a typo.
func (a *configAPIs) nearestBrokerConfig(name string) string {
	var names []string
	for _, d := range config.Broker {
		if d.Dynamic {
			names = append(names, d.Name)
		}
	}
	if n := nearest.Name(name, names); n != "" {
		return fmt.Sprintf(": did you mean %s?", n)
	}
	return ""
}
