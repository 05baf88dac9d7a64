package vfs

import (
	"math/rand/v2"
	"slices"
	"time"
)

// CrashMode says which unsynced changes survive a simulated crash.
type CrashMode int8

const (
	// CrashRandom keeps, drops or tears each unsynced change at random: a
	// file keeps all its unsynced bytes, none, or a mix in which each
	// 512-byte sector holds its synced bytes, its new bytes, or a new prefix
	// and an old suffix, and the size is the synced one, the current one or
	// one in between; each directory keeps a random prefix of its
	// entry changes since its last SyncDir (so a rename is atomic).
	CrashRandom CrashMode = iota
	// CrashDropAll keeps only what was synced: a power cut at the worst
	// moment.
	CrashDropAll
	// CrashKeepAll keeps everything: a process crash, after which the page
	// cache still holds every write.
	CrashKeepAll
)

func (c CrashMode) String() string {
	return [...]string{"random", "drop-all", "keep-all"}[c]
}

// Crash returns the filesystem left by a crash at this moment, as chosen by
// mode and seed (the same mode and seed give the same result). m itself is
// unchanged; handles and mappings opened on it do not reach the result,
// which starts with everything durable, no open files and no locks.
func (m *MemFS) Crash(mode CrashMode, seed uint64) *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.crashLocked(mode, seed)
}

// Halt is Crash for a process about to die: it returns the crash image
// and leaves m stopped — every later operation on it waits for ever, as
// the disk of a machine whose power went answers nothing — so nothing
// the process does after the image can look durable. Stores through
// mappings are not stopped.
func (m *MemFS) Halt(mode CrashMode, seed uint64) *MemFS {
	m.mu.Lock()
	return m.crashLocked(mode, seed) // (the lock is never released)
}

func (m *MemFS) crashLocked(mode CrashMode, seed uint64) *MemFS {
	c := crasher{mode: mode, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		images: map[*memInode]*memInode{}}
	out := NewMem()
	out.root = c.dir(m.root)
	return out
}

type crasher struct {
	mode   CrashMode
	rng    *rand.Rand
	images map[*memInode]*memInode // an inode reached by two names stays one
}

// dir returns the crash image of d: its durable entries plus a prefix of the
// changes since, with every entry's image in turn.
func (c *crasher) dir(d *memDir) *memDir {
	entries := cloneEntries(d.durable)
	keep := 0
	switch c.mode {
	case CrashKeepAll:
		keep = len(d.log)
	case CrashRandom:
		keep = c.rng.IntN(len(d.log) + 1)
	}
	for _, op := range d.log[:keep] {
		switch op.kind {
		case opCreate:
			entries[op.name] = op.node
		case opRemove:
			delete(entries, op.name)
		case opMove:
			if node, ok := entries[op.from]; ok {
				delete(entries, op.from)
				entries[op.name] = node
			}
		}
	}
	out := newMemDir()
	names := make([]string, 0, len(entries))
	for name := range entries {
		names = append(names, name)
	}
	slices.Sort(names) // map order must not steer the random choices
	for _, name := range names {
		switch n := entries[name].(type) {
		case *memDir:
			out.live[name] = c.dir(n)
		case *memInode:
			out.live[name] = c.inode(n)
		}
	}
	out.durable = cloneEntries(out.live)
	return out
}

func (c *crasher) inode(n *memInode) *memInode {
	if img, ok := c.images[n]; ok {
		return img
	}
	var data []byte
	switch c.mode {
	case CrashKeepAll:
		data = slices.Clone(n.data)
	case CrashDropAll:
		data = slices.Clone(n.synced)
	default:
		data = c.mix(n.synced, n.data)
	}
	img := &memInode{data: data, synced: slices.Clone(data), modTime: time.Now()}
	c.images[n] = img
	return img
}

// mix returns the old contents, the new ones (a quarter of the time each,
// so that the extremes are common), or a size and, sector by sector, old,
// new or torn contents.
func (c *crasher) mix(old, cur []byte) []byte {
	switch c.rng.IntN(4) {
	case 0:
		return slices.Clone(old)
	case 1:
		return slices.Clone(cur)
	}
	size := len(cur)
	if len(old) != len(cur) {
		lo, hi := min(len(old), len(cur)), max(len(old), len(cur))
		switch c.rng.IntN(3) {
		case 0:
			size = len(old)
		case 1:
			size = len(cur)
		default:
			size = lo + c.rng.IntN(hi-lo+1)
		}
	}
	out := make([]byte, size)
	var ob, nb [sectorSize]byte
	for lo := 0; lo < size; lo += sectorSize {
		hi := min(lo+sectorSize, size)
		o, n := sector(&ob, old, lo, hi), sector(&nb, cur, lo, hi)
		if slices.Equal(o, n) {
			copy(out[lo:hi], n)
			continue
		}
		switch c.rng.IntN(3) {
		case 0:
			copy(out[lo:hi], o)
		case 1:
			copy(out[lo:hi], n)
		default: // torn: a prefix of the new bytes reached the disk
			cut := 1 + c.rng.IntN(hi-lo)
			copy(out[lo:lo+cut], n)
			copy(out[lo+cut:hi], o[cut:])
		}
	}
	return out
}

// sector copies b[lo:hi] into buf, zero-filled where b is shorter.
func sector(buf *[sectorSize]byte, b []byte, lo, hi int) []byte {
	s := buf[:hi-lo]
	clear(s)
	if lo < len(b) {
		copy(s, b[lo:min(hi, len(b))])
	}
	return s
}
