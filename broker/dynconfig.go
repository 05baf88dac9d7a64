package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/internal/nearest"
	"github.com/seglog/seglog/tablet"
	"github.com/seglog/seglog/vfs"
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
	fsys vfs.FS
	path string

	mu      sync.Mutex
	cluster map[string]string // resource "": every broker's default
	broker  map[string]string // this broker's
	static  tablet.Config     // the topic defaults of the static configs
	set     map[string]string // the static configs the operator set, by Kafka name
}

// dynamicFile is the file's JSON.
type dynamicFile struct {
	Version int               `json:"version"`
	Cluster map[string]string `json:"cluster"`
	Broker  map[string]string `json:"broker"`
}

// openDynamicConfigs reads the data directory's dynamic configs (none if
// the file is missing) over the static topic defaults, which come from
// the static configs set.
func openDynamicConfigs(m *tablet.Manager, set map[string]string) (*dynamicConfigs, error) {
	d := &dynamicConfigs{fsys: m.FS(), path: filepath.Join(m.Dir(), checkpoint.DynamicBrokerConfigFile),
		cluster: map[string]string{}, broker: map[string]string{}, static: m.DefaultConfig(), set: set}
	data, err := vfs.ReadFile(d.fsys, d.path)
	if errors.Is(err, fs.ErrNotExist) {
		return d, nil
	}
	if err != nil {
		return nil, fmt.Errorf("broker: reading %s: %w", d.path, err)
	}
	var f dynamicFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("broker: %s: %w", d.path, err)
	}
	if f.Version != 1 {
		return nil, fmt.Errorf("broker: %s: version %d, not 1", d.path, f.Version)
	}
	for _, level := range []map[string]string{f.Cluster, f.Broker} {
		for k := range level {
			if _, ok := tablet.BrokerSynonymOf(k); !ok {
				return nil, fmt.Errorf("broker: %s: %s is not a dynamic broker config", d.path, k)
			}
		}
	}
	if f.Cluster != nil {
		d.cluster = f.Cluster
	}
	if f.Broker != nil {
		d.broker = f.Broker
	}
	if _, err := d.effective(d.cluster, d.broker); err != nil {
		return nil, fmt.Errorf("broker: %s: %w", d.path, err)
	}
	return d, nil
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
	d.mu.Lock()
	defer d.mu.Unlock()
	_, src, _ := d.winner(topicKey, d.cluster, d.broker)
	return src
}

// valueAt is a broker config's value at one level (cluster, or this
// broker's), if set there.
func (d *dynamicConfigs) valueAt(name string, cluster bool) (string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	level := d.broker
	if cluster {
		level = d.cluster
	}
	v, ok := level[name]
	return v, ok
}

// brokerConfigType is a dynamic broker config's type: its topic config's.
func brokerConfigType(name string) kmsg.ConfigType {
	if syn, ok := tablet.BrokerSynonymOf(name); ok {
		if t, ok := configTypes[syn.Topic]; ok {
			return t
		}
	}
	return kmsg.ConfigTypeLong
}

// names lists the configs a level sets (cluster, or this broker's),
// sorted.
func (d *dynamicConfigs) names(cluster bool) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if cluster {
		return slices.Sorted(maps.Keys(d.cluster))
	}
	return slices.Sorted(maps.Keys(d.broker))
}

// brokerLevel says which level a BROKER resource name is: "" the cluster
// default, this broker's node id its own; another is an error.
func (b *Broker) brokerLevel(name string) (cluster bool, code int16, msg *string) {
	switch name {
	case "":
		return true, 0, nil
	case strconv.Itoa(int(b.opts.NodeID)):
		return false, 0, nil
	}
	return false, kerr.InvalidRequest.Code, errText("this broker is node %d", b.opts.NodeID)
}

// alterBrokerConfig changes the dynamic configs of one level (replace:
// AlterConfigs, which sets the level's whole set), stores them, and moves
// the topic defaults (and the topics that follow them). A static or
// unknown config changes nothing.
func (b *Broker) alterBrokerConfig(name string, changes []configChange, replace, validateOnly bool) (int16, *string) {
	cluster, code, msg := b.brokerLevel(name)
	if code != 0 {
		return code, msg
	}
	// Only the topic defaults are dynamic: checked before the lock
	// (isBrokerConfig describes the configs, which takes it).
	var static []string
	for _, ch := range changes {
		if _, ok := tablet.BrokerSynonymOf(ch.key); ok {
			continue
		}
		if !b.isBrokerConfig(ch.key) {
			return kerr.InvalidConfig.Code, errText("%s is not a broker config%s", ch.key, b.nearestBrokerConfig(ch.key))
		}
		static = append(static, ch.key)
	}
	if len(static) > 0 {
		// Kafka's words for a config that is not dynamic.
		return kerr.InvalidRequest.Code, errText("Cannot update these configs dynamically: %v", static)
	}
	d := b.dyn
	d.mu.Lock()
	defer d.mu.Unlock()
	level := d.broker
	if cluster {
		level = d.cluster
	}
	next := maps.Clone(level)
	if replace {
		next = map[string]string{}
	}
	for _, ch := range changes {
		switch {
		case ch.reset:
			delete(next, ch.key)
		case ch.list != 0:
			current, ok := next[ch.key]
			if !ok {
				eff, _ := d.effective(d.cluster, d.broker)
				syn, _ := tablet.BrokerSynonymOf(ch.key)
				current, _ = eff.Get(syn.Topic)
			}
			next[ch.key] = listChange(current, ch.value, ch.list)
		case ch.value == nil:
			return kerr.InvalidConfig.Code, errText("%s: a null value", ch.key)
		default:
			next[ch.key] = *ch.value
		}
		// Each value is checked, even one a higher level hides.
		if v, ok := next[ch.key]; ok {
			syn, _ := tablet.BrokerSynonymOf(ch.key)
			c := d.static
			if err := syn.SetFrom(&c, v); err != nil {
				return kerr.InvalidConfig.Code, errMessage(err)
			}
		}
	}
	nc, nb := d.cluster, d.broker
	if cluster {
		nc = next
	} else {
		nb = next
	}
	eff, err := d.effective(nc, nb)
	if err != nil {
		return kerr.InvalidConfig.Code, errMessage(err)
	}
	if validateOnly {
		return 0, nil
	}
	data, err := json.MarshalIndent(dynamicFile{Version: 1, Cluster: nc, Broker: nb}, "", "  ")
	if err == nil {
		err = vfs.WriteAtomic(d.fsys, d.path, append(data, '\n'))
	}
	if err != nil {
		b.opts.Logger.Error("storing the dynamic broker configs", "err", err)
		return errorCode(err), errMessage(err)
	}
	d.cluster, d.broker = nc, nb
	if err := b.m.SetDefaults(eff); err != nil {
		// Stored: the topics that failed (a failed tablet) keep their
		// config, and follow at the next start.
		b.opts.Logger.Warn("applying the dynamic broker configs to topics", "err", err)
	}
	b.opts.Logger.Info("altered the dynamic broker configs", "resource", name, "changes", len(changes))
	return 0, nil
}

// isBrokerConfig says name is a broker config this broker has (one it
// lists, or one the operator set): a static one, when not dynamic.
func (b *Broker) isBrokerConfig(name string) bool {
	if _, ok := b.opts.Configs[name]; ok {
		return true
	}
	return slices.ContainsFunc(b.describeBrokerConfig(false), func(d describedConfig) bool { return d.name == name })
}

// nearestBrokerConfig suggests the dynamic config nearest a typo.
func (b *Broker) nearestBrokerConfig(name string) string {
	var names []string
	for _, s := range tablet.BrokerSynonyms {
		names = append(names, s.Broker)
	}
	if n := nearest.Name(name, names); n != "" {
		return fmt.Sprintf(": did you mean %s?", n)
	}
	return ""
}
