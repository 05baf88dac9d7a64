package tablet

import (
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/internal/testenv"
	"github.com/seglog/seglog/vfs"
)

// A Sync append is acknowledged only after the fsync that covers it, so a
// power cut right after it keeps it; appends without Sync may go (from a
// segment's tail, even when a later segment's survived: recovery reports
// that gap, as Kafka keeps it), but the log always loads and holds only
// what was appended, where it was appended.
func TestSyncAppendsSurviveACrash(t *testing.T) {
	for seed := range testenv.CrashSeeds(t, 20, 10) {
		rng := rand.New(rand.NewPCG(seed, 1))
		mem := vfs.NewMem()
		e := newEnv(t, mem, "/data")
		cfg := DefaultConfig()
		cfg.SegmentBytes = 1000
		cfg.SegmentIndexBytes = 4096
		tab := e.create(cfg)
		acked := int64(0) // offsets below it were acknowledged as durable
		var appended int64
		for range 5 + rng.IntN(40) {
			sync := rng.IntN(3) == 0
			res, err := tab.Append(batch(t, 1+rng.IntN(3), 1, rng.IntN(200)), AppendOptions{Sync: sync})
			require.NoError(t, err)
			appended = res.LastOffset + 1
			if sync {
				acked = appended
			}
		}
		mode := []vfs.CrashMode{vfs.CrashDropAll, vfs.CrashRandom}[seed%2]
		after := mem.Crash(mode, seed)
		m, err := OpenManager(after, "/data", ManagerOptions{Tablet: Options{Logger: quiet}})
		require.NoError(t, err, "seed %d", seed)
		got, ok := m.Get(tp0)
		require.True(t, ok)
		end := got.Offsets().LogEndOffset
		require.GreaterOrEqual(t, end, acked, "seed %d (%v): an acknowledged Sync append was lost", seed, mode)
		require.LessOrEqual(t, end, appended)
		read := offsetsOf(readAll(t, got, 0, ReadLogEnd))
		prefix := append([]int64(nil), read[:min(len(read), int(acked))]...) // nil when empty, as seq's
		require.Equal(t, seq(0, acked), prefix, "seed %d: the acknowledged prefix", seed)
		for i := 1; i < len(read); i++ {
			require.Less(t, read[i-1], read[i], "seed %d", seed)
		}
		require.NoError(t, m.Close())
	}
}

// gatedFS holds the first fsync of a .log until released, to line up
// concurrent Sync appends behind it.
type gatedFS struct {
	vfs.FS
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

func (g *gatedFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := g.FS.OpenFile(name, flag, perm)
	if err != nil || !strings.HasSuffix(name, ".log") {
		return f, err
	}
	return &gatedFile{File: f, g: g}, nil
}

type gatedFile struct {
	vfs.File
	g *gatedFS
}

func (f *gatedFile) Datasync() error {
	f.g.once.Do(func() {
		close(f.g.entered)
		<-f.g.release
	})
	return f.File.Datasync()
}

// Concurrent Sync appends share fsyncs (group commit): while one flush
// runs, the appends that arrive wait and are then covered by one flush.
func TestGroupCommitSharesFsyncs(t *testing.T) {
	const others = 7
	in := vfs.NewInjector(vfs.NewMem())
	g := &gatedFS{FS: in, entered: make(chan struct{}), release: make(chan struct{})}
	e := newEnv(t, g, "/data")
	tab := e.create(DefaultConfig())
	_, err := tab.Append(batch(t, 1, 1, 10), AppendOptions{}) // the segment exists and is written
	require.NoError(t, err)

	var waiting sync.WaitGroup
	waiting.Add(others)
	tab.flush.onWait = func() { waiting.Done() }
	var done sync.WaitGroup
	done.Add(1 + others)
	// Batches are built here: a goroutine must not stop the test (require
	// calls FailNow); it reports with assert and the test checks after.
	leader := batch(t, 1, 1, 10)
	followers := make([][]byte, others)
	for i := range followers {
		followers[i] = batch(t, 1, 1, 10)
	}
	go func() { // the leader: its fsync blocks at the gate
		defer done.Done()
		_, err := tab.Append(leader, AppendOptions{Sync: true})
		assert.NoError(t, err)
	}()
	<-g.entered
	before := in.Count(vfs.OpSync)
	for i := range others {
		go func() {
			defer done.Done()
			_, err := tab.Append(followers[i], AppendOptions{Sync: true})
			assert.NoError(t, err)
		}()
	}
	waiting.Wait() // all appended, all waiting for the flush in progress
	tab.flush.onWait = nil
	close(g.release)
	done.Wait()
	require.Equal(t, int64(1+1+others), tab.Offsets().DurableOffset, "every Sync append is durable")
	// The leader's flush finishes (its .log fsync, counted before), then
	// one more flush covers all seven: one .log fsync for seven appends.
	logSyncs := in.Count(vfs.OpSync) - before
	require.Equal(t, int64(2), tab.FsyncCount())
	require.LessOrEqual(t, logSyncs, 4, "one flush for the seven waiting appends (a .log fdatasync, at most the index and directory syncs)")
}

// A failed fsync makes the tablet fail from then on: the kernel may have
// dropped the dirty pages, so nothing is retried.
func TestFailedFsyncIsSticky(t *testing.T) {
	in := vfs.NewInjector(vfs.NewMem())
	e := newEnv(t, in, "/data")
	tab := e.create(DefaultConfig())
	in.Add(vfs.Rule{Ops: vfs.OpSync, Path: "*.log", Nth: 0})
	_, err := tab.Append(batch(t, 1, 1, 10), AppendOptions{Sync: true})
	require.ErrorIs(t, err, vfs.ErrInjected)
	_, err = tab.Append(batch(t, 1, 1, 10), AppendOptions{})
	require.ErrorIs(t, err, vfs.ErrInjected, "the tablet stays failed")
	require.ErrorIs(t, tab.Flush(), vfs.ErrInjected)
	_, err = tab.Read(0, ReadOptions{MaxBytes: 100})
	require.NoError(t, err, "reads go on")
}

// A sync gathers its group: with three Sync callers learned to wait
// together, the first to arrive does not sync alone — one fsync covers
// all three.
func TestGroupCommitGathers(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/data")
	tab := e.create(DefaultConfig())
	_, err := tab.Append(batch(t, 1, 1, 10), AppendOptions{Sync: true})
	require.NoError(t, err)
	tab.flush.mu.Lock()
	tab.flush.group = 3
	tab.flush.lastSync, tab.flush.maxGather = time.Hour, time.Hour // no gathering times out
	tab.flush.mu.Unlock()
	before := tab.FsyncCount()

	batches := [][]byte{batch(t, 1, 1, 10), batch(t, 1, 1, 10), batch(t, 1, 1, 10)}
	var done sync.WaitGroup
	for _, b := range batches {
		done.Add(1)
		go func() {
			defer done.Done()
			_, err := tab.Append(b, AppendOptions{Sync: true})
			assert.NoError(t, err)
		}()
	}
	done.Wait()
	require.Equal(t, int64(4), tab.Offsets().DurableOffset)
	require.Equal(t, before+1, tab.FsyncCount(), "one sync for the gathered three")
}

// A gathering that times out syncs the callers that came and lowers the
// group to them: a producer that left costs one wait, not one per sync.
func TestGroupCommitGatheringTimesOut(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/data")
	tab := e.create(DefaultConfig())
	tab.flush.mu.Lock()
	tab.flush.group = 8
	tab.flush.lastSync, tab.flush.maxGather = time.Hour, time.Millisecond
	tab.flush.mu.Unlock()

	_, err := tab.Append(batch(t, 1, 1, 10), AppendOptions{Sync: true})
	require.NoError(t, err)
	require.Equal(t, int64(1), tab.Offsets().DurableOffset)
	tab.flush.mu.Lock()
	group := tab.flush.group
	tab.flush.mu.Unlock()
	require.Equal(t, 1, group, "the group shrinks to the one caller that came")
	require.Equal(t, int64(1), tab.FsyncCount())
}

// After an unclean load the recovered records are made durable and the
// recovery-point checkpoint says so at once: killed again before any
// periodic checkpoint, the next load re-reads only the last segment, not
// the whole log.
func TestRecoveryPointAfterRecovery(t *testing.T) {
	mem := vfs.NewMem()
	e := newEnv(t, mem, "/data")
	cfg := DefaultConfig()
	cfg.SegmentBytes = 1000
	cfg.SegmentIndexBytes = 4096
	tab := e.create(cfg)
	var end int64
	for range 60 {
		res, err := tab.Append(batch(t, 2, 1, 100), AppendOptions{Sync: true})
		require.NoError(t, err)
		end = res.LastOffset + 1
	}
	require.Greater(t, len(tab.Segments()), 5)
	after := mem.Crash(vfs.CrashDropAll, 1) // killed: the recovery point never moved
	m, err := OpenManager(after, "/data", ManagerOptions{Tablet: Options{Logger: quiet}})
	require.NoError(t, err)
	first := m.Loaded.Tablets[0].RecoveredBytes
	points, err := checkpoint.ReadOffsets(after, "/data/"+checkpoint.RecoveryPointFile)
	require.NoError(t, err)
	require.Equal(t, end, points[tp0], "the checkpoint is written after the recovery")
	got, _ := m.Get(tp0)
	segs := got.Segments()
	last := segs[len(segs)-1].Size

	again := after.Crash(vfs.CrashDropAll, 2) // killed again at once
	m2, err := OpenManager(again, "/data", ManagerOptions{Tablet: Options{Logger: quiet}})
	require.NoError(t, err)
	defer m2.Close()
	second := m2.Loaded.Tablets[0].RecoveredBytes
	require.LessOrEqual(t, second, last, "only the segment holding the recovery point is read again")
	require.Greater(t, first, 4*second)
	got2, _ := m2.Get(tp0)
	require.Equal(t, end, got2.Offsets().LogEndOffset)
}

// A segment rolled with nothing appended yet has a name no flush has
// synced. Whether the tablet is then closed cleanly or its process killed
// (the page cache keeping everything), the next open must not take that
// name as durable: records appended to the segment and acknowledged as
// durable survive a power cut after it.
func TestRolledSegmentSurvivesAPowerCutAfterReopen(t *testing.T) {
	for _, how := range []string{"clean close", "killed"} {
		t.Run(how, func(t *testing.T) {
			mem := vfs.NewMem()
			e := newEnv(t, mem, "/data")
			tab := e.create(DefaultConfig())
			_, err := tab.Append(batch(t, 2, 1, 10), AppendOptions{})
			require.NoError(t, err)
			require.NoError(t, tab.Flush())
			rollAndFlush(t, tab) // a new, empty active segment at the log end: the flush after the roll has nothing to do
			require.Len(t, tab.Segments(), 2)
			if how == "clean close" {
				e.reopen()
			} else {
				after := mem.Crash(vfs.CrashKeepAll, 1)
				e.m.Close()
				mem = after
				e.fsys = mem
				e.open()
			}
			tab = e.tablet()
			res, err := tab.Append(batch(t, 3, 1, 10), AppendOptions{Sync: true})
			require.NoError(t, err)
			acked := res.LastOffset + 1
			after := mem.Crash(vfs.CrashDropAll, 2) // a power cut: nothing unsynced kept
			m, err := OpenManager(after, "/data", ManagerOptions{Tablet: Options{Logger: quiet}})
			require.NoError(t, err)
			defer m.Close()
			got, ok := m.Get(tp0)
			require.True(t, ok)
			require.Equal(t, acked, got.Offsets().LogEndOffset, "the durable records in the rolled segment")
		})
	}
}
