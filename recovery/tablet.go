package recovery

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/seglog/seglog/logfile"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/leaderepoch"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/segment"
	"github.com/seglog/seglog/vfs"
	"github.com/seglog/seglog/writerstate"
)

// Tablet is a loaded tablet: its segments, offsets, writer state and epoch
// cache, ready for appends and reads, and what loading changed.
type Tablet struct {
	Dir            string
	TopicPartition checkpoint.TopicPartition
	// Segments are open, in base offset order; the last is the active one
	// (its indexes at full size). There is always at least one.
	Segments       []*segment.Segment
	LogStartOffset int64
	// CheckpointLogStart is the log start the checkpoint held: LogStartOffset
	// raises it to the first segment's base, and a tier may hold the
	// offsets between.
	CheckpointLogStart int64
	RecoveryPoint      int64
	LogEndOffset       int64
	State              *writerstate.State
	Epochs             *leaderepoch.Cache
	Report             []Change
	// RecoveredBytes is how many bytes of .log segment recovery read (CRC
	// check and index rebuild), a cut tail included.
	RecoveredBytes int64
	// Compacted says the log is compacted (see Compacted): gaps in its
	// offsets are expected.
	Compacted bool

	fsys vfs.FS
}

// Close closes the tablet's segments.
func (t *Tablet) Close() error {
	var errs []error
	for _, s := range t.Segments {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}

// flush makes the tablet's segments and directory durable.
func (t *Tablet) flush() error {
	for _, s := range t.Segments {
		if err := s.Flush(); err != nil {
			return err
		}
	}
	return t.fsys.SyncDir(t.Dir)
}

// tabletLoader carries one tablet's load.
type tabletLoader struct {
	fsys          vfs.FS
	opts          *Options
	t             *Tablet
	clean         bool
	recoveryPoint int64 // from the checkpoint
	logStart      int64 // from the checkpoint
	compacted     bool  // a compacted log: gaps are the cleaner's
	nowMs         int64
	progress      func(bytes int64)
	// recovered holds the segments already recovered while opening, so
	// that recoverLog does not scan them twice.
	recovered map[*segment.Segment]segment.Tail
	// recoverLater says whether recoverLog will recover the segment at a
	// base; why holds the reasons found while opening such segments.
	recoverLater func(base int64) bool
	why          map[*segment.Segment]string
}

func (l *tabletLoader) report(c Change) { l.t.Report = append(l.t.Report, c) }

func (l *tabletLoader) path(name string) string { return filepath.Join(l.t.Dir, name) }

// remove deletes a file and reports it.
func (l *tabletLoader) remove(name string, why string) error {
	p := l.path(name)
	var size int64
	if info, err := l.fsys.Stat(p); err == nil {
		size = info.Size()
	}
	if err := l.fsys.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("recovery: deleting %s: %w", p, err)
	}
	l.report(Change{File: p, Action: Deleted, Bytes: size, Why: why})
	return nil
}

// LoadTablet loads one tablet directory (docs/format.md §4.1 steps 3–8). clean says
// whether the data directory was shut down cleanly; recoveryPoint and
// logStart come from the data directory's checkpoints (0 if absent).
func LoadTablet(fsys vfs.FS, dir string, tp checkpoint.TopicPartition, clean bool, recoveryPoint, logStart int64, opts Options) (*Tablet, error) {
	fsys = vfs.OrOS(fsys)
	opts.EnsureDefaults()
	return loadTablet(fsys, dir, tp, clean, recoveryPoint, logStart, false, &opts, func(int64) {})
}

// Compacted says a tablet directory holds a compacted log: its
// seglog.properties sets cleanup.policy with compact, or (cleaned) the
// data directory's cleaner-offset-checkpoint names it, as for a Kafka
// directory. Gaps in its offsets are the cleaner's, not a loss.
func Compacted(fsys vfs.FS, dir string, cleaned bool) bool {
	if cleaned {
		return true
	}
	data, err := vfs.ReadFile(vfs.OrOS(fsys), filepath.Join(dir, "seglog.properties"))
	return err == nil && strings.Contains(checkpoint.ParseProperties(data)["cleanup.policy"], "compact")
}

func loadTablet(fsys vfs.FS, dir string, tp checkpoint.TopicPartition, clean bool, recoveryPoint, logStart int64, cleaned bool,
	opts *Options, progress func(int64)) (*Tablet, error) {
	if opts.SegmentOptions != nil {
		own := *opts
		so, err := opts.SegmentOptions(tp, dir)
		if err != nil {
			return nil, fmt.Errorf("recovery: loading %s: %w", dir, err)
		}
		so.EnsureDefaults()
		if err := so.Validate(); err != nil {
			return nil, fmt.Errorf("recovery: loading %s: %w", dir, err)
		}
		own.Segment, own.SegmentOptions = so, nil
		opts = &own
	}
	compacted := Compacted(fsys, dir, cleaned)
	l := &tabletLoader{fsys: fsys, opts: opts, clean: clean, recoveryPoint: recoveryPoint, logStart: logStart,
		compacted: compacted, nowMs: opts.Now().UnixMilli(),
		t: &Tablet{Dir: dir, TopicPartition: tp, fsys: fsys, Compacted: compacted}, progress: progress,
		recovered: map[*segment.Segment]segment.Tail{}, why: map[*segment.Segment]string{}}
	if err := l.load(); err != nil {
		l.t.Close()
		return nil, fmt.Errorf("recovery: loading %s: %w", dir, err)
	}
	return l.t, nil
}

func (l *tabletLoader) load() error {
	swaps, err := l.removeTempFiles()
	if err != nil {
		return err
	}
	if err := l.completeSwaps(swaps); err != nil {
		return err
	}
	if !l.clean {
		if err := l.dropUnflushedSnapshots(); err != nil {
			return err
		}
	}
	if l.t.Epochs, err = l.openEpochs(); err != nil {
		return err
	}
	if err := l.loadSegments(); err != nil {
		return err
	}
	if !l.clean {
		if err := l.recoverLog(); err != nil {
			return err
		}
	} else if len(l.t.Segments) > 0 {
		// Beyond Kafka: an active segment ending in a torn or corrupt
		// batch was damaged after the clean shutdown; trusting its index
		// would put the log end inside it.
		if clean, err := l.active().EndIsClean(); err != nil {
			return err
		} else if !clean {
			if _, err := l.recoverSegment(l.active(), "its end is torn or corrupt, which a clean shutdown does not leave"); err != nil {
				return err
			}
		}
	}
	logEnd, logEndKnown, err := l.checkLogStart()
	if err != nil {
		return err
	}
	if len(l.t.Segments) == 0 {
		seg, err := segment.Create(l.fsys, l.t.Dir, l.logStart, l.opts.Segment)
		if err != nil {
			return err
		}
		l.t.Segments = []*segment.Segment{seg}
		l.report(Change{File: seg.LogPath(), Action: Created, Why: "no segment left: an empty one at the log start"})
	}
	if !logEndKnown {
		if logEnd, err = l.active().ReadNextOffset(); err != nil {
			return err
		}
	}
	l.t.LogEndOffset = logEnd
	l.t.RecoveryPoint = logEnd
	if !l.clean || !logEndKnown {
		l.t.RecoveryPoint = min(l.recoveryPoint, logEnd)
	}
	if l.recoveryPoint > logEnd && len(l.t.Report) > 0 {
		// Something was cut below what had been made durable: damage, not
		// a power cut's loss (a checkpoint alone past the end, with
		// nothing cut, is only a stale checkpoint).
		l.report(Change{File: l.t.Dir, Action: Lost, FromOffset: logEnd, ToOffset: l.recoveryPoint,
			Why: fmt.Sprintf("the recovery point is %d but the log now ends at %d: those records had been made durable, so a file was damaged", l.recoveryPoint, logEnd)})
	}
	if err := l.prepareActive(); err != nil {
		return err
	}
	l.t.LogStartOffset = max(l.logStart, l.t.Segments[0].BaseOffset())
	l.t.CheckpointLogStart = l.logStart
	if err := l.t.Epochs.TruncateFromStart(l.logStart); err != nil {
		return err
	}
	if err := l.epochsFromLogStart(logEnd); err != nil {
		return err
	}
	if err := l.t.Epochs.TruncateFromEnd(logEnd); err != nil {
		return err
	}
	if l.t.State, err = writerstate.Open(l.fsys, l.t.Dir, l.opts.WriterState); err != nil {
		return err
	}
	if err := l.t.State.RemoveStraySnapshots(l.bases()); err != nil {
		return err
	}
	return l.t.State.Rebuild(writerstate.Sources(l.t.Segments), l.t.LogStartOffset, logEnd, l.clean, l.nowMs)
}

func (l *tabletLoader) active() *segment.Segment { return l.t.Segments[len(l.t.Segments)-1] }

func (l *tabletLoader) bases() []int64 {
	out := make([]int64, len(l.t.Segments))
	for i, s := range l.t.Segments {
		out[i] = s.BaseOffset()
	}
	return out
}

// offsetOfName reads the offset a file name starts with (Kafka's
// offsetFromFileName), or reports false.
func offsetOfName(name string) (int64, bool) {
	digits, _, _ := strings.Cut(name, ".")
	o, err := strconv.ParseInt(digits, 10, 64)
	return o, err == nil && digits != "" && strings.TrimLeft(digits, "0123456789") == ""
}

// removeTempFiles is step 3: it deletes stray .deleted files, the .swap
// files of an unfinished split (at or above the lowest .cleaned offset) and
// every .cleaned file, and returns the other .swap files.
func (l *tabletLoader) removeTempFiles() ([]string, error) {
	names, err := l.fsys.List(l.t.Dir)
	if err != nil {
		return nil, err
	}
	var cleaned, swaps []string
	minCleaned := int64(math.MaxInt64)
	for _, name := range names {
		if !ours(name) {
			continue // not a name seglog or Kafka writes: left alone (seglog verify reports it)
		}
		switch {
		case strings.HasSuffix(name, logfile.DeletedSuffix):
			if err := l.remove(name, "left over from a deletion"); err != nil {
				return nil, err
			}
		case strings.HasSuffix(name, logfile.CleanedSuffix):
			if o, ok := offsetOfName(name); ok {
				minCleaned = min(minCleaned, o)
			}
			cleaned = append(cleaned, name)
		case strings.HasSuffix(name, logfile.SwapSuffix):
			swaps = append(swaps, name)
		case strings.HasSuffix(name, vfs.TempSuffix): // a checkpoint or config never renamed into place
			if err := l.remove(name, "left over from an interrupted atomic write"); err != nil {
				return nil, err
			}
		}
	}
	var valid []string
	for _, name := range swaps {
		if o, ok := offsetOfName(name); ok && o >= minCleaned {
			if err := l.remove(name, "part of an unfinished segment split"); err != nil {
				return nil, err
			}
			continue
		}
		valid = append(valid, name)
	}
	for _, name := range cleaned {
		if err := l.remove(name, "left over from an unfinished segment replacement"); err != nil {
			return nil, err
		}
	}
	return valid, nil
}

// completeSwaps is step 4: the segments the .swap logs replace (whose
// offsets fall in the swaps' range) are deleted, and the .swap suffix is
// dropped from every file.
func (l *tabletLoader) completeSwaps(swaps []string) error {
	minSwap, maxSwap := int64(math.MaxInt64), int64(math.MinInt64)
	for _, name := range swaps {
		n, err := logfile.ParseFilename(name)
		if err != nil || n.Kind != logfile.Log {
			continue
		}
		seg, err := segment.Open(l.fsys, l.t.Dir, n.Base, segment.Options{ReadOnly: true, FileSuffix: logfile.SwapSuffix})
		if err != nil {
			return err
		}
		next, err := seg.ReadNextOffset()
		seg.Close()
		if err != nil {
			return err
		}
		// An empty .swap (a cleaning that kept nothing of its group)
		// still replaces the segment at its own base.
		minSwap, maxSwap = min(minSwap, n.Base), max(maxSwap, next, n.Base+1)
	}
	names, err := l.fsys.List(l.t.Dir)
	if err != nil {
		return err
	}
	for _, name := range names {
		if strings.HasSuffix(name, logfile.SwapSuffix) {
			continue
		}
		if o, ok := offsetOfName(name); ok && o >= minSwap && o < maxSwap {
			if err := l.remove(name, "replaced by a .swap segment whose replacement did not finish"); err != nil {
				return err
			}
		}
	}
	for _, name := range swaps {
		final := strings.TrimSuffix(name, logfile.SwapSuffix)
		if err := l.fsys.Rename(l.path(name), l.path(final)); err != nil {
			return fmt.Errorf("recovery: completing %s: %w", name, err)
		}
		l.report(Change{File: l.path(final), Action: Renamed, Why: "completing an interrupted segment replacement"})
	}
	if len(swaps) > 0 {
		return l.fsys.SyncDir(l.t.Dir)
	}
	return nil
}

// loadSegments is step 5.
func (l *tabletLoader) loadSegments() error {
	names, err := l.fsys.List(l.t.Dir)
	if err != nil {
		return err
	}
	lastBase, holder := int64(-1), int64(-1)
	for _, name := range names {
		if n, err := logfile.ParseFilename(name); err == nil && n.Suffix == "" && n.Kind == logfile.Log {
			lastBase = max(lastBase, n.Base)
			if n.Base <= l.recoveryPoint || holder < 0 {
				holder = max(holder, n.Base)
			}
		}
	}
	// After an unclean shutdown the segments from the one holding the
	// recovery point are recovered by recoverLog, in order; one of them
	// rebuilt here would replay the writer state over segments not yet
	// checked.
	l.recoverLater = func(base int64) bool { return !l.clean && base >= holder }
	have := make(map[string]bool, len(names))
	for _, name := range names {
		have[name] = true
	}
	var opened []openedSegment
	for _, name := range names {
		n, err := logfile.ParseFilename(name)
		if err != nil || n.Suffix != "" {
			continue
		}
		switch n.Kind {
		case logfile.Index, logfile.TimeIndex, logfile.TxnIndex:
			if !have[logfile.Filename(n.Base, logfile.Log)] {
				if err := l.remove(name, "an index without its .log"); err != nil {
					return err
				}
			}
		case logfile.Log:
			seg, err := segment.Open(l.fsys, l.t.Dir, n.Base, l.opts.Segment)
			if err != nil {
				return err
			}
			l.t.Segments = append(l.t.Segments, seg)
			opened = append(opened, openedSegment{seg: seg, active: n.Base == lastBase,
				indexMissing:     !have[logfile.Filename(n.Base, logfile.Index)],
				timeIndexMissing: !have[logfile.Filename(n.Base, logfile.TimeIndex)],
				hasTxnIndex:      have[logfile.Filename(n.Base, logfile.TxnIndex)]})
		}
	}
	checkAll(opened, l.opts.Parallelism)
	for _, o := range opened {
		if err := l.settleSegment(o); err != nil {
			return err
		}
	}
	return nil
}

// openedSegment is a segment found at load, with what its files say.
type openedSegment struct {
	seg                            *segment.Segment
	active                         bool
	indexMissing, timeIndexMissing bool
	hasTxnIndex                    bool
	checkErr                       error // from checkIndexes
}

// checkAll runs checkIndexes on the segments whose indexes are there, on
// up to parallelism goroutines: it is the one part of a clean load that
// reads every segment's files.
func checkAll(opened []openedSegment, parallelism int) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range max(parallelism, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				o := &opened[i]
				o.checkErr = o.seg.CheckIndexes(o.active, o.hasTxnIndex)
			}
		}()
	}
	for i, o := range opened {
		if !o.indexMissing && !o.timeIndexMissing {
			next <- i
		}
	}
	close(next)
	wg.Wait()
}

// settleSegment rebuilds what step 5 finds missing or damaged in a
// segment, in base offset order.
func (l *tabletLoader) settleSegment(o openedSegment) error {
	seg := o.seg
	recover := func(why string) error {
		if l.recoverLater(seg.BaseOffset()) {
			l.why[seg] = why
			return nil
		}
		_, err := l.recoverSegment(seg, why)
		return err
	}
	switch {
	case o.indexMissing:
		return recover("the .index is missing")
	case o.timeIndexMissing:
		if err := seg.CreateTimeIndex(); err != nil {
			return err
		}
		l.report(Change{File: seg.Path(logfile.TimeIndex), Action: CreatedIndex, Why: "the .timeindex was missing"})
		o.checkErr = seg.CheckIndexes(o.active, o.hasTxnIndex)
	}
	if err := o.checkErr; err != nil {
		if !errors.Is(err, seglog.ErrCorruption) {
			return err
		}
		return recover("an index is damaged: " + err.Error())
	}
	return nil
}

// openEpochs opens the leader-epoch cache. Beyond Kafka (which fails the
// directory), a damaged checkpoint is dropped: the cache is derived from
// the batches' epochs, and is read from them again (epochsFromLogStart).
func (l *tabletLoader) openEpochs() (*leaderepoch.Cache, error) {
	path := l.path(checkpoint.LeaderEpochFile)
	c, err := leaderepoch.Open(l.fsys, path)
	var ce *seglog.CorruptionError
	if !errors.As(err, &ce) {
		return c, err
	}
	l.report(Change{File: path, Action: CheckpointBad, Why: ce.Reason + "; the epochs are read from the batches again"})
	if err := l.fsys.Remove(path); err != nil {
		return nil, err
	}
	return leaderepoch.Open(l.fsys, path)
}

// errEnough stops a walk over batches.
var errEnough = errors.New("enough")

// epochsFromLogStart reads the epochs of the batches between the log start
// and the epoch cache's earliest entry when that entry begins later, or of
// every batch when the cache is empty (its file was lost): a crash can undo
// a log start advance (its checkpoint is written every minute) after the
// cache was truncated to it, and Kafka would then leave the batches below
// without an epoch — a truncation could later drop the only entry while
// batches of that epoch remain.
func (l *tabletLoader) epochsFromLogStart(logEnd int64) error {
	first, ok := l.t.Epochs.EarliestEntry()
	if !ok {
		first = leaderepoch.Entry{Epoch: math.MaxInt32, StartOffset: math.MaxInt64}
	}
	if first.StartOffset <= l.t.LogStartOffset || l.t.LogStartOffset >= logEnd {
		return nil
	}
	var found []leaderepoch.Entry
	for i, seg := range l.t.Segments {
		err := seg.Batches(max(l.t.LogStartOffset, seg.BaseOffset()), segment.NoMaxPosition, func(b record.Batch) error {
			if b.BaseOffset() >= first.StartOffset || (!ok && i == 0 && len(found) == 0 && b.PartitionLeaderEpoch() < 0) {
				return errEnough // an empty cache is right when the first batch has no epoch: no walk
			}
			if e := b.PartitionLeaderEpoch(); e >= 0 && (len(found) == 0 || e > found[len(found)-1].Epoch) {
				found = append(found, leaderepoch.Entry{Epoch: e, StartOffset: max(b.BaseOffset(), l.t.LogStartOffset)})
			}
			return nil
		})
		if errors.Is(err, errEnough) {
			break
		}
		if err != nil {
			return err
		}
	}
	if len(found) == 0 || found[len(found)-1].Epoch > first.Epoch {
		return nil // nothing to add, or batches that contradict the cache: left as Kafka leaves them
	}
	why := fmt.Sprintf("epochs %v of the batches from the log start %d, before the first entry %v", found, l.t.LogStartOffset, first)
	if !ok {
		why = fmt.Sprintf("empty, though the batches from the log start %d carry epochs %v", l.t.LogStartOffset, found)
	}
	l.report(Change{File: l.path(checkpoint.LeaderEpochFile), Action: Recovered, Why: why})
	return l.t.Epochs.PrependEarlier(found)
}

// recoverSegment rebuilds a segment's indexes (and the writer state up to
// it, and the epochs in it) from its .log, reports it, and snapshots the
// writer state.
func (l *tabletLoader) recoverSegment(seg *segment.Segment, why string) (segment.Tail, error) {
	if tail, ok := l.recovered[seg]; ok {
		return tail, nil
	}
	state, err := writerstate.Open(l.fsys, l.t.Dir, l.opts.WriterState)
	if err != nil {
		return segment.Tail{}, err
	}
	i := slices.Index(l.t.Segments, seg)
	if err := state.Rebuild(writerstate.Sources(l.t.Segments[:i]), l.logStart, seg.BaseOffset(), false, l.nowMs); err != nil {
		return segment.Tail{}, err
	}
	tail, err := seg.Recover(&replayer{state: state, epochs: l.t.Epochs})
	if err != nil {
		return segment.Tail{}, err
	}
	l.t.RecoveredBytes += tail.Length
	l.progress(tail.Length)
	l.report(Change{File: seg.LogPath(), Action: RebuiltIndex, Why: why})
	if tail.Bytes() > 0 {
		c := Change{File: seg.LogPath(), Action: Truncated, Bytes: tail.Bytes(),
			Why: fmt.Sprintf("%v at position %d", tail.Kind, tail.Position)}
		if tail.Err != nil {
			c.Why += ": " + tail.Err.Error()
		}
		l.report(c)
	}
	l.recovered[seg] = tail
	// The state is a temporary one, as in Kafka: what it wrote is synced
	// now, since nothing else will know to sync it before the recovery
	// point passes it.
	// On a full disk the snapshot is left out (a later load replays the
	// log from an earlier one): loading needs no new space.
	if err := state.TakeSnapshot(false); errors.Is(err, syscall.ENOSPC) {
		l.report(Change{File: seg.LogPath(), Action: NotWritten,
			Why: "no space for the writer-state snapshot at its end: " + err.Error()})
		return tail, nil
	} else if err != nil {
		return tail, err
	}
	return tail, state.SyncSnapshots()
}

// replayer is the recovery hook: the writer state, and the leader epochs
// seen in the batches.
type replayer struct {
	state  *writerstate.State
	epochs *leaderepoch.Cache
}

func (r *replayer) Replay(b record.Batch) ([]record.AbortedTxn, error) {
	if e := b.PartitionLeaderEpoch(); e >= 0 {
		if latest, ok := r.epochs.LatestEpoch(); !ok || e > latest {
			if err := r.epochs.Assign(e, b.BaseOffset()); err != nil {
				return nil, err
			}
		}
	}
	return r.state.Replay(b)
}

// dropUnflushedSnapshots deletes, after an unclean shutdown, the writer
// state snapshots above the recovery point. Beyond Kafka: such a snapshot
// (written unsynced at a roll) may describe batches that the crash took
// from the log; recovery takes it again from what the log holds.
func (l *tabletLoader) dropUnflushedSnapshots() error {
	state, err := writerstate.Open(l.fsys, l.t.Dir, l.opts.WriterState)
	if err != nil {
		return err
	}
	for _, o := range state.Snapshots() {
		if o > l.recoveryPoint {
			l.report(Change{File: l.path(logfile.Filename(o, logfile.Snapshot)), Action: Deleted,
				Why: fmt.Sprintf("a writer-state snapshot above the recovery point %d, not trusted after a crash", l.recoveryPoint)})
		}
	}
	return state.DeleteSnapshotsAfter(l.recoveryPoint)
}

// recoverLog is step 6: after an unclean shutdown, every segment from the
// one holding the recovery point is recovered; at the first that loses
// bytes, the rest are deleted.
//
// Beyond Kafka, so are the segments after a gap above the recovery point:
// a recovered segment that ends before the next one starts lost its
// unflushed tail in the crash while a later segment's data survived. No
// record after the gap was acknowledged (a flush syncs every segment below
// its target, in order), and keeping them would make visible, for
// instance, the end of a transaction whose beginning is gone. (A gap
// below the recovery point was flushed: a replica of a compacted log. In
// a compacted log any gap may be the cleaner's: it is kept, as Kafka
// does.)
func (l *tabletLoader) recoverLog() error {
	first := 0
	for i, seg := range l.t.Segments {
		if seg.BaseOffset() <= l.recoveryPoint {
			first = i
		}
	}
	for i := first; i < len(l.t.Segments); i++ {
		seg := l.t.Segments[i]
		why := "recovering after an unclean shutdown"
		if w, ok := l.why[seg]; ok {
			why += "; " + w
		}
		tail, err := l.recoverSegment(seg, why)
		if errors.Is(err, segment.ErrOffsetOverflow) {
			return fmt.Errorf("%w (a segment whose offsets overflow must be split; seglog does not split segments)", err)
		}
		if err != nil {
			return err
		}
		reason := "after a segment cut by recovery"
		if tail.Bytes() == 0 {
			if i == len(l.t.Segments)-1 {
				continue
			}
			next, err := seg.ReadNextOffset()
			if err != nil {
				return err
			}
			following := l.t.Segments[i+1].BaseOffset()
			if next >= following || following <= l.recoveryPoint || l.compacted {
				continue // (a compacted log's gaps are the cleaner's, as in Kafka)
			}
			l.report(Change{File: seg.LogPath(), Action: Gap, FromOffset: next, ToOffset: following,
				Why: "the segment ends before the next one starts: its unflushed tail was lost in the crash"})
			reason = fmt.Sprintf("after the gap at offsets [%d, %d): nothing after it was acknowledged", next, following)
		}
		for _, later := range l.t.Segments[i+1:] {
			if err := l.deleteSegment(later, reason); err != nil {
				return err
			}
		}
		l.t.Segments = l.t.Segments[:i+1]
		break
	}
	return nil
}

// deleteSegment removes a segment's files and its snapshot, reporting the
// offsets dropped.
func (l *tabletLoader) deleteSegment(seg *segment.Segment, why string) error {
	next, err := seg.ReadNextOffset()
	if err != nil {
		next = seg.BaseOffset()
	}
	l.report(Change{File: seg.LogPath(), Action: Deleted, Bytes: seg.Size(), FromOffset: seg.BaseOffset(), ToOffset: next, Why: why})
	if err := seg.RemoveFiles(); err != nil {
		return err
	}
	snap := l.path(logfile.Filename(seg.BaseOffset(), logfile.Snapshot))
	if err := l.fsys.Remove(snap); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return l.fsys.SyncDir(l.t.Dir)
}

// checkLogStart is step 7: a log end below the log start checkpoint means
// segments were lost; every segment is deleted and the epochs cleared.
func (l *tabletLoader) checkLogStart() (int64, bool, error) {
	if len(l.t.Segments) == 0 {
		return 0, false, nil
	}
	end, err := l.active().ReadNextOffset()
	if err != nil {
		return 0, false, err
	}
	if end >= l.logStart {
		return end, true, nil
	}
	for _, seg := range l.t.Segments {
		why := fmt.Sprintf("the log end %d is below the log start %d: segment files were lost", end, l.logStart)
		if err := l.deleteSegment(seg, why); err != nil {
			return 0, false, err
		}
	}
	l.t.Segments = nil
	l.report(Change{File: l.t.Dir, Action: StateReset, Why: "the log restarts at the log start offset"})
	return 0, false, l.t.Epochs.Clear()
}

// prepareActive gives the active segment's indexes their room back (it
// takes appends) and reports indexes a crash left untrimmed.
func (l *tabletLoader) prepareActive() error {
	untrimmed, err := l.active().PrepareForAppends(l.opts.Segment.MaxIndexSize)
	for _, u := range untrimmed {
		l.report(Change{File: u.Path, Action: Ignored, Why: fmt.Sprintf(
			"%d slots after the %d valid entries were left untrimmed (ending at a %s)",
			u.Slots-u.Entries, u.Entries, u.StopReason)})
	}
	return err
}
