package replica

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/replica/state"
)

// A partition's fetcher is Kafka's: abs(31 × the topic's Java hash code
// + partition) mod num.replica.fetchers ("topic".hashCode() is
// 110546223; 31 × it overflows to -868034383).
func TestFetcherIDIsKafkas(t *testing.T) {
	require.Equal(t, 0, fetcherID(checkpoint.TopicPartition{Topic: "topic", Partition: 1}, 3)) // 868034382 % 3
	require.Equal(t, 1, fetcherID(checkpoint.TopicPartition{Topic: "topic", Partition: 0}, 3)) // 868034383 % 3
	require.Equal(t, 2, fetcherID(checkpoint.TopicPartition{Topic: "t", Partition: 0}, 3))     // 3596 % 3
	require.Equal(t, 0, fetcherID(checkpoint.TopicPartition{Topic: "t", Partition: 0}, 1))
}

// A fetched answer changes the log only while the broker follows that
// leader at that epoch and does not lead the partition (docs/cluster.md
// §7; state.Partition.Follows): a broker that became leader appended the
// last answer of its former leader after recording its new epoch's
// start, and its epoch cache was off by the batches appended. The change
// to leader takes the same lock, so an append in flight finishes first.
func TestFetchedAnswerOnlyFromTheLeaderFollowed(t *testing.T) {
	meta := func(leader, epoch int32, mayLead bool) state.Meta {
		return state.Meta{Leader: leader, LeaderEpoch: epoch, PartitionEpoch: epoch, ISR: []int32{1, 2}, Replicas: []int32{1, 2, 3},
			MinISR: 1, MayLead: mayLead, Session: 1}
	}
	p := &Partition{changed: make(chan struct{}), s: state.New(1, time.Minute)}
	p.s.SetMeta(meta(2, 5, false), state.Local{Session: 1})
	f := &fetcher{leader: 2}
	fs := &fetchState{p: p, epoch: 5}
	unlock, ok := f.hold(fs)
	require.True(t, ok, "following 2 at epoch 5")
	require.False(t, p.appendMu.TryLock(), "the append lock is held while the answer is applied")
	unlock()

	for name, next := range map[string]state.Meta{
		"leading now":          meta(1, 6, true),
		"another leader":       meta(3, 6, false),
		"another leader epoch": meta(2, 6, false),
		"following no one":     meta(state.NoLeader, 6, false),
	} {
		p.s = state.New(1, time.Minute)
		p.s.SetMeta(meta(2, 5, false), state.Local{Session: 1})
		p.s.SetMeta(next, state.Local{Session: 1})
		_, ok := f.hold(fs)
		require.False(t, ok, name)
		require.True(t, p.appendMu.TryLock(), "%s: the lock is not kept", name)
		p.appendMu.Unlock()
	}
}
