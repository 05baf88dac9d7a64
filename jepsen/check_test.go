package jepsen

import (
	"os"
	"path/filepath"
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
