package tablet

import (
	"errors"
	"fmt"
	"time"

	"github.com/seglog/seglog/writerstate"

	"github.com/seglog/seglog/logfile"

	"github.com/seglog/seglog/segment"
)

// RetentionResult says what ApplyRetention deleted.
type RetentionResult struct {
	Segments int
	Bytes    int64
}

// ApplyRetention deletes the oldest segments that retention.ms,
// retention.bytes or the log start offset no longer keep (Kafka's
// deleteOldSegments): only whole segments, only below the high watermark,
// oldest first. If every segment goes, an empty one is rolled first so the
// log end is kept. A failed tablet (a full disk) has its sealed segments
// deleted all the same, freeing their space, and its active one kept.
func (t *Tablet) ApplyRetention() (RetentionResult, error) {
	if err := t.readOnlyErr(); err != nil {
		return RetentionResult{}, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.closed {
		return RetentionResult{}, ErrClosed
	}
	if t.remoteTier() != nil || t.tiered {
		// The tier applies retention and deletes what it holds; a tiered
		// tablet whose tier is not attached waits for it (local data may be
		// all there is of some offsets, and the log start is the tier's).
		return RetentionResult{}, nil
	}
	cfg := t.mu.cfg
	now := t.opts.Now().UnixMilli()
	v := t.view()
	var total int64
	t.mu.segs.Ascend(func(g *seg) bool { total += g.Size(); return true })

	var doomed []*seg
	var segs []*seg
	t.mu.segs.Ascend(func(g *seg) bool { segs = append(segs, g); return true })
	excess := total - cfg.RetentionBytes
	for i, g := range segs {
		upper := v.leo.offset
		if i+1 < len(segs) {
			upper = segs[i+1].base
		}
		if upper > v.hw.offset || (g == t.mu.active && g.Size() == 0) {
			break
		}
		byStart := upper <= v.logStart
		// retention.ms and retention.bytes apply to cleanup.policy delete
		// only; a compacted log keeps every key's last record.
		bySize := cfg.Deletes() && cfg.RetentionBytes >= 0 && excess-g.Size() >= 0
		byTime := false
		if cfg.Deletes() && cfg.RetentionMs >= 0 && g.acquire() {
			largest, err := g.LargestTimestamp()
			g.release()
			t.touch(g)
			if err != nil {
				return RetentionResult{}, err
			}
			byTime = now-largest > cfg.RetentionMs
		}
		if !byStart && !bySize && !byTime {
			break
		}
		excess -= g.Size()
		doomed = append(doomed, g)
	}
	if len(doomed) == 0 {
		return RetentionResult{}, nil
	}
	if doomed[len(doomed)-1] == t.mu.active {
		if t.mu.failed != nil { // no roll: the active segment stays
			if doomed = doomed[:len(doomed)-1]; len(doomed) == 0 {
				return RetentionResult{}, nil
			}
		} else if err := t.rollLocked(v.leo.offset, segment.RollNone); err != nil {
			return RetentionResult{}, err
		}
	}
	return t.deleteSegmentsLocked(doomed, "retention", false)
}

// deleteSegmentsLocked removes the oldest segments: the log start moves to
// the first remaining base (unless keepLogStart: a tier holds them, and
// only the local log start moves), the files are renamed .deleted at
// once, closed when their last reader goes and unlinked after
// file.delete.delay.ms.
func (t *Tablet) deleteSegmentsLocked(doomed []*seg, why string, keepLogStart bool) (RetentionResult, error) {
	var res RetentionResult
	for _, g := range doomed {
		t.dropSegLocked(g)
		res.Segments++
		res.Bytes += g.Size()
	}
	first, _ := t.mu.segs.Min()
	v := t.view()
	if !keepLogStart {
		v.logStart = max(v.logStart, first.base)
	}
	v.localStart = max(v.localStart, v.logStart, first.base)
	v.recoveryPoint = max(v.recoveryPoint, v.localStart) // nothing below it needs recovering (as Kafka)
	v.lso = t.lsoMarkLocked(v.hw, v.logStart)
	t.publishLocked(v) // readers no longer find them
	var errs []error
	if !keepLogStart {
		t.mu.state.OnLogStartOffsetIncremented(v.logStart)
		errs = append(errs, t.mu.epochs.TruncateFromStart(v.logStart))
	}
	for _, g := range doomed {
		errs = append(errs, t.retireSegmentLocked(g))
		t.opts.Logger.Info("deleted segment", "tablet", t.tp.String(), "base", g.base, "why", why)
	}
	errs = append(errs, t.mu.state.DeleteSnapshotsBefore(first.base))
	if err := errors.Join(errs...); err != nil {
		return res, t.failLocked(err)
	}
	return res, nil
}

// retireSegmentLocked renames a removed segment's files .deleted, closes
// them when no read holds them, and unlinks them file.delete.delay.ms
// later (or at the next load, if the process stops first).
func (t *Tablet) retireSegmentLocked(g *seg) error {
	if err := g.Delete(); err != nil {
		t.forget(g)
		return err
	}
	return t.retireRenamedLocked(g, true)
}

// retireRenamedLocked is retireSegmentLocked for a segment whose files are
// renamed .deleted already; its writer-state snapshot goes too unless a
// segment replacing it starts at its base (a cleaning's).
func (t *Tablet) retireRenamedLocked(g *seg, dropSnapshot bool) error {
	t.forget(g)
	if dropSnapshot {
		if _, err := t.mu.state.MarkSnapshotForDeletion(g.base); err != nil {
			return err
		}
	}
	snapshot := t.dir + "/" + logfile.FilenameWithSuffix(g.base, logfile.Snapshot, logfile.DeletedSuffix)
	log := func(err error) {
		t.opts.Logger.Error("removing a deleted segment", "tablet", t.tp.String(), "base", g.base, "err", err)
	}
	delay := time.Duration(t.mu.cfg.FileDeleteDelayMs) * time.Millisecond
	closeAndUnlinkLater := func() error {
		err := g.Close()
		t.opts.Scheduler.After(delay, func() {
			if err := errors.Join(g.RemoveFiles(), removeIfExists(t, snapshot)); err != nil {
				log(err)
			}
		})
		return err
	}
	return g.retire(closeAndUnlinkLater, log)
}

func removeIfExists(t *Tablet, path string) error {
	if err := t.fsys.Remove(path); err != nil {
		if _, serr := t.fsys.Stat(path); serr != nil {
			return nil
		}
		return err
	}
	return nil
}

// DeleteRecordsBefore moves the log start to offset (at most the high
// watermark) and deletes the segments wholly below it (Kafka's
// DeleteRecords). It returns the new log start.
func (t *Tablet) DeleteRecordsBefore(offset int64) (int64, error) {
	if err := t.readOnlyErr(); err != nil {
		return 0, err
	}
	start, moved, err := func() (int64, bool, error) {
		t.mu.Lock()
		defer t.mu.Unlock()
		if err := t.usableLocked(); err != nil {
			return 0, false, err
		}
		before := t.view().logStart
		start, err := t.deleteRecordsBeforeLocked(offset)
		return start, start > before, err
	}()
	if err == nil && moved {
		// The recovery point moved up with the log start, over records
		// perhaps not synced: the checkpoints say so at once, or a crash
		// would bring back the old log start above a hole recovery trusts.
		err = t.checkpointAfterTruncation()
	}
	return start, err
}

func (t *Tablet) deleteRecordsBeforeLocked(offset int64) (int64, error) {
	v := t.view()
	if offset > v.hw.offset {
		return v.logStart, fmt.Errorf("%w: %d is above the high watermark %d", ErrOffsetOutOfRange, offset, v.hw.offset)
	}
	if offset <= v.logStart {
		return v.logStart, nil
	}
	v.logStart = offset
	v.localStart = max(v.localStart, offset)
	v.recoveryPoint = max(v.recoveryPoint, v.localStart) // nothing below it needs recovering (as Kafka)
	v.lso = t.lsoMarkLocked(v.hw, v.logStart)
	t.publishLocked(v)
	t.mu.state.OnLogStartOffsetIncremented(offset)
	if err := t.mu.epochs.TruncateFromStart(offset); err != nil {
		return offset, t.failLocked(err)
	}
	var doomed []*seg
	var segs []*seg
	t.mu.segs.Ascend(func(g *seg) bool { segs = append(segs, g); return true })
	for i, g := range segs[:len(segs)-1] {
		if segs[i+1].base > offset {
			break
		}
		doomed = append(doomed, g)
	}
	if len(doomed) > 0 {
		if _, err := t.deleteSegmentsLocked(doomed, "records deleted", false); err != nil {
			return offset, err
		}
	}
	return offset, nil
}

// TruncateTo removes every record at or after offset (a follower
// truncating to its leader): the whole batch holding offset goes, so the
// log may end below it. The high watermark and recovery point follow it
// down; the writer state is rebuilt from its snapshots and the log.
// Below the first segment it is TruncateFullyAndStartAt. At or past the
// log end no record goes, but the leader epochs starting at the log end
// do (an epoch with no record: the cache says each record's epoch).
func (t *Tablet) TruncateTo(offset int64) error {
	truncated, err := t.truncateTo(offset)
	if err == nil && truncated {
		err = t.checkpointAfterTruncation()
	}
	return err
}

// checkpointAfterTruncation writes the manager's checkpoints at once
// after a truncation lowered the recovery point (the one on disk must not
// go on claiming as durable the offsets the truncation removed, which
// appends after it fill again with records not yet synced) or a deletion
// of records raised it with the log start (the old log start on disk
// would bring those records back as a hole): a crash would leave a hole
// recovery trusts.
func (t *Tablet) checkpointAfterTruncation() error {
	if t.afterTruncation == nil {
		return nil
	}
	return t.afterTruncation()
}

func (t *Tablet) truncateTo(offset int64) (bool, error) {
	if err := t.readOnlyErr(); err != nil {
		return false, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.usableLocked(); err != nil {
		return false, err
	}
	if v := t.view(); offset >= 0 && offset >= v.leo.offset {
		// Nothing to remove; but an epoch starting at the log end (a
		// leadership of this replica that appended nothing) goes: its
		// entry would claim the records fetched next, of an older epoch,
		// and the cache would no longer say each record's epoch.
		if err := t.mu.epochs.TruncateFromEnd(v.leo.offset); err != nil {
			return false, t.failLocked(err)
		}
		return false, nil
	}
	return true, t.truncateToLocked(offset)
}

func (t *Tablet) truncateToLocked(offset int64) error {
	defer t.truncating()()
	return t.truncateToBodyLocked(offset)
}

func (t *Tablet) truncateToBodyLocked(offset int64) error {
	if err := t.usableLocked(); err != nil {
		return err
	}
	v := t.view()
	if offset < 0 {
		return fmt.Errorf("%w: cannot truncate to %d", ErrOffsetOutOfRange, offset)
	}
	if offset >= v.leo.offset {
		return nil
	}
	first, _ := t.mu.segs.Min()
	if offset < first.base || offset < v.logStart {
		return t.truncateFullyBodyLocked(offset)
	}
	var doomed []*seg
	t.mu.segs.Descend(func(g *seg) bool {
		if g.base < offset || (g.base == offset && g == first) {
			return false
		}
		doomed = append(doomed, g)
		return true
	})
	for _, g := range doomed {
		t.dropSegLocked(g)
	}
	holder := floorSeg(t.mu.segs, offset)
	if !holder.acquire() { // it must not be parked while it becomes the active one
		return t.failLocked(fmt.Errorf("tablet: the segment at %d is gone", holder.base))
	}
	defer holder.release()
	holder.sealed.Store(false)
	holder.next.Store(-1)
	t.forget(holder)
	t.mu.active = holder
	v.leo = mark{offset: v.leo.offset, base: holder.base, pos: holder.Size()} // until the cut below
	v.hw, v.lso = v.leo, v.leo
	t.publishLocked(v) // readers no longer find the removed segments
	var errs []error
	for _, g := range doomed {
		errs = append(errs, t.retireSegmentLocked(g))
	}
	if _, err := holder.TruncateTo(offset); err != nil {
		errs = append(errs, err)
	}
	// A truncation is made durable at once, so that a crash does not bring
	// the records back (Kafka leaves that to the next flush).
	errs = append(errs, holder.Flush(), t.fsys.SyncDir(t.dir))
	// The whole batch holding offset went: the log may end below it.
	end, err := holder.ReadNextOffset()
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return t.failLocked(err)
	}
	return t.afterTruncationLocked(end, v)
}

// afterTruncationLocked publishes the offsets after a truncation to end
// and brings the epochs and writer state back to it.
func (t *Tablet) afterTruncationLocked(end int64, v view) error {
	if end < v.logStart {
		// The log start lay inside the batch that went: nothing is left
		// from it on. The log starts over there, as recovery would have it.
		return t.truncateFullyBodyLocked(v.logStart)
	}
	a := t.mu.active
	v.leo = mark{offset: end, base: a.base, pos: a.Size()}
	v.hw = v.leo
	if v.recoveryPoint > end {
		v.recoveryPoint = end
	}
	if err := t.mu.epochs.TruncateFromEnd(end); err != nil {
		return t.failLocked(err)
	}
	now := t.opts.Now().UnixMilli()
	var segs []writerstate.Source
	t.mu.segs.Ascend(func(g *seg) bool { segs = append(segs, g.Segment); return true })
	if err := t.mu.state.Rebuild(segs, v.logStart, end, false, now); err != nil {
		return t.failLocked(err)
	}
	v.lso = t.lsoMarkLocked(v.hw, v.logStart)
	t.publishLocked(v)
	t.flush.mu.Lock()
	t.flush.flushed = min(t.flush.flushed, end)
	t.flush.synced = min(t.flush.synced, end)
	t.durable.Store(t.flush.synced)
	t.flush.mu.Unlock()
	return nil
}

// TruncateFullyAndStartAt deletes every segment and starts the log empty
// at offset: log start, log end, high watermark and recovery point all
// move there; the epochs and the writer state are cleared.
func (t *Tablet) TruncateFullyAndStartAt(offset int64) error {
	if err := t.readOnlyErr(); err != nil {
		return err
	}
	err := func() error {
		t.mu.Lock()
		defer t.mu.Unlock()
		if err := t.usableLocked(); err != nil {
			return err
		}
		return t.truncateFullyLocked(offset)
	}()
	if err == nil {
		err = t.checkpointAfterTruncation()
	}
	return err
}

func (t *Tablet) truncateFullyLocked(offset int64) error {
	defer t.truncating()()
	return t.truncateFullyBodyLocked(offset)
}

// truncating marks a truncation under way until the function it returns
// is called: the count is odd meanwhile and changes with every truncation
// (a seqlock), so that a flush, which reads it without the tablet's lock,
// can tell that the log end it started from may since hold other records.
func (t *Tablet) truncating() func() {
	t.truncations.Add(1)
	return func() { t.truncations.Add(1) }
}

func (t *Tablet) truncateFullyBodyLocked(offset int64) error {
	if offset < 0 {
		return fmt.Errorf("%w: cannot start at %d", ErrOffsetOutOfRange, offset)
	}
	var doomed []*seg
	t.mu.segs.Ascend(func(g *seg) bool { doomed = append(doomed, g); return true })
	errs := []error{}
	for _, g := range doomed {
		t.dropSegLocked(g)
		errs = append(errs, t.retireSegmentLocked(g)) // renamed first: the new segment may take a base
	}
	s, err := segment.Create(t.fsys, t.dir, offset, t.segmentOptionsLocked())
	if err != nil {
		return t.failLocked(errors.Join(append(errs, err)...))
	}
	g := newSeg(s)
	err = t.fsys.SyncDir(t.dir) // durable at once, as TruncateTo
	g.named.Store(err == nil)
	errs = append(errs, err)
	t.putSegLocked(g)
	t.mu.active = g
	end := mark{offset: offset, base: offset}
	v := t.view()
	v.logStart, v.localStart, v.recoveryPoint = offset, offset, offset
	v.leo, v.hw, v.lso = end, end, end
	t.publishLocked(v)
	errs = append(errs, t.mu.epochs.Clear(), t.mu.state.TruncateFullyAndStartAt(offset))
	t.flush.mu.Lock()
	t.flush.flushed, t.flush.synced = offset, offset
	t.durable.Store(offset)
	t.flush.mu.Unlock()
	if err := errors.Join(errs...); err != nil {
		return t.failLocked(err)
	}
	return nil
}
