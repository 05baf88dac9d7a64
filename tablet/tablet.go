package tablet

import (
	"container/list"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/btree"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/internal/invariants"
	"github.com/seglog/seglog/leaderepoch"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/recovery"
	"github.com/seglog/seglog/segment"
	"github.com/seglog/seglog/vfs"
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
	// ReadOnly refuses every change with ErrReadOnly: appends, config,
	// truncation, retention, deletion. A read-only Manager sets it. The
	// default is false.
	ReadOnly bool
	// MaxOpenSegments bounds the sealed segments that keep their
	// descriptors and mappings open: beyond it, the least recently read
	// idle ones are parked (closed, reopened on their next read). The
	// active segment does not count. The default is 128.
	MaxOpenSegments int
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
	if o.MaxOpenSegments <= 0 {
		o.MaxOpenSegments = 128
	}
	o.WriterState.EnsureDefaults()
	if o.WriterState.Now == nil {
		o.WriterState.Now = o.Now
	}
}

var (
	// ErrClosed is returned by any use of a closed tablet.
	ErrClosed = seglog.NewKafkaError("tablet: closed", 6)
	// ErrFailed is matched by the error of every use of a tablet that
	// failed (a write or fsync failed): it stays failed until reopened,
	// when recovery brings back everything acknowledged.
	ErrFailed = seglog.NewKafkaError("tablet failed", 56)
	// ErrOffsetOutOfRange is returned by a read of an offset outside
	// [log start, log end].
	ErrOffsetOutOfRange = seglog.NewKafkaError("tablet: offset out of range", 1)
	// ErrRecordBatchTooLarge is returned by an append larger than a
	// segment (Kafka's RecordBatchTooLargeException).
	ErrRecordBatchTooLarge = seglog.NewKafkaError("tablet: record batch too large for a segment", 18)
)

// seg is a segment of the tablet with its users counted: the tablet holds
// one reference while the segment is live, each use (a read, a flush) one
// more, and holds useMu shared meanwhile. When the last reference goes,
// the finalizer set at removal closes the files. An idle sealed segment
// may be parked (its descriptor and mappings closed) to keep the tablet
// within MaxOpenSegments; it reopens on its next use.
type seg struct {
	*segment.Segment
	base int64 // the tree's key
	refs atomic.Int64
	// useMu is held shared by every use and exclusively by parking.
	useMu sync.RWMutex
	// sealed reports a segment that takes no more appends.
	sealed atomic.Bool
	// next is the offset after the last batch of a sealed segment, once
	// known; -1 before.
	next atomic.Int64
	// dirty reports bytes appended since the last full flush (indexes
	// included); unsynced, since the .log was last synced; named, that the
	// segment's files are in the directory durably (a new segment's are
	// not until a directory sync).
	dirty, unsynced, named atomic.Bool

	finalMu   sync.Mutex // guards finalizer
	finalizer func()
}

func newSeg(s *segment.Segment) *seg {
	g := &seg{Segment: s, base: s.BaseOffset()}
	g.refs.Store(1)
	g.next.Store(-1)
	return g
}

// acquire takes a reference for a use, or reports false if the segment is
// gone. release ends the use.
func (g *seg) acquire() bool {
	for {
		r := g.refs.Load()
		if r <= 0 {
			return false
		}
		if g.refs.CompareAndSwap(r, r+1) {
			g.useMu.RLock()
			return true
		}
	}
}

// release ends a use; the last reference runs the finalizer.
func (g *seg) release() {
	g.useMu.RUnlock()
	g.unref()
}

func (g *seg) unref() {
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
// use holds it, it runs now and its error is returned; otherwise the last
// use to release it runs it (and an error goes to the log).
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

// park closes an idle sealed segment's files, and reports whether it did.
func (g *seg) park() (bool, error) {
	if !g.sealed.Load() || !g.useMu.TryLock() {
		return false, nil
	}
	defer g.useMu.Unlock()
	if g.refs.Load() != 1 || !g.IsOpen() { // in use, being removed, or parked already
		return false, nil
	}
	return true, g.Park()
}

// nextOffset returns the offset after a sealed segment's last batch.
func (g *seg) nextOffset() (int64, error) {
	if n := g.next.Load(); n >= 0 {
		return n, nil
	}
	n, err := g.ReadNextOffset()
	if err == nil {
		g.next.Store(n)
	}
	return n, err
}

func lessSeg(a, b *seg) bool { return a.base < b.base }

// floorSeg returns the segment holding offset o: the last with a base at
// or below it, or nil.
func floorSeg(tr *btree.BTreeG[*seg], o int64) *seg {
	var out *seg
	p := pivot(o)
	tr.DescendLessOrEqual(p, func(g *seg) bool { out = g; return false })
	pivots.Put(p)
	return out
}

// pivots lends the search keys of floorSeg and higherSeg: a seg is large,
// and a read would otherwise allocate one to search with.
var pivots = sync.Pool{New: func() any { return new(seg) }}

func pivot(base int64) *seg {
	p := pivots.Get().(*seg)
	p.base = base
	return p
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
	// afterTruncation is its manager's checkpoint writer, called once a
	// truncation lowered the recovery point (nil for a tablet opened alone).
	afterTruncation func() error
	// topicID is the id in partition.metadata, kept by its manager.
	topicID checkpoint.TopicID
	// manualHW: the high watermark is SetHighWatermark's (Options'
	// ManualHighWatermark, or SetManualHighWatermark's).
	manualHW atomic.Bool

	pub struct {
		sync.RWMutex
		v view
		// changed is closed at the next publish; grew at the next that
		// moves the log end or the log start (what a follower's fetch
		// waits for); committed at the next that moves the high
		// watermark, the last stable offset or the log start (what a
		// consumer's waits for). Each is nil until a reader asks.
		changed, grew, committed chan struct{}
	}

	mu struct {
		sync.Mutex
		cfg  Config
		segs *btree.BTreeG[*seg] // the writer's tree; cloned into the view
		// segsChanged: segs changed since its last clone was published
		// (an append that rolls nothing publishes the same clone again).
		segsChanged bool
		active      *seg
		state       *writerstate.State
		epochs      *leaderepoch.Cache
		epoch       int32 // stamped on appended batches
		failed      error
		closed      bool
	}
	// truncations counts truncations twice, as they start and as they end
	// (odd while one runs, under mu): a flush or cleaning that overlaps one
	// does not move the recovery point or swap segments.
	truncations atomic.Int64
	// unusable is set once the tablet failed or closed (mu.failed,
	// mu.closed): a sync, which starts without mu, then takes it to learn
	// why.
	unusable atomic.Bool

	flush flusher
	// cleanMu serializes cleanings; cleanedTo is the cleaner's checkpoint
	// (where the dirty section starts), -1 before the first.
	cleanMu   sync.Mutex
	cleanedTo atomic.Int64
	// compacted: the log is or was compacted, so gaps in its offsets are
	// the cleaner's (reads step over them).
	compacted atomic.Bool
	// remote is the tier below the local log start, if one is attached.
	remote atomic.Pointer[remoteHolder]
	// checkpointLogStart is the log start the checkpoint held at open,
	// which a tier attached later may serve from (it is below the first
	// segment's base when the log starts in the tier).
	checkpointLogStart int64
	// tiered: the tablet directory holds a tier's state (TierDir).
	tiered bool
	// durable mirrors flush.synced for Offsets.
	durable     atomic.Int64
	lastFlushMs atomic.Int64   // when the last flush ended, for flush.ms
	bg          sync.WaitGroup // background flushes after rolls

	// lru orders the open sealed segments by last use, most recent first.
	lru struct {
		sync.Mutex
		l     *list.List
		elems map[*seg]*list.Element
	}
	parked atomic.Int64 // segments parked, for metrics and tests
	stats  stats
}

// touch records a use of a segment and parks the least recently used idle
// sealed segments beyond MaxOpenSegments.
func (t *Tablet) touch(g *seg) {
	if !g.sealed.Load() {
		return
	}
	t.lru.Lock()
	if e, ok := t.lru.elems[g]; ok {
		t.lru.l.MoveToFront(e)
	} else {
		t.lru.elems[g] = t.lru.l.PushFront(g)
	}
	t.parkIdleLocked()
}

// ParkIdle parks the least recently used idle sealed segments beyond
// MaxOpenSegments (touch does it after every use; a segment in use then is
// tried again here). The Manager runs it with its periodic tasks.
func (t *Tablet) ParkIdle() {
	t.lru.Lock()
	t.parkIdleLocked()
}

// parkIdleLocked is ParkIdle with lru held; it releases it.
func (t *Tablet) parkIdleLocked() {
	var victims []*seg
	e := t.lru.l.Back()
	for excess := t.lru.l.Len() - t.opts.MaxOpenSegments; excess > 0 && e != nil; excess-- {
		victims = append(victims, e.Value.(*seg))
		e = e.Prev()
	}
	t.lru.Unlock()
	var parked []*seg
	for _, v := range victims { // one in use stays open and is tried again at the next touch
		if ok, err := v.park(); err != nil {
			t.opts.Logger.Warn("parking a segment", "tablet", t.tp.String(), "base", v.base, "err", err)
		} else if ok || !v.IsOpen() {
			parked = append(parked, v)
		}
	}
	if len(parked) == 0 {
		return
	}
	t.parked.Add(int64(len(parked)))
	t.lru.Lock()
	for _, v := range parked {
		if e, ok := t.lru.elems[v]; ok {
			t.lru.l.Remove(e)
			delete(t.lru.elems, v)
		}
	}
	t.lru.Unlock()
}

// done ends a use of a segment.
func (t *Tablet) done(g *seg) {
	g.release()
	t.touch(g)
}

// forget drops a segment from the open set (it is removed, or becomes the
// active one).
func (t *Tablet) forget(g *seg) {
	t.lru.Lock()
	defer t.lru.Unlock()
	if e, ok := t.lru.elems[g]; ok {
		t.lru.l.Remove(e)
		delete(t.lru.elems, g)
	}
}

// OpenSegments returns how many sealed segments hold descriptors or
// mappings, and how many were parked so far.
func (t *Tablet) OpenSegments() (open int, parked int64) {
	v := t.view()
	v.segs.Ascend(func(g *seg) bool {
		if g.sealed.Load() && g.IsOpen() {
			open++
		}
		return true
	})
	return open, t.parked.Load()
}

// OpenFiles returns how many file descriptors the tablet's segments hold.
func (t *Tablet) OpenFiles() int {
	n := 0
	t.view().segs.Ascend(func(g *seg) bool { n += g.Segment.OpenFiles(); return true })
	return n
}

// Open wraps a tablet that recovery loaded (recovery.Load or LoadTablet);
// the tablet takes over its segments, writer state and epoch cache. cfg
// is the tablet's configuration (ReadConfig gives the one kept in its
// directory).
func Open(fsys vfs.FS, r *recovery.Tablet, cfg Config, opts Options) (*Tablet, error) {
	fsys = vfs.OrOS(fsys)
	if r == nil {
		return nil, errors.New("tablet: Open needs the tablet recovery loaded")
	}
	opts.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	t := &Tablet{fsys: fsys, dir: r.Dir, tp: r.TopicPartition, opts: opts}
	t.manualHW.Store(opts.ManualHighWatermark)
	t.flush.cond = sync.NewCond(&t.flush.mu)
	t.cleanedTo.Store(-1)
	t.lru.l, t.lru.elems = list.New(), map[*seg]*list.Element{}
	t.mu.cfg = cfg
	t.compacted.Store(cfg.Compacted() || r.Compacted)
	t.mu.segs = btree.NewG(8, lessSeg)
	for i, s := range r.Segments {
		g := newSeg(s)
		g.sealed.Store(true)
		// Records above the recovery point may be only in the page cache
		// (a killed process left them): the first flush or sync makes
		// them, and the segment's name, durable before it counts on them.
		end := r.LogEndOffset
		if i+1 < len(r.Segments) {
			end = r.Segments[i+1].BaseOffset()
		}
		above := end > r.RecoveryPoint
		g.dirty.Store(above)
		g.unsynced.Store(above)
		// A segment starting at the recovery point may have been rolled
		// after the flush that put it there, its name never synced: only
		// one below it is known to be named durably.
		g.named.Store(!above && g.base < r.RecoveryPoint)
		t.putSegLocked(g)
		t.mu.active = g
	}
	t.mu.active.sealed.Store(false)
	t.mu.segs.Ascend(func(g *seg) bool { // recovery may have left some open
		if g.sealed.Load() && g.IsOpen() {
			t.touch(g)
		}
		return true
	})
	t.mu.state, t.mu.epochs = r.State, r.Epochs
	if e, ok := r.Epochs.LatestEpoch(); ok {
		t.mu.epoch = e
	}
	pos := t.mu.active.Size()
	end := mark{offset: r.LogEndOffset, base: t.mu.active.BaseOffset(), pos: pos}
	t.checkpointLogStart = r.CheckpointLogStart
	v := view{logStart: r.LogStartOffset, localStart: r.LogStartOffset, recoveryPoint: max(r.RecoveryPoint, r.LogStartOffset),
		leo: end, hw: end}
	if _, err := fsys.Stat(filepath.Join(r.Dir, TierDir)); err == nil {
		// A tiered tablet: the log below the local log start is in its
		// tier, attached or not. Its log start moves only through the tier
		// (SetRemote, remote retention); without it, it stays where the
		// checkpoint kept it — so no close writes it up to the local log
		// start, and no later retention retires the store's objects for it.
		t.tiered = true
		v.logStart = min(r.CheckpointLogStart, r.LogStartOffset)
	}
	t.flush.flushed, t.flush.synced = r.RecoveryPoint, r.RecoveryPoint
	t.durable.Store(r.RecoveryPoint)
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
	fsys = vfs.OrOS(fsys)
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
// retention and flushes at once. A failed tablet takes it too: lowering
// its retention frees the disk its old segments hold.
func (t *Tablet) SetConfig(cfg Config) error {
	if err := t.readOnlyErr(); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.closed {
		return ErrClosed
	}
	if err := writeConfig(t.fsys, filepath.Join(t.dir, ConfigFile), cfg); err != nil {
		return err
	}
	t.mu.cfg = cfg
	if cfg.Compacted() {
		t.compacted.Store(true)
	}
	return nil
}

// Offsets are a tablet's offsets (docs/architecture.md §4).
type Offsets struct {
	LogStartOffset      int64 `json:"logStartOffset"`
	LocalLogStartOffset int64 `json:"localLogStartOffset"`
	HighWatermark       int64 `json:"highWatermark"`
	LastStableOffset    int64 `json:"lastStableOffset"`
	LogEndOffset        int64 `json:"logEndOffset"`
	// RecoveryPoint: everything below it — records, indexes, writer
	// snapshots — is durable; a crash recovers from there.
	RecoveryPoint int64 `json:"recoveryPoint"`
	// DurableOffset: the records below it are durable (at least the
	// recovery point; Sync appends move it without moving the recovery
	// point, see AppendOptions.Sync).
	DurableOffset int64 `json:"durableOffset"`
}

// Offsets returns the published offsets.
func (t *Tablet) Offsets() Offsets { return t.offsetsOf(t.view()) }

func (t *Tablet) offsetsOf(v view) Offsets {
	return Offsets{LogStartOffset: v.logStart, LocalLogStartOffset: v.localStart, HighWatermark: v.hw.offset,
		LastStableOffset: v.lso.offset, LogEndOffset: v.leo.offset, RecoveryPoint: v.recoveryPoint,
		DurableOffset: min(max(t.durable.Load(), v.recoveryPoint), v.leo.offset)}
}

// SegmentInfo describes one segment.
type SegmentInfo struct {
	BaseOffset int64  `json:"baseOffset"`
	NextOffset int64  `json:"nextOffset"`
	Size       int64  `json:"size"`
	Path       string `json:"path"`
	// MaxTimestamp is the largest timestamp in the segment (-1 if none
	// or unreadable).
	MaxTimestamp int64 `json:"maxTimestamp"`
}

// Size returns the bytes of the tablet's local segments (its .log files'
// logical sizes), as DescribeLogDirs reports a partition's size.
func (t *Tablet) Size() int64 {
	_, segs := t.acquireAll()
	var n int64
	for _, g := range segs {
		n += g.Size()
		g.release()
		t.touch(g)
	}
	return n
}

// Segments describes the segments, oldest first.
func (t *Tablet) Segments() []SegmentInfo {
	v, segs := t.acquireAll()
	var out []SegmentInfo
	for _, g := range segs {
		out = append(out, infoOf(v, g))
		g.release()
		t.touch(g)
	}
	return out
}

// SegmentDetail is a segment as an operator looks at it: SegmentInfo, the
// first batch's timestamp (-1 if it has none) and the fill of its indexes.
type SegmentDetail struct {
	SegmentInfo
	FirstTimestamp int64 `json:"firstTimestamp"`
	// IndexEntries and IndexSlots are the offset index's entries and the
	// entries its file has room for; IndexFull, that either index is full.
	IndexEntries int  `json:"indexEntries"`
	IndexSlots   int  `json:"indexSlots"`
	IndexFull    bool `json:"indexFull"`
}

// errFirst stops a walk after its first batch.
var errFirst = errors.New("first batch read")

// SegmentDetails describes the newest segments, at most newest of them
// (oldest first), and says how many there are in all. Each opens the
// segment (a parked one reopens) and reads its first batch's header.
func (t *Tablet) SegmentDetails(newest int) (total int, out []SegmentDetail) {
	v, segs := t.acquireAll()
	total = len(segs)
	for i, g := range segs {
		if i >= total-newest {
			out = append(out, detailOf(v, g))
		}
		g.release()
		t.touch(g)
	}
	return total, out
}

func infoOf(v view, g *seg) SegmentInfo {
	info := SegmentInfo{BaseOffset: g.base, NextOffset: v.leo.offset, Size: g.Size(), Path: g.LogPath(), MaxTimestamp: -1}
	if g.base != v.leo.base {
		if n, err := g.nextOffset(); err == nil {
			info.NextOffset = n
		}
	}
	if ts, err := g.LargestTimestamp(); err == nil {
		info.MaxTimestamp = ts
	}
	return info
}

func detailOf(v view, g *seg) SegmentDetail {
	d := SegmentDetail{SegmentInfo: infoOf(v, g), FirstTimestamp: -1}
	if d.Size > 0 {
		_ = g.Batches(g.base, segment.NoMaxPosition, func(b record.Batch) error {
			d.FirstTimestamp = b.BaseTimestamp()
			return errFirst
		})
	}
	if info, err := g.IndexInfo(); err == nil {
		d.IndexEntries, d.IndexSlots, d.IndexFull = info.OffsetEntries, info.OffsetSlots, info.Full
	}
	return d
}

// acquireAll returns the published view with a use of each of its
// segments; the caller ends each with done.
func (t *Tablet) acquireAll() (view, []*seg) {
	t.pub.RLock()
	defer t.pub.RUnlock()
	v := t.pub.v
	var segs []*seg
	v.segs.Ascend(func(g *seg) bool {
		if g.acquire() {
			segs = append(segs, g)
		}
		return true
	})
	return v, segs
}

func (t *Tablet) view() view {
	t.pub.RLock()
	defer t.pub.RUnlock()
	return t.pub.v
}

// publishLocked makes v what readers see, with a clone of the writer's
// tree (the last one published while the tree has not changed); the
// caller holds mu, under which alone pub.v is written.
func (t *Tablet) publishLocked(v view) {
	if invariants.Enabled {
		t.checkInvariantsLocked(v)
	}
	if v.segs = t.pub.v.segs; v.segs == nil || t.mu.segsChanged {
		v.segs, t.mu.segsChanged = t.mu.segs.Clone(), false
	}
	t.pub.Lock()
	old := t.pub.v
	t.pub.v = v
	changed, grew, committed := t.pub.changed, (chan struct{})(nil), (chan struct{})(nil)
	t.pub.changed = nil
	if old.leo.offset != v.leo.offset || old.logStart != v.logStart {
		grew, t.pub.grew = t.pub.grew, nil
	}
	if old.hw.offset != v.hw.offset || old.lso.offset != v.lso.offset || old.logStart != v.logStart {
		committed, t.pub.committed = t.pub.committed, nil
	}
	t.pub.Unlock()
	for _, c := range [...]chan struct{}{changed, grew, committed} {
		if c != nil {
			close(c) // wake every reader waiting for this change
		}
	}
}

// Changed returns a channel closed at the next change of what the tablet
// publishes — an append, the high watermark or the last stable offset
// moving, a truncation — so that a long-polling reader (a Kafka fetch with
// MaxWaitMs) waits for data without polling: read, and if there is not
// enough, wait on the channel taken before the read.
func (t *Tablet) Changed() <-chan struct{} {
	return t.changedOf(&t.pub.changed)
}

// ChangedFor is Changed for a reader up to iso's bound: closed at the next
// change of what such a reader may read — for ReadLogEnd (a follower) the
// log end or the log start moving, for ReadHighWatermark and
// ReadCommitted (a consumer) the high watermark, the last stable offset or
// the log start — so that an append not yet committed does not wake a
// consumer's long poll, nor a high watermark's move a follower's.
func (t *Tablet) ChangedFor(iso Isolation) <-chan struct{} {
	if iso == ReadLogEnd {
		return t.changedOf(&t.pub.grew)
	}
	return t.changedOf(&t.pub.committed)
}

func (t *Tablet) changedOf(ch *chan struct{}) <-chan struct{} {
	t.pub.Lock()
	defer t.pub.Unlock()
	if *ch == nil {
		*ch = make(chan struct{})
	}
	return *ch
}

// putSegLocked adds g to the writer's tree (or replaces the one at its
// base); dropSegLocked removes g. The next publish clones the tree.
func (t *Tablet) putSegLocked(g *seg) {
	t.mu.segs.ReplaceOrInsert(g)
	t.mu.segsChanged = true
}

func (t *Tablet) dropSegLocked(g *seg) {
	t.mu.segs.Delete(g)
	t.mu.segsChanged = true
}

// checkInvariantsLocked panics if the offsets or the segments about to be
// published break docs/architecture.md §4: logStart ≤ localLogStart ≤
// recoveryPoint ≤ LEO, LSO ≤ HW ≤ LEO, and the active segment last, at
// or below the log end. It runs only when invariants.Enabled.
func (t *Tablet) checkInvariantsLocked(v view) {
	bad := func(format string, args ...any) {
		panic(fmt.Sprintf("tablet %s: invariant broken: %s", t.tp, fmt.Sprintf(format, args...)))
	}
	switch {
	case !(v.logStart <= v.localStart && v.localStart <= v.recoveryPoint && v.recoveryPoint <= v.leo.offset):
		bad("logStart %d ≤ localLogStart %d ≤ recoveryPoint %d ≤ LEO %d", v.logStart, v.localStart, v.recoveryPoint, v.leo.offset)
	case !(v.lso.offset <= v.hw.offset && v.hw.offset <= v.leo.offset):
		bad("LSO %d ≤ HW %d ≤ LEO %d", v.lso.offset, v.hw.offset, v.leo.offset)
	}
	last, ok := t.mu.segs.Max()
	switch {
	case !ok:
		bad("no segment")
	case last != t.mu.active:
		bad("the active segment %d is not the last (%d)", t.mu.active.base, last.base)
	case last.base > v.leo.offset || v.leo.base != last.base:
		bad("the log end %d (in the segment at %d) is not in the active segment at %d", v.leo.offset, v.leo.base, last.base)
	}
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
	if !g.acquire() {
		return mark{offset: o, base: g.base, pos: 0}
	}
	defer t.touch(g)
	defer g.release()
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

// Failed returns the error the tablet failed with (ErrFailed), or nil.
func (t *Tablet) Failed() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.failed
}

// failLocked makes the tablet fail with err from now on.
func (t *Tablet) failLocked(err error) error {
	if t.mu.failed == nil {
		t.unusable.Store(true)
		t.mu.failed = fmt.Errorf("%w: %s: %w", ErrFailed, t.tp, err)
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
	if t.mu.failed == nil && err == nil {
		err = t.mu.state.SyncSnapshots() // none written without fsync is left so by a clean close
	}
	if t.mu.failed == nil && err == nil && !t.opts.ReadOnly {
		// A segment rolled with nothing appended since has a name no
		// flush synced (the flush had nothing to do): a clean close makes
		// it durable, since the next open takes every segment it finds
		// as durable.
		unnamed := false
		t.mu.segs.Ascend(func(g *seg) bool { unnamed = unnamed || !g.named.Load(); return !unnamed })
		if unnamed {
			err = t.fsys.SyncDir(t.dir)
		}
	}
	t.mu.closed = true
	t.unusable.Store(true)
	errs := []error{err}
	log := func(err error) { t.opts.Logger.Error("closing a segment", "tablet", t.tp.String(), "err", err) }
	t.mu.segs.Ascend(func(g *seg) bool {
		errs = append(errs, g.retire(g.Close, log))
		return true
	})
	return t.Offsets(), errors.Join(errs...)
}

// ErrReadOnly is returned by every change to a tablet or data directory
// opened read-only.
var ErrReadOnly = seglog.NewKafkaError("tablet: opened read-only", -1)

// ReadOnly reports whether the tablet was opened read-only.
func (t *Tablet) ReadOnly() bool { return t.opts.ReadOnly }

// readOnlyErr is ErrReadOnly for a read-only tablet, else nil.
func (t *Tablet) readOnlyErr() error {
	if t.opts.ReadOnly {
		return fmt.Errorf("%w: %s", ErrReadOnly, t.tp.DirName())
	}
	return nil
}

// TierDir is the directory of a tablet's tier state (the tiering
// package's manifest and store URL): a tablet that has one is tiered.
const TierDir = "tier"

// ErrTierNotAttached is returned by a read below the local log start of a
// tiered tablet whose tier is not attached (its store down, or the command
// given none): those records are in the store.
var ErrTierNotAttached = seglog.NewKafkaError("tablet: tier not attached", 56)

// Tiered reports whether the tablet has a tier (TierDir), attached or not.
func (t *Tablet) Tiered() bool { return t.tiered }
