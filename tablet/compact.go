package tablet

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/cleaner"
	"github.com/seglog/seglog/logfile"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/segment"
)

var (
	// ErrNotCompacted is returned by Clean for a tablet whose
	// cleanup.policy does not hold compact.
	ErrNotCompacted = seglog.NewKafkaError("tablet: cleanup.policy does not hold compact", 40)
	// ErrCleaningAborted is returned when the segments a cleaning read
	// changed (a truncation, retention) before it could swap them: nothing
	// was replaced, and the next cleaning starts again.
	ErrCleaningAborted = seglog.NewKafkaError("tablet: cleaning aborted, its segments changed", -1)
)

// Cleanable describes how much of a compacted tablet a cleaning would
// read (Kafka's LogToClean): the clean section from the log start to
// FirstDirty, the dirty section from there to FirstUncleanable — whole
// sealed segments below the last stable offset, the recovery point and
// the first segment within min.compaction.lag.ms.
type Cleanable struct {
	FirstDirty       int64 `json:"firstDirtyOffset"`
	FirstUncleanable int64 `json:"firstUncleanableOffset"`
	CleanBytes       int64 `json:"cleanBytes"`
	DirtyBytes       int64 `json:"dirtyBytes"`
	// Ratio is DirtyBytes over CleanBytes + DirtyBytes (0 when both are 0).
	Ratio float64 `json:"dirtyRatio"`
	// Overdue says the first dirty batch is older than
	// max.compaction.lag.ms: the tablet is cleaned whatever its ratio.
	Overdue bool `json:"maxCompactionLagExceeded"`
}

// CleanOptions configure one cleaning.
type CleanOptions struct {
	// Map is the dedupe buffer (log.cleaner.dedupe.buffer.size); nil
	// gives one of DefaultDedupeBufferBytes.
	Map *cleaner.OffsetMap
	// Throttle bounds the cleaning's I/O; nil does not.
	Throttle *cleaner.Throttler
	// Stop, when closed, ends the cleaning between segments
	// (cleaner.ErrStopped).
	Stop <-chan struct{}
}

// DefaultDedupeBufferBytes is Kafka's log.cleaner.dedupe.buffer.size
// (128 MiB) and DefaultDedupeLoadFactor its
// log.cleaner.io.buffer.load.factor.
const (
	DefaultDedupeBufferBytes = 128 << 20
	DefaultDedupeLoadFactor  = 0.9
)

// CleanResult says what a cleaning did.
type CleanResult struct {
	cleaner.Stats
	Cleanable
	// CleanedTo is the cleaner's checkpoint after the cleaning: where the
	// next one's dirty section starts.
	CleanedTo int64         `json:"cleanedTo"`
	Took      time.Duration `json:"-"`
}

// CleanerCheckpoint returns where the dirty section starts (the
// cleaner-offset-checkpoint's entry), or -1 if the tablet was never
// cleaned.
func (t *Tablet) CleanerCheckpoint() int64 { return t.cleanedTo.Load() }

// SetCleanerCheckpoint sets it (its manager, from the checkpoint file).
func (t *Tablet) SetCleanerCheckpoint(o int64) {
	t.cleanedTo.Store(o)
	t.compacted.Store(true)
}

// cleanPlan is a cleaning's view of the tablet, taken under its lock.
type cleanPlan struct {
	Cleanable
	segs    []*seg // acquired: the cleanable segments, oldest first
	horizon int64
}

func (p *cleanPlan) release() {
	for _, g := range p.segs {
		g.release()
	}
	p.segs = nil
}

// Cleanable describes the tablet's clean and dirty sections now.
func (t *Tablet) Cleanable() (Cleanable, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.usableLocked(); err != nil {
		return Cleanable{}, err
	}
	p, err := t.planCleaningLocked()
	p.release()
	return p.Cleanable, err
}

func (t *Tablet) planCleaningLocked() (cleanPlan, error) {
	v := t.view()
	cfg := t.mu.cfg
	now := t.opts.Now().UnixMilli()
	firstDirty := t.cleanedTo.Load()
	if firstDirty < v.logStart || firstDirty > v.leo.offset {
		firstDirty = v.logStart
	}
	limit := min(v.lso.offset, t.mu.active.base, v.recoveryPoint)
	var all []*seg
	t.mu.segs.Ascend(func(g *seg) bool { all = append(all, g); return true })
	p := cleanPlan{Cleanable: Cleanable{FirstDirty: firstDirty}, horizon: math.MinInt64}
	var lastClean *seg
	for i, g := range all[:len(all)-1] {
		next := all[i+1].base
		if next > limit || !g.acquire() {
			break
		}
		p.segs = append(p.segs, g)
		if next <= firstDirty {
			p.CleanBytes += g.Size()
			lastClean = g
			continue
		}
		if cfg.MinCompactionLagMs > 0 {
			largest, err := g.LargestTimestamp()
			if err != nil {
				return p, err
			}
			if largest > now-cfg.MinCompactionLagMs {
				p.segs = p.segs[:len(p.segs)-1] // too young: neither it nor what follows
				g.release()
				break
			}
		}
		if p.DirtyBytes == 0 && cfg.MaxCompactionLagMs < math.MaxInt64 {
			first, err := firstBatchTimestamp(g)
			if err != nil {
				return p, err
			}
			p.Overdue = first >= 0 && now-first > cfg.MaxCompactionLagMs
		}
		p.DirtyBytes += g.Size()
	}
	// Tombstones and removable markers older than delete.retention.ms
	// before the clean section's end go.
	if lastClean != nil {
		largest, err := lastClean.LargestTimestamp()
		if err != nil {
			return p, err
		}
		if largest >= 0 {
			p.horizon = largest - cfg.DeleteRetentionMs
		}
	}
	p.FirstUncleanable = firstDirty
	if n := len(p.segs); n > 0 {
		p.FirstUncleanable = max(firstDirty, all[n].base)
	}
	if total := p.CleanBytes + p.DirtyBytes; total > 0 {
		p.Ratio = float64(p.DirtyBytes) / float64(total)
	}
	return p, nil
}

// firstBatchTimestamp is the max timestamp of a segment's first batch
// (Kafka's getFirstBatchTimestamp), or -1.
func firstBatchTimestamp(g *seg) (int64, error) {
	ts := int64(-1)
	stop := errors.New("stop")
	err := g.Batches(g.base, segment.NoMaxPosition, func(b record.Batch) error {
		ts = b.MaxTimestamp()
		return stop
	})
	if err == stop {
		err = nil
	}
	return ts, err
}

// Clean runs one cleaning of a compacted tablet: it maps the last offset
// of every key in the dirty section, then recopies the log from its start
// into cleaned segments, swapping each group in with Kafka's protocol —
// the new files written as .cleaned and synced, renamed .swap (directory
// synced), the old ones renamed .deleted (synced), the .swap renamed into
// place (synced) — so that a crash at any point leaves the old segments or
// the new ones, which recovery completes. Appends and reads go on
// meanwhile; reads in flight keep reading the old segments. It cleans
// whatever is dirty; the manager's cleaner picks tablets by their dirty
// ratio.
func (t *Tablet) Clean(o CleanOptions) (CleanResult, error) {
	if err := t.readOnlyErr(); err != nil {
		return CleanResult{}, err
	}
	start := time.Now()
	t.cleanMu.Lock()
	defer t.cleanMu.Unlock()

	t.mu.Lock()
	if err := t.usableLocked(); err != nil {
		t.mu.Unlock()
		return CleanResult{}, err
	}
	cfg := t.mu.cfg
	switch {
	case !cfg.Compacted():
		t.mu.Unlock()
		return CleanResult{}, fmt.Errorf("%w: %s is %s", ErrNotCompacted, t.tp, cfg.CleanupPolicy)
	case t.tiered || t.remoteTier() != nil:
		t.mu.Unlock()
		return CleanResult{}, fmt.Errorf("%w: %s is tiered, and a tiered tablet is not compacted", ErrNotCompacted, t.tp)
	}
	p, err := t.planCleaningLocked()
	defer p.release()
	if err != nil {
		t.mu.Unlock()
		return CleanResult{}, err
	}
	res := CleanResult{Cleanable: p.Cleanable, CleanedTo: p.FirstDirty}
	if p.FirstUncleanable <= p.FirstDirty {
		t.mu.Unlock()
		res.Took = time.Since(start)
		return res, nil // nothing dirty
	}
	log := &cleaner.Log{FirstDirty: p.FirstDirty, End: p.FirstUncleanable, DeleteHorizonMs: p.horizon,
		Producers: map[int64]cleaner.Producer{}}
	for _, g := range p.segs {
		log.Segments = append(log.Segments, g.Segment)
	}
	for _, e := range t.mu.state.Producers() {
		log.Producers[e.ProducerID] = cleaner.Producer{LastDataOffset: e.LastDataOffset(), Epoch: e.Epoch}
	}
	segOpts := t.segmentOptionsLocked()
	truncations := t.truncations.Load() // even: no truncation runs, mu is held
	v := t.view()
	t.mu.Unlock()

	// The aborted transactions overlapping the log below End, as a read
	// collects them (an abort is indexed in its marker's segment, which
	// may be any later one). Their markers are all written (End is at or
	// below the last stable offset), so the published segments, without
	// the tablet's lock, have them all.
	if first, ok := v.segs.Min(); ok && first.acquire() {
		var err error
		if log.Aborted, err = t.localAbortedTxns(nil, v.segs, first, true, v.logStart, log.End); err != nil {
			return res, err
		}
	}
	m := o.Map
	if m == nil {
		m = cleaner.NewOffsetMap(DefaultDedupeBufferBytes, DefaultDedupeLoadFactor)
	}
	copts := &cleaner.Options{FS: t.fsys, Dir: t.dir, Segment: segOpts, Map: m, Throttle: o.Throttle, Stop: o.Stop}
	end, err := cleaner.BuildMap(log, copts, &res.Stats)
	if err == nil {
		err = cleaner.Recopy(log, end, copts, t.swapCleaned(truncations), &res.Stats)
	}
	res.Took = time.Since(start)
	if err != nil {
		return res, err
	}
	t.cleanedTo.Store(end)
	res.CleanedTo = end
	// Publish once more, with the checkpoint moved: a waiter on Changed
	// that saw the last swap before the checkpoint moved sees both now.
	t.mu.Lock()
	if t.usableLocked() == nil {
		t.publishLocked(t.view())
	}
	t.mu.Unlock()
	t.stats.cleanings.Add(1)
	t.stats.cleanedRead.Add(res.MapBytesRead + res.BytesRead)
	t.stats.cleanedWritten.Add(res.BytesWritten)
	t.stats.cleanedRemoved.Add(res.RecordsRemoved)
	t.opts.Logger.Info("cleaned", "tablet", t.tp.String(), "from", p.FirstDirty, "to", end,
		"read", res.BytesRead, "written", res.BytesWritten, "removed", res.RecordsRemoved, "took", res.Took)
	return res, nil
}

// swapCleaned returns the cleaner's Swap: under the tablet's lock, the
// cleaned segment replaces its sources if they are all still there.
func (t *Tablet) swapCleaned(truncations int64) cleaner.Swap {
	return func(sources []*segment.Segment, cleaned *segment.Segment) error {
		t.mu.Lock()
		defer t.mu.Unlock()
		if err := t.usableLocked(); err != nil {
			return err
		}
		if t.truncations.Load() != truncations {
			return fmt.Errorf("%w: a truncation ran", ErrCleaningAborted)
		}
		old := make([]*seg, 0, len(sources))
		for _, s := range sources {
			g, ok := t.mu.segs.Get(&seg{base: s.BaseOffset()})
			if !ok || g.Segment != s {
				return fmt.Errorf("%w: the segment at %d is gone", ErrCleaningAborted, s.BaseOffset())
			}
			old = append(old, g)
		}
		// The directory syncs below would make the names of writer-state
		// snapshots written without a sync (a roll's) durable without
		// their contents: they are synced first.
		if err := t.mu.state.SyncSnapshots(); err != nil {
			return t.failLocked(err)
		}
		if err := cleaned.ChangeSuffix(logfile.CleanedSuffix, logfile.SwapSuffix); err != nil {
			return err // the caller removes the cleaned files
		}
		// From here recovery would complete the replacement: a failure
		// fails the tablet, and reopening it does.
		fail := func(err error) error {
			return t.failLocked(fmt.Errorf("tablet: swapping in a cleaned segment: %w", err))
		}
		if err := t.fsys.SyncDir(t.dir); err != nil {
			return fail(err)
		}
		for _, g := range old {
			t.dropSegLocked(g)
			if err := g.Delete(); err != nil {
				return fail(err)
			}
		}
		if err := t.fsys.SyncDir(t.dir); err != nil {
			return fail(err)
		}
		if err := cleaned.ChangeSuffix(logfile.SwapSuffix, ""); err != nil {
			return fail(err)
		}
		if err := t.fsys.SyncDir(t.dir); err != nil {
			return fail(err)
		}
		g := newSeg(cleaned)
		g.sealed.Store(true)
		g.named.Store(true)
		if next, err := cleaned.ReadNextOffset(); err == nil {
			g.next.Store(next)
		}
		t.putSegLocked(g)
		t.publishLocked(t.view())
		var errs []error
		for _, o := range old {
			errs = append(errs, t.retireRenamedLocked(o, o.base != g.base))
		}
		t.touch(g)
		if err := errors.Join(errs...); err != nil {
			return fail(err)
		}
		return nil
	}
}
