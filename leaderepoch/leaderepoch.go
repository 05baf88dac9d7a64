// Package leaderepoch is a tablet's leader-epoch cache: for each leader
// epoch, the first offset written in it, persisted to the tablet's
// leader-epoch-checkpoint. Followers use it to find where their log and the
// leader's diverge; recovery rebuilds it from the batches' leader epochs.
package leaderepoch

import (
	"cmp"
	"fmt"
	"slices"
	"sync"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/vfs"
)

// Undefined is the epoch, and the offset, answered when none is known.
const Undefined = -1

// Entry is an epoch and its start offset.
type Entry = checkpoint.EpochEntry

// Cache is a leader-epoch cache. It is safe for concurrent use; every
// change is written to the checkpoint before it returns, but AssignLazy's.
type Cache struct {
	fsys vfs.FS
	path string

	mu      sync.RWMutex // guards entries and dirty
	entries []Entry      // increasing in both epoch and start offset
	dirty   bool         // an AssignLazy not written yet
}

// Open reads the cache from the checkpoint at path (a missing file is an
// empty cache).
func Open(fsys vfs.FS, path string) (*Cache, error) {
	fsys = vfs.OrOS(fsys)
	entries, err := checkpoint.ReadEpochs(fsys, path)
	if err != nil {
		return nil, err
	}
	c := &Cache{fsys: fsys, path: path}
	for _, e := range entries {
		c.assignLocked(e)
	}
	return c, nil
}

// Entries returns the entries, oldest first.
func (c *Cache) Entries() []Entry {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return slices.Clone(c.entries)
}

// Assign records that epoch starts at startOffset, unless the latest entry
// already says so. Entries at or above epoch, or starting at or after
// startOffset, are dropped first, to keep both columns increasing.
func (c *Cache) Assign(epoch int32, startOffset int64) error {
	if epoch < 0 || startOffset < 0 {
		return fmt.Errorf("leaderepoch: invalid entry (epoch %d, start offset %d)", epoch, startOffset)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.assignLocked(Entry{Epoch: epoch, StartOffset: startOffset}) {
		return nil
	}
	return c.flushLocked()
}

// AssignLazy is Assign for an epoch a batch of the log carries: the
// checkpoint is written by the next Flush (or any change after), not now.
// A crash before loses nothing recovery cannot find again: it rebuilds
// the entries from the leader epochs of the batches it replays, and the
// tablet flushes the cache before its recovery point passes the entry.
// So the first append of every epoch costs no write, fsync and rename.
func (c *Cache) AssignLazy(epoch int32, startOffset int64) error {
	if epoch < 0 || startOffset < 0 {
		return fmt.Errorf("leaderepoch: invalid entry (epoch %d, start offset %d)", epoch, startOffset)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.assignLocked(Entry{Epoch: epoch, StartOffset: startOffset}) {
		c.dirty = true
	}
	return nil
}

// Flush writes the checkpoint if an AssignLazy left it behind.
func (c *Cache) Flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.dirty {
		return nil
	}
	return c.flushLocked()
}

func (c *Cache) assignLocked(e Entry) bool {
	if n := len(c.entries); n > 0 {
		if last := c.entries[n-1]; e.Epoch == last.Epoch && e.StartOffset >= last.StartOffset {
			return false
		}
	}
	for n := len(c.entries); n > 0 && (c.entries[n-1].Epoch >= e.Epoch || c.entries[n-1].StartOffset >= e.StartOffset); n-- {
		c.entries = c.entries[:n-1]
	}
	c.entries = append(c.entries, e)
	return true
}

// LatestEpoch returns the newest epoch.
func (c *Cache) LatestEpoch() (int32, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if len(c.entries) == 0 {
		return Undefined, false
	}
	return c.entries[len(c.entries)-1].Epoch, true
}

// EarliestEntry returns the oldest entry.
func (c *Cache) EarliestEntry() (Entry, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if len(c.entries) == 0 {
		return Entry{}, false
	}
	return c.entries[0], true
}

// EpochForOffset returns the epoch offset was written in: that of the
// latest entry starting at or before it.
func (c *Cache) EpochForOffset(offset int64) (int32, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	i, _ := slices.BinarySearchFunc(c.entries, offset+1, func(e Entry, o int64) int { return cmp.Compare(e.StartOffset, o) })
	if i == 0 {
		return Undefined, false
	}
	return c.entries[i-1].Epoch, true
}

// EndOffsetFor returns, for a follower asking about epoch, the epoch it
// should use and the offset where that epoch ends: logEnd for the latest
// epoch; for an older one, the epoch itself (or the latest known epoch
// below it) and the start of the next known epoch; (Undefined, Undefined)
// when epoch is undefined or newer than any known.
func (c *Cache) EndOffsetFor(epoch int32, logEnd int64) (int32, int64) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	n := len(c.entries)
	switch {
	case epoch == Undefined:
		return Undefined, Undefined
	case n > 0 && c.entries[n-1].Epoch == epoch:
		return epoch, logEnd
	}
	hi := slices.IndexFunc(c.entries, func(e Entry) bool { return e.Epoch > epoch })
	if hi < 0 {
		return Undefined, Undefined
	}
	if hi == 0 {
		return epoch, c.entries[0].StartOffset
	}
	return c.entries[hi-1].Epoch, c.entries[hi].StartOffset
}

// TruncateFromEnd drops the entries starting at or after endOffset (the
// log was truncated to end there).
func (c *Cache) TruncateFromEnd(endOffset int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.entries)
	if endOffset < 0 || n == 0 || c.entries[n-1].StartOffset < endOffset {
		return nil
	}
	for n > 0 && c.entries[n-1].StartOffset >= endOffset {
		n--
	}
	c.entries = c.entries[:n]
	return c.flushLocked()
}

// TruncateFromStart drops the entries wholly below startOffset (the log
// start moved there); the last of them is kept, starting at startOffset.
// When that changes nothing (the earliest entry already starts there) the
// checkpoint is not rewritten: opening a log writes no file.
func (c *Cache) TruncateFromStart(startOffset int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := 0
	for i < len(c.entries) && c.entries[i].StartOffset <= startOffset {
		i++
	}
	if i == 0 || (i == 1 && c.entries[0].StartOffset == startOffset) {
		return nil
	}
	first := Entry{Epoch: c.entries[i-1].Epoch, StartOffset: startOffset}
	c.entries = append([]Entry{first}, c.entries[i:]...)
	return c.flushLocked()
}

// PrependEarlier adds entries that begin before the earliest one (found
// in batches the cache had lost track of), oldest first, with both columns
// increasing. If the last of them has the earliest entry's epoch, that
// entry now begins where it says. Entries that do not fit are refused.
func (c *Cache) PrependEarlier(entries []Entry) error {
	if len(entries) == 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	rest := c.entries
	if len(rest) > 0 && rest[0].Epoch == entries[len(entries)-1].Epoch {
		rest = rest[1:]
	}
	all := append(slices.Clone(entries), rest...)
	for i := 1; i < len(all); i++ {
		if all[i].Epoch <= all[i-1].Epoch || all[i].StartOffset <= all[i-1].StartOffset {
			return fmt.Errorf("leaderepoch: %v do not begin before %v", entries, c.entries)
		}
	}
	c.entries = all
	return c.flushLocked()
}

// Clear drops every entry.
func (c *Cache) Clear() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries = nil
	return c.flushLocked()
}

func (c *Cache) flushLocked() error {
	if err := checkpoint.WriteEpochs(c.fsys, c.path, c.entries); err != nil {
		return err
	}
	c.dirty = false
	return nil
}
