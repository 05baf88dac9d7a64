package bench

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog/record"
)

func TestEnsureDefaults(t *testing.T) {
	var o Options
	o.EnsureDefaults()
	require.Equal(t, os.TempDir(), o.Dir)
	require.Equal(t, int64(256<<20), o.Bytes)
	require.Equal(t, []int{1024, 100, 1, 1, 3, 200_000, 10_000, 8},
		[]int{o.RecordSize, o.BatchRecords, o.Producers, o.Tablets, o.Repeat, o.Ops, o.Segments, o.MaxProducers})
	o.Progress("step", 1, 2) // a no-op, not nil

	set := Options{Dir: "/x", Bytes: 5, RecordSize: 7, BatchRecords: 3, Producers: 2, Tablets: 4, Repeat: 9, Ops: 11, Segments: 13, MaxProducers: 2}
	kept := set
	set.EnsureDefaults()
	set.Progress = nil
	require.Equal(t, kept, set, "set fields are kept")
}

func TestLookup(t *testing.T) {
	for _, w := range Workloads {
		got, ok := Lookup(w.Name)
		require.True(t, ok, w.Name)
		require.Equal(t, w.Name, got.Name)
		require.NotEmpty(t, got.Short, w.Name)
		require.Contains(t, workloadNames(), w.Name)
	}
	_, ok := Lookup("nope")
	require.False(t, ok)
}

func TestFigures(t *testing.T) {
	f := figure("append.throughput", "MB/s", []float64{300, 100, 200}, "pwrite", []float64{400, 400, 800})
	require.Equal(t, 200.0, f.Value)
	require.Equal(t, []float64{100, 300}, []float64{f.Min, f.Max})
	require.Equal(t, 400.0, f.BaselineValue)
	require.Equal(t, 0.5, f.Ratio)
	require.Nil(t, f.Met)
	require.Equal(t, "yes", met(f.target("≥ 0.4 × baseline", true)))
	require.Equal(t, "NO", met(f.target("≥ 0.9 × baseline", false)))
	require.Empty(t, met(f))

	none := figure("x.y", "ms", []float64{1}, "", nil)
	require.Zero(t, none.Ratio)
	require.Empty(t, baselineText(none))
	require.Empty(t, ratioText(none))
	zero := figure("x.z", "ms", []float64{1}, "nothing", []float64{0})
	require.Zero(t, zero.Ratio, "a zero baseline gives no ratio, not an infinity")

	samples := make([]float64, 100)
	for i := range samples {
		samples[i] = float64(100 - i) // out of order on purpose
	}
	l := latency("random-read.hot", samples, "pread", []float64{2, 1, 3})
	require.Equal(t, []float64{50, 50, 99, 1, 100}, []float64{l.Value, l.P50, l.P99, l.Min, l.Max})
	require.Equal(t, 2.0, l.BaselineValue)
	require.Equal(t, 25.0, l.Ratio)
	require.Equal(t, "p50 50.0 / p99 99.0 µs", valueText(l))
	empty := latency("e", nil, "", nil)
	require.Zero(t, empty.Value)

	for v, want := range map[float64]string{0: "0", 1234.5: "1234", 12.34: "12.3", 1.234: "1.23", -150: "-150"} {
		require.Equal(t, want, formatValue(v), "%v", v)
	}
	require.Equal(t, "200 MB/s (100–300)", valueText(f))
	require.Equal(t, "400 MB/s (pwrite)", baselineText(f))
	require.Equal(t, "0.50×", ratioText(f))
}

func TestReportTableAndMarkdown(t *testing.T) {
	r := NewReport(Options{Bytes: 1 << 20, RecordSize: 512, BatchRecords: 10, Producers: 1, Tablets: 1, Repeat: 2},
		Machine{CPUs: 2, CPU: "test cpu", FS: "tmpfs"}, Baselines{WriteMBps: 1000})
	r.Add(&Result{Workload: "append", Figures: []Figure{
		figure("append.throughput", "MB/s", []float64{800}, "pwrite", []float64{1000}).target("≥ 0.85 × baseline", false),
		figure("append.allocs", "allocs", []float64{0}, "", nil),
		figure("append.other", "MB/s", []float64{500}, "pwrite", []float64{1000}),
	}})
	require.Equal(t, map[string]float64{"append.ratio": 0.8, "append.throughput.ratio": 0.8, "append.other.ratio": 0.5}, r.Ratios,
		"the first figure's ratio names the workload's")

	var table bytes.Buffer
	require.NoError(t, r.WriteTable(&table))
	require.Contains(t, table.String(), "append.throughput")
	require.Contains(t, table.String(), "0.80×")
	require.Contains(t, table.String(), "NO")
	require.Contains(t, table.String(), "pwrite 1000 MB/s")
	require.Contains(t, table.String(), "2 CPUs, test cpu, tmpfs")

	md := r.Markdown("seglog bench append")
	require.Contains(t, md, "seglog bench append")
	require.Contains(t, md, "| append.throughput | 800 MB/s | 1000 MB/s (pwrite) | 0.80× | ≥ 0.85 × baseline | NO |")

	var js bytes.Buffer
	require.NoError(t, r.WriteJSON(&js))
	require.Contains(t, js.String(), `"append.ratio": 0.8`)
}

// spread gives producer p the operations p, p+producers, …: every one once.
func TestSpread(t *testing.T) {
	var mu sync.Mutex
	seen := map[int64]int{}
	by := map[int64]int{}
	_, err := spread(3, 10, func(p int, i int64) error { // on spread's goroutines: no require here
		mu.Lock()
		seen[i]++
		by[i] = p
		mu.Unlock()
		return nil
	})
	require.NoError(t, err)
	require.Len(t, seen, 10)
	for i, n := range seen {
		require.Equal(t, 1, n, "operation %d", i)
		require.Equal(t, int(i%3), by[i], "operation %d", i)
	}
	boom := errors.New("boom")
	var calls atomic.Int64
	_, err = spread(2, 100, func(p int, i int64) error {
		calls.Add(1)
		if i == 4 {
			return boom
		}
		return nil
	})
	require.ErrorIs(t, err, boom)
	require.Less(t, calls.Load(), int64(100), "a producer stops at its first error")
	require.Nil(t, firstErr([]error{nil, nil}))
}

// The batches the workloads append are valid RecordBatch v2 of the shape
// asked for, with values that do not compress away.
func TestBuildBatch(t *testing.T) {
	data, err := buildBatch(10, 256, 1)
	require.NoError(t, err)
	b, rest, err := record.ParseBatch(data)
	require.NoError(t, err)
	require.Empty(t, rest)
	require.NoError(t, b.Verify())
	require.Equal(t, int32(10), b.NumRecords())
	other, err := buildBatch(10, 256, 2)
	require.NoError(t, err)
	require.NotEqual(t, data, other, "another seed, other values")
}

// The raw baselines do the work they stand for: every byte written and
// read back, and nothing left behind.
func TestRawBaselines(t *testing.T) {
	dir := t.TempDir()
	chunk := bytes.Repeat([]byte("x"), 4096)
	_, err := rawAppend(dir, chunk, 8, 2, false)
	require.NoError(t, err)
	_, err = rawSharedSync(dir, chunk, 4, 2)
	require.NoError(t, err)
	left, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, left, "the raw writers remove their files")

	p := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(p, bytes.Repeat([]byte("y"), 10_000), 0o644))
	n, _, err := rawRead([]string{p, p}, make([]byte, 4096))
	require.NoError(t, err)
	require.Equal(t, int64(20_000), n)
	n, _, err = rawReadCRC([]string{p}, make([]byte, 4096))
	require.NoError(t, err)
	require.Equal(t, int64(10_000), n)
	_, _, err = rawRead([]string{filepath.Join(dir, "missing")}, make([]byte, 16))
	require.Error(t, err)
}

// readAll and sendAll walk a tablet from its start to its end, batch by
// batch, the bytes each saw being the tablet's.
func TestReadAndSendAll(t *testing.T) {
	dir := t.TempDir()
	m, tab, logs, err := filledSegments(dir, 256<<10, 10, 512, 64<<10, func(int64, int64) {})
	require.NoError(t, err)
	defer m.Close()
	require.Greater(t, len(logs), 1, "several segments")
	var logBytes int64
	for _, l := range logs {
		info, err := os.Stat(l)
		require.NoError(t, err)
		logBytes += info.Size()
	}
	n, batches, err := readAll(tab, make([]byte, 1<<20))
	require.NoError(t, err)
	require.Equal(t, logBytes, n)
	require.Equal(t, tab.Offsets().LogEndOffset/10, batches)
	_, _, err = readAll(tab, make([]byte, 100))
	require.ErrorContains(t, err, "does not fit")

	var sent countingWriter
	total, err := sendAll(tab, &sent, 1<<20)
	require.NoError(t, err)
	require.Equal(t, logBytes, total)
	require.Equal(t, logBytes, sent.n)

	conn, closeConn, err := loopback()
	require.NoError(t, err)
	total, err = sendAll(tab, conn, 64<<10)
	closeConn()
	require.NoError(t, err)
	require.Equal(t, logBytes, total, "through a socket: sendfile")
}

type countingWriter struct{ n int64 }

func (w *countingWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

var _ io.Writer = (*countingWriter)(nil)

func TestDescribe(t *testing.T) {
	m := Describe(t.TempDir())
	require.Positive(t, m.CPUs)
	require.NotEmpty(t, m.GoVersion)
	require.True(t, strings.HasPrefix(m.GoVersion, "go"), m.GoVersion)
}
