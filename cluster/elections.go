package cluster

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/replica/state"
)

// ElectionType is an asked-for election's kind (ElectLeaders).
type ElectionType int8

const (
	// PreferredElection makes a partition's preferred replica (the first
	// of its assignment) its leader, if it is live and in the ISR.
	PreferredElection ElectionType = 0
	// UncleanElection gives a partition with no leader one: a live ISR
	// member if there is one, else any live replica (which may lose what
	// only the ISR held).
	UncleanElection ElectionType = 1
)

var (
	// ErrElectionNotNeeded: the partition already has the leader the
	// election would give it (its preferred one; any, for unclean).
	ErrElectionNotNeeded = seglog.NewKafkaError("cluster: election not needed", 84) // ELECTION_NOT_NEEDED
	// ErrPreferredLeaderNotAvailable: the preferred replica is not live
	// or not in the ISR.
	ErrPreferredLeaderNotAvailable = seglog.NewKafkaError("cluster: the preferred leader is not available", 80) // PREFERRED_LEADER_NOT_AVAILABLE
	// ErrEligibleLeadersNotAvailable: no replica of the partition is live.
	ErrEligibleLeadersNotAvailable = seglog.NewKafkaError("cluster: no eligible leader is available", 83) // ELIGIBLE_LEADERS_NOT_AVAILABLE
)

// TopicPartition names a partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// changeRounds bounds how often a change of a partition's state
// (ElectLeaders, PublishTier) is computed again after its write lost a
// race with another change of the state.
const changeRounds = 20

// ElectLeaders runs elections of the type for the partitions (nil: every
// partition of every topic), as Kafka's ElectLeaders: each partition's
// outcome is nil (elected; this broker's snapshot has it when the call
// returns) or ErrElectionNotNeeded, ErrPreferredLeaderNotAvailable,
// ErrEligibleLeadersNotAvailable, ErrUnknownTopic. Asked for every
// partition, those that need no election are left out of the outcomes.
// Any broker may call it: each write compares the partition's state it
// read, as the controller's do.
func (m *Member) ElectLeaders(ctx context.Context, typ ElectionType, parts []TopicPartition) (map[TopicPartition]error, error) {
	all := parts == nil
	if all {
		parts = allPartitions(m.Snapshot())
	}
	out := make(map[TopicPartition]error, len(parts))
	pending := parts
	for round := 0; len(pending) > 0; round++ {
		if round == changeRounds {
			for _, tp := range pending {
				out[tp] = fmt.Errorf("%w: %s-%d changed %d times while it was elected", ErrStaleState, tp.Topic, tp.Partition, round)
			}
			break
		}
		s := m.Snapshot()
		var changes []change
		for _, tp := range pending {
			to, from, err := electAsked(s, typ, tp)
			if err != nil {
				out[tp] = err
				continue
			}
			changes = append(changes, change{topic: tp.Topic, partition: tp.Partition, from: from, to: to})
			out[tp] = nil
		}
		failed, err := m.writeStates(ctx, nil, changes)
		if err != nil {
			return nil, err
		}
		pending = pending[:0:0]
		for _, c := range failed {
			pending = append(pending, TopicPartition{c.topic, c.partition})
		}
	}
	if all {
		for tp, err := range out {
			if err == ErrElectionNotNeeded {
				delete(out, tp)
			}
		}
	}
	return out, nil
}

// allPartitions lists every partition of the snapshot, in order.
func allPartitions(s *Snapshot) []TopicPartition {
	var out []TopicPartition
	for _, name := range slices.Sorted(maps.Keys(s.Topics)) {
		for p := range s.Topics[name].Partitions {
			out = append(out, TopicPartition{name, int32(p)})
		}
	}
	return out
}

// electAsked computes an asked-for election of one partition: its new
// state and the one it replaces.
func electAsked(s *Snapshot, typ ElectionType, tp TopicPartition) (to, from PartitionState, err error) {
	t, ok := s.Topics[tp.Topic]
	if !ok || tp.Partition < 0 || int(tp.Partition) >= len(t.Partitions) {
		return to, from, fmt.Errorf("%w: %s-%d", ErrUnknownTopic, tp.Topic, tp.Partition)
	}
	from, replicas := t.Partitions[tp.Partition], t.Replicas[tp.Partition]
	switch typ {
	case PreferredElection:
		to, err = electPreferred(s, replicas, from)
	case UncleanElection:
		to, err = electUnclean(s, replicas, from)
	default:
		err = fmt.Errorf("%w: election type %d", ErrInvalidAssignment, typ)
	}
	return to, from, err
}

// electPreferred moves the leadership to the preferred replica
// (state.ElectPreferred).
func electPreferred(s *Snapshot, replicas []int32, st PartitionState) (PartitionState, error) {
	if len(replicas) == 0 || st.Leader == replicas[0] {
		return st, ErrElectionNotNeeded
	}
	l, _, ok := state.ElectPreferred(brokerView{s}, replicas, st.leadership())
	if !ok {
		pref := replicas[0]
		return st, fmt.Errorf("%w: broker %d (live %v, in the ISR %v)", ErrPreferredLeaderNotAvailable, pref, s.Live(pref), st.ISR)
	}
	to := st.next()
	to.setLeadership(l)
	return to, nil
}

// electUnclean gives a leaderless partition a leader: a live ISR member
// first, then a live eligible leader replica (KIP-966), else the last
// known leader if it is live, else any live replica (the ISR becoming
// that replica alone).
func electUnclean(s *Snapshot, replicas []int32, st PartitionState) (PartitionState, error) {
	if st.Leader != NoLeader {
		return st, ErrElectionNotNeeded
	}
	to := st.next()
	to.LeaderEpoch++
	to.LastKnownELR = nil
	for _, r := range replicas {
		if s.Live(r) && st.InISR(r) {
			to.Leader = r
			return to, nil
		}
	}
	for _, r := range replicas {
		if s.Live(r) && st.InELR(r) {
			to.Leader, to.ISR = r, []int32{r}
			to.ELR = slices.DeleteFunc(to.ELR, func(e int32) bool { return e == r })
			return to, nil
		}
	}
	if r := uncleanLeader(s, replicas, st); r != NoLeader {
		to.Leader, to.ISR, to.ELR = r, []int32{r}, nil
		return to, nil
	}
	return st, fmt.Errorf("%w: none of replicas %v is live", ErrEligibleLeadersNotAvailable, replicas)
}

// imbalanced lists the partitions whose preferred replica could lead but
// does not, on each broker whose share of such partitions, among those it
// is the preferred replica of, is above percent (Kafka's
// leader.imbalance.per.broker.percentage): the automatic rebalance's
// preferred elections.
func imbalanced(s *Snapshot, percent int) []TopicPartition {
	preferred := map[int32]int{}
	notLeading := map[int32][]TopicPartition{}
	for _, tp := range allPartitions(s) {
		t := s.Topics[tp.Topic]
		replicas, st := t.Replicas[tp.Partition], t.Partitions[tp.Partition]
		if len(replicas) == 0 || st.ISR == nil {
			continue
		}
		pref := replicas[0]
		preferred[pref]++
		if st.Leader != pref && s.Live(pref) && st.InISR(pref) {
			notLeading[pref] = append(notLeading[pref], tp)
		}
	}
	var out []TopicPartition
	for _, b := range slices.Sorted(maps.Keys(notLeading)) {
		if len(notLeading[b])*100 > percent*preferred[b] {
			out = append(out, notLeading[b]...)
		}
	}
	return out
}
