package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/seglog/seglog"
)

// Partition reassignments (KIP-455), as KRaft's controller makes them: a
// reassignment adds the target's new replicas to the partition (its
// replicas become the target followed by those being removed, Adding and
// Removing in its state); the new replicas fetch like any follower and
// join the ISR once caught up; when every target replica is in the ISR
// the controller completes it — the replicas become the target, those
// removed leave the ISR (a removed leader hands its leadership to a
// target replica in the ISR, at the next epoch) — and the brokers no
// longer assigned drop their replicas.

// ErrNoReassignmentInProgress is a cancellation of a partition that is
// not being reassigned.
var ErrNoReassignmentInProgress = seglog.NewKafkaError("cluster: no reassignment in progress", 85) // NO_REASSIGNMENT_IN_PROGRESS

// Reassignment is a partition's reassignment in progress.
type Reassignment struct {
	Topic     string
	Partition int32
	// Replicas are the partition's replicas now (the target's, then those
	// being removed).
	Replicas, Adding, Removing []int32
}

// Reassignments lists the reassignments in progress, by topic and
// partition.
func (s *Snapshot) Reassignments() []Reassignment {
	var out []Reassignment
	for _, tp := range allPartitions(s) {
		t := s.Topics[tp.Topic]
		if st := t.Partitions[tp.Partition]; st.Reassigning() {
			out = append(out, Reassignment{Topic: tp.Topic, Partition: tp.Partition, Replicas: t.Replicas[tp.Partition],
				Adding: st.Adding, Removing: st.Removing})
		}
	}
	return out
}

// Reassign starts a reassignment of a partition to target (its new
// replicas, the first the preferred leader), replacing one in progress;
// with target nil it cancels the one in progress (the replicas being
// added go, those being removed stay). It returns once this broker's
// snapshot has the change. Any broker may call it: the write compares
// the topic and the partition's state it read.
func (m *Member) Reassign(ctx context.Context, topic string, p int32, target []int32) error {
	_, err := m.rewriteTopic(ctx, topic, "reassigning a partition of", func(s *Snapshot, t *TopicState) ([]clientv3.Op, []clientv3.Cmp, error) {
		if p < 0 || int(p) >= len(t.Partitions) {
			return nil, nil, fmt.Errorf("%w: %s-%d", ErrUnknownTopic, topic, p)
		}
		st, cur := t.Partitions[p], t.Replicas[p]
		var replicas []int32
		var to PartitionState
		var err error
		if target == nil {
			replicas, to, err = cancelReassignment(s, t, cur, st, m.opts.UncleanLeaderElection)
		} else {
			replicas, to, err = startReassignment(s, cur, st, target)
		}
		if err != nil {
			return nil, nil, err
		}
		return m.reassignOps(t, map[int32][]int32{p: replicas}, map[int32]PartitionState{p: to})
	})
	return err
}

// reassignOps are the writes of new replicas and states of partitions of
// t, and the compares of the states they replace (the topic's own is
// rewriteTopic's).
func (m *Member) reassignOps(t *TopicState, replicas map[int32][]int32, states map[int32]PartitionState) ([]clientv3.Op, []clientv3.Cmp, error) {
	nt := t.Topic
	nt.Replicas = slices.Clone(t.Replicas)
	nt.Configs, nt.Initial = maps.Clone(t.Configs), slices.Clone(t.Initial)
	for p, rs := range replicas {
		nt.Replicas[p] = rs
	}
	put, err := m.topicPut(&nt)
	if err != nil {
		return nil, nil, err
	}
	ops := []clientv3.Op{put}
	var cmps []clientv3.Cmp
	for _, p := range slices.Sorted(maps.Keys(states)) {
		val, err := json.Marshal(states[p])
		if err != nil {
			return nil, nil, err
		}
		key := m.prefix + partitionKey(t.Name, p)
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(key), "=", t.Partitions[p].rev))
		ops = append(ops, clientv3.OpPut(key, string(val)))
	}
	return ops, cmps, nil
}

// checkTarget refuses a target with no replica, a replica twice, or a
// broker that is not registered (INVALID_REPLICA_ASSIGNMENT).
func checkTarget(s *Snapshot, target []int32) error {
	if len(target) == 0 {
		return fmt.Errorf("%w: the target has no replica", ErrInvalidAssignment)
	}
	for i, r := range target {
		if slices.Contains(target[:i], r) {
			return fmt.Errorf("%w: broker %d is in the target twice", ErrInvalidAssignment, r)
		}
		if _, ok := s.Brokers[r]; !ok {
			return fmt.Errorf("%w: broker %d of the target is not registered", ErrInvalidAssignment, r)
		}
	}
	return nil
}

// startReassignment computes a partition's replicas and state once a
// reassignment to target starts (completed at once when the ISR already
// allows, as when replicas are only reordered).
func startReassignment(s *Snapshot, cur []int32, st PartitionState, target []int32) ([]int32, PartitionState, error) {
	if err := checkTarget(s, target); err != nil {
		return nil, st, err
	}
	removing := sortedMinus(cur, target)
	replicas := append(slices.Clone(target), removing...)
	to := st.next()
	to.Adding, to.Removing = sortedMinus(target, cur), removing
	if len(to.Adding) == 0 {
		to.Adding = nil
	}
	if len(to.Removing) == 0 {
		to.Removing = nil
	}
	if !to.Reassigning() {
		return replicas, to, nil // (the same replicas, perhaps reordered: nothing to wait for)
	}
	if done, ok := completeIn(s, replicas, &to); ok {
		return done, to, nil
	}
	return replicas, to, nil
}

// completeIn completes the reassignment in to (a state not yet written)
// if every target replica is in the ISR and one of them is live to lead:
// it returns the replicas then (to changed in place), or false.
func completeIn(s *Snapshot, replicas []int32, to *PartitionState) ([]int32, bool) {
	if !to.Reassigning() {
		return nil, false
	}
	isr := minus(to.ISR, to.Removing)
	target := minus(replicas, to.Removing)
	if len(isr) == 0 || len(target) == 0 {
		return nil, false
	}
	for _, r := range target {
		if !slices.Contains(isr, r) {
			return nil, false
		}
	}
	leader := to.Leader
	if !slices.Contains(target, leader) || !s.Live(leader) {
		leader = NoLeader
		for _, r := range target {
			if s.Live(r) {
				leader = r
				break
			}
		}
		if leader == NoLeader {
			return nil, false // (no target replica is live to lead: wait)
		}
	}
	if leader != to.Leader {
		to.Leader, to.LeaderEpoch = leader, to.LeaderEpoch+1
	}
	to.ISR, to.Adding, to.Removing = isr, nil, nil
	return target, true
}

// cancelReassignment computes a partition's replicas and state once the
// reassignment in progress is cancelled: the replicas being added leave
// the replicas and the ISR; if none of the ISR is left, only an unclean
// election (the topic's or the broker's unclean.leader.election.enable)
// may give it a replica outside the ISR, as Kafka.
func cancelReassignment(s *Snapshot, t *TopicState, cur []int32, st PartitionState, uncleanDefault bool) ([]int32, PartitionState, error) {
	if !st.Reassigning() {
		return nil, st, fmt.Errorf("%w: %s", ErrNoReassignmentInProgress, t.Name)
	}
	replicas := minus(cur, st.Adding)
	to := st.next()
	to.ISR, to.Adding, to.Removing = minus(st.ISR, st.Adding), nil, nil
	if len(to.ISR) == 0 {
		unclean := uncleanDefault
		if v, ok := t.Configs["unclean.leader.election.enable"]; ok {
			unclean = v == "true"
		}
		if !unclean {
			return nil, st, fmt.Errorf("%w: cancelling would leave the ISR empty (an unclean leader election)", ErrInvalidAssignment)
		}
		to.ISR = replicas[:1:1]
	}
	if !slices.Contains(to.ISR, to.Leader) || !s.Live(to.Leader) {
		leader := NoLeader
		for _, r := range replicas {
			if s.Live(r) && slices.Contains(to.ISR, r) {
				leader = r
				break
			}
		}
		to.Leader, to.LeaderEpoch = leader, to.LeaderEpoch+1
	}
	return replicas, to, nil
}

// completions are the reassignments of topic t the snapshot lets the
// controller complete: their replicas and states.
func completions(s *Snapshot, t *TopicState) (map[int32][]int32, map[int32]PartitionState) {
	var replicas map[int32][]int32
	var states map[int32]PartitionState
	for p, st := range t.Partitions {
		if !st.Reassigning() {
			continue
		}
		to := st.next()
		done, ok := completeIn(s, t.Replicas[p], &to)
		if !ok {
			continue
		}
		if replicas == nil {
			replicas, states = map[int32][]int32{}, map[int32]PartitionState{}
		}
		replicas[int32(p)], states[int32(p)] = done, to
		if len(states) == maxTxnOps/2-2 {
			break // (the rest at the next round)
		}
	}
	return replicas, states
}

// completeReassignments writes, topic by topic, the completions the
// snapshot allows, each transaction comparing the controller's election,
// the topic and the partitions' states; one that loses a race is
// computed again at the next snapshot.
func (m *Member) completeReassignments(ctx context.Context, guard []clientv3.Cmp, s *Snapshot) error {
	for _, name := range slices.Sorted(maps.Keys(s.Topics)) {
		t := s.Topics[name]
		replicas, states := completions(s, t)
		if len(states) == 0 {
			continue
		}
		ops, cmps, err := m.reassignOps(t, replicas, states)
		if err != nil {
			return err
		}
		cmps = append(cmps, guard...)
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(m.prefix+keyTopics+name), "=", t.rev))
		resp, err := m.cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
		if err != nil {
			return err
		}
		if !resp.Succeeded {
			continue
		}
		for _, p := range slices.Sorted(maps.Keys(states)) {
			m.log.Info("cluster: reassignment completed", "topic", name, "partition", p, "replicas", replicas[p],
				"leader", states[p].Leader, "leader_epoch", states[p].LeaderEpoch)
		}
		if err := m.Await(ctx, resp.Header.Revision); err != nil {
			return err
		}
	}
	return nil
}

// minus is a without the members of b, in a's order.
func minus(a, b []int32) []int32 {
	out := make([]int32, 0, len(a))
	for _, r := range a {
		if !slices.Contains(b, r) {
			out = append(out, r)
		}
	}
	return out
}

// sortedMinus is a without the members of b, sorted (Kafka's order of
// adding and removing replicas).
func sortedMinus(a, b []int32) []int32 {
	out := minus(a, b)
	slices.Sort(out)
	return out
}
