package segment

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/logfile"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/vfs"
)

// TailKind says what ended a segment's valid batches.
type TailKind int8

const (
	// CleanEnd: the batches run to the end of the file.
	CleanEnd TailKind = iota
	// TornTail: the file ends inside a batch, or in 17 bytes or fewer: an
	// interrupted append. Expected in the active segment after a crash.
	TornTail
	// ZeroTail: zeros follow the last batch (preallocation, or a crash that
	// extended the file without writing it).
	ZeroTail
	// Corrupt: a batch fails its CRC or its framing, or its contents are
	// invalid. Outside the tail of the active segment this is damage.
	Corrupt
)

func (k TailKind) String() string {
	return [...]string{"clean end", "torn tail", "zero tail", "corruption"}[k]
}

// Tail describes where and why a segment's valid batches end.
type Tail struct {
	Kind TailKind
	// Position is where the valid batches end; Length is the size of the
	// file region scanned.
	Position, Length int64
	// Err is the *seglog.CorruptionError for Corrupt, with the file and
	// position; nil otherwise.
	Err error
}

// Bytes returns how many bytes follow the valid batches.
func (t Tail) Bytes() int64 { return t.Length - t.Position }

func (t Tail) String() string {
	if t.Kind == CleanEnd {
		return fmt.Sprintf("clean end at %d", t.Position)
	}
	s := fmt.Sprintf("%v: %d bytes after position %d", t.Kind, t.Bytes(), t.Position)
	if t.Err != nil {
		s += ": " + t.Err.Error()
	}
	return s
}

// zeroProbe is how many bytes after the last batch are looked at to tell a
// zero tail from corruption.
const zeroProbe = 4096

// Replayer receives each valid batch recovery reads, in order: the writer
// state and the leader epoch cache plug in here. It returns the
// transactions the batch's marker aborted, with their last stable offsets,
// for this segment's transaction index. An error of kind
// record.ErrInvalidRecord (an unreadable marker) ends the valid batches
// there, like corruption; any other error stops recovery.
type Replayer interface {
	Replay(b record.Batch) ([]record.AbortedTxn, error)
}

// ScanLog reads every batch of the .log up to size, as recovery does —
// framing, CRC, offsets that fit the segment — calling fn for each valid
// one, and reports where and why the valid batches end. It changes nothing.
// An error from fn of kind record.ErrInvalidRecord ends the valid batches;
// another error from fn, or a read error, is returned.
func (s *Segment) ScanLog(size int64, fn func(b record.Batch, pos int64) error) (Tail, error) {
	f, err := s.file()
	if err != nil {
		return Tail{}, err
	}
	return scanLog(f, s.path(), s.base, size, fn)
}

// ScanLogFile is ScanLog for any .log file: it reads path up to its end
// (the base offset, for the offset check, is the name's or else the first
// batch's) and reports where and why recovery would end its valid batches.
// fn may be nil. It changes nothing.
func ScanLogFile(fsys vfs.FS, path string, fn func(b record.Batch, pos int64) error) (Tail, error) {
	fsys = vfs.OrOS(fsys)
	f, err := fsys.Open(path)
	if err != nil {
		return Tail{}, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return Tail{}, err
	}
	base := int64(-1)
	if n, err := logfile.ParseFilename(filepath.Base(path)); err == nil && n.Kind == logfile.Log {
		base = n.Base
	}
	return scanLog(f, path, base, size, fn)
}

// scanLog is ScanLog over f; a base of -1 is taken from the first batch.
func scanLog(f vfs.File, path string, base, size int64, fn func(b record.Batch, pos int64) error) (Tail, error) {
	sc := scanners.get(f, 0, size)
	defer scanners.put(sc)
	// corrupt reports damage found at offset in the file.
	corrupt := func(offset int64, err error) Tail {
		reason := err.Error()
		if re := (*record.Error)(nil); errors.As(err, &re) {
			reason = re.Reason
		}
		return Tail{Kind: Corrupt, Position: sc.Pos(), Length: size,
			Err: &seglog.CorruptionError{Path: path, Offset: offset, Reason: reason, Err: err}}
	}
	prevLast := int64(math.MinInt64)
	for sc.Next() {
		b, err := sc.Batch()
		if err != nil {
			break // the scanner has stopped and says why below
		}
		if err := b.Verify(); err != nil {
			var re *record.Error
			errors.As(err, &re)
			return corrupt(sc.Pos()+re.Pos, err), nil // at the CRC field
		}
		if base < 0 {
			base = b.BaseOffset()
		}
		// The base offset is outside the CRC: a write torn at a sector
		// boundary can leave a valid batch under a stale one (zeros, or an
		// older batch's bytes). Offsets that go backwards end the valid
		// batches, as damage, rather than failing the scan.
		if first := max(prevLast+1, base); b.BaseOffset() < first || b.LastOffset() < b.BaseOffset() {
			return corrupt(sc.Pos(), fmt.Errorf("%w: the batch at position %d holds offsets %d to %d, not from %d on",
				record.ErrCorruptBatch, sc.Pos(), b.BaseOffset(), b.LastOffset(), first)), nil
		}
		prevLast = b.LastOffset()
		if rel := b.LastOffset() - base; rel > math.MaxInt32 {
			return Tail{}, fmt.Errorf("%w: a batch ending at offset %d at position %d of %s",
				ErrOffsetOverflow, b.LastOffset(), sc.Pos(), path)
		}
		if fn == nil {
			continue
		}
		if err := fn(b, sc.Pos()); err != nil {
			if errors.Is(err, record.ErrInvalidRecord) {
				return corrupt(sc.Pos(), err), nil
			}
			return Tail{}, err
		}
	}
	switch sc.Stop() {
	case record.AtEnd:
		return Tail{Kind: CleanEnd, Position: sc.Pos(), Length: size}, nil
	case record.TornTail:
		return Tail{Kind: TornTail, Position: sc.Pos(), Length: size}, nil
	case record.Corrupt:
		if zero, err := zerosFrom(f, sc.Pos(), size); err != nil {
			return Tail{}, err
		} else if zero {
			return Tail{Kind: ZeroTail, Position: sc.Pos(), Length: size}, nil
		}
		var re *record.Error
		errors.As(sc.Err(), &re)
		return corrupt(re.Pos, sc.Err()), nil // the scanner's positions are the file's
	case record.Unsupported:
		return Tail{}, &seglog.CorruptionError{Path: path, Offset: sc.Pos(),
			Reason: "a batch of a message format before v2, which seglog does not read", Err: sc.Err()}
	default:
		return Tail{}, fmt.Errorf("segment: reading %s: %w", path, sc.Err())
	}
}

// zerosFrom reports whether the bytes from pos (up to zeroProbe of them)
// are all zero.
func zerosFrom(f vfs.File, pos, size int64) (bool, error) {
	buf := make([]byte, min(zeroProbe, size-pos))
	if _, err := f.ReadAt(buf, pos); err != nil {
		return false, err
	}
	for _, c := range buf {
		if c != 0 {
			return false, nil
		}
	}
	return true, nil
}

// Recover rebuilds the segment's indexes from its .log (docs/format.md §3.4): every
// batch's framing and CRC are checked, each valid batch goes to r (which
// may be nil), the offset and time indexes get an entry every
// IndexIntervalBytes, aborted transactions go to the transaction index,
// and the .log is truncated where the valid batches end. It returns where
// and why they ended. An offset that does not fit the segment fails with
// ErrOffsetOverflow: the segment must be split.
func (s *Segment) Recover(r Replayer) (Tail, error) {
	if err := s.writable(); err != nil {
		return Tail{}, err
	}
	if err := errors.Join(s.offsetIdx.Reset(), s.timeIdx.Reset(), s.txnIdx.Reset()); err != nil {
		return Tail{}, err
	}
	f, err := s.file()
	if err != nil {
		return Tail{}, err
	}
	length, err := f.Size()
	if err != nil {
		return Tail{}, err
	}
	s.endKnown.Store(true) // the scan finds the end
	tail, err := s.recover(r, length)
	if err != nil {
		s.endKnown.Store(false) // look for the end again on next use
	}
	return tail, err
}

func (s *Segment) recover(r Replayer, length int64) (Tail, error) {
	var (
		lastIndexed int64
		maxSoFar    = timestampOffset{record.NoTimestamp, -1}
	)
	tail, err := s.ScanLog(length, func(b record.Batch, pos int64) error {
		if b.MaxTimestamp() > maxSoFar.timestamp {
			maxSoFar = timestampOffset{b.MaxTimestamp(), b.LastOffset()}
		}
		if pos-lastIndexed > int64(s.indexInterval()) {
			if err := s.offsetIdx.Append(b.LastOffset(), int32(pos)); err != nil {
				return err
			}
			if err := s.timeIdx.MaybeAppend(maxSoFar.timestamp, maxSoFar.offset, false); err != nil {
				return err
			}
			lastIndexed = pos
		}
		if r == nil {
			return nil
		}
		aborted, err := r.Replay(b)
		if err != nil {
			return err
		}
		for _, t := range aborted {
			if err := s.txnIdx.Append(t); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return Tail{}, err
	}
	if tail.Position < length {
		f, err := s.file()
		if err == nil {
			err = f.Truncate(tail.Position)
		}
		if err != nil {
			return Tail{}, fmt.Errorf("segment: truncating %s to %d: %w", s.path(), tail.Position, err)
		}
	}
	s.size.Store(tail.Position)
	s.setMaxSoFar(maxSoFar)
	s.bytesSinceLastIndexEntry = 0
	if err := s.offsetIdx.TrimToValidSize(); err != nil {
		return Tail{}, err
	}
	if err := s.timeIdx.MaybeAppend(maxSoFar.timestamp, maxSoFar.offset, true); err != nil {
		return Tail{}, err
	}
	return tail, s.timeIdx.TrimToValidSize()
}

// TruncateTo removes every batch that holds offset or a later one (docs/format.md
// §3.5): the whole batch containing offset goes. Both indexes are grown back
// to their maximum size, since the segment becomes the active one. It
// returns the bytes removed.
func (s *Segment) TruncateTo(offset int64) (int64, error) {
	if err := s.writable(); err != nil {
		return 0, err
	}
	mapping, found, err := s.TranslateOffset(offset, 0)
	if err != nil {
		return 0, err
	}
	if err := errors.Join(s.offsetIdx.TruncateTo(offset), s.timeIdx.TruncateTo(offset), s.txnIdx.TruncateTo(offset)); err != nil {
		return 0, err
	}
	if _, err := s.offsetIdx.Resize(s.opts.MaxIndexSize); err != nil {
		return 0, err
	}
	if _, err := s.timeIdx.Resize(s.opts.MaxIndexSize); err != nil {
		return 0, err
	}
	var removed int64
	if found {
		removed = s.Size() - mapping.Position
		f, err := s.file()
		if err == nil {
			err = f.Truncate(mapping.Position)
		}
		if err != nil {
			s.failed = fmt.Errorf("segment: %s failed: truncating to %d: %w", s.path(), mapping.Position, err)
			return 0, s.failed
		}
		s.size.Store(mapping.Position)
	}
	if s.size.Load() == 0 {
		s.created = s.opts.Now()
		s.rollingBasedTimestamp, s.rollingBasedLoaded = record.NoTimestamp, false
	}
	s.bytesSinceLastIndexEntry = 0
	if m, err := s.maxTimestampSoFar(); err != nil {
		return removed, err
	} else if m.timestamp >= 0 {
		if err := s.reloadLargestTimestamp(); err != nil {
			return removed, err
		}
	}
	return removed, nil
}

// reloadLargestTimestamp recomputes the largest timestamp after a
// truncation: the time index's last entry, or a larger timestamp among the
// batches after the position that entry's offset maps to.
func (s *Segment) reloadLargestTimestamp() error {
	last, err := s.timeIdx.LastEntry()
	if err != nil {
		return err
	}
	pos, err := s.offsetIdx.Lookup(last.Offset)
	if err != nil {
		return err
	}
	after, err := s.largestTimestampAfter(int64(pos.Position))
	if err != nil {
		return err
	}
	m := timestampOffset{last.Timestamp, last.Offset}
	if after.timestamp > last.Timestamp {
		m = after
	}
	s.setMaxSoFar(m)
	return nil
}
