package segment

import (
	"bytes"
	"errors"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/vfs"
)

// A torn tail at every byte of the last batch leaves exactly the earlier
// batches, reported as a torn tail at the last batch's position.
func TestTornTailAtEveryByte(t *testing.T) {
	mem := vfs.NewMem()
	s := createSegment(t, mem, "/d", 0, Options{IndexIntervalBytes: 10})
	var last int64
	for i := int64(0); i < 5; i++ {
		ms := records(t, i*3, "a", "b", "c")
		last = s.Size()
		require.NoError(t, s.Append(infoOf(t, ms), ms))
	}
	require.NoError(t, s.Close())
	whole, err := vfs.ReadFile(mem, "/d/00000000000000000000.log")
	require.NoError(t, err)
	for cut := last + 1; cut < int64(len(whole)); cut++ {
		require.NoError(t, vfs.WriteFile(mem, "/d/00000000000000000000.log", whole[:cut]))
		r, err := Open(mem, "/d", 0, Options{IndexIntervalBytes: 10})
		require.NoError(t, err)
		tail, err := r.Recover(nil)
		require.NoError(t, err)
		require.Equal(t, TornTail, tail.Kind, "cut %d", cut)
		require.Equal(t, last, tail.Position)
		require.Equal(t, cut-last, tail.Bytes())
		require.Equal(t, []int64{2, 5, 8, 11}, logOffsets(t, r))
		require.NoError(t, r.Close())
	}
}

// recordingReplayer is a Replayer for tests: it keeps the batches it saw
// and turns ABORT markers into aborted transactions starting at the
// producer's first batch.
type recordingReplayer struct {
	seen   []int64
	first  map[int64]int64
	fail   error
	failAt int
}

func (r *recordingReplayer) Replay(b record.Batch) ([]record.AbortedTxn, error) {
	if r.fail != nil && len(r.seen) == r.failAt {
		return nil, r.fail
	}
	r.seen = append(r.seen, b.LastOffset())
	if !b.IsControl() {
		if _, ok := r.first[b.ProducerID()]; !ok {
			r.first[b.ProducerID()] = b.BaseOffset()
		}
		return nil, nil
	}
	m, err := b.EndTxnMarker()
	if err != nil {
		return nil, err
	}
	if m.Type != record.ControlAbort {
		return nil, nil
	}
	return []record.AbortedTxn{{ProducerID: m.ProducerID, FirstOffset: r.first[m.ProducerID],
		LastOffset: b.LastOffset(), LastStableOffset: b.LastOffset() + 1}}, nil
}

func txnBatch(t *testing.T, offset, pid int64) []byte {
	b := record.NewBuilder(record.None)
	b.SetBaseOffset(offset)
	b.SetProducer(pid, 0, 0)
	b.SetTransactional(true)
	require.NoError(t, b.Append(record.Record{Timestamp: 10, Value: []byte("txn")}))
	batch, err := b.Build()
	require.NoError(t, err)
	return batch.Bytes()
}

func marker(t *testing.T, offset, pid int64, typ record.ControlType) []byte {
	data, err := record.EndTxnMarker{Type: typ, ProducerID: pid, Timestamp: 20}.AppendTo(nil)
	require.NoError(t, err)
	b, _, err := record.ParseBatch(data)
	require.NoError(t, err)
	b.SetBaseOffset(offset)
	return data
}

func TestRecoverFeedsTheReplayer(t *testing.T) {
	s := createSegment(t, vfs.NewMem(), "/d", 100, Options{})
	for _, ms := range [][]byte{txnBatch(t, 100, 1), txnBatch(t, 101, 2), records(t, 102, "plain"),
		marker(t, 103, 2, record.ControlAbort), marker(t, 104, 1, record.ControlCommit)} {
		require.NoError(t, s.Append(infoOf(t, ms), ms))
	}
	r := &recordingReplayer{first: map[int64]int64{}}
	tail, err := s.Recover(r)
	require.NoError(t, err)
	require.Equal(t, CleanEnd, tail.Kind)
	require.Equal(t, []int64{100, 101, 102, 103, 104}, r.seen)
	all, err := s.txnIndex().All()
	require.NoError(t, err)
	require.Equal(t, []record.AbortedTxn{{ProducerID: 2, FirstOffset: 101, LastOffset: 103, LastStableOffset: 104}}, all)

	// Any error but an invalid record stops recovery and changes no byte
	// of the log.
	size := s.Size()
	r = &recordingReplayer{first: map[int64]int64{}, fail: errors.New("disk full"), failAt: 1}
	_, err = s.Recover(r)
	require.ErrorContains(t, err, "disk full")
	require.Equal(t, size, s.Size())

	// An invalid record from the replayer ends the valid batches there.
	r = &recordingReplayer{first: map[int64]int64{}, fail: &record.Error{Reason: "bad marker", Err: record.ErrInvalidRecord}, failAt: 2}
	tail, err = s.Recover(r)
	require.NoError(t, err)
	require.Equal(t, Corrupt, tail.Kind)
	require.ErrorIs(t, tail.Err, seglog.ErrCorruption)
	require.Equal(t, []int64{100, 101}, logOffsets(t, s))
}

// fourBatches writes one-record batches at base..base+3 to a new segment
// on a MemFS, returns it with each batch's position, and then overwrites
// the .log at positions[2]+at with damage.
func fourBatches(t *testing.T, base int64, at int64, damage []byte) (*Segment, []int64) {
	mem := vfs.NewMem()
	s := createSegment(t, mem, "/d", base, Options{})
	var positions []int64
	for i := base; i < base+4; i++ {
		ms := records(t, i, "value")
		positions = append(positions, s.Size())
		require.NoError(t, s.Append(infoOf(t, ms), ms))
	}
	require.NoError(t, s.Flush())
	f, err := mem.OpenFile(s.LogPath(), os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(damage, positions[2]+at)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	return s, positions
}

func TestRecoverReportsCorruptionWithPosition(t *testing.T) {
	s, positions := fourBatches(t, 0, 70, []byte{0xff}) // a record byte of batch 2
	tail, err := s.Recover(nil)
	require.NoError(t, err)
	require.Equal(t, Corrupt, tail.Kind)
	require.Equal(t, positions[2], tail.Position)
	var ce *seglog.CorruptionError
	require.ErrorAs(t, tail.Err, &ce)
	require.Equal(t, "/d/00000000000000000000.log", ce.Path)
	require.Equal(t, positions[2]+17, ce.Offset, "at the batch's CRC field")
	require.Contains(t, ce.Reason, "crc mismatch")
	require.ErrorIs(t, tail.Err, record.ErrCorruptBatch)
	require.Equal(t, []int64{0, 1}, logOffsets(t, s))
}

// The base offset is outside the CRC, so a write torn at a sector boundary
// can leave a valid batch under a stale base offset (zeros, here). Offsets
// that go backwards end the valid batches as damage; they neither pass
// nor fail the recovery (Kafka empties the whole segment then).
func TestRecoverEndsWhereOffsetsGoBackwards(t *testing.T) {
	s, positions := fourBatches(t, 100, 0, make([]byte, 8)) // batch 2's base offset, zeroed
	tail, err := s.Recover(nil)
	require.NoError(t, err)
	require.Equal(t, Corrupt, tail.Kind)
	require.Equal(t, positions[2], tail.Position)
	require.ErrorIs(t, tail.Err, record.ErrCorruptBatch)
	require.Contains(t, tail.Err.Error(), "holds offsets 0 to 0, not from 102 on")
	require.Equal(t, []int64{100, 101}, logOffsets(t, s))

	// The same batch repeated (an older copy under a torn header) ends them
	// too.
	ms := records(t, 101, "again")
	require.NoError(t, s.Append(infoOf(t, ms), ms))
	tail, err = s.Recover(nil)
	require.NoError(t, err)
	require.Equal(t, Corrupt, tail.Kind)
	require.Equal(t, []int64{100, 101}, logOffsets(t, s))
}

func TestZeroTailIsNotCorruption(t *testing.T) {
	mem := vfs.NewMem()
	s := createSegment(t, mem, "/d", 0, Options{Preallocate: true, SegmentBytes: 1 << 20})
	ms := records(t, 0, "value")
	require.NoError(t, s.Append(infoOf(t, ms), ms))
	tail, err := s.Recover(nil)
	require.NoError(t, err)
	require.Equal(t, ZeroTail, tail.Kind)
	require.Equal(t, int64(len(ms)), tail.Position)
	require.Equal(t, int64(1<<20-len(ms)), tail.Bytes())
	require.Contains(t, tail.String(), "zero tail")
}

func TestAppendRefusesOffsetOverflowBeforeWriting(t *testing.T) {
	s := createSegment(t, vfs.NewMem(), "/d", 100, Options{})
	ms := records(t, 100, "x")
	err := s.Append(AppendInfo{LargestOffset: 100 + math.MaxInt32 + 1}, ms)
	require.ErrorIs(t, err, ErrOffsetOverflow)
	require.Zero(t, s.Size())
	err = s.Append(AppendInfo{LargestOffset: 99}, ms)
	require.ErrorIs(t, err, ErrOffsetOverflow)
}

// A failed or short write leaves the segment as it was; when even the
// truncation back fails, the segment fails from then on.
func TestFailedWritesAreUndone(t *testing.T) {
	mem := vfs.NewMem()
	in := vfs.NewInjector(mem)
	s := createSegment(t, in, "/d", 0, Options{IndexIntervalBytes: IndexEveryAppend})
	ms := records(t, 0, "first")
	require.NoError(t, s.Append(infoOf(t, ms), ms))
	size := s.Size()

	in.Add(vfs.Rule{Ops: vfs.OpWrite, Path: "*.log", Short: true})
	ms2 := records(t, 1, "second")
	require.ErrorIs(t, s.Append(infoOf(t, ms2), ms2), vfs.ErrInjected)
	require.Equal(t, size, s.Size())
	data, err := vfs.ReadFile(mem, "/d/00000000000000000000.log")
	require.NoError(t, err)
	require.Equal(t, ms, data, "the half-written batch is gone")
	require.NoError(t, s.Append(infoOf(t, ms2), ms2), "and the next append works")
	require.Equal(t, []int64{0, 1}, logOffsets(t, s))

	in.Reset()
	in.Add(vfs.Rule{Ops: vfs.OpWrite, Path: "*.log", Short: true})
	in.Add(vfs.Rule{Ops: vfs.OpTruncate, Path: "*.log"})
	ms3 := records(t, 2, "third")
	err = s.Append(infoOf(t, ms3), ms3)
	require.ErrorIs(t, err, vfs.ErrInjected)
	require.ErrorContains(t, err, "failed")
	in.Reset()
	require.Error(t, s.Append(infoOf(t, ms3), ms3), "sticky")
	_, err = s.TruncateTo(0)
	require.Error(t, err, "sticky")
}

func TestReadWholeBatchesOnly(t *testing.T) {
	s := createSegment(t, vfs.NewMem(), "/d", 0, Options{IndexIntervalBytes: 10})
	var sizes []int
	for i := int64(0); i < 10; i++ {
		ms := records(t, i, string(bytes.Repeat([]byte("v"), int(10+i*7))))
		sizes = append(sizes, len(ms))
		require.NoError(t, s.Append(infoOf(t, ms), ms))
	}
	// A limit that ends inside batch 3 returns batches 0..2.
	limit := sizes[0] + sizes[1] + sizes[2] + sizes[3]/2
	r, ok, err := s.Read(0, limit, s.Size(), false)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, []int64{0, 1, 2}, batchesOf(t, r))
	require.False(t, r.FirstEntryIncomplete)

	// A limit below the first batch: nothing, flagged, unless minOneMessage.
	r, ok, err = s.Read(4, sizes[4]-1, s.Size(), false)
	require.NoError(t, err)
	require.True(t, ok)
	require.True(t, r.FirstEntryIncomplete)
	require.Zero(t, r.Records.Size())
	r, ok, err = s.Read(4, sizes[4]-1, s.Size(), true)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, []int64{4}, batchesOf(t, r))

	// maxPosition bounds the read (an isolation level's end).
	pos6, ok, err := s.TranslateOffset(6, 0)
	require.NoError(t, err)
	require.True(t, ok)
	r, _, err = s.Read(3, 1<<20, pos6.Position, false)
	require.NoError(t, err)
	require.Equal(t, []int64{3, 4, 5}, batchesOf(t, r))
	_, ok, err = s.Read(6, 1<<20, pos6.Position, false)
	require.NoError(t, err)
	require.False(t, ok, "nothing visible at or after offset 6")
	_, _, err = s.Read(0, -1, s.Size(), false)
	require.Error(t, err)
}

func TestSliceWriteTo(t *testing.T) {
	dir := t.TempDir()
	s := createSegment(t, vfs.OS, dir, 0, Options{})
	var all []byte
	for i := int64(0); i < 50; i++ {
		ms := records(t, i, string(bytes.Repeat([]byte{byte(i)}, 5000)))
		all = append(all, ms...)
		require.NoError(t, s.Append(infoOf(t, ms), ms))
	}
	r, ok, err := s.Read(0, 1<<30, s.Size(), false)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int64(len(all)), r.Records.Size())

	// To a file: copy_file_range.
	out, err := os.Create(filepath.Join(dir, "copy"))
	require.NoError(t, err)
	_, err = out.Write([]byte("prefix"))
	require.NoError(t, err)
	n, err := r.Records.WriteTo(out)
	require.NoError(t, err)
	require.Equal(t, int64(len(all)), n)
	require.NoError(t, out.Close())
	got, err := os.ReadFile(filepath.Join(dir, "copy"))
	require.NoError(t, err)
	require.Equal(t, append([]byte("prefix"), all...), got)

	// To a loopback TCP socket: sendfile, waiting whenever the socket's
	// buffer is full.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	received := make(chan []byte)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			received <- nil
			return
		}
		b, _ := io.ReadAll(c)
		c.Close()
		received <- b
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	n, err = r.Records.WriteTo(conn)
	require.NoError(t, err)
	require.Equal(t, int64(len(all)), n)
	require.NoError(t, conn.Close())
	require.Equal(t, all, <-received)

	// To anything else: a pooled buffer.
	var buf bytes.Buffer
	n, err = r.Records.WriteTo(&buf)
	require.NoError(t, err)
	require.Equal(t, int64(len(all)), n)
	require.Equal(t, all, buf.Bytes())

	// ReadAt over the slice.
	p := make([]byte, 100)
	k, err := r.Records.ReadAt(p, int64(len(all))-50)
	require.ErrorIs(t, err, io.EOF)
	require.Equal(t, 50, k)
	require.Equal(t, all[len(all)-50:], p[:50])
}

func TestSliceFromTheSimulatorUsesABuffer(t *testing.T) {
	s := createSegment(t, vfs.NewMem(), "/d", 0, Options{})
	ms := records(t, 0, "x", "y")
	require.NoError(t, s.Append(infoOf(t, ms), ms))
	r, _, err := s.Read(0, 1000, s.Size(), false)
	require.NoError(t, err)
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	require.NoError(t, err)
	defer f.Close()
	n, err := r.Records.WriteTo(f)
	require.NoError(t, err)
	require.Equal(t, int64(len(ms)), n)
}

func TestShouldRoll(t *testing.T) {
	clock := newClock()
	s := createSegment(t, vfs.NewMem(), "/d", 0, withClock(Options{IndexIntervalBytes: 10, MaxIndexSize: 3 * 12}, clock))
	ms := records(t, 0, "x")
	info := infoOf(t, ms)
	params := RollParams{SegmentBytes: 1000, SegmentMs: 1000, MaxTimestamp: info.LargestTimestamp,
		MaxOffset: 0, Size: int64(len(ms)), NowMs: clock.milliseconds()}
	reason, err := s.ShouldRoll(params)
	require.NoError(t, err)
	require.Equal(t, RollNone, reason)
	require.NoError(t, s.Append(info, ms))

	p := params
	p.SegmentBytes = 2*int64(len(ms)) - 1
	reason, _ = s.ShouldRoll(p)
	require.Equal(t, RollSize, reason)
	p.SegmentBytes = 2 * int64(len(ms))
	reason, _ = s.ShouldRoll(p)
	require.Equal(t, RollNone, reason, "filling the segment exactly does not roll")

	p = params
	p.MaxTimestamp = info.LargestTimestamp + 1001
	reason, _ = s.ShouldRoll(p)
	require.Equal(t, RollTime, reason, "by the incoming batch's timestamp against the first batch's")
	p.MaxTimestamp = info.LargestTimestamp + 1000
	reason, _ = s.ShouldRoll(p)
	require.Equal(t, RollNone, reason)

	for i := int64(1); i < 3; i++ { // fills the 3-slot time index (2 usable)
		ms := records(t, i, "x")
		require.NoError(t, s.Append(AppendInfo{i, 1000 * i, i}, ms))
	}
	params.MaxOffset, params.MaxTimestamp, params.SegmentMs = 3, 2000, 1<<40
	reason, _ = s.ShouldRoll(params)
	require.Equal(t, RollIndexFull, reason)
	// Appending anyway fails and changes nothing.
	size := s.Size()
	require.ErrorIs(t, s.Append(AppendInfo{3, 3000, 3}, records(t, 3, "x")), ErrIndexFull)
	require.Equal(t, size, s.Size())
	n, err := s.offsetIndex().Entries()
	require.NoError(t, err)
	require.Equal(t, 2, n, "the offset entry of the failed append is removed")
	require.Equal(t, "index full", reason.String())
}

func TestJitterIsDrawnPerSegmentWithinBounds(t *testing.T) {
	seen := map[int64]bool{}
	for i := range 50 {
		s := createSegment(t, vfs.NewMem(), "/d", int64(i), Options{SegmentMs: 1000, SegmentJitterMs: 5000})
		require.GreaterOrEqual(t, s.RollJitterMs(), int64(0))
		require.Less(t, s.RollJitterMs(), int64(1000), "bounded by segment.ms")
		seen[s.RollJitterMs()] = true
	}
	require.Greater(t, len(seen), 10)
	require.Zero(t, createSegment(t, vfs.NewMem(), "/d", 0, Options{}).RollJitterMs())
}

func TestSealAndClose(t *testing.T) {
	mem := vfs.NewMem()
	s := createSegment(t, mem, "/d", 0, Options{IndexIntervalBytes: 10, Preallocate: true, SegmentBytes: 1 << 16})
	for i := int64(0); i < 5; i++ {
		ms := records(t, i, "x")
		require.NoError(t, s.Append(AppendInfo{i, 100 + i, i}, ms))
	}
	require.NoError(t, s.Seal())
	last, err := s.timeIndex().LastEntry()
	require.NoError(t, err)
	require.Equal(t, int64(104), last.Timestamp, "the final time entry")
	require.Equal(t, int64(4), last.Offset)
	for _, path := range []string{"/d/00000000000000000000.index", "/d/00000000000000000000.timeindex"} {
		info, err := mem.Stat(path)
		require.NoError(t, err)
		require.Less(t, info.Size(), int64(100), "%s is trimmed", path)
	}
	info, err := mem.Stat("/d/00000000000000000000.log")
	require.NoError(t, err)
	require.Equal(t, s.Size(), info.Size(), "the preallocation is trimmed")
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "closing twice")

	r, err := Open(mem, "/d", 0, Options{ReadOnly: true})
	require.NoError(t, err)
	require.ErrorIs(t, r.Append(AppendInfo{5, 5, 5}, records(t, 5, "y")), ErrReadOnly)
	require.Equal(t, []int64{0, 1, 2, 3, 4}, logOffsets(t, r))
	require.NoError(t, r.Close())
	_, err = Create(mem, "/d", 0, Options{})
	require.Error(t, err, "the .log exists")
}

// TranslateOffset against a linear scan on large batches with gaps, where
// index entries are far apart and the next entry's batch is tried first.
func TestTranslateOffsetLargeBatchesWithGaps(t *testing.T) {
	s := createSegment(t, vfs.NewMem(), "/d", 0, Options{IndexIntervalBytes: 5000})
	type placed struct{ base, last, pos, size int64 }
	var batches []placed
	next := int64(0)
	for i := range 40 {
		next += int64(i%3) * 7 // gaps
		b := record.NewBuilder(record.None)
		b.SetBaseOffset(next)
		for range 1 + i%4 {
			require.NoError(t, b.Append(record.Record{Timestamp: 1, Value: make([]byte, 3000)}))
		}
		batch, err := b.Build()
		require.NoError(t, err)
		pos := s.Size()
		require.NoError(t, s.Append(infoOf(t, batch.Bytes()), batch.Bytes()))
		batches = append(batches, placed{batch.BaseOffset(), batch.LastOffset(), pos, int64(batch.Size())})
		next = batch.NextOffset()
	}
	for target := int64(-1); target <= next+1; target++ {
		got, ok, err := s.TranslateOffset(target, 0)
		require.NoError(t, err)
		var want *placed
		for i := range batches {
			if batches[i].last >= target {
				want = &batches[i]
				break
			}
		}
		require.Equal(t, want != nil, ok, "target %d", target)
		if ok {
			require.Equal(t, OffsetPosition{want.last, want.pos, want.size}, got, "target %d", target)
		}
	}
}

// A one-batch read that the offset lookup already read whole is served
// from the caller's scratch: the same bytes as from the file, and only
// when it fits.
func TestReadWithScratch(t *testing.T) {
	s := createSegment(t, vfs.NewMem(), "/d", 0, Options{IndexIntervalBytes: 4096})
	for i := int64(0); i < 60; i++ {
		ms := records(t, i, string(bytes.Repeat([]byte{byte('a' + i%26)}, int(100+i*13))))
		require.NoError(t, s.Append(infoOf(t, ms), ms))
	}
	inMemory := 0
	for off := int64(0); off < 60; off++ {
		want, ok, err := s.Read(off, 1, s.Size(), true)
		require.NoError(t, err)
		require.True(t, ok)
		require.False(t, want.Records.InMemory())
		wantBytes, err := want.Records.AppendTo(nil)
		require.NoError(t, err)

		scratch := make([]byte, 16<<10)
		got, ok, err := s.ReadWith(off, 1, s.Size(), true, scratch)
		require.NoError(t, err)
		require.True(t, ok)
		gotBytes, err := got.Records.AppendTo(nil)
		require.NoError(t, err)
		require.Equal(t, wantBytes, gotBytes, "offset %d", off)
		require.Equal(t, want.Position, got.Position)
		require.Equal(t, want.Records.Position(), got.Records.Position())
		var w bytes.Buffer
		_, err = got.Records.WriteTo(&w)
		require.NoError(t, err)
		require.Equal(t, wantBytes, w.Bytes())
		if got.Records.InMemory() {
			inMemory++
		}

		small, _, err := s.ReadWith(off, 1, s.Size(), true, make([]byte, 10))
		require.NoError(t, err)
		require.False(t, small.Records.InMemory(), "a batch larger than scratch is read from the file")
		// A read of several batches is never served from scratch (the last
		// batch alone is a one-batch read).
		many, _, err := s.ReadWith(off, 1<<20, s.Size(), false, scratch)
		require.NoError(t, err)
		require.Equal(t, off == 59, many.Records.InMemory())
	}
	require.Greater(t, inMemory, 50, "most one-batch reads need no second read")
}
