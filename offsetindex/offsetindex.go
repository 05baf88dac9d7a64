// Package offsetindex is a segment's .index file: a sparse map from offsets
// to positions in the segment's .log, memory-mapped (docs/format.md §2.3).
//
//	entry (8 bytes, big-endian):
//	┌──────────────────────┬──────────────────────┐
//	│ relativeOffset int32 │ position int32       │
//	└──────────────────────┴──────────────────────┘
//	relativeOffset = offset - the segment's base offset, in [0, MaxInt32]
//
// Each entry maps the last offset of an append to the position where that
// append starts. Offsets increase strictly from entry to entry.
package offsetindex

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/internal/mmapfile"
	"github.com/seglog/seglog/vfs"
)

// EntrySize is the size of an entry: part of the on-disk format; never
// change.
const EntrySize = 8

// DefaultMaxIndexSize is Kafka's segment.index.bytes default, 10 MiB: room
// for 1,310,720 entries.
const DefaultMaxIndexSize = 10 << 20

var (
	key   = mmapfile.Column{Off: 0, Width: 4}
	value = mmapfile.Column{Off: 4, Width: 4}
)

var (
	// ErrFull is returned by Append on a full index.
	ErrFull = mmapfile.ErrFull
	// ErrInvalidOffset is returned by Append for an offset not above the
	// last one (Kafka's InvalidOffsetException).
	ErrInvalidOffset = seglog.NewKafkaError("offsetindex: offset does not increase", -1)
	// ErrOffsetOverflow is returned for an offset that does not fit
	// relative to the base offset (Kafka's IndexOffsetOverflowException).
	ErrOffsetOverflow = seglog.NewKafkaError("offsetindex: offset overflows the relative offset", -1)
)

// Entry is an offset and the position in the .log where the append that
// ends at that offset starts.
type Entry struct {
	Offset   int64
	Position int32
}

// Options configure an Index.
type Options struct {
	// MaxIndexSize is the size a new index is preallocated to
	// (segment.index.bytes), at least 8. The default is 10485760.
	MaxIndexSize int
	// ReadOnly opens an existing file without changing it. The default is
	// false.
	ReadOnly bool
}

// Index is an offset index. It is safe for concurrent lookups; changes
// must come from one writer at a time. Its lifecycle methods (Open, Flush,
// Resize, TrimToValidSize, Reset, Close, Rename, Delete, Entries,
// MaxEntries, …) are those of the mapped file.
type Index struct {
	lifecycle
	base int64
	f    *mmapfile.File
}

// Open returns the index of the segment at base offset base, stored at
// path. The file is opened, or created, on first use.
func Open(fsys vfs.FS, path string, base int64, opts Options) (*Index, error) {
	fsys = vfs.OrOS(fsys)
	if opts.MaxIndexSize == 0 {
		opts.MaxIndexSize = DefaultMaxIndexSize
	}
	f, err := mmapfile.New(fsys, path, mmapfile.Options{EntrySize: EntrySize, MaxSize: opts.MaxIndexSize,
		Key: key, Value: value, ReadOnly: opts.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("offsetindex: %w", err)
	}
	return &Index{lifecycle: mmapfile.LifecycleOf(f), base: base, f: f}, nil
}

// BaseOffset returns the segment's base offset.
func (x *Index) BaseOffset() int64 { return x.base }

func (x *Index) decode(s mmapfile.Slot) Entry {
	return Entry{
		Offset:   x.base + int64(int32(binary.BigEndian.Uint32(s[0:]))),
		Position: int32(binary.BigEndian.Uint32(s[4:])),
	}
}

// relative returns offset - base, or ErrOffsetOverflow.
func (x *Index) relative(offset int64) (int32, error) {
	rel := offset - x.base
	if rel < 0 || rel > math.MaxInt32 {
		return 0, fmt.Errorf("%w: offset %d, base %d", ErrOffsetOverflow, offset, x.base)
	}
	return int32(rel), nil
}

// CanAppendOffset reports whether offset fits relative to the base.
func (x *Index) CanAppendOffset(offset int64) bool {
	_, err := x.relative(offset)
	return err == nil
}

// Append adds (offset, position). offset must be above the last entry's.
func (x *Index) Append(offset int64, position int32) error {
	rel, err := x.relative(offset)
	if err != nil {
		return err
	}
	var e [EntrySize]byte
	binary.BigEndian.PutUint32(e[0:], uint32(rel))
	binary.BigEndian.PutUint32(e[4:], uint32(position))
	return x.f.AppendIf(e[:], func(last mmapfile.Slot, ok bool) (bool, error) {
		if ok && offset <= x.decode(last).Offset {
			return false, fmt.Errorf("%w: offset %d after %d", ErrInvalidOffset, offset, x.decode(last).Offset)
		}
		return true, nil
	})
}

// Lookup returns the entry with the largest offset ≤ target, or
// (base offset, 0) if there is none.
func (x *Index) Lookup(target int64) (Entry, error) {
	slot, s, err := x.f.Search(key, mmapfile.RelativeTarget(target, x.base), mmapfile.LargestLowerBound)
	if err != nil || slot < 0 {
		return Entry{Offset: x.base}, err
	}
	return x.decode(s), nil
}

// Bounds returns the entry Lookup returns for target, and the entry after
// it, if there is one: the append that ends at or after target starts
// between the two positions.
func (x *Index) Bounds(target int64) (floor, next Entry, hasNext bool, err error) {
	slot, s, err := x.f.Search(key, mmapfile.RelativeTarget(target, x.base), mmapfile.LargestLowerBound)
	if err != nil {
		return Entry{}, Entry{}, false, err
	}
	floor = Entry{Offset: x.base}
	if slot >= 0 {
		floor = x.decode(s)
	}
	ns, err := x.f.Entry(slot + 1)
	if err != nil {
		return floor, Entry{}, false, nil // no entry after the floor
	}
	return floor, x.decode(ns), true, nil
}

// Entry returns entry i.
func (x *Index) Entry(i int) (Entry, error) {
	s, err := x.f.Entry(i)
	if err != nil {
		return Entry{}, fmt.Errorf("offsetindex: %w", err)
	}
	return x.decode(s), nil
}

// LastEntry returns the last entry, or (base offset, 0) if there is none.
func (x *Index) LastEntry() (Entry, error) {
	s, ok, err := x.f.Last()
	if err != nil || !ok {
		return Entry{Offset: x.base}, err
	}
	return x.decode(s), nil
}

// LastOffset returns the last entry's offset, or the base offset.
func (x *Index) LastOffset() (int64, error) {
	e, err := x.LastEntry()
	return e.Offset, err
}

// FetchUpperBoundOffset returns the first entry whose position is at least
// position + size: where a read of size bytes from position can stop. It
// reports false if there is none.
func (x *Index) FetchUpperBoundOffset(position int32, size int) (Entry, bool, error) {
	slot, s, err := x.f.Search(value, int64(position)+int64(size), mmapfile.SmallestUpperBound)
	if err != nil || slot < 0 {
		return Entry{}, false, err
	}
	return x.decode(s), true, nil
}

// LookupPosition returns the entry with the largest position ≤ position
// (a batch start at or before it), or reports false if there is none.
func (x *Index) LookupPosition(position int64) (Entry, bool, error) {
	slot, s, err := x.f.Search(value, position, mmapfile.LargestLowerBound)
	if err != nil || slot < 0 {
		return Entry{}, false, err
	}
	return x.decode(s), true, nil
}

// TruncateTo removes the entries with offsets ≥ offset.
func (x *Index) TruncateTo(offset int64) error {
	return x.f.TruncateAt(key, mmapfile.RelativeTarget(offset, x.base))
}

// IsFull reports whether no slot is left.
func (x *Index) IsFull() (bool, error) {
	n, err := x.f.Entries()
	if err != nil {
		return false, err
	}
	m, err := x.f.MaxEntries()
	return n >= m, err
}

// SanityCheck runs Kafka's check: the last offset is not below the base and
// the length is a whole number of entries. It fails with a
// *seglog.CorruptionError.
func (x *Index) SanityCheck() error {
	n, err := x.f.Entries()
	if err != nil {
		return err
	}
	last, err := x.LastEntry()
	if err != nil {
		return err
	}
	if n > 0 && last.Offset < x.base {
		return &seglog.CorruptionError{Path: x.f.Path(), Offset: int64(n-1) * EntrySize, Err: seglog.ErrCorruption,
			Reason: fmt.Sprintf("last offset %d is below the base offset %d", last.Offset, x.base)}
	}
	return x.f.CheckLength()
}

// QuickCheck is SanityCheck for a sealed index, from its length and last
// slot only, without mapping a file that is not open (mmapfile.PeekEnds):
// a length that is not whole entries, a last slot left zero (untrimmed,
// which a sealed index never is), or a last offset below the base is a
// *seglog.CorruptionError. It returns the last entry and the entry count.
func (x *Index) QuickCheck() (Entry, int, error) {
	e, err := x.f.PeekEnds()
	if err != nil {
		return Entry{}, 0, err
	}
	bad := func(at int, format string, args ...any) error {
		return &seglog.CorruptionError{Path: x.f.Path(), Offset: int64(at), Err: seglog.ErrCorruption,
			Reason: fmt.Sprintf(format, args...)}
	}
	switch {
	case e.Length%EntrySize != 0:
		return Entry{}, 0, bad(e.Length, "length %d is not a multiple of %d", e.Length, EntrySize)
	case e.Entries < 0:
		return Entry{}, 0, bad(e.Length-EntrySize, "a sealed index left untrimmed: its last slot is zero")
	case e.Entries == 0:
		return Entry{Offset: x.base}, 0, nil
	}
	last := x.decode(e.Last)
	if last.Offset < x.base {
		return Entry{}, 0, bad((e.Entries-1)*EntrySize, "last offset %d is below the base offset %d", last.Offset, x.base)
	}
	return last, e.Entries, nil
}

// Check runs SanityCheck and then inspects every slot: offsets that do not
// increase, positions that are negative or do not increase, and slots left
// beyond the valid entries by a crash. Each problem is a
// *seglog.CorruptionError at the slot's byte position. It changes nothing.
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
		case e.Position < 0:
			return fmt.Sprintf("negative position %d", e.Position)
		case i > 0 && e.Offset <= p.Offset:
			return fmt.Sprintf("offset %d does not increase (previous %d)", e.Offset, p.Offset)
		case i > 0 && e.Position <= p.Position:
			return fmt.Sprintf("position %d does not increase (previous %d)", e.Position, p.Position)
		}
		return ""
	})
	return append(out, more...), err
}
