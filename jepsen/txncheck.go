package jepsen

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// The txn workload's anomaly kinds (Jepsen's names, Adya's numbers).
const (
	// AbortedRead (G1a): a read_committed read returned a value an
	// aborted transaction wrote.
	AbortedRead = "aborted-read"
	// IntermediateRead (G1b): a read_committed read returned a value of
	// a transaction before that transaction was asked to commit — a read
	// of its state in progress.
	IntermediateRead = "intermediate-read"
	// Cycle (G1c): committed transactions that read each other's writes,
	// around a cycle: each would have committed before the other.
	Cycle = "cycle"
	// OffsetRegression: a read of the group's committed offsets (with
	// require_stable) below what a transaction that had already
	// committed committed for that partition.
	OffsetRegression = "offset-regression"
)

// txn is one transaction of a history.
type txn struct {
	id, process string
	// outcome is its last op's type (ok: committed, fail: aborted, info:
	// unknown; invoke: never ended); invoked and end are the times it
	// began (after its reads) and was asked to end (-1: never).
	outcome      OpType
	invoked, end int64
	sent, reads  []Record
}

// checkTxns judges the txn workload's ops. Its committed writes are
// checked as acknowledged sends (lost, unseen, duplicate, inconsistent
// offsets: checkLog), its reads for G1a and G1b, its committed
// transactions' read dependencies for cycles (write-write orders are
// not checked: Kafka does not isolate concurrent producers from each
// other, and Jepsen found such G0 cycles in Kafka by design), and the
// group's offsets for regression.
func checkTxns(ops []Op, r *Result) {
	txns := map[string]*txn{}
	var order []*txn
	var log []Op // the transactions as sends and reads, for checkLog
	for _, op := range ops {
		switch op.F {
		case "txn":
			if op.Type == Invoke {
				t := &txn{id: op.Txn, process: op.Process, outcome: Invoke, invoked: op.Time, end: -1, reads: op.Reads}
				txns[op.Txn], order = t, append(order, t)
				log = append(log, Op{Time: op.Time, Process: op.Process, Type: OK, F: "read", Value: op.Reads})
				continue
			}
			t := txns[op.Txn]
			if t == nil {
				continue
			}
			t.outcome, t.sent = op.Type, op.Value
			switch op.Type {
			case OK:
				log = append(log, Op{Time: op.Time, Process: op.Process, Type: OK, F: "send", Value: op.Value})
			case Info:
				log = append(log, Op{Time: op.Time, Process: op.Process, Type: Info, F: "send", Value: op.Value})
			}
		case "end":
			if t := txns[op.Txn]; t != nil {
				t.end = op.Time
			}
		case "txn-final":
			if op.Type == OK {
				log = append(log, Op{Time: op.Time, Process: op.Process, Type: OK, F: "final", Value: op.Value})
			}
		}
	}
	if len(order) == 0 {
		return
	}
	checkLog(log, r, false)
	writer := map[string]*txn{}
	for _, t := range order {
		for _, rec := range t.sent {
			writer[rec.Value] = t
		}
		r.Txns[t.outcome]++
	}
	// G1a and G1b over every read: the transactions' and the final one.
	checkRead := func(who string, at int64, recs []Record) {
		for _, rec := range recs {
			w := writer[rec.Value]
			switch {
			case w == nil:
			case w.outcome == Fail:
				r.add(AbortedRead, fmt.Sprintf("%s read %q at %d/%d, written by %s, which aborted", who, rec.Value, rec.Partition, rec.Offset, w.id))
			case w.outcome == OK && at < w.end:
				r.add(IntermediateRead, fmt.Sprintf("%s read %q at %d/%d before %s, which wrote it, was asked to commit",
					who, rec.Value, rec.Partition, rec.Offset, w.id))
			}
		}
	}
	for _, t := range order {
		checkRead(t.id, t.invoked, t.reads)
	}
	for _, op := range log {
		if op.F == "final" {
			checkRead("the final read", op.Time, op.Value)
		}
	}
	checkCycles(order, writer, r)
	checkOffsets(ops, txns, r)
}

// checkCycles finds cycles of read dependencies (T1 wrote what T2 read)
// among committed transactions: the strongly connected components of
// more than one transaction (Tarjan's algorithm).
func checkCycles(order []*txn, writer map[string]*txn, r *Result) {
	edges := map[*txn][]*txn{}
	for _, t := range order {
		if t.outcome != OK {
			continue
		}
		seen := map[*txn]bool{}
		for _, rec := range t.reads {
			if w := writer[rec.Value]; w != nil && w != t && w.outcome == OK && !seen[w] {
				seen[w] = true
				edges[w] = append(edges[w], t)
			}
		}
	}
	index, low, onStack := map[*txn]int{}, map[*txn]int{}, map[*txn]bool{}
	var stack []*txn
	var visit func(t *txn)
	visit = func(t *txn) {
		index[t], low[t] = len(index), len(index)
		stack, onStack[t] = append(stack, t), true
		for _, u := range edges[t] {
			if _, ok := index[u]; !ok {
				visit(u)
				low[t] = min(low[t], low[u])
			} else if onStack[u] {
				low[t] = min(low[t], index[u])
			}
		}
		if low[t] != index[t] {
			return
		}
		var scc []string
		for {
			u := stack[len(stack)-1]
			stack, onStack[u] = stack[:len(stack)-1], false
			scc = append(scc, u.id)
			if u == t {
				break
			}
		}
		if len(scc) > 1 {
			slices.Sort(scc)
			r.add(Cycle, fmt.Sprintf("committed transactions reading each other's writes: %s", strings.Join(scc, ", ")))
		}
	}
	for _, t := range order {
		if _, ok := index[t]; !ok && t.outcome == OK {
			visit(t)
		}
	}
}

// checkOffsets walks the history in order: a read of the group's offsets
// must find, for every partition, at least the offset the last committed
// transaction that had ended before the read began committed for it (the
// offset after the last record it read there).
func checkOffsets(ops []Op, txns map[string]*txn, r *Result) {
	floor := map[int32]int64{}
	floorBy := map[int32]string{}
	var asked map[int32]int64 // the floor when the pending read began
	var askedBy map[int32]string
	for _, op := range ops {
		switch {
		case op.F == "txn" && op.Type == OK:
			t := txns[op.Txn]
			if t == nil {
				continue
			}
			for _, rec := range t.reads {
				if rec.Offset+1 > floor[rec.Partition] {
					floor[rec.Partition], floorBy[rec.Partition] = rec.Offset+1, t.id
				}
			}
		case op.F == "offsets" && op.Type == Invoke:
			asked, askedBy = maps.Clone(floor), maps.Clone(floorBy)
		case op.F == "offsets" && op.Type == OK:
			got := map[int32]int64{}
			for _, rec := range op.Value {
				got[rec.Partition] = rec.Offset
			}
			for _, p := range slices.Sorted(maps.Keys(asked)) {
				if g, ok := got[p]; !ok || g < asked[p] {
					if !ok {
						g = -1
					}
					r.add(OffsetRegression, fmt.Sprintf("the group's offset of partition %d read as %d after %s committed %d", p, g, askedBy[p], asked[p]))
				}
			}
		}
	}
}
