package server

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/cluster"
	"github.com/seglog/seglog/internal/etcdtest"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/replica"
	"github.com/seglog/seglog/tablet"
)

// join registers node id in the cluster under the prefix /seglog/replica/.
func join(t *testing.T, e *etcdtest.Cluster, id int32) *cluster.Member {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, err := cluster.Join(ctx, cluster.Options{Endpoints: e.Endpoints(), Prefix: "/seglog/replica/", NodeID: id,
		Listeners:      []cluster.Endpoint{{Listener: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Host: "127.0.0.1", Port: 1}},
		SessionTimeout: 2 * time.Second, HeartbeatInterval: 200 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	return m
}

// (A test of the replica package, here beside the other cluster tests:
// one test binary with an etcd server linked in, not two.)
//
// A new leader whose high watermark is below the start of its epoch
// answers OFFSET_NOT_AVAILABLE (its high watermark may be below the one
// the old leader told consumers) until its ISR holds the epoch's start;
// then its high watermark is at least the old one and it serves.
func TestNewLeaderHighWatermarkIsKnownFirst(t *testing.T) {
	e := etcdtest.Start(t, 1)
	m1, m2, m3 := join(t, e, 1), join(t, e, 2), join(t, e, 3)
	ctx := context.Background()
	for _, m := range []*cluster.Member{m1, m2, m3} {
		require.NoError(t, m.Await(ctx, m3.Snapshot().Revision))
	}
	tabs, err := tablet.OpenManager(nil, filepath.Join(t.TempDir(), "data"), tablet.ManagerOptions{NodeID: 1,
		Tablet: tablet.Options{Logger: slog.New(slog.DiscardHandler)}})
	require.NoError(t, err)
	defer tabs.Close()
	// Broker 1 follows 2 (whose fetches go nowhere: it has no listener).
	_, err = m1.CreateTopic(ctx, cluster.TopicSpec{Name: "w", Assignment: [][]int32{{2, 1, 3}}})
	require.NoError(t, err)
	r, err := replica.New(replica.Options{Member: m1, Tablets: tabs, Logger: slog.New(slog.DiscardHandler), FetchBackoff: time.Hour})
	require.NoError(t, err)
	defer r.Close()
	require.NoError(t, r.Await(ctx, m1.Snapshot().Revision))
	p, ok := r.Get(checkpoint.TopicPartition{Topic: "w"})
	require.True(t, ok)
	require.Equal(t, kerr.NotLeaderForPartition.Code, p.CheckLeader(-1))
	// Three records it holds as follower, not yet committed as it knows.
	_, err = p.Tablet().AppendRecords([]record.Record{{Value: []byte("a")}, {Value: []byte("b")}, {Value: []byte("c")}}, record.None, tablet.AppendOptions{})
	require.NoError(t, err)
	require.Zero(t, p.Tablet().Offsets().HighWatermark)

	// 2 shuts down: 1 leads at epoch 1 with 3 in its ISR, which has not
	// fetched from it yet.
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	require.NoError(t, m2.Close(sctx))
	require.NoError(t, r.Await(ctx, m1.Snapshot().Revision))
	st := p.State()
	require.Equal(t, int32(1), st.Leader)
	require.Equal(t, []int32{1, 3}, st.ISR)
	require.Zero(t, p.CheckLeader(-1))
	require.Equal(t, kerr.OffsetNotAvailable.Code, p.CheckHighWatermark(), "a high watermark of 0 below the epoch's start, 3")

	// 3 fetches from the epoch's start: the high watermark is the
	// epoch's, and consumers are served.
	code, throttled := p.FollowerFetch(3, st.LeaderEpoch, 3, 0)
	require.Zero(t, code)
	require.False(t, throttled, "no throttle is set")
	require.Equal(t, int64(3), p.Tablet().Offsets().HighWatermark)
	require.Zero(t, p.CheckHighWatermark())
}
