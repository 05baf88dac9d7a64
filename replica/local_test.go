package replica

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/tablet"
)

var quiet = slog.New(slog.DiscardHandler)

func localManager(t *testing.T) (*Manager, *tablet.Manager) {
	t.Helper()
	tabs, err := tablet.OpenManager(nil, filepath.Join(t.TempDir(), "data"), tablet.ManagerOptions{NodeID: 4, Tablet: tablet.Options{Logger: quiet}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = tabs.Close() })
	m, err := New(Options{Tablets: tabs, NodeID: 4, Logger: quiet})
	require.NoError(t, err)
	t.Cleanup(m.Close)
	return m, tabs
}

func appendRecords(t *testing.T, tb *tablet.Tablet, n int) int64 {
	t.Helper()
	res, err := tb.Append(batchOf(t, n), tablet.AppendOptions{})
	require.NoError(t, err)
	return res.LastOffset + 1
}

// batchOf is a batch of n records.
func batchOf(t *testing.T, n int) []byte {
	t.Helper()
	b := record.NewBuilder(record.None)
	for range n {
		require.NoError(t, b.Append(record.Record{Value: []byte("v")}))
	}
	batch, err := b.Build()
	require.NoError(t, err)
	return batch.Bytes()
}

// A single node is a cluster of one: each tablet is a partition it leads,
// made at its first use, alone in its ISR at the tablet's leader epoch;
// an append is committed at once (acks=all answered with no wait), a
// follower's fetch finds no such follower, DeleteRecords' low watermark
// is its own log start, and nothing runs in the background.
func TestSingleNodeIsAClusterOfOne(t *testing.T) {
	m, tabs := localManager(t)
	tp := checkpoint.TopicPartition{Topic: "one"}
	_, ok := m.Get(tp)
	require.False(t, ok, "no tablet, no partition")
	tb, err := tabs.Create(tp, nil)
	require.NoError(t, err)
	p, ok := m.Get(tp)
	require.True(t, ok)
	require.Same(t, tb, p.Tablet())
	epoch, leads := p.LeaderEpoch()
	require.True(t, leads)
	require.Zero(t, epoch)
	require.Equal(t, []int32{4}, p.State().ISR)
	require.Zero(t, p.CheckAppend(-1))
	require.Zero(t, p.CheckLeader(0))
	require.Equal(t, kerr.UnknownLeaderEpoch.Code, p.CheckLeader(1))

	end := appendRecords(t, tb, 3)
	p.Appended()
	require.Equal(t, end, tb.Offsets().HighWatermark)
	require.Zero(t, p.AwaitAcks(context.Background(), end), "committed at once")
	require.Zero(t, p.CheckHighWatermark())
	res, err := p.AppendAsLeader(batchOf(t, 2), tablet.AppendOptions{})
	require.NoError(t, err)
	require.Equal(t, end+2, tb.Offsets().HighWatermark, "an append as leader moves the high watermark itself")
	require.Zero(t, p.AwaitAcks(context.Background(), res.LastOffset+1))

	code, _ := p.FollowerFetch(5, 0, 0, 0)
	require.Equal(t, kerr.NotLeaderForPartition.Code, code, "a single node has no followers")
	start, err := tb.DeleteRecordsBefore(2)
	require.NoError(t, err)
	low, code := p.AwaitLowWatermark(context.Background(), start)
	require.Zero(t, code)
	require.Equal(t, int64(2), low)
	require.Zero(t, m.Fetchers())
	again, _ := m.Get(tp)
	require.Same(t, p, again, "one replica per tablet")
}

// A topic deleted and made again is a new replica of the new tablet;
// Forget drops one whose tablet went.
func TestSingleNodeTopicMadeAgain(t *testing.T) {
	m, tabs := localManager(t)
	tp := checkpoint.TopicPartition{Topic: "again"}
	_, err := tabs.Create(tp, nil)
	require.NoError(t, err)
	p, _ := m.Get(tp)
	require.NoError(t, tabs.Delete(tp))
	_, ok := m.Get(tp)
	require.False(t, ok, "its tablet went")
	require.False(t, p.Leads(), "the replica of a deleted tablet leads nothing")
	tb, err := tabs.Create(tp, nil)
	require.NoError(t, err)
	q, ok := m.Get(tp)
	require.True(t, ok)
	require.NotSame(t, p, q)
	require.Same(t, tb, q.Tablet())
	m.Forget(tp)
	r, _ := m.Get(tp)
	require.NotSame(t, q, r, "made again after Forget")
	require.False(t, q.Leads())
}

// A tablet of a former cluster member (its log at leader epoch 7) is led
// at that epoch: a client that read it from Metadata is served, an older
// epoch is fenced.
func TestSingleNodeLeadsAtTheTabletsEpoch(t *testing.T) {
	m, tabs := localManager(t)
	tp := checkpoint.TopicPartition{Topic: "former"}
	tb, err := tabs.Create(tp, nil)
	require.NoError(t, err)
	require.NoError(t, tb.SetLeaderEpoch(7))
	appendRecords(t, tb, 2)
	p, _ := m.Get(tp)
	epoch, leads := p.LeaderEpoch()
	require.True(t, leads)
	require.Equal(t, int32(7), epoch)
	require.Equal(t, int32(7), tb.LeaderEpoch())
	require.Zero(t, p.CheckLeader(7))
	require.Equal(t, kerr.FencedLeaderEpoch.Code, p.CheckLeader(6))
	require.Zero(t, p.CheckHighWatermark(), "the epoch started below the high watermark")
}
