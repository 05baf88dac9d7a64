package replica

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
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

// A node is a broker of these tests: its registration, data directory and
// replica manager behind its leader endpoint (leader_test.go), so that its
// followers fetch from it through their real fetchers.
type node struct {
	id   int32
	e    *etcdbin.Member
	end  *leaderEnd
	m    *cluster.Member
	tabs *tablet.Manager
	r    *Manager
	opts Options
}

// startNode registers broker id at its endpoint and starts its replica
// manager with opts (the fetches' backoff short: a refused partition is
// fetched again soon).
func startNode(t *testing.T, e *etcdbin.Member, id int32, opts Options) *node {
	t.Helper()
	n := &node{id: id, e: e, end: listen(t), opts: opts}
	tabs, err := tablet.OpenManager(nil, filepath.Join(t.TempDir(), "data"), tablet.ManagerOptions{NodeID: id,
		Tablet: tablet.Options{Logger: quiet}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = tabs.Close() })
	n.tabs = tabs
	n.m = joinAt(t, e, id, n.end.port())
	n.restart(t)
	return n
}

// restart starts the node's replica manager again (over its member, which
// may be new).
func (n *node) restart(t *testing.T) {
	t.Helper()
	opts := n.opts
	opts.Member, opts.Tablets, opts.Logger = n.m, n.tabs, quiet
	if opts.FetchBackoff == 0 {
		opts.FetchBackoff = 100 * time.Millisecond
	}
	r, err := New(opts)
	require.NoError(t, err)
	t.Cleanup(r.Close)
	n.r = r
	n.end.serve(r)
}

// rejoin registers the node again after its member closed (a broker
// coming back), and starts its replica manager over the new member.
func (n *node) rejoin(t *testing.T) {
	t.Helper()
	n.m = joinAt(t, n.e, n.id, n.end.port())
	n.restart(t)
}

// partition returns the node's replica of tp once its manager applied the
// cluster's metadata as it is now.
func (n *node) partition(t *testing.T, tp checkpoint.TopicPartition) *Partition {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, n.m.Await(ctx, n.m.Snapshot().Revision))
	require.NoError(t, n.r.Await(ctx, n.m.Snapshot().Revision))
	p, ok := n.r.Get(tp)
	require.True(t, ok, "broker %d has no replica of %s", n.id, tp)
	return p
}

// values reads a log's records, from its log start, as "offset:value@epoch".
func values(t *testing.T, tb *tablet.Tablet) []string {
	t.Helper()
	var out []string
	require.NoError(t, tb.Records(tb.Offsets().LogStartOffset, tablet.ReadLogEnd, func(b record.Batch, r *record.Record) bool {
		out = append(out, fmt.Sprintf("%d:%s@%d", r.Offset, r.Value, b.PartitionLeaderEpoch()))
		return true
	}))
	return out
}

// awaitLog waits (on the tablet's changes, within a minute) until ok
// holds of its offsets.
func awaitLog(t *testing.T, tb *tablet.Tablet, what string, ok func(tablet.Offsets) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		ch := tb.Changed()
		if ok(tb.Offsets()) {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("%s never came: %+v", what, tb.Offsets())
		}
	}
}

// bothInISR is the state of a partition of brokers 1 and 2 with both in its ISR.
func bothInISR(st cluster.PartitionState) bool {
	return slices.Equal(st.ISR, []int32{1, 2}) || slices.Equal(st.ISR, []int32{2, 1})
}

// produce appends values as one batch on the leader p and returns its
// end, with what AwaitAcks answers for it (acks=all).
func produce(t *testing.T, p *Partition, vals ...string) (int64, int16) {
	t.Helper()
	require.Zero(t, p.CheckAppend(-1))
	var recs []record.Record
	for _, v := range vals {
		recs = append(recs, record.Record{Value: []byte(v)})
	}
	res, err := p.Tablet().AppendRecords(recs, record.None, tablet.AppendOptions{})
	require.NoError(t, err)
	p.Appended()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return res.LastOffset + 1, p.AwaitAcks(ctx, res.LastOffset+1)
}

// A follower replicates through its fetcher: acks=all is answered once
// it holds the batch, its log is the leader's byte for byte (offsets and
// leader epochs kept), its high watermark and log start follow the
// leader's, and it is in the ISR.
func TestFollowerReplicates(t *testing.T) {
	e := etcd(t)
	n1, n2 := startNode(t, e, 1, Options{}), startNode(t, e, 2, Options{})
	ctx := context.Background()
	_, err := n1.m.CreateTopic(ctx, cluster.TopicSpec{Name: "r", Assignment: [][]int32{{1, 2}}, Configs: map[string]string{"min.insync.replicas": "2"}})
	require.NoError(t, err)
	tp := checkpoint.TopicPartition{Topic: "r"}
	leader := n1.partition(t, tp)
	awaitState(t, leader, func(st cluster.PartitionState) bool { return st.Leader == 1 })
	follower := n2.partition(t, tp)
	awaitState(t, leader, bothInISR) // (2 may join the ISR by its first fetch)

	for i := range 3 {
		end, code := produce(t, leader, fmt.Sprint("a", i), fmt.Sprint("b", i))
		require.Zero(t, code, "acks=all answered: the follower holds offsets below %d", end)
		require.GreaterOrEqual(t, follower.Tablet().Offsets().LogEndOffset, end)
	}
	awaitLog(t, follower.Tablet(), "the leader's high watermark", func(o tablet.Offsets) bool { return o.HighWatermark == 6 })
	require.Equal(t, values(t, leader.Tablet()), values(t, follower.Tablet()))
	require.Equal(t, leader.Tablet().LeaderEpochs(), follower.Tablet().LeaderEpochs(), "the epochs as the leader's")
	require.Equal(t, []int32{1, 2}, leader.State().ISR)

	_, err = leader.Tablet().DeleteRecordsBefore(4)
	require.NoError(t, err)
	awaitLog(t, follower.Tablet(), "the leader's log start", func(o tablet.Offsets) bool { return o.LogStartOffset == 4 })
	require.Equal(t, []string{"4:a2@0", "5:b2@0"}, values(t, follower.Tablet()))
}

// A follower whose log went past what the new leader has — records its
// own leadership appended that no one else fetched — truncates them on
// coming back (KIP-101: OffsetForLeaderEpoch, then TruncationTarget) and
// takes the new leader's records in their place; it rejoins the ISR.
func TestDivergentFollowerTruncates(t *testing.T) {
	e := etcd(t)
	n1, n2 := startNode(t, e, 1, Options{LagTime: time.Hour}), startNode(t, e, 2, Options{LagTime: time.Hour})
	ctx := context.Background()
	_, err := n1.m.CreateTopic(ctx, cluster.TopicSpec{Name: "d", Assignment: [][]int32{{1, 2}}})
	require.NoError(t, err)
	tp := checkpoint.TopicPartition{Topic: "d"}
	p1 := n1.partition(t, tp)
	awaitState(t, p1, func(st cluster.PartitionState) bool { return st.Leader == 1 })
	n2.partition(t, tp)
	awaitState(t, p1, bothInISR)
	_, code := produce(t, p1, "a", "b")
	require.Zero(t, code)

	// 2 stops fetching; 1 appends what only it will hold (acks=1).
	n2.r.Close()
	res, err := p1.Tablet().AppendRecords([]record.Record{{Value: []byte("x")}, {Value: []byte("y")}}, record.None, tablet.AppendOptions{})
	require.NoError(t, err)
	p1.Appended()
	require.Equal(t, int64(4), res.LastOffset+1)

	// 1 goes (a controlled shutdown: 2, in the ISR, is elected) and 2
	// leads, appending over offset 2 in its own epoch.
	n1.r.Close()
	require.NoError(t, n1.m.Close(ctx))
	n2.restart(t)
	p2 := n2.partition(t, tp)
	st := awaitState(t, p2, func(st cluster.PartitionState) bool { return st.Leader == 2 })
	require.Positive(t, st.LeaderEpoch)
	_, code = produce(t, p2, "c")
	require.Zero(t, code, "2 alone in the ISR")

	// 1 comes back as a follower of 2: x and y go, c comes.
	n1.rejoin(t)
	p1 = n1.partition(t, tp)
	awaitLog(t, p1.Tablet(), "the new leader's log", func(o tablet.Offsets) bool {
		return o.LogEndOffset == 3 && slices.Equal(values(t, p1.Tablet()), values(t, p2.Tablet()))
	})
	want := []string{"0:a@0", "1:b@0", fmt.Sprintf("2:c@%d", st.LeaderEpoch)}
	require.Equal(t, want, values(t, p1.Tablet()))
	require.Equal(t, p2.Tablet().LeaderEpochs(), p1.Tablet().LeaderEpochs(), "epoch 0 ends at 2 in both")
	awaitState(t, p2, bothInISR)
}

// A follower whose log ends below the leader's log start (the leader's
// DeleteRecords or retention ran while it was out of the ISR) is answered
// OFFSET_OUT_OF_RANGE and starts over at the leader's log start.
func TestFollowerStartsAtTheLeadersLogStart(t *testing.T) {
	e := etcd(t)
	clk := &clock{now: time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)}
	n1 := startNode(t, e, 1, Options{LagTime: 200 * time.Millisecond, Now: clk.Now})
	n2m := joinAt(t, e, 2, 1) // registered; its manager starts later
	ctx := context.Background()
	_, err := n1.m.CreateTopic(ctx, cluster.TopicSpec{Name: "s", Assignment: [][]int32{{1, 2}}})
	require.NoError(t, err)
	tp := checkpoint.TopicPartition{Topic: "s"}
	p1 := n1.partition(t, tp)
	awaitState(t, p1, func(st cluster.PartitionState) bool { return st.Leader == 1 })
	clk.add(time.Minute) // 2 never fetched: it leaves the ISR
	awaitState(t, p1, func(st cluster.PartitionState) bool { return slices.Equal(st.ISR, []int32{1}) })
	end, code := produce(t, p1, "a", "b", "c", "d", "e")
	require.Zero(t, code)
	_, err = p1.Tablet().DeleteRecordsBefore(3)
	require.NoError(t, err)

	require.NoError(t, n2m.Close(ctx))
	n2 := &node{id: 2, e: e, end: listen(t)}
	tabs, err := tablet.OpenManager(nil, filepath.Join(t.TempDir(), "data"), tablet.ManagerOptions{NodeID: 2, Tablet: tablet.Options{Logger: quiet}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = tabs.Close() })
	n2.tabs = tabs
	n2.rejoin(t)
	p2 := n2.partition(t, tp)
	awaitLog(t, p2.Tablet(), "the leader's records from its log start", func(o tablet.Offsets) bool {
		return o.LogEndOffset == end && o.LogStartOffset == 3
	})
	require.Equal(t, []string{"3:d@0", "4:e@0"}, values(t, p2.Tablet()))
}

// A follower's fetches keep a session (KIP-227): a full fetch opens it,
// each next one is its next epoch and names only the partitions whose
// fetch changed (none when nothing did); a leader that lost the session
// answers FETCH_SESSION_ID_NOT_FOUND and the next fetch is full again.
// A leader that keeps no session gets full fetches only.
func TestFetchSessions(t *testing.T) {
	e := etcd(t)
	n1, n2 := startNode(t, e, 1, Options{FetchWait: 50 * time.Millisecond}), startNode(t, e, 2, Options{FetchWait: 50 * time.Millisecond})
	ctx := context.Background()
	_, err := n1.m.CreateTopic(ctx, cluster.TopicSpec{Name: "f", Assignment: [][]int32{{1, 2}, {1, 2}, {1, 2}},
		Configs: map[string]string{"min.insync.replicas": "2"}})
	require.NoError(t, err)
	var leaders []*Partition
	for i := range int32(3) {
		tp := checkpoint.TopicPartition{Topic: "f", Partition: i}
		p := n1.partition(t, tp)
		awaitState(t, p, func(st cluster.PartitionState) bool { return st.Leader == 1 })
		leaders = append(leaders, p)
		n2.partition(t, tp)
	}
	for _, p := range leaders {
		awaitState(t, p, bothInISR)
	}
	// Once a record of each is acknowledged, every partition is followed:
	// from then on a full fetch names all three (one before may have named
	// those followed by then).
	for i, p := range leaders {
		_, code := produce(t, p, "zero")
		require.Zero(t, code, "partition %d; the leader's fetches: %+v; the follower's state: %+v", i, n1.end.seen(), p.Followers())
	}
	before := len(n1.end.seen())
	_, code := produce(t, leaders[1], "one")
	require.Zero(t, code)
	_, code = produce(t, leaders[1], "two")
	require.Zero(t, code)

	n1.end.dropSessions()
	_, code = produce(t, leaders[2], "three")
	require.Zero(t, code, "fetched again after the session was lost")

	seen := n1.end.seen()
	require.Zero(t, seen[0].sessionEpoch, "the first fetch is full")
	id, next, fulls, changed := int32(0), int32(0), 0, 0
	for i, f := range seen {
		if f.sessionEpoch == 0 {
			require.Zero(t, f.sessionID, "fetch %d", i)
			if i >= before {
				require.Equal(t, 3, f.parts, "a full fetch names every partition (fetch %d)", i)
				fulls++
			}
			id, next = id+1, 1 // (the endpoint numbers its sessions from 1)
			continue
		}
		require.Equal(t, id, f.sessionID, "fetch %d", i)
		require.Equal(t, next, f.sessionEpoch, "fetch %d: the session's next epoch", i)
		next++
		if i >= before {
			require.LessOrEqual(t, f.parts, 1, "fetch %d: only partition 1 or 2 ever changes at a time", i)
			if f.parts == 1 {
				changed++
			}
		}
	}
	require.Equal(t, 1, fulls, "a full fetch after the session was lost")
	require.GreaterOrEqual(t, changed, 3, "incremental fetches named the partitions that changed")

	// A leader that keeps no session.
	n1.end.mu.Lock()
	n1.end.noSessions = true
	n1.end.mu.Unlock()
	n1.end.dropSessions()
	before = len(n1.end.seen())
	_, code = produce(t, leaders[0], "four")
	require.Zero(t, code)
	_, code = produce(t, leaders[0], "five")
	require.Zero(t, code)
	for i, f := range n1.end.seen()[before+1:] { // (the first may be the lost session's last)
		require.Zero(t, f.sessionEpoch, "fetch %d: full", i)
		require.Equal(t, 3, f.parts, "fetch %d: full", i)
	}
}

// A partition its leader refuses backs off alone: the others of the same
// fetcher go on (acks=all of theirs answered meanwhile), and it is
// fetched again after its backoff, catching up.
func TestRefusedPartitionBacksOffAlone(t *testing.T) {
	e := etcd(t)
	n1, n2 := startNode(t, e, 1, Options{LagTime: time.Hour}), startNode(t, e, 2, Options{LagTime: time.Hour})
	ctx := context.Background()
	_, err := n1.m.CreateTopic(ctx, cluster.TopicSpec{Name: "b", Assignment: [][]int32{{1, 2}, {1, 2}},
		Configs: map[string]string{"min.insync.replicas": "2"}})
	require.NoError(t, err)
	tp0, tp1 := checkpoint.TopicPartition{Topic: "b"}, checkpoint.TopicPartition{Topic: "b", Partition: 1}
	l0, l1 := n1.partition(t, tp0), n1.partition(t, tp1)
	for _, p := range []*Partition{l0, l1} {
		awaitState(t, p, func(st cluster.PartitionState) bool { return st.Leader == 1 })
	}
	f0 := n2.partition(t, tp0)
	n2.partition(t, tp1)
	for _, p := range []*Partition{l0, l1} {
		awaitState(t, p, bothInISR)
	}

	n1.end.refuseNext(tp0, kerr.UnknownLeaderEpoch.Code, 4)
	res, err := l0.Tablet().AppendRecords([]record.Record{{Value: []byte("held")}}, record.None, tablet.AppendOptions{})
	require.NoError(t, err)
	l0.Appended()
	_, code := produce(t, l1, "goes")
	require.Zero(t, code, "the other partition replicates meanwhile")
	awaitLog(t, f0.Tablet(), "the refused partition, caught up after its backoff", func(o tablet.Offsets) bool {
		return o.LogEndOffset == res.LastOffset+1
	})
	n1.end.mu.Lock()
	left := n1.end.refuse[tp0].times
	n1.end.mu.Unlock()
	require.Zero(t, left, "every refusal was fetched through")
}
