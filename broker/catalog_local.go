package broker

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/cluster"
	"github.com/seglog/seglog/replica"
	"github.com/seglog/seglog/tablet"
)

// localCatalog is a single node's metadata: its data directory's tablets,
// read as a cluster of one. The node is the only broker, registered and
// live, and the controller; a topic is its tablets, each partition led by
// the node at its tablet's leader epoch, the node alone its replicas and
// ISR; a change is made on the tablets at once (nothing to wait for).
type localCatalog struct {
	*tablet.Manager
	replicas *replica.Manager // (a topic deleted: its replicas forgotten)
	node     int32
	// advertised is the address clients are told for a connection's
	// listener.
	advertised    func(h header) (string, int32)
	log           *slog.Logger
	maxPartitions int32

	mu sync.Mutex // serializes the changes of topics (create, delete, grow, configs)
}

// self is the node as the cluster of one registers it.
func (lc *localCatalog) self() cluster.Broker {
	host, port := lc.advertised(header{})
	return cluster.Broker{ID: lc.node, Endpoints: []cluster.Endpoint{{Host: host, Port: port}}}
}

func (lc *localCatalog) snapshot() *cluster.Snapshot {
	var topics []*cluster.TopicState
	me := []int32{lc.node}
	for _, t := range lc.Tablets() { // sorted: a topic's partitions together, in order
		tp := t.TopicPartition()
		if n := len(topics); n == 0 || topics[n-1].Name != tp.Topic {
			id, _ := lc.TopicID(tp.Topic)
			topics = append(topics, &cluster.TopicState{Topic: cluster.Topic{Name: tp.Topic, ID: cluster.TopicID(id)}})
		}
		ts := topics[len(topics)-1]
		ts.Replicas = append(ts.Replicas, me)
		ts.Partitions = append(ts.Partitions, lc.state(t))
	}
	return cluster.SingleNode(int64(lc.TopicsVersion()), lc.self(), topics)
}

// state is a partition's state: led by the node at the tablet's epoch.
func (lc *localCatalog) state(t *tablet.Tablet) cluster.PartitionState {
	return cluster.PartitionState{Leader: lc.node, LeaderEpoch: t.LeaderEpoch(), ISR: []int32{lc.node}}
}

func (lc *localCatalog) partition(topic string, p int32) (cluster.PartitionState, bool) {
	t, ok := lc.Get(checkpoint.TopicPartition{Topic: topic, Partition: p})
	if !ok {
		return cluster.PartitionState{}, false
	}
	return lc.state(t), true
}

func (lc *localCatalog) brokers(h header, _ *cluster.Snapshot) []kmsg.MetadataResponseBroker {
	host, port := lc.advertised(h)
	return []kmsg.MetadataResponseBroker{{NodeID: lc.node, Host: host, Port: port}}
}

func (lc *localCatalog) leased() bool { return true }

func (lc *localCatalog) sync(context.Context) {}

func (lc *localCatalog) defaultReplicationFactor() int16 { return 1 }

// partitions returns a topic's tablets, by partition.
func (lc *localCatalog) partitions(topic string) []*tablet.Tablet {
	var out []*tablet.Tablet
	for _, t := range lc.Tablets() {
		if t.TopicPartition().Topic == topic {
			out = append(out, t)
		}
	}
	return out
}

// createTopic makes the topic's tablets; a failure part way deletes those
// it made (no half-created topic). Its placement is checked as a
// cluster's, of the one broker there is.
func (lc *localCatalog) createTopic(spec cluster.TopicSpec, cfg tablet.Config, validateOnly bool, mut *mutations,
	_ time.Duration) (int16, *string) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if spec.ReplicationFactor == -1 {
		spec.ReplicationFactor = 1
	}
	if _, _, ok := lc.TopicPartitions(spec.Name); ok {
		return kerr.TopicAlreadyExists.Code, errText("topic %q already exists", spec.Name)
	}
	if _, err := cluster.SingleNode(0, lc.self(), nil).Placement(spec, 0, -1); err != nil {
		return clusterCode(err), errMessage(err)
	}
	if validateOnly {
		return 0, nil
	}
	if !mut.take(spec.Partitions) {
		return kerr.ThrottlingQuotaExceeded.Code, mut.refusal()
	}
	for p := range int32(spec.Partitions) {
		if _, err := lc.Create(checkpoint.TopicPartition{Topic: spec.Name, Partition: p}, &cfg); err != nil {
			for q := range p {
				_ = lc.Delete(checkpoint.TopicPartition{Topic: spec.Name, Partition: q})
			}
			lc.log.Warn("creating a topic", "topic", spec.Name, "err", err)
			return errorCode(err), errMessage(err)
		}
	}
	lc.log.Info("created a topic", "topic", spec.Name, "partitions", spec.Partitions)
	return 0, nil
}

// deleteTopic deletes every partition of a topic.
func (lc *localCatalog) deleteTopic(topic string, mut *mutations, _ time.Duration) (int16, *string) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	parts := lc.partitions(topic)
	if len(parts) == 0 {
		return kerr.UnknownTopicOrPartition.Code, errText("topic %q does not exist", topic)
	}
	if !mut.take(len(parts)) {
		return kerr.ThrottlingQuotaExceeded.Code, mut.refusal()
	}
	for _, t := range parts {
		if err := lc.Delete(t.TopicPartition()); err != nil {
			lc.log.Warn("deleting a topic", "topic", topic, "err", err)
			return errorCode(err), errMessage(err)
		}
		lc.replicas.Forget(t.TopicPartition())
	}
	lc.log.Info("deleted a topic", "topic", topic, "partitions", len(parts))
	return 0, nil
}

// growTopic makes the new partitions' tablets, with the topic's config.
func (lc *localCatalog) growTopic(topic string, count int32, assignment [][]int32, validateOnly bool, mut *mutations) (int16, *string) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	parts := lc.partitions(topic)
	if len(parts) == 0 {
		return kerr.UnknownTopicOrPartition.Code, errText("topic %q does not exist", topic)
	}
	have := int32(len(parts))
	if code, msg := checkGrowth(topic, have, count, assignment, lc.maxPartitions); code != 0 {
		return code, msg
	}
	if assignment != nil {
		spec := cluster.TopicSpec{Name: topic, Assignment: assignment}
		if _, err := cluster.SingleNode(0, lc.self(), nil).Placement(spec, int(have), -1); err != nil {
			return clusterCode(err), errMessage(err)
		}
	}
	if validateOnly {
		return 0, nil
	}
	if !mut.take(int(count - have)) {
		return kerr.ThrottlingQuotaExceeded.Code, mut.refusal()
	}
	cfg := parts[0].Config()
	for p := have; p < count; p++ {
		if _, err := lc.Create(checkpoint.TopicPartition{Topic: topic, Partition: p}, &cfg); err != nil {
			lc.log.Warn("adding partitions", "topic", topic, "err", err)
			return errorCode(err), errMessage(err)
		}
	}
	lc.log.Info("added partitions", "topic", topic, "from", have, "to", count)
	return 0, nil
}

// topicConfig is a topic's config: its first partition's (they share it).
func (lc *localCatalog) topicConfig(topic string) (tablet.Config, bool) {
	t, ok := lc.Get(checkpoint.TopicPartition{Topic: topic, Partition: 0})
	if !ok {
		return tablet.Config{}, false
	}
	return t.Config(), true
}

func (lc *localCatalog) setConfig(cfg *tablet.Config, key string, value *string) error {
	return setTopicConfig(cfg, key, value)
}

// alterTopicConfig sets the config on every partition's tablet.
func (lc *localCatalog) alterTopicConfig(topic string, changes []configChange, replace, validateOnly bool) (int16, *string) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	parts := lc.partitions(topic)
	if len(parts) == 0 {
		return kerr.UnknownTopicOrPartition.Code, errText("topic %q does not exist", topic)
	}
	cfg := parts[0].Config()
	if replace {
		cfg = lc.DefaultConfig()
	}
	for _, ch := range changes {
		var err error
		switch {
		case ch.reset:
			err = lc.resetConfig(&cfg, ch.key)
		case ch.list != 0:
			current, _ := cfg.Get(ch.key)
			err = setTopicConfig(&cfg, ch.key, kmsg.StringPtr(listChange(current, ch.value, ch.list)))
		default:
			err = setTopicConfig(&cfg, ch.key, ch.value)
		}
		if err != nil {
			return errorCode(err), errMessage(err)
		}
	}
	if validateOnly {
		return 0, nil
	}
	for _, t := range parts {
		if err := t.SetConfig(cfg); err != nil {
			lc.log.Warn("altering a topic config", "topic", topic, "partition", t.TopicPartition().Partition, "err", err)
			return errorCode(err), errMessage(err)
		}
	}
	lc.log.Info("altered a topic config", "topic", topic, "changes", len(changes))
	return 0, nil
}

// resetConfig returns one key to the broker's default.
func (lc *localCatalog) resetConfig(c *tablet.Config, key string) error {
	if _, ok := fixedConfigs[key]; ok {
		return nil
	}
	def := lc.DefaultConfig()
	v, ok := def.Get(key)
	if !ok {
		return fmt.Errorf("%w: unknown key %q", tablet.ErrConfig, key)
	}
	if err := c.Set(key, v); err != nil {
		return err
	}
	c.Unset(key)
	return nil
}

// replicationConfigs: a single node's one value of each (fixedConfigs).
func (lc *localCatalog) replicationConfigs(string) []describedConfig {
	var out []describedConfig
	for k, f := range fixedConfigs {
		out = append(out, describedConfig{name: k, value: f.value, source: kmsg.ConfigSourceDefaultConfig, typ: f.typ})
	}
	return out
}

// electLeaders: every partition the node has needs none (it is the only
// replica), the others are unknown; asked for all, nothing is answered
// (Kafka leaves out the partitions that need none).
func (lc *localCatalog) electLeaders(_ context.Context, _ cluster.ElectionType,
	asked []cluster.TopicPartition) (map[cluster.TopicPartition]error, error) {
	out := map[cluster.TopicPartition]error{}
	for _, tp := range asked {
		if _, n, ok := lc.TopicPartitions(tp.Topic); ok && tp.Partition >= 0 && tp.Partition < n {
			out[tp] = cluster.ErrElectionNotNeeded
		} else {
			out[tp] = cluster.ErrUnknownTopic
		}
	}
	return out, nil
}

// reassign: a single node's partition has one replica, the node; a
// reassignment to it is done already, there is none to cancel.
func (lc *localCatalog) reassign(_ context.Context, topic string, p int32, target []int32, _ bool) error {
	_, n, ok := lc.TopicPartitions(topic)
	switch {
	case !ok || p < 0 || p >= n:
		return fmt.Errorf("%w: %s-%d", cluster.ErrUnknownTopic, topic, p)
	case target == nil:
		return cluster.ErrNoReassignmentInProgress
	case !slices.Equal(target, []int32{lc.node}):
		return fmt.Errorf("%w: a single node's partition has one replica, broker %d", cluster.ErrInvalidAssignment, lc.node)
	}
	return nil
}
