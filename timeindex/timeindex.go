// Package timeindex is a segment's .timeindex file: a sparse map from
// timestamps to offsets, memory-mapped (docs/format.md §2.4).
//
//	entry (12 bytes, big-endian):
//	┌──────────────────────────────┬──────────────────────┐
//	│ timestamp int64              │ relativeOffset int32 │
//	└──────────────────────────────┴──────────────────────┘
//
// An entry (T, O) says that T is the running maximum timestamp of the
// segment and O the last offset of the first batch that reached it. Both
// columns increase. The last slot is kept for the entry written when the
// segment is rolled or closed.
package timeindex

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/internal/mmapfile"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/vfs"
)

// EntrySize is the size of an entry: part of the on-disk format; never
// change.
const EntrySize = 12

// DefaultMaxIndexSize is Kafka's segment.index.bytes default, 10 MiB: room
// for 873,813 entries.
const DefaultMaxIndexSize = 10 << 20

var (
	key   = mmapfile.Column{Off: 0, Width: 8}
	value = mmapfile.Column{Off: 8, Width: 4}
)

var (
	// ErrFull is returned by MaybeAppend on a full index.
	ErrFull = mmapfile.ErrFull
	// ErrInvalidOffset is returned by MaybeAppend for an offset below the
	// last entry's (Kafka's InvalidOffsetException).
	ErrInvalidOffset = seglog.NewKafkaError("timeindex: offset decreases", -1)
	// ErrTimestampDecreases is returned by MaybeAppend for a timestamp
	// below the last entry's (Kafka's IllegalStateException).
	ErrTimestampDecreases = seglog.NewKafkaError("timeindex: timestamp decreases", -1)
	// ErrOffsetOverflow is returned for an offset that does not fit
	// relative to the base offset.
	ErrOffsetOverflow = seglog.NewKafkaError("timeindex: offset overflows the relative offset", -1)
)

// Entry is a timestamp and an offset.
type Entry struct {
	Timestamp int64
	Offset    int64
}

// Options configure an Index.
type Options struct {
	// MaxIndexSize is the size a new index is preallocated to
	// (segment.index.bytes), at least 12. The default is 10485760.
	MaxIndexSize int
	// ReadOnly opens an existing file without changing it. The default is
	// false.
	ReadOnly bool
}

// Index is a time index. It is safe for concurrent lookups; changes must
// come from one writer at a time. Its lifecycle methods (Open, Flush,
// Resize, TrimToValidSize, Reset, Close, Rename, Delete, Entries,
// MaxEntries, …) are those of the mapped file.
type Index struct {
	lifecycle
	base int64
	f    *mmapfile.File
}

// Open returns the time index of the segment at base offset base, stored at
// path. The file is opened, or created, on first use.
func Open(fsys vfs.FS, path string, base int64, opts Options) (*Index, error) {
	fsys = vfs.OrOS(fsys)
	if opts.MaxIndexSize == 0 {
		opts.MaxIndexSize = DefaultMaxIndexSize
	}
	f, err := mmapfile.New(fsys, path, mmapfile.Options{EntrySize: EntrySize, MaxSize: opts.MaxIndexSize,
		Key: key, Value: value, ReadOnly: opts.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("timeindex: %w", err)
	}
	return &Index{lifecycle: mmapfile.LifecycleOf(f), base: base, f: f}, nil
}

// BaseOffset returns the segment's base offset.
func (x *Index) BaseOffset() int64 { return x.base }

func (x *Index) decode(s mmapfile.Slot) Entry {
	return Entry{
		Timestamp: int64(binary.BigEndian.Uint64(s[0:])),
		Offset:    x.base + int64(int32(binary.BigEndian.Uint32(s[8:]))),
	}
}

// empty is what an index without entries answers: no timestamp, the base.
func (x *Index) empty() Entry { return Entry{Timestamp: record.NoTimestamp, Offset: x.base} }

// MaybeAppend adds (timestamp, offset) if timestamp is above the last
// entry's; an equal timestamp is ignored, which makes the entry written on
// roll and close idempotent. With skipFull the slot kept for that entry
// may be used. An empty index behaves as if its last entry were
// (-1, base), so entries without timestamps leave it empty.
func (x *Index) MaybeAppend(timestamp, offset int64, skipFull bool) error {
	rel := offset - x.base
	if !skipFull {
		if full, err := x.IsFull(); err != nil || full {
			if err == nil {
				err = fmt.Errorf("%w: %s", ErrFull, x.f.Path())
			}
			return err
		}
	}
	var e [EntrySize]byte
	binary.BigEndian.PutUint64(e[0:], uint64(timestamp))
	binary.BigEndian.PutUint32(e[8:], uint32(rel))
	return x.f.AppendIf(e[:], func(s mmapfile.Slot, ok bool) (bool, error) {
		last := x.empty()
		if ok {
			last = x.decode(s)
			if offset < last.Offset {
				return false, fmt.Errorf("%w: offset %d after %d", ErrInvalidOffset, offset, last.Offset)
			}
			if timestamp < last.Timestamp {
				return false, fmt.Errorf("%w: timestamp %d after %d", ErrTimestampDecreases, timestamp, last.Timestamp)
			}
		}
		if timestamp <= last.Timestamp {
			return false, nil
		}
		if rel < 0 || rel > math.MaxInt32 {
			return false, fmt.Errorf("%w: offset %d, base %d", ErrOffsetOverflow, offset, x.base)
		}
		return true, nil
	})
}

// Lookup returns the entry with the largest timestamp ≤ target, or
// (-1, base offset) if there is none.
func (x *Index) Lookup(target int64) (Entry, error) {
	slot, s, err := x.f.Search(key, target, mmapfile.LargestLowerBound)
	if err != nil || slot < 0 {
		return x.empty(), err
	}
	return x.decode(s), nil
}

// Entry returns entry i.
func (x *Index) Entry(i int) (Entry, error) {
	s, err := x.f.Entry(i)
	if err != nil {
		return Entry{}, fmt.Errorf("timeindex: %w", err)
	}
	return x.decode(s), nil
}

// LastEntry returns the last entry, or (-1, base offset) if there is none.
func (x *Index) LastEntry() (Entry, error) {
	s, ok, err := x.f.Last()
	if err != nil || !ok {
		return x.empty(), err
	}
	return x.decode(s), nil
}

// TruncateTo removes the entries with offsets ≥ offset.
func (x *Index) TruncateTo(offset int64) error {
	return x.f.TruncateAt(value, mmapfile.RelativeTarget(offset, x.base))
}

// IsFull reports whether only the slot kept for the roll entry is left.
func (x *Index) IsFull() (bool, error) {
	n, err := x.f.Entries()
	if err != nil {
		return false, err
	}
	m, err := x.f.MaxEntries()
	return n >= m-1, err
}

// SanityCheck runs Kafka's check: the last timestamp is not below the
// first, the last offset is not below the base, and the length is a whole
// number of entries. It fails with a *seglog.CorruptionError.
func (x *Index) SanityCheck() error {
	n, err := x.f.Entries()
	if err != nil || n == 0 {
		return errors.Join(err, x.f.CheckLength())
	}
	first, err := x.Entry(0)
	if err != nil {
		return err
	}
	last, err := x.LastEntry()
	if err != nil {
		return err
	}
	at := int64(n-1) * EntrySize
	if last.Timestamp < first.Timestamp {
		return &seglog.CorruptionError{Path: x.f.Path(), Offset: at, Err: seglog.ErrCorruption,
			Reason: fmt.Sprintf("last timestamp %d is below the first timestamp %d", last.Timestamp, first.Timestamp)}
	}
	if last.Offset < x.base {
		return &seglog.CorruptionError{Path: x.f.Path(), Offset: at, Err: seglog.ErrCorruption,
			Reason: fmt.Sprintf("last offset %d is below the base offset %d", last.Offset, x.base)}
	}
	return x.f.CheckLength()
}

// QuickCheck is SanityCheck for a sealed index, from its length and its
// first and last slots, without mapping a file that is not open
// (mmapfile.PeekEnds): a length that is not whole entries, a last slot
// left zero (untrimmed, which a sealed index never is), time going
// backwards from the first entry to the last, or a last offset below the
// base is a *seglog.CorruptionError.
func (x *Index) QuickCheck() error {
	e, err := x.f.PeekEnds()
	if err != nil {
		return err
	}
	bad := func(at int, format string, args ...any) error {
		return &seglog.CorruptionError{Path: x.f.Path(), Offset: int64(at), Err: seglog.ErrCorruption,
			Reason: fmt.Sprintf(format, args...)}
	}
	switch {
	case e.Length%EntrySize != 0:
		return bad(e.Length, "length %d is not a multiple of %d", e.Length, EntrySize)
	case e.Entries < 0:
		return bad(e.Length-EntrySize, "a sealed index left untrimmed: its last slot is zero")
	case e.Entries == 0:
		return nil
	}
	first, last := x.decode(e.First), x.decode(e.Last)
	at := (e.Entries - 1) * EntrySize
	if last.Timestamp < first.Timestamp {
		return bad(at, "last timestamp %d is below the first timestamp %d", last.Timestamp, first.Timestamp)
	}
	if last.Offset < x.base {
		return bad(at, "last offset %d is below the base offset %d", last.Offset, x.base)
	}
	return nil
}

// Check runs SanityCheck and then inspects every slot: timestamps that do
// not increase, offsets below the base or decreasing, and slots left beyond
// the valid entries by a crash. Each problem is a *seglog.CorruptionError
// at the slot's byte position. It changes nothing.
func (x *Index) Check() ([]*seglog.CorruptionError, error) {
	var out []*seglog.CorruptionError
	var ce *seglog.CorruptionError
	if err := x.SanityCheck(); errors.As(err, &ce) {
		out = append(out, ce)
	} else if err != nil {
		return nil, err
	}
	more, err := x.f.Check(func(i int, cur, prev mmapfile.Slot) string {
		e, p := x.decode(cur), x.decode(prev)
		switch {
		case e.Offset < x.base:
			return fmt.Sprintf("offset %d is below the base offset %d", e.Offset, x.base)
		case i > 0 && e.Timestamp <= p.Timestamp:
			return fmt.Sprintf("timestamp %d does not increase (previous %d)", e.Timestamp, p.Timestamp)
		case i > 0 && e.Offset < p.Offset:
			return fmt.Sprintf("offset %d decreases (previous %d)", e.Offset, p.Offset)
		}
		return ""
	})
	return append(out, more...), err
}
