package segment

import (
	"errors"
	"fmt"
	"math"

	"github.com/seglog/seglog/record"
)

// AppendInfo describes the batches of one append.
type AppendInfo struct {
	// LargestOffset is the last offset of the last batch.
	LargestOffset int64
	// LargestTimestamp is the largest max timestamp of the batches.
	LargestTimestamp int64
	// ShallowOffsetOfMaxTimestamp is the last offset of the first batch
	// whose max timestamp is LargestTimestamp.
	ShallowOffsetOfMaxTimestamp int64
}

// Append writes whole batches at the end of the .log with one positional
// write (pwritev for several buffers) and updates the indexes as docs/format.md §3.2
// says: after more than IndexIntervalBytes since the last index entry, an
// offset entry (LargestOffset → the position this append starts at) and a
// time entry (the largest timestamp so far and its offset).
//
// An offset that does not fit relative to the base fails with
// ErrOffsetOverflow before anything is written. A failed or short write is
// undone by truncating the .log back; if even that fails, the segment fails
// with that error from then on.
func (s *Segment) Append(info AppendInfo, data ...[]byte) error {
	if err := s.writable(); err != nil {
		return err
	}
	if !s.offsetIdx.CanAppendOffset(info.LargestOffset) {
		return fmt.Errorf("%w: offset %d in the segment at %d", ErrOffsetOverflow, info.LargestOffset, s.base)
	}
	// Open the indexes (they are lazy) before writing, so that what can
	// fail for I/O reasons fails before the .log changes.
	if _, err := s.offsetIdx.Open(); err != nil {
		return err
	}
	if _, err := s.timeIdx.Open(); err != nil {
		return err
	}
	maxSoFar, err := s.maxTimestampSoFar()
	if err != nil {
		return err
	}
	position, err := s.end()
	if err != nil {
		return err
	}
	total := 0
	for _, d := range data {
		total += len(d)
	}
	if position+int64(total) > math.MaxInt32 {
		return fmt.Errorf("%w: %d bytes after %d would pass the 2 GiB a segment can address", ErrOffsetOverflow, total, position)
	}
	f, err := s.file()
	if err != nil {
		return err
	}
	s.iov = append(s.iov[:0], data...) // data itself stays on the caller's stack
	n, err := f.WriteVAt(s.iov, position)
	clear(s.iov)
	if err == nil && n != total {
		err = fmt.Errorf("short write: %d of %d bytes", n, total)
	}
	if err != nil {
		return s.undo(position, fmt.Errorf("segment: appending to %s at %d: %w", s.path(), position, err))
	}
	if position == 0 {
		s.rollingBasedTimestamp, s.rollingBasedLoaded = info.LargestTimestamp, true
	}
	if info.LargestTimestamp > maxSoFar.timestamp {
		maxSoFar = timestampOffset{info.LargestTimestamp, info.ShallowOffsetOfMaxTimestamp}
	}
	if s.bytesSinceLastIndexEntry > s.indexInterval() {
		if err := s.offsetIdx.Append(info.LargestOffset, int32(position)); err != nil {
			return s.undo(position, err)
		}
		if err := s.timeIdx.MaybeAppend(maxSoFar.timestamp, maxSoFar.offset, false); err != nil {
			return s.undo(position, errors.Join(err, s.offsetIdx.TruncateTo(info.LargestOffset)))
		}
		s.bytesSinceLastIndexEntry = 0
	}
	s.bytesSinceLastIndexEntry += total
	s.setMaxSoFar(maxSoFar)
	s.size.Store(position + int64(total))
	return nil
}

// undo truncates the .log back to size after a failed append, and fails the
// segment if that is impossible.
func (s *Segment) undo(size int64, cause error) error {
	f, err := s.file()
	if err == nil {
		err = f.Truncate(size)
	}
	if err != nil {
		s.failed = fmt.Errorf("segment: %s failed: truncating back to %d after a failed append: %w (after: %w)",
			s.path(), size, err, cause)
		return s.failed
	}
	return cause
}

// RollParams are the inputs of the roll decision (docs/format.md §3.6).
type RollParams struct {
	// SegmentBytes and SegmentMs are the limits (segment.bytes,
	// segment.ms).
	SegmentBytes int64
	SegmentMs    int64
	// MaxTimestamp and MaxOffset are the largest timestamp and last offset
	// of the incoming append; Size is its size in bytes.
	MaxTimestamp int64
	MaxOffset    int64
	Size         int64
	// NowMs is the current time.
	NowMs int64
}

// RollReason says why a segment should roll, or is RollNone.
type RollReason int8

const (
	RollNone        RollReason = iota
	RollSize                   // the append would pass segment.bytes
	RollTime                   // the segment is older than segment.ms minus its jitter
	RollIndexFull              // the offset or time index is full
	RollOffsetRange            // the append's offsets do not fit relative to the base
)

func (r RollReason) String() string {
	return [...]string{"none", "size", "time", "index full", "offset range"}[r]
}

// ShouldRoll reports whether the segment must roll before an append.
func (s *Segment) ShouldRoll(p RollParams) (RollReason, error) {
	size, err := s.end()
	if err != nil {
		return RollNone, err
	}
	if size > p.SegmentBytes-p.Size {
		return RollSize, nil
	}
	if size > 0 {
		waited, err := s.timeWaitedForRoll(p.NowMs, p.MaxTimestamp)
		if err != nil {
			return RollNone, err
		}
		if waited > p.SegmentMs-s.rollJitterMs {
			return RollTime, nil
		}
	}
	if full, err := s.offsetIdx.IsFull(); err != nil || full {
		return RollIndexFull, err
	}
	if full, err := s.timeIdx.IsFull(); err != nil || full {
		return RollIndexFull, err
	}
	if !s.offsetIdx.CanAppendOffset(p.MaxOffset) {
		return RollOffsetRange, nil
	}
	return RollNone, nil
}

// timeWaitedForRoll is the incoming max timestamp minus the first batch's
// max timestamp when that is known, else the time since creation.
func (s *Segment) timeWaitedForRoll(nowMs, maxTimestamp int64) (int64, error) {
	if !s.rollingBasedLoaded {
		ts, err := s.firstBatchMaxTimestamp()
		if err != nil {
			return 0, err
		}
		s.rollingBasedTimestamp, s.rollingBasedLoaded = ts, true
	}
	if s.rollingBasedTimestamp >= 0 {
		return maxTimestamp - s.rollingBasedTimestamp, nil
	}
	return nowMs - s.created.UnixMilli(), nil
}

func (s *Segment) firstBatchMaxTimestamp() (int64, error) {
	size, err := s.end()
	if err != nil {
		return 0, err
	}
	f, err := s.file()
	if err != nil {
		return 0, err
	}
	sc := scanners.get(f, 0, size)
	defer scanners.put(sc)
	if sc.Next() {
		return sc.Header().MaxTimestamp, nil
	}
	if sc.Stop() == record.ReadFailed {
		return 0, sc.Err()
	}
	return record.NoTimestamp, nil
}

// indexInterval is the index interval in Kafka's terms (0 for
// IndexEveryAppend).
func (s *Segment) indexInterval() int { return max(s.opts.IndexIntervalBytes, 0) }
