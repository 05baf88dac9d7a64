// Package mmapfile is a file of fixed-width entries, memory-mapped, shared
// by the offset and time indexes. It owns the file's lifecycle (lazy
// opening, preallocation, resize, trim, flush, close) and the lookup of
// docs/format.md §2.2: a binary search with the upper median over the whole file, or
// over its last 8 KiB when the target lies there.
//
//	slot:  0         1         2               entries-1      maxEntries-1
//	      ┌─────────┬─────────┬─────────┬─ … ─┬─────────┬─────┬─────────┐
//	      │ key|val │ key|val │ key|val │     │ key|val │ 0 … │ 0 …     │
//	      └─────────┴─────────┴─────────┴─ … ─┴─────────┴─────┴─────────┘
//	      ◄──────────── entries: the valid prefix ───────►◄ preallocated ►
//
// A file's limit is the size it may grow to (a new file's is the maximum
// size); its length grows towards it in chunks as entries are appended —
// first one page, then doubling, then a MiB at a time — so that an empty
// index costs a page of disk, not the maximum. Every chunk is preallocated
// with real blocks (fallocate, or written zeros where that is not
// supported) before it is mapped, and an append keeps one slot allocated
// beyond its entry, so a store into the mapping never needs a new block
// (no SIGBUS on a full disk) and the slot a time index keeps for its roll
// entry is always there. On a full disk an append whose own slot is not
// allocated fails before anything is stored. Closing trims the file to its
// entries. A file found with a zero last slot was left untrimmed by a
// crash; its valid prefix ends at the first slot that is zero or does not
// increase, and the rest is reported (Kafka would read such a file as full
// of zero entries).
//
// Lookups take a read lock and never allocate or make a system call;
// everything that remaps takes the write lock.
package mmapfile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"sync"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/vfs"
)

// MaxEntrySize is the widest entry a File holds.
const MaxEntrySize = 16

// warmBytes is the size of the index tail that caught-up readers keep hot
// (docs/format.md §2.2): 8 KiB, at most three 4 KiB pages.
const warmBytes = 8192

// Column is a big-endian signed integer field of an entry: its byte offset
// and its width, 4 or 8.
type Column struct {
	Off, Width int
}

// RelativeTarget returns target - base for a search on a column of offsets
// relative to base, saturating instead of wrapping (base is never
// negative).
func RelativeTarget(target, base int64) int64 {
	if target < math.MinInt64+base {
		return math.MinInt64
	}
	return target - base
}

// Slot holds a copy of one entry, in its first EntrySize bytes.
type Slot [MaxEntrySize]byte

// Bound selects the search result.
type Bound int8

const (
	// LargestLowerBound finds the last slot whose column is ≤ the target,
	// or -1.
	LargestLowerBound Bound = iota
	// SmallestUpperBound finds the first slot whose column is ≥ the
	// target, or -1.
	SmallestUpperBound
)

var (
	// ErrFull is returned by Append when no slot is left.
	ErrFull = seglog.NewKafkaError("mmapfile: index is full", -1)
	// ErrReadOnly is returned by changes to a file opened read-only.
	ErrReadOnly = seglog.NewKafkaError("mmapfile: index is read-only", -1)
	// ErrDeleted is returned by any use of a deleted file.
	ErrDeleted = seglog.NewKafkaError("mmapfile: index was deleted", -1)
)

// Options describe the entries and the size of a File.
type Options struct {
	// EntrySize is the width of an entry, at most MaxEntrySize.
	EntrySize int
	// MaxSize is the size a new file may grow to, rounded down to a
	// multiple of EntrySize; at least one entry.
	MaxSize int
	// Key and Value are the columns searches run on; Key must increase
	// strictly from slot to slot and Value must not decrease.
	Key, Value Column
	// ReadOnly opens the file without changing it: no creation, no trim.
	ReadOnly bool
}

// Opened describes what opening an existing file found.
type Opened struct {
	// Slots is the number of whole entries the file has room for.
	Slots int
	// Entries is the length of the valid prefix.
	Entries int
	// StopReason says why the valid prefix ends before Slots ("zero entry"
	// or "not increasing"), or is "".
	StopReason string
}

// Untrimmed reports whether the file held slots beyond its valid entries.
func (o Opened) Untrimmed() bool { return o.Entries < o.Slots }

type state int8

const (
	closed state = iota // not opened yet, or closed: opens on next use
	open
	deleted
)

// File is a memory-mapped file of fixed-width entries.
type File struct {
	fsys vfs.FS
	opts Options

	mu      sync.RWMutex // guards the fields below
	path    string
	state   state
	m       vfs.Mapping
	buf     []byte // the mapping
	entries int
	// limit is the length the file may grow to (its slots); at least
	// len(buf) while open. It outlives a close, so a file reopened keeps
	// the room it had.
	limit  int
	opened Opened
	dirty  bool // size changed since the last flush
	stored bool // entries stored or cleared since the last flush
}

// New returns a File for path. Nothing is opened or created until the file
// is first used.
func New(fsys vfs.FS, path string, opts Options) (*File, error) {
	fsys = vfs.OrOS(fsys)
	if opts.EntrySize <= 0 || opts.EntrySize > MaxEntrySize {
		return nil, fmt.Errorf("mmapfile: entry size %d out of range", opts.EntrySize)
	}
	if opts.MaxSize < opts.EntrySize {
		return nil, fmt.Errorf("mmapfile: maximum size %d is smaller than one entry (%d bytes)", opts.MaxSize, opts.EntrySize)
	}
	for _, c := range []Column{opts.Key, opts.Value} {
		if (c.Width != 4 && c.Width != 8) || c.Off < 0 || c.Off+c.Width > opts.EntrySize {
			return nil, fmt.Errorf("mmapfile: column %+v does not fit a %d-byte entry", c, opts.EntrySize)
		}
	}
	opts.MaxSize -= opts.MaxSize % opts.EntrySize
	return &File{fsys: fsys, opts: opts, path: path}, nil
}

// Path returns the file's path.
func (f *File) Path() string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.path
}

// IsOpen reports whether the file is open (mapped) now.
func (f *File) IsOpen() bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.state == open
}

// rlock takes the read lock on an open file, opening it first if needed.
// On success the caller must RUnlock.
func (f *File) rlock() error {
	for {
		f.mu.RLock()
		if f.state == open {
			return nil
		}
		f.mu.RUnlock()
		f.mu.Lock()
		err := f.openLocked()
		f.mu.Unlock()
		if err != nil {
			return err
		}
	}
}

// lock takes the write lock on an open file, opening it first if needed.
func (f *File) lock() error {
	f.mu.Lock()
	if err := f.openLocked(); err != nil {
		f.mu.Unlock()
		return err
	}
	return nil
}

// wlock is lock for changes: it refuses a read-only file.
func (f *File) wlock() error {
	if f.opts.ReadOnly {
		return fmt.Errorf("%w: %s", ErrReadOnly, f.path)
	}
	return f.lock()
}

// Open opens (or creates) the file now, and reports what opening an
// existing file found.
func (f *File) Open() (Opened, error) {
	if err := f.lock(); err != nil {
		return Opened{}, err
	}
	defer f.mu.Unlock()
	return f.opened, nil
}

func (f *File) openLocked() error {
	switch f.state {
	case open:
		return nil
	case deleted:
		return fmt.Errorf("%w: %s", ErrDeleted, f.path)
	}
	flag := os.O_RDWR
	if f.opts.ReadOnly {
		flag = os.O_RDONLY
	}
	file, err := f.fsys.OpenFile(f.path, flag, 0o644)
	created := false
	if errors.Is(err, fs.ErrNotExist) && !f.opts.ReadOnly {
		file, err = f.fsys.OpenFile(f.path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		created = true
	}
	if err != nil {
		return fmt.Errorf("mmapfile: opening %s: %w", f.path, err)
	}
	size := int64(0)
	if created {
		size = int64(f.firstChunk())
		err = preallocate(file, 0, size)
	} else {
		size, err = file.Size()
	}
	if err == nil && size > int64(^uint(0)>>1) {
		err = fmt.Errorf("size %d does not fit in memory", size)
	}
	if err == nil {
		err = f.mapLocked(file, int(size))
	}
	if err != nil {
		file.Close()
		if created {
			f.fsys.Remove(f.path) // never leave a half-made index behind
		}
		return fmt.Errorf("mmapfile: opening %s: %w", f.path, err)
	}
	// The mapping outlives the descriptor: an open index holds none (an
	// open partition costs its .log's alone); a resize or an fdatasync
	// opens the file again for its while.
	if err := file.Close(); err != nil {
		_ = f.m.Unmap()
		f.m, f.buf = nil, nil
		return fmt.Errorf("mmapfile: opening %s: %w", f.path, err)
	}
	f.state, f.dirty = open, created
	if created {
		f.entries, f.opened, f.limit = 0, Opened{}, f.opts.MaxSize
	} else {
		f.limit = max(f.limit, len(f.buf))
		f.opened = f.validPrefixLocked()
		f.entries = f.opened.Entries
	}
	return nil
}

// Growth: a new file's first chunk, and the largest step a file grows by.
const (
	firstChunk = 4 << 10
	maxChunk   = 1 << 20
)

// firstChunk is the length a new (or reset) file starts with: a page, or
// the maximum size if that is less, in whole entries.
func (f *File) firstChunk() int {
	n := min(firstChunk, f.opts.MaxSize)
	return n - n%f.opts.EntrySize
}

// preallocate gives [off, off+n) real blocks, writing zeros where the
// filesystem cannot fallocate.
func preallocate(file vfs.File, off, n int64) error {
	err := file.Preallocate(off, n)
	if !errors.Is(err, vfs.ErrNotSupported) {
		return err
	}
	zeros := make([]byte, min(n, 1<<20))
	for n > 0 {
		w := min(n, int64(len(zeros)))
		if _, err := file.WriteAt(zeros[:w], off); err != nil {
			return err
		}
		off, n = off+w, n-w
	}
	return nil
}

func (f *File) mapLocked(file vfs.File, size int) error {
	m, err := file.Map(size, !f.opts.ReadOnly)
	if err != nil {
		return err
	}
	_ = m.Advise(vfs.AdviseRandom) // lookups touch a few scattered pages
	f.m, f.buf = m, m.Bytes()
	return nil
}

// validPrefixLocked finds the valid entries of an existing file. A file
// whose last slot is not zero was trimmed and is taken whole, as Kafka
// does; otherwise it was left untrimmed by a crash, and its entries end at
// the first slot that is zero or does not increase.
func (f *File) validPrefixLocked() Opened {
	slots := len(f.buf) / f.opts.EntrySize
	o := Opened{Slots: slots, Entries: slots}
	if slots == 0 || !f.zeroLocked(slots-1) {
		return o
	}
	for i := 0; i < slots; i++ {
		if f.zeroLocked(i) {
			o.Entries, o.StopReason = i, "zero entry"
			return o
		}
		if i > 0 && (f.colLocked(i, f.opts.Key) <= f.colLocked(i-1, f.opts.Key) ||
			f.colLocked(i, f.opts.Value) < f.colLocked(i-1, f.opts.Value)) {
			o.Entries, o.StopReason = i, "not increasing"
			return o
		}
	}
	return o
}

func (f *File) zeroLocked(i int) bool {
	for _, c := range f.buf[i*f.opts.EntrySize : (i+1)*f.opts.EntrySize] {
		if c != 0 {
			return false
		}
	}
	return true
}

// colLocked reads column c of slot i.
func (f *File) colLocked(i int, c Column) int64 {
	p := f.buf[i*f.opts.EntrySize+c.Off:]
	if c.Width == 8 {
		return int64(binary.BigEndian.Uint64(p))
	}
	return int64(int32(binary.BigEndian.Uint32(p)))
}

func (f *File) slotLocked(i int) Slot {
	var s Slot
	copy(s[:], f.buf[i*f.opts.EntrySize:(i+1)*f.opts.EntrySize])
	return s
}

// Ends describes a file from its length and its first and last slots.
type Ends struct {
	// Length is the file's size in bytes.
	Length int
	// Entries is the number of whole slots, or -1 when the last slot is
	// zero (left untrimmed: the valid prefix is not known without a scan).
	Entries int
	// First and Last are the first and last slots, when Entries > 0.
	First, Last Slot
}

// PeekEnds reads the file's length and its first and last slots. A file
// that is not open is read with two preads instead of being mapped — the
// cheap look a load takes at thousands of sealed indexes — and stays
// closed; an open one answers from its mapping and valid entries.
func (f *File) PeekEnds() (Ends, error) {
	f.mu.RLock()
	if f.state == open {
		defer f.mu.RUnlock()
		e := Ends{Length: len(f.buf), Entries: f.entries}
		if f.entries > 0 {
			e.First, e.Last = f.slotLocked(0), f.slotLocked(f.entries-1)
		}
		return e, nil
	}
	path, deleted := f.path, f.state == deleted
	f.mu.RUnlock()
	if deleted {
		return Ends{}, fmt.Errorf("%w: %s", ErrDeleted, path)
	}
	file, err := f.fsys.Open(path)
	if err != nil {
		return Ends{}, fmt.Errorf("mmapfile: opening %s: %w", path, err)
	}
	defer file.Close()
	size, err := file.Size()
	if err != nil {
		return Ends{}, fmt.Errorf("mmapfile: opening %s: %w", path, err)
	}
	w := f.opts.EntrySize
	e := Ends{Length: int(size), Entries: int(size) / w}
	if e.Entries == 0 {
		return e, nil
	}
	if _, err := file.ReadAt(e.Last[:w], int64((e.Entries-1)*w)); err != nil {
		return Ends{}, fmt.Errorf("mmapfile: reading %s: %w", path, err)
	}
	if e.Last == (Slot{}) {
		e.Entries = -1
		return e, nil
	}
	if _, err := file.ReadAt(e.First[:w], 0); err != nil {
		return Ends{}, fmt.Errorf("mmapfile: reading %s: %w", path, err)
	}
	return e, nil
}

// Entries returns the number of valid entries.
func (f *File) Entries() (int, error) {
	if err := f.rlock(); err != nil {
		return 0, err
	}
	defer f.mu.RUnlock()
	return f.entries, nil
}

// MaxEntries returns the number of slots the file may have: its limit,
// of which Length is allocated now.
func (f *File) MaxEntries() (int, error) {
	if err := f.rlock(); err != nil {
		return 0, err
	}
	defer f.mu.RUnlock()
	return max(f.limit, len(f.buf)) / f.opts.EntrySize, nil
}

// Length returns the file's size in bytes.
func (f *File) Length() (int, error) {
	if err := f.rlock(); err != nil {
		return 0, err
	}
	defer f.mu.RUnlock()
	return len(f.buf), nil
}

// Entry returns a copy of entry i, which must be below Entries.
func (f *File) Entry(i int) (Slot, error) {
	if err := f.rlock(); err != nil {
		return Slot{}, err
	}
	defer f.mu.RUnlock()
	if i < 0 || i >= f.entries {
		return Slot{}, fmt.Errorf("mmapfile: entry %d of %s, which has %d entries", i, f.path, f.entries)
	}
	return f.slotLocked(i), nil
}

// Last returns a copy of the last entry, or false if there is none.
func (f *File) Last() (Slot, bool, error) {
	if err := f.rlock(); err != nil {
		return Slot{}, false, err
	}
	defer f.mu.RUnlock()
	if f.entries == 0 {
		return Slot{}, false, nil
	}
	return f.slotLocked(f.entries - 1), true, nil
}

// Scan calls fn with each slot up to the file's end, valid entries and
// ignored ones alike, in order, until fn returns false. It is for checks
// and dumps.
func (f *File) Scan(fn func(i int, s Slot, valid bool) bool) error {
	if err := f.rlock(); err != nil {
		return err
	}
	defer f.mu.RUnlock()
	for i := range len(f.buf) / f.opts.EntrySize {
		if !fn(i, f.slotLocked(i), i < f.entries) {
			break
		}
	}
	return nil
}

// Check inspects every slot without changing anything. It reports the
// slots a crash left beyond the valid entries, and each valid entry for
// which bad, given the entry and the one before it (zero for slot 0),
// returns a reason. Each problem is a *seglog.CorruptionError whose Offset
// is the slot's byte position.
func (f *File) Check(bad func(i int, cur, prev Slot) string) ([]*seglog.CorruptionError, error) {
	if err := f.rlock(); err != nil {
		return nil, err
	}
	defer f.mu.RUnlock()
	problem := func(slot int, reason string) *seglog.CorruptionError {
		return &seglog.CorruptionError{Path: f.path, Offset: int64(slot * f.opts.EntrySize), Reason: reason,
			Err: seglog.ErrCorruption}
	}
	var out []*seglog.CorruptionError
	var prev Slot
	for i := range f.entries {
		cur := f.slotLocked(i)
		if reason := bad(i, cur, prev); reason != "" {
			out = append(out, problem(i, reason))
		}
		prev = cur
	}
	if o := f.opened; o.Untrimmed() {
		out = append(out, problem(o.Entries, fmt.Sprintf(
			"%d slots after the %d valid entries were left untrimmed (the valid entries end at a %s)",
			o.Slots-o.Entries, o.Entries, o.StopReason)))
	}
	return out, nil
}

// Append stores entry (EntrySize bytes) in the next slot.
func (f *File) Append(entry []byte) error {
	if err := f.wlock(); err != nil {
		return err
	}
	defer f.mu.Unlock()
	return f.appendLocked(entry)
}

// AppendIf stores entry in the next slot if accept, called with the last
// entry (or false if there is none), says so. It lets an index check order
// and append under one lock; accept must not call File's methods. An error
// from accept is returned with the file's path added.
func (f *File) AppendIf(entry []byte, accept func(last Slot, ok bool) (bool, error)) error {
	if err := f.wlock(); err != nil {
		return err
	}
	defer f.mu.Unlock()
	var last Slot
	if f.entries > 0 {
		last = f.slotLocked(f.entries - 1)
	}
	if ok, err := accept(last, f.entries > 0); err != nil {
		return fmt.Errorf("%w in %s", err, f.path)
	} else if !ok {
		return nil
	}
	return f.appendLocked(entry)
}

func (f *File) appendLocked(entry []byte) error {
	if len(entry) != f.opts.EntrySize {
		return fmt.Errorf("mmapfile: entry of %d bytes, want %d", len(entry), f.opts.EntrySize)
	}
	w := f.opts.EntrySize
	if (f.entries+1)*w > max(f.limit, len(f.buf)) {
		return fmt.Errorf("%w: %s has %d entries", ErrFull, f.path, f.entries)
	}
	// The entry's slot and the one after it are allocated before either
	// is touched — the one after left zero marks where the entries end if
	// a crash leaves the file untrimmed. When the disk is full and the
	// entry's own slot is allocated, it is stored all the same: recovery
	// rebuilds a trimmed index into the blocks it has, and the rebuild
	// is done again if a crash cuts it short.
	if need := min(f.limit, (f.entries+2)*w); need > len(f.buf) {
		if err := f.growLocked(need); err != nil && (f.entries+1)*w > len(f.buf) {
			return err
		}
	}
	copy(f.buf[f.entries*f.opts.EntrySize:], entry)
	f.entries++
	f.stored = true
	return nil
}

// Search finds the slot for target in column c (docs/format.md §2.2) and returns it
// with a copy of its entry; the slot is -1 when there is none. It makes no
// system call and does not allocate once the file is open.
func (f *File) Search(c Column, target int64, b Bound) (int, Slot, error) {
	if err := f.rlock(); err != nil {
		return -1, Slot{}, err
	}
	defer f.mu.RUnlock()
	slot := f.searchLocked(c, target, b)
	if slot < 0 {
		return -1, Slot{}, nil
	}
	return slot, f.slotLocked(slot), nil
}

func (f *File) searchLocked(c Column, target int64, b Bound) int {
	n := f.entries
	if n == 0 {
		return -1
	}
	// Targets in the warm tail are found without touching cold pages.
	hot := max(0, n-1-warmBytes/f.opts.EntrySize)
	if f.colLocked(hot, c) < target {
		return f.binarySearchLocked(c, target, b, hot, n-1)
	}
	if f.colLocked(0, c) > target {
		if b == LargestLowerBound {
			return -1
		}
		return 0
	}
	return f.binarySearchLocked(c, target, b, 0, hot)
}

// binarySearchLocked searches [lo, hi] with the upper median, so that
// lo = mid always makes progress.
func (f *File) binarySearchLocked(c Column, target int64, b Bound, lo, hi int) int {
	for lo < hi {
		mid := int(uint(lo+hi+1) >> 1)
		switch v := f.colLocked(mid, c); {
		case v > target:
			hi = mid - 1
		case v < target:
			lo = mid
		default:
			return mid
		}
	}
	if b == LargestLowerBound {
		return lo
	}
	// Kafka returns lo+1 here even when lo, never probed, equals the
	// target (lo = 0, every probe above it); the smallest upper bound is
	// then lo itself.
	if f.colLocked(lo, c) >= target {
		return lo
	}
	if lo == f.entries-1 {
		return -1
	}
	return lo + 1
}

// TruncateAt removes the entries whose column c is at or above target, as
// Kafka's indexes truncate: the last entry ≤ target is kept only if it is
// below it. It is done under one lock, so no append slips in between.
func (f *File) TruncateAt(c Column, target int64) error {
	if err := f.wlock(); err != nil {
		return err
	}
	defer f.mu.Unlock()
	slot := f.searchLocked(c, target, LargestLowerBound)
	keep := slot + 1
	if slot >= 0 && f.colLocked(slot, c) == target {
		keep = slot
	}
	f.truncateLocked(keep)
	return nil
}

// CheckLength reports a length that is not a whole number of entries as a
// *seglog.CorruptionError, as Kafka's sanity checks do.
func (f *File) CheckLength() error {
	length, err := f.Length()
	if err != nil {
		return err
	}
	if length%f.opts.EntrySize != 0 {
		return &seglog.CorruptionError{Path: f.Path(), Offset: int64(length), Err: seglog.ErrCorruption,
			Reason: fmt.Sprintf("length %d is not a multiple of %d", length, f.opts.EntrySize)}
	}
	return nil
}

// TruncateToEntries keeps the first n entries and zeroes the slots after
// them, so that a crash before the file is trimmed cannot bring them back.
func (f *File) TruncateToEntries(n int) error {
	if err := f.wlock(); err != nil {
		return err
	}
	defer f.mu.Unlock()
	f.truncateLocked(max(0, min(n, f.entries)))
	return nil
}

func (f *File) truncateLocked(n int) {
	clear(f.buf[n*f.opts.EntrySize : f.entries*f.opts.EntrySize])
	f.entries = n
	f.stored = true
}

// Resize sets the file's limit to size rounded down to a whole entry: a
// smaller length is cut to it at once, remapping (the entries beyond it are
// dropped); a larger limit is grown into as entries come, each append
// allocating its slot and the one after. It reports false if the limit was
// already that.
func (f *File) Resize(size int) (bool, error) {
	if err := f.wlock(); err != nil {
		return false, err
	}
	defer f.mu.Unlock()
	w := f.opts.EntrySize
	size -= size % w
	changed := size != f.limit
	if size <= len(f.buf) {
		f.limit = size
		cut, err := f.resizeLocked(size)
		return changed || cut, err
	}
	// Growth waits for the next append (which allocates its slot and the
	// one after first): opening a log for appends needs no new disk, so a
	// broker whose disk is full still starts.
	f.limit = size
	return changed, nil
}

// growLocked lengthens the file to at least need bytes: by its length
// (doubling) from a page up to a MiB at a time, never past its limit.
func (f *File) growLocked(need int) error {
	old, w := len(f.buf), f.opts.EntrySize
	// The lengths a file steps through: a page, doubling to a MiB, then
	// a MiB more each time (each rounded down to a whole entry).
	next := firstChunk
	for next-next%w <= old {
		next += min(next, maxChunk)
	}
	size := min(f.limit, max(need, next))
	_, err := f.resizeLocked(size)
	return err
}

// resizeLocked sets the file's length to size rounded down to a whole
// entry and remaps it. A failed growth (a full disk) leaves the file as it
// was, mapped again.
func (f *File) resizeLocked(size int) (bool, error) {
	size -= size % f.opts.EntrySize
	old := len(f.buf)
	if size == old {
		return false, nil
	}
	file, err := f.fsys.OpenFile(f.path, os.O_RDWR, 0)
	if err != nil { // still mapped as it was
		return false, fmt.Errorf("mmapfile: resizing %s to %d bytes: %w", f.path, size, err)
	}
	defer file.Close()
	err = f.m.Unmap() // the mapping is released even when this fails
	f.m, f.buf = nil, nil
	switch {
	case err != nil:
	case size < old:
		err = file.Truncate(int64(size))
	default:
		if err = preallocate(file, int64(old), int64(size-old)); err != nil {
			// Back to what it was (written zeros, where fallocate is not
			// supported, may have lengthened it).
			grow := fmt.Errorf("mmapfile: resizing %s to %d bytes: %w", f.path, size, err)
			if err = file.Truncate(int64(old)); err == nil {
				err = f.mapLocked(file, old)
			}
			if err == nil {
				return false, grow
			}
			err = errors.Join(grow, err)
		}
	}
	if err == nil {
		err = f.mapLocked(file, size)
	}
	if err != nil {
		// The mapping is gone: close, so that the next use reopens the file
		// from what is on disk.
		f.closeFileLocked()
		return false, fmt.Errorf("mmapfile: resizing %s to %d bytes: %w", f.path, size, err)
	}
	f.entries = min(f.entries, size/f.opts.EntrySize)
	f.dirty = true
	return true, nil
}

// TrimToValidSize shrinks the file to its entries.
func (f *File) TrimToValidSize() error {
	if err := f.wlock(); err != nil {
		return err
	}
	defer f.mu.Unlock()
	_, err := f.resizeLocked(f.entries * f.opts.EntrySize)
	if err == nil {
		f.limit = len(f.buf)
	}
	return err
}

// Reset drops every entry and sets the limit back to the maximum size,
// keeping the blocks the file has (a length past the maximum is cut).
func (f *File) Reset() error {
	if err := f.wlock(); err != nil {
		return err
	}
	defer f.mu.Unlock()
	clear(f.buf[:f.entries*f.opts.EntrySize])
	f.entries, f.stored = 0, true
	// The blocks it has are kept (only a length past the maximum is cut):
	// a rebuild in recovery refills them, needing no new space on a full
	// disk.
	if len(f.buf) > f.opts.MaxSize {
		if _, err := f.resizeLocked(f.opts.MaxSize); err != nil {
			return err
		}
	}
	f.limit = f.opts.MaxSize
	return nil
}

// Flush makes the entries durable: msync, and an fdatasync when the
// length changed. A file that is not open has nothing to flush.
func (f *File) Flush() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.state != open || f.opts.ReadOnly {
		return nil
	}
	return f.flushLocked()
}

func (f *File) flushLocked() error {
	if err := f.m.Flush(); err != nil {
		return fmt.Errorf("mmapfile: flushing %s: %w", f.path, err)
	}
	f.stored = false
	if f.dirty {
		file, err := f.fsys.OpenFile(f.path, os.O_RDWR, 0)
		if err == nil {
			err = errors.Join(file.Datasync(), file.Close())
		}
		if err != nil {
			return fmt.Errorf("mmapfile: flushing %s: %w", f.path, err)
		}
		f.dirty = false
	}
	return nil
}

// Close trims the file to its entries, makes durable what changed since
// the last flush (a clean shutdown writes its marker after closing, and
// trusts every file then), and releases the mapping and the descriptor.
// The File may be used again: it reopens on the next use.
func (f *File) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.state != open {
		return nil
	}
	var err error
	if !f.opts.ReadOnly {
		_, err = f.resizeLocked(f.entries * f.opts.EntrySize)
		if err == nil && (f.stored || f.dirty) {
			err = f.flushLocked()
		}
	}
	if f.state == open { // a failed resize has closed it already
		err = errors.Join(err, f.closeFileLocked())
	}
	return err
}

func (f *File) closeFileLocked() error {
	var err error
	if f.m != nil {
		err = f.m.Unmap()
	}
	f.m, f.buf, f.state, f.entries = nil, nil, closed, 0
	return err
}

// Rename moves the file to path (open or not). A file never created is
// only renamed in name.
func (f *File) Rename(path string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.state == deleted {
		return fmt.Errorf("%w: %s", ErrDeleted, f.path)
	}
	if err := f.fsys.Rename(f.path, path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("mmapfile: renaming %s: %w", f.path, err)
	}
	f.path = path
	return nil
}

// Delete closes the file without trimming it and removes it; a missing file
// is not an error. Every later use fails with ErrDeleted.
func (f *File) Delete() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var err error
	if f.state == open {
		err = f.closeFileLocked()
	}
	f.state = deleted
	if rerr := f.fsys.Remove(f.path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
		err = errors.Join(err, rerr)
	}
	return err
}

// Lifecycle is the part of a File an index passes on to its users, by
// embedding: opening, sizing, flushing, closing, renaming and deleting.
// What it returns is public through the index packages' aliases.
type Lifecycle struct{ f *File }

// LifecycleOf returns f's Lifecycle.
func LifecycleOf(f *File) Lifecycle { return Lifecycle{f} }

// Path is the file's path.
func (l Lifecycle) Path() string { return l.f.Path() }

// IsOpen reports whether the file is mapped now.
func (l Lifecycle) IsOpen() bool { return l.f.IsOpen() }

// Open opens (or creates, unless read-only) the file now and reports what
// opening an existing file found; any other use opens it too.
func (l Lifecycle) Open() (Opened, error) { return l.f.Open() }

// Entries is the number of valid entries.
func (l Lifecycle) Entries() (int, error) { return l.f.Entries() }

// MaxEntries is the number of slots the file has now.
func (l Lifecycle) MaxEntries() (int, error) { return l.f.MaxEntries() }

// Length is the file's size in bytes.
func (l Lifecycle) Length() (int, error) { return l.f.Length() }

// Resize sets the file's length to size rounded down to a whole entry,
// keeping the entries that fit; it reports false if the length was
// already that.
func (l Lifecycle) Resize(size int) (bool, error) { return l.f.Resize(size) }

// TrimToValidSize cuts the file to its entries (a sealed segment's index).
func (l Lifecycle) TrimToValidSize() error { return l.f.TrimToValidSize() }

// Reset drops every entry and sets the limit back to the maximum size,
// keeping the blocks the file has.
func (l Lifecycle) Reset() error { return l.f.Reset() }

// Flush makes the entries durable (msync, and an fdatasync when the
// length changed).
func (l Lifecycle) Flush() error { return l.f.Flush() }

// Close trims the file to its entries, makes durable what changed since
// the last flush, and releases the mapping and the descriptor; the next
// use opens it again.
func (l Lifecycle) Close() error { return l.f.Close() }

// Rename moves the file to path.
func (l Lifecycle) Rename(path string) error { return l.f.Rename(path) }

// Delete closes the file without trimming it and removes it (a missing
// file is not an error); every later use fails.
func (l Lifecycle) Delete() error { return l.f.Delete() }
