package cluster

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// brokers makes a snapshot of brokers: each entry is a node id with what
// its registration says: "live", "fenced-clean", "fenced-unclean",
// "shutting-down"; a broker not listed is gone.
func brokers(states map[int32]string) *Snapshot {
	s := emptySnapshot()
	for id, st := range states {
		b := Broker{ID: id, Epoch: int64(100 + id), Registered: 50}
		switch st {
		case "live":
		case "fenced-clean":
			b.Fenced, b.CleanShutdown = true, true
		case "fenced-unclean":
			b.Fenced = true
		case "shutting-down":
			b.ShuttingDown = true
		default:
			panic(st)
		}
		s.Brokers[id] = b
	}
	return s
}

func pstate(leader, epoch int32, isr []int32, elr ...int32) PartitionState {
	if isr == nil {
		isr = []int32{}
	}
	return PartitionState{Leader: leader, LeaderEpoch: epoch, ISR: isr, PartitionEpoch: 7, ELR: elr}
}

// A broker acts as a leader only as the incarnation the leadership was
// written for: live under its current lease, the state written after it
// registered.
func TestMayLead(t *testing.T) {
	s := brokers(map[int32]string{1: "live", 2: "fenced-clean"})
	st := pstate(1, 3, []int32{1, 2})
	st.written = 60
	require.True(t, s.MayLead(1, 101, st))
	require.False(t, s.MayLead(1, 999, st), "another lease: another incarnation")
	old := st
	old.written = 40
	require.False(t, s.MayLead(1, 101, old), "written before the registration (at 50): the previous incarnation's")
	st2 := st
	st2.Leader = 2
	require.False(t, s.MayLead(2, 102, st2), "fenced")
	require.False(t, s.MayLead(2, 102, st), "not the leader named")
	require.False(t, s.MayLead(3, 103, pstate(3, 1, []int32{3})), "not registered")
}

// min.insync.replicas is capped at the replica count (Kafka 3.7+).
func TestEffectiveMinISR(t *testing.T) {
	require.Equal(t, 1, EffectiveMinISR(map[string]string{"min.insync.replicas": "2"}, 1, 1))
	require.Equal(t, 2, EffectiveMinISR(map[string]string{"min.insync.replicas": "2"}, 1, 3))
	require.Equal(t, 2, EffectiveMinISR(nil, 2, 3))
	require.Equal(t, 3, EffectiveMinISR(nil, 5, 3))
	require.Equal(t, 1, EffectiveMinISR(map[string]string{"min.insync.replicas": "x"}, 0, 3))
}

// A seeded random model of the rules: brokers of three replicas crash
// (clean or not), come back fenced, are unfenced, and followers catch up
// and join the ISR, for thousands of steps; after every step the
// controller's rules must keep the invariants — the leader is live and
// in the ISR, ISR and ELR are disjoint and of the replicas, no ELR while
// the ISR has min.insync.replicas, and every acknowledged record (below
// the high watermark) is held by each ISR and ELR member, so a new
// leader never loses one.
func TestElectOneModel(t *testing.T) {
	for seed := range uint64(40) {
		modelRun(t, seed, 500)
	}
}

func modelRun(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 7))
	replicas := []int32{1, 2, 3}
	minISR := 1 + rng.IntN(3)
	reg := map[int32]string{1: "live", 2: "live", 3: "live"}
	st := pstate(1, 0, []int32{1, 2, 3})
	leo := map[int32]int64{1: 0, 2: 0, 3: 0}     // each replica's log end
	durable := map[int32]int64{1: 0, 2: 0, 3: 0} // what survives a power cut
	lost := map[int32]bool{}                     // a power cut took unsynced records
	var hw int64
	for step := range steps {
		s := brokers(reg)
		where := fmt.Sprintf("seed %d step %d (min ISR %d) %v %+v", seed, step, minISR, reg, st)
		switch rng.IntN(6) {
		case 0: // the leader appends; followers in the ISR fetch; the HW moves (KIP-966: not below min ISR)
			if st.Leader != NoLeader && s.Live(st.Leader) {
				leo[st.Leader] += int64(1 + rng.IntN(5))
				for _, r := range st.ISR {
					if r != st.Leader && rng.IntN(3) > 0 {
						leo[r] = leo[st.Leader]
					}
				}
				if len(st.ISR) >= minISR {
					low := leo[st.Leader]
					for _, r := range st.ISR {
						low = min(low, leo[r])
					}
					hw = max(hw, low)
				}
			}
		case 1: // a broker crashes or loses power
			id := replicas[rng.IntN(3)]
			if reg[id] != "" {
				delete(reg, id)
				if rng.IntN(2) == 0 {
					lost[id] = leo[id] > durable[id]
					leo[id] = durable[id]
				}
			}
		case 2: // a broker comes back, fenced
			id := replicas[rng.IntN(3)]
			if reg[id] == "" {
				reg[id] = "fenced-unclean" // (a crash: no clean-shutdown marker)
				if !lost[id] && rng.IntN(3) == 0 {
					reg[id] = "fenced-clean"
				}
				lost[id] = false
			}
		case 3: // the controller unfences (after its changes)
			for id, v := range reg {
				if v != "live" {
					reg[id] = "live"
				}
			}
		case 4: // a live follower catches up from the leader and joins the ISR
			id := replicas[rng.IntN(3)]
			if st.Leader != NoLeader && s.Live(st.Leader) && s.Live(id) && !st.InISR(id) {
				leo[id] = leo[st.Leader] // (truncated to, then fetched from, the leader)
				to := st.next()
				setISR(s, replicas, st, &to, append(slices.Clone(st.ISR), id), minISR)
				st = to
			}
		case 5: // fsync
			for id := range durable {
				durable[id] = leo[id]
			}
		}
		if to, ok := electOne(brokers(reg), replicas, st, minISR, false); ok {
			st = to
		}
		s = brokers(reg)
		if st.Leader != NoLeader {
			require.True(t, s.Live(st.Leader), "leader not live: %s", where)
			require.True(t, st.InISR(st.Leader), "leader not in the ISR: %s", where)
		}
		for _, r := range st.ELR {
			require.False(t, st.InISR(r), "in the ISR and the ELR: %s", where)
		}
		if len(st.ISR) >= minISR {
			require.Empty(t, st.ELR, "an ELR with the ISR at min ISR: %s", where)
		}
		for _, r := range append(slices.Clone(st.ISR), st.ELR...) {
			if s.Live(r) || reg[r] == "fenced-clean" {
				// (a member gone may come back with a shorter log, unclean:
				// it leaves the ISR and ELR when it registers)
				require.GreaterOrEqual(t, leo[r], hw, "member %d lacks acknowledged records: %s", r, where)
			}
		}
	}
}
