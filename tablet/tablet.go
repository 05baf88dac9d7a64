package tablet

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/btree"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/internal/vfs"
	"github.com/seglog/seglog/leaderepoch"
	"github.com/seglog/seglog/recovery"
	"github.com/seglog/seglog/segment"
	"github.com/seglog/seglog/writerstate"
)

// Options are a tablet's settings that are not topic configs.
type Options struct {
	// ManualHighWatermark leaves the high watermark to SetHighWatermark,
	// for an embedder that replicates. Otherwise it follows the log end
	// after every append, as in Kafka with one replica. The default is
	// false.
	ManualHighWatermark bool
	// Now is the clock. The default is time.Now.
	Now func() time.Time
	// Logger receives what the tablet does that nobody asked for (rolls,
	// deletions, a failure). The default is slog.Default().
	Logger *slog.Logger
	// WriterState configures the writer state (producer expiry). Its
	// default is writerstate's.
	WriterState writerstate.Options
	// Scheduler runs delayed work (unlinking deleted segment files after
	// file.delete.delay.ms). The default runs it with time.AfterFunc.
	Scheduler Scheduler
}

// Scheduler runs fn after delay. The Manager provides one that it can
// stop and drain on Close.
type Scheduler interface {
	After(delay time.Duration, fn func())
}

type afterFunc struct{}

func (afterFunc) After(d time.Duration, fn func()) { time.AfterFunc(d, fn) }

// EnsureDefaults fills zero fields with their defaults.
func (o *Options) EnsureDefaults() {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Scheduler == nil {
		o.Scheduler = afterFunc{}
	}
	o.WriterState.EnsureDefaults()
	if o.WriterState.Now == nil {
		o.WriterState.Now = o.Now
	}
}

var (
	// ErrClosed is returned by any use of a closed tablet.
	ErrClosed = errors.New("tablet: closed")
	// ErrOffsetOutOfRange is returned by a read of an offset outside
	// [log start, log end].
	ErrOffsetOutOfRange = errors.New("tablet: offset out of range")
	// ErrRecordBatchTooLarge is returned by an append larger than a
	// segment (Kafka's RecordBatchTooLargeException).
	ErrRecordBatchTooLarge = errors.New("tablet: record batch too large for a segment")
)

// seg is a segment of the tablet with its readers counted: the tablet
// holds one reference while the segment is live, each read one more. When
// the last reference goes, the finalizer set at removal closes the files.
type seg struct {
	*segment.Segment
	base int64 // the tree's key
	refs atomic.Int64
	// next is the offset after the segment's last batch, once sealed; -1
	// while it is active.
	next atomic.Int64
	// dirty reports bytes appended since the last flush.
	dirty atomic.Bool

	finalMu   sync.Mutex
	finalizer func()
}

func newSeg(s *segment.Segment) *seg {
	g := &seg{Segment: s, base: s.BaseOffset()}
	g.refs.Store(1)
	g.next.Store(-1)
	return g
}

// acquire takes a reference, or reports false if the segment is gone.
func (g *seg) acquire() bool {
	for {
		r := g.refs.Load()
		if r <= 0 {
			return false
		}
		if g.refs.CompareAndSwap(r, r+1) {
			return true
		}
	}
}

// release drops a reference; the last one runs the finalizer.
func (g *seg) release() {
	if g.refs.Add(-1) == 0 {
		g.finalMu.Lock()
		f := g.finalizer
		g.finalMu.Unlock()
		if f != nil {
			f()
		}
	}
}

// retire drops the tablet's reference to a segment being removed. If no
// read holds it, it runs now and its error is returned; otherwise the last
// read to release it runs it (and an error goes to the log).
func (g *seg) retire(now func() error, log func(error)) error {
	g.finalMu.Lock()
	g.finalizer = func() {
		if err := now(); err != nil {
			log(err)
		}
	}
	g.finalMu.Unlock()
	if g.refs.Add(-1) == 0 {
		return now()
	}
	return nil
}

func lessSeg(a, b *seg) bool { return a.base < b.base }

// floorSeg returns the segment holding offset o: the last with a base at
// or below it, or nil.
func floorSeg(tr *btree.BTreeG[*seg], o int64) *seg {
	var out *seg
	tr.DescendLessOrEqual(&seg{base: o}, func(g *seg) bool { out = g; return false })
	return out
}

// mark is an offset and where it lies: the start position, in the segment
// at base, of the batch that begins there (or the segment's end).
type mark struct {
	offset, base, pos int64
}

// view is what readers see: the segments and the offsets, published
// together after every change. The tree is a copy-on-write clone that no
// writer changes once published.
type view struct {
	segs          *btree.BTreeG[*seg]
	logStart      int64
	localStart    int64
	recoveryPoint int64
	leo, hw, lso  mark
}

// Tablet is one partition log: a directory of segments with its writer
// state and leader epochs. Appends and changes are serialized by one
// writer lock; reads take a published view and never wait for a write.
type Tablet struct {
	fsys vfs.FS
	dir  string
	tp   checkpoint.TopicPartition
	opts Options

	pub struct {
		sync.RWMutex
		v view
	}

	mu struct {
		sync.Mutex
		cfg    Config
		segs   *btree.BTreeG[*seg] // the writer's tree; cloned into the view
		active *seg
		state  *writerstate.State
		epochs *leaderepoch.Cache
		epoch  int32 // stamped on appended batches
		failed error
		closed bool
		// truncations counts TruncateTo and TruncateFullyAndStartAt calls:
		// a flush that overlaps one does not move the recovery point.
		truncations int64
		// snapshots are writer-state snapshots taken at rolls and not yet
		// synced.
		snapshots []int64
	}

	flush       flusher
	lastFlushMs atomic.Int64   // when the last flush ended, for flush.ms
	bg          sync.WaitGroup // background flushes after rolls
}

// Open wraps a tablet that recovery loaded (recovery.Load or LoadTablet);
// the tablet takes over its segments, writer state and epoch cache. cfg
// is the tablet's configuration (ReadConfig gives the one kept in its
// directory).
func Open(fsys vfs.FS, r *recovery.Tablet, cfg Config, opts Options) (*Tablet, error) {
	opts.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	t := &Tablet{fsys: fsys, dir: r.Dir, tp: r.TopicPartition, opts: opts}
	t.flush.cond = sync.NewCond(&t.flush.mu)
	t.mu.cfg = cfg
	t.mu.segs = btree.NewG(8, lessSeg)
	for i, s := range r.Segments {
		g := newSeg(s)
		if i < len(r.Segments)-1 {
			next, err := s.ReadNextOffset()
			if err != nil {
				return nil, err
			}
			g.next.Store(next)
		}
		t.mu.segs.ReplaceOrInsert(g)
		t.mu.active = g
	}
	t.mu.state, t.mu.epochs = r.State, r.Epochs
	if e, ok := r.Epochs.LatestEpoch(); ok {
		t.mu.epoch = e
	}
	pos := t.mu.active.Size()
	end := mark{offset: r.LogEndOffset, base: t.mu.active.BaseOffset(), pos: pos}
	v := view{logStart: r.LogStartOffset, localStart: r.LogStartOffset, recoveryPoint: r.RecoveryPoint, leo: end, hw: end}
	t.flush.flushed = r.RecoveryPoint
	t.lastFlushMs.Store(opts.Now().UnixMilli())
	t.mu.Lock()
	v.lso = t.lsoMarkLocked(v.hw, v.logStart)
	t.publishLocked(v)
	t.mu.Unlock()
	return t, nil
}

// ReadConfig reads the config kept in a tablet directory (ConfigFile),
// over the defaults.
func ReadConfig(fsys vfs.FS, dir string) (Config, error) {
	return readConfig(fsys, filepath.Join(dir, ConfigFile))
}

// Dir returns the tablet's directory.
func (t *Tablet) Dir() string { return t.dir }

// TopicPartition returns the tablet's topic and partition.
func (t *Tablet) TopicPartition() checkpoint.TopicPartition { return t.tp }

// Config returns the tablet's configuration.
func (t *Tablet) Config() Config {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.cfg
}

// SetConfig changes the configuration and keeps it in the tablet's
// directory. It applies to segments created from now on, and to rolls,
// retention and flushes at once.
func (t *Tablet) SetConfig(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.usableLocked(); err != nil {
		return err
	}
	if err := writeConfig(t.fsys, filepath.Join(t.dir, ConfigFile), cfg); err != nil {
		return err
	}
	t.mu.cfg = cfg
	return nil
}

// Offsets are a tablet's offsets (DESIGN section 4).
type Offsets struct {
	LogStartOffset      int64 `json:"logStartOffset"`
	LocalLogStartOffset int64 `json:"localLogStartOffset"`
	HighWatermark       int64 `json:"highWatermark"`
	LastStableOffset    int64 `json:"lastStableOffset"`
	LogEndOffset        int64 `json:"logEndOffset"`
	RecoveryPoint       int64 `json:"recoveryPoint"`
}

// Offsets returns the published offsets.
func (t *Tablet) Offsets() Offsets {
	v := t.view()
	return Offsets{LogStartOffset: v.logStart, LocalLogStartOffset: v.localStart, HighWatermark: v.hw.offset,
		LastStableOffset: v.lso.offset, LogEndOffset: v.leo.offset, RecoveryPoint: v.recoveryPoint}
}

// SegmentInfo describes one segment.
type SegmentInfo struct {
	BaseOffset int64  `json:"baseOffset"`
	NextOffset int64  `json:"nextOffset"`
	Size       int64  `json:"size"`
	Path       string `json:"path"`
}

// Segments describes the segments, oldest first.
func (t *Tablet) Segments() []SegmentInfo {
	v := t.view()
	var out []SegmentInfo
	v.segs.Ascend(func(g *seg) bool {
		next := g.next.Load()
		if next < 0 {
			next = v.leo.offset
		}
		out = append(out, SegmentInfo{BaseOffset: g.BaseOffset(), NextOffset: next, Size: g.Size(), Path: g.LogPath()})
		return true
	})
	return out
}

func (t *Tablet) view() view {
	t.pub.RLock()
	defer t.pub.RUnlock()
	return t.pub.v
}

// publishLocked makes v what readers see; the caller holds mu and gives a
// view whose tree is a clone nobody will change.
func (t *Tablet) publishLocked(v view) {
	v.segs = t.mu.segs.Clone()
	t.pub.Lock()
	t.pub.v = v
	t.pub.Unlock()
}

// lsoMarkLocked returns where the last stable offset lies, given the high
// watermark.
func (t *Tablet) lsoMarkLocked(hw mark, logStart int64) mark {
	lso := t.mu.state.LastStableOffset(hw.offset, logStart)
	if lso == hw.offset {
		return hw
	}
	return t.markOfLocked(lso, hw)
}

// markOfLocked finds where offset o (< bound.offset) lies; on any failure
// to read, it falls back to the segment's start, which only makes a read
// bounded by it return less.
func (t *Tablet) markOfLocked(o int64, bound mark) mark {
	g := floorSeg(t.mu.segs, o)
	if g == nil {
		return mark{offset: o, base: bound.base, pos: 0}
	}
	if g.base == bound.base && o >= bound.offset {
		return bound
	}
	p, ok, err := g.TranslateOffset(o, 0)
	if err != nil || !ok {
		return mark{offset: o, base: g.base, pos: g.Size()}
	}
	return mark{offset: o, base: g.base, pos: p.Position}
}

// usableLocked reports why the tablet cannot be used, or nil.
func (t *Tablet) usableLocked() error {
	switch {
	case t.mu.closed:
		return ErrClosed
	case t.mu.failed != nil:
		return t.mu.failed
	}
	return nil
}

// failLocked makes the tablet fail with err from now on.
func (t *Tablet) failLocked(err error) error {
	if t.mu.failed == nil {
		t.mu.failed = fmt.Errorf("tablet %s failed: %w", t.tp, err)
		t.opts.Logger.Error("tablet failed", "tablet", t.tp.String(), "err", err)
	}
	return t.mu.failed
}

// Close flushes the tablet, snapshots its writer state at the log end and
// closes its segments. It returns the offsets the data directory's
// checkpoints need. Reads still holding a segment keep it open until they
// release it.
func (t *Tablet) Close() (Offsets, error) {
	t.bg.Wait()
	err := t.Flush()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.closed {
		return t.Offsets(), ErrClosed
	}
	if t.mu.failed == nil && err == nil {
		err = t.mu.state.TakeSnapshot(true)
	}
	t.mu.closed = true
	errs := []error{err}
	log := func(err error) { t.opts.Logger.Error("closing a segment", "tablet", t.tp.String(), "err", err) }
	t.mu.segs.Ascend(func(g *seg) bool {
		errs = append(errs, g.retire(g.Close, log))
		return true
	})
	return t.Offsets(), errors.Join(errs...)
}
