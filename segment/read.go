package segment

import (
	"fmt"
	"io"
	"sync"

	"github.com/seglog/seglog/offsetindex"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/vfs"
)

// scannerPool lends Scanners (and their read-ahead buffers), so that reads
// allocate nothing.
type scannerPool struct{ p sync.Pool }

var scanners scannerPool

func (sp *scannerPool) get(r io.ReaderAt, start, end int64) *record.Scanner {
	sc, _ := sp.p.Get().(*record.Scanner)
	if sc == nil {
		sc = new(record.Scanner)
	}
	sc.Reset(r, start, end)
	return sc
}

func (sp *scannerPool) put(sc *record.Scanner) {
	sc.Reset(nil, 0, 0)
	sp.p.Put(sc)
}

// logicalEnd returns the end of the last whole batch of a .log of the
// given length: the batch headers are walked from the last offset index
// entry (or from 0) until one does not fit.
func (s *Segment) logicalEnd(length int64) (int64, error) {
	start := int64(0)
	if e, err := s.offsetIdx.LastEntry(); err == nil && e.Position >= 0 && int64(e.Position) < length {
		start = int64(e.Position)
	}
	f, err := s.file()
	if err != nil {
		return 0, err
	}
	sc := scanners.get(f, start, length)
	defer scanners.put(sc)
	for sc.Next() {
	}
	damaged := false
	switch sc.Stop() {
	case record.ReadFailed:
		return 0, sc.Err()
	case record.TornTail:
		damaged = true
	case record.Corrupt:
		zero, err := zerosFrom(f, sc.Pos(), length)
		if err != nil {
			return 0, err
		}
		damaged = !zero
	}
	s.endDamaged.Store(damaged)
	return sc.Pos(), nil
}

// EndIsClean reports whether the walk that found the .log's end (from the
// last offset index entry) ended at the file's end or at a zero tail. A
// torn or corrupt batch there is damage no clean shutdown leaves; recovery
// must look at the segment.
func (s *Segment) EndIsClean() (bool, error) {
	if _, err := s.end(); err != nil {
		return false, err
	}
	return !s.endDamaged.Load(), nil
}

// headers lends buffers for single header reads.
var headers = sync.Pool{New: func() any { return new([record.HeaderSize]byte) }}

// farEntries is the distance between index entries beyond which
// TranslateOffset first tries the batch at the next entry.
const farEntries = 8 << 10

// OffsetPosition locates a batch: its last offset, its position and its
// size.
type OffsetPosition struct {
	Offset   int64
	Position int64
	Size     int64
}

// TranslateOffset finds the first batch at or after startingPosition whose
// last offset is at least offset, starting from the offset index's entry
// for offset (docs/format.md §3.3). It reports false if there is none.
func (s *Segment) TranslateOffset(offset, startingPosition int64) (OffsetPosition, bool, error) {
	end, err := s.end()
	if err != nil {
		return OffsetPosition{}, false, err
	}
	return s.translateOffset(offset, startingPosition, end)
}

func (s *Segment) translateOffset(offset, startingPosition, end int64) (OffsetPosition, bool, error) {
	op, _, found, err := s.translateOffsetInto(offset, startingPosition, end, nil)
	return op, found, err
}

// oneBatchRead is the shape of a read that may be served from a copy the
// offset lookup made: scratch to copy into, and what decides whether the
// read is one batch.
type oneBatchRead struct {
	scratch     []byte
	limit       int64 // maxSize
	minOne      bool
	end         int64 // the visible end
	maxPosition int64
}

// limitFor is the read's byte limit once the first batch is known.
func (o *oneBatchRead) limitFor(first OffsetPosition) int64 {
	if o.minOne {
		return max(o.limit, first.Size)
	}
	return o.limit
}

// only reports whether the read starting with first is that batch alone:
// a limit that holds it but no header after it, or the visible end.
func (o *oneBatchRead) only(first OffsetPosition) bool {
	limit := o.limitFor(first)
	return limit > 0 && o.maxPosition >= 0 && limit >= first.Size &&
		min(o.end, first.Position+limit) < first.Position+first.Size+record.HeaderSize
}

// translateOffsetInto is translateOffset that, for a read that will be
// the batch found alone (rd, if not nil), copies that batch into
// rd.scratch when the reads it made already hold all of it (and it fits),
// returning the copy or nil: the read then needs no second read.
func (s *Segment) translateOffsetInto(offset, startingPosition, end int64, rd *oneBatchRead) (OffsetPosition, []byte, bool, error) {
	e, next, hasNext, err := s.offsetIdx.Bounds(offset)
	if err != nil {
		return OffsetPosition{}, nil, false, err
	}
	// When index entries are far apart (large batches), the batch that
	// starts at the next entry usually holds the offset: one header read
	// instead of a scan that reads a window per batch.
	if hasNext && int64(next.Position)-int64(e.Position) >= farEntries && int64(next.Position) >= startingPosition {
		f, err := s.file()
		if err != nil {
			return OffsetPosition{}, nil, false, err
		}
		hdr := headers.Get().(*[record.HeaderSize]byte)
		_, err = f.ReadAt(hdr[:], int64(next.Position))
		h, size, perr := record.ParseHeader(hdr[:])
		headers.Put(hdr)
		if err == nil && perr == nil && h.BaseOffset <= offset && h.BaseOffset+int64(h.LastOffsetDelta) == next.Offset &&
			int64(next.Position)+size <= end {
			return OffsetPosition{Offset: next.Offset, Position: int64(next.Position), Size: size}, nil, true, nil
		}
	}
	start := max(int64(e.Position), startingPosition)
	op, held, found, trusted, err := s.scanFor(offset, start, end, e, start == int64(e.Position) && e.Position > 0, rd)
	if err != nil || trusted {
		return op, held, found, err
	}
	// Beyond Kafka: the index entry does not point at the batch it names
	// (a damaged index a clean load trusted). The answer comes from a scan
	// from where the caller allows instead; seglog verify names the entry,
	// and the next recovery of the segment, or deleting the index file,
	// rebuilds it.
	op, held, found, _, err = s.scanFor(offset, startingPosition, end, e, false, rd)
	return op, held, found, err
}

// scanFor walks the batches from start for the first whose last offset is
// at least offset. With check, the first batch must be the one entry names
// (trusted is false otherwise, or when the walk stops at damage).
//
// With rd, the batch found is copied into rd.scratch (held) when the read
// is that batch alone and the scan's window already holds all of it.
func (s *Segment) scanFor(offset, start, end int64, entry offsetindex.Entry, check bool, rd *oneBatchRead) (op OffsetPosition, held []byte, found, trusted bool, err error) {
	f, err := s.file()
	if err != nil {
		return OffsetPosition{}, nil, false, false, err
	}
	sc := scanners.get(f, start, end)
	defer scanners.put(sc)
	first := true
	for sc.Next() {
		h := sc.Header()
		last := h.BaseOffset + int64(h.LastOffsetDelta)
		if first && check && last != entry.Offset {
			return OffsetPosition{}, nil, false, false, nil
		}
		first = false
		if last >= offset {
			op := OffsetPosition{Offset: last, Position: sc.Pos(), Size: sc.Size()}
			if rd != nil && op.Size <= int64(len(rd.scratch)) && rd.only(op) {
				if b := sc.Resident(); b != nil {
					held = rd.scratch[:copy(rd.scratch, b)]
				}
			}
			return op, held, true, true, nil
		}
	}
	switch sc.Stop() {
	case record.ReadFailed:
		return OffsetPosition{}, nil, false, false, sc.Err()
	case record.AtEnd:
		return OffsetPosition{}, nil, false, !check || !first, nil
	default:
		return OffsetPosition{}, nil, false, !check, nil
	}
}

// NoMaxPosition, as Read's maxPosition, says that the visible end is not
// known: Read then returns no bytes, only where the offset is.
const NoMaxPosition = -1

// ReadResult is what Read found.
type ReadResult struct {
	// StartOffset is the offset asked for; BaseOffset is the segment's.
	StartOffset int64
	BaseOffset  int64
	// Position is where the first batch holding StartOffset begins.
	Position int64
	// Records are whole batches from Position; the first may begin below
	// StartOffset.
	Records Slice
	// FirstEntryIncomplete reports that the first batch is larger than the
	// read allowed (and minOneMessage was not set): Records is empty.
	FirstEntryIncomplete bool
}

// Read returns the batches from the one holding startOffset, at most
// maxSize bytes (at least the first batch if minOneMessage) and never past
// maxPosition (docs/format.md §3.3). Unlike Kafka, it never returns part of a batch.
// It reports false if startOffset is beyond the segment.
func (s *Segment) Read(startOffset int64, maxSize int, maxPosition int64, minOneMessage bool) (ReadResult, bool, error) {
	return s.ReadWith(startOffset, maxSize, maxPosition, minOneMessage, nil)
}

// ReadWith is Read with a scratch buffer: a read of one batch that the
// offset lookup already read whole is returned from scratch (a copy, valid
// while the caller keeps scratch), saving a second read of the file.
func (s *Segment) ReadWith(startOffset int64, maxSize int, maxPosition int64, minOneMessage bool, scratch []byte) (ReadResult, bool, error) {
	if maxSize < 0 {
		return ReadResult{}, false, errInvalidMaxSize(maxSize)
	}
	size, err := s.end()
	if err != nil {
		return ReadResult{}, false, err
	}
	end := size
	if maxPosition >= 0 {
		end = min(end, maxPosition)
	}
	rd := &oneBatchRead{scratch: scratch, limit: int64(maxSize), minOne: minOneMessage, end: end, maxPosition: maxPosition}
	first, held, ok, err := s.translateOffsetInto(startOffset, 0, end, rd)
	if err != nil || !ok {
		return ReadResult{}, false, err
	}
	f, err := s.file()
	if err != nil {
		return ReadResult{}, false, err
	}
	r := ReadResult{StartOffset: startOffset, BaseOffset: s.base, Position: first.Position,
		Records: Slice{f: f, pos: first.Position}}
	limit := rd.limitFor(first)
	if limit == 0 || maxPosition < 0 {
		return r, true, nil
	}
	if limit < first.Size {
		r.FirstEntryIncomplete = true
		return r, true, nil
	}
	if rd.only(first) {
		// No second batch fits: the read is the first batch, and no
		// header needs reading (a one-batch read, e.g. a random one). If
		// the lookup read it whole, it is served from that copy.
		r.Records.size = first.Size
		if int64(len(held)) == first.Size {
			r.Records.mem = held
		}
		return r, true, nil
	}
	stop := min(end, first.Position+limit)
	last, err := s.wholeBatchesBefore(first.Position, stop, size)
	if err != nil {
		return ReadResult{}, false, err
	}
	r.Records.size = last - first.Position
	return r, true, nil
}

// wholeBatchesBefore returns the end of the last whole batch that starts at
// or after from and ends at or before stop. It walks batch headers from the
// offset index entry at or before stop (a batch start), so a large read
// looks at a few headers only.
func (s *Segment) wholeBatchesBefore(from, stop, size int64) (int64, error) {
	if stop >= size {
		return size, nil // the logical end is a batch boundary
	}
	start := from
	if e, ok, err := s.offsetIdx.LookupPosition(stop); err != nil {
		return 0, err
	} else if ok && int64(e.Position) > start {
		start = int64(e.Position)
	}
	f, err := s.file()
	if err != nil {
		return 0, err
	}
	sc := scanners.get(f, start, stop)
	defer scanners.put(sc)
	for sc.Next() {
	}
	if sc.Stop() == record.ReadFailed {
		return 0, sc.Err()
	}
	return sc.Pos(), nil
}

// ReadNextOffset returns the offset after the last batch: the last batch's
// last offset + 1, or the base offset if the segment is empty.
func (s *Segment) ReadNextOffset() (int64, error) {
	e, err := s.offsetIdx.LastEntry()
	if err != nil {
		return 0, err
	}
	size, err := s.end()
	if err != nil {
		return 0, err
	}
	next := s.base
	f, err := s.file()
	if err != nil {
		return 0, err
	}
	sc := scanners.get(f, int64(e.Position), size)
	defer scanners.put(sc)
	for sc.Next() {
		h := sc.Header()
		next = h.BaseOffset + int64(h.LastOffsetDelta) + 1
	}
	if sc.Stop() == record.ReadFailed {
		return 0, sc.Err()
	}
	return next, nil
}

// TimestampOffset is a record found by timestamp: its timestamp, offset and
// the leader epoch of its batch (-1 if none).
type TimestampOffset struct {
	Timestamp   int64
	Offset      int64
	LeaderEpoch int32
}

// FindOffsetByTimestamp returns the first record at or after startingOffset
// whose timestamp is at least ts (docs/format.md §3.3), or reports false.
func (s *Segment) FindOffsetByTimestamp(ts, startingOffset int64) (TimestampOffset, bool, error) {
	te, err := s.timeIdx.Lookup(ts)
	if err != nil {
		return TimestampOffset{}, false, err
	}
	oe, err := s.offsetIdx.Lookup(max(te.Offset, startingOffset))
	if err != nil {
		return TimestampOffset{}, false, err
	}
	size, err := s.end()
	if err != nil {
		return TimestampOffset{}, false, err
	}
	f, err := s.file()
	if err != nil {
		return TimestampOffset{}, false, err
	}
	sc := scanners.get(f, int64(oe.Position), size)
	defer scanners.put(sc)
	var it record.Iter
	for sc.Next() {
		if sc.Header().MaxTimestamp < ts {
			continue
		}
		b, err := sc.Batch()
		if err != nil {
			return TimestampOffset{}, false, err
		}
		it.Reset(b, record.DefaultMaxUncompressed)
		for it.Next() {
			if r := it.Record(); r.Timestamp >= ts && r.Offset >= startingOffset {
				return TimestampOffset{Timestamp: r.Timestamp, Offset: r.Offset, LeaderEpoch: b.PartitionLeaderEpoch()}, true, nil
			}
		}
		if err := it.Err(); err != nil {
			return TimestampOffset{}, false, err
		}
	}
	if sc.Stop() == record.ReadFailed {
		return TimestampOffset{}, false, sc.Err()
	}
	return TimestampOffset{}, false, nil
}

// largestTimestampAfter returns the largest batch max timestamp from
// position on, with the last offset of the first batch reaching it.
func (s *Segment) largestTimestampAfter(position int64) (timestampOffset, error) {
	best := timestampOffset{record.NoTimestamp, -1}
	size, err := s.end()
	if err != nil {
		return best, err
	}
	f, err := s.file()
	if err != nil {
		return best, err
	}
	sc := scanners.get(f, position, size)
	defer scanners.put(sc)
	for sc.Next() {
		if h := sc.Header(); h.MaxTimestamp > best.timestamp {
			best = timestampOffset{h.MaxTimestamp, h.BaseOffset + int64(h.LastOffsetDelta)}
		}
	}
	if sc.Stop() == record.ReadFailed {
		return best, sc.Err()
	}
	return best, nil
}

// BatchesBelow calls fn with each whole batch from the one holding offset
// from (or the first after it) whose offsets are all below to, in order,
// until fn returns an error: what a replay of the log up to offset to
// reads. The batch is valid until fn returns; its CRC is not checked.
func (s *Segment) BatchesBelow(from, to int64, fn func(b record.Batch) error) error {
	maxPosition := int64(NoMaxPosition)
	if to <= s.base {
		return nil
	}
	if at, ok, err := s.TranslateOffset(to, 0); err != nil {
		return err
	} else if ok {
		maxPosition = at.Position // the batch holding to, and what follows, are not read
	}
	return s.Batches(from, maxPosition, fn)
}

// Batches calls fn with each whole batch from the one holding offset from
// (or the first after it) up to maxPosition (NoMaxPosition: the end), in
// order, until fn returns an error. The batch is valid until fn returns;
// its CRC is not checked.
func (s *Segment) Batches(from, maxPosition int64, fn func(b record.Batch) error) error {
	end, err := s.end()
	if err != nil {
		return err
	}
	if maxPosition >= 0 {
		end = min(end, maxPosition)
	}
	first, ok, err := s.translateOffset(from, 0, end)
	if err != nil || !ok {
		return err
	}
	f, err := s.file()
	if err != nil {
		return err
	}
	sc := scanners.get(f, first.Position, end)
	defer scanners.put(sc)
	for sc.Next() {
		b, err := sc.Batch()
		if err != nil {
			return err
		}
		if err := fn(b); err != nil {
			return err
		}
	}
	if sc.Stop() == record.ReadFailed {
		return sc.Err()
	}
	return nil
}

// MapLog maps the .log's batches (its logical size, which must be more
// than 0) read-only, for a reader that walks a sealed segment whole, as the
// cleaner does: no copy into a buffer. Unmap it when done. A truncation of
// the file while it is mapped makes a read fault (the reader sets
// debug.SetPanicOnFault to get a panic it can recover instead of a crash).
func (s *Segment) MapLog() (vfs.Mapping, error) {
	size, err := s.end()
	if err != nil {
		return nil, err
	}
	f, err := s.file()
	if err != nil {
		return nil, err
	}
	m, err := f.Map(int(size), false)
	if err != nil {
		return nil, fmt.Errorf("segment: mapping %s: %w", s.path(), err)
	}
	return m, nil
}
