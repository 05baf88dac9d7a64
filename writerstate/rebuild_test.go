package writerstate

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/segment"
	"github.com/seglog/seglog/vfs"
)

func txnRecords(t *testing.T, offset, pid int64, epoch int16, seq int32, n int) []byte {
	b := record.NewBuilder(record.None)
	b.SetBaseOffset(offset)
	b.SetPartitionLeaderEpoch(15)
	b.SetProducer(pid, epoch, seq)
	b.SetTransactional(true)
	for range n {
		require.NoError(t, b.Append(record.Record{Timestamp: record.NoTimestamp, Value: []byte("v")}))
	}
	batch, err := b.Build()
	require.NoError(t, err)
	return batch.Bytes()
}

func plainRecords(t *testing.T, offset int64, n int) []byte {
	b := record.NewBuilder(record.None)
	b.SetBaseOffset(offset)
	for range n {
		require.NoError(t, b.Append(record.Record{Timestamp: record.NoTimestamp, Value: []byte("v")}))
	}
	batch, err := b.Build()
	require.NoError(t, err)
	return batch.Bytes()
}

func endTxn(t *testing.T, offset, pid int64, epoch int16, typ record.ControlType) []byte {
	data, err := record.EndTxnMarker{Type: typ, ProducerID: pid, ProducerEpoch: epoch, Timestamp: record.NoTimestamp}.AppendTo(nil)
	require.NoError(t, err)
	b, _, err := record.ParseBatch(data)
	require.NoError(t, err)
	b.SetBaseOffset(offset)
	return data
}

func appendTo(t *testing.T, seg *segment.Segment, data []byte) {
	b, _, err := record.ParseBatch(data)
	require.NoError(t, err)
	require.NoError(t, seg.Append(segment.AppendInfo{LargestOffset: b.LastOffset(), LargestTimestamp: b.MaxTimestamp(),
		ShallowOffsetOfMaxTimestamp: b.LastOffset()}, data))
}

// Scenario 34 (LogSegmentTest.testRecoverTransactionIndex): the writer
// state, as the recovery hook, puts the aborted transaction in the
// segment's transaction index with the stable offset of that moment.
func TestRecoverTransactionIndex(t *testing.T) {
	mem := vfs.NewMem()
	require.NoError(t, mem.MkdirAll("/p", 0o755))
	seg, err := segment.Create(mem, "/p", 100, segment.Options{})
	require.NoError(t, err)
	defer seg.Close()
	const pid1, pid2, e, seq = 5, 10, 0, 100
	appendTo(t, seg, txnRecords(t, 100, pid1, e, seq, 2))
	appendTo(t, seg, txnRecords(t, 102, pid2, e, seq, 2))
	appendTo(t, seg, plainRecords(t, 104, 2))
	appendTo(t, seg, endTxn(t, 106, pid2, e, record.ControlAbort))
	appendTo(t, seg, endTxn(t, 107, pid1, e, record.ControlCommit))

	s, err := Open(mem, "/p", Options{})
	require.NoError(t, err)
	_, err = seg.Recover(s)
	require.NoError(t, err)
	require.Equal(t, int64(108), s.MapEndOffset())
	all, err := seg.AbortedTxns()
	require.NoError(t, err)
	require.Equal(t, []record.AbortedTxn{{ProducerID: pid2, FirstOffset: 102, LastOffset: 106, LastStableOffset: 100}}, all)

	// Again, with pid2's transaction begun in an earlier segment.
	s, err = Open(mem, "/p", Options{})
	require.NoError(t, err)
	s.LoadEntries([]Entry{{ProducerID: pid2, Epoch: e, CoordinatorEpoch: 0, LastTimestamp: record.NoTimestamp,
		CurrentTxnFirstOffset: 75, Batches: []BatchMetadata{{LastSeq: 10, LastOffset: 10, OffsetDelta: 5, Timestamp: record.NoTimestamp}}}})
	_, err = seg.Recover(s)
	require.NoError(t, err)
	require.Equal(t, int64(108), s.MapEndOffset())
	all, err = seg.AbortedTxns()
	require.NoError(t, err)
	require.Equal(t, []record.AbortedTxn{{ProducerID: pid2, FirstOffset: 75, LastOffset: 106, LastStableOffset: 100}}, all)
}

// segments builds a log of three segments with idempotent and
// transactional producers.
func segments(t *testing.T, mem vfs.FS) []*segment.Segment {
	require.NoError(t, mem.MkdirAll("/p", 0o755))
	var segs []*segment.Segment
	offset := int64(0)
	seqs := map[int64]int32{}
	for _, base := range []int64{0, 40, 80} {
		seg, err := segment.Create(mem, "/p", base, segment.Options{})
		require.NoError(t, err)
		t.Cleanup(func() { seg.Close() })
		segs = append(segs, seg)
		for offset < base+40 {
			pid := 1 + offset%3
			switch {
			case pid == 3 && offset%9 == 0:
				appendTo(t, seg, endTxn(t, offset, pid, 0, record.ControlAbort))
				offset++
			case pid == 3:
				appendTo(t, seg, txnRecords(t, offset, pid, 0, seqs[pid], 2))
				seqs[pid] += 2
				offset += 2
			default:
				b := record.NewBuilder(record.None)
				b.SetBaseOffset(offset)
				b.SetProducer(pid, 0, seqs[pid])
				require.NoError(t, b.Append(record.Record{Timestamp: 1_700_000_000_000 + offset, Value: []byte("v")}))
				batch, err := b.Build()
				require.NoError(t, err)
				appendTo(t, seg, batch.Bytes())
				seqs[pid]++
				offset++
			}
		}
	}
	return segs
}

func logEnd(t *testing.T, segs []*segment.Segment) int64 {
	end, err := segs[len(segs)-1].ReadNextOffset()
	require.NoError(t, err)
	return end
}

// Spec 5.6: after an unclean shutdown the state is rebuilt from the newest
// snapshot and a replay, and equals a replay of the whole log.
func TestRebuildEqualsAFullReplay(t *testing.T) {
	mem := vfs.NewMem()
	segs := segments(t, mem)
	end := logEnd(t, segs)
	clock := newMockTime()

	full, err := Open(mem, "/p", Options{Now: clock.Now})
	require.NoError(t, err)
	require.NoError(t, full.Rebuild(Sources(segs), 0, end, false, clock.millis()))
	require.Equal(t, end, full.MapEndOffset())
	require.Equal(t, []int64{40, 80, end}, full.Snapshots(), "snapshots at the last two bases and the end")
	want := full.Producers()
	wantFUO := fuo(full)

	// Drop the end snapshot: a rebuild starts from 80 and replays the rest.
	require.NoError(t, full.DeleteSnapshotsAfter(80))
	partial, err := Open(mem, "/p", Options{Now: clock.Now})
	require.NoError(t, err)
	require.NoError(t, partial.Rebuild(Sources(segs), 0, end, false, clock.millis()))
	require.Equal(t, want, partial.Producers())
	require.Equal(t, wantFUO, fuo(partial))

	// Rebuilding to an earlier offset truncates: the state equals a replay
	// up to there.
	upTo := int64(57)
	truncated, err := Open(mem, "/p", Options{Now: clock.Now})
	require.NoError(t, err)
	require.NoError(t, truncated.Rebuild(Sources(segs), 0, upTo, false, clock.millis()))
	replayed, err := Open(vfs.NewMem(), "/", Options{Now: clock.Now})
	require.NoError(t, err)
	for _, seg := range segs {
		require.NoError(t, seg.Batches(seg.BaseOffset(), segment.NoMaxPosition, func(b record.Batch) error {
			if b.LastOffset() < upTo {
				_, err := replayed.Replay(b)
				return err
			}
			return nil
		}))
	}
	require.Equal(t, replayed.Producers(), truncated.Producers())
	require.Equal(t, fuo(replayed), fuo(truncated))
	require.Equal(t, upTo, truncated.MapEndOffset())
}

// Spec 5.6 step 2: a clean shutdown with no snapshot writes empty ones and
// reads nothing.
func TestRebuildAfterCleanShutdownWithoutSnapshots(t *testing.T) {
	mem := vfs.NewMem()
	segs := segments(t, mem)
	end := logEnd(t, segs)
	s, err := Open(mem, "/p", Options{})
	require.NoError(t, err)
	require.NoError(t, s.Rebuild(Sources(segs), 0, end, true, 0))
	require.Equal(t, []int64{40, 80, end}, s.Snapshots())
	require.Zero(t, s.ProducerCount(), "the log was not read")
	require.Equal(t, end, s.MapEndOffset())
	entries, err := ReadSnapshotFile(mem, "/p/00000000000000000080.snapshot")
	require.NoError(t, err)
	require.Empty(t, entries)
}
