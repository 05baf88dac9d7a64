package broker

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/cluster"
	"github.com/seglog/seglog/replica"
)

// A partition's replica as a request finds it: the replica manager's (a
// single node's or the cluster's), a leader's for what only a leader
// answers, and KIP-951's hints of the leader to a client that asked
// another broker.

// replicaFor returns this broker's replica of a partition a produce
// appends to (its leadership is the produce's CheckAppend's), creating
// its topic (with num.partitions partitions) when auto-creation allows;
// else NOT_LEADER_OR_FOLLOWER, or Kafka's answer for a partition that
// does not exist.
func (b *Broker) replicaFor(topic string, partition int32, ac *autoCreation) (*replica.Partition, int16) {
	_, n, ok := b.topics.TopicPartitions(topic)
	if !ok && ac != nil && !b.opts.NoAutoCreate && !internalTopics[topic] {
		if err := checkpoint.ValidateTopic(topic); err != nil {
			return nil, kerr.InvalidTopicException.Code
		}
		ac.create(topic)
		_, n, ok = b.topics.TopicPartitions(topic)
	}
	if !ok || partition < 0 || partition >= n {
		return nil, kerr.UnknownTopicOrPartition.Code
	}
	p, ok := b.replicas.Get(checkpoint.TopicPartition{Topic: topic, Partition: partition})
	if !ok {
		return nil, kerr.NotLeaderForPartition.Code
	}
	return p, 0
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

// leaderHints tells, for each partition of a response this broker does
// not lead, its current leader (KIP-951: Produce v10+, Fetch v16+, so that
// the client moves there without asking Metadata): each visits the
// response's partitions, calling hint with a partition's code, topic and
// number and where its current leader and epoch go. It returns the
// hinted leaders' endpoints on the client's listener.
func (b *Broker) leaderHints(h header, each func(hint func(code int16, topic string, p int32, leader, epoch *int32))) []kmsg.MetadataResponseBroker {
	leaders := map[int32]bool{}
	each(func(code int16, topic string, p int32, leader, epoch *int32) {
		if id, e, ok := b.leaderHint(code, topic, p); ok {
			*leader, *epoch = id, e
			leaders[id] = true
		}
	})
	if len(leaders) == 0 {
		return nil
	}
	return slices.DeleteFunc(b.cat.brokers(h, nil), func(mb kmsg.MetadataResponseBroker) bool {
		return !leaders[mb.NodeID]
	})
}
