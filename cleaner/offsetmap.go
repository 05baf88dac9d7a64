package cleaner

import (
	"hash/maphash"
	"math/bits"
)

// EntryBytes is the memory one key takes in an OffsetMap's table: a
// 128-bit hash of the key and its offset, as Kafka's SkimpyOffsetMap
// (MD5 + offset).
const EntryBytes = 24

// initialSlots is where a table starts: 96 KiB, within a CPU cache's
// reach, for the many logs with few keys.
const initialSlots = 1 << 12

// OffsetMap maps keys to the last offset seen for them, in memory bounded
// up front: a table of 128-bit key hashes and offsets with linear
// probing, filled to at most its load factor. Keys are not kept, only
// their hashes (two independently seeded maphash sums, so two keys share
// an entry with probability about 2⁻¹²⁸ per pair); it is the dedupe
// buffer of Kafka's cleaner. Unlike Kafka's, the table starts small and
// grows by half as keys come, up to the bound: a log of ten thousand keys probes
// a table that fits a cache, not 128 MiB of random memory.
type OffsetMap struct {
	slots      []slot
	loadFactor float64
	maxSlots   int
	limit      int // entries the full-size table takes: the map's bound
	grow       int // entries the current table takes before it doubles
	used       int
	seeds      [2]maphash.Seed
}

type slot struct {
	h      [2]uint64 // zero: empty (a key hashing to zero is moved off it)
	offset int64
}

// NewOffsetMap returns a map of at most about memory bytes, filled to at
// most loadFactor (in (0, 1]) of its entries. It holds at least one key.
func NewOffsetMap(memory int64, loadFactor float64) *OffsetMap {
	maxSlots := int(max(memory/EntryBytes, 2))
	m := &OffsetMap{loadFactor: loadFactor, maxSlots: maxSlots,
		seeds: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}}
	m.limit = m.takes(maxSlots)
	m.resize(min(initialSlots, maxSlots))
	return m
}

// takes is how many entries a table of n slots holds (one stays empty, so
// that a probe ends).
func (m *OffsetMap) takes(n int) int { return min(max(int(float64(n)*m.loadFactor), 1), n-1) }

func (m *OffsetMap) resize(n int) {
	old := m.slots
	m.slots, m.grow = make([]slot, n), m.takes(n)
	for i := range old {
		if s := &old[i]; s.h != [2]uint64{} {
			*m.find(s.h) = *s
		}
	}
}

func (m *OffsetMap) hash(key []byte) [2]uint64 {
	h := [2]uint64{maphash.Bytes(m.seeds[0], key), maphash.Bytes(m.seeds[1], key)}
	if h == [2]uint64{} {
		h[1] = 1
	}
	return h
}

// find returns the slot of h, or the empty slot where it would go.
func (m *OffsetMap) find(h [2]uint64) *slot {
	n := uint64(len(m.slots))
	i, _ := bits.Mul64(h[0], n) // h[0] scaled to [0, n): any table size
	for {
		s := &m.slots[i]
		if s.h == h || s.h == [2]uint64{} {
			return s
		}
		if i++; i == n {
			i = 0
		}
	}
}

// Put records offset as the last offset of key. It returns false, and
// changes nothing, when key is new and the map is full.
func (m *OffsetMap) Put(key []byte, offset int64) bool {
	h := m.hash(key)
	s := m.find(h)
	if s.h == [2]uint64{} {
		if m.used >= m.limit {
			return false
		}
		if m.used >= m.grow {
			m.resize(min(len(m.slots)+len(m.slots)/2, m.maxSlots))
			s = m.find(h)
		}
		s.h = h
		m.used++
	}
	s.offset = offset
	return true
}

// Get returns the last offset put for key, or -1.
func (m *OffsetMap) Get(key []byte) int64 {
	s := m.find(m.hash(key))
	if s.h == [2]uint64{} {
		return -1
	}
	return s.offset
}

// each calls fn with every offset held.
func (m *OffsetMap) each(fn func(offset int64)) {
	for i := range m.slots {
		if s := &m.slots[i]; s.h != [2]uint64{} {
			fn(s.offset)
		}
	}
}

// Len returns the number of keys held; Limit, how many fit.
func (m *OffsetMap) Len() int   { return m.used }
func (m *OffsetMap) Limit() int { return m.limit }

// Bytes returns the memory the table takes now.
func (m *OffsetMap) Bytes() int64 { return int64(len(m.slots)) * EntryBytes }

// Clear empties the map, keeping its table.
func (m *OffsetMap) Clear() {
	clear(m.slots)
	m.used = 0
}
