package replica

import (
	"context"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/cluster"
	"github.com/seglog/seglog/internal/etcdbin"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/tablet"
)

// etcd runs a real etcd for the test (Debian's etcd-server, which make
// test installs: its server code is not linked into this test).
func etcd(t *testing.T) *etcdbin.Member {
	bin, ok := etcdbin.Binary()
	if !ok {
		t.Skipf("no etcd binary at %s (Debian's etcd-server; make test installs it)", bin)
	}
	return etcdbin.Start(t, bin)
}

// join registers node id in the cluster under the prefix /seglog/replica/
// (at a port no one listens on).
func join(t *testing.T, e *etcdbin.Member, id int32) *cluster.Member { return joinAt(t, e, id, 1) }

// joinAt registers node id with its listener at port.
func joinAt(t *testing.T, e *etcdbin.Member, id, port int32) *cluster.Member {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, err := cluster.Join(ctx, cluster.Options{Endpoints: e.Endpoints(), Prefix: "/seglog/replica/", NodeID: id,
		Listeners:      []cluster.Endpoint{{Listener: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Host: "127.0.0.1", Port: port}},
		SessionTimeout: 10 * time.Second, HeartbeatInterval: 500 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close(context.Background()) })
	return m
}

// A new leader whose high watermark is below the start of its epoch
// answers OFFSET_NOT_AVAILABLE (its high watermark may be below the one
// the old leader told consumers) until its ISR holds the epoch's start;
// then its high watermark is at least the old one and it serves.
func TestNewLeaderHighWatermarkIsKnownFirst(t *testing.T) {
	e := etcd(t)
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
	r, err := New(Options{Member: m1, Tablets: tabs, Logger: slog.New(slog.DiscardHandler), FetchBackoff: time.Hour})
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

// clock is a test's clock, moved by hand.
type clock struct {
	mu  sync.Mutex // guards now
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// awaitState waits (on the partition's changes, within a minute) until
// its state satisfies ok.
func awaitState(t *testing.T, p *Partition, ok func(cluster.PartitionState) bool) cluster.PartitionState {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		ch := p.Changed()
		if st := p.State(); ok(st) {
			return st
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("the partition's state never came: %+v", p.State())
		}
	}
}

// leading starts broker 1's replica manager over a cluster of three
// registered brokers (2 and 3 have none: the test fetches as them) with
// topic "t" led by 1, replicas 1, 2, 3; it returns 1's replica.
func leading(t *testing.T, opts Options) (*Partition, *cluster.Member) {
	t.Helper()
	e := etcd(t)
	ms := []*cluster.Member{join(t, e, 1), join(t, e, 2), join(t, e, 3)}
	ctx := context.Background()
	for _, m := range ms {
		require.NoError(t, m.Await(ctx, ms[2].Snapshot().Revision))
	}
	tabs, err := tablet.OpenManager(nil, filepath.Join(t.TempDir(), "data"), tablet.ManagerOptions{NodeID: 1,
		Tablet: tablet.Options{Logger: slog.New(slog.DiscardHandler)}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = tabs.Close() })
	_, err = ms[0].CreateTopic(ctx, cluster.TopicSpec{Name: "t", Assignment: [][]int32{{1, 2, 3}}, Configs: map[string]string{"min.insync.replicas": "2"}})
	require.NoError(t, err)
	opts.Member, opts.Tablets, opts.Logger, opts.FetchBackoff = ms[0], tabs, slog.New(slog.DiscardHandler), time.Hour
	r, err := New(opts)
	require.NoError(t, err)
	t.Cleanup(r.Close)
	require.NoError(t, r.Await(ctx, ms[0].Snapshot().Revision))
	p, ok := r.Get(checkpoint.TopicPartition{Topic: "t"})
	require.True(t, ok)
	awaitState(t, p, func(st cluster.PartitionState) bool { return st.Leader == 1 })
	require.True(t, p.Leads())
	return p, ms[0]
}

// A leader writes its ISR changes to etcd: a follower not caught up for
// replica.lag.time.max.ms leaves (by the leader's periodic check), one
// that fetches the high watermark in the leader's epoch joins; and the
// leader epoch is recorded at the log end before anything is appended.
func TestLeaderWritesTheISR(t *testing.T) {
	clk := &clock{now: time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)}
	p, m1 := leading(t, Options{LagTime: 200 * time.Millisecond, Now: clk.Now})
	st := p.State()
	require.Equal(t, []int32{1, 2, 3}, st.ISR)
	epochs := p.Tablet().LeaderEpochs()
	require.Equal(t, st.LeaderEpoch, epochs[len(epochs)-1].Epoch, "the epoch recorded at its start")

	code, _ := p.FollowerFetch(2, st.LeaderEpoch, 0, 0)
	require.Zero(t, code)
	clk.add(time.Minute) // 3 never fetched; 2 was caught up a minute ago too, at its fetch
	code, _ = p.FollowerFetch(2, st.LeaderEpoch, 0, 0)
	require.Zero(t, code, "2 caught up now")
	st = awaitState(t, p, func(st cluster.PartitionState) bool { return len(st.ISR) == 2 })
	require.Equal(t, []int32{1, 2}, st.ISR, "3 left by the leader's check")
	etcdState, _ := m1.Snapshot().Partition("t", 0)
	require.Equal(t, st.ISR, etcdState.ISR, "written to etcd")

	// 3 fetches at the high watermark, as a follower does, again at each
	// change of the partition (its metadata may show the shrink before
	// the leader's write answers, and one change goes at a time).
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for !slices.Contains(p.State().ISR, 3) {
		ch := p.Changed()
		code, _ = p.FollowerFetch(3, st.LeaderEpoch, 0, 0)
		require.Zero(t, code)
		if slices.Contains(p.State().ISR, 3) {
			break
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("3 never joined: %+v", p.State())
		}
	}
	st = awaitState(t, p, func(st cluster.PartitionState) bool { return len(st.ISR) == 3 })
	require.Equal(t, []int32{1, 2, 3}, st.ISR, "3 back at the high watermark")
}

// acks=all in a cluster: refused below min.insync.replicas, answered once
// the followers in the ISR hold the batch (their fetches move the high
// watermark), NOT_LEADER_OR_FOLLOWER once another broker is elected, and
// REQUEST_TIMED_OUT when the request's time runs out.
func TestAcksInACluster(t *testing.T) {
	p, m1 := leading(t, Options{LagTime: time.Hour})
	st := p.State()
	require.Zero(t, p.CheckAppend(-1))
	res, err := p.Tablet().AppendRecords([]record.Record{{Value: []byte("a")}, {Value: []byte("b")}}, record.None, tablet.AppendOptions{})
	require.NoError(t, err)
	end := res.LastOffset + 1
	p.Appended()
	acked := make(chan int16, 1)
	go func() { acked <- p.AwaitAcks(context.Background(), end) }()
	for _, f := range []int32{2, 3} {
		code, _ := p.FollowerFetch(f, st.LeaderEpoch, 0, 0)
		require.Zero(t, code)
	}
	for _, f := range []int32{2, 3} {
		code, _ := p.FollowerFetch(f, st.LeaderEpoch, end, 0)
		require.Zero(t, code)
	}
	require.Zero(t, <-acked, "the ISR holds it")
	require.Equal(t, end, p.Tablet().Offsets().HighWatermark)

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	res, err = p.Tablet().AppendRecords([]record.Record{{Value: []byte("c")}}, record.None, tablet.AppendOptions{})
	require.NoError(t, err)
	p.Appended()
	require.Equal(t, kerr.RequestTimedOut.Code, p.AwaitAcks(ctx, res.LastOffset+1), "no follower fetched it")

	go func() { acked <- p.AwaitAcks(context.Background(), res.LastOffset+1) }()
	require.NoError(t, m1.Close(context.Background())) // (controlled shutdown: 2 leads)
	require.Equal(t, kerr.NotLeaderForPartition.Code, <-acked, "deposed")
	require.False(t, p.Leads())
}
