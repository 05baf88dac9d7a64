package recovery

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/seglog/seglog/logfile"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog/internal/testenv"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/segment"
	"github.com/seglog/seglog/vfs"
	"github.com/seglog/seglog/writerstate"
)

// crashSeeds is how many seeds a crash loop tries; one seed here runs a
// whole workload per crash point, a hundred of the simplest loops' seeds.
func crashSeeds(t *testing.T, def uint64) uint64 { return testenv.CrashSeeds(t, def, 100) }

const crashDataDir = "/data"

// crashWorkload appends plain, transactional and control batches, rolls,
// flushes (with the recovery-point checkpoint) and, with some seeds, shuts
// down cleanly: every kind of write a tablet makes.
func crashWorkload(l *testLog, rng *rand.Rand) {
	l.create()
	open := map[int64]bool{}
	for range 30 {
		l.now += int64(rng.IntN(50))
		switch op := rng.IntN(12); {
		case op < 6:
			l.records(1+rng.IntN(3), 10+rng.IntN(80))
		case op < 8:
			pid := 100 + int64(rng.IntN(3))
			l.txn(pid, 1+rng.IntN(2))
			open[pid] = true
		case op < 9:
			for pid := int64(100); pid < 103; pid++ {
				if open[pid] {
					l.marker(pid, []record.ControlType{record.ControlCommit, record.ControlAbort}[rng.IntN(2)])
					delete(open, pid)
					break
				}
			}
		case op < 10:
			l.flush()
		default:
			if l.active().Size() > 0 {
				l.roll()
			}
		}
	}
	if rng.IntN(2) == 0 {
		l.closeClean()
	}
}

// checkRecovered asserts what a load after a crash must give: no batch a
// flush made durable is lost, every record there is one that was appended
// at that offset (unflushed batches may be gone, leaving a gap that the
// report names),
// every segment ends on a batch boundary with indexes that agree with it,
// and the writer state is what a replay of the log gives.
func checkRecovered(t *testing.T, fsys vfs.FS, tab *Tablet, keys map[int64]string, durable int64, msg string) {
	t.Helper()
	require.GreaterOrEqual(t, tab.LogEndOffset, durable, "%s: a flushed batch was lost", msg)
	got := offsetsOf(t, tab)
	for o := range durable {
		require.Contains(t, got, o, "%s: a flushed record was lost", msg)
	}
	for o, k := range got {
		require.Equal(t, keys[o], k, "%s: offset %d holds a record that was not appended there", msg, o)
	}
	gaps := map[int64]bool{}
	for _, c := range tab.Report {
		for o := c.FromOffset; c.Action == Gap && o < c.ToOffset; o++ {
			gaps[o] = true
		}
	}
	for o := range tab.LogEndOffset {
		_, appended := keys[o]
		_, present := got[o]
		require.True(t, present || gaps[o] || !appended, "%s: offset %d is missing and no gap was reported", msg, o)
	}
	checkTabletOn(t, fsys, tab, msg)
	require.Equal(t, replayState(t, tab), normalized(tab.State), "%s: the writer state differs from a replay", msg)
}

// replayState replays every batch of the tablet into a fresh writer state.
func replayState(t *testing.T, tab *Tablet) []producerSummary {
	mem := vfs.NewMem()
	require.NoError(t, mem.MkdirAll("/replay", 0o755))
	s, err := writerstate.Open(mem, "/replay", writerstate.Options{})
	require.NoError(t, err)
	for _, seg := range tab.Segments {
		require.NoError(t, seg.Batches(seg.BaseOffset(), segment.NoMaxPosition, func(b record.Batch) error {
			_, err := s.Replay(b)
			return err
		}))
	}
	return normalized(s)
}

// producerSummary is what of a producer's state a snapshot keeps; a
// snapshot keeps only the last batch, so only that is compared.
type producerSummary struct {
	ProducerID            int64
	Epoch                 int16
	CoordinatorEpoch      int32
	CurrentTxnFirstOffset int64
	Last                  writerstate.BatchMetadata
}

func normalized(s *writerstate.State) []producerSummary {
	var out []producerSummary
	for _, e := range s.Producers() {
		p := producerSummary{ProducerID: e.ProducerID, Epoch: e.Epoch, CoordinatorEpoch: e.CoordinatorEpoch,
			CurrentTxnFirstOffset: e.CurrentTxnFirstOffset}
		if len(e.Batches) > 0 {
			p.Last = e.Batches[len(e.Batches)-1]
			p.Last.Timestamp = 0
		}
		out = append(out, p)
	}
	return out
}

func loadCrashed(t *testing.T, fsys vfs.FS, now int64) (*Result, error) {
	r, err := Load(fsys, crashDataDir, Options{Segment: crashOpts, Now: func() time.Time { return time.UnixMilli(now) }})
	if err == nil {
		t.Cleanup(func() { r.Close() })
	}
	return r, err
}

var crashOpts = segment.Options{SegmentBytes: 1200, IndexIntervalBytes: 150, MaxIndexSize: 1 << 12}

// A crash after every mutating operation k of the workload, in each crash
// mode: Load succeeds and checkRecovered holds.
func TestCrashAfterEveryWrite(t *testing.T) {
	modes := []vfs.CrashMode{vfs.CrashRandom, vfs.CrashDropAll, vfs.CrashKeepAll}
	for seed := range crashSeeds(t, 3) {
		points := 0
		for k := 0; ; k++ {
			mem := vfs.NewMem()
			require.NoError(t, mem.MkdirAll(crashDataDir, 0o755))
			in := vfs.NewInjector(mem)
			in.Add(vfs.Rule{Ops: vfs.OpMutating, Nth: k, Sticky: true})
			l := newTolerantTestLog(t, in, crashDataDir, crashOpts)
			err := runUntilFault(func() { crashWorkload(l, rand.New(rand.NewPCG(seed, 11))) })
			if err == nil {
				require.Zero(t, in.Injected())
				break
			}
			require.ErrorIs(t, err, vfs.ErrInjected)
			points++
			for i, mode := range modes {
				crashSeed := seed<<32 | uint64(k)<<2 | uint64(i)
				msg := fmt.Sprintf("seed %d, crash after write %d, %v (crash seed %d)", seed, k, mode, crashSeed)
				after := mem.Crash(mode, crashSeed)
				if _, err := after.Stat(l.dir); err != nil {
					continue // the directory itself did not survive
				}
				r, err := loadCrashed(t, after, l.now)
				require.NoError(t, err, msg)
				checkRecovered(t, after, r.Tablets[0], l.keys, l.durable, msg)
				require.NoError(t, r.Close())
			}
		}
		require.Greater(t, points, 50, "the workload makes enough writes to crash at")
	}
}

// A crash after every rename step of a segment replacement (docs/format.md §4.1 step
// 3's protocol: .cleaned, renames to .swap in descending order, old files
// to .deleted, .swap to final, directory fsync): the records are those of
// the old segment or of the new ones, never a mix and never lost.
func TestCrashDuringSwap(t *testing.T) {
	for seed := range crashSeeds(t, 2) {
		base := vfs.NewMem()
		require.NoError(t, base.MkdirAll(crashDataDir, 0o755))
		l := newTestLog(t, base, crashDataDir, crashOpts)
		rng := rand.New(rand.NewPCG(seed, 12))
		for range 40 {
			l.now += 10
			l.records(1+rng.IntN(2), 20+rng.IntN(40))
		}
		l.closeClean()
		require.Greater(t, len(l.segs), 2)
		old, err := segment.Open(base, l.dir, 0, segment.Options{ReadOnly: true})
		require.NoError(t, err)
		// The replacement: the first segment, split in two, with the
		// odd batches dropped as a cleaner would drop superseded keys.
		var batches []record.Batch
		require.NoError(t, old.Batches(0, segment.NoMaxPosition, func(b record.Batch) error {
			batches = append(batches, record.Batch{})
			copied, _, err := record.ParseBatch(slices.Clone(b.Bytes()))
			batches[len(batches)-1] = copied
			return err
		}))
		require.NoError(t, old.Close())
		require.Greater(t, len(batches), 3)
		mid := batches[len(batches)/2].BaseOffset()
		cleanedKeys := map[int64]string{}
		for o, k := range l.keys {
			cleanedKeys[o] = k
		}
		var kept []record.Batch
		for i, b := range batches {
			if i%2 == 1 {
				for o := b.BaseOffset(); o <= b.LastOffset(); o++ {
					delete(cleanedKeys, o)
				}
				continue
			}
			kept = append(kept, b)
		}

		points := 0
		for k := 0; ; k++ {
			mem := base.Crash(vfs.CrashKeepAll, 0)
			in := vfs.NewInjector(mem)
			in.Add(vfs.Rule{Ops: vfs.OpMutating, Nth: k, Sticky: true})
			err := replaceFirstSegment(in, l.dir, kept, mid)
			if err == nil {
				require.Zero(t, in.Injected())
				break
			}
			require.ErrorIs(t, err, vfs.ErrInjected)
			points++
			for i, mode := range []vfs.CrashMode{vfs.CrashRandom, vfs.CrashDropAll, vfs.CrashKeepAll} {
				msg := fmt.Sprintf("seed %d, crash after write %d of the swap, %v", seed, k, mode)
				after := mem.Crash(mode, seed<<32|uint64(k)<<2|uint64(i))
				r, err := loadCrashed(t, after, l.now)
				require.NoError(t, err, msg)
				tab := r.Tablets[0]
				got := offsetsOf(t, tab)
				if len(got) != len(l.keys) {
					require.Equal(t, cleanedKeys, got, "%s: neither the old segment nor the new ones", msg)
				} else {
					require.Equal(t, l.keys, got, msg)
				}
				checkTabletOn(t, after, tab, msg)
				require.NoError(t, r.Close())
			}
		}
		require.Greater(t, points, 10)
	}
}

// replaceFirstSegment replaces the segment at 0 by
// two segments holding kept, split at mid, through the replace protocol.
func replaceFirstSegment(fsys vfs.FS, dir string, kept []record.Batch, mid int64) (err error) {
	var news []*segment.Segment
	closeAll := func() error {
		var errs []error
		for _, s := range news {
			errs = append(errs, s.Close())
		}
		news = nil
		return errors.Join(errs...)
	}
	defer func() { err = errors.Join(err, closeAll()) }()
	for _, base := range []int64{0, mid} {
		s, err := segment.Create(fsys, dir, base, segment.Options{FileSuffix: logfile.CleanedSuffix, IndexIntervalBytes: 150})
		if err != nil {
			return err
		}
		news = append(news, s)
	}
	for _, b := range kept {
		s := news[0]
		if b.BaseOffset() >= mid {
			s = news[1]
		}
		if err := s.Append(segment.AppendInfo{LargestOffset: b.LastOffset(), LargestTimestamp: b.MaxTimestamp(),
			ShallowOffsetOfMaxTimestamp: b.LastOffset()}, b.Bytes()); err != nil {
			return err
		}
	}
	for _, s := range news {
		if err := errors.Join(s.Seal(), s.Flush()); err != nil {
			return err
		}
	}
	for i := len(news) - 1; i >= 0; i-- {
		if err := news[i].ChangeSuffix(logfile.CleanedSuffix, logfile.SwapSuffix); err != nil {
			return err
		}
	}
	old, err := segment.Open(fsys, dir, 0, segment.Options{})
	if err != nil {
		return err
	}
	if err := errors.Join(old.ChangeSuffix("", logfile.DeletedSuffix), old.Close()); err != nil {
		return err
	}
	for _, s := range news {
		if err := s.ChangeSuffix(logfile.SwapSuffix, ""); err != nil {
			return err
		}
	}
	if err := closeAll(); err != nil {
		return err
	}
	if err := fsys.SyncDir(dir); err != nil {
		return err
	}
	return old.RemoveFiles()
}

// Error injection at every operation i of Load: it succeeds or fails with
// the injected error, and a second Load gives the fault-free result. A
// crash at every mutating operation of Load, too, is followed by a Load
// that gives that result.
func TestFaultLoopInLoad(t *testing.T) {
	base := vfs.NewMem()
	require.NoError(t, base.MkdirAll(crashDataDir, 0o755))
	l := newTestLog(t, base, crashDataDir, crashOpts)
	rng := rand.New(rand.NewPCG(7, 7))
	for i := range 60 {
		l.now += 10
		l.records(1+rng.IntN(2), 20+rng.IntN(40))
		if i == 40 {
			l.flush()
		}
	}
	l.closeDirty()
	// Damage as in the acceptance test: a torn tail, a missing index,
	// an orphan, a leftover .deleted.
	dir := l.dir
	active := l.active()
	f, err := base.OpenFile(active.LogPath(), os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("torn batch bytes"), active.Size())
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.NoError(t, base.Remove(dir+"/"+logfile.Filename(l.segs[1].BaseOffset(), logfile.Index)))
	require.NoError(t, vfs.WriteFile(base, dir+"/00000000000000099999.index", make([]byte, 16)))
	require.NoError(t, vfs.WriteFile(base, dir+"/00000000000000000000.snapshot.deleted", []byte("x")))
	pristine := base.Crash(vfs.CrashKeepAll, 0)

	reference, err := loadCrashed(t, pristine.Crash(vfs.CrashKeepAll, 0), l.now)
	require.NoError(t, err)
	refKeys := offsetsOf(t, reference.Tablets[0])
	refEnd := reference.Tablets[0].LogEndOffset
	require.Equal(t, l.next, refEnd)

	same := func(t *testing.T, fsys vfs.FS, msg string) {
		r, err := loadCrashed(t, fsys, l.now)
		require.NoError(t, err, "%s: the second load", msg)
		tab := r.Tablets[0]
		require.Equal(t, refEnd, tab.LogEndOffset, msg)
		require.Equal(t, refKeys, offsetsOf(t, tab), msg)
		checkTabletOn(t, fsys, tab, msg)
		require.NoError(t, r.Close())
	}

	t.Run("error", func(t *testing.T) {
		failed := 0
		for i := 0; ; i++ {
			mem := pristine.Crash(vfs.CrashKeepAll, 0)
			in := vfs.NewInjector(mem)
			in.Add(vfs.Rule{Nth: i})
			r, err := loadCrashed(t, in, l.now)
			if in.Injected() == 0 {
				require.NoError(t, err)
				break
			}
			msg := fmt.Sprintf("fault at operation %d (%v)", i, err)
			if err != nil {
				require.ErrorIs(t, err, vfs.ErrInjected, msg)
				failed++
			} else {
				require.NoError(t, r.Close())
			}
			same(t, mem, msg)
		}
		require.Greater(t, failed, 20)
	})

	t.Run("crash", func(t *testing.T) {
		points := 0
		for k := 0; ; k++ {
			mem := pristine.Crash(vfs.CrashKeepAll, 0)
			in := vfs.NewInjector(mem)
			in.Add(vfs.Rule{Ops: vfs.OpMutating, Nth: k, Sticky: true})
			_, err := loadCrashed(t, in, l.now)
			if in.Injected() == 0 {
				require.NoError(t, err)
				break
			}
			points++
			for i, mode := range []vfs.CrashMode{vfs.CrashRandom, vfs.CrashDropAll, vfs.CrashKeepAll} {
				same(t, mem.Crash(mode, uint64(k)<<2|uint64(i)), fmt.Sprintf("crash after write %d of Load, %v", k, mode))
			}
		}
		require.Greater(t, points, 5)
	})
}
