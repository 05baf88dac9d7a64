// Package txnindex is a segment's .txnindex file: the transactions aborted
// in the segment, in the order of their markers (docs/format.md §2.5). It is a plain
// file, appended to, created on the first append.
//
//	entry (34 bytes, big-endian):
//	┌─────────┬────────────┬─────────────┬────────────┬──────────────────┐
//	│ version │ producerId │ firstOffset │ lastOffset │ lastStableOffset │
//	│ int16 0 │ int64      │ int64       │ int64      │ int64            │
//	└─────────┴────────────┴─────────────┴────────────┴──────────────────┘
//
// lastOffset is the offset of the ABORT marker; lastStableOffset is the
// partition's LSO when the marker was written. A partial entry at the end
// (a torn append) is ignored.
package txnindex

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"

	"github.com/seglog/seglog/record"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/vfs"
)

// Entry layout: part of the on-disk format; never change.
const (
	// EntrySize is the size of an entry.
	EntrySize = record.AbortedTxnSize
	// Version is the only entry version.
	Version = record.AbortedTxnVersion
)

var (
	// ErrLastOffsetNotIncreasing is returned by Append for an entry whose
	// last offset is not above the previous entry's.
	ErrLastOffsetNotIncreasing = seglog.NewKafkaError("txnindex: last offset does not increase", -1)
	// ErrDeleted is returned by any use of a deleted index.
	ErrDeleted = seglog.NewKafkaError("txnindex: index was deleted", -1)
	// ErrReadOnly is returned by changes to an index opened read-only.
	ErrReadOnly = seglog.NewKafkaError("txnindex: index is read-only", -1)
)

// parse decodes the entry at the start of b, which holds at least
// EntrySize bytes, and its version.
func parse(b []byte) (record.AbortedTxn, int8) {
	t, v, _ := record.ParseAbortedTxn(b)
	return t, v
}

// Options configure an Index.
type Options struct {
	// ReadOnly opens an existing file without changing it. The default is
	// false.
	ReadOnly bool
}

// Index is a transaction index. It is safe for concurrent use.
type Index struct {
	fsys vfs.FS
	base int64
	opts Options

	mu         sync.Mutex // guards the fields below
	path       string
	f          vfs.File // nil until opened
	size       int64
	lastOffset int64 // of the last entry; valid if hasLast
	hasLast    bool
	loaded     bool // lastOffset reflects the file
	deleted    bool
	unsynced   bool // changed since the last flush
}

// Open returns the transaction index of the segment at base offset base,
// stored at path. Nothing is opened or created until it is used.
func Open(fsys vfs.FS, path string, base int64, opts Options) *Index {
	fsys = vfs.OrOS(fsys)
	return &Index{fsys: fsys, base: base, opts: opts, path: path}
}

// Path returns the file's path.
func (x *Index) Path() string {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.path
}

// BaseOffset returns the segment's base offset.
func (x *Index) BaseOffset() int64 { return x.base }

// openLocked opens the file if it exists (or create is set); it leaves x.f
// nil for a missing file.
func (x *Index) openLocked(create bool) error {
	if x.deleted {
		return fmt.Errorf("%w: %s", ErrDeleted, x.path)
	}
	if x.f != nil {
		return nil
	}
	flag := os.O_RDWR
	if x.opts.ReadOnly {
		flag = os.O_RDONLY
	}
	if create {
		flag |= os.O_CREATE
	}
	f, err := x.fsys.OpenFile(x.path, flag, 0o644)
	if errors.Is(err, fs.ErrNotExist) && !create {
		return nil
	}
	if err != nil {
		return fmt.Errorf("txnindex: opening %s: %w", x.path, err)
	}
	size, err := f.Size()
	if err != nil {
		f.Close()
		return fmt.Errorf("txnindex: opening %s: %w", x.path, err)
	}
	x.f, x.size = f, size
	return nil
}

// Append adds an aborted transaction. Its last offset must be above the
// previous entry's, including entries written before a reopen.
func (x *Index) Append(t record.AbortedTxn) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.opts.ReadOnly {
		return fmt.Errorf("%w: %s", ErrReadOnly, x.path)
	}
	if err := x.openLocked(true); err != nil {
		return err
	}
	if !x.loaded {
		if err := x.loadLastLocked(); err != nil {
			return err
		}
	}
	if x.hasLast && t.LastOffset <= x.lastOffset {
		return fmt.Errorf("%w: %d after %d in %s", ErrLastOffsetNotIncreasing, t.LastOffset, x.lastOffset, x.path)
	}
	at := x.size - x.size%EntrySize // overwrite a torn partial entry
	var buf [EntrySize]byte
	if _, err := x.f.WriteAt(t.AppendTo(buf[:0]), at); err != nil {
		return fmt.Errorf("txnindex: appending to %s: %w", x.path, err)
	}
	x.size, x.lastOffset, x.hasLast, x.unsynced = at+EntrySize, t.LastOffset, true, true
	return nil
}

// loadLastLocked reads the last whole entry's last offset.
func (x *Index) loadLastLocked() error {
	x.loaded = true
	n := x.size / EntrySize
	if n == 0 {
		return nil
	}
	var buf [EntrySize]byte
	if _, err := x.f.ReadAt(buf[:], (n-1)*EntrySize); err != nil {
		return fmt.Errorf("txnindex: reading %s: %w", x.path, err)
	}
	t, _ := parse(buf[:])
	x.lastOffset, x.hasLast = t.LastOffset, true
	return nil
}

// Scan calls fn with every whole entry and its byte position, in order,
// until fn returns false. An entry of a version other than 0 stops the scan
// with a *seglog.CorruptionError. fn runs under the index's lock and must
// not call its methods.
func (x *Index) Scan(fn func(t record.AbortedTxn, pos int64) bool) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.scanLocked(fn)
}

func (x *Index) scanLocked(fn func(t record.AbortedTxn, pos int64) bool) error {
	if err := x.openLocked(false); err != nil || x.f == nil {
		return err
	}
	buf := make([]byte, 64*EntrySize)
	for pos := int64(0); pos+EntrySize <= x.size; {
		n, err := x.f.ReadAt(buf[:min(int64(len(buf)), x.size-pos)], pos)
		if err != nil && !(errors.Is(err, io.EOF) && n > 0) {
			return fmt.Errorf("txnindex: reading %s: %w", x.path, err)
		}
		for off := 0; off+EntrySize <= n; off += EntrySize {
			t, version := parse(buf[off:])
			if version != Version {
				return &seglog.CorruptionError{Path: x.path, Offset: pos + int64(off), Err: seglog.ErrCorruption,
					Reason: fmt.Sprintf("aborted transaction entry of version %d", version)}
			}
			if !fn(t, pos+int64(off)) {
				return nil
			}
		}
		pos += int64(n - n%EntrySize)
		if n < EntrySize {
			break
		}
	}
	return nil
}

// All returns every entry.
func (x *Index) All() ([]record.AbortedTxn, error) {
	var out []record.AbortedTxn
	err := x.Scan(func(t record.AbortedTxn, _ int64) bool { out = append(out, t); return true })
	return out, err
}

// SearchResult is the answer of CollectAbortedTxns.
type SearchResult struct {
	// Txns are the aborted transactions overlapping the range.
	Txns []record.AbortedTxn
	// Complete reports that no later segment can hold another one: an entry
	// had a last stable offset at or beyond the upper bound.
	Complete bool
}

// CollectAbortedTxns returns the entries with LastOffset ≥ fetchOffset and
// FirstOffset < upperBound. The result is complete as soon as an entry has
// LastStableOffset ≥ upperBound; otherwise the caller goes on with the next
// segment.
//
// Beyond Kafka, an entry that cannot be right — its ABORT marker (its last
// offset) outside the segment, [base, segmentEnd), or its first offset
// after its last — is a *seglog.CorruptionError at its position rather
// than a range of records silently hidden from read-committed consumers.
// segmentEnd is the offset after the segment's last, or -1 if unknown.
func (x *Index) CollectAbortedTxns(fetchOffset, upperBound, segmentEnd int64) (SearchResult, error) {
	var r SearchResult
	var bad error
	err := x.Scan(func(t record.AbortedTxn, pos int64) bool {
		if t.LastOffset < x.base || (segmentEnd >= 0 && t.LastOffset >= segmentEnd) || t.FirstOffset < 0 ||
			t.FirstOffset > t.LastOffset {
			bad = &seglog.CorruptionError{Path: x.path, Offset: pos, Err: seglog.ErrCorruption, Reason: fmt.Sprintf(
				"aborted transaction of producer %d from offset %d to %d cannot be in the segment of offsets %d to %d",
				t.ProducerID, t.FirstOffset, t.LastOffset, x.base, segmentEnd-1)}
			return false
		}
		if t.LastOffset >= fetchOffset && t.FirstOffset < upperBound {
			r.Txns = append(r.Txns, t)
		}
		if t.LastStableOffset >= upperBound {
			r.Complete = true
			return false
		}
		return true
	})
	if err == nil {
		err = bad
	}
	return r, err
}

// TruncateTo removes the entries from the first one whose last offset is
// at or beyond offset.
func (x *Index) TruncateTo(offset int64) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.opts.ReadOnly {
		return fmt.Errorf("%w: %s", ErrReadOnly, x.path)
	}
	cut, prevLast, hasPrev := int64(-1), int64(0), false
	err := x.scanLocked(func(t record.AbortedTxn, pos int64) bool {
		if t.LastOffset >= offset {
			cut = pos
			return false
		}
		prevLast, hasPrev = t.LastOffset, true
		return true
	})
	if err != nil || cut < 0 {
		return err
	}
	if err := x.f.Truncate(cut); err != nil {
		return fmt.Errorf("txnindex: truncating %s: %w", x.path, err)
	}
	x.size, x.lastOffset, x.hasLast, x.loaded, x.unsynced = cut, prevLast, hasPrev, true, true
	return nil
}

// Reset empties the index.
func (x *Index) Reset() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.opts.ReadOnly {
		return fmt.Errorf("%w: %s", ErrReadOnly, x.path)
	}
	if err := x.openLocked(false); err != nil || x.f == nil {
		x.hasLast, x.loaded = false, true
		return err
	}
	if err := x.f.Truncate(0); err != nil {
		return fmt.Errorf("txnindex: resetting %s: %w", x.path, err)
	}
	x.size, x.hasLast, x.loaded, x.unsynced = 0, false, true, true
	return nil
}

// SanityCheck fails with a *seglog.CorruptionError if an entry ends below
// the segment's base offset (or has an unknown version).
func (x *Index) SanityCheck() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	var bad error
	err := x.scanLocked(func(t record.AbortedTxn, pos int64) bool {
		if t.LastOffset < x.base {
			bad = &seglog.CorruptionError{Path: x.path, Offset: pos, Err: seglog.ErrCorruption,
				Reason: fmt.Sprintf("last offset %d of an aborted transaction is below the base offset %d", t.LastOffset, x.base)}
			return false
		}
		return true
	})
	return errors.Join(err, bad)
}

// Size returns the file's size, 0 if it does not exist.
func (x *Index) Size() (int64, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := x.openLocked(false); err != nil {
		return 0, err
	}
	return x.size, nil
}

// Flush makes the entries durable (fsync).
func (x *Index) Flush() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.f == nil || x.opts.ReadOnly {
		return nil
	}
	return x.syncLocked()
}

func (x *Index) syncLocked() error {
	if err := x.f.Sync(); err != nil {
		return fmt.Errorf("txnindex: flushing %s: %w", x.path, err)
	}
	x.unsynced = false
	return nil
}

// IsOpen reports whether the index holds a descriptor.
func (x *Index) IsOpen() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.f != nil
}

// Close releases the descriptor, first making durable what changed since
// the last flush. The index may be used again.
func (x *Index) Close() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.f == nil {
		return nil
	}
	var err error
	if x.unsynced && !x.opts.ReadOnly {
		err = x.syncLocked()
	}
	err = errors.Join(err, x.f.Close())
	x.f = nil
	return err
}

// Rename moves the file to path; a missing file is only renamed in name.
func (x *Index) Rename(path string) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := x.fsys.Rename(x.path, path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("txnindex: renaming %s: %w", x.path, err)
	}
	x.path = path
	return nil
}

// Delete closes and removes the file; a missing file is not an error.
func (x *Index) Delete() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	var err error
	if x.f != nil {
		err = x.f.Close()
		x.f = nil
	}
	x.deleted = true
	if rerr := x.fsys.Remove(x.path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
		err = errors.Join(err, rerr)
	}
	return err
}

// Check inspects every entry without changing anything: a last offset below
// the base or not above the previous entry's, a first offset after the
// last, a last stable offset beyond the marker, an unknown version, and a
// partial entry at the end. Each problem is a *seglog.CorruptionError at
// the entry's byte position.
func (x *Index) Check() ([]*seglog.CorruptionError, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []*seglog.CorruptionError
	problem := func(pos int64, format string, args ...any) {
		out = append(out, &seglog.CorruptionError{Path: x.path, Offset: pos, Err: seglog.ErrCorruption,
			Reason: fmt.Sprintf(format, args...)})
	}
	var prev record.AbortedTxn
	err := x.scanLocked(func(t record.AbortedTxn, pos int64) bool {
		switch {
		case t.LastOffset < x.base:
			problem(pos, "last offset %d is below the base offset %d", t.LastOffset, x.base)
		case pos > 0 && t.LastOffset <= prev.LastOffset:
			problem(pos, "last offset %d does not increase (previous %d)", t.LastOffset, prev.LastOffset)
		case t.FirstOffset > t.LastOffset:
			problem(pos, "first offset %d is after the last offset %d", t.FirstOffset, t.LastOffset)
		case t.LastStableOffset > t.LastOffset+1:
			problem(pos, "last stable offset %d is beyond the marker at %d", t.LastStableOffset, t.LastOffset)
		}
		prev = t
		return true
	})
	var ce *seglog.CorruptionError
	if errors.As(err, &ce) {
		out, err = append(out, ce), nil
	}
	if err == nil && x.f != nil && x.size%EntrySize != 0 {
		problem(x.size-x.size%EntrySize, "a partial entry of %d bytes at the end", x.size%EntrySize)
	}
	return out, err
}
