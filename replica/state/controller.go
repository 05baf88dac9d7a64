package state

import "slices"

// NoLeader is the leader of a partition that has none.
const NoLeader int32 = -1

// Brokers is what the controller's rules read of the registered brokers.
type Brokers interface {
	// Live: registered, neither fenced nor shutting down.
	Live(id int32) bool
	// UncleanRestart: a fenced new incarnation whose data directory was
	// not closed cleanly (it may have lost records it acknowledged).
	UncleanRestart(id int32) bool
	// ShuttingDown: registered, unfenced, in a controlled shutdown.
	ShuttingDown(id int32) bool
}

// Leadership is the part of a partition's state the controller's rules
// decide: its leader and leader epoch, the ISR and the Eligible Leader
// Replicas (KIP-966), and the last known leader of a partition left
// without one.
type Leadership struct {
	Leader       int32
	LeaderEpoch  int32
	ISR          []int32
	ELR          []int32
	LastKnownELR []int32
}

// Clone is l with slices of its own.
func (l Leadership) Clone() Leadership {
	l.ISR, l.ELR, l.LastKnownELR = slices.Clone(l.ISR), slices.Clone(l.ELR), slices.Clone(l.LastKnownELR)
	return l
}

// Equal reports whether l and o are the same leadership.
func (l Leadership) Equal(o Leadership) bool {
	return l.Leader == o.Leader && l.LeaderEpoch == o.LeaderEpoch && slices.Equal(l.ISR, o.ISR) &&
		slices.Equal(l.ELR, o.ELR) && slices.Equal(l.LastKnownELR, o.LastKnownELR)
}

// SetISR returns from with isr as its ISR, and the Eligible Leader
// Replicas kept (KIP-966): while the ISR is at least minISR there are
// none (nor a last known leader); below it, every replica that was in the
// ISR or the ELR and is not in the new ISR is one — the high watermark
// does not move while the ISR is that small, so each holds every record
// below it — except a broker back from an unclean shutdown, which may
// have lost some. A partition of one replica keeps its replica eligible
// whatever its shutdown: no other copy could be better.
func SetISR(b Brokers, replicas []int32, from Leadership, isr []int32, minISR int) Leadership {
	to := from.Clone()
	if isr == nil {
		isr = []int32{} // (an empty ISR, never a state without one)
	}
	to.ISR = isr
	if len(isr) >= minISR {
		to.ELR, to.LastKnownELR = nil, nil
		return to
	}
	var elr []int32
	for _, r := range append(slices.Clone(from.ELR), from.ISR...) {
		if slices.Contains(isr, r) || slices.Contains(elr, r) || !slices.Contains(replicas, r) {
			continue
		}
		if b.UncleanRestart(r) && len(replicas) > 1 {
			continue
		}
		elr = append(elr, r)
	}
	to.ELR = elr
	return to
}

// Elect returns a partition's next leadership, and whether it changes
// (KRaft's rules, with KIP-966's):
//   - a broker that is not live (gone, fenced, shutting down) leaves the
//     ISR; the ELR is kept as SetISR says, and a fenced broker back from
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
func Elect(b Brokers, replicas []int32, st Leadership, minISR int, unclean bool) (Leadership, bool) {
	var isr []int32
	for _, r := range st.ISR {
		if b.Live(r) {
			isr = append(isr, r)
		}
	}
	if b.ShuttingDown(st.Leader) && len(isr) == 0 && slices.Contains(st.ISR, st.Leader) {
		return st, false
	}
	to := SetISR(b, replicas, st, isr, minISR)
	if !b.Live(st.Leader) || !slices.Contains(to.ISR, st.Leader) {
		to.Leader = NoLeader
		for _, r := range replicas {
			if b.Live(r) && slices.Contains(to.ISR, r) {
				to.Leader = r
				break
			}
		}
		if to.Leader == NoLeader && len(to.ISR) == 0 {
			for _, r := range replicas {
				if b.Live(r) && slices.Contains(to.ELR, r) {
					to.Leader, to.ISR = r, []int32{r}
					to.ELR = slices.DeleteFunc(to.ELR, func(e int32) bool { return e == r })
					break
				}
			}
		}
		if to.Leader == NoLeader && unclean {
			if r := UncleanLeader(b, replicas, st); r != NoLeader {
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
	if to.Equal(st) {
		return st, false
	}
	return to, true
}

// UncleanLeader is an unclean election's choice: the last known leader
// if it is live, else the first live replica; NoLeader when none is.
func UncleanLeader(b Brokers, replicas []int32, st Leadership) int32 {
	if len(st.LastKnownELR) == 1 && b.Live(st.LastKnownELR[0]) && slices.Contains(replicas, st.LastKnownELR[0]) {
		return st.LastKnownELR[0]
	}
	for _, r := range replicas {
		if b.Live(r) {
			return r
		}
	}
	return NoLeader
}

// ElectPreferred moves the leadership to the preferred replica (the
// first of the assignment) at the next leader epoch: needed is false when
// it leads already (or there is none); ok is false when it may not lead
// (not live, or not in the ISR). The leader it replaces may still act
// as leader until it learns of the change: what it appends meanwhile is
// never acknowledged (the new leader does not fetch it) and is truncated
// when it follows.
func ElectPreferred(b Brokers, replicas []int32, st Leadership) (to Leadership, needed, ok bool) {
	if len(replicas) == 0 || st.Leader == replicas[0] {
		return st, false, false
	}
	pref := replicas[0]
	if !b.Live(pref) || !slices.Contains(st.ISR, pref) {
		return st, true, false
	}
	to = st.Clone()
	to.Leader, to.LeaderEpoch = pref, st.LeaderEpoch+1
	return to, true, true
}
