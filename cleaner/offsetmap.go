package cleaner

import (
	"hash/maphash"
	"math/bits"
)

// EntryBytes is the memory one key takes in an OffsetMap: a 128-bit hash
// of the key and its offset, as Kafka's SkimpyOffsetMap (MD5 + offset).
const EntryBytes = 24

// OffsetMap maps keys to the last offset seen for them, in memory bounded
// up front: a fixed table of 128-bit key hashes and offsets with linear
// probing, filled to at most its load factor. Keys are not kept, only
// their hashes (two independently seeded maphash sums, so two keys share
// an entry with probability about 2⁻¹²⁸ per pair); it is the dedupe
// buffer of Kafka's cleaner.
type OffsetMap struct {
	slots  []slot
	limit  int // entries allowed: capacity × load factor
	used   int
	latest int64 // the largest offset put, -1 if none
	seeds  [2]maphash.Seed
	mask   uint64
}

type slot struct {
	h      [2]uint64 // zero: empty (a key hashing to zero is moved off it)
	offset int64
}

// NewOffsetMap returns a map using about memory bytes, filled to at most
// loadFactor (in (0, 1]) of its entries. It holds at least one entry.
func NewOffsetMap(memory int64, loadFactor float64) *OffsetMap {
	n := max(memory/EntryBytes, 2)
	// A power of two, so a hash picks a slot with a mask.
	capacity := uint64(1) << (63 - bits.LeadingZeros64(uint64(n)))
	limit := max(int(float64(capacity)*loadFactor), 1)
	limit = min(limit, int(capacity)-1) // one slot stays empty, so a probe ends
	return &OffsetMap{slots: make([]slot, capacity), limit: limit, latest: -1,
		seeds: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}, mask: capacity - 1}
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
	for i := h[0] & m.mask; ; i = (i + 1) & m.mask {
		s := &m.slots[i]
		if s.h == h || s.h == [2]uint64{} {
			return s
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
		s.h = h
		m.used++
	}
	s.offset = offset
	m.latest = max(m.latest, offset)
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

// Full says no new key fits.
func (m *OffsetMap) Full() bool { return m.used >= m.limit }

// Len returns the number of keys held; Limit, how many fit.
func (m *OffsetMap) Len() int   { return m.used }
func (m *OffsetMap) Limit() int { return m.limit }

// Latest returns the largest offset put, or -1.
func (m *OffsetMap) Latest() int64 { return m.latest }

// Bytes returns the memory the table takes.
func (m *OffsetMap) Bytes() int64 { return int64(len(m.slots)) * EntryBytes }

// Clear empties the map, keeping its memory.
func (m *OffsetMap) Clear() {
	clear(m.slots)
	m.used, m.latest = 0, -1
}
