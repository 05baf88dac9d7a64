package recovery

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/seglog/seglog/logfile"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/leaderepoch"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/segment"
	"github.com/seglog/seglog/vfs"
	"github.com/seglog/seglog/writerstate"
)

func dataDir(t *testing.T) string { return t.TempDir() }

// Scenario 39: testLogRecoversToCorrectOffset.
func TestLogRecoversToCorrectOffset(t *testing.T) {
	const numMessages, messageSize = 100, 100
	d := dataDir(t)
	opts := segment.Options{SegmentBytes: 7 * messageSize, IndexIntervalBytes: 3 * messageSize, MaxIndexSize: 4096}
	l := newTestLog(t, vfs.OS, d, opts)
	for i := 0; i < numMessages; i++ {
		l.now += 10
		l.records(1, messageSize)
	}
	require.Equal(t, int64(numMessages), l.next)
	active := l.active()
	info, err := active.IndexInfo()
	require.NoError(t, err)
	lastIndexOffset, numIndexEntries := info.LastIndexedOffset, info.OffsetEntries
	largest, err := active.LargestTimestamp()
	require.NoError(t, err)
	l.closeDirty()

	verify := func(r *Result, wantRecoveryPoint int64) {
		tab := r.Tablets[0]
		require.Equal(t, wantRecoveryPoint, tab.RecoveryPoint)
		require.Equal(t, int64(numMessages), tab.LogEndOffset)
		act := tab.Segments[len(tab.Segments)-1]
		info, err := act.IndexInfo()
		require.NoError(t, err)
		require.Equal(t, lastIndexOffset, info.LastIndexedOffset)
		require.Equal(t, numIndexEntries, info.OffsetEntries)
		te := info.LastTimeEntry
		require.Equal(t, largest, te.Timestamp, "the last time entry is the largest timestamp")
		require.Equal(t, int64(numMessages-1), te.Offset, "at the last offset")
	}
	l.checkpoint(checkpoint.RecoveryPointFile, numMessages)
	r := l.load()
	verify(r, numMessages)
	require.NoError(t, r.Close())

	l.checkpoint(checkpoint.RecoveryPointFile, 10)
	r = l.load()
	verify(r, 10) // it only moves with a flush
	require.Greater(t, r.Tablets[0].RecoveredBytes, int64(0))
}

// Scenario 40: testIndexRebuild; scenario 41: testCorruptIndexRebuild.
func TestIndexRebuild(t *testing.T) {
	for _, damage := range []string{"deleted", "two bytes"} {
		t.Run(damage, func(t *testing.T) {
			d := dataDir(t)
			l := newTestLog(t, vfs.OS, d, segment.Options{SegmentBytes: 500, IndexIntervalBytes: 1})
			for range 200 {
				l.now += 10
				l.records(1, 10)
			}
			l.closeClean()
			names, err := os.ReadDir(l.dir)
			require.NoError(t, err)
			for _, n := range names {
				if ext := filepath.Ext(n.Name()); ext == ".index" || ext == ".timeindex" {
					p := filepath.Join(l.dir, n.Name())
					if damage == "deleted" {
						require.NoError(t, os.Remove(p))
					} else {
						require.NoError(t, os.WriteFile(p, []byte{1, 2}, 0o644))
					}
				}
			}
			if damage == "two bytes" {
				require.NoError(t, os.Remove(filepath.Join(d, checkpoint.CleanShutdownFile))) // unclean
			}
			r := l.load()
			tab := r.Tablets[0]
			for off := int64(0); off < 200; off++ {
				s := segmentFor(tab, off)
				got, ok, err := s.TranslateOffset(off, 0)
				require.NoError(t, err)
				require.True(t, ok)
				require.Equal(t, off, got.Offset)
				ts, ok, err := s.FindOffsetByTimestamp(1_700_000_000_000+(off+1)*10, 0)
				require.NoError(t, err)
				require.True(t, ok)
				require.Equal(t, off, ts.Offset)
			}
			for _, s := range tab.Segments {
				for _, k := range []logfile.Kind{logfile.Index, logfile.TimeIndex} {
					problems, err := s.VerifyIndex(k)
					require.NoError(t, err)
					require.Empty(t, problems)
				}
			}
		})
	}
}

func segmentFor(tab *Tablet, offset int64) *segment.Segment {
	i, _ := slices.BinarySearchFunc(tab.Segments, offset+1, func(s *segment.Segment, o int64) int {
		return int(s.BaseOffset() - o)
	})
	return tab.Segments[i-1]
}

// Scenario 42: testBogusIndexSegmentsAreRemoved; scenario 44:
// testOpenDeletesObsoleteFiles.
func TestOrphansAndLeftoversAreRemoved(t *testing.T) {
	d := dataDir(t)
	l := newTestLog(t, vfs.OS, d, segment.Options{SegmentBytes: 300})
	for range 20 {
		l.records(1, 50)
	}
	require.Greater(t, len(l.segs), 3)
	l.closeClean()
	orphan := filepath.Join(l.dir, "00000000000000000005.index")
	require.NoError(t, os.WriteFile(orphan, make([]byte, 80), 0o644))
	// A segment pending deletion.
	doomed := l.segs[1].BaseOffset()
	for _, k := range []logfile.Kind{logfile.Log, logfile.Index, logfile.TimeIndex} {
		name := logfile.Filename(doomed, k)
		require.NoError(t, os.Rename(filepath.Join(l.dir, name), filepath.Join(l.dir, name+logfile.DeletedSuffix)))
	}
	r := l.load()
	_, err := os.Stat(orphan)
	require.ErrorIs(t, err, os.ErrNotExist)
	names, err := os.ReadDir(l.dir)
	require.NoError(t, err)
	for _, n := range names {
		require.NotContains(t, n.Name(), ".deleted")
	}
	var files []string
	for _, c := range r.Tablets[0].Report {
		files = append(files, filepath.Base(c.File)+" "+string(c.Action))
	}
	require.Contains(t, files, "00000000000000000005.index deleted")
	require.Contains(t, files, logfile.Filename(doomed, logfile.Log)+logfile.DeletedSuffix+" deleted")
}

// Scenario 43: testReopenThenTruncate.
func TestReopenThenTruncate(t *testing.T) {
	d := dataDir(t)
	l := newTestLog(t, vfs.OS, d, segment.Options{SegmentBytes: 1000})
	for range 30 {
		l.records(1, 50)
	}
	l.closeDirty()
	r := l.load()
	tab := r.Tablets[0]
	require.Greater(t, len(tab.Segments), 1)
	require.Greater(t, tab.Segments[1].BaseOffset(), int64(3))
	for _, s := range tab.Segments[1:] {
		require.NoError(t, s.RemoveFiles())
	}
	tab.Segments = tab.Segments[:1]
	_, err := tab.Segments[0].TruncateTo(3)
	require.NoError(t, err)
	next, err := tab.Segments[0].ReadNextOffset()
	require.NoError(t, err)
	require.Equal(t, int64(3), next)
	// The truncated segment takes appends: its indexes have room again.
	b := record.NewBuilder(record.None)
	b.SetBaseOffset(3)
	require.NoError(t, b.Append(record.Record{Timestamp: 1, Value: []byte("x")}))
	batch, err := b.Build()
	require.NoError(t, err)
	require.NoError(t, tab.Segments[0].Append(segment.AppendInfo{LargestOffset: 3, LargestTimestamp: 1,
		ShallowOffsetOfMaxTimestamp: 3}, batch.Bytes()))
}

// Scenario 45: testCorruptLog.
func TestCorruptLog(t *testing.T) {
	for round := range 5 {
		d := dataDir(t)
		l := newTestLog(t, vfs.OS, d, segment.Options{SegmentBytes: 1000, IndexIntervalBytes: 1})
		var rnd [2]byte
		_, _ = rand.Read(rnd[:])
		n := 50 + int(rnd[0])%50
		for range n {
			l.records(1, 20)
		}
		l.closeDirty()
		before := offsetsOf(t, &Tablet{Segments: openAll(t, l)})
		appendNonsense(t, l.active().LogPath(), 1+int(rnd[1])*4)
		appendNonsense(t, l.active().Path(logfile.Index), 1+int(rnd[0])*4)
		l.checkpoint(checkpoint.RecoveryPointFile, 50)
		r := l.load()
		require.Equal(t, int64(n), r.Tablets[0].LogEndOffset, "round %d", round)
		require.Equal(t, before, offsetsOf(t, r.Tablets[0]), "round %d", round)
	}
}

func openAll(t *testing.T, l *testLog) []*segment.Segment {
	var out []*segment.Segment
	for _, s := range l.segs {
		o, err := segment.Open(vfs.OS, l.dir, s.BaseOffset(), segment.Options{ReadOnly: true})
		require.NoError(t, err)
		t.Cleanup(func() { o.Close() })
		out = append(out, o)
	}
	return out
}

func appendNonsense(t *testing.T, path string, n int) {
	junk := make([]byte, n)
	_, _ = rand.Read(junk)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.Write(junk)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// Scenario 46: testCleanShutdownFile.
func TestCleanShutdownSkipsRecovery(t *testing.T) {
	d := dataDir(t)
	l := newTestLog(t, vfs.OS, d, segment.Options{SegmentBytes: 300})
	for range 20 {
		l.records(1, 50)
	}
	l.closeClean()
	l.checkpoint(checkpoint.RecoveryPointFile, 0)
	r := l.load()
	require.True(t, r.CleanShutdown)
	require.Equal(t, int64(1), r.BrokerEpoch)
	require.Zero(t, r.Tablets[0].RecoveredBytes, "no segment was recovered")
	require.Equal(t, int64(20), r.Tablets[0].RecoveryPoint, "a clean shutdown recovers to the log end")
	_, err := os.Stat(filepath.Join(d, checkpoint.CleanShutdownFile))
	require.ErrorIs(t, err, os.ErrNotExist, "the marker is consumed")
	require.NoError(t, r.Close())
	r = l.load()
	require.False(t, r.CleanShutdown, "a second load without a marker is unclean")
}

// mixedTransactions is LogLoaderTest.testFullTransactionIndexRecovery's
// workload: four producers mixing transactional and plain data.
func mixedTransactions(l *testLog) {
	l.txn(1, 5)                       // 5
	l.records(3, 10)                  // 8
	l.txn(2, 2)                       // 10
	l.txn(1, 4)                       // 14
	l.txn(3, 3)                       // 17
	l.records(2, 10)                  // 19
	l.txn(1, 10)                      // 29
	l.marker(1, record.ControlAbort)  // 30
	l.txn(2, 6)                       // 36
	l.txn(4, 3)                       // 39
	l.records(10, 10)                 // 49
	l.txn(3, 9)                       // 58
	l.marker(3, record.ControlCommit) // 59
	l.txn(4, 8)                       // 67
	l.txn(2, 7)                       // 74
	l.marker(2, record.ControlAbort)  // 75
	l.records(10, 10)                 // 85
	l.txn(4, 4)                       // 89
	l.marker(4, record.ControlCommit) // 90
}

var wantAborted = []record.AbortedTxn{{ProducerID: 1, FirstOffset: 0, LastOffset: 29, LastStableOffset: 8},
	{ProducerID: 2, FirstOffset: 8, LastOffset: 74, LastStableOffset: 36}}

// Scenario 47: testFullTransactionIndexRecovery; scenario 48:
// testRecoverOnlyLastSegment.
func TestTransactionIndexRecovery(t *testing.T) {
	for _, onlyLast := range []bool{false, true} {
		d := dataDir(t)
		l := newTestLog(t, vfs.OS, d, segment.Options{SegmentBytes: 128 * 5})
		mixedTransactions(l)
		require.Equal(t, int64(90), l.next)
		require.Equal(t, wantAborted, abortedOf(t, &Tablet{Segments: l.segs}), "as appended")
		l.closeDirty()
		segs := l.segs
		if onlyLast {
			segs = segs[len(segs)-1:]
			l.checkpoint(checkpoint.RecoveryPointFile, segs[0].BaseOffset())
		}
		for _, s := range segs {
			require.NoError(t, os.Remove(s.Path(logfile.Index)))
			if err := os.Remove(s.Path(logfile.TxnIndex)); err != nil {
				require.ErrorIs(t, err, os.ErrNotExist)
			}
		}
		r := l.load()
		require.Equal(t, wantAborted, abortedOf(t, r.Tablets[0]), "only the last segment: %v", onlyLast)
		require.Equal(t, int64(90), r.Tablets[0].LogEndOffset)
		fuo, ok := r.Tablets[0].State.FirstUnstableOffset()
		require.False(t, ok, "every transaction ended: %d", fuo)
	}
}

// Scenario 49: testLogEndLessThanStartAfterReopen.
func TestLogEndLessThanStartAfterReopen(t *testing.T) {
	d := dataDir(t)
	l := newTestLog(t, vfs.OS, d, segment.Options{})
	for range 7 {
		l.records(1, 10)
		l.roll()
	}
	require.Len(t, l.segs, 8)
	l.closeDirty()
	l.checkpoint(checkpoint.LogStartOffsetFile, 4)
	l.checkpoint(checkpoint.RecoveryPointFile, 0)
	f, err := os.OpenFile(l.segs[2].LogPath(), os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("garbage garbage garbage"), 0)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	r := l.load()
	tab := r.Tablets[0]
	require.Len(t, tab.Segments, 1)
	require.Equal(t, int64(4), tab.Segments[0].BaseOffset())
	require.Zero(t, tab.Segments[0].Size())
	require.Equal(t, int64(4), tab.LogStartOffset)
	require.Equal(t, int64(4), tab.LogEndOffset)
	require.Empty(t, tab.Epochs.Entries())
}

// Scenario 50: testRecoverWithEmptyActiveSegment.
func TestRecoverWithEmptyActiveSegment(t *testing.T) {
	d := dataDir(t)
	l := newTestLog(t, vfs.OS, d, segment.Options{})
	l.records(5, 10)
	l.roll()
	l.closeDirty()
	_, err := os.Stat(l.active().Path(logfile.Index))
	require.ErrorIs(t, err, os.ErrNotExist, "a new segment's index is created on first use")
	r := l.load()
	tab := r.Tablets[0]
	require.Len(t, tab.Segments, 2)
	require.Equal(t, int64(5), tab.LogEndOffset)
	_, err = os.Stat(tab.Segments[1].Path(logfile.Index))
	require.NoError(t, err, "the active segment's index exists")
	info, err := tab.Segments[1].IndexInfo()
	require.NoError(t, err)
	require.False(t, info.Full)
}

// Scenario 51: testLoadingLogKeepsLargestStrayProducerStateSnapshot.
func TestLoadingKeepsLargestStraySnapshot(t *testing.T) {
	d := dataDir(t)
	l := newTestLog(t, vfs.OS, d, segment.Options{})
	l.txn(1, 1)
	l.marker(1, record.ControlCommit)
	l.roll() // a snapshot at 2
	l.txn(1, 1)
	l.roll() // at 3
	l.records(1, 10)
	l.records(1, 10)
	l.closeClean() // at the log end, 5
	require.Len(t, l.segs, 3)
	require.Equal(t, []int64{2, 3, 5}, l.state.Snapshots())
	require.NoError(t, os.WriteFile(filepath.Join(l.dir, logfile.Filename(4, logfile.Snapshot)), nil, 0o644))
	require.NoError(t, os.Remove(filepath.Join(d, checkpoint.CleanShutdownFile)))
	r := l.load()
	require.Equal(t, []int64{2, 3, 5}, r.Tablets[0].State.Snapshots(), "the stray at 4 goes, the largest at 5 stays")
}

// Scenario 53: testSkipTruncateAndReloadIfNewMessageFormatAndCleanShutdown.
func TestCleanShutdownWithoutSnapshotsSkipsReplay(t *testing.T) {
	d := dataDir(t)
	l := newTestLog(t, vfs.OS, d, segment.Options{SegmentBytes: 300})
	for range 10 {
		l.txn(1, 1)
	}
	l.closeClean()
	names, err := os.ReadDir(l.dir)
	require.NoError(t, err)
	for _, n := range names {
		if filepath.Ext(n.Name()) == ".snapshot" {
			require.NoError(t, os.Remove(filepath.Join(l.dir, n.Name())))
		}
	}
	r := l.load()
	tab := r.Tablets[0]
	require.Zero(t, tab.State.ProducerCount(), "nothing was replayed")
	require.Contains(t, tab.State.Snapshots(), tab.LogEndOffset, "empty snapshots were written instead")
}

// Scenario 35: testRecoveryRebuildsEpochCache.
func TestRecoveryRebuildsEpochCache(t *testing.T) {
	mem := vfs.NewMem()
	require.NoError(t, mem.MkdirAll("/p", 0o755))
	seg, err := segment.Create(mem, "/p", 100, segment.Options{})
	require.NoError(t, err)
	defer seg.Close()
	for i, epoch := range []int32{0, 1, 1, 2} {
		b := record.NewBuilder(record.None)
		b.SetBaseOffset(int64(104 + 2*i))
		b.SetPartitionLeaderEpoch(epoch)
		require.NoError(t, b.Append(record.Record{Timestamp: 1, Value: []byte("a")}))
		require.NoError(t, b.Append(record.Record{Timestamp: 1, Value: []byte("b")}))
		batch, err := b.Build()
		require.NoError(t, err)
		require.NoError(t, seg.Append(segment.AppendInfo{LargestOffset: batch.LastOffset(), LargestTimestamp: 1,
			ShallowOffsetOfMaxTimestamp: batch.LastOffset()}, batch.Bytes()))
	}
	epochs, err := leaderepoch.Open(mem, "/p/"+checkpoint.LeaderEpochFile)
	require.NoError(t, err)
	state, err := writerstate.Open(mem, "/p", writerstate.Options{})
	require.NoError(t, err)
	_, err = seg.Recover(&replayer{state: state, epochs: epochs})
	require.NoError(t, err)
	require.Equal(t, []leaderepoch.Entry{{Epoch: 0, StartOffset: 104}, {Epoch: 1, StartOffset: 106}, {Epoch: 2, StartOffset: 110}},
		epochs.Entries())
}

// CloseClean leaves a directory that loads without recovery and to the same
// state.
func TestCloseCleanSkipsTheNextRecovery(t *testing.T) {
	d := dataDir(t)
	l := newTestLog(t, vfs.OS, d, segment.Options{SegmentBytes: 400})
	for range 20 {
		l.records(1, 50)
	}
	l.txn(7, 2)
	l.closeDirty()
	r, err := Load(vfs.OS, d, Options{Now: l.clock})
	require.NoError(t, err)
	require.False(t, r.CleanShutdown)
	require.Positive(t, r.RecoveredBytes())
	first := r.Tablets[0]
	want, wantEnd, wantProducers := offsetsOf(t, first), first.LogEndOffset, first.State.Producers()
	require.NoError(t, r.CloseClean(9))

	r, err = Load(vfs.OS, d, Options{Now: l.clock})
	require.NoError(t, err)
	t.Cleanup(func() { r.Close() })
	require.True(t, r.CleanShutdown)
	require.Equal(t, int64(9), r.BrokerEpoch)
	tab := r.Tablets[0]
	require.Zero(t, r.RecoveredBytes())
	require.Empty(t, tab.Report)
	require.Equal(t, wantEnd, tab.LogEndOffset)
	require.Equal(t, wantEnd, tab.RecoveryPoint)
	require.Equal(t, want, offsetsOf(t, tab))
	require.Equal(t, wantProducers, tab.State.Producers())
	require.Equal(t, []int64{wantEnd}, snapshotsAbove(tab, tab.Segments[len(tab.Segments)-1].BaseOffset()))
}

func snapshotsAbove(tab *Tablet, o int64) []int64 {
	var out []int64
	for _, s := range tab.State.Snapshots() {
		if s > o {
			out = append(out, s)
		}
	}
	return out
}

// A recovery reading more than ProgressThreshold bytes reports its progress
// to Options.Progress, rising to done == total; a smaller one, or a clean
// load, reports nothing.
func TestProgress(t *testing.T) {
	d := dataDir(t)
	l := newTestLog(t, vfs.OS, d, segment.Options{SegmentBytes: 400})
	for range 20 {
		l.records(1, 50)
	}
	l.closeDirty()
	type call struct{ done, total int64 }
	record := func(calls *[]call) func(done, total int64) {
		return func(done, total int64) { *calls = append(*calls, call{done, total}) }
	}
	var small, large, clean []call
	r, err := Load(vfs.OS, d, Options{Progress: record(&small), ProgressThreshold: 1 << 30})
	require.NoError(t, err)
	require.NoError(t, r.Close())
	require.Empty(t, small)

	r, err = Load(vfs.OS, d, Options{Progress: record(&large), ProgressThreshold: 1})
	require.NoError(t, err)
	require.NotEmpty(t, large)
	total := large[0].total
	require.Positive(t, total)
	for i, c := range large {
		require.Equal(t, total, c.total, "call %d", i)
		require.LessOrEqual(t, c.done, total, "call %d", i)
		if i > 0 {
			require.GreaterOrEqual(t, c.done, large[i-1].done, "call %d goes back", i)
		}
	}
	require.Equal(t, total, large[len(large)-1].done, "the last call reports the whole")
	require.Greater(t, len(large), 1, "progress is reported as the files are read, not only at the end")
	require.NoError(t, r.CloseClean(1))

	r, err = Load(vfs.OS, d, Options{Progress: record(&clean), ProgressThreshold: 1})
	require.NoError(t, err)
	require.NoError(t, r.Close())
	require.Empty(t, clean, "a clean load reads no .log")
}

// Recovery deletes only what seglog or Kafka could have written, and only
// inside directories with a tablet's marks: a user's files — in a
// directory merely named like a tablet, in a tablet, or beside the
// tablets — are left alone, and the directories not tablets are reported.
func TestRecoveryDeletesOnlyOurs(t *testing.T) {
	d := dataDir(t)
	l := newTestLog(t, vfs.OS, d, segment.Options{})
	l.records(3, 10)
	l.closeDirty()
	write := func(rel, data string) string {
		p := filepath.Join(d, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(data), 0o644))
		return p
	}
	users := []string{
		write("app-1/draft.tmp", "a user's draft"), // named like a tablet, holding no tablet mark
		write("cache-2/x.deleted", "kept"),
		write("cache-2/00000000000000000000.notes", "not a segment file"),
		write(tp.DirName()+"/notes.tmp", "a user's file in a tablet"),
		write(tp.DirName()+"/readme.deleted", "also"),
		write("notes.tmp", "beside the tablets"),
	}
	ours := []string{
		write(tp.DirName()+"/"+logfile.FilenameWithSuffix(99, logfile.Log, logfile.DeletedSuffix), "a deleted segment"),
		write(tp.DirName()+"/"+checkpoint.PartitionMetadataFile+vfs.TempSuffix, "an interrupted write"),
		write(checkpoint.RecoveryPointFile+vfs.TempSuffix, "an interrupted checkpoint"),
	}
	r, err := Load(vfs.OS, d, Options{})
	require.NoError(t, err)
	require.Len(t, r.Tablets, 1, "app-1 and cache-2 are no tablets")
	require.Equal(t, int64(3), r.Tablets[0].LogEndOffset)
	require.NoError(t, r.Close())
	for _, p := range users {
		_, err := os.Stat(p)
		require.NoError(t, err, "%s was deleted", p)
	}
	for _, p := range ours {
		_, err := os.Stat(p)
		require.ErrorIs(t, err, os.ErrNotExist, "%s was left", p)
	}
	var ignored []string
	for _, c := range r.Report {
		if c.Action == Ignored {
			ignored = append(ignored, filepath.Base(c.File))
		}
	}
	require.Equal(t, []string{"app-1", "cache-2"}, ignored)
}
