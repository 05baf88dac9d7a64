package tablet_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/tablet"
	"github.com/seglog/seglog/vfs"
)

// injectEnv is a data directory with acknowledged records, on the
// simulator behind an injector.
type injectEnv struct {
	mem   *vfs.MemFS
	inj   *vfs.Injector
	m     *tablet.Manager
	tab   *tablet.Tablet
	acked map[int64]string // offset → value of every record a Sync append acknowledged
	n     int
}

func newInjectEnv(t *testing.T) *injectEnv {
	e := &injectEnv{mem: vfs.NewMem(), acked: map[int64]string{}}
	e.inj = vfs.NewInjector(e.mem)
	opts := quietManager()
	opts.Tablet.Now = func() time.Time { return time.UnixMilli(1_700_000_000_000) }
	m, err := tablet.OpenManager(e.inj, "/data", opts)
	require.NoError(t, err)
	cfg := tablet.DefaultConfig()
	cfg.SegmentBytes = 4096
	cfg.SegmentIndexBytes = 4096 // the simulator copies whole mappings at each msync
	cfg.IndexIntervalBytes = 256
	cfg.FileDeleteDelayMs = 0
	tab, err := m.Create(crashTP, &cfg)
	require.NoError(t, err)
	e.m, e.tab = m, tab
	for range 12 {
		_, err := e.append(600, true)
		require.NoError(t, err)
	}
	// The flushes the rolls started in the background find nothing left
	// to do after this one: no phase below races them for its operations.
	require.NoError(t, tab.Flush())
	return e
}

// append appends one batch of a record of about size bytes.
func (e *injectEnv) append(size int, sync bool) (tablet.AppendResult, error) {
	e.n++
	v := fmt.Sprintf("value %d %s", e.n, strings.Repeat("x", size))
	res, err := e.tab.AppendRecords([]record.Record{{Timestamp: 1_700_000_000_000, Value: []byte(v)}}, record.None,
		tablet.AppendOptions{Sync: sync})
	if err == nil && sync {
		e.acked[res.FirstOffset] = v
	}
	return res, err
}

// injectPhase is an operation run with one fault armed.
type injectPhase struct {
	name string
	prep func(t *testing.T, e *injectEnv) // before the fault is armed
	run  func(e *injectEnv) error
	// data: a failure of a write or fsync here leaves the tablet failed
	data bool
}

var injectPhases = []injectPhase{
	{name: "append", run: func(e *injectEnv) error { _, err := e.append(100, false); return err }, data: true},
	{name: "sync append", run: func(e *injectEnv) error { _, err := e.append(100, true); return err }, data: true},
	{name: "roll", run: func(e *injectEnv) error { _, err := e.append(3500, true); return err }, data: true},
	{name: "flush", prep: func(t *testing.T, e *injectEnv) {
		_, err := e.append(100, false)
		require.NoError(t, err)
	}, run: func(e *injectEnv) error { return e.tab.Flush() }, data: true},
	{name: "checkpoint", run: func(e *injectEnv) error { return e.m.Checkpoint() }},
	{name: "retention", prep: func(t *testing.T, e *injectEnv) {
		c := e.tab.Config()
		c.RetentionBytes = 3000
		require.NoError(t, e.tab.SetConfig(c))
	}, run: func(e *injectEnv) error { _, err := e.tab.ApplyRetention(); return err }},
	{name: "delete records", run: func(e *injectEnv) error { _, err := e.tab.DeleteRecordsBefore(7); return err }},
	{name: "close", run: func(e *injectEnv) error { return e.m.Close() }},
}

// TestErrorAtEveryOperation fails, for each phase (append, sync append,
// roll, flush, checkpoint, retention, record deletion, close), every
// filesystem operation the phase performs, one at a time, on a fresh
// directory. Each failure must surface as an error wrapping the injected
// one (never a panic, never a silent success that lost data); a failed
// write or fsync during an append or flush leaves the tablet failed
// (tablet.ErrFailed) until it is reopened; and reopening — after the
// process died with the page cache kept, and after a power cut that kept
// only what was synced — brings back every acknowledged record.
func TestErrorAtEveryOperation(t *testing.T) {
	var faults, surfaced, failed int
	for _, ph := range injectPhases {
		t.Run(ph.name, func(t *testing.T) {
			e := newInjectEnv(t)
			if ph.prep != nil {
				ph.prep(t, e)
			}
			before := e.inj.Ops()
			require.NoError(t, ph.run(e))
			ops := e.inj.Ops() - before
			require.Positive(t, ops)
			for i := range ops {
				for _, kinds := range []vfs.Op{vfs.OpAll, vfs.OpWrite | vfs.OpSync} {
					f, s, fl := injectOne(t, ph, i, kinds)
					faults, surfaced, failed = faults+f, surfaced+s, failed+fl
				}
			}
		})
	}
	require.Positive(t, surfaced)
	require.Positive(t, failed)
	t.Logf("%d faults injected: %d surfaced as errors, %d left the tablet failed, every acknowledged record recovered", faults, surfaced, failed)
}

// injectOne runs a phase with its i-th operation of the given kinds
// failing and checks the outcome; it reports whether a fault was injected,
// whether the phase returned an error, and whether the tablet failed.
func injectOne(t *testing.T, ph injectPhase, i int, kinds vfs.Op) (injected, surfaced, failed int) {
	e := newInjectEnv(t)
	if ph.prep != nil {
		ph.prep(t, e)
	}
	e.inj.Add(vfs.Rule{Ops: kinds, Nth: i})
	err := ph.run(e)
	injected = e.inj.Injected()
	msg := fmt.Sprintf("%s, operation %d of %v", ph.name, i, kinds)
	if err != nil {
		require.ErrorIs(t, err, vfs.ErrInjected, msg)
		surfaced = 1
	}
	if err != nil && ph.data && kinds == vfs.OpWrite|vfs.OpSync {
		_, again := e.append(10, false)
		require.ErrorIs(t, again, tablet.ErrFailed, "%s: a failed write or fsync leaves the tablet failed", msg)
		failed = 1
	}
	_ = e.m.Close() // a second close of the "close" phase reports ErrClosed

	for _, mode := range []vfs.CrashMode{vfs.CrashKeepAll, vfs.CrashDropAll} {
		img := e.mem.Crash(mode, 1)
		m, err := tablet.OpenManager(img, "/data", quietManager())
		require.NoError(t, err, "%s: reopening (%v)", msg, mode)
		tab, ok := m.Get(crashTP)
		require.True(t, ok, msg)
		o := tab.Offsets()
		seen := map[int64]string{}
		require.NoError(t, tab.Records(o.LogStartOffset, tablet.ReadLogEnd, func(_ record.Batch, r *record.Record) bool {
			seen[r.Offset] = string(r.Value)
			return true
		}), msg)
		for off, v := range e.acked {
			if off >= o.LogStartOffset { // retention and record deletion may take the oldest
				require.Equal(t, v, seen[off], "%s (%v): acknowledged offset %d", msg, mode, off)
			}
		}
		_, err = tab.AppendRecords([]record.Record{{Value: []byte("again")}}, record.None, tablet.AppendOptions{Sync: true})
		require.NoError(t, err, msg)
		require.NoError(t, m.Close(), msg)
	}
	return injected, surfaced, failed
}
