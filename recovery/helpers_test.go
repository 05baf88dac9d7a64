package recovery

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/internal/vfs"
	"github.com/seglog/seglog/leaderepoch"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/segment"
	"github.com/seglog/seglog/txnindex"
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
}

func newTestLog(t *testing.T, fsys vfs.FS, dataDir string, opts segment.Options) *testLog {
	opts.EnsureDefaults()
	dir := filepath.Join(dataDir, tp.DirName())
	require.NoError(t, fsys.MkdirAll(dir, 0o755))
	require.NoError(t, fsys.SyncDir(dataDir))
	l := &testLog{t: t, fsys: fsys, dataDir: dataDir, dir: dir, opts: opts, seqs: map[int64]int32{}, now: 1_700_000_000_000}
	var err error
	l.state, err = writerstate.Open(fsys, dir, writerstate.Options{Now: l.clock})
	require.NoError(t, err)
	l.epochs, err = leaderepoch.Open(fsys, filepath.Join(dir, checkpoint.LeaderEpochFile))
	require.NoError(t, err)
	seg, err := segment.Create(fsys, dir, 0, opts)
	require.NoError(t, err)
	l.segs = []*segment.Segment{seg}
	require.NoError(t, fsys.SyncDir(dir))
	return l
}

func (l *testLog) clock() time.Time { return time.UnixMilli(l.now) }

func (l *testLog) active() *segment.Segment { return l.segs[len(l.segs)-1] }

// roll seals the active segment and starts one at the log end.
func (l *testLog) roll() {
	require.NoError(l.t, l.active().Seal())
	seg, err := segment.Create(l.fsys, l.dir, l.next, l.opts)
	require.NoError(l.t, err)
	l.segs = append(l.segs, seg)
	l.state.UpdateMapEndOffset(l.next)
	require.NoError(l.t, l.state.TakeSnapshot(false))
	require.NoError(l.t, l.fsys.SyncDir(l.dir))
}

// appendBatch stamps the batch at the log end and appends it.
func (l *testLog) appendBatch(data []byte) {
	b, _, err := record.ParseBatch(data)
	require.NoError(l.t, err)
	b.SetBaseOffset(l.next)
	b.SetPartitionLeaderEpoch(l.epoch)
	reason, err := l.active().ShouldRoll(segment.RollParams{SegmentBytes: l.opts.SegmentBytes, SegmentMs: 1 << 50,
		MaxTimestamp: b.MaxTimestamp(), MaxOffset: b.LastOffset(), Size: int64(b.Size()), NowMs: l.now})
	require.NoError(l.t, err)
	if reason != segment.RollNone && l.active().Size() > 0 {
		l.roll()
	}
	if latest, ok := l.epochs.LatestEpoch(); !ok || l.epoch > latest {
		require.NoError(l.t, l.epochs.Assign(l.epoch, b.BaseOffset()))
	}
	a := l.state.NewAppend(record.OriginReplication)
	completed, err := a.AddBatch(b)
	require.NoError(l.t, err)
	require.NoError(l.t, l.active().Append(segment.AppendInfo{LargestOffset: b.LastOffset(),
		LargestTimestamp: b.MaxTimestamp(), ShallowOffsetOfMaxTimestamp: b.LastOffset()}, data))
	l.state.Apply(a)
	if completed != nil {
		if completed.IsAborted {
			require.NoError(l.t, l.active().TxnIndex().Append(txnindex.AbortedTxn{ProducerID: completed.ProducerID,
				FirstOffset: completed.FirstOffset, LastOffset: completed.LastOffset,
				LastStableOffset: l.state.LastStableOffsetOf(*completed)}))
		}
		require.NoError(l.t, l.state.CompleteTxn(*completed))
	}
	l.next = b.NextOffset()
	l.state.UpdateMapEndOffset(l.next)
}

// records appends a batch of n plain records of size bytes, timestamped
// with the clock.
func (l *testLog) records(n, size int) {
	b := record.NewBuilder(record.None)
	for i := range n {
		require.NoError(l.t, b.Append(record.Record{Timestamp: l.now + int64(i), Key: []byte(fmt.Sprintf("k%d", l.next+int64(i))),
			Value: make([]byte, size)}))
	}
	batch, err := b.Build()
	require.NoError(l.t, err)
	l.appendBatch(batch.Bytes())
}

// txn appends n transactional records of producer pid.
func (l *testLog) txn(pid int64, n int) {
	b := record.NewBuilder(record.None)
	b.SetProducer(pid, 0, l.seqs[pid])
	b.SetTransactional(true)
	for range n {
		require.NoError(l.t, b.Append(record.Record{Timestamp: l.now, Value: []byte("txn")}))
	}
	l.seqs[pid] += int32(n)
	batch, err := b.Build()
	require.NoError(l.t, err)
	l.appendBatch(batch.Bytes())
}

// marker appends a COMMIT or ABORT of producer pid.
func (l *testLog) marker(pid int64, typ record.ControlType) {
	data, err := record.EndTxnMarker{Type: typ, ProducerID: pid, ProducerEpoch: 0, Timestamp: l.now}.AppendTo(nil)
	require.NoError(l.t, err)
	l.appendBatch(data)
}

// flush makes everything durable and checkpoints the recovery point.
func (l *testLog) flush() {
	for _, s := range l.segs {
		require.NoError(l.t, s.Flush())
	}
	require.NoError(l.t, l.fsys.SyncDir(l.dir))
	l.checkpoint(checkpoint.RecoveryPointFile, l.next)
}

func (l *testLog) checkpoint(name string, offset int64) {
	require.NoError(l.t, checkpoint.WriteOffsets(l.fsys, filepath.Join(l.dataDir, name), checkpoint.Offsets{tp: offset}))
}

// closeClean shuts down cleanly: segments closed, a snapshot at the log
// end, checkpoints, and the marker last.
func (l *testLog) closeClean() {
	l.flush()
	for _, s := range l.segs {
		require.NoError(l.t, s.Close())
	}
	require.NoError(l.t, l.state.TakeSnapshot(true))
	require.NoError(l.t, l.fsys.SyncDir(l.dir))
	require.NoError(l.t, checkpoint.WriteCleanShutdown(l.fsys, l.dataDir, 1))
}

// closeDirty closes the files without the marker (a crash that lost
// nothing: the page cache survived).
func (l *testLog) closeDirty() {
	for _, s := range l.segs {
		require.NoError(l.t, s.Close())
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

func abortedOf(t *testing.T, tab *Tablet) []txnindex.AbortedTxn {
	var out []txnindex.AbortedTxn
	for _, s := range tab.Segments {
		all, err := s.TxnIndex().All()
		require.NoError(t, err)
		out = append(out, all...)
	}
	return out
}
