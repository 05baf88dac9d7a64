package tablet

import (
	"errors"
	"sync"
	"time"

	"github.com/google/btree"
	"github.com/seglog/seglog/leaderepoch"
	"github.com/seglog/seglog/writerstate"
)

// flusher runs one flush at a time and lets concurrent callers share it:
// a caller that needs offset o durable waits for a flush in progress, and
// starts the next one only if that did not cover o (group commit).
//
// The syncs are pipelined: when one returns, a caller it did not cover —
// one that appended while it ran — starts the next at once, while the
// callers it covered are being released. Nothing waits for a gathering:
// the appends of the producers just released are written while the next
// sync runs, so the disk is never idle while someone waits for it and the
// CPU's work (copying, checksumming) overlaps the device's. Closed-loop
// producers settle into cohorts that alternate between two syncs, each
// sync covering everything appended while the one before ran.
type flusher struct {
	mu      sync.Mutex // guards flushed, synced, running, fsyncs and lastErr
	cond    *sync.Cond
	flushed int64 // everything below it is durable, indexes and snapshots too: the recovery point
	synced  int64 // the records below it are durable (≥ flushed): what Sync appends wait for
	running bool
	fsyncs  int64 // flushes run, for metrics and tests
	lastErr error
	onWait  func() // a test hook: a caller starts waiting for a flush (once per call)
}

// Flush makes everything appended so far durable and moves the recovery
// point to the log end.
func (t *Tablet) Flush() error {
	return t.flushTo(t.view().leo.offset)
}

// flushTo makes every offset below o durable — records, indexes, writer
// snapshots — and moves the recovery point, sharing a flush with
// concurrent callers.
func (t *Tablet) flushTo(o int64) error { return t.flushUpTo(o, true) }

// syncTo makes the records below o durable: only the .log files are
// synced (and the directory for a new one). A Sync append waits for this:
// the recovery point stays, and a crash makes recovery read the records
// again from it, rebuilding their indexes and writer state. One fdatasync
// instead of three per segment is what lets a durable append approach a
// raw write + fdatasync.
func (t *Tablet) syncTo(o int64) error { return t.flushUpTo(o, false) }

func (t *Tablet) flushUpTo(o int64, full bool) error {
	f := &t.flush
	f.mu.Lock()
	defer f.mu.Unlock()
	waited := false
	for {
		// A truncation may have taken the log end below o since.
		done := f.synced
		if full {
			done = f.flushed
		}
		if done >= min(o, t.view().leo.offset) {
			return nil
		}
		if f.lastErr != nil {
			return f.lastErr
		}
		if !f.running {
			// The caller runs the sync itself: it waits for that sync
			// anyway, and no other goroutine must first be woken.
			if err := t.runFlushLocked(full); err != nil {
				return err
			}
			continue
		}
		if !waited && f.onWait != nil {
			f.onWait()
		}
		waited = true
		f.cond.Wait()
	}
}

// runFlushLocked runs one flush with f.mu released, and publishes what it
// made durable — unless a truncation started since the flush read the log
// end (the offsets it covered may since hold other records; the
// truncation lowers what is durable under f.mu, so one that starts after
// this check finds what it publishes).
func (t *Tablet) runFlushLocked(full bool) error {
	f := &t.flush
	f.running = true
	f.mu.Unlock()
	covered, truncations, err := t.flushSegments(full)
	f.mu.Lock()
	f.running = false
	f.fsyncs++
	switch {
	case err != nil:
		f.lastErr = err
	case t.truncations.Load() == truncations:
		f.synced = max(f.synced, covered)
		t.durable.Store(f.synced)
		if full {
			f.flushed = max(f.flushed, covered)
		}
	}
	f.cond.Broadcast()
	return err
}

// flushSegments fsyncs every dirty segment below the log end (and the
// writer-state snapshots below it), then the directory if a segment or
// snapshot was created since the last flush, and moves the recovery point.
// It returns the log end it started at, everything below which is now
// durable, with the truncation count it read before: a truncation since
// may have removed those offsets. A failure makes the tablet fail: the
// kernel may have dropped the pages.
func (t *Tablet) flushSegments(full bool) (int64, int64, error) {
	p, err := t.flushTargets(full)
	if err != nil {
		return 0, 0, err
	}
	segs, target, truncations := p.segs, p.target, p.truncations
	start := time.Now()
	defer func() { t.stats.fsyncSeconds.observe(time.Since(start)) }()
	var errs []error
	for _, o := range p.snaps {
		errs = append(errs, p.state.SyncSnapshot(o))
	}
	if p.epochs != nil {
		errs = append(errs, p.epochs.Flush())
	}
	newFile := len(p.snaps) > 0 // a new snapshot's name needs the directory synced
	for _, g := range segs {
		// Cleared before the fsync: an append during it sets them again.
		g.unsynced.Store(false)
		if full {
			g.dirty.Store(false)
			errs = append(errs, g.Segment.Flush())
		} else {
			errs = append(errs, g.Segment.FlushLog())
		}
		newFile = newFile || !g.named.Load()
	}
	if newFile {
		errs = append(errs, t.fsys.SyncDir(t.dir))
	}
	err = errors.Join(errs...)
	for _, g := range segs {
		if err == nil {
			g.named.Store(true)
		}
		g.release()
		t.touch(g) // a flush may have reopened a parked segment
	}
	if err != nil {
		t.mu.Lock()
		defer t.mu.Unlock()
		for _, g := range segs {
			g.unsynced.Store(true)
			if full {
				g.dirty.Store(true)
			}
		}
		return 0, 0, t.failLocked(err)
	}
	if !full {
		return target, truncations, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.truncations.Load() != truncations {
		return 0, truncations, nil // the caller looks again at the log end as it is now
	}
	if err := t.usableLocked(); err != nil {
		// Failed (or closed) during the fsyncs: what the view says may no
		// longer match the segments (a roll that failed half-way left its
		// new segment in the tree), so nothing is published.
		return 0, truncations, err
	}
	t.lastFlushMs.Store(t.opts.Now().UnixMilli())
	v := t.view()
	if target > v.recoveryPoint {
		v.recoveryPoint = target
		t.publishLocked(v)
	}
	return target, truncations, nil
}

// flushPlan is what a flush syncs: the segments that may hold unsynced
// bytes below the log end (acquired); for a full flush the writer-state
// snapshots written without fsync and the leader-epoch cache (whose
// lazily assigned epochs are written before the recovery point passes
// them: recovery rebuilds them only above it); the log end; and the
// truncation count read before it.
type flushPlan struct {
	segs                []*seg
	snaps               []int64
	state               *writerstate.State
	epochs              *leaderepoch.Cache
	target, truncations int64
}

// flushTargets returns the flush's plan. A sync of the records alone reads
// them from the published view without the tablet's lock, which appends
// hold while they write: the next sync starts at once, not after them.
// While a truncation runs, or once the tablet failed or closed, it takes
// the lock.
func (t *Tablet) flushTargets(full bool) (flushPlan, error) {
	if !full {
		truncations := t.truncations.Load()
		if truncations%2 == 0 && !t.unusable.Load() {
			v := t.view()
			return flushPlan{segs: t.syncable(v.segs, v.recoveryPoint, v.leo.offset, false),
				target: v.leo.offset, truncations: truncations}, nil
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.usableLocked(); err != nil {
		return flushPlan{}, err
	}
	p := flushPlan{truncations: t.truncations.Load(), // even: mu is held
		target: t.view().leo.offset} // everything appended by now
	if full {
		// Every snapshot below the target written without fsync — at a
		// roll, by a truncation's rebuild, by recovery — is synced before
		// the recovery point moves past it.
		p.snaps, p.state, p.epochs = t.mu.state.UnsyncedSnapshots(p.target), t.mu.state, t.mu.epochs
	}
	p.segs = t.syncable(t.mu.segs, t.view().recoveryPoint, p.target, full)
	return p, nil
}

// syncable acquires the segments of segs below target a flush must sync.
// Segments wholly below the recovery point were synced by the full flush
// that moved it there, or loaded clean: the walk starts at the one holding
// it, not at the oldest of possibly thousands.
func (t *Tablet) syncable(segs *btree.BTreeG[*seg], recoveryPoint, target int64, full bool) []*seg {
	var out []*seg
	from := pivot(0)
	if g := floorSeg(segs, recoveryPoint); g != nil {
		from.base = g.base
	}
	segs.AscendGreaterOrEqual(from, func(g *seg) bool {
		if g.base >= target {
			return false
		}
		if ((full && g.dirty.Load()) || g.unsynced.Load() || !g.named.Load()) && g.acquire() {
			out = append(out, g)
		}
		return true
	})
	pivots.Put(from)
	return out
}

// FsyncCount returns how many flushes the tablet has run.
func (t *Tablet) FsyncCount() int64 {
	t.flush.mu.Lock()
	defer t.flush.mu.Unlock()
	return t.flush.fsyncs
}
