package state

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// brokers are registrations as the rules read them: each entry a node id
// with "live", "fenced-clean", "fenced-unclean" or "shutting-down"; a
// broker not listed is gone.
type brokers map[int32]string

func (b brokers) Live(id int32) bool           { return b[id] == "live" }
func (b brokers) UncleanRestart(id int32) bool { return b[id] == "fenced-unclean" }
func (b brokers) ShuttingDown(id int32) bool   { return b[id] == "shutting-down" }

func lead(leader, epoch int32, isr []int32, elr ...int32) Leadership {
	if isr == nil {
		isr = []int32{}
	}
	return Leadership{Leader: leader, LeaderEpoch: epoch, ISR: isr, ELR: elr}
}

// The controller's election and ISR rules, a row each: the brokers, a
// partition's state, min.insync.replicas and unclean election → the next
// state (leader, epoch, ISR, ELR, last known leader) or no change.
func TestElect(t *testing.T) {
	r3 := []int32{1, 2, 3}
	for _, c := range []struct {
		name     string
		brokers  map[int32]string
		replicas []int32
		st       Leadership
		minISR   int
		unclean  bool
		changed  bool
		want     Leadership
	}{
		{name: "a live leader in the ISR stays",
			brokers: map[int32]string{1: "live", 2: "live", 3: "live"}, replicas: r3, st: lead(1, 4, []int32{1, 2, 3}), minISR: 2},
		{name: "a follower gone leaves the ISR at the same leader epoch",
			brokers: map[int32]string{1: "live", 2: "live"}, replicas: r3, st: lead(1, 4, []int32{1, 2, 3}), minISR: 2,
			changed: true, want: lead(1, 4, []int32{1, 2})},
		{name: "a leader gone: the next live ISR replica of the assignment leads at the next epoch",
			brokers: map[int32]string{2: "live", 3: "live"}, replicas: r3, st: lead(1, 4, []int32{1, 3, 2}), minISR: 2,
			changed: true, want: lead(2, 5, []int32{3, 2})},
		{name: "the power-cut bug: a leader back as a new incarnation (unclean) is re-elected away and leaves the ISR",
			brokers: map[int32]string{1: "live", 2: "fenced-unclean", 3: "live"}, replicas: []int32{2, 1, 3}, st: lead(2, 5, []int32{2, 1, 3}), minISR: 2,
			changed: true, want: lead(1, 6, []int32{1, 3})},
		{name: "a leader back clean is re-elected too: its old epoch is not its own",
			brokers: map[int32]string{1: "live", 2: "fenced-clean", 3: "live"}, replicas: []int32{2, 1, 3}, st: lead(2, 5, []int32{2, 1, 3}), minISR: 1,
			changed: true, want: lead(1, 6, []int32{1, 3})},
		{name: "the ISR below min.insync.replicas: those who left are eligible",
			brokers: map[int32]string{1: "live"}, replicas: r3, st: lead(1, 4, []int32{1, 2, 3}), minISR: 2,
			changed: true, want: lead(1, 4, []int32{1}, 2, 3)},
		{name: "an unclean restart leaves the ELR",
			brokers: map[int32]string{1: "live", 2: "fenced-unclean"}, replicas: r3, st: lead(1, 4, []int32{1}, 2, 3), minISR: 2,
			changed: true, want: lead(1, 4, []int32{1}, 3)},
		{name: "a clean restart stays eligible",
			brokers: map[int32]string{1: "live", 2: "fenced-clean"}, replicas: r3, st: lead(1, 4, []int32{1}, 2, 3), minISR: 2},
		{name: "the ISR empty: an eligible replica leads and is the ISR",
			brokers: map[int32]string{3: "live"}, replicas: r3, st: lead(NoLeader, 5, nil, 2, 3), minISR: 2,
			changed: true, want: lead(3, 6, []int32{3}, 2)},
		{name: "the whole ISR gone: no leader, its last members eligible, the last leader known",
			brokers: map[int32]string{}, replicas: r3, st: lead(1, 4, []int32{1, 2}), minISR: 2,
			changed: true, want: func() Leadership { s := lead(NoLeader, 5, nil, 1, 2); s.LastKnownELR = []int32{1}; return s }()},
		{name: "no ISR, no ELR, clean election only: no leader",
			brokers: map[int32]string{3: "live"}, replicas: r3, st: lead(NoLeader, 5, nil), minISR: 2},
		{name: "no ISR, no ELR, unclean election: the last known leader if it is live",
			brokers: map[int32]string{2: "live", 3: "live"}, replicas: r3,
			st: func() Leadership { s := lead(NoLeader, 5, nil); s.LastKnownELR = []int32{3}; return s }(), minISR: 2, unclean: true,
			changed: true, want: lead(3, 6, []int32{3})},
		{name: "no ISR, no ELR, unclean election: else the first live replica",
			brokers: map[int32]string{2: "live"}, replicas: r3,
			st: func() Leadership { s := lead(NoLeader, 5, nil); s.LastKnownELR = []int32{3}; return s }(), minISR: 2, unclean: true,
			changed: true, want: lead(2, 6, []int32{2})},
		{name: "one replica: its broker back unclean stays eligible (no better copy exists) until it is unfenced",
			brokers: map[int32]string{1: "fenced-unclean"}, replicas: []int32{1},
			st: func() Leadership { s := lead(NoLeader, 1, nil, 1); s.LastKnownELR = []int32{1}; return s }(), minISR: 1},
		{name: "one replica: unfenced, it leads again",
			brokers: map[int32]string{1: "live"}, replicas: []int32{1},
			st: func() Leadership { s := lead(NoLeader, 1, nil, 1); s.LastKnownELR = []int32{1}; return s }(), minISR: 1,
			changed: true, want: lead(1, 2, []int32{1})},
		{name: "a leader shutting down keeps what nobody else can take",
			brokers: map[int32]string{1: "shutting-down"}, replicas: r3, st: lead(1, 4, []int32{1}), minISR: 1},
		{name: "a fenced leader alone in the ISR does not keep it",
			brokers: map[int32]string{1: "fenced-clean"}, replicas: r3, st: lead(1, 4, []int32{1}), minISR: 1,
			changed: true, want: func() Leadership { s := lead(NoLeader, 5, nil, 1); s.LastKnownELR = []int32{1}; return s }()},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, changed := Elect(brokers(c.brokers), c.replicas, c.st, c.minISR, c.unclean)
			require.Equal(t, c.changed, changed, "%+v", got)
			if !changed {
				require.Equal(t, c.st, got)
				return
			}
			require.Equal(t, c.want.Leader, got.Leader, "leader")
			require.Equal(t, c.want.LeaderEpoch, got.LeaderEpoch, "leader epoch")
			require.Equal(t, c.want.ISR, got.ISR, "ISR")
			require.ElementsMatch(t, c.want.ELR, got.ELR, "ELR")
			require.Equal(t, len(c.want.LastKnownELR) > 0, len(got.LastKnownELR) > 0, "last known ELR %v", got.LastKnownELR)
			require.ElementsMatch(t, c.want.LastKnownELR, got.LastKnownELR, "last known ELR")
		})
	}
}

// The preferred replica leads when it is live and in the ISR, at the
// next epoch.
func TestElectPreferred(t *testing.T) {
	r3 := []int32{1, 2, 3}
	_, needed, _ := ElectPreferred(brokers{1: "live"}, r3, lead(1, 4, []int32{1, 2}))
	require.False(t, needed, "it leads")
	_, needed, ok := ElectPreferred(brokers{1: "fenced-clean", 2: "live"}, r3, lead(2, 4, []int32{1, 2}))
	require.True(t, needed)
	require.False(t, ok, "not live")
	_, _, ok = ElectPreferred(brokers{1: "live", 2: "live"}, r3, lead(2, 4, []int32{2}))
	require.False(t, ok, "not in the ISR")
	to, _, ok := ElectPreferred(brokers{1: "live", 2: "live"}, r3, lead(2, 4, []int32{2, 1}))
	require.True(t, ok)
	require.Equal(t, lead(1, 5, []int32{2, 1}), to)
}
