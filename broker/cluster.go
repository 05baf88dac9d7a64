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
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/cluster"
	"github.com/seglog/seglog/config"
	"github.com/seglog/seglog/coordinator/group"
	"github.com/seglog/seglog/replica"
	"github.com/seglog/seglog/tablet"
)

// A broker in a cluster (Options.Cluster set, docs/cluster.md) answers
// from the cluster's metadata: Metadata lists every live broker and each
// partition's leader, epoch, replicas and ISR; topics are created and
// deleted in etcd; produce and fetch are served by a partition's leader
// only (a follower's fetch is replication), and acks=all waits for the
// ISR.

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

// fetchSource is where a fetch reads a partition.
type fetchSource struct {
	t    *tablet.Tablet
	code int16 // Kafka's error instead (no tablet)
	// throttled: a follower's fetch whose bytes the leader's replication
	// throttle counts; held: the throttle holds them back now.
	throttled, held bool
	// preferred is KIP-392's replica the consumer should read from
	// instead (-1: this broker).
	preferred int32
	// follower: a follower's fetch.
	follower bool
}

// fetchTablet finds where a fetch reads a partition: on a leader, for a
// consumer at its current leader epoch (or, KIP-392, the follower in the
// consumer's rack it should read from), or for a follower (whose fetch
// offset is its progress, under the replication throttle); on a
// follower, for a consumer's Fetch v11+ (KIP-392: up to the follower's
// high watermark).
func (b *Broker) fetchTablet(r *kmsg.FetchRequest, topic string, rp kmsg.FetchRequestTopicPartition) fetchSource {
	p, code := b.replicaOf(topic, rp.Partition)
	if p == nil {
		return fetchSource{code: code, preferred: -1}
	}
	if id := fetchReplica(r); id >= 0 {
		code, throttled := p.FollowerFetch(id, rp.CurrentLeaderEpoch, rp.FetchOffset, rp.LogStartOffset)
		if code != 0 {
			return fetchSource{code: code, preferred: -1}
		}
		held := throttled && b.replicas.LeaderThrottleHeld()
		return fetchSource{t: p.Tablet(), throttled: throttled, held: held, preferred: -1, follower: true}
	}
	code = p.CheckLeader(rp.CurrentLeaderEpoch)
	if code == kerr.NotLeaderForPartition.Code && r.GetVersion() >= 11 {
		if code := p.CheckFollowerRead(rp.CurrentLeaderEpoch); code != 0 {
			return fetchSource{code: code, preferred: -1}
		}
		return fetchSource{t: p.Tablet(), preferred: -1}
	}
	if code := cmp.Or(code, p.CheckHighWatermark()); code != 0 {
		return fetchSource{code: code, preferred: -1}
	}
	src := fetchSource{t: p.Tablet(), preferred: -1}
	if b.rackAware && r.GetVersion() >= 11 {
		snap := b.cat.snapshot()
		src.preferred = p.PreferredReadReplica(r.Rack, rp.FetchOffset, func(id int32) string { return snap.Brokers[id].Rack })
	}
	return src
}

// fetchReplica is the replica id of a follower's fetch (-1: a consumer's).
func fetchReplica(r *kmsg.FetchRequest) int32 {
	if r.GetVersion() >= 15 {
		return r.ReplicaState.ID
	}
	return r.ReplicaID
}

// awaitAcks completes a produce (a single node's at once): each partition appended
// tells its leadership (the high watermark may move), then acks=all waits
// for the high watermark to cover what was appended, within the request's
// timeout; acks=1 is answered only by a broker still certain it leads.
func (b *Broker) awaitAcks(ctx context.Context, acks int16, timeoutMs int32, jobs []appendJob) {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(max(timeoutMs, 0))*time.Millisecond)
	defer cancel()
	for _, jb := range jobs {
		if jb.sp.ErrorCode != 0 || *jb.end < 0 {
			continue
		}
		p := jb.p
		p.Appended()
		switch {
		case acks == 0:
		case acks == -1:
			jb.sp.ErrorCode = p.AwaitAcks(ctx, *jb.end)
		case !p.Leads():
			jb.sp.ErrorCode = kerr.NotLeaderForPartition.Code
		}
	}
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

// leaderHint is KIP-951's current leader of a partition, for a client
// told NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH: it moves there
// without asking Metadata. ok is false when there is none to tell.
func (b *Broker) leaderHint(code int16, topic string, partition int32) (leader, epoch int32, ok bool) {
	if code != kerr.NotLeaderForPartition.Code && code != kerr.FencedLeaderEpoch.Code {
		return -1, -1, false
	}
	st, ok := b.cat.partition(topic, partition)
	if !ok || st.Leader == cluster.NoLeader || st.Leader == b.opts.NodeID {
		return -1, -1, false // (none, or this broker, fenced: its snapshot may be stale)
	}
	return st.Leader, st.LeaderEpoch, true
}

// hintedBrokers are the endpoints (KIP-951's NodeEndpoints) of the
// leaders hinted in a response, on the client's listener.
func (b *Broker) hintedBrokers(h header, leaders map[int32]bool) []kmsg.MetadataResponseBroker {
	if len(leaders) == 0 {
		return nil
	}
	return slices.DeleteFunc(b.cat.brokers(h, nil), func(mb kmsg.MetadataResponseBroker) bool {
		return !leaders[mb.NodeID]
	})
}

// hintProduceLeaders tells, for each partition this broker does not
// lead, its current leader and that leader's endpoint (KIP-951, Produce
// v10+).
func (b *Broker) hintProduceLeaders(h header, resp *kmsg.ProduceResponse) {
	leaders := map[int32]bool{}
	for i := range resp.Topics {
		rt := &resp.Topics[i]
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			if id, epoch, ok := b.leaderHint(rp.ErrorCode, rt.Topic, rp.Partition); ok {
				rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = id, epoch
				leaders[id] = true
			}
		}
	}
	for _, mb := range b.hintedBrokers(h, leaders) {
		resp.Brokers = append(resp.Brokers, kmsg.ProduceResponseBroker{NodeID: mb.NodeID, Host: mb.Host, Port: mb.Port, Rack: mb.Rack})
	}
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

// leaderReplica is the replica a request for a partition's leader reads
// or changes (ListOffsets, OffsetForLeaderEpoch, DeleteRecords, a
// transaction marker): only this broker's as the partition's leader at
// currentEpoch (-1: any), and, when hwKnown, only once its high watermark
// is known to be its epoch's (OFFSET_NOT_AVAILABLE before, as Kafka's new
// leader answers ListOffsets).
func (b *Broker) leaderReplica(topic string, partition, currentEpoch int32, hwKnown bool) (*replica.Partition, int16) {
	p, code := b.replicaOf(topic, partition)
	if p == nil {
		return nil, code
	}
	code = p.CheckLeader(currentEpoch)
	if code == 0 && hwKnown {
		code = p.CheckHighWatermark()
	}
	if code != 0 {
		return nil, code
	}
	return p, 0
}

// replicaOf finds this broker's replica of a partition (a single node's
// is its tablet's), else Kafka's code for it — a partition of the cluster
// with no replica here is NOT_LEADER_OR_FOLLOWER.
func (b *Broker) replicaOf(topic string, partition int32) (p *replica.Partition, code int16) {
	tp := checkpoint.TopicPartition{Topic: topic, Partition: partition}
	if p, ok := b.replicas.Get(tp); ok {
		return p, 0
	}
	if _, n, ok := b.topics.TopicPartitions(topic); ok && partition >= 0 && partition < n {
		return nil, kerr.NotLeaderForPartition.Code
	}
	return nil, kerr.UnknownTopicOrPartition.Code
}
