package tablet

import (
	"cmp"
	"errors"
	"slices"
	"sync"
	"time"
)

// flusher runs one flush at a time and lets concurrent callers share it:
// a caller that needs offset o durable waits for a flush in progress, and
// starts the next one only if that did not cover o (group commit).
//
// Sync callers also gather before a sync. A sync costs about the same for
// one append as for several, and closed-loop producers — each waiting for
// its append's sync before its next append — come back within
// microseconds of being released. A sync started as soon as the last one
// ended covers only the producers that arrived during it, and they split
// into two cohorts each syncing half of them; so the next sync waits until
// as many callers wait for it as waited together at the end of the last
// (group), or until half the last sync's time has passed. A gathering that
// times out lowers the group to those who came: a producer that left
// costs one wait.
type flusher struct {
	mu      sync.Mutex
	cond    *sync.Cond
	flushed int64 // everything below it is durable, indexes and snapshots too: the recovery point
	synced  int64 // the records below it are durable (≥ flushed): what Sync appends wait for
	running bool
	fsyncs  int64 // flushes run, for metrics and tests
	// waits holds the offset each Sync caller waiting now needs synced;
	// group is how many of them a sync gathers. A gathering is open from
	// its generation's start until a sync starts; expired says its timer
	// fired.
	waits     []int64
	group     int
	gathering bool
	expired   bool
	gen       int64
	lastSync  time.Duration
	maxGather time.Duration // bounds a gathering; defaultMaxGather unless a test sets it
	lastErr   error
	onWait    func() // a test hook: a caller starts waiting for a flush (once per call)
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
	if !full {
		f.waits = append(f.waits, o)
		defer f.leave(o)
	}
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
			// A waiting Sync caller runs the sync itself when the group
			// has gathered (or its time is up): it waits for that sync
			// anyway, and no other goroutine must first be woken.
			if full || f.gatheredLocked() {
				if err := t.runFlushLocked(full); err != nil {
					return err
				}
				continue
			}
			t.openGatheringLocked()
		}
		if !waited && f.onWait != nil {
			f.onWait()
		}
		waited = true
		f.cond.Wait()
	}
}

// leave removes a Sync caller's wait.
func (f *flusher) leave(o int64) {
	if i := slices.Index(f.waits, o); i >= 0 {
		f.waits = slices.Delete(f.waits, i, i+1)
	}
}

// gatheredLocked says a sync may start: as many callers wait for offsets
// not synced yet as the group, or the gathering's time is up (and the
// group shrinks to those who came).
func (f *flusher) gatheredLocked() bool {
	n := 0
	for _, o := range f.waits {
		if o > f.synced {
			n++
		}
	}
	if f.expired {
		f.group = max(1, n)
	}
	return n >= f.group || f.expired
}

// openGatheringLocked starts the timer of a gathering if none is open.
func (t *Tablet) openGatheringLocked() {
	f := &t.flush
	if f.gathering {
		return
	}
	f.gathering = true
	f.gen++
	gen := f.gen
	time.AfterFunc(min(f.lastSync/2, cmp.Or(f.maxGather, defaultMaxGather)), func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.gen == gen && f.gathering {
			f.expired = true
			f.cond.Broadcast()
		}
	})
}

// defaultMaxGather bounds how long a sync waits for its callers to gather.
const defaultMaxGather = 2 * time.Millisecond

// runFlushLocked runs one flush with f.mu released, and publishes what it
// made durable.
func (t *Tablet) runFlushLocked(full bool) error {
	f := &t.flush
	f.running = true
	if !full {
		f.gathering, f.expired = false, false
		f.gen++ // the open gathering's timer finds another generation
	}
	f.mu.Unlock()
	start := time.Now()
	covered, err := t.flushSegments(full)
	took := time.Since(start)
	f.mu.Lock()
	f.running = false
	f.fsyncs++
	if !full {
		f.lastSync = took
		// Everyone waiting now, released by this sync or not, is likely
		// to wait together for a later one.
		f.group = max(f.group, len(f.waits))
	}
	if err == nil {
		f.synced = max(f.synced, covered)
		t.durable.Store(f.synced)
		if full {
			f.flushed = max(f.flushed, covered)
		}
	} else {
		f.lastErr = err
	}
	f.cond.Broadcast()
	return err
}

// flushSegments fsyncs every dirty segment below the log end (and the
// writer-state snapshots below it), then the directory if a segment or
// snapshot was created since the last flush, and moves the recovery point. It returns
// the offset everything below which is now durable: the log end it
// started at, or less if a truncation ran meanwhile (the offsets it flushed may since hold other
// records). A failure makes the tablet fail: the kernel may have dropped
// the pages.
func (t *Tablet) flushSegments(full bool) (int64, error) {
	t.mu.Lock()
	if err := t.usableLocked(); err != nil {
		t.mu.Unlock()
		return 0, err
	}
	truncations := t.mu.truncations
	target := t.view().leo.offset // everything appended by now
	// Segments wholly below the recovery point were synced by the full
	// flush that moved it there, or loaded clean: the walk starts at the
	// one holding it, not at the oldest of possibly thousands.
	var segs []*seg
	from := pivot(0)
	if g := floorSeg(t.mu.segs, t.view().recoveryPoint); g != nil {
		from.base = g.base
	}
	t.mu.segs.AscendGreaterOrEqual(from, func(g *seg) bool {
		if g.base >= target {
			return false
		}
		if ((full && g.dirty.Load()) || g.unsynced.Load() || !g.named.Load()) && g.acquire() {
			segs = append(segs, g)
		}
		return true
	})
	pivots.Put(from)
	// Every snapshot below the target written without fsync — at a roll,
	// by a truncation's rebuild, by recovery — is synced before the
	// recovery point moves past it.
	var snaps []int64
	if full {
		snaps = t.mu.state.UnsyncedSnapshots(target)
	}
	state := t.mu.state
	t.mu.Unlock()

	start := time.Now()
	defer func() { t.stats.fsyncSeconds.observe(time.Since(start)) }()
	var errs []error
	for _, o := range snaps {
		errs = append(errs, state.SyncSnapshot(o))
	}
	newFile := len(snaps) > 0 // a new snapshot's name needs the directory synced
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
	err := errors.Join(errs...)
	for _, g := range segs {
		if err == nil {
			g.named.Store(true)
		}
		g.release()
		t.touch(g) // a flush may have reopened a parked segment
	}

	t.mu.Lock()
	defer t.mu.Unlock()
	if err != nil {
		for _, g := range segs {
			g.unsynced.Store(true)
			if full {
				g.dirty.Store(true)
			}
		}
		return 0, t.failLocked(err)
	}
	if t.mu.truncations != truncations {
		return 0, nil // the caller looks again at the log end as it is now
	}
	if !full {
		return target, nil
	}
	t.lastFlushMs.Store(t.opts.Now().UnixMilli())
	v := t.view()
	if target > v.recoveryPoint {
		v.recoveryPoint = target
		t.publishLocked(v)
	}
	return target, nil
}

// FsyncCount returns how many flushes the tablet has run.
func (t *Tablet) FsyncCount() int64 {
	t.flush.mu.Lock()
	defer t.flush.mu.Unlock()
	return t.flush.fsyncs
}
