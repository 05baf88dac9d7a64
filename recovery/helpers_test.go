package recovery

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/leaderepoch"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/segment"
	"github.com/seglog/seglog/vfs"
	"github.com/seglog/seglog/writerstate"
)

var tp = checkpoint.TopicPartition{Topic: "orders", Partition: 0}

// testLog writes a tablet the way the tablet will: segments rolled by
// size, offsets and leader epochs stamped, writer state and epochs kept,
// aborted transactions indexed, snapshots taken on roll. It stands in for
// the tablet (a later issue) so that recovery can be tested against real
// directories.
type testLog struct {
	t       *testing.T
	fsys    vfs.FS
	dataDir string
	dir     string
	opts    segment.Options
	segs    []*segment.Segment
	next    int64
	state   *writerstate.State
	epochs  *leaderepoch.Cache
	epoch   int32
	seqs    map[int64]int32
	now     int64
	// keys holds what every appended offset holds (see offsetsOf).
	keys map[int64]string
	// durable is the log end as of the last flush that succeeded.
	durable int64
	// tolerant makes a failing operation stop the workload (through
	// runUntilFault) instead of failing the test.
	tolerant bool
}

// faultStop is the panic value with which must stops a tolerant workload.
type faultStop struct{ err error }

func (l *testLog) must(err error) {
	if err == nil {
		return
	}
	if l.tolerant {
		panic(faultStop{err})
	}
	l.t.Helper()
	require.NoError(l.t, err)
}

// runUntilFault runs a workload that stops at the first failing operation
// and returns that failure, or nil.
func runUntilFault(workload func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			stop, ok := r.(faultStop)
			if !ok {
				panic(r)
			}
			err = stop.err
		}
	}()
	workload()
	return nil
}

func newTestLog(t *testing.T, fsys vfs.FS, dataDir string, opts segment.Options) *testLog {
	opts.EnsureDefaults()
	l := &testLog{t: t, fsys: fsys, dataDir: dataDir, dir: filepath.Join(dataDir, tp.DirName()), opts: opts,
		seqs: map[int64]int32{}, keys: map[int64]string{}, now: 1_700_000_000_000}
	l.create()
	return l
}

// newTolerantTestLog is newTestLog for a workload run by runUntilFault;
// the directory is created by the workload's first call, create.
func newTolerantTestLog(t *testing.T, fsys vfs.FS, dataDir string, opts segment.Options) *testLog {
	opts.EnsureDefaults()
	return &testLog{t: t, fsys: fsys, dataDir: dataDir, dir: filepath.Join(dataDir, tp.DirName()), opts: opts,
		seqs: map[int64]int32{}, keys: map[int64]string{}, now: 1_700_000_000_000, tolerant: true}
}

// create makes the tablet directory, its first segment, writer state and
// epoch cache.
func (l *testLog) create() {
	l.must(l.fsys.MkdirAll(l.dir, 0o755))
	l.must(l.fsys.SyncDir(l.dataDir))
	var err error
	l.state, err = writerstate.Open(l.fsys, l.dir, writerstate.Options{Now: l.clock})
	l.must(err)
	l.epochs, err = leaderepoch.Open(l.fsys, filepath.Join(l.dir, checkpoint.LeaderEpochFile))
	l.must(err)
	seg, err := segment.Create(l.fsys, l.dir, 0, l.opts)
	l.must(err)
	l.segs = []*segment.Segment{seg}
	l.must(l.fsys.SyncDir(l.dir))
}

func (l *testLog) clock() time.Time { return time.UnixMilli(l.now) }

func (l *testLog) active() *segment.Segment { return l.segs[len(l.segs)-1] }

// roll seals the active segment and starts one at the log end.
func (l *testLog) roll() {
	l.must(l.active().Seal())
	seg, err := segment.Create(l.fsys, l.dir, l.next, l.opts)
	l.must(err)
	l.segs = append(l.segs, seg)
	l.state.UpdateMapEndOffset(l.next)
	l.must(l.state.TakeSnapshot(false))
	l.must(l.fsys.SyncDir(l.dir))
}

// appendBatch stamps the batch at the log end and appends it.
func (l *testLog) appendBatch(data []byte) {
	b, _, err := record.ParseBatch(data)
	l.must(err)
	b.SetBaseOffset(l.next)
	b.SetPartitionLeaderEpoch(l.epoch)
	reason, err := l.active().ShouldRoll(segment.RollParams{SegmentBytes: l.opts.SegmentBytes, SegmentMs: 1 << 50,
		MaxTimestamp: b.MaxTimestamp(), MaxOffset: b.LastOffset(), Size: int64(b.Size()), NowMs: l.now})
	l.must(err)
	if reason != segment.RollNone && l.active().Size() > 0 {
		l.roll()
	}
	if latest, ok := l.epochs.LatestEpoch(); !ok || l.epoch > latest {
		l.must(l.epochs.Assign(l.epoch, b.BaseOffset()))
	}
	a := l.state.NewAppend(record.OriginReplication)
	completed, err := a.AddBatch(b)
	l.must(err)
	l.must(l.active().Append(segment.AppendInfo{LargestOffset: b.LastOffset(),
		LargestTimestamp: b.MaxTimestamp(), ShallowOffsetOfMaxTimestamp: b.LastOffset()}, data))
	var it record.Iter
	it.Reset(b, record.DefaultMaxUncompressed)
	for it.Next() {
		l.keys[it.Record().Offset] = string(it.Record().Key)
	}
	l.must(it.Err())
	l.state.Apply(a)
	if completed != nil {
		if completed.IsAborted {
			l.must(l.active().AppendAbortedTxn(record.AbortedTxn{ProducerID: completed.ProducerID,
				FirstOffset: completed.FirstOffset, LastOffset: completed.LastOffset,
				LastStableOffset: l.state.LastStableOffsetOf(*completed)}))
		}
		l.must(l.state.CompleteTxn(*completed))
	}
	l.next = b.NextOffset()
	l.state.UpdateMapEndOffset(l.next)
}

// records appends a batch of n plain records of size bytes, timestamped
// with the clock.
func (l *testLog) records(n, size int) {
	b := record.NewBuilder(record.None)
	for i := range n {
		l.must(b.Append(record.Record{Timestamp: l.now + int64(i), Key: []byte(fmt.Sprintf("k%d", l.next+int64(i))),
			Value: make([]byte, size)}))
	}
	batch, err := b.Build()
	l.must(err)
	l.appendBatch(batch.Bytes())
}

// txn appends n transactional records of producer pid.
func (l *testLog) txn(pid int64, n int) {
	b := record.NewBuilder(record.None)
	b.SetProducer(pid, 0, l.seqs[pid])
	b.SetTransactional(true)
	for range n {
		l.must(b.Append(record.Record{Timestamp: l.now, Value: []byte("txn")}))
	}
	l.seqs[pid] += int32(n)
	batch, err := b.Build()
	l.must(err)
	l.appendBatch(batch.Bytes())
}

// marker appends a COMMIT or ABORT of producer pid.
func (l *testLog) marker(pid int64, typ record.ControlType) {
	data, err := record.EndTxnMarker{Type: typ, ProducerID: pid, ProducerEpoch: 0, Timestamp: l.now}.AppendTo(nil)
	l.must(err)
	l.appendBatch(data)
}

// flush makes everything durable and checkpoints the recovery point.
func (l *testLog) flush() {
	for _, s := range l.segs {
		l.must(s.Flush())
	}
	for _, o := range l.state.Snapshots() {
		l.must(l.state.SyncSnapshot(o))
	}
	l.must(l.fsys.SyncDir(l.dir))
	l.durable = l.next
	l.checkpoint(checkpoint.RecoveryPointFile, l.next)
}

func (l *testLog) checkpoint(name string, offset int64) {
	l.must(checkpoint.WriteOffsets(l.fsys, filepath.Join(l.dataDir, name), checkpoint.Offsets{tp: offset}))
}

// closeClean shuts down cleanly: segments closed, a snapshot at the log
// end, checkpoints, and the marker last.
func (l *testLog) closeClean() {
	l.flush()
	for _, s := range l.segs {
		l.must(s.Close())
	}
	l.must(l.state.TakeSnapshot(true))
	l.must(l.fsys.SyncDir(l.dir))
	l.must(checkpoint.WriteCleanShutdown(l.fsys, l.dataDir, 1))
}

// closeDirty closes the files without the marker (a crash that lost
// nothing: the page cache survived).
func (l *testLog) closeDirty() {
	for _, s := range l.segs {
		l.must(s.Close())
	}
}

// load loads the data directory with the segment options the log was
// written with.
func (l *testLog) load() *Result {
	return load(l.t, l.fsys, l.dataDir, l.opts)
}

func load(t *testing.T, fsys vfs.FS, dataDir string, opts segment.Options) *Result {
	r, err := Load(fsys, dataDir, Options{Segment: opts})
	require.NoError(t, err)
	t.Cleanup(func() { r.Close() })
	require.Len(t, r.Tablets, 1)
	return r
}

// offsetsOf returns every record offset in the tablet, with its key.
func offsetsOf(t *testing.T, tab *Tablet) map[int64]string {
	out := map[int64]string{}
	for _, s := range tab.Segments {
		require.NoError(t, s.Batches(s.BaseOffset(), segment.NoMaxPosition, func(b record.Batch) error {
			require.NoError(t, b.Verify())
			var it record.Iter
			it.Reset(b, record.DefaultMaxUncompressed)
			for it.Next() {
				out[it.Record().Offset] = string(it.Record().Key)
			}
			return it.Err()
		}))
	}
	return out
}

func abortedOf(t *testing.T, tab *Tablet) []record.AbortedTxn {
	var out []record.AbortedTxn
	for _, s := range tab.Segments {
		all, err := s.AbortedTxns()
		require.NoError(t, err)
		out = append(out, all...)
	}
	return out
}
