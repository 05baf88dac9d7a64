package segment

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/logfile"
	"github.com/seglog/seglog/offsetindex"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/timeindex"
	"github.com/seglog/seglog/txnindex"
	"github.com/seglog/seglog/vfs"
)

// Defaults, Kafka's (docs/format.md §6).
const (
	DefaultIndexIntervalBytes = 4096
	DefaultMaxIndexSize       = 10 << 20
	DefaultSegmentBytes       = 1 << 30
	DefaultSegmentMs          = 7 * 24 * 60 * 60 * 1000
)

// IndexEveryAppend, as Options.IndexIntervalBytes, adds an index entry for
// every append after the first: Kafka's index.interval.bytes = 0.
const IndexEveryAppend = -1

// Options configure a segment.
type Options struct {
	// IndexIntervalBytes is how many bytes may be appended after the last
	// index entry before the next append gets one (index.interval.bytes).
	// IndexEveryAppend stands for Kafka's 0. The default is 4096.
	IndexIntervalBytes int
	// MaxIndexSize is the size the offset and time indexes may grow to
	// (segment.index.bytes), a chunk at a time as entries come
	// (docs/format.md §2.1). The default is 10485760.
	MaxIndexSize int
	// SegmentBytes is the size a segment rolls at (segment.bytes), and the
	// size a preallocated .log gets. At most MaxInt32, since positions are
	// 32-bit. The default is 1073741824.
	SegmentBytes int64
	// Preallocate gives a new .log SegmentBytes of real blocks up front
	// (fallocate), tracking its logical size; Seal and Close trim it
	// (preallocate). The default is false.
	Preallocate bool
	// SegmentMs is the age a segment rolls at (segment.ms); it only bounds
	// the jitter here. The default is 604800000 (7 days).
	SegmentMs int64
	// SegmentJitterMs is the largest random amount subtracted from SegmentMs
	// for this segment, drawn once when it is created or opened
	// (segment.jitter.ms). The default is 0.
	SegmentJitterMs int64
	// ReadOnly opens an existing segment without changing any file, for
	// inspection. The default is false.
	ReadOnly bool
	// FileSuffix opens a segment whose files carry a temporary suffix
	// (SwapSuffix, CleanedSuffix, DeletedSuffix). The default is "".
	FileSuffix string
	// Now is the clock. The default is time.Now.
	Now func() time.Time
}

// EnsureDefaults fills zero fields with their defaults.
func (o *Options) EnsureDefaults() {
	if o.IndexIntervalBytes == 0 {
		o.IndexIntervalBytes = DefaultIndexIntervalBytes
	}
	if o.MaxIndexSize == 0 {
		o.MaxIndexSize = DefaultMaxIndexSize
	}
	if o.SegmentBytes == 0 {
		o.SegmentBytes = DefaultSegmentBytes
	}
	if o.SegmentMs == 0 {
		o.SegmentMs = DefaultSegmentMs
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Validate reports an option out of range.
func (o *Options) Validate() error {
	switch {
	case o.IndexIntervalBytes < IndexEveryAppend:
		return fmt.Errorf("segment: index interval %d is negative", o.IndexIntervalBytes)
	case o.MaxIndexSize < timeindex.EntrySize:
		return fmt.Errorf("segment: maximum index size %d holds no entry", o.MaxIndexSize)
	case o.SegmentBytes < record.PrefixSize || o.SegmentBytes > 1<<31-1:
		return fmt.Errorf("segment: segment size %d out of range [%d, %d]", o.SegmentBytes, record.PrefixSize, 1<<31-1)
	case o.SegmentMs <= 0 || o.SegmentJitterMs < 0:
		return fmt.Errorf("segment: segment.ms %d or jitter %d out of range", o.SegmentMs, o.SegmentJitterMs)
	}
	return nil
}

var (
	// ErrOffsetOverflow is returned by Append and Recover for an offset
	// that does not fit relative to the base offset (Kafka's
	// LogSegmentOffsetOverflowException): the segment must be split.
	ErrOffsetOverflow = seglog.NewKafkaError("segment: offset overflows the segment's relative offsets", -1)
	// ErrReadOnly is returned by changes to a segment opened read-only.
	ErrReadOnly = seglog.NewKafkaError("segment: segment is read-only", -1)
	// ErrIndexFull is returned by an append that needs an index entry when
	// an index is full: the segment should have rolled.
	ErrIndexFull = offsetindex.ErrFull
)

// timestampOffset is the largest timestamp seen and the offset it belongs
// to: the last offset of the first batch that reached it.
type timestampOffset struct {
	timestamp, offset int64
}

// Segment is a .log file with its offset, time and transaction indexes.
//
// One writer at a time may change it (Append, TruncateTo, Recover, Seal,
// Close); reads (Read, TranslateOffset, FindOffsetByTimestamp) may run
// concurrently with each other and with appends, and see the size
// published by the last completed append.
type Segment struct {
	fsys vfs.FS
	dir  string
	base int64
	opts Options

	// log is the .log descriptor: opened on first use, closed by Park.
	log    atomic.Pointer[logHandle]
	fileMu sync.Mutex // opening, parking and renaming
	// logPath is the .log's path, which a rename changes under readers.
	logPath    atomic.Pointer[string]
	fileLength int64 // the .log's length when opened
	closed     atomic.Bool
	offsetIdx  *offsetindex.Index
	timeIdx    *timeindex.Index
	txnIdx     *txnindex.Index

	size atomic.Int64 // logical size: the end of the last whole batch
	// endKnown says size is the logical end; an opened .log finds it on
	// first use, under endMu, and tries again after a failed read.
	endKnown atomic.Bool
	endMu    sync.Mutex // one walk to the segment's end at a time (the fields it sets are atomics)
	// endDamaged says the walk to the end stopped at a torn or corrupt
	// batch (see EndIsClean).
	endDamaged atomic.Bool

	// The writer's state.
	iov                      [][]byte // Append's buffers, reused
	suffix                   string
	bytesSinceLastIndexEntry int
	created                  time.Time
	rollJitterMs             int64
	rollingBasedTimestamp    int64 // -1 until known
	rollingBasedLoaded       bool
	// maxSoFar is the largest timestamp and its offset (loaded from the
	// time index the first time): the writer sets it, readers of the
	// largest timestamp (retention, Segments) read it, under tsMu.
	tsMu           sync.Mutex
	maxSoFar       timestampOffset
	maxSoFarLoaded bool
	failed         error // sticky: set when a failed write could not be undone

	closeOnce sync.Once
}

// Create makes a new, empty segment at base offset base in dir. The .log
// must not exist yet; its indexes are created on first use.
func Create(fsys vfs.FS, dir string, base int64, opts Options) (*Segment, error) {
	fsys = vfs.OrOS(fsys)
	s, err := newSegment(fsys, dir, base, opts)
	if err != nil {
		return nil, err
	}
	if opts.ReadOnly {
		return nil, fmt.Errorf("%w: cannot create %s", ErrReadOnly, s.path())
	}
	f, err := fsys.OpenFile(s.path(), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("segment: creating %s: %w", s.path(), err)
	}
	if s.opts.Preallocate {
		if err := preallocate(f, s.opts.SegmentBytes); err != nil {
			f.Close()
			fsys.Remove(s.path())
			return nil, fmt.Errorf("segment: preallocating %s: %w", s.path(), err)
		}
	}
	s.log.Store(&logHandle{f})
	s.endKnown.Store(true) // an empty file ends at 0
	return s, nil
}

// preallocate reserves n bytes from 0, writing zeros where fallocate is not
// supported.
func preallocate(f vfs.File, n int64) error {
	err := f.Preallocate(0, n)
	if !errors.Is(err, vfs.ErrNotSupported) {
		return err
	}
	zeros := make([]byte, min(n, 1<<20))
	for off := int64(0); off < n; off += int64(len(zeros)) {
		if _, err := f.WriteAt(zeros[:min(int64(len(zeros)), n-off)], off); err != nil {
			return err
		}
	}
	return nil
}

// Open opens the existing segment at base offset base in dir. It only
// looks at the file: the .log descriptor and the index mappings are opened
// on first use (and closed again by Park), so that a tablet of thousands of
// segments opens fast and holds descriptors only for those it reads. Its
// size is the end of the last whole batch, found on first use by walking
// the batch headers from the last offset index entry: a preallocated
// .log's zeros, or a partial batch a crash left, are not part of it.
func Open(fsys vfs.FS, dir string, base int64, opts Options) (*Segment, error) {
	fsys = vfs.OrOS(fsys)
	s, err := newSegment(fsys, dir, base, opts)
	if err != nil {
		return nil, err
	}
	info, err := fsys.Stat(s.path())
	if err != nil {
		return nil, fmt.Errorf("segment: opening %s: %w", s.path(), err)
	}
	if info.IsDir() {
		return nil, fmt.Errorf("segment: opening %s: a directory", s.path())
	}
	s.fileLength = info.Size()
	s.size.Store(info.Size())
	s.created = info.ModTime()
	return s, nil
}

// logHandle holds the open .log.
type logHandle struct{ f vfs.File }

// ErrClosed is returned by any use of a closed segment.
var ErrClosed = seglog.NewKafkaError("segment: closed", -1)

// file returns the .log descriptor, opening it if needed.
func (s *Segment) file() (vfs.File, error) {
	if h := s.log.Load(); h != nil {
		return h.f, nil
	}
	s.fileMu.Lock()
	defer s.fileMu.Unlock()
	if h := s.log.Load(); h != nil {
		return h.f, nil
	}
	if s.closed.Load() {
		return nil, fmt.Errorf("%w: %s", ErrClosed, s.path())
	}
	flag := os.O_RDWR
	if s.opts.ReadOnly {
		flag = os.O_RDONLY
	}
	f, err := s.fsys.OpenFile(s.path(), flag, 0)
	if err != nil {
		return nil, fmt.Errorf("segment: opening %s: %w", s.path(), err)
	}
	s.log.Store(&logHandle{f})
	return f, nil
}

// Park closes the .log descriptor and the index mappings; the next use
// opens them again. It is for an idle segment that is not being written:
// no call and no Slice of it may be in flight.
func (s *Segment) Park() error {
	s.fileMu.Lock()
	h := s.log.Swap(nil)
	s.fileMu.Unlock()
	var err error
	if h != nil {
		err = h.f.Close()
	}
	return errors.Join(err, s.offsetIdx.Close(), s.timeIdx.Close(), s.txnIdx.Close())
}

// IsOpen reports whether the segment holds a descriptor or a mapping.
func (s *Segment) IsOpen() bool {
	return s.log.Load() != nil || s.offsetIdx.IsOpen() || s.timeIdx.IsOpen()
}

// OpenFiles returns how many descriptors the segment holds: the .log and
// the .txnindex when open. The offset and time indexes hold mappings only;
// their descriptors are closed once mapped.
func (s *Segment) OpenFiles() int {
	n := 0
	for _, open := range []bool{s.log.Load() != nil, s.txnIdx.IsOpen()} {
		if open {
			n++
		}
	}
	return n
}

// FileLength returns the .log's length when the segment was opened (0 for
// a created one), which may include a preallocated or torn tail.
func (s *Segment) FileLength() int64 { return s.fileLength }

func (s *Segment) path() string { return *s.logPath.Load() }

func (s *Segment) setLogPath(p string) { s.logPath.Store(&p) }

func newSegment(fsys vfs.FS, dir string, base int64, opts Options) (*Segment, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if base < 0 {
		return nil, fmt.Errorf("segment: negative base offset %d", base)
	}
	path := func(k logfile.Kind) string {
		return filepath.Join(dir, logfile.FilenameWithSuffix(base, k, opts.FileSuffix))
	}
	s := &Segment{fsys: fsys, dir: dir, base: base, opts: opts, created: opts.Now(), suffix: opts.FileSuffix,
		rollingBasedTimestamp: record.NoTimestamp}
	s.setLogPath(path(logfile.Log))
	var err error
	io := offsetindex.Options{MaxIndexSize: opts.MaxIndexSize, ReadOnly: opts.ReadOnly}
	if s.offsetIdx, err = offsetindex.Open(fsys, path(logfile.Index), base, io); err != nil {
		return nil, err
	}
	ti := timeindex.Options{MaxIndexSize: opts.MaxIndexSize, ReadOnly: opts.ReadOnly}
	if s.timeIdx, err = timeindex.Open(fsys, path(logfile.TimeIndex), base, ti); err != nil {
		return nil, err
	}
	s.txnIdx = txnindex.Open(fsys, path(logfile.TxnIndex), base, txnindex.Options{ReadOnly: opts.ReadOnly})
	if j := min(opts.SegmentJitterMs, opts.SegmentMs); j > 0 {
		s.rollJitterMs = rand.Int64N(j)
	}
	return s, nil
}

// Failed returns the error the segment failed with (a write it could not
// undo), or nil. A failed segment refuses every change. Like the other
// changes, it is for the writer.
func (s *Segment) Failed() error { return s.failed }

// BaseOffset returns the offset the segment starts at.
func (s *Segment) BaseOffset() int64 { return s.base }

// Size returns the segment's logical size in bytes. If the end of an
// opened .log cannot be read, it returns the file's size; the operations
// that need the end report the failure.
func (s *Segment) Size() int64 {
	if n, err := s.end(); err == nil {
		return n
	}
	return s.size.Load()
}

// end returns the logical size, finding it first for an opened segment.
func (s *Segment) end() (int64, error) {
	if s.endKnown.Load() {
		return s.size.Load(), nil
	}
	s.endMu.Lock()
	defer s.endMu.Unlock()
	if s.endKnown.Load() {
		return s.size.Load(), nil
	}
	size, err := s.logicalEnd(s.size.Load())
	if err != nil {
		return 0, fmt.Errorf("segment: finding the end of %s: %w", s.path(), err)
	}
	s.size.Store(size)
	s.endKnown.Store(true)
	return size, nil
}

// Dir returns the directory holding the segment's files.
func (s *Segment) Dir() string { return s.dir }

// LogPath returns the .log file's path.
func (s *Segment) LogPath() string { return s.path() }

// OffsetIndex, TimeIndex and TxnIndex return the segment's indexes.
func (s *Segment) offsetIndex() *offsetindex.Index { return s.offsetIdx }

// timeIndex returns the segment's time index.
func (s *Segment) timeIndex() *timeindex.Index { return s.timeIdx }

// txnIndex returns the segment's transaction index.
func (s *Segment) txnIndex() *txnindex.Index { return s.txnIdx }

// RollJitterMs returns the jitter drawn for this segment.
func (s *Segment) RollJitterMs() int64 { return s.rollJitterMs }

// Created returns when the segment was created (for an opened segment, the
// .log's modification time).
func (s *Segment) Created() time.Time { return s.created }

func (s *Segment) writable() error {
	if s.opts.ReadOnly {
		return fmt.Errorf("%w: %s", ErrReadOnly, s.path())
	}
	return s.failed
}

// maxTimestampSoFar returns the largest timestamp and its offset, loading
// them from the time index's last entry the first time.
func (s *Segment) maxTimestampSoFar() (timestampOffset, error) {
	s.tsMu.Lock()
	defer s.tsMu.Unlock()
	if !s.maxSoFarLoaded {
		e, err := s.timeIdx.LastEntry()
		if err != nil {
			return timestampOffset{}, err
		}
		s.maxSoFar, s.maxSoFarLoaded = timestampOffset{e.Timestamp, e.Offset}, true
	}
	return s.maxSoFar, nil
}

// LargestTimestamp returns the largest timestamp in the segment, or -1 if
// none is known (retention then uses the file's modification time).
func (s *Segment) LargestTimestamp() (int64, error) {
	m, err := s.maxTimestampSoFar()
	return m.timestamp, err
}

// Flush makes everything appended durable: fdatasync of the .log (enough:
// the size is synced with the data), msync of both indexes, fsync of the
// transaction index.
func (s *Segment) Flush() error {
	if s.opts.ReadOnly {
		return nil
	}
	f, err := s.file() // a parked .log may hold unsynced pages: fsync reaches them through any descriptor
	if err == nil {
		err = f.Datasync()
	}
	if err != nil {
		return fmt.Errorf("segment: flushing %s: %w", s.path(), err)
	}
	return errors.Join(s.offsetIdx.Flush(), s.timeIdx.Flush(), s.txnIdx.Flush())
}

// FlushLog makes the .log's bytes durable (fdatasync), not the indexes:
// enough for the records to survive a crash, after which recovery rebuilds
// the indexes from them.
func (s *Segment) FlushLog() error {
	if s.opts.ReadOnly {
		return nil
	}
	f, err := s.file()
	if err == nil {
		err = f.Datasync()
	}
	if err != nil {
		return fmt.Errorf("segment: flushing %s: %w", s.path(), err)
	}
	return nil
}

// Seal makes the segment inactive after a roll: the final time index entry
// (the largest timestamp, in the kept slot), both indexes trimmed to their
// entries and flushed, and a preallocated .log trimmed to its logical size.
func (s *Segment) Seal() error {
	if err := s.writable(); err != nil {
		return err
	}
	if err := s.appendFinalTimeEntry(); err != nil {
		return err
	}
	if err := s.offsetIdx.TrimToValidSize(); err != nil {
		return err
	}
	if err := s.timeIdx.TrimToValidSize(); err != nil {
		return err
	}
	// The final time entry is written now, possibly after the flush that
	// took the recovery point past this segment's end; nothing would flush
	// it later, and recovery does not look below the recovery point. So
	// the indexes are made durable here (two small fdatasyncs per roll).
	if err := errors.Join(s.offsetIdx.Flush(), s.timeIdx.Flush()); err != nil {
		return err
	}
	return s.trimLog()
}

func (s *Segment) appendFinalTimeEntry() error {
	m, err := s.maxTimestampSoFar()
	if err != nil {
		return err
	}
	return s.timeIdx.MaybeAppend(m.timestamp, m.offset, true)
}

// trimLog truncates the .log to its logical size if it is longer.
func (s *Segment) trimLog() error {
	f, err := s.file()
	if err != nil {
		return err
	}
	length, err := f.Size()
	if err != nil {
		return err
	}
	size, err := s.end()
	if err != nil {
		return err
	}
	if length > size {
		if err := f.Truncate(size); err != nil {
			return fmt.Errorf("segment: trimming %s: %w", s.path(), err)
		}
	}
	return nil
}

// Close writes the final time index entry if the largest timestamp is
// known, trims and syncs the .log, and closes the indexes, each trimmed
// and synced if it changed since its last flush: what a closed segment
// holds is durable. It returns the errors; the segment is closed even
// then.
func (s *Segment) Close() error {
	var err error
	s.closeOnce.Do(func() {
		// A parked segment was not written since: only its indexes may be
		// open (for reads), and they close below.
		if h := s.log.Load(); h != nil && s.writable() == nil {
			s.tsMu.Lock()
			loaded := s.maxSoFarLoaded
			s.tsMu.Unlock()
			if loaded {
				err = s.appendFinalTimeEntry()
			}
			// before the indexes close: finding the end reads the offset index
			err = errors.Join(err, s.trimLog(), h.f.Datasync())
		}
		s.closed.Store(true)
		err = errors.Join(err, s.offsetIdx.Close(), s.timeIdx.Close(), s.closeLog(), s.txnIdx.Close())
	})
	return err
}

// closeLog closes the .log descriptor if it is open.
func (s *Segment) closeLog() error {
	s.fileMu.Lock()
	h := s.log.Swap(nil)
	s.fileMu.Unlock()
	if h == nil {
		return nil
	}
	return h.f.Close()
}

// ChangeSuffix renames every file of the segment from oldSuffix to
// newSuffix (DeletedSuffix, CleanedSuffix, SwapSuffix or ""). Index files
// that do not exist are skipped.
func (s *Segment) ChangeSuffix(oldSuffix, newSuffix string) error {
	if s.opts.ReadOnly {
		return fmt.Errorf("%w: %s", ErrReadOnly, s.path())
	}
	if oldSuffix != s.suffix {
		return fmt.Errorf("segment: %s has suffix %q, not %q", s.path(), s.suffix, oldSuffix)
	}
	path := func(k logfile.Kind) string {
		return filepath.Join(s.dir, logfile.FilenameWithSuffix(s.base, k, newSuffix))
	}
	s.fileMu.Lock() // a parked segment must not reopen the old name meanwhile
	err := s.fsys.Rename(s.path(), path(logfile.Log))
	if err == nil {
		s.setLogPath(path(logfile.Log))
	}
	s.fileMu.Unlock()
	if err != nil {
		return fmt.Errorf("segment: renaming %s: %w", s.path(), err)
	}
	s.suffix = newSuffix
	return errors.Join(s.offsetIdx.Rename(path(logfile.Index)), s.timeIdx.Rename(path(logfile.TimeIndex)), s.txnIdx.Rename(path(logfile.TxnIndex)))
}

// Delete renames every file of the segment with DeletedSuffix: the first
// step of deleting it. Its readers may go on; RemoveFiles unlinks the files
// once they are gone.
func (s *Segment) Delete() error { return s.ChangeSuffix(s.suffix, logfile.DeletedSuffix) }

// RemoveFiles closes the segment without trimming anything and unlinks all
// its files. Missing files are not an error.
func (s *Segment) RemoveFiles() error {
	var err error
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		err = s.closeLog()
	})
	err = errors.Join(err, s.offsetIdx.Delete(), s.timeIdx.Delete(), s.txnIdx.Delete())
	if rerr := s.fsys.Remove(s.path()); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
		err = errors.Join(err, rerr)
	}
	return err
}

// setMaxSoFar sets the largest timestamp and its offset.
func (s *Segment) setMaxSoFar(m timestampOffset) {
	s.tsMu.Lock()
	s.maxSoFar, s.maxSoFarLoaded = m, true
	s.tsMu.Unlock()
}
