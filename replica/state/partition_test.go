package state

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
)

var t0 = time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)

const lag = 30 * time.Second

// local is a log of [start, end) with high watermark hw, leased, at t0+s
// seconds.
func local(end, hw int64, s int) Local {
	return Local{LogEnd: end, HW: hw, Now: t0.Add(time.Duration(s) * time.Second), Session: 1}
}

func meta(leader, epoch, pe int32, isr []int32, mayLead bool) Meta {
	return Meta{Leader: leader, LeaderEpoch: epoch, PartitionEpoch: pe, ISR: isr, Replicas: []int32{1, 2, 3}, MinISR: 2, MayLead: mayLead, Session: 1}
}

// leader is broker 1's replica leading at epoch 5 (ISR 1,2,3), its log
// ending at end, the epoch starting at epochStart.
func leader(t *testing.T, end, epochStart int64) *Partition {
	p := New(1, lag)
	a := p.SetMeta(meta(1, 5, 10, []int32{1, 2, 3}, true), local(end, 0, 0))
	require.True(t, a.BecomeLeader)
	require.Equal(t, Becoming, p.Role())
	a = p.Led(epochStart, local(end, 0, 0))
	require.Equal(t, Leader, p.Role())
	require.Equal(t, TellLeading, a.Tell)
	return p
}

// Taking, keeping and dropping a leadership, and following: a row per
// rule of SetMeta.
func TestSetMeta(t *testing.T) {
	t.Run("a follower named leader stops fetching before it records the epoch", func(t *testing.T) {
		p := New(1, lag)
		a := p.SetMeta(meta(2, 4, 9, []int32{1, 2}, false), local(10, 5, 0))
		require.True(t, a.Fetch)
		require.Equal(t, int32(2), a.FetchLeader)
		require.Equal(t, int32(4), a.FetchEpoch)
		require.Equal(t, Follower, p.Role())
		m := meta(1, 5, 10, []int32{1, 2}, true)
		require.True(t, p.Becoming(m))
		a = p.SetMeta(m, local(10, 5, 1))
		require.True(t, a.StopFetching)
		require.True(t, a.BecomeLeader)
		require.False(t, a.Fetch)
		require.Equal(t, NoLeader, p.Following())
		a = p.Led(10, local(10, 5, 1))
		require.Equal(t, TellLeading, a.Tell)
		require.False(t, a.SetHW, "no follower has fetched in this leadership")
	})
	t.Run("epoch reuse after restart: a state naming this broker that it may not act on is neither led nor followed", func(t *testing.T) {
		p := leader(t, 10, 0)
		a := p.SetMeta(meta(1, 5, 11, []int32{1, 2, 3}, false), local(10, 0, 1))
		require.Equal(t, Offline, p.Role())
		require.Equal(t, TellLost, a.Tell)
		require.False(t, a.Fetch)
		require.False(t, a.BecomeLeader)
		require.Equal(t, kerr.NotLeaderForPartition.Code, p.CheckLeader(5, 1))
		// A fresh incarnation given its old leadership: nothing.
		q := New(1, lag)
		a = q.SetMeta(meta(1, 5, 11, []int32{1, 2, 3}, false), local(10, 0, 1))
		require.Equal(t, Offline, q.Role())
		require.False(t, a.Fetch || a.BecomeLeader)
	})
	t.Run("a leader at a new epoch is told to reload", func(t *testing.T) {
		p := leader(t, 10, 0)
		a := p.SetMeta(meta(1, 6, 11, []int32{1, 2, 3}, true), local(10, 0, 1))
		require.True(t, a.BecomeLeader)
		require.Equal(t, TellReload, p.Led(10, local(10, 0, 1)).Tell)
		require.Equal(t, int64(10), p.EpochStart())
	})
	t.Run("the same leadership again changes nothing but the replicas followed", func(t *testing.T) {
		p := leader(t, 10, 0)
		m := meta(1, 5, 11, []int32{1, 2, 3}, true)
		m.Replicas = []int32{1, 2, 3, 4}
		require.False(t, p.Becoming(m))
		a := p.SetMeta(m, local(10, 0, 1))
		require.False(t, a.BecomeLeader)
		require.Equal(t, TellNothing, a.Tell)
		require.Len(t, p.Followers(), 3)
	})
	t.Run("a state older than the one held is ignored", func(t *testing.T) {
		p := leader(t, 10, 0)
		a := p.SetMeta(meta(2, 6, 9, []int32{2}, false), local(10, 0, 1))
		require.True(t, a.Ignored)
		require.Equal(t, Leader, p.Role())
	})
	t.Run("a follower follows again at a new epoch, truncating first, and not at the same", func(t *testing.T) {
		p := New(3, lag)
		require.True(t, p.SetMeta(meta(2, 4, 9, []int32{2, 3}, false), local(0, 0, 0)).Fetch)
		require.False(t, p.SetMeta(meta(2, 4, 10, []int32{2}, false), local(0, 0, 0)).Fetch)
		a := p.SetMeta(meta(2, 5, 11, []int32{2}, false), local(0, 0, 0))
		require.True(t, a.Fetch && a.StopFetching)
		a = p.SetMeta(meta(NoLeader, 6, 12, []int32{}, false), local(0, 0, 0))
		require.True(t, a.StopFetching)
		require.Equal(t, Offline, p.Role())
	})
	t.Run("becoming leader failed: offline, acks answered", func(t *testing.T) {
		p := leader(t, 10, 0)
		p.AwaitAck(7, 10, local(10, 0, 0))
		p.SetMeta(meta(1, 6, 11, []int32{1, 2, 3}, true), local(10, 0, 1))
		a := p.LeadFailed(local(10, 0, 1))
		require.Equal(t, Offline, p.Role())
		require.Equal(t, TellLost, a.Tell)
		require.Equal(t, []Completion{{7, kerr.NotLeaderForPartition.Code}}, a.Completed)
	})
}

// A fetch's answer changes the log only while the replica follows that
// leader at that epoch: the append-after-becoming-leader bug.
func TestFollows(t *testing.T) {
	p := New(1, lag)
	p.SetMeta(meta(2, 4, 9, []int32{1, 2}, false), local(10, 5, 0))
	require.True(t, p.Follows(2, 4))
	require.False(t, p.Follows(2, 3), "an older epoch's answer")
	require.False(t, p.Follows(3, 4), "another leader's")
	p.SetMeta(meta(1, 5, 10, []int32{1, 2}, true), local(10, 5, 1))
	require.False(t, p.Follows(2, 4), "becoming leader: the fetcher's answer in flight is stale")
	p.Led(10, local(10, 5, 1))
	require.False(t, p.Follows(2, 4), "leading")
}

// The high watermark: the least log end over the ISR, held while a
// member has not fetched in this leadership or the ISR is below
// min.insync.replicas (KIP-966).
func TestHighWatermark(t *testing.T) {
	for _, c := range []struct {
		name    string
		isr     []int32
		minISR  int
		fetches map[int32]int64 // follower → fetch offset
		want    int64           // -1: does not move
	}{
		{"the leader alone at min ISR 1 commits its log end", []int32{1}, 1, nil, 20},
		{"the least log end over the ISR", []int32{1, 2, 3}, 2, map[int32]int64{2: 15, 3: 12}, 12},
		{"a follower out of the ISR does not hold it back", []int32{1, 2}, 2, map[int32]int64{2: 15, 3: 3}, 15},
		{"an ISR member not heard from holds it", []int32{1, 2, 3}, 2, map[int32]int64{2: 15}, -1},
		{"below min ISR it is frozen", []int32{1, 2}, 3, map[int32]int64{2: 15, 3: 15}, -1},
		{"up to the leader's log end", []int32{1, 2}, 2, map[int32]int64{2: 20}, 20},
		{"never back", []int32{1, 2}, 2, map[int32]int64{2: 4}, -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := New(1, lag)
			m := meta(1, 5, 10, c.isr, true)
			m.MinISR = c.minISR
			p.SetMeta(m, local(20, 5, 0))
			a := p.Led(0, local(20, 5, 0))
			hw := int64(5)
			if a.SetHW {
				hw = a.HW
			}
			for _, r := range []int32{2, 3} {
				if off, ok := c.fetches[r]; ok {
					code, a := p.FollowerFetch(r, 5, off, 0, local(20, hw, 1))
					require.Zero(t, code)
					if a.SetHW {
						require.Greater(t, a.HW, hw, "the high watermark went back")
						hw = a.HW
					}
				}
			}
			if c.want < 0 {
				require.Equal(t, int64(5), hw)
			} else {
				require.Equal(t, c.want, hw)
			}
		})
	}
}

// acks=all: answered when the high watermark covers the batch, at once
// with the leader alone in the ISR; NOT_ENOUGH_REPLICAS_AFTER_APPEND when
// the ISR is below min ISR then; NOT_LEADER_OR_FOLLOWER when the
// leadership is lost or the session is not certainly alive.
func TestAcks(t *testing.T) {
	t.Run("the leader alone", func(t *testing.T) {
		p := New(1, lag)
		m := meta(1, 1, 1, []int32{1}, true)
		m.Replicas, m.MinISR = []int32{1}, 1
		p.SetMeta(m, local(0, 0, 0))
		p.Led(0, local(0, 0, 0))
		a := p.Appended(local(3, 0, 0))
		require.True(t, a.SetHW)
		require.Equal(t, int64(3), a.HW)
		a = p.AwaitAck(1, 3, local(3, 3, 0))
		require.Equal(t, []Completion{{1, 0}}, a.Completed)
	})
	t.Run("waiting for the followers", func(t *testing.T) {
		p := leader(t, 0, 0)
		require.Zero(t, p.CheckAppend(-1, 1))
		a := p.AwaitAck(1, 3, local(3, 0, 0))
		require.Empty(t, a.Completed)
		_, a = p.FollowerFetch(2, 5, 3, 0, local(3, 0, 1))
		require.Empty(t, a.Completed, "3 has not fetched")
		_, a = p.FollowerFetch(3, 5, 2, 0, local(3, 0, 1))
		require.True(t, a.SetHW)
		require.Empty(t, a.Completed, "the high watermark at 2 does not cover 3")
		_, a = p.FollowerFetch(3, 5, 3, 0, local(3, 2, 2))
		require.Equal(t, []Completion{{1, 0}}, a.Completed)
		require.Zero(t, p.Pending())
	})
	t.Run("covered with the ISR below min ISR", func(t *testing.T) {
		p := leader(t, 3, 0)
		p.ISRWritten([]int32{1}, 11, local(3, 3, 0))
		require.Equal(t, kerr.NotEnoughReplicas.Code, p.CheckAppend(-1, 1))
		require.Zero(t, p.CheckAppend(1, 1))
		a := p.AwaitAck(1, 3, local(3, 3, 0))
		require.Equal(t, []Completion{{1, kerr.NotEnoughReplicasAfterAppend.Code}}, a.Completed)
	})
	t.Run("leadership lost", func(t *testing.T) {
		p := leader(t, 3, 0)
		p.AwaitAck(1, 3, local(3, 0, 0))
		a := p.SetMeta(meta(2, 6, 11, []int32{2, 3}, false), local(3, 0, 1))
		require.Equal(t, []Completion{{1, kerr.NotLeaderForPartition.Code}}, a.Completed)
	})
	t.Run("a deposed leader acknowledges nothing", func(t *testing.T) {
		p := leader(t, 3, 0)
		p.AwaitAck(1, 3, local(3, 0, 0))
		p.FollowerFetch(2, 5, 3, 0, local(3, 0, 1))
		l := local(3, 0, 1)
		l.Session = 0
		code, a := p.FollowerFetch(3, 5, 3, 0, l)
		require.Equal(t, kerr.NotLeaderForPartition.Code, code)
		require.Empty(t, a.Completed)
		a = p.Tick(l)
		require.Equal(t, []Completion{{1, kerr.NotLeaderForPartition.Code}}, a.Completed)
		require.Nil(t, a.Propose)
	})
	t.Run("answered with no wait when it can be", func(t *testing.T) {
		p := leader(t, 3, 0)
		_, done := p.CheckAck(3, local(3, 2, 0))
		require.False(t, done, "not covered: it must wait")
		code, done := p.CheckAck(3, local(3, 3, 0))
		require.True(t, done)
		require.Zero(t, code)
		l := local(3, 3, 0)
		l.Session = 0
		code, done = p.CheckAck(3, l)
		require.True(t, done)
		require.Equal(t, kerr.NotLeaderForPartition.Code, code)
		require.Zero(t, p.Pending(), "nothing registered")
	})
	t.Run("cancelled", func(t *testing.T) {
		p := leader(t, 3, 0)
		p.AwaitAck(1, 3, local(3, 0, 0))
		p.CancelAck(1)
		require.Zero(t, p.Pending())
	})
	t.Run("the leader at a new epoch keeps waiting: its log is the same", func(t *testing.T) {
		p := leader(t, 3, 0)
		p.AwaitAck(1, 3, local(3, 0, 0))
		p.SetMeta(meta(1, 6, 11, []int32{1, 2, 3}, true), local(3, 0, 1))
		require.Empty(t, p.Led(3, local(3, 0, 1)).Completed)
		require.Equal(t, 1, p.Pending())
	})
}

// A follower's fetch: the leader's errors, caught-up time, and the ISR's
// expansion once it has the high watermark and the leader's epoch.
func TestFollowerFetch(t *testing.T) {
	t.Run("errors", func(t *testing.T) {
		p := leader(t, 10, 0)
		code, _ := p.FollowerFetch(2, 4, 0, 0, local(10, 0, 0))
		require.Equal(t, kerr.FencedLeaderEpoch.Code, code)
		code, _ = p.FollowerFetch(2, 6, 0, 0, local(10, 0, 0))
		require.Equal(t, kerr.UnknownLeaderEpoch.Code, code)
		code, _ = p.FollowerFetch(9, 5, 0, 0, local(10, 0, 0))
		require.Equal(t, kerr.NotLeaderForPartition.Code, code, "not a replica")
		code, a := p.FollowerFetch(2, 5, 11, 0, local(10, 0, 0))
		require.Equal(t, kerr.OffsetOutOfRange.Code, code, "past the leader's log end: divergent, to truncate")
		require.False(t, a.SetHW)
		require.Equal(t, int64(-1), p.Followers()[0].LogEnd, "its progress not counted")
		q := New(2, lag)
		q.SetMeta(meta(1, 5, 10, []int32{1, 2}, false), local(0, 0, 0))
		code, _ = q.FollowerFetch(3, 5, 0, 0, local(0, 0, 0))
		require.Equal(t, kerr.NotLeaderForPartition.Code, code, "a follower")
	})
	t.Run("caught up: at the log end, or reaching the end of its previous fetch", func(t *testing.T) {
		p := leader(t, 10, 0)
		p.FollowerFetch(2, 5, 4, 0, local(10, 0, 5))
		require.Equal(t, t0, p.Followers()[0].LastCaughtUp, "behind: the leadership's start")
		p.FollowerFetch(2, 5, 10, 0, local(14, 0, 7))
		require.Equal(t, t0.Add(5*time.Second), p.Followers()[0].LastCaughtUp, "it reached the end of its fetch at 5 s")
		p.FollowerFetch(2, 5, 14, 0, local(14, 0, 9))
		require.Equal(t, t0.Add(9*time.Second), p.Followers()[0].LastCaughtUp)
	})
	t.Run("expansion needs the high watermark and the leader's epoch", func(t *testing.T) {
		p := New(1, lag)
		p.SetMeta(meta(1, 5, 10, []int32{1, 2}, true), local(20, 10, 0))
		p.Led(15, local(20, 10, 0))
		_, a := p.FollowerFetch(3, 5, 12, 0, local(20, 10, 1))
		require.Nil(t, a.Propose, "below the epoch's start (15)")
		_, a = p.FollowerFetch(2, 5, 18, 0, local(20, 10, 1))
		require.True(t, a.SetHW)
		require.Equal(t, int64(18), a.HW)
		_, a = p.FollowerFetch(3, 5, 16, 0, local(20, 18, 1))
		require.Nil(t, a.Propose, "below the high watermark (18)")
		_, a = p.FollowerFetch(3, 5, 18, 0, local(20, 18, 2))
		require.Equal(t, &Proposal{ISR: []int32{1, 2, 3}, Why: "expand", PartitionEpoch: 10}, a.Propose)
		_, a = p.FollowerFetch(3, 5, 19, 0, local(20, 18, 2))
		require.Nil(t, a.Propose, "one change at a time")
		a = p.ISRWritten([]int32{1, 2, 3}, 11, local(20, 18, 3))
		require.True(t, p.InISR(3))
		require.Equal(t, t0.Add(3*time.Second), p.Followers()[1].LastCaughtUp, "a joiner is caught up now")
	})
	t.Run("a follower's log start moves the low watermark", func(t *testing.T) {
		p := leader(t, 10, 0)
		_, a := p.FollowerFetch(2, 5, 10, 4, local(10, 0, 1))
		require.True(t, a.Changed)
		p.FollowerFetch(3, 5, 10, 6, local(10, 0, 1))
		require.Equal(t, int64(4), p.LowWatermark(8))
		require.Equal(t, int64(3), p.LowWatermark(3))
	})
}

// The ISR shrinks after replica.lag.time.max.ms without catching up, one
// change at a time, never while the session is not certainly alive.
func TestShrink(t *testing.T) {
	p := leader(t, 10, 0)
	p.FollowerFetch(2, 5, 10, 0, local(10, 0, 20))
	require.Nil(t, p.Tick(local(10, 10, 30)).Propose, "3 is at its lag, not past it")
	l := local(10, 10, 31)
	l.Session = 0
	require.Nil(t, p.Tick(l).Propose, "unleased")
	a := p.Tick(local(10, 10, 31))
	require.Equal(t, &Proposal{ISR: []int32{1, 2}, Why: "shrink", PartitionEpoch: 10}, a.Propose)
	require.Nil(t, p.Tick(local(10, 10, 32)).Propose, "one at a time")
	p.ISRFailed(local(10, 10, 32))
	require.NotNil(t, p.Tick(local(10, 10, 32)).Propose, "again after a failure")
	a = p.ISRWritten([]int32{1, 2}, 9, local(10, 10, 33))
	require.True(t, p.InISR(3), "a stale write changes no state")
	require.True(t, a.Changed, "but ends the proposal: the next may be made")
	require.Nil(t, New(2, lag).Tick(local(0, 0, 100)).Propose, "not a leader")
}

// A new leader's high watermark below its epoch's start is not yet known
// to be its own (OFFSET_NOT_AVAILABLE); a follower serves consumers
// (KIP-392) only while following.
func TestChecks(t *testing.T) {
	p := leader(t, 20, 15)
	require.Equal(t, kerr.OffsetNotAvailable.Code, p.CheckHighWatermark(10))
	require.Zero(t, p.CheckHighWatermark(15))
	require.Equal(t, kerr.NotLeaderForPartition.Code, p.CheckFollowerRead(5))
	require.Zero(t, p.CheckLeader(-1, 1))
	require.Equal(t, kerr.NotLeaderForPartition.Code, p.CheckLeader(5, 0))
	q := New(2, lag)
	require.Equal(t, kerr.NotLeaderForPartition.Code, q.CheckFollowerRead(-1), "following no one")
	q.SetMeta(meta(1, 5, 10, []int32{1, 2}, false), local(0, 0, 0))
	require.Zero(t, q.CheckFollowerRead(5))
	require.Equal(t, kerr.FencedLeaderEpoch.Code, q.CheckFollowerRead(4))
	require.Equal(t, kerr.UnknownLeaderEpoch.Code, q.CheckFollowerRead(6))
}

// KIP-392: of the ISR followers in the consumer's rack holding the
// offset, the one with the most records.
func TestPreferredReadReplica(t *testing.T) {
	p := leader(t, 20, 0)
	p.FollowerFetch(2, 5, 18, 0, local(20, 0, 1))
	p.FollowerFetch(3, 5, 20, 5, local(20, 0, 1))
	all := func(int32) bool { return true }
	require.Equal(t, int32(3), p.PreferredReadReplica(10, all))
	require.Equal(t, int32(2), p.PreferredReadReplica(3, all), "3's log starts at 5")
	require.Equal(t, int32(-1), p.PreferredReadReplica(19, func(r int32) bool { return r == 2 }), "2 lacks 19")
}

// Truncation to the leader (KIP-101, KIP-279), a row each: the
// follower's epochs and log, the leader's answer for its latest epoch →
// where it truncates.
func TestTruncationTarget(t *testing.T) {
	epochs := []EpochStart{{1, 0}, {3, 10}, {4, 20}}
	for _, c := range []struct {
		name        string
		leaderEpoch int32
		leaderEnd   int64
		want        int64
	}{
		{"the leader has our latest epoch, longer: nothing", 4, 40, 30},
		{"the leader's epoch 4 ends earlier: the divergent tail goes", 4, 25, 25},
		{"the leader never had epoch 4; its 3 ends at 15", 3, 15, 15},
		{"the leader's 3 ends later than ours: ours ends where 4 starts", 3, 18, 18},
		{"the leader's greatest epoch at or below 4 is 1, ending at 12: ours ends at 10", 1, 12, 10},
		{"an undefined answer: to the high watermark", -1, -1, 8},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, TruncationTarget(epochs, 30, 8, c.leaderEpoch, c.leaderEnd))
		})
	}
}

// A follower's high watermark and log start: the leader's, never past
// its own log end (and high watermark), never back.
func TestFollowerOffsets(t *testing.T) {
	hw, ok := FollowerHW(50, Local{LogEnd: 40, HW: 30})
	require.True(t, ok)
	require.Equal(t, int64(40), hw)
	_, ok = FollowerHW(20, Local{LogEnd: 40, HW: 30})
	require.False(t, ok)
	start, ok := FollowerLogStart(35, Local{LogStart: 10, HW: 30})
	require.True(t, ok)
	require.Equal(t, int64(30), start)
	_, ok = FollowerLogStart(5, Local{LogStart: 10, HW: 30})
	require.False(t, ok)
}

// Close answers the waiting acks and stops fetching.
func TestClose(t *testing.T) {
	p := leader(t, 3, 0)
	p.AwaitAck(1, 3, local(3, 0, 0))
	a := p.Close(local(3, 0, 0))
	require.Equal(t, TellLost, a.Tell)
	require.Equal(t, []Completion{{1, kerr.NotLeaderForPartition.Code}}, a.Completed)
	q := New(2, lag)
	q.SetMeta(meta(1, 5, 10, []int32{1, 2}, false), local(0, 0, 0))
	require.True(t, q.Close(local(0, 0, 0)).StopFetching)
}

// A follower starts its log over at the leader's first batch only when
// its log is empty and the batch covers its log end (the leader's log
// start inside the batch); below the log end otherwise, it truncates.
func TestRestartAt(t *testing.T) {
	for _, c := range []struct {
		name       string
		base, last int64
		l          Local
		want       bool
	}{
		{"empty at the leader's log start 3, the batch 0–4", 0, 4, Local{LogStart: 3, LogEnd: 3, HW: 3}, true},
		{"empty, the batch 0–2 ends below the log end", 0, 2, Local{LogStart: 3, LogEnd: 3, HW: 3}, false},
		{"not empty: a divergent log", 0, 4, Local{LogStart: 0, LogEnd: 3, HW: 1}, false},
		{"at the log end: no restart needed", 3, 4, Local{LogStart: 3, LogEnd: 3, HW: 3}, false},
	} {
		require.Equal(t, c.want, RestartAt(c.base, c.last, c.l), c.name)
	}
}
