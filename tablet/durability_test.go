package tablet

import (
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/internal/testenv"
	"github.com/seglog/seglog/leaderepoch"
	"github.com/seglog/seglog/record"
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

// Concurrent Sync appends share fsyncs (group commit): while one flush
// runs, the appends that arrive wait and are then covered by one flush.
func TestGroupCommitSharesFsyncs(t *testing.T) {
	const others = 7
	in := vfs.NewInjector(vfs.NewMem())
	g := newStepFS(in)
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
	g.armed.Store(true)
	go func() { // the leader: its fsync blocks at the gate
		defer done.Done()
		_, err := tab.Append(leader, AppendOptions{Sync: true})
		assert.NoError(t, err)
	}()
	release := <-g.entered
	g.armed.Store(false)
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
	close(release)
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

// stepFS holds every fsync of a .log while armed: each sends on entered
// the channel whose close releases it.
type stepFS struct {
	vfs.FS
	armed   atomic.Bool
	entered chan chan struct{}
}

func newStepFS(fs vfs.FS) *stepFS {
	return &stepFS{FS: fs, entered: make(chan chan struct{})}
}

func (g *stepFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := g.FS.OpenFile(name, flag, perm)
	if err != nil || !strings.HasSuffix(name, ".log") {
		return f, err
	}
	return &stepFile{File: f, g: g}, nil
}

type stepFile struct {
	vfs.File
	g *stepFS
}

func (f *stepFile) Datasync() error {
	if f.g.armed.Load() {
		release := make(chan struct{})
		f.g.entered <- release
		<-release
	}
	return f.File.Datasync()
}

// The syncs are pipelined: a Sync append that arrived during a sync
// starts the next one itself as that one returns, and the callers the
// first covered are released while the second runs — nobody waits for a
// gathering.
func TestGroupCommitPipelines(t *testing.T) {
	g := newStepFS(vfs.NewMem())
	e := newEnv(t, g, "/data")
	t.Cleanup(func() { g.armed.Store(false) }) // before the manager's Close flushes
	tab := e.create(DefaultConfig())
	_, err := tab.Append(batch(t, 1, 1, 10), AppendOptions{Sync: true}) // the segment exists and is named
	require.NoError(t, err)
	g.armed.Store(true)

	first, second := batch(t, 1, 1, 10), batch(t, 1, 1, 10)
	aDone, bDone := make(chan error, 1), make(chan error, 1)
	go func() { _, err := tab.Append(first, AppendOptions{Sync: true}); aDone <- err }()
	firstSync := <-g.entered // the first sync runs, for offset 1
	waiting := make(chan struct{})
	tab.flush.mu.Lock()
	tab.flush.onWait = func() { close(waiting) }
	tab.flush.mu.Unlock()
	go func() { _, err := tab.Append(second, AppendOptions{Sync: true}); bDone <- err }()
	<-waiting // offset 2 is appended and waits for the sync in progress
	close(firstSync)
	secondSync := <-g.entered // the second sync started: the first did not cover offset 2
	require.NoError(t, <-aDone, "the first caller is released while the second sync runs")
	select {
	case err := <-bDone:
		t.Fatalf("the second caller returned (%v) before its sync ended", err)
	default:
	}
	require.Equal(t, int64(2), tab.Offsets().DurableOffset)
	close(secondSync)
	require.NoError(t, <-bDone)
	require.Equal(t, int64(3), tab.Offsets().DurableOffset)
}

// A sync reads the log end without the tablet's lock. A truncation while
// it runs may refill the offsets it covered with records it did not sync:
// its end is then not taken as durable, and the next sync covers them.
func TestSyncOverlappingATruncation(t *testing.T) {
	g := newStepFS(vfs.NewMem())
	e := newEnv(t, g, "/data")
	t.Cleanup(func() { g.armed.Store(false) }) // before the manager's Close flushes
	tab := e.create(DefaultConfig())
	for range 10 {
		_, err := tab.Append(batch(t, 1, 1, 10), AppendOptions{})
		require.NoError(t, err)
	}
	g.armed.Store(true)
	last := batch(t, 1, 1, 10)
	done := make(chan error, 1)
	go func() { _, err := tab.Append(last, AppendOptions{Sync: true}); done <- err }()
	firstSync := <-g.entered // a sync up to offset 11 runs
	truncated := make(chan error, 1)
	go func() { truncated <- tab.TruncateTo(5) }()
	close(<-g.entered) // the truncation syncs the segment it cut
	require.NoError(t, <-truncated)
	for range 8 {
		_, err := tab.Append(batch(t, 1, 1, 10), AppendOptions{})
		require.NoError(t, err)
	}
	require.Equal(t, int64(13), tab.Offsets().LogEndOffset)
	close(firstSync)
	var again chan struct{}
	select {
	case again = <-g.entered: // the caller syncs again: what the first sync covered was truncated meanwhile
	case err := <-done:
		t.Fatalf("the Sync append returned (%v) on a sync a truncation overlapped: durable offset %d",
			err, tab.Offsets().DurableOffset)
	}
	require.Equal(t, int64(0), tab.Offsets().DurableOffset, "offsets 5–10 hold records the first sync may not have covered")
	close(again)
	require.NoError(t, <-done)
	require.Equal(t, int64(13), tab.Offsets().DurableOffset)
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

// The epoch a replicated batch starts is written to the
// leader-epoch-checkpoint lazily: not by its append, by the flush that
// moves the recovery point past it. A crash before loses nothing: the
// recovery rebuilds the entry from the batch.
func TestLeaderEpochWrittenLazily(t *testing.T) {
	mem := vfs.NewMem()
	e := newEnv(t, mem, "/data")
	tab := e.create(DefaultConfig())
	file := tab.Dir() + "/leader-epoch-checkpoint"
	replicated := func(base int64, epoch int32) {
		b := batch(t, 2, 1, 10)
		parsed, _, err := record.ParseBatch(b)
		require.NoError(t, err)
		parsed.SetBaseOffset(base)
		parsed.SetPartitionLeaderEpoch(epoch)
		_, err = tab.Append(b, AppendOptions{Origin: record.OriginReplication, Sync: true})
		require.NoError(t, err)
	}
	replicated(0, 3)
	replicated(2, 5)
	require.Equal(t, []leaderepoch.Entry{{Epoch: 3, StartOffset: 0}, {Epoch: 5, StartOffset: 2}}, tab.LeaderEpochs())
	onDisk, err := checkpoint.ReadEpochs(mem, file)
	require.NoError(t, err)
	require.Empty(t, onDisk, "the appends wrote no checkpoint")

	crashed := mem.Crash(vfs.CrashDropAll, 1)
	m, err := OpenManager(crashed, "/data", ManagerOptions{Tablet: Options{Logger: quiet}})
	require.NoError(t, err)
	got, ok := m.Get(tp0)
	require.True(t, ok)
	require.Equal(t, []leaderepoch.Entry{{Epoch: 3, StartOffset: 0}, {Epoch: 5, StartOffset: 2}}, got.LeaderEpochs(),
		"recovery found the epochs in the synced batches")
	require.NoError(t, m.Close())

	require.NoError(t, tab.Flush())
	onDisk, err = checkpoint.ReadEpochs(mem, file)
	require.NoError(t, err)
	require.Equal(t, []checkpoint.EpochEntry{{Epoch: 3, StartOffset: 0}, {Epoch: 5, StartOffset: 2}}, onDisk, "the flush that moved the recovery point wrote them")
	require.Equal(t, int64(4), tab.Offsets().RecoveryPoint)
}
