package cluster

import (
	"slices"
	"strconv"
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

// setISR makes isr the ISR of to (a next version of from) and keeps the
// Eligible Leader Replicas (KIP-966): while the ISR is at least minISR
// there are none; below it, every replica that was in the ISR or the
// ELR and is not in the new ISR is one — the high watermark does not
// move while the ISR is below minISR, so each holds every record below
// it — except a broker back from an unclean shutdown, which may have
// lost some. A partition of one replica keeps its replica eligible
// whatever its shutdown: no other copy could be better.
func setISR(s *Snapshot, replicas []int32, from PartitionState, to *PartitionState, isr []int32, minISR int) {
	if isr == nil {
		isr = []int32{} // (an empty ISR, never a state without one)
	}
	to.ISR = isr
	if len(isr) >= minISR {
		to.ELR, to.LastKnownELR = nil, nil
		return
	}
	var elr []int32
	for _, r := range append(slices.Clone(from.ELR), from.ISR...) {
		if slices.Contains(isr, r) || slices.Contains(elr, r) || !slices.Contains(replicas, r) {
			continue
		}
		if uncleanRestart(s, r) && len(replicas) > 1 {
			continue
		}
		elr = append(elr, r)
	}
	to.ELR = elr
}

// electOne returns a partition's next state, and whether it changes
// (KRaft's rules, with KIP-966's):
//   - a broker that is not live (gone, fenced, shutting down) leaves the
//     ISR; the ELR is kept as setISR says, and a fenced broker back from
//     an unclean shutdown leaves it too;
//   - a leader that is live and in the ISR stays; else the first replica
//     of the assignment that is live and in the ISR leads, at the next
//     leader epoch; with the ISR empty, the first live ELR member (the
//     ISR becomes it); with none, and unclean leader election on, the
//     last known leader if it is live, else the first live replica (the
//     ISR becomes it alone; it may lack acknowledged records); else no
//     leader, the last leader kept as the last known ELR;
//   - a leader shutting down (not fenced) with no other live ISR member
//     keeps the partition: nobody else could take it.
func electOne(s *Snapshot, replicas []int32, st PartitionState, minISR int, unclean bool) (PartitionState, bool) {
	var isr []int32
	for _, r := range st.ISR {
		if s.Live(r) {
			isr = append(isr, r)
		}
	}
	if b, ok := s.Brokers[st.Leader]; ok && b.ShuttingDown && !b.Fenced && len(isr) == 0 && st.InISR(st.Leader) {
		return st, false
	}
	to := st.next()
	setISR(s, replicas, st, &to, isr, minISR)
	if !s.Live(st.Leader) || !slices.Contains(to.ISR, st.Leader) {
		to.Leader = NoLeader
		for _, r := range replicas {
			if s.Live(r) && slices.Contains(to.ISR, r) {
				to.Leader = r
				break
			}
		}
		if to.Leader == NoLeader && len(to.ISR) == 0 {
			for _, r := range replicas {
				if s.Live(r) && slices.Contains(to.ELR, r) {
					to.Leader, to.ISR = r, []int32{r}
					to.ELR = slices.DeleteFunc(to.ELR, func(e int32) bool { return e == r })
					break
				}
			}
		}
		if to.Leader == NoLeader && unclean {
			if r := uncleanLeader(s, replicas, st); r != NoLeader {
				to.Leader, to.ISR, to.ELR, to.LastKnownELR = r, []int32{r}, nil, nil
			}
		}
		switch {
		case to.Leader == NoLeader && st.Leader != NoLeader:
			to.LastKnownELR = []int32{st.Leader}
		case to.Leader != NoLeader:
			to.LastKnownELR = nil
		}
		if to.Leader != st.Leader {
			to.LeaderEpoch++
		}
	}
	if to.Leader == st.Leader && to.LeaderEpoch == st.LeaderEpoch && slices.Equal(to.ISR, st.ISR) &&
		slices.Equal(to.ELR, st.ELR) && slices.Equal(to.LastKnownELR, st.LastKnownELR) {
		return st, false
	}
	return to, true
}

// uncleanLeader is an unclean election's choice: the last known leader
// if it is live, else the first live replica; NoLeader when none is.
func uncleanLeader(s *Snapshot, replicas []int32, st PartitionState) int32 {
	if len(st.LastKnownELR) == 1 && s.Live(st.LastKnownELR[0]) && slices.Contains(replicas, st.LastKnownELR[0]) {
		return st.LastKnownELR[0]
	}
	for _, r := range replicas {
		if s.Live(r) {
			return r
		}
	}
	return NoLeader
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
