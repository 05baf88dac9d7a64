package jepsen

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog/record"
)

// send, read and rec make the ops and records of hand-made histories.
func send(proc string, typ OpType, p int32, o int64, v string) Op {
	return Op{Process: proc, Type: typ, F: "send", Value: []Record{{Partition: p, Offset: o, Value: v}}}
}

func read(proc, f string, recs ...Record) Op { return Op{Process: proc, Type: OK, F: f, Value: recs} }

func rec(p int32, o int64, v string) Record { return Record{Partition: p, Offset: o, Value: v} }

// Each anomaly is found in a history made to hold it, and only it; a
// clean history is valid.
func TestCheck(t *testing.T) {
	clean := []Op{
		send("producer-0", Invoke, 0, -1, "a"), send("producer-0", OK, 0, 0, "a"),
		send("producer-0", Invoke, 0, -1, "b"), send("producer-0", OK, 0, 1, "b"),
		send("producer-0", Invoke, 0, -1, "c"), send("producer-0", Info, 0, -1, "c"),
		read("consumer-0", "poll", rec(0, 0, "a")), read("consumer-0", "poll", rec(0, 1, "b")),
		read("final", "final", rec(0, 0, "a"), rec(0, 1, "b")),
	}
	r := Check(clean)
	require.True(t, r.Valid(), r.Table())
	require.Equal(t, 3, r.Sent)
	require.Equal(t, 2, r.Acked)
	require.Equal(t, 1, r.Unknown)

	for _, c := range []struct {
		kind string
		ops  []Op
		n    int
	}{
		{Lost, []Op{send("p", OK, 0, 0, "a"), send("p", OK, 0, 1, "b"), read("final", "final", rec(0, 1, "b"))}, 1},
		{Lost, []Op{send("p", OK, 0, 0, "a"), send("p", OK, 0, 1, "b"), read("c", "poll", rec(0, 1, "b"))}, 1},
		{Unseen, []Op{send("p", OK, 0, 0, "a"), send("p", OK, 0, 1, "b"), read("final", "final", rec(0, 0, "a"))}, 1},
		{Duplicate, []Op{send("p", OK, 0, 0, "a"), send("p", Info, 0, -1, "b"),
			read("final", "final", rec(0, 0, "a"), rec(0, 1, "b"), rec(0, 2, "b"))}, 1},
		{NonMonotonicSend, []Op{send("p", OK, 0, 5, "a"), send("p", OK, 0, 3, "b"), read("final", "final", rec(0, 3, "b"), rec(0, 5, "a"))}, 1},
		{NonMonotonicPoll, []Op{send("p", OK, 0, 0, "a"), send("p", OK, 0, 1, "b"),
			read("c", "poll", rec(0, 0, "a"), rec(0, 1, "b")), read("c", "poll", rec(0, 0, "a")),
			read("final", "final", rec(0, 0, "a"), rec(0, 1, "b"))}, 1},
		{PollSkip, []Op{send("p", OK, 0, 0, "a"), send("p", OK, 0, 1, "b"), send("p", OK, 0, 2, "c"),
			read("c", "poll", rec(0, 0, "a")), read("c", "poll", rec(0, 2, "c")),
			read("final", "final", rec(0, 0, "a"), rec(0, 1, "b"), rec(0, 2, "c"))}, 1},
	} {
		t.Run(c.kind, func(t *testing.T) {
			r := Check(c.ops)
			require.False(t, r.Valid())
			for _, k := range Kinds {
				want := 0
				if k == c.kind {
					want = c.n
				}
				require.Equal(t, want, r.Counts[k], "%s in:\n%s", k, r.Table())
			}
		})
	}

	// An offset read with two values: inconsistent, and the acknowledged
	// record replaced there is lost.
	r = Check([]Op{send("p", OK, 0, 0, "a"), send("p", OK, 0, 1, "b"), read("c", "poll", rec(0, 0, "a")),
		read("final", "final", rec(0, 0, "x"), rec(0, 1, "b"))})
	require.Equal(t, 1, r.Counts[InconsistentOffsets], r.Table())
	require.Equal(t, 1, r.Counts[Lost], r.Table())
	// A restarted consumer may read again from the start.
	r = Check([]Op{send("p", OK, 0, 0, "a"), read("c", "poll", rec(0, 0, "a")), {Process: "c", Type: Info, F: "restart"},
		read("c", "poll", rec(0, 0, "a")), read("final", "final", rec(0, 0, "a"))})
	require.True(t, r.Valid(), r.Table())
}

// A fault's window runs from its first nemesis op to its last heal
// before the next fault, and its stall is the longest time from its start
// without an acknowledged send.
func TestWindows(t *testing.T) {
	at := func(op Op, s float64) Op { op.Time = int64(s * 1e9); return op }
	ops := []Op{
		at(send("p", OK, 0, 0, "a"), 0.5),
		at(Op{Process: "nemesis", Type: Info, F: "power-cut"}, 1),
		at(send("p", OK, 0, 1, "b"), 1.5),
		at(Op{Process: "nemesis", Type: Info, F: "heal"}, 2),
		at(send("p", OK, 0, 2, "c"), 4.5), // 3 s without an acknowledgement
		at(Op{Process: "nemesis", Type: Info, F: "crash"}, 5),
		at(Op{Process: "nemesis", Type: Info, F: "crash"}, 5.5), // (the same fault's second step)
		at(Op{Process: "nemesis", Type: Info, F: "heal"}, 6),
		at(send("p", OK, 0, 3, "d"), 6.2),
	}
	w := Windows(ops)
	require.Len(t, w, 2)
	require.Equal(t, Window{Fault: "power-cut", Start: time.Second, End: 2 * time.Second, Stall: 3 * time.Second}, w[0])
	require.Equal(t, "crash", w[1].Fault)
	require.Equal(t, 6*time.Second, w[1].End)
	require.InDelta(t, 1.2, w[1].Stall.Seconds(), 1e-9)
	require.NoError(t, Plot(ops, filepath.Join(t.TempDir(), "p.png")))
}

// Replicas holding the same batches agree; one holding another batch at
// an offset both hold diverges; one holding less (a follower behind) does
// not.
func TestCompareReplicas(t *testing.T) {
	batch := func(base int64, values ...string) []byte {
		b := record.NewBuilder(record.None)
		for _, v := range values {
			require.NoError(t, b.Append(record.Record{Value: []byte(v)}))
		}
		out, err := b.Build()
		require.NoError(t, err)
		out.SetBaseOffset(base)
		return out.Bytes()
	}
	root := t.TempDir()
	write := func(broker string, batches ...[]byte) string {
		dir := filepath.Join(root, broker)
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "t-0"), 0o755))
		var log []byte
		for _, b := range batches {
			log = append(log, b...)
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, "t-0", "00000000000000000000.log"), log, 0o644))
		return dir
	}
	a := write("a", batch(0, "x", "y"), batch(2, "z"))
	b := write("b", batch(0, "x", "y")) // behind
	c := write("c", batch(0, "x", "y"), batch(2, "other"))
	d, err := CompareReplicas([]string{a, b}, "t", 1)
	require.NoError(t, err)
	require.Empty(t, d)
	d, err = CompareReplicas([]string{a, b, c}, "t", 1)
	require.NoError(t, err)
	require.Len(t, d, 1, "%v", d)
	require.Contains(t, d[0], "offsets 2-2")
}

// The txn workload's checks: each anomaly found in a history made to hold
// it, and only it; a clean history of committed, aborted and unknown
// transactions is valid.
func TestCheckTxns(t *testing.T) {
	// retime sets the ops' times in their order, as a history has them.
	retime := func(ops []Op) []Op {
		for i := range ops {
			ops[i].Time = int64(i + 1)
		}
		return ops
	}
	begin := func(id string, reads ...Record) Op {
		return Op{Process: "txn-0", Type: Invoke, F: "txn", Txn: id, Reads: reads}
	}
	end := func(id string) Op { return Op{Process: "txn-0", Type: Invoke, F: "end", Txn: id} }
	done := func(id string, typ OpType, sent ...Record) Op {
		return Op{Process: "txn-0", Type: typ, F: "txn", Txn: id, Value: sent}
	}
	final := func(recs ...Record) Op { return Op{Process: "final", Type: OK, F: "txn-final", Value: recs} }
	offsets := func(recs ...Record) []Op {
		return []Op{Op{Process: "offsets", Type: Invoke, F: "offsets"}, Op{Process: "offsets", Type: OK, F: "offsets", Value: recs}}
	}
	// T1 writes a and b and commits; T2 writes x and aborts; T3 reads a
	// (after T1 committed), writes c, commits its offset past a; T4's
	// outcome is unknown and it is not read.
	clean := []Op{
		begin("T1"), end("T1"), done("T1", OK, rec(0, 0, "a"), rec(1, 0, "b")),
		begin("T2"), end("T2"), done("T2", Fail, rec(0, 1, "x")),
		begin("T3", rec(0, 0, "a")), end("T3"), done("T3", OK, rec(1, 2, "c")),
		begin("T4"), end("T4"), done("T4", Info, rec(0, -1, "y")),
	}
	clean = append(clean, offsets(Record{Partition: 0, Offset: 1})...)
	clean = append(clean, final(rec(0, 0, "a"), rec(1, 0, "b"), rec(1, 2, "c"), rec(0, 3, "end-0"), rec(1, 3, "end-1")))
	r := Check(retime(clean))
	require.True(t, r.Valid(), r.Table())
	require.Equal(t, map[OpType]int{OK: 2, Fail: 1, Info: 1}, r.Txns)
	require.Zero(t, r.Acked, "the queue's counts are the queue's")

	// with replaces the ops from index i on.
	with := func(i int, more ...Op) []Op { return append(slices.Clone(clean[:i]), more...) }
	finalOf := clean[len(clean)-1]
	for _, c := range []struct {
		kind string
		ops  []Op
		also map[string]int
	}{
		// T2's aborted x in the final read.
		{AbortedRead, append(slices.Clone(clean[:len(clean)-1]),
			final(rec(0, 0, "a"), rec(0, 1, "x"), rec(1, 0, "b"), rec(1, 2, "c"), rec(0, 3, "end-0"), rec(1, 3, "end-1"))), nil},
		// T5 read T1's b before T1 was asked to commit.
		{IntermediateRead, slices.Concat([]Op{begin("T1"), begin("T5", rec(1, 0, "b")), end("T5"), done("T5", Fail)}, clean[1:]), nil},
		// T6 reads T7's write and T7 reads T6's: each read the other
		// before it committed, too.
		{Cycle, with(len(clean)-1, begin("T6", rec(3, 0, "t7")), begin("T7", rec(2, 0, "t6")), end("T6"), end("T7"),
			done("T6", OK, rec(2, 0, "t6")), done("T7", OK, rec(3, 0, "t7")),
			final(rec(0, 0, "a"), rec(1, 0, "b"), rec(1, 2, "c"), rec(2, 0, "t6"), rec(3, 0, "t7"))), map[string]int{IntermediateRead: 2}},
		// The offsets read after T3 committed 1 find 0.
		{OffsetRegression, append(append(with(len(clean)-3), offsets(Record{Partition: 0, Offset: 0})...), finalOf), nil},
		// T1's committed b missing from the final read, c after it read.
		{Lost, append(slices.Clone(clean[:len(clean)-1]), final(rec(0, 0, "a"), rec(1, 2, "c"), rec(0, 3, "end-0"), rec(1, 3, "end-1"))), nil},
	} {
		t.Run(c.kind, func(t *testing.T) {
			r := Check(retime(c.ops))
			for _, k := range Kinds {
				want := c.also[k]
				if k == c.kind {
					want = 1
				}
				require.Equal(t, want, r.Counts[k], "%s in:\n%s", k, r.Table())
			}
		})
	}
}
