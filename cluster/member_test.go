package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/seglog/seglog/internal/docstore"
	"github.com/seglog/seglog/internal/etcdtest"
)

// testCluster is members over one in-process etcd.
type testCluster struct {
	t       *testing.T
	etcd    *etcdtest.Cluster
	prefix  string
	members map[int32]*Member
}

func newTestCluster(t *testing.T, etcdMembers int, racks map[int32]string) *testCluster {
	c := &testCluster{t: t, etcd: etcdtest.Start(t, etcdMembers), prefix: "/seglog/" + t.Name() + "/", members: map[int32]*Member{}}
	for _, id := range slices.Sorted(maps.Keys(racks)) {
		c.join(id, racks[id])
	}
	t.Cleanup(func() {
		for _, m := range c.members {
			m.halt()
		}
	})
	for _, m := range c.members {
		until(t, m, "sees every broker live", func(s *Snapshot) bool { return len(s.Brokers) == len(racks) && allLive(s) })
	}
	return c
}

func (c *testCluster) join(id int32, rack string) *Member {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := Join(ctx, Options{Endpoints: c.etcd.Endpoints(), Prefix: c.prefix, NodeID: id, Rack: rack,
		Listeners:      []Endpoint{{Listener: "PLAINTEXT", SecurityProtocol: "PLAINTEXT", Host: "127.0.0.1", Port: 9000 + id}},
		SessionTimeout: 2 * time.Second, HeartbeatInterval: 200 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(c.t, err)
	c.members[id] = m
	return m
}

// until waits for cond on m's snapshot (failing after a minute).
func until(t *testing.T, m *Member, what string, cond func(*Snapshot) bool) *Snapshot {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := m.Until(ctx, cond)
	require.NoError(t, err, "node %d: never %s", m.NodeID(), what)
	return s
}

func (c *testCluster) controller() *Member {
	for _, m := range c.members {
		if m.IsController() {
			return m
		}
	}
	return nil
}

func TestMembersSeeOneCluster(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 1, map[int32]string{1: "", 2: "", 3: ""})
	var ctrl int32 = -1
	for _, m := range c.members {
		s := until(t, m, "sees three brokers and a controller", func(s *Snapshot) bool { return len(s.Brokers) == 3 && s.Controller >= 0 })
		require.Equal(t, []int32{1, 2, 3}, s.BrokerIDs())
		require.Equal(t, int32(9002), s.Brokers[2].Endpoints[0].Port)
		if ctrl < 0 {
			ctrl = s.Controller
		}
		require.Equal(t, ctrl, s.Controller, "every member names the same controller")
	}
	until(t, c.members[ctrl], "knows it is the controller", func(*Snapshot) bool { return c.members[ctrl].IsController() })
	for id, m := range c.members {
		require.Equal(t, id == ctrl, m.IsController())
		require.True(t, m.Leased())
	}
}

func TestCreateAndDeleteTopics(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 1, map[int32]string{1: "", 2: "", 3: ""})
	ctx := context.Background()
	ts, err := c.members[2].CreateTopic(ctx, TopicSpec{Name: "t", Partitions: 6, ReplicationFactor: 3, Configs: map[string]string{"retention.ms": "1000"}})
	require.NoError(t, err)
	require.Len(t, ts.Partitions, 6)
	leaders := map[int32]int{}
	for p, st := range ts.Partitions {
		require.Equal(t, ts.Replicas[p][0], st.Leader, "the preferred replica leads")
		require.Equal(t, ts.Replicas[p], st.ISR)
		require.Zero(t, st.LeaderEpoch)
		leaders[st.Leader]++
	}
	require.Equal(t, map[int32]int{1: 2, 2: 2, 3: 2}, leaders)
	for _, m := range c.members {
		s := until(t, m, "sees the topic", func(s *Snapshot) bool { _, ok := s.Topics["t"]; return ok })
		got, ok := s.TopicByID(ts.ID)
		require.True(t, ok)
		require.Equal(t, ts.Replicas, got.Replicas)
		require.Equal(t, "1000", got.Configs["retention.ms"])
	}
	_, err = c.members[1].CreateTopic(ctx, TopicSpec{Name: "t", Partitions: 1, ReplicationFactor: 1})
	require.ErrorIs(t, err, ErrTopicExists)
	_, err = c.members[1].CreateTopic(ctx, TopicSpec{Name: "u", Partitions: 1, ReplicationFactor: 4})
	require.ErrorIs(t, err, ErrPlacement)
	_, err = c.members[1].CreateTopic(ctx, TopicSpec{Name: "u", Assignment: [][]int32{{1, 7}}})
	require.ErrorIs(t, err, ErrInvalidAssignment)
	u, err := c.members[1].CreateTopic(ctx, TopicSpec{Name: "u", Assignment: [][]int32{{3, 1}, {2, 3}}})
	require.NoError(t, err)
	require.Equal(t, int32(3), u.Partitions[0].Leader)

	grown, err := c.members[3].CreatePartitions(ctx, "t", 8, nil)
	require.NoError(t, err)
	require.Len(t, grown.Partitions, 8)
	require.Equal(t, ts.Replicas, grown.Replicas[:6], "the old partitions stay where they are")
	require.Len(t, grown.Replicas[7], 3)
	require.Equal(t, grown.Replicas[7][0], grown.Partitions[7].Leader)
	_, err = c.members[3].CreatePartitions(ctx, "t", 8, nil)
	require.ErrorIs(t, err, ErrInvalidAssignment)

	require.ErrorIs(t, c.members[1].DeleteTopic(ctx, "t", NewTopicID()), ErrUnknownTopic, "another id")
	require.NoError(t, c.members[1].DeleteTopic(ctx, "t", ts.ID))
	for _, m := range c.members {
		until(t, m, "sees the topic gone", func(s *Snapshot) bool { _, ok := s.Topics["t"]; return !ok })
	}
	again, err := c.members[1].CreateTopic(ctx, TopicSpec{Name: "t", Partitions: 1, ReplicationFactor: 1})
	require.NoError(t, err)
	require.NotEqual(t, ts.ID, again.ID, "a recreated topic has a new id")
	require.Zero(t, again.Partitions[0].PartitionEpoch)
}

// A broker that stops renewing its lease (a crash) loses its
// leaderships once the lease expires: the controller elects the next
// replica of the ISR at the next leader epoch and takes the dead broker
// out of every ISR; a partition whose whole ISR is dead has no leader,
// and gets its last ISR member back when it returns (its only replica,
// kept eligible however it shut down).
func TestFailoverOnLeaseExpiry(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 1, map[int32]string{1: "", 2: "", 3: ""})
	ctx := context.Background()
	ts, err := c.members[1].CreateTopic(ctx, TopicSpec{Name: "t", Assignment: [][]int32{{2, 1, 3}, {1, 2, 3}}})
	require.NoError(t, err)
	_, err = c.members[1].CreateTopic(ctx, TopicSpec{Name: "one", Assignment: [][]int32{{2}}})
	require.NoError(t, err)
	c.members[2].halt()
	delete(c.members, 2)
	require.False(t, c.members[1].Snapshot().Brokers[2].ShuttingDown)
	s := until(t, c.members[3], "sees partition 0 led again", func(s *Snapshot) bool {
		p, ok := s.Partition("t", 0) // (member 3 may not have seen the topic yet)
		return ok && p.Leader != 2
	})
	p0, _ := s.Partition("t", 0)
	require.Equal(t, int32(1), p0.Leader, "the next replica in the ISR")
	require.Equal(t, int32(1), p0.LeaderEpoch)
	require.Equal(t, []int32{1, 3}, p0.ISR)
	require.Greater(t, p0.PartitionEpoch, ts.Partitions[0].PartitionEpoch)
	s = until(t, c.members[3], "sees 2 out of partition 1's ISR", func(s *Snapshot) bool {
		p, ok := s.Partition("t", 1)
		return ok && !p.InISR(2)
	})
	p1, _ := s.Partition("t", 1)
	require.Equal(t, int32(1), p1.Leader)
	require.Zero(t, p1.LeaderEpoch, "a follower leaving the ISR keeps the leader epoch")
	s = until(t, c.members[3], "sees partition one-0 offline", func(s *Snapshot) bool {
		p, ok := s.Partition("one", 0)
		return ok && p.Leader == NoLeader
	})
	p2, _ := s.Partition("one", 0)
	require.Empty(t, p2.ISR, "the ISR may be empty (KIP-966)")
	require.Equal(t, []int32{2}, p2.ELR, "its last member is an eligible leader replica")
	require.Equal(t, []int32{2}, p2.LastKnownELR, "and the last known leader")

	c.join(2, "")
	until(t, c.members[3], "sees partition one-0 led by its returning ISR member", func(s *Snapshot) bool {
		p, _ := s.Partition("one", 0)
		return p.Leader == 2 && p.LeaderEpoch == 2
	})
}

// Close is a controlled shutdown: the broker's leaderships move before
// its registration goes.
func TestControlledShutdownMovesLeaders(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 1, map[int32]string{1: "", 2: "", 3: ""})
	ctx := context.Background()
	_, err := c.members[1].CreateTopic(ctx, TopicSpec{Name: "t", Partitions: 6, ReplicationFactor: 3})
	require.NoError(t, err)
	until(t, c.members[1], "has a controller", func(s *Snapshot) bool { return s.Controller >= 0 })
	// Shut down a broker that is not the controller, then the controller.
	order := []int32{}
	for _, id := range []int32{1, 2, 3} {
		if !c.members[id].IsController() {
			order = append(order, id)
		}
	}
	victim := order[0]
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	require.NoError(t, c.members[victim].Close(sctx))
	delete(c.members, victim)
	// (Another member's view catches up with the shutdown's writes: read
	// it once it has.)
	require.NoError(t, c.members[order[1]].Sync(sctx))
	s := c.members[order[1]].Snapshot()
	for _, st := range s.Topics["t"].Partitions {
		require.NotEqual(t, victim, st.Leader)
		require.False(t, st.InISR(victim))
	}
	// The controller's own shutdown: another takes over, at a higher
	// controller epoch, and the partitions it led move.
	old := s.ControllerEpoch
	ctrl := c.controller()
	require.NotNil(t, ctrl)
	require.NoError(t, ctrl.Close(sctx))
	delete(c.members, ctrl.NodeID())
	last := order[1]
	s = until(t, c.members[last], "is the controller", func(s *Snapshot) bool { return s.Controller == last && c.members[last].IsController() })
	require.Greater(t, s.ControllerEpoch, old)
	for _, st := range s.Topics["t"].Partitions {
		require.Equal(t, last, st.Leader)
		require.Equal(t, []int32{last}, st.ISR)
	}
}

// A leader's ISR change compares the state it read: a stale one, or a
// broker whose lease was revoked, is refused.
func TestAlterPartitionComparesEpoch(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 1, map[int32]string{1: "", 2: "", 3: ""})
	ctx := context.Background()
	ts, err := c.members[1].CreateTopic(ctx, TopicSpec{Name: "t", Assignment: [][]int32{{1, 2, 3}}})
	require.NoError(t, err)
	from := ts.Partitions[0]
	to, err := c.members[1].AlterPartition(ctx, "t", 0, from, []int32{1, 2}, 1)
	require.NoError(t, err)
	require.Equal(t, from.PartitionEpoch+1, to.PartitionEpoch)
	_, err = c.members[1].AlterPartition(ctx, "t", 0, from, []int32{1}, 1)
	require.ErrorIs(t, err, ErrStaleState, "the state read is stale")
	_, err = c.members[2].AlterPartition(ctx, "t", 0, to, []int32{2}, 1)
	require.ErrorIs(t, err, ErrStaleState, "not the leader")
	back, err := c.members[1].AlterPartition(ctx, "t", 0, to, []int32{1, 2, 3}, 1)
	require.NoError(t, err)
	require.Equal(t, []int32{1, 2, 3}, back.ISR)

	// Revoke 1's lease behind its back: its next write is refused, and it
	// registers again with a new epoch.
	epoch := c.members[1].Epoch()
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.etcd.Endpoints()})
	require.NoError(t, err)
	defer cli.Close()
	_, err = cli.Revoke(ctx, clientv3.LeaseID(epoch))
	require.NoError(t, err)
	_, err = c.members[1].AlterPartition(ctx, "t", 0, back, []int32{1}, 1)
	require.ErrorIs(t, err, ErrStaleState)
	until(t, c.members[1], "registers again", func(s *Snapshot) bool {
		b, ok := s.Brokers[1]
		return ok && b.Epoch != epoch && c.members[1].Leased()
	})
}

// Producer-id blocks never overlap, whoever asks.
func TestProducerIDBlocksAreDisjoint(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 1, map[int32]string{1: "", 2: "", 3: ""})
	var mu sync.Mutex
	seen := map[int64]bool{}
	var wg sync.WaitGroup
	for _, m := range c.members {
		wg.Go(func() {
			for range 20 {
				first, err := m.ProducerIDs(context.Background(), 1000)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				require.False(t, seen[first], "block %d twice", first)
				seen[first] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Len(t, seen, 60)
	for first := range seen {
		require.Zero(t, first%1000)
		require.Less(t, first, int64(60*1000))
	}
}

// A second broker with a node id in use waits for the first's session
// to end.
func TestNodeIDConflictWaits(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 1, map[int32]string{1: ""})
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err := Join(ctx, Options{Endpoints: c.etcd.Endpoints(), Prefix: c.prefix, NodeID: 1, SessionTimeout: 2 * time.Second, HeartbeatInterval: 200 * time.Millisecond})
	require.ErrorContains(t, err, "node id 1 is registered by another broker")
	c.members[1].halt()
	delete(c.members, 1)
	c.join(1, "") // once the old session expires
}

// The metadata survives an etcd member killed in a three-member etcd:
// the brokers go on seeing and changing it, and the member comes back.
// It takes about 11 s under -race (three etcd servers, a member's
// restart and catch-up): make crash runs it, make test does not.
func TestEtcdMemberKill(t *testing.T) {
	t.Parallel()
	if os.Getenv("SEGLOG_KILLS") == "" {
		t.Skip("make crash runs it (SEGLOG_KILLS set): three etcd servers and a member's restart cost make test 11 s")
	}
	c := newTestCluster(t, 3, map[int32]string{1: "", 2: ""})
	c.etcd.Stop(0)
	for i := range 3 {
		_, err := c.members[int32(i%2+1)].CreateTopic(context.Background(), TopicSpec{Name: fmt.Sprintf("t%d", i), Partitions: 2, ReplicationFactor: 2})
		require.NoError(t, err)
	}
	c.etcd.Restart(0)
	for _, m := range c.members {
		until(t, m, "sees three topics", func(s *Snapshot) bool { return len(s.Topics) == 3 })
		require.True(t, m.Leased())
	}
}

// A topic of more partitions than one etcd transaction holds (etcd's
// --max-txn-ops, 128 by default) is created and grown, its partitions'
// first states in the topic's key; the controller then changes them (a
// broker's controlled shutdown moves every leadership it had), each
// partition getting its key at that first change.
func TestTopicOfManyPartitions(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 1, map[int32]string{1: "", 2: ""})
	ctx := context.Background()
	_, err := c.members[1].CreateTopic(ctx, TopicSpec{Name: "big", Partitions: 300, ReplicationFactor: 2})
	require.NoError(t, err)
	_, err = c.members[1].CreatePartitions(ctx, "big", 500, nil)
	require.NoError(t, err)
	led := func(by ...int32) func(*Snapshot) bool {
		return func(s *Snapshot) bool {
			tt, ok := s.Topics["big"]
			if !ok || len(tt.Partitions) != 500 {
				return false
			}
			for _, st := range tt.Partitions {
				if !slices.Contains(by, st.Leader) {
					return false
				}
			}
			return true
		}
	}
	s := until(t, c.members[1], "sees 500 partitions led", led(1, 2))
	for _, st := range s.Topics["big"].Partitions {
		require.Len(t, st.ISR, 2)
	}
	require.NoError(t, c.members[1].ShutDown(ctx))
	s = until(t, c.members[2], "sees every leadership moved to broker 2", led(2))
	for p, st := range s.Topics["big"].Partitions {
		if st.LeaderEpoch > 0 { // (moved: its state has a key now)
			require.Equal(t, []int32{2}, st.ISR, "partition %d", p)
		}
	}
}

// Sync brings a member's snapshot up to every write etcd made before it:
// another member's, and one outside the prefix (which the watch sees no
// event of: etcd tells its progress).
func TestSync(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 1, map[int32]string{1: "", 2: ""})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := c.members[1].CreateTopic(ctx, TopicSpec{Name: "t", Assignment: [][]int32{{1, 2}}})
	require.NoError(t, err)
	for i := range 10 {
		want := fmt.Sprint(i)
		_, err := c.members[1].AlterTopicConfigs(ctx, "t", map[string]string{"retention.ms": want})
		require.NoError(t, err)
		require.NoError(t, c.members[2].Sync(ctx))
		require.Equal(t, want, c.members[2].Snapshot().Topics["t"].Configs["retention.ms"], "written by member 1, read by member 2")
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.etcd.Endpoints()})
	require.NoError(t, err)
	defer cli.Close()
	put, err := cli.Put(ctx, "/elsewhere/"+t.Name(), "x")
	require.NoError(t, err)
	require.NoError(t, c.members[2].Sync(ctx))
	require.GreaterOrEqual(t, c.members[2].Snapshot().Revision, put.Header.Revision)
}

// allLive reports whether every registered broker is live (unfenced, not
// shutting down).
func allLive(s *Snapshot) bool {
	for id := range s.Brokers {
		if !s.Live(id) {
			return false
		}
	}
	return true
}

// A broker restarted on the same data directory takes over its crashed
// incarnation's registration at once — the old lease (here of a minute)
// is revoked, not waited out — and comes back fenced until the controller
// takes it in; a broker of another directory under the same node id waits
// for the lease (its join runs out of time here).
func TestRestartTakesOverTheRegistration(t *testing.T) {
	t.Parallel()
	e := etcdtest.Start(t, 1)
	prefix := "/seglog/" + t.Name() + "/"
	join := func(dir string, timeout time.Duration) (*Member, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		return Join(ctx, Options{Endpoints: e.Endpoints(), Prefix: prefix, NodeID: 1, Directory: dir,
			SessionTimeout: time.Minute, HeartbeatInterval: time.Second, Logger: slog.New(slog.DiscardHandler)})
	}
	first, err := join("dir-a", 30*time.Second)
	require.NoError(t, err)
	old := first.Epoch()
	first.halt() // a crash: the lease lives on for a minute
	_, err = join("dir-b", 3*time.Second)
	require.ErrorIs(t, err, context.DeadlineExceeded, "another directory waits for the lease")
	again, err := join("dir-a", 30*time.Second)
	require.NoError(t, err, "the same directory takes over at once")
	t.Cleanup(again.halt)
	require.NotEqual(t, old, again.Epoch())
	b := again.Snapshot().Brokers[1]
	require.Equal(t, again.Epoch(), b.Epoch)
	require.False(t, b.Fenced, "taken in by the controller (itself)")
}

// A document write that loses a race (its revision moved) returns the
// conflict only once the loser's snapshot holds the winner's write, so a
// writer reloading from its snapshot retries on the new document; before,
// it could find its old revision again and spin out its retries (two ACL
// changes at once through two brokers, on a loaded machine).
func TestDocConflictSeesTheWinner(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 1, map[int32]string{1: "", 2: ""})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var rev int64
	for i := range 50 {
		won, err := c.members[1].PutDoc(ctx, DocACLs, fmt.Appendf(nil, "%d", i), rev)
		require.NoError(t, err)
		_, err = c.members[2].PutDoc(ctx, DocACLs, []byte("late"), rev)
		require.ErrorIs(t, err, docstore.ErrConflict)
		require.Equal(t, won, c.members[2].Snapshot().Docs[DocACLs].Rev, "write %d: the loser's snapshot has the winner's write", i)
		rev = won
	}
}
