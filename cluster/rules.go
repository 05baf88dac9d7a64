package cluster

import (
	"strconv"

	"github.com/seglog/seglog/replica/state"
)

// The controller's rules, as pure functions of a snapshot and a
// partition's state (docs/cluster.md §3): they read no clock, do no I/O
// and are tested as tables of (state, brokers) → state (rules_test.go).

// EffectiveMinISR is the min.insync.replicas a partition of replicas
// replicas works with: the topic's (else the broker's default), never
// above its replica count (Kafka 3.7 and later: an RF 1 topic with
// min.insync.replicas=2 still takes acks=all).
func EffectiveMinISR(configs map[string]string, def, replicas int) int {
	n := max(def, 1)
	if v, err := strconv.Atoi(configs["min.insync.replicas"]); err == nil && v > 0 {
		n = v
	}
	return max(min(n, replicas), 1)
}

// uncleanRestart reports whether broker id is a fenced new incarnation
// whose data directory was not closed cleanly: it may have lost records
// it had acknowledged, so it leaves every ISR and ELR (KIP-966).
func uncleanRestart(s *Snapshot, id int32) bool {
	b, ok := s.Brokers[id]
	return ok && b.Fenced && !b.CleanShutdown
}

// brokerView is the snapshot's brokers as the controller's rules
// (replica/state) read them.
type brokerView struct{ s *Snapshot }

func (v brokerView) Live(id int32) bool           { return v.s.Live(id) }
func (v brokerView) UncleanRestart(id int32) bool { return uncleanRestart(v.s, id) }
func (v brokerView) ShuttingDown(id int32) bool {
	b, ok := v.s.Brokers[id]
	return ok && b.ShuttingDown && !b.Fenced
}

// leadership is the part of the state the controller's rules decide.
func (s PartitionState) leadership() state.Leadership {
	return state.Leadership{Leader: s.Leader, LeaderEpoch: s.LeaderEpoch, ISR: s.ISR, ELR: s.ELR, LastKnownELR: s.LastKnownELR}
}

func (s *PartitionState) setLeadership(l state.Leadership) {
	s.Leader, s.LeaderEpoch, s.ISR, s.ELR, s.LastKnownELR = l.Leader, l.LeaderEpoch, l.ISR, l.ELR, l.LastKnownELR
}

// setISR makes isr the ISR of to (a next version of from), the Eligible
// Leader Replicas kept by state.SetISR's rule.
func setISR(s *Snapshot, replicas []int32, from PartitionState, to *PartitionState, isr []int32, minISR int) {
	l := state.SetISR(brokerView{s}, replicas, from.leadership(), isr, minISR)
	to.ISR, to.ELR, to.LastKnownELR = l.ISR, l.ELR, l.LastKnownELR
}

// electOne returns a partition's next state, and whether it changes, by
// state.Elect's rules (KRaft's, with KIP-966's).
func electOne(s *Snapshot, replicas []int32, st PartitionState, minISR int, unclean bool) (PartitionState, bool) {
	l, changed := state.Elect(brokerView{s}, replicas, st.leadership(), minISR, unclean)
	if !changed {
		return st, false
	}
	to := st.next()
	to.setLeadership(l)
	return to, true
}

// uncleanLeader is an unclean election's choice (state.UncleanLeader).
func uncleanLeader(s *Snapshot, replicas []int32, st PartitionState) int32 {
	return state.UncleanLeader(brokerView{s}, replicas, st.leadership())
}

// MayLead reports whether broker id, registered under lease epoch, may act
// as the leader st names (docs/cluster.md §2): it is live in s under that
// registration, and st was written after the registration — a leadership
// written for an earlier incarnation is never taken up by a later one,
// which would serve it from a log that may have lost records.
func (s *Snapshot) MayLead(id int32, epoch int64, st PartitionState) bool {
	b, ok := s.Brokers[id]
	return st.Leader == id && ok && s.Live(id) && b.Epoch == epoch && st.written >= b.Registered
}

// Shown is a partition's leader and ISR as clients are told them
// (Metadata, DescribeTopicPartitions, seglog cluster): a broker whose
// registration is newer than the state — a restarted incarnation the
// controller has not taken in yet — is neither its leader nor in sync,
// whatever the state says: it has not caught up since it restarted.
func (s *Snapshot) Shown(st PartitionState) (leader int32, isr []int32) {
	newer := func(id int32) bool {
		b, ok := s.Brokers[id]
		return ok && (b.Fenced || b.Registered > st.written)
	}
	leader = st.Leader
	if newer(leader) {
		leader = NoLeader
	}
	isr = make([]int32, 0, len(st.ISR))
	for _, r := range st.ISR {
		if !newer(r) {
			isr = append(isr, r)
		}
	}
	return leader, isr
}
