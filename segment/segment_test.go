package segment

import (
	"bytes"
	"crypto/rand"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/seglog/seglog/logfile"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/vfs"
)

// Scenario 22: testReadOnEmptySegment, testReadAfterLast.
func TestReadOnEmptySegmentAndAfterLast(t *testing.T) {
	s := tempSegment(t, 40)
	_, ok := read(t, s, 40, 300)
	require.False(t, ok, "empty segment")
	ms := records(t, 50, "hello", "there")
	require.NoError(t, s.Append(noTimestamp(t, ms), ms))
	_, ok = read(t, s, 52, 200)
	require.False(t, ok, "read beyond the last offset")
}

// Scenario 23: testReadBeforeFirstOffset.
func TestReadBeforeFirstOffset(t *testing.T) {
	s := tempSegment(t, 40)
	ms := records(t, 50, "hello", "there", "little", "bee")
	require.NoError(t, s.Append(noTimestamp(t, ms), ms))
	r, ok := read(t, s, 41, 300)
	require.True(t, ok)
	got, err := r.Records.AppendTo(nil)
	require.NoError(t, err)
	require.Equal(t, ms, got)
}

// Scenario 24: testReadFromGap.
func TestReadFromGap(t *testing.T) {
	s := tempSegment(t, 40)
	ms := records(t, 50, "hello", "there")
	require.NoError(t, s.Append(noTimestamp(t, ms), ms))
	ms2 := records(t, 60, "alpha", "beta")
	require.NoError(t, s.Append(noTimestamp(t, ms2), ms2))
	r, ok := read(t, s, 55, 200)
	require.True(t, ok)
	got, err := r.Records.AppendTo(nil)
	require.NoError(t, err)
	require.Equal(t, ms2, got)
	require.Equal(t, int64(len(ms)), r.Position)
}

// Scenario 25: testReadWhenNoMaxPosition.
func TestReadWhenNoMaxPosition(t *testing.T) {
	for _, minOne := range []bool{false, true} {
		s := tempSegment(t, 40)
		ms := records(t, 50, "hello", "there")
		require.NoError(t, s.Append(noTimestamp(t, ms), ms))
		for _, off := range []int64{48, 50, 51} {
			r, ok, err := s.Read(off, 1, NoMaxPosition, minOne)
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, ReadResult{StartOffset: off, BaseOffset: 40, Position: 0, Records: r.Records}, r)
			require.Zero(t, r.Records.Size())
		}
		_, ok, err := s.Read(52, 1, NoMaxPosition, minOne)
		require.NoError(t, err)
		require.False(t, ok)
	}
}

// Scenario 26: testTruncate.
func TestTruncate(t *testing.T) {
	s := tempSegment(t, 40)
	offset := int64(40)
	for range 30 {
		ms1 := records(t, offset, "hello")
		require.NoError(t, s.Append(noTimestamp(t, ms1), ms1))
		ms2 := records(t, offset+1, "hello")
		require.NoError(t, s.Append(noTimestamp(t, ms2), ms2))
		r, ok := read(t, s, offset, 10000)
		require.True(t, ok)
		require.Equal(t, []int64{offset, offset + 1}, batchesOf(t, r))
		removed, err := s.TruncateTo(offset + 1)
		require.NoError(t, err)
		require.Equal(t, int64(len(ms2)), removed)
		r, ok = read(t, s, offset, 10000)
		require.True(t, ok)
		require.Equal(t, []int64{offset}, batchesOf(t, r))
		offset++
	}
}

// Scenario 27: testTruncateEmptySegment.
func TestTruncateEmptySegment(t *testing.T) {
	const maxSegmentMs = 300000
	clock := newClock()
	dir := t.TempDir()
	s, err := Create(vfs.OS, dir, 0, withClock(Options{}, clock))
	require.NoError(t, err)
	_, err = s.timeIndex().Open() // force the lazy indexes into existence
	require.NoError(t, err)
	_, err = s.offsetIndex().Open()
	require.NoError(t, err)
	require.NoError(t, s.Close())

	reopened, err := Open(vfs.OS, dir, 0, withClock(Options{}, clock))
	require.NoError(t, err)
	defer reopened.Close()
	for _, x := range []interface{ Length() (int, error) }{reopened.timeIndex(), reopened.offsetIndex()} {
		n, err := x.Length()
		require.NoError(t, err)
		require.Zero(t, n, "closed empty indexes are trimmed to nothing")
	}
	clock.sleep(500)
	_, err = reopened.TruncateTo(57)
	require.NoError(t, err)
	waited, err := reopened.timeWaitedForRoll(clock.milliseconds(), record.NoTimestamp)
	require.NoError(t, err)
	require.Zero(t, waited)
	full, err := reopened.timeIndex().IsFull()
	require.NoError(t, err)
	require.False(t, full)
	full, err = reopened.offsetIndex().IsFull()
	require.NoError(t, err)
	require.False(t, full)

	params := RollParams{SegmentMs: maxSegmentMs, SegmentBytes: math.MaxInt32, MaxTimestamp: record.NoTimestamp,
		MaxOffset: 100, Size: 1024, NowMs: clock.milliseconds()}
	reason, err := reopened.ShouldRoll(params)
	require.NoError(t, err)
	require.Equal(t, RollNone, reason)
	clock.sleep(maxSegmentMs + 1)
	waited, err = reopened.timeWaitedForRoll(clock.milliseconds(), record.NoTimestamp)
	require.NoError(t, err)
	require.Equal(t, int64(maxSegmentMs+1), waited)
	params.NowMs = clock.milliseconds()
	reason, err = reopened.ShouldRoll(params)
	require.NoError(t, err)
	require.Equal(t, RollNone, reason, "an empty segment does not roll on time")
	params.MaxOffset = math.MaxInt32 + 200
	reason, err = reopened.ShouldRoll(params)
	require.NoError(t, err)
	require.Equal(t, RollOffsetRange, reason, "but it still rolls when the offset does not fit")
}

// Scenario 28: testReloadLargestTimestampAndNextOffsetAfterTruncation.
func TestReloadLargestTimestampAndNextOffsetAfterTruncation(t *testing.T) {
	const numMessages = 30
	s := createSegment(t, vfs.OS, t.TempDir(), 40, Options{IndexIntervalBytes: 2*len(records(t, 0, "hello")) - 1})
	offset := int64(40)
	for range numMessages {
		ms := records(t, offset, "hello")
		require.NoError(t, s.Append(AppendInfo{offset, offset, offset}, ms))
		offset++
	}
	next, err := s.ReadNextOffset()
	require.NoError(t, err)
	require.Equal(t, offset, next)
	n, err := s.timeIndex().Entries()
	require.NoError(t, err)
	require.Equal(t, numMessages/2-1, n)
	_, err = s.TruncateTo(41)
	require.NoError(t, err)
	n, err = s.timeIndex().Entries()
	require.NoError(t, err)
	require.Zero(t, n)
	largest, err := s.LargestTimestamp()
	require.NoError(t, err)
	require.Equal(t, int64(400), largest)
	next, err = s.ReadNextOffset()
	require.NoError(t, err)
	require.Equal(t, int64(41), next)
}

// Scenario 29: testTruncateFull.
func TestTruncateFull(t *testing.T) {
	clock := newClock()
	s := createSegment(t, vfs.OS, t.TempDir(), 40, withClock(Options{IndexIntervalBytes: 10}, clock))
	ms := records(t, 40, "hello", "there")
	require.NoError(t, s.Append(noTimestamp(t, ms), ms))
	clock.sleep(500)
	waited, err := s.timeWaitedForRoll(clock.milliseconds(), record.NoTimestamp)
	require.NoError(t, err)
	require.Equal(t, int64(500), waited)
	_, err = s.TruncateTo(0)
	require.NoError(t, err)
	waited, err = s.timeWaitedForRoll(clock.milliseconds(), record.NoTimestamp)
	require.NoError(t, err)
	require.Zero(t, waited, "the creation time is reset")
	full, err := s.timeIndex().IsFull()
	require.NoError(t, err)
	require.False(t, full)
	full, err = s.offsetIndex().IsFull()
	require.NoError(t, err)
	require.False(t, full)
	_, ok := read(t, s, 0, 1024)
	require.False(t, ok, "the segment is empty")
	require.NoError(t, s.Append(noTimestamp(t, ms), ms))
}

// Scenario 30: testFindOffsetByTimestamp.
func TestFindOffsetByTimestamp(t *testing.T) {
	size := len(records(t, 0, "msg00"))
	s := createSegment(t, vfs.OS, t.TempDir(), 40, Options{IndexIntervalBytes: 2*size - 1})
	for i := int64(40); i < 50; i++ {
		ms := records(t, i, "msg"+string(rune('0'+i/10))+string(rune('0'+i%10)))
		require.NoError(t, s.Append(AppendInfo{i, i * 10, i}, ms))
	}
	largest, err := s.LargestTimestamp()
	require.NoError(t, err)
	require.Equal(t, int64(490), largest)
	for _, c := range []struct{ ts, want int64 }{{420, 42}, {421, 43}, {430, 43}, {431, 44}, {401, 41}, {399, 40}} {
		got, ok, err := s.FindOffsetByTimestamp(c.ts, 0)
		require.NoError(t, err)
		require.True(t, ok, "ts %d", c.ts)
		require.Equal(t, c.want, got.Offset, "ts %d", c.ts)
		require.Equal(t, c.want*10, got.Timestamp)
	}
	_, ok, err := s.FindOffsetByTimestamp(491, 0)
	require.NoError(t, err)
	require.False(t, ok, "beyond the last timestamp")
	got, ok, err := s.FindOffsetByTimestamp(0, 45)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int64(45), got.Offset, "the starting offset bounds the answer")
}

// Scenario 31: testNextOffsetCalculation.
func TestNextOffsetCalculation(t *testing.T) {
	s := tempSegment(t, 40)
	next, err := s.ReadNextOffset()
	require.NoError(t, err)
	require.Equal(t, int64(40), next)
	ms := records(t, 50, "hello", "there", "you")
	require.NoError(t, s.Append(noTimestamp(t, ms), ms))
	next, err = s.ReadNextOffset()
	require.NoError(t, err)
	require.Equal(t, int64(53), next)
}

// Scenario 32: testChangeFileSuffixes.
func TestChangeFileSuffixes(t *testing.T) {
	dir := t.TempDir()
	s := createSegment(t, vfs.OS, dir, 40, Options{IndexIntervalBytes: 10})
	for i := int64(40); i < 44; i++ {
		ms := records(t, i, "x")
		require.NoError(t, s.Append(infoOf(t, ms), ms))
	}
	require.NoError(t, s.txnIndex().Append(txnAborted(1, 40, 41)))
	names := func() []string {
		names, err := vfs.OS.List(dir)
		require.NoError(t, err)
		return names
	}
	require.NoError(t, s.Delete())
	require.Equal(t, []string{"00000000000000000040.index.deleted", "00000000000000000040.log.deleted",
		"00000000000000000040.timeindex.deleted", "00000000000000000040.txnindex.deleted"}, names())
	r, ok := read(t, s, 40, 1000)
	require.True(t, ok, "a deleted segment is still readable")
	require.Equal(t, []int64{40, 41, 42, 43}, batchesOf(t, r))
	require.NoError(t, s.ChangeSuffix(logfile.DeletedSuffix, ""))
	require.Equal(t, []string{"00000000000000000040.index", "00000000000000000040.log",
		"00000000000000000040.timeindex", "00000000000000000040.txnindex"}, names())
	require.Error(t, s.ChangeSuffix(logfile.SwapSuffix, ""), "the suffix must match")
	require.NoError(t, s.RemoveFiles())
	require.Empty(t, names())
}

// Scenario 33: testRecoveryFixesCorruptIndex / testRecoveryFixesCorruptTimeIndex.
func TestRecoveryFixesCorruptIndexes(t *testing.T) {
	s := createSegment(t, vfs.OS, t.TempDir(), 0, Options{IndexIntervalBytes: 10})
	for i := int64(0); i < 100; i++ {
		ms := records(t, i, string(rune('a'+i%26)))
		require.NoError(t, s.Append(AppendInfo{i, i * 10, i}, ms))
	}
	for _, path := range []string{s.offsetIndex().Path(), s.timeIndex().Path()} {
		writeNonsense(t, path, 5)
	}
	tail, err := s.Recover(nil)
	require.NoError(t, err)
	require.Equal(t, CleanEnd, tail.Kind)
	for i := int64(0); i < 100; i++ {
		r, ok, err := s.Read(i, 1, s.Size(), true)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, []int64{i}, batchesOf(t, r))
		got, ok, err := s.FindOffsetByTimestamp(i*10, 0)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, i, got.Offset)
		if i < 99 {
			got, _, err = s.FindOffsetByTimestamp(i*10+1, 0)
			require.NoError(t, err)
			require.Equal(t, i+1, got.Offset)
		}
	}
}

// writeNonsense overwrites a file from position from to its end with random
// bytes (through a second descriptor: a mapping sees them).
func writeNonsense(t testing.TB, path string, from int64) {
	info, err := os.Stat(path)
	require.NoError(t, err)
	junk := make([]byte, info.Size()-from)
	_, _ = rand.Read(junk)
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(junk, from)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// Scenario 36: testRecoveryWithCorruptMessage, and beyond it every batch:
// garbage from a random point inside batch k leaves exactly batches 0..k-1.
func TestRecoveryWithCorruptMessage(t *testing.T) {
	const appended = 20
	for k := int64(0); k < appended; k++ {
		dir := t.TempDir()
		s := createSegment(t, vfs.OS, dir, 0, Options{IndexIntervalBytes: 10})
		for i := int64(0); i < appended; i++ {
			ms := records(t, i, string(rune('a'+i)))
			require.NoError(t, s.Append(noTimestamp(t, ms), ms))
		}
		at, ok, err := s.TranslateOffset(k, 0)
		require.NoError(t, err)
		require.True(t, ok)
		var off [1]byte
		_, _ = rand.Read(off[:])
		writeNonsense(t, s.LogPath(), at.Position+int64(off[0]%15))
		tail, err := s.Recover(nil)
		require.NoError(t, err)
		require.NotEqual(t, CleanEnd, tail.Kind)
		require.Equal(t, at.Position, tail.Position)
		want := []int64{}
		for i := int64(0); i < k; i++ {
			want = append(want, i)
		}
		require.Equal(t, want, append([]int64{}, logOffsets(t, s)...), "corruption in batch %d", k)
		info, err := os.Stat(s.LogPath())
		require.NoError(t, err)
		require.Equal(t, at.Position, info.Size(), "the .log is cut where the valid batches end")
	}
}

// Scenario 37: testCreateWithInitFileSize{AppendMessage,ClearShutdown}
// and FileRecordsTest.testPreallocateClearShutdown.
func TestPreallocatedSegment(t *testing.T) {
	dir := t.TempDir()
	opts := Options{IndexIntervalBytes: 10, SegmentBytes: 512 << 20, Preallocate: true}
	s, err := Create(vfs.OS, dir, 40, opts)
	require.NoError(t, err)
	ms := records(t, 50, "hello", "there")
	require.NoError(t, s.Append(noTimestamp(t, ms), ms))
	ms2 := records(t, 60, "alpha", "beta")
	require.NoError(t, s.Append(noTimestamp(t, ms2), ms2))
	r, ok := read(t, s, 55, 200)
	require.True(t, ok)
	got, err := r.Records.AppendTo(nil)
	require.NoError(t, err)
	require.Equal(t, ms2, got)
	info, err := os.Stat(s.LogPath())
	require.NoError(t, err)
	require.Equal(t, int64(512<<20), info.Size())
	size := s.Size()
	require.Equal(t, int64(len(ms)+len(ms2)), size)

	// A crash here leaves the zero tail: reopening finds the logical end.
	crashed, err := Open(vfs.OS, dir, 40, Options{ReadOnly: true})
	require.NoError(t, err)
	require.Equal(t, size, crashed.Size())
	require.NoError(t, crashed.Close())

	require.NoError(t, s.Close())
	info, err = os.Stat(s.LogPath())
	require.NoError(t, err)
	require.Equal(t, size, info.Size(), "close trims the preallocation")
	reopened, err := Open(vfs.OS, dir, 40, opts)
	require.NoError(t, err)
	defer reopened.Close()
	require.Equal(t, size, reopened.Size())
	r, ok = read(t, reopened, 55, 200)
	require.True(t, ok)
	got, err = r.Records.AppendTo(nil)
	require.NoError(t, err)
	require.Equal(t, ms2, got)
}

// Scenario 38: shouldTruncateEvenIfOffsetPointsToAGapInTheLog.
func TestTruncateToAGap(t *testing.T) {
	s := tempSegment(t, 40)
	ms := records(t, 40, "first message")
	require.NoError(t, s.Append(noTimestamp(t, ms), ms))
	ms2 := records(t, 43, "message after gap")
	require.NoError(t, s.Append(noTimestamp(t, ms2), ms2))
	_, err := s.TruncateTo(41)
	require.NoError(t, err)
	require.Equal(t, []int64{40}, logOffsets(t, s))
}

// Scenario 74 (FileRecordsTest.testSearch): offsets with gaps.
func TestSearchWithGaps(t *testing.T) {
	s := createSegment(t, vfs.OS, t.TempDir(), 0, Options{})
	var sizes []int64
	for i, v := range []string{"abcd", "efgh", "ijkl", "test"} {
		off := int64(i)
		if i == 3 {
			off = 50
		}
		ms := records(t, off, v)
		require.NoError(t, s.Append(infoOf(t, ms), ms))
		sizes = append(sizes, int64(len(ms)))
	}
	check := func(offset, from int64, want OffsetPosition) {
		t.Helper()
		got, ok, err := s.TranslateOffset(offset, from)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, want, got)
	}
	check(0, 0, OffsetPosition{0, 0, sizes[0]})
	check(1, 0, OffsetPosition{1, sizes[0], sizes[1]})
	check(1, sizes[0], OffsetPosition{1, sizes[0], sizes[1]})
	pos := sizes[0] + sizes[1] + sizes[2]
	check(3, pos, OffsetPosition{50, pos, sizes[3]})
	check(50, pos, OffsetPosition{50, pos, sizes[3]})
	_, ok, err := s.TranslateOffset(51, 0)
	require.NoError(t, err)
	require.False(t, ok)
}

// Scenario 74 (FileRecordsTest.testSearchForTimestamp).
func TestSearchForTimestampWithLeaderEpochs(t *testing.T) {
	s := createSegment(t, vfs.OS, t.TempDir(), 5, Options{})
	for i, epoch := range []int32{0, 1} {
		b := record.NewBuilder(record.None)
		b.SetBaseOffset(int64(5 + i))
		b.SetPartitionLeaderEpoch(epoch)
		require.NoError(t, b.Append(record.Record{Timestamp: int64(10 + i), Value: []byte("v")}))
		batch, err := b.Build()
		require.NoError(t, err)
		require.NoError(t, s.Append(infoOf(t, batch.Bytes()), batch.Bytes()))
	}
	for _, c := range []struct {
		ts   int64
		want TimestampOffset
	}{{9, TimestampOffset{10, 5, 0}}, {10, TimestampOffset{10, 5, 0}}, {11, TimestampOffset{11, 6, 1}}} {
		got, ok, err := s.FindOffsetByTimestamp(c.ts, 0)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, c.want, got)
	}
	_, ok, err := s.FindOffsetByTimestamp(12, 0)
	require.NoError(t, err)
	require.False(t, ok)
}

// Scenario 74 (FileRecordsTest.testIterationOverPartialAndTruncation): a
// partial batch at the end is invisible to reads and recovery cuts it.
func TestPartialTailIsInvisible(t *testing.T) {
	dir := t.TempDir()
	s := createSegment(t, vfs.OS, dir, 0, Options{})
	ms := records(t, 0, "hello", "there")
	require.NoError(t, s.Append(infoOf(t, ms), ms))
	require.NoError(t, s.Close())
	for extra := 1; extra < 7; extra++ {
		f, err := os.OpenFile(filepath.Join(dir, logfile.Filename(0, logfile.Log)), os.O_WRONLY, 0)
		require.NoError(t, err)
		_, err = f.WriteAt(bytes.Repeat([]byte{0}, extra), int64(len(ms)))
		require.NoError(t, err)
		require.NoError(t, f.Close())
		r, err := Open(vfs.OS, dir, 0, Options{})
		require.NoError(t, err)
		res, ok := read(t, r, 0, 1000)
		require.True(t, ok)
		require.Equal(t, []int64{1}, batchesOf(t, res))
		tail, err := r.Recover(nil)
		require.NoError(t, err)
		require.Equal(t, int64(len(ms)), tail.Position)
		require.Equal(t, int64(len(ms)), r.Size())
		require.NoError(t, r.Close())
	}
}
