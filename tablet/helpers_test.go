package tablet

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/recovery"
	"github.com/seglog/seglog/vfs"
)

var tp0 = checkpoint.TopicPartition{Topic: "events", Partition: 0}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// clock is a settable clock for tests.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.UnixMilli(1_700_000_000_000)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// env is a data directory opened by a Manager, with its clock.
type env struct {
	t     *testing.T
	fsys  vfs.FS
	dir   string
	clock *clock
	m     *Manager
}

func newEnv(t *testing.T, fsys vfs.FS, dir string) *env {
	e := &env{t: t, fsys: fsys, dir: dir, clock: newClock()}
	e.open()
	return e
}

// options are the env's manager options. The background cleaner is off: a
// test cleans when it says so (a slow run past the cleaner's backoff had
// it clean part of a log under a test that then counted what it removed).
func (e *env) options() ManagerOptions {
	return ManagerOptions{Tablet: Options{Now: e.clock.Now, Logger: quiet}, Cleaner: CleanerOptions{Disable: true}}
}

func (e *env) open() {
	m, err := OpenManager(e.fsys, e.dir, e.options())
	require.NoError(e.t, err)
	e.m = m
	e.t.Cleanup(func() { m.Close() })
}

// reopen closes the manager cleanly and opens it again.
func (e *env) reopen() {
	require.NoError(e.t, e.m.Close())
	e.verify()
	e.open()
}

// verify requires the closed data directory to pass recovery.Verify.
func (e *env) verify() {
	e.t.Helper()
	r, err := recovery.Verify(e.fsys, e.dir, recovery.VerifyOptions{})
	require.NoError(e.t, err)
	if !r.OK() {
		var problems []string
		for _, p := range r.Problems {
			problems = append(problems, p.String())
		}
		for _, tr := range r.Tablets {
			for _, p := range tr.Problems {
				problems = append(problems, p.String())
			}
		}
		require.Fail(e.t, "the closed directory fails verify", "%s", strings.Join(problems, "\n"))
	}
}

func (e *env) create(cfg Config) *Tablet {
	t, err := e.m.Create(tp0, &cfg)
	require.NoError(e.t, err)
	return t
}

func (e *env) tablet() *Tablet {
	t, ok := e.m.Get(tp0)
	require.True(e.t, ok)
	return t
}

// batch builds a batch of n records with keys k<i>, timestamped ts+i.
func batch(t *testing.T, n int, ts int64, size int) []byte {
	b := record.NewBuilder(record.None)
	for i := range n {
		require.NoError(t, b.Append(record.Record{Timestamp: ts + int64(i), Key: fmt.Appendf(nil, "k%d", i), Value: make([]byte, size)}))
	}
	out, err := b.Build()
	require.NoError(t, err)
	return out.Bytes()
}

// producerBatch builds a batch of producer pid.
func producerBatch(t *testing.T, pid int64, epoch int16, seq int32, n int, transactional bool, ts int64) []byte {
	b := record.NewBuilder(record.None)
	b.SetProducer(pid, epoch, seq)
	b.SetTransactional(transactional)
	for i := range n {
		require.NoError(t, b.Append(record.Record{Timestamp: ts, Value: fmt.Appendf(nil, "p%d-%d", pid, int(seq)+i)}))
	}
	out, err := b.Build()
	require.NoError(t, err)
	return out.Bytes()
}

func marker(t *testing.T, pid int64, epoch int16, abort bool, ts int64) []byte {
	typ := record.ControlCommit
	if abort {
		typ = record.ControlAbort
	}
	data, err := record.EndTxnMarker{Type: typ, ProducerID: pid, ProducerEpoch: epoch, CoordinatorEpoch: 1, Timestamp: ts}.AppendTo(nil)
	require.NoError(t, err)
	return data
}

// readAll reads every visible record from offset with the isolation, as
// a consumer would (Tablet.Records), copying them.
func readAll(t *testing.T, tab *Tablet, from int64, iso Isolation) []record.Record {
	var out []record.Record
	require.NoError(t, tab.Records(from, iso, func(_ record.Batch, r *record.Record) bool {
		c := *r
		c.Key, c.Value, c.Headers = append([]byte(nil), r.Key...), append([]byte(nil), r.Value...), nil
		out = append(out, c)
		return true
	}))
	return out
}

func offsetsOf(records []record.Record) []int64 {
	out := make([]int64, len(records))
	for i, r := range records {
		out[i] = r.Offset
	}
	return out
}

func seq(from, to int64) []int64 {
	var out []int64
	for o := from; o < to; o++ {
		out = append(out, o)
	}
	return out
}

// logStep tells, with -v, a model test's step and the tablet after it.
func logStep(t *testing.T, tab *Tablet, step int, what string) {
	if !testing.Verbose() {
		return
	}
	var bases []int64
	for _, sg := range tab.Segments() {
		bases = append(bases, sg.BaseOffset)
	}
	t.Logf("step %d: %s → %+v %v", step, what, tab.Offsets(), bases)
}

// segmentedTablet creates, on real files in dir, a tablet of 4 KiB
// segments and appends 50 batches of 3 records of 100 B to it (several
// sealed segments and an active one).
func segmentedTablet(t *testing.T, dir string) (*env, *Tablet, Config) {
	e := newEnv(t, vfs.OS, dir)
	cfg := DefaultConfig()
	cfg.SegmentBytes = 4096
	tab := e.create(cfg)
	for i := range 50 {
		_, err := tab.Append(batch(t, 3, 1_700_000_000_000+int64(i), 100), AppendOptions{})
		require.NoError(t, err)
	}
	return e, tab, cfg
}
