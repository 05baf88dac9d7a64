package broker

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/cluster"
)

// A single node's catalog is a cluster of one: the node the only live
// broker and the controller, each topic its tablets, every partition led
// by the node at its tablet's epoch, the node alone its replicas and ISR;
// a placement it cannot hold (another broker, two replicas) is refused as
// a cluster refuses it.
func TestLocalCatalogIsAClusterOfOne(t *testing.T) {
	b, m, _ := testBroker(t, Options{})
	cat := b.cat
	mut := b.limits.mutations(header{}, false)
	code, msg := cat.createTopic(cluster.TopicSpec{Name: "a", Partitions: 3, ReplicationFactor: -1}, m.DefaultConfig(), false, mut, 0)
	require.Zero(t, code, "%v", msg)
	code, _ = cat.createTopic(cluster.TopicSpec{Name: "a", Partitions: 1, ReplicationFactor: 1}, m.DefaultConfig(), false, mut, 0)
	require.Equal(t, kerr.TopicAlreadyExists.Code, code)

	s := cat.snapshot()
	require.Equal(t, b.opts.NodeID, s.Controller)
	require.Equal(t, []int32{b.opts.NodeID}, s.BrokerIDs())
	require.True(t, s.Live(b.opts.NodeID))
	ts := s.Topics["a"]
	require.NotNil(t, ts)
	id, _ := m.TopicID("a")
	require.Equal(t, cluster.TopicID(id), ts.ID)
	byID, ok := s.TopicByID(ts.ID)
	require.True(t, ok)
	require.Equal(t, "a", byID.Name)
	require.Len(t, ts.Partitions, 3)
	for p, st := range ts.Partitions {
		leader, isr := s.Shown(st)
		require.Equal(t, b.opts.NodeID, leader, "partition %d", p)
		require.Equal(t, []int32{b.opts.NodeID}, isr)
		require.Equal(t, []int32{b.opts.NodeID}, ts.Replicas[p])
		one, ok := cat.partition("a", int32(p))
		require.True(t, ok)
		require.Equal(t, st.LeaderEpoch, one.LeaderEpoch)
	}
	_, ok = cat.partition("a", 3)
	require.False(t, ok)

	// What one broker cannot hold.
	code, _ = cat.createTopic(cluster.TopicSpec{Name: "b", Partitions: 1, ReplicationFactor: 2}, m.DefaultConfig(), false, mut, 0)
	require.Equal(t, kerr.InvalidReplicationFactor.Code, code)
	other := b.opts.NodeID + 1
	code, _ = cat.createTopic(cluster.TopicSpec{Name: "b", Assignment: [][]int32{{other}}}, m.DefaultConfig(), false, mut, 0)
	require.Equal(t, kerr.InvalidReplicaAssignment.Code, code)
	code, _ = cat.growTopic("a", 4, [][]int32{{other}}, false, mut)
	require.Equal(t, kerr.InvalidReplicaAssignment.Code, code)
	code, _ = cat.growTopic("a", 5, [][]int32{{b.opts.NodeID}}, false, mut)
	require.Equal(t, kerr.InvalidReplicaAssignment.Code, code, "two new partitions, one assignment")
	code, _ = cat.growTopic("a", 3, nil, false, mut)
	require.Equal(t, kerr.InvalidPartitions.Code, code)
	_, _, ok = m.TopicPartitions("b")
	require.False(t, ok, "nothing refused was made")

	code, msg = cat.growTopic("a", 4, [][]int32{{b.opts.NodeID}}, false, mut)
	require.Zero(t, code, "%v", msg)
	require.Len(t, cat.snapshot().Topics["a"].Partitions, 4)

	// Elections and reassignments: there is nothing to elect or move.
	out, err := cat.electLeaders(context.Background(), cluster.PreferredElection,
		[]cluster.TopicPartition{{Topic: "a", Partition: 0}, {Topic: "a", Partition: 9}})
	require.NoError(t, err)
	require.ErrorIs(t, out[cluster.TopicPartition{Topic: "a", Partition: 0}], cluster.ErrElectionNotNeeded)
	require.ErrorIs(t, out[cluster.TopicPartition{Topic: "a", Partition: 9}], cluster.ErrUnknownTopic)
	require.NoError(t, cat.reassign(context.Background(), "a", 0, []int32{b.opts.NodeID}, false))
	require.ErrorIs(t, cat.reassign(context.Background(), "a", 0, []int32{other}, false), cluster.ErrInvalidAssignment)
	require.ErrorIs(t, cat.reassign(context.Background(), "a", 0, nil, false), cluster.ErrNoReassignmentInProgress)

	code, _ = cat.deleteTopic("a", mut, 0)
	require.Zero(t, code)
	require.Empty(t, cat.snapshot().Topics)
	code, _ = cat.deleteTopic("a", mut, 0)
	require.Equal(t, kerr.UnknownTopicOrPartition.Code, code)
}

// A replica assignment names partitions 0 to n-1, in any order (Kafka's
// rule); a gap or a partition twice is INVALID_REPLICA_ASSIGNMENT.
func TestAssignmentOf(t *testing.T) {
	as := func(ps ...int32) []kmsg.CreateTopicsRequestTopicReplicaAssignment {
		var out []kmsg.CreateTopicsRequestTopicReplicaAssignment
		for _, p := range ps {
			out = append(out, kmsg.CreateTopicsRequestTopicReplicaAssignment{Partition: p, Replicas: []int32{p + 10}})
		}
		return out
	}
	got, msg := assignmentOf(as(1, 0, 2))
	require.Nil(t, msg)
	require.Equal(t, [][]int32{{10}, {11}, {12}}, got)
	for _, bad := range [][]int32{{0, 2}, {1}, {0, 0}, {-1, 0}} {
		_, msg := assignmentOf(as(bad...))
		require.NotNil(t, msg, "%v", bad)
	}
}
