package jepsen

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// Anomaly kinds the checker counts.
const (
	Lost                = "lost"
	Unseen              = "unseen"
	Duplicate           = "duplicate"
	InconsistentOffsets = "inconsistent-offsets"
	NonMonotonicSend    = "nonmonotonic-send"
	NonMonotonicPoll    = "nonmonotonic-poll"
	PollSkip            = "poll-skip"
	anomalyExampleLimit = 8
)

// Kinds are the anomaly kinds in the order the report lists them.
var Kinds = []string{Lost, Unseen, Duplicate, InconsistentOffsets, NonMonotonicSend, NonMonotonicPoll, PollSkip,
	AbortedRead, IntermediateRead, Cycle, OffsetRegression}

// Result is what the checker found in a history.
type Result struct {
	// Sent, Acked and Unknown count the sends: invoked, acknowledged
	// (ok), and with an unknown outcome (info).
	Sent, Acked, Unknown int
	// Read is how many distinct values were read.
	Read int
	// Txns counts the txn workload's transactions by outcome (ok:
	// committed, fail: aborted, info: unknown, invoke: never ended).
	Txns map[OpType]int
	// Counts counts each anomaly kind; Examples holds a few of each, as
	// words naming the records involved.
	Counts   map[string]int
	Examples map[string][]string
}

// Valid reports whether the history has no anomaly.
func (r *Result) Valid() bool {
	for _, n := range r.Counts {
		if n > 0 {
			return false
		}
	}
	return true
}

func (r *Result) add(kind, example string) {
	r.Counts[kind]++
	if len(r.Examples[kind]) < anomalyExampleLimit {
		r.Examples[kind] = append(r.Examples[kind], example)
	}
}

// Table is the anomaly table, a line each kind.
func (r *Result) Table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "sent %d, acknowledged %d, unknown %d, values read %d\n", r.Sent, r.Acked, r.Unknown, r.Read)
	if len(r.Txns) > 0 {
		fmt.Fprintf(&b, "transactions: %d committed, %d aborted, %d unknown\n", r.Txns[OK], r.Txns[Fail], r.Txns[Info]+r.Txns[Invoke])
	}
	for _, k := range Kinds {
		fmt.Fprintf(&b, "  %-22s %d\n", k, r.Counts[k])
		for _, e := range r.Examples[k] {
			fmt.Fprintf(&b, "      %s\n", e)
		}
	}
	return b.String()
}

type po struct {
	p int32
	o int64
}

// Check judges a history: the queue workload's ops, and the txn
// workload's (checkTxns).
func Check(ops []Op) *Result {
	r := &Result{Counts: map[string]int{}, Examples: map[string][]string{}, Txns: map[OpType]int{}}
	for _, k := range Kinds {
		r.Counts[k] = 0
	}
	at := checkLog(ops, r, true)
	checkPolls(ops, at, r)
	checkTxns(ops, r)
	return r
}

// checkLog judges one topic's sends and reads: send ops (invoke, ok with
// the offsets, info), and reads — a consumer's poll, a read of another
// kind ("read", not checked for order), the final read. With count, the
// sends and values read are counted in r. It returns the values read at
// each offset.
func checkLog(ops []Op, r *Result, count bool) map[po]map[string]bool {
	var nSent, nAcked, nUnknown int
	acked := map[string]po{}     // value → where acknowledged
	unknown := map[string]bool{} // values sent with an unknown outcome
	ackedBy := map[string]string{}
	// values[o] per partition: the values read at each offset.
	at := map[po]map[string]bool{}
	readAt := map[string]map[po]bool{} // value → offsets read at
	maxRead := map[int32]int64{}       // partition → highest offset read
	// The final read, if there is one: what the log holds at the end.
	final := map[string]po{}
	finalMax := map[int32]int64{}
	hasFinal := false
	lastSend := map[string]map[int32]Record{}
	for _, op := range ops {
		switch {
		case op.F == "send" && op.Type == Invoke:
			nSent++
		case op.F == "send" && op.Type == OK:
			for _, rec := range op.Value {
				acked[rec.Value] = po{rec.Partition, rec.Offset}
				ackedBy[rec.Value] = op.Process
				nAcked++
				last, ok := lastSend[op.Process][rec.Partition]
				if ok && rec.Offset <= last.Offset {
					r.add(NonMonotonicSend, fmt.Sprintf("%s: %q acknowledged at %d/%d after %q at %d/%d", op.Process, rec.Value,
						rec.Partition, rec.Offset, last.Value, last.Partition, last.Offset))
				}
				if lastSend[op.Process] == nil {
					lastSend[op.Process] = map[int32]Record{}
				}
				lastSend[op.Process][rec.Partition] = rec
			}
		case op.F == "send" && op.Type == Info:
			for _, rec := range op.Value {
				unknown[rec.Value] = true
				nUnknown++
			}
		case (op.F == "poll" || op.F == "read" || op.F == "final") && op.Type == OK:
			for _, rec := range op.Value {
				k := po{rec.Partition, rec.Offset}
				if at[k] == nil {
					at[k] = map[string]bool{}
				}
				at[k][rec.Value] = true
				if readAt[rec.Value] == nil {
					readAt[rec.Value] = map[po]bool{}
				}
				readAt[rec.Value][k] = true
				if o, ok := maxRead[rec.Partition]; !ok || rec.Offset > o {
					maxRead[rec.Partition] = rec.Offset
				}
				if op.F == "final" {
					final[rec.Value] = k
					if o, ok := finalMax[rec.Partition]; !ok || rec.Offset > o {
						finalMax[rec.Partition] = rec.Offset
					}
				}
			}
			hasFinal = hasFinal || op.F == "final"
		}
	}
	if count {
		r.Sent, r.Acked, r.Unknown, r.Read = nSent, nAcked, nUnknown, len(readAt)
	}
	// Inconsistent offsets: one offset, two values.
	for _, k := range sortedPOs(slices.Collect(maps.Keys(at))) {
		if vs := at[k]; len(vs) > 1 {
			r.add(InconsistentOffsets, fmt.Sprintf("offset %d/%d read as %s", k.p, k.o, strings.Join(slices.Sorted(maps.Keys(vs)), ", ")))
		}
	}
	// Duplicates: one value at two offsets.
	for _, v := range slices.Sorted(maps.Keys(readAt)) {
		if offs := readAt[v]; len(offs) > 1 {
			var where []string
			for _, k := range sortedPOs(slices.Collect(maps.Keys(offs))) {
				where = append(where, fmt.Sprintf("%d/%d", k.p, k.o))
			}
			r.add(Duplicate, fmt.Sprintf("%q read at %s", v, strings.Join(where, ", ")))
		}
	}
	// Acknowledged records: read where acknowledged, or lost, or unseen.
	for _, v := range slices.Sorted(maps.Keys(acked)) {
		a := acked[v]
		offs := readAt[v]
		fin, inFinal := final[v]
		switch {
		case hasFinal && !inFinal && finalMax[a.p] > a.o:
			what := "nothing"
			if vs := at[a]; len(vs) > 0 {
				what = strings.Join(slices.Sorted(maps.Keys(vs)), ", ")
			}
			r.add(Lost, fmt.Sprintf("%q acknowledged at %d/%d (by %s), not in the final read of offsets up to %d; read there: %s",
				v, a.p, a.o, ackedBy[v], finalMax[a.p], what))
		case inFinal && fin != a:
			r.add(InconsistentOffsets, fmt.Sprintf("%q acknowledged at %d/%d (by %s), at %d/%d at the end", v, a.p, a.o, ackedBy[v], fin.p, fin.o))
		case offs[a]:
		case len(offs) > 0:
			r.add(InconsistentOffsets, fmt.Sprintf("%q acknowledged at %d/%d (by %s), read elsewhere", v, a.p, a.o, ackedBy[v]))
		case maxRead[a.p] > a.o:
			what := "nothing"
			if vs := at[a]; len(vs) > 0 {
				what = strings.Join(slices.Sorted(maps.Keys(vs)), ", ")
			}
			r.add(Lost, fmt.Sprintf("%q acknowledged at %d/%d (by %s), never read; read there: %s; offsets up to %d read",
				v, a.p, a.o, ackedBy[v], what, maxRead[a.p]))
		default:
			r.add(Unseen, fmt.Sprintf("%q acknowledged at %d/%d (by %s), never read (offsets up to %d read)", v, a.p, a.o, ackedBy[v], maxRead[a.p]))
		}
	}
	return at
}

// checkPolls finds, per consumer and partition, reads that go back
// (non-monotonic poll) or jump over offsets another read saw (poll skip).
// A consumer's restart ("restart" op of its process) starts it afresh;
// at is every value read at each offset (checkLog's).
func checkPolls(ops []Op, at map[po]map[string]bool, r *Result) {
	last := map[string]map[int32]int64{}
	for _, op := range ops {
		if op.F == "restart" {
			delete(last, op.Process)
			continue
		}
		if op.F != "poll" || op.Type != OK {
			continue
		}
		if last[op.Process] == nil {
			last[op.Process] = map[int32]int64{}
		}
		for _, rec := range op.Value {
			prev, ok := last[op.Process][rec.Partition]
			last[op.Process][rec.Partition] = rec.Offset
			if !ok {
				continue
			}
			switch {
			case rec.Offset <= prev:
				r.add(NonMonotonicPoll, fmt.Sprintf("%s read %d/%d after %d/%d", op.Process, rec.Partition, rec.Offset, rec.Partition, prev))
			case rec.Offset > prev+1:
				for o := prev + 1; o < rec.Offset; o++ {
					if len(at[po{rec.Partition, o}]) > 0 {
						r.add(PollSkip, fmt.Sprintf("%s read %d/%d then %d/%d, skipping %d/%d (read elsewhere)", op.Process,
							rec.Partition, prev, rec.Partition, rec.Offset, rec.Partition, o))
						break
					}
				}
			}
		}
	}
}

func sortedPOs(in []po) []po {
	sort.Slice(in, func(i, j int) bool { return in[i].p < in[j].p || in[i].p == in[j].p && in[i].o < in[j].o })
	return in
}
