package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/cluster"
	"github.com/seglog/seglog/config"
	"github.com/seglog/seglog/coordinator/group"
	"github.com/seglog/seglog/replica"
	"github.com/seglog/seglog/tablet"
)

// A catalog is the metadata the broker answers from and changes: the
// topics with their ids, configs and partitions, each partition's
// replicas, leader, leader epoch and ISR, and the brokers. A cluster's is
// etcd's (clusterCatalog); a single node's is its data directory
// (localCatalog), read as a cluster of one — the node registered and
// live, the controller, every partition's only replica and leader. The
// handlers read either as a cluster.Snapshot and change it through the
// same methods, so no handler asks which it has.
type catalog interface {
	// Topics are name, id and partition count lookups (cheap: no
	// snapshot is built).
	group.Topics
	// snapshot is the metadata now.
	snapshot() *cluster.Snapshot
	// partition is one partition's state now.
	partition(topic string, p int32) (cluster.PartitionState, bool)
	// brokers are the live brokers of s (nil: now), each at its endpoint
	// on the listener the client connected through.
	brokers(h header, s *cluster.Snapshot) []kmsg.MetadataResponseBroker
	// leased reports whether the broker is certain of its session (a
	// broker that is not claims no leadership: its metadata may be
	// stale). A single node always is.
	leased() bool
	// sync brings the view up to every change made elsewhere (another
	// broker's), for a read that must see it; bounded by syncTimeout.
	sync(ctx context.Context)
	// defaultReplicationFactor is default.replication.factor.
	defaultReplicationFactor() int16
	// createTopic creates a topic that must not exist (its configs set on
	// cfg, and as given in spec), drawn from mut, and waits up to wait
	// until this broker holds its replicas.
	createTopic(spec cluster.TopicSpec, cfg tablet.Config, validateOnly bool, mut *mutations, wait time.Duration) (int16, *string)
	// deleteTopic deletes a topic, drawn from mut, and waits up to wait
	// until this broker's replicas are gone.
	deleteTopic(topic string, mut *mutations, wait time.Duration) (int16, *string)
	// growTopic adds partitions to a topic, up to count, placed by
	// assignment (nil: by the catalog).
	growTopic(topic string, count int32, assignment [][]int32, validateOnly bool, mut *mutations) (int16, *string)
	// topicConfig is a topic's config (of its tablets: the broker's
	// defaults and the topic's own).
	topicConfig(topic string) (tablet.Config, bool)
	// setConfig checks one config of a topic being created, setting it on
	// cfg when it is a tablet's.
	setConfig(cfg *tablet.Config, key string, value *string) error
	// alterTopicConfig applies changes to a topic's configs after checking
	// them all (a bad one changes nothing); replace starts from the
	// defaults (AlterConfigs).
	alterTopicConfig(topic string, changes []configChange, replace, validateOnly bool) (int16, *string)
	// replicationConfigs are the topic's configs that are the
	// replication's, not its tablets', as DescribeConfigs lists them.
	replicationConfigs(topic string) []describedConfig
	// electLeaders holds elections of the partitions asked (nil: every
	// one), each partition's outcome by partition.
	electLeaders(ctx context.Context, typ cluster.ElectionType, asked []cluster.TopicPartition) (map[cluster.TopicPartition]error, error)
	// reassign starts (target) or cancels (nil) a partition's
	// reassignment.
	reassign(ctx context.Context, topic string, p int32, target []int32, allowRFChange bool) error
}

// metadataWriteTimeout bounds a change of the cluster's metadata in etcd.
const metadataWriteTimeout = 30 * time.Second

// syncTimeout bounds a catalog's sync.
const syncTimeout = 2 * time.Second

// clusterCatalog is a cluster's metadata: etcd's, as this broker's member
// follows it, changed there for every broker; a change is answered once
// this broker's replicas have taken it (up to the request's wait).
type clusterCatalog struct {
	clusterTopics
	c *ClusterOptions
	// defaults are the tablets' default config.
	defaults      func() tablet.Config
	ctx           context.Context // ends when the broker closes
	log           *slog.Logger
	maxPartitions int32
}

func (cc *clusterCatalog) snapshot() *cluster.Snapshot { return cc.c.Member.Snapshot() }

func (cc *clusterCatalog) partition(topic string, p int32) (cluster.PartitionState, bool) {
	return cc.c.Member.Snapshot().Partition(topic, p)
}

func (cc *clusterCatalog) leased() bool { return cc.c.Member.Leased() }

func (cc *clusterCatalog) defaultReplicationFactor() int16 { return cc.c.DefaultReplicationFactor }

// brokers lists the live brokers, each at its endpoint on the listener
// the client connected through (Kafka: a broker without that listener is
// left out).
func (cc *clusterCatalog) brokers(h header, s *cluster.Snapshot) []kmsg.MetadataResponseBroker {
	if s == nil {
		s = cc.c.Member.Snapshot()
	}
	name := ""
	if h.listener != nil {
		name = h.listener.Name
	}
	var out []kmsg.MetadataResponseBroker
	for _, id := range s.BrokerIDs() {
		br := s.Brokers[id]
		e, ok := br.Endpoint(name)
		if !ok {
			if name != "" || len(br.Endpoints) == 0 {
				continue
			}
			e = br.Endpoints[0]
		}
		mb := kmsg.NewMetadataResponseBroker()
		mb.NodeID, mb.Host, mb.Port = id, e.Host, e.Port
		if br.Rack != "" {
			mb.Rack = kmsg.StringPtr(br.Rack)
		}
		out = append(out, mb)
	}
	return out
}

// sync brings this broker's view of the cluster — the snapshot and the
// replicas' configs — up to every write etcd has made; if etcd does not
// answer within syncTimeout, the read is of the view the broker has (as
// Kafka's metadata cache, which may lag).
func (cc *clusterCatalog) sync(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	err := cc.c.Member.Sync(ctx)
	if err == nil {
		err = cc.c.Replicas.Await(ctx, cc.c.Member.Snapshot().Revision)
	}
	if err != nil {
		cc.log.Debug("answering from this broker's view of the cluster: it could not catch up with etcd", "err", err)
	}
}

// awaitReplicas waits, up to wait (a request's timeout_ms; none for 0 or
// less), until this broker's replicas follow the metadata it has now: a
// topic created or deleted is done here. Running out of time is
// REQUEST_TIMED_OUT, as in Kafka, and the change stands.
func (cc *clusterCatalog) awaitReplicas(wait time.Duration) (int16, *string) {
	if wait <= 0 {
		return 0, nil
	}
	ctx, cancel := context.WithTimeout(cc.ctx, wait)
	defer cancel()
	if err := cc.c.Replicas.Await(ctx, cc.c.Member.Snapshot().Revision); err != nil {
		return kerr.RequestTimedOut.Code, errMessage(err)
	}
	return 0, nil
}

func (cc *clusterCatalog) createTopic(spec cluster.TopicSpec, _ tablet.Config, validateOnly bool, mut *mutations,
	wait time.Duration) (int16, *string) {
	if spec.ReplicationFactor == -1 {
		spec.ReplicationFactor = int(cc.c.DefaultReplicationFactor)
	}
	s := cc.c.Member.Snapshot()
	if _, ok := s.Topics[spec.Name]; ok {
		return kerr.TopicAlreadyExists.Code, errText("topic %q already exists", spec.Name)
	}
	if _, err := s.Placement(spec, 0, -1); err != nil {
		return clusterCode(err), errMessage(err)
	}
	if validateOnly {
		return 0, nil
	}
	if !mut.take(spec.Partitions) {
		return kerr.ThrottlingQuotaExceeded.Code, mut.refusal()
	}
	ctx, cancel := context.WithTimeout(cc.ctx, metadataWriteTimeout)
	defer cancel()
	if _, err := cc.c.Member.CreateTopic(ctx, spec); err != nil {
		return clusterCode(err), errMessage(err)
	}
	cc.log.Info("created a topic", "topic", spec.Name, "partitions", spec.Partitions, "replication_factor", spec.ReplicationFactor)
	return cc.awaitReplicas(wait)
}

// clusterCode is Kafka's code for a cluster metadata error (a wait
// that ran out is REQUEST_TIMED_OUT).
func clusterCode(err error) int16 {
	if errors.Is(err, context.DeadlineExceeded) {
		return kerr.RequestTimedOut.Code
	}
	return errorCode(err)
}

func (cc *clusterCatalog) deleteTopic(topic string, mut *mutations, wait time.Duration) (int16, *string) {
	ts, ok := cc.c.Member.Snapshot().Topics[topic]
	if !ok {
		return kerr.UnknownTopicOrPartition.Code, errText("topic %q does not exist", topic)
	}
	if !mut.take(len(ts.Partitions)) {
		return kerr.ThrottlingQuotaExceeded.Code, mut.refusal()
	}
	ctx, cancel := context.WithTimeout(cc.ctx, metadataWriteTimeout)
	defer cancel()
	if err := cc.c.Member.DeleteTopic(ctx, topic, ts.ID); err != nil {
		return clusterCode(err), errMessage(err)
	}
	cc.log.Info("deleted a topic", "topic", topic, "partitions", len(ts.Partitions))
	return cc.awaitReplicas(wait)
}

func (cc *clusterCatalog) growTopic(topic string, count int32, assignment [][]int32, validateOnly bool, mut *mutations) (int16, *string) {
	ts, ok := cc.c.Member.Snapshot().Topics[topic]
	if !ok {
		return kerr.UnknownTopicOrPartition.Code, errText("topic %q does not exist", topic)
	}
	have := int32(len(ts.Partitions))
	if code, msg := checkGrowth(topic, have, count, assignment, cc.maxPartitions); code != 0 {
		return code, msg
	}
	if validateOnly {
		return 0, nil
	}
	if !mut.take(int(count - have)) {
		return kerr.ThrottlingQuotaExceeded.Code, mut.refusal()
	}
	ctx, cancel := context.WithTimeout(cc.ctx, metadataWriteTimeout)
	defer cancel()
	if _, err := cc.c.Member.CreatePartitions(ctx, topic, int(count), assignment); err != nil {
		return clusterCode(err), errMessage(err)
	}
	if err := cc.c.Replicas.Await(ctx, cc.c.Member.Snapshot().Revision); err != nil {
		return kerr.RequestTimedOut.Code, errMessage(err)
	}
	return 0, nil
}

// checkGrowth checks a CreatePartitions of a topic that has have
// partitions: the count must grow, to at most max, and an assignment
// must name each new partition.
func checkGrowth(topic string, have, count int32, assignment [][]int32, max int32) (int16, *string) {
	if count <= have || count > max {
		return kerr.InvalidPartitions.Code, errText("topic %q has %d partitions; the count must grow, to at most %d", topic, have, max)
	}
	if assignment != nil && int32(len(assignment)) != count-have {
		return kerr.InvalidReplicaAssignment.Code, errText("%d new partitions, %d assignments", count-have, len(assignment))
	}
	return 0, nil
}

// topicConfig is the config of a topic: the defaults and the configs set
// on it in the cluster (its replicas here have the same).
func (cc *clusterCatalog) topicConfig(topic string) (tablet.Config, bool) {
	ts, ok := cc.c.Member.Snapshot().Topics[topic]
	if !ok {
		return tablet.Config{}, false
	}
	c := cc.defaults()
	for k, v := range ts.Configs {
		if replicationConfigs[k] == nil {
			_ = c.Set(k, v) // (checked when it was set)
		}
	}
	return c, true
}

// setConfig: a replication config is the topic's metadata's (checked by
// its rule), the others its tablets'.
func (cc *clusterCatalog) setConfig(cfg *tablet.Config, key string, value *string) error {
	if check := replicationConfigs[key]; check != nil {
		return check(value)
	}
	return setTopicConfig(cfg, key, value)
}

// alterTopicConfig: the topic's configs are its key's in etcd (those set
// explicitly), changed there for every broker, whose replicas take them;
// the answer comes once this broker's have.
func (cc *clusterCatalog) alterTopicConfig(topic string, changes []configChange, replace, validateOnly bool) (int16, *string) {
	ts, ok := cc.c.Member.Snapshot().Topics[topic]
	if !ok {
		return kerr.UnknownTopicOrPartition.Code, errText("topic %q does not exist", topic)
	}
	configs := map[string]string{}
	if !replace {
		configs = maps.Clone(ts.Configs)
		if configs == nil {
			configs = map[string]string{}
		}
	}
	defaults := cc.defaults()
	for _, ch := range changes {
		switch {
		case ch.reset:
			if _, known := defaults.Get(ch.key); !known && replicationConfigs[ch.key] == nil && fixedConfigs[ch.key].value == "" {
				return errorCode(tablet.ErrConfig), errText("unknown key %q", ch.key)
			}
			delete(configs, ch.key)
		case ch.value == nil:
			return kerr.InvalidConfig.Code, errText("%s has no value", ch.key)
		case ch.list != 0:
			current, ok := configs[ch.key]
			if !ok {
				current, _ = defaults.Get(ch.key)
			}
			configs[ch.key] = listChange(current, ch.value, ch.list)
		default:
			configs[ch.key] = *ch.value
		}
	}
	cfg := cc.defaults()
	for _, k := range slices.Sorted(maps.Keys(configs)) {
		v := configs[k]
		if err := cc.setConfig(&cfg, k, &v); err != nil {
			return errorCode(err), errMessage(err)
		}
	}
	if validateOnly {
		return 0, nil
	}
	ctx, cancel := context.WithTimeout(cc.ctx, metadataWriteTimeout)
	defer cancel()
	if _, err := cc.c.Member.AlterTopicConfigs(ctx, topic, configs); err != nil {
		return errorCode(err), errMessage(err)
	}
	if err := cc.c.Replicas.Await(ctx, cc.c.Member.Snapshot().Revision); err != nil {
		return errorCode(err), errMessage(err)
	}
	cc.log.Info("altered a topic config in the cluster", "topic", topic, "changes", len(changes))
	return 0, nil
}

// replicationConfigs: the topic's own (a dynamic topic config) or the
// broker's default.
func (cc *clusterCatalog) replicationConfigs(topic string) []describedConfig {
	set := map[string]string{}
	if ts, ok := cc.c.Member.Snapshot().Topics[topic]; ok {
		set = ts.Configs
	}
	defaults := map[string]string{"min.insync.replicas": strconv.Itoa(max(cc.c.MinInsyncReplicas, 1)),
		"unclean.leader.election.enable":          strconv.FormatBool(cc.c.UncleanLeaderElection),
		"leader.replication.throttled.replicas":   "",
		"follower.replication.throttled.replicas": ""}
	types := map[string]kmsg.ConfigType{"min.insync.replicas": kmsg.ConfigTypeInt, "unclean.leader.election.enable": kmsg.ConfigTypeBoolean,
		"leader.replication.throttled.replicas": kmsg.ConfigTypeList, "follower.replication.throttled.replicas": kmsg.ConfigTypeList}
	var out []describedConfig
	for k, v := range defaults {
		d := describedConfig{name: k, value: v, source: kmsg.ConfigSourceStaticBrokerConfig, typ: types[k]}
		if tv, ok := set[k]; ok {
			d.value, d.source = tv, kmsg.ConfigSourceDynamicTopicConfig
		}
		out = append(out, d)
	}
	return out
}

// electLeaders writes the elections to etcd (any broker may, each
// comparing the partition's state); they are answered once this broker's
// metadata has them.
func (cc *clusterCatalog) electLeaders(ctx context.Context, typ cluster.ElectionType,
	asked []cluster.TopicPartition) (map[cluster.TopicPartition]error, error) {
	return cc.c.Member.ElectLeaders(ctx, typ, asked)
}

// reassign starts or cancels one partition's reassignment in etcd; a
// target of another replication factor than the partition's needs
// allowRFChange (KIP-860).
func (cc *clusterCatalog) reassign(ctx context.Context, topic string, p int32, target []int32, allowRFChange bool) error {
	m := cc.c.Member
	if target != nil && !allowRFChange {
		t, ok := m.Snapshot().Topics[topic]
		if ok && p >= 0 && int(p) < len(t.Partitions) {
			st := t.Partitions[p]
			if have := len(t.Replicas[p]) - len(st.Adding); have != len(target) {
				return fmt.Errorf("%w from %d to %d", ErrReplicationFactorChange, have, len(target))
			}
		}
	}
	return m.Reassign(ctx, topic, p, target)
}

// replicationConfigs are the topic configs a cluster's replication
// takes (kept in the topic's metadata), with their checks: the table's
// (package config), and the throttled replicas' syntax.
var replicationConfigs = map[string]func(*string) error{
	"min.insync.replicas":                     checkByTable("min.insync.replicas"),
	"unclean.leader.election.enable":          checkByTable("unclean.leader.election.enable"),
	"leader.replication.throttled.replicas":   checkThrottledReplicas,
	"follower.replication.throttled.replicas": checkThrottledReplicas,
}

// checkByTable checks a topic config's value by package config's table.
func checkByTable(name string) func(*string) error {
	d, ok := config.TopicDef(name)
	if !ok {
		panic("broker: " + name + " is not in package config's table") // (a programming error, at init)
	}
	return func(v *string) error {
		if err := d.Check(deref(v)); err != nil {
			return fmt.Errorf("%w: %s: %v", tablet.ErrConfig, name, err)
		}
		return nil
	}
}

func checkThrottledReplicas(v *string) error {
	if _, err := replica.ParseThrottledReplicas(deref(v)); err != nil {
		return fmt.Errorf("%w: %w", tablet.ErrConfig, err)
	}
	return nil
}

// IsReplicationConfig reports whether a topic config is the cluster's
// replication's (kept in the topic's metadata), not its tablets'.
func IsReplicationConfig(name string) bool { return replicationConfigs[name] != nil }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
