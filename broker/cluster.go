package broker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/cluster"
	"github.com/seglog/seglog/coordinator/group"
	"github.com/seglog/seglog/replica"
	"github.com/seglog/seglog/tablet"
)

// A broker in a cluster (Options.Cluster set, docs/cluster.md): its
// catalog is etcd's (clusterCatalog), its replica manager the cluster's,
// and its coordinators' internal topics are cluster topics whose
// partitions' leaders coordinate (the hooks here).

// ClusterOptions make a broker one of a cluster.
type ClusterOptions struct {
	// Member is the broker's membership (metadata, leases); Replicas its
	// partitions' leadership and replication. Both are required.
	Member   *cluster.Member
	Replicas *replica.Manager
	// DefaultReplicationFactor is default.replication.factor, of topics
	// created without one (and auto-created ones). The default is 1.
	DefaultReplicationFactor int16
	// OffsetsReplicationFactor is offsets.topic.replication.factor
	// (default 3; fewer when the cluster has fewer live brokers).
	OffsetsReplicationFactor int16
	// TransactionsReplicationFactor is
	// transaction.state.log.replication.factor (default 3; fewer when the
	// cluster has fewer live brokers), TransactionsMinISR
	// transaction.state.log.min.isr (default 2, never above the replicas).
	TransactionsReplicationFactor int16
	TransactionsMinISR            int16
	// MinInsyncReplicas and UncleanLeaderElection are the broker's
	// min.insync.replicas and unclean.leader.election.enable, the
	// defaults of topics that do not set them (for DescribeConfigs).
	MinInsyncReplicas     int
	UncleanLeaderElection bool
	// RackAwareReplicaSelector is replica.selector.class Kafka's
	// RackAwareReplicaSelector (KIP-392): a consumer that names its rack
	// (client.rack) is sent to a follower in it.
	RackAwareReplicaSelector bool
}

// errNotCoordinator is a coordinator's write to a partition this broker
// does not lead (any more).
var errNotCoordinator = seglog.NewKafkaError("broker: not the coordinator", 16) // NOT_COORDINATOR

// clusterGroupHooks make the group coordinator a cluster's: its
// __consumer_offsets is a cluster topic (offsets.topic.num.partitions,
// replicated offsets.topic.replication.factor times, or once per broker
// when there are fewer), whose partitions' leaders coordinate their
// groups; a write is answered once the partition's ISR has it.
func clusterGroupHooks(c *ClusterOptions, gopts group.Options, log *slog.Logger) *group.ClusterHooks {
	partitions := cmp.Or(gopts.Partitions, 50)
	segmentBytes := cmp.Or(gopts.SegmentBytes, 104857600)
	it := internalTopic{c: c, topic: group.Topic}
	return &group.ClusterHooks{Topics: clusterTopics{c.Member}, Hooks: group.Hooks{Tablet: it.tablet, Replicated: it.replicated, Partitions: it.partitions, Elected: it.elected,
		Leased: c.Member.Leased,
		Ensure: func() error {
			return ensureInternalTopic(c, group.Topic, partitions, c.OffsetsReplicationFactor, 0, map[string]string{
				"cleanup.policy": "compact", "segment.bytes": strconv.FormatInt(segmentBytes, 10),
				"retention.ms": "-1", "retention.bytes": "-1"})
		},
	}}
}

// internalTopic is a coordinator's internal topic in a cluster.
type internalTopic struct {
	c     *ClusterOptions
	topic string
}

// tablet returns partition p's tablet if this broker leads it, else
// errNotCoordinator.
func (it internalTopic) tablet(p int32) (*tablet.Tablet, error) {
	r, ok := it.c.Replicas.Get(checkpoint.TopicPartition{Topic: it.topic, Partition: p})
	if !ok || !r.Leads() {
		return nil, fmt.Errorf("%w: %s-%d", errNotCoordinator, it.topic, p)
	}
	return r.Tablet(), nil
}

// replicated returns once what was appended to t below end is on the
// partition's ISR (as acks=all), else errNotCoordinator.
func (it internalTopic) replicated(t *tablet.Tablet, end int64) error {
	code := kerr.NotLeaderForPartition.Code
	if p, ok := it.c.Replicas.Get(t.TopicPartition()); ok {
		code = awaitISR(context.Background(), p, end)
	}
	if code != 0 {
		return fmt.Errorf("%w: %s: %s", errNotCoordinator, t.TopicPartition(), kerr.ErrorForCode(code))
	}
	return nil
}

// awaitISR returns once what this broker, as leader, appended to p below
// end is on p's ISR (acks=all; 30 s at most), or Kafka's error.
func awaitISR(ctx context.Context, p *replica.Partition, end int64) int16 {
	p.Appended()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return p.AwaitAcks(ctx, end)
}

// elected reports whether the metadata names this broker partition p's
// leader (it may not have taken the leadership up yet), and its session
// is certainly alive (else it is NOT_COORDINATOR: clients look again).
func (it internalTopic) elected(p int32) bool {
	st, ok := it.c.Member.Snapshot().Partition(it.topic, p)
	return ok && st.Leader == it.c.Member.NodeID() && it.c.Member.Leased()
}

// partitions is the topic's partition count in the cluster (0 before it
// exists).
func (it internalTopic) partitions() int32 {
	if t, ok := it.c.Member.Snapshot().Topics[it.topic]; ok {
		return int32(len(t.Partitions))
	}
	return 0
}

// ensureInternalTopic creates an internal topic in the cluster if it
// does not exist, with rf replicas (default 3; fewer when there are fewer
// live brokers) and, if minISR is set, that min.insync.replicas (never
// above the replicas), and waits until this broker applied it.
func ensureInternalTopic(c *ClusterOptions, topic string, partitions int32, rf, minISR int16, configs map[string]string) error {
	s := c.Member.Snapshot()
	if _, ok := s.Topics[topic]; ok {
		return nil
	}
	live := 0
	for id := range s.Brokers {
		if s.Live(id) {
			live++
		}
	}
	replicas := max(min(int(cmp.Or(rf, 3)), live), 1)
	if minISR > 0 {
		configs["min.insync.replicas"] = strconv.Itoa(min(int(minISR), replicas))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := c.Member.CreateTopic(ctx, cluster.TopicSpec{Name: topic, Partitions: int(partitions),
		ReplicationFactor: replicas, Configs: configs})
	if err != nil && !errors.Is(err, cluster.ErrTopicExists) {
		return err
	}
	return c.Replicas.Await(ctx, c.Member.Snapshot().Revision)
}

// watchCoordinated has a coordinator follow the leadership of its
// internal topic's partitions: load runs (off the manager's goroutine:
// it replays the partition) for each partition this broker comes to lead,
// at its leader epoch, and unload for each it stops leading.
func watchCoordinated(r *replica.Manager, topic string, load func(p int32, t *tablet.Tablet, epoch int32) func() error,
	unload func(p int32), log *slog.Logger) {
	r.Watch(func(tp checkpoint.TopicPartition, t *tablet.Tablet, leading bool) {
		if tp.Topic != topic {
			return
		}
		if !leading {
			unload(tp.Partition)
			return
		}
		p, ok := r.Get(tp)
		if !ok {
			return
		}
		if run := load(tp.Partition, t, p.State().LeaderEpoch); run != nil {
			go func() {
				if err := run(); err != nil {
					log.Error("loading a coordinator's partition", "partition", tp.String(), "err", err)
				}
			}()
		}
	})
}

// clusterTopics are the cluster's topics, as the group coordinator asks
// for them.
type clusterTopics struct{ m *cluster.Member }

func (ct clusterTopics) TopicPartitions(name string) (checkpoint.TopicID, int32, bool) {
	t, ok := ct.m.Snapshot().Topics[name]
	if !ok {
		return checkpoint.TopicID{}, 0, false
	}
	return checkpoint.TopicID(t.ID), int32(len(t.Partitions)), true
}

func (ct clusterTopics) TopicsVersion() uint64 { return uint64(ct.m.Snapshot().Revision) }

func (ct clusterTopics) TopicNames() []string {
	return slices.Sorted(maps.Keys(ct.m.Snapshot().Topics))
}

func (ct clusterTopics) TopicByID(id checkpoint.TopicID) (string, bool) {
	t, ok := ct.m.Snapshot().TopicByID(cluster.TopicID(id))
	if !ok {
		return "", false
	}
	return t.Name, true
}
