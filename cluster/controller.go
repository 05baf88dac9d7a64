package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// maxTxnOps bounds the operations of one etcd transaction (etcd's
// default --max-txn-ops is 128): a compare and a put for each partition.
const maxTxnOps = 128

// runController keeps every partition's leadership right while this
// broker holds the election e: at each change of the snapshot it computes
// what the live brokers imply (elect) and writes it, each partition's
// write comparing the state it read and the election it holds.
func (m *Member) runController(ctx context.Context, e *concurrency.Election) {
	guard := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(e.Key()), "=", e.Rev())}
	var rebalance <-chan time.Time
	if m.opts.AutoLeaderRebalance {
		t := time.NewTicker(m.opts.LeaderImbalanceCheckInterval)
		defer t.Stop()
		rebalance = t.C
	}
	for ctx.Err() == nil {
		ch := m.Changed()
		snap := m.Snapshot()
		changes := m.elect(snap)
		if len(changes) > 0 {
			if _, err := m.writeStates(ctx, guard, changes); err != nil && ctx.Err() == nil {
				m.log.Warn("cluster: the controller's partition changes failed; retrying", "err", err, "partitions", len(changes))
				m.pause(100 * time.Millisecond)
				continue
			}
		}
		if err := m.completeReassignments(ctx, guard, snap); err != nil && ctx.Err() == nil {
			m.log.Warn("cluster: completing reassignments failed; retrying", "err", err)
			m.pause(100 * time.Millisecond)
			continue
		}
		if err := m.unfence(ctx, guard, snap); err != nil && ctx.Err() == nil {
			m.log.Warn("cluster: unfencing brokers failed; retrying", "err", err)
			m.pause(100 * time.Millisecond)
			continue
		}
		select {
		case <-ch:
		case <-rebalance:
			m.rebalanceLeaders(ctx, guard)
		case <-ctx.Done():
		}
	}
}

// unfence takes in the brokers registered fenced in snap, whose
// partitions' changes (their leaderships re-elected, and after an
// unclean shutdown their ISR and ELR places taken) elect has just
// written: each broker key is written unfenced comparing the revision
// snap had, so a newer registration stays fenced.
func (m *Member) unfence(ctx context.Context, guard []clientv3.Cmp, snap *Snapshot) error {
	for _, id := range snap.BrokerIDs() {
		b := snap.Brokers[id]
		if !b.Fenced {
			continue
		}
		key := m.prefix + keyBrokers + strconv.Itoa(int(id))
		u := b
		u.Fenced = false
		val, err := json.Marshal(u)
		if err != nil {
			return err
		}
		cmps := append(slices.Clone(guard), clientv3.Compare(clientv3.CreateRevision(key), "=", b.Registered),
			clientv3.Compare(clientv3.LeaseValue(key), "=", b.Epoch))
		resp, err := m.cli.Txn(ctx).If(cmps...).Then(clientv3.OpPut(key, string(val), clientv3.WithLease(clientv3.LeaseID(b.Epoch)))).Commit()
		if err != nil {
			return err
		}
		if resp.Succeeded {
			m.log.Info("cluster: broker unfenced", "broker", id, "clean_shutdown", b.CleanShutdown, "epoch", fmt.Sprintf("%x", b.Epoch))
			if err := m.Await(ctx, resp.Header.Revision); err != nil {
				return err
			}
		}
	}
	return nil
}

// rebalanceLeaders runs the preferred elections the automatic leader
// rebalance calls for (imbalanced); one that loses a race waits for the
// next check.
func (m *Member) rebalanceLeaders(ctx context.Context, guard []clientv3.Cmp) {
	s := m.Snapshot()
	var changes []change
	for _, tp := range imbalanced(s, m.opts.LeaderImbalancePercentage) {
		if to, from, err := electAsked(s, PreferredElection, tp); err == nil {
			changes = append(changes, change{topic: tp.Topic, partition: tp.Partition, from: from, to: to})
		}
	}
	if len(changes) == 0 {
		return
	}
	m.log.Info("cluster: moving leaderships back to preferred replicas", "partitions", len(changes))
	if _, err := m.writeStates(ctx, guard, changes); err != nil && ctx.Err() == nil {
		m.log.Warn("cluster: the leader rebalance failed; it runs again at the next check", "err", err)
	}
}

// change is a partition's new state, to be written over the one read.
type change struct {
	topic     string
	partition int32
	from, to  PartitionState
}

// elect computes the partition changes the snapshot calls for, each
// partition's by electOne (rules.go).
func (m *Member) elect(s *Snapshot) []change {
	var out []change
	names := make([]string, 0, len(s.Topics))
	for n := range s.Topics {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		t := s.Topics[name]
		unclean := m.opts.UncleanLeaderElection
		if v, ok := t.Configs["unclean.leader.election.enable"]; ok {
			unclean = v == "true"
		}
		for p, st := range t.Partitions {
			if st.ISR == nil {
				continue // (no state yet)
			}
			minISR := EffectiveMinISR(t.Configs, m.opts.MinInsyncReplicas, len(t.Replicas[p]))
			to, ok := electOne(s, t.Replicas[p], st, minISR, unclean)
			if ok {
				out = append(out, change{topic: name, partition: int32(p), from: st, to: to})
			}
		}
	}
	return out
}

// writeStates writes the changes in transactions of up to maxTxnOps
// operations, each comparing every partition's state and the guards (the
// controller's: its election); it returns the changes of transactions
// that failed their compares, for the caller to compute again from a
// newer snapshot — this member's snapshot has the writes that beat them
// by then (as PutDoc's conflicts: a retry must not find the same state).
func (m *Member) writeStates(ctx context.Context, guards []clientv3.Cmp, changes []change) (failed []change, err error) {
	for len(changes) > 0 {
		n := min(len(changes), (maxTxnOps-len(guards))/2)
		batch := changes[:n]
		changes = changes[n:]
		cmps := slices.Clone(guards)
		var ops []clientv3.Op
		for _, c := range batch {
			key := m.prefix + partitionKey(c.topic, c.partition)
			val, err := json.Marshal(c.to)
			if err != nil {
				return failed, err
			}
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(key), "=", c.from.rev))
			ops = append(ops, clientv3.OpPut(key, string(val)))
		}
		resp, err := m.cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
		if err != nil {
			return failed, err
		}
		if !resp.Succeeded {
			failed = append(failed, batch...)
			if err := m.Await(ctx, resp.Header.Revision); err != nil {
				return failed, err
			}
			continue
		}
		for _, c := range batch {
			if c.to.Leader != c.from.Leader {
				m.log.Info("cluster: leader elected", "topic", c.topic, "partition", c.partition,
					"leader", c.to.Leader, "leader_epoch", c.to.LeaderEpoch, "isr", c.to.ISR)
			}
		}
		if err := m.Await(ctx, resp.Header.Revision); err != nil {
			return failed, err
		}
	}
	return failed, nil
}
