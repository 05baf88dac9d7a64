package tablet

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/cleaner"
)

// CleanerOptions configure a manager's log cleaner, under Kafka's broker
// names.
type CleanerOptions struct {
	// Disable turns the cleaner off (log.cleaner.enable=false). The
	// default is false: compacted tablets are cleaned.
	Disable bool
	// Threads is how many tablets are cleaned at once
	// (log.cleaner.threads). The default is 1.
	Threads int
	// DedupeBufferBytes is the memory of the offset maps, shared by the
	// threads (log.cleaner.dedupe.buffer.size). The default is 128 MiB.
	DedupeBufferBytes int64
	// IOMaxBytesPerSecond bounds each thread's reads and writes
	// (log.cleaner.io.max.bytes.per.second); 0 does not. The default is
	// 0.
	IOMaxBytesPerSecond float64
	// Backoff is how long a thread sleeps when no tablet needs cleaning
	// (log.cleaner.backoff.ms). The default is 15 s.
	Backoff time.Duration
}

func (o *CleanerOptions) validate() error {
	if o.Threads < 1 || o.DedupeBufferBytes/int64(o.Threads) < 2*cleaner.EntryBytes || o.IOMaxBytesPerSecond < 0 {
		return fmt.Errorf("%w: the cleaner needs a thread and a dedupe buffer of at least %d bytes per thread, and a rate not negative",
			ErrConfig, 2*cleaner.EntryBytes)
	}
	return nil
}

func (o *CleanerOptions) ensureDefaults() {
	if o.Threads <= 0 {
		o.Threads = 1
	}
	if o.DedupeBufferBytes <= 0 {
		o.DedupeBufferBytes = DefaultDedupeBufferBytes
	}
	if o.Backoff <= 0 {
		o.Backoff = 15 * time.Second
	}
}

// cleanerThread is one of the manager's cleaners: its offset map is made
// at its first cleaning and kept.
type cleanerThread struct {
	m   *Manager
	off *cleaner.OffsetMap
}

func (m *Manager) newCleanerThread() *cleanerThread { return &cleanerThread{m: m} }

// cleaning holds the tablets a cleaner thread has taken.
type cleaning struct {
	mu   sync.Mutex // guards busy
	busy map[*Tablet]bool
}

// runOnce cleans tablets, the dirtiest first, until none needs it; a
// failure is logged and ends the round (the next one tries again).
func (c *cleanerThread) runOnce() {
	if _, err := c.round(); err != nil && !errors.Is(err, cleaner.ErrStopped) && !errors.Is(err, ErrClosed) {
		c.m.opts.Tablet.Logger.Error("cleaning", "err", err)
	}
}

func (c *cleanerThread) round() (map[checkpoint.TopicPartition]CleanResult, error) {
	out := map[checkpoint.TopicPartition]CleanResult{}
	for {
		t := c.m.takeDirtiest()
		if t == nil {
			return out, nil
		}
		res, err := c.clean(t)
		c.m.cleaning.mu.Lock()
		delete(c.m.cleaning.busy, t)
		c.m.cleaning.mu.Unlock()
		if err != nil {
			return out, fmt.Errorf("%s: %w", t.tp, err)
		}
		out[t.tp] = res
	}
}

func (c *cleanerThread) clean(t *Tablet) (CleanResult, error) {
	if c.off == nil {
		o := c.m.opts.Cleaner
		c.off = cleaner.NewOffsetMap(o.DedupeBufferBytes/int64(o.Threads), DefaultDedupeLoadFactor)
	}
	res, err := t.Clean(CleanOptions{Map: c.off, Throttle: cleaner.NewThrottler(c.m.opts.Cleaner.IOMaxBytesPerSecond), Stop: c.m.stop})
	if err != nil {
		return res, err
	}
	return res, c.m.Checkpoint() // the cleaner-offset-checkpoint, as Kafka writes it after each cleaning
}

// CleanDirty runs one round of the cleaner now: every compacted tablet
// whose dirty ratio reaches its min.cleanable.dirty.ratio (or that is
// overdue by max.compaction.lag.ms) is cleaned, the dirtiest first, and
// the checkpoints written. It returns what each cleaning did.
func (m *Manager) CleanDirty() (map[checkpoint.TopicPartition]CleanResult, error) {
	if m.opts.ReadOnly {
		return nil, ErrReadOnly
	}
	return m.newCleanerThread().round()
}

// takeDirtiest picks the compacted tablet to clean (Kafka's
// LogCleanerManager.grabFilthiestCompactedLog): the one overdue by
// max.compaction.lag.ms, else the one with the highest dirty ratio at or
// above its min.cleanable.dirty.ratio; and marks it taken.
func (m *Manager) takeDirtiest() *Tablet {
	m.cleaning.mu.Lock()
	defer m.cleaning.mu.Unlock()
	if m.cleaning.busy == nil {
		m.cleaning.busy = map[*Tablet]bool{}
	}
	var best *Tablet
	var bestC Cleanable
	for _, t := range m.Tablets() {
		cfg := t.Config()
		if !cfg.Compacted() || t.tiered || m.cleaning.busy[t] {
			continue
		}
		c, err := t.Cleanable()
		if err != nil || c.DirtyBytes == 0 || (c.Ratio < cfg.MinCleanableDirtyRatio && !c.Overdue) {
			continue
		}
		if best == nil || (c.Overdue && !bestC.Overdue) || (c.Overdue == bestC.Overdue && c.Ratio > bestC.Ratio) {
			best, bestC = t, c
		}
	}
	if best != nil {
		m.cleaning.busy[best] = true
	}
	return best
}
