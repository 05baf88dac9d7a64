package cluster

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The automatic rebalance moves a broker's partitions back only when
// more than the percentage of those it is preferred for are led by
// another, and only to a live ISR member.
func TestImbalanced(t *testing.T) {
	s := emptySnapshot()
	s.Brokers = map[int32]Broker{1: {ID: 1}, 2: {ID: 2}, 3: {ID: 3, ShuttingDown: true}}
	ts := &TopicState{Topic: Topic{Name: "t"}}
	for range 10 {
		ts.Replicas = append(ts.Replicas, []int32{1, 2})
		ts.Partitions = append(ts.Partitions, PartitionState{Leader: 1, ISR: []int32{1, 2}})
	}
	ts.Replicas = append(ts.Replicas, []int32{3, 2})
	ts.Partitions = append(ts.Partitions, PartitionState{Leader: 2, ISR: []int32{3, 2}})
	s.Topics["t"] = ts

	ts.Partitions[0].Leader = 2
	require.Empty(t, imbalanced(s, 10), "1 of 10 is 10%%: not above")
	ts.Partitions[1].Leader = 2
	require.Equal(t, []TopicPartition{{"t", 0}, {"t", 1}}, imbalanced(s, 10))
	require.Empty(t, imbalanced(s, 20))
	ts.Partitions[1].ISR = []int32{2}
	require.Empty(t, imbalanced(s, 10), "a preferred replica out of the ISR cannot lead")

	to, err := electPreferred(s, ts.Replicas[0], ts.Partitions[0])
	require.NoError(t, err)
	require.Equal(t, int32(1), to.Leader)
	require.Equal(t, ts.Partitions[0].LeaderEpoch+1, to.LeaderEpoch)
	_, err = electPreferred(s, ts.Replicas[10], ts.Partitions[10])
	require.ErrorIs(t, err, ErrPreferredLeaderNotAvailable, "broker 3 is shutting down")
	_, err = electUnclean(s, ts.Replicas[0], ts.Partitions[0])
	require.ErrorIs(t, err, ErrElectionNotNeeded)
}
