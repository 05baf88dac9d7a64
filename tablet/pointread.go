package tablet

import (
	"slices"
	"sort"
	"sync"

	"github.com/seglog/seglog/record"
)

// Point reads. Records reads the batch holding the offset asked for whole
// and checks its CRC before serving a record of it; for a large batch —
// a hundred 1 KiB records — that is a hundred times the bytes of the
// record wanted. So once a large uncompressed batch has been read and
// checked whole, a table of where its records start is kept, and the next
// read of a record in it reads that record's bytes alone.
const (
	// pointReadMin is the smallest batch that gets a table: below it,
	// reading and checking the whole batch costs about a second read.
	pointReadMin = 32 << 10
	// verifiedBudget bounds the tables' memory across every tablet.
	verifiedBudget = 8 << 20
)

// batchKey names a batch: its segment (the object, which a cleaning or a
// reopen replaces) and its position in the .log.
type batchKey struct {
	g   *seg
	pos int64
}

// batchTable is what a point read needs of a verified batch.
type batchTable struct {
	// truncations is the tablet's count when the batch was read: a
	// truncation since may have put other bytes at its position.
	truncations int64
	size        int64
	header      [record.HeaderSize]byte
	// Record i spans starts[i] to starts[i+1] of the records section and
	// has offset delta deltas[i] (increasing).
	starts []uint32
	deltas []int32
}

func (e *batchTable) bytes() int64 { return int64(len(e.starts)*4+len(e.deltas)*4) + 160 }

// verifiedCache holds the tables, bounded by verifiedBudget: over it,
// entries go in the map's order (at random).
type verifiedCache struct {
	mu    sync.Mutex // guards m and bytes
	m     map[batchKey]*batchTable
	bytes int64
}

var verified = verifiedCache{m: map[batchKey]*batchTable{}}

func (c *verifiedCache) get(k batchKey) *batchTable {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[k]
}

func (c *verifiedCache) put(k batchKey, e *batchTable) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.m[k]; old != nil {
		c.bytes -= old.bytes()
	}
	c.m[k] = e
	c.bytes += e.bytes()
	for key, v := range c.m {
		if c.bytes <= verifiedBudget {
			break
		}
		delete(c.m, key)
		c.bytes -= v.bytes()
	}
}

// newBatchTable makes the table of a batch read whole and checked, or nil
// for one a point read cannot use (compressed, or offsets not increasing).
func newBatchTable(b record.Batch, truncations int64) *batchTable {
	if b.Compression() != record.None || b.NumRecords() < 2 {
		return nil
	}
	n := int(b.NumRecords())
	e := &batchTable{truncations: truncations, size: int64(b.Size()),
		starts: make([]uint32, 0, n+1), deltas: make([]int32, 0, n)}
	copy(e.header[:], b.Bytes())
	var it record.Iter
	it.Reset(b, record.DefaultMaxUncompressed)
	pos := uint32(0)
	for it.Next() {
		r := it.Record()
		if len(e.deltas) > 0 && r.OffsetDelta <= e.deltas[len(e.deltas)-1] {
			return nil
		}
		e.starts, e.deltas = append(e.starts, pos), append(e.deltas, r.OffsetDelta)
		pos += uint32(len(r.Raw))
	}
	if it.Err() != nil {
		return nil
	}
	e.starts = append(e.starts, pos)
	return e
}

// pointKey says whether the batch the first read of a Records call holds
// (alone: MaxBytes 1) may have a table, and under which key.
func pointKey(res *FetchResult, truncations int64) (batchKey, bool) {
	if res.release == nil || res.Records.InMemory() || res.Records.Size() < pointReadMin || truncations%2 != 0 {
		return batchKey{}, false
	}
	return batchKey{g: res.release, pos: res.Records.Position()}, true
}

// point serves the batch in res from its table, if it has one: the
// records from offset from on, each read alone as fn asks for it. It
// reports whether it served the batch (res is then closed), whether fn
// asked to stop, and the offset after the batch.
func (rr *recordReader) point(k batchKey, truncations, from int64, fn func(b record.Batch, r *record.Record) bool) (served, stop bool, next int64, err error) {
	res := &rr.res
	e := verified.get(k)
	if e == nil || e.truncations != truncations || e.size != res.Records.Size() {
		return false, false, 0, nil
	}
	hb, err := record.HeaderBatch(e.header[:])
	if err != nil {
		return false, false, 0, nil
	}
	defer res.Close()
	next = hb.NextOffset()
	if hb.IsControl() || abortedBatch(hb, res.AbortedTxns) {
		return true, false, next, nil
	}
	base := hb.BaseOffset()
	n := len(e.deltas)
	// The first record at or after from (none: the batch's last records
	// were cleaned away, its last offset kept), alone, then (if fn goes on)
	// the rest at once.
	i := sort.Search(n, func(i int) bool { return base+int64(e.deltas[i]) >= from })
	for _, part := range [][2]int{{i, min(i+1, n)}, {min(i+1, n), n}} {
		if part[0] >= part[1] {
			continue
		}
		lo, hi := e.starts[part[0]], e.starts[part[1]]
		rr.buf = slices.Grow(rr.buf[:0], int(hi-lo))[:hi-lo]
		if n, err := res.Records.ReadAt(rr.buf, record.HeaderSize+int64(lo)); n < len(rr.buf) {
			return true, false, 0, err
		}
		rr.it.ResetPart(hb, rr.buf, int32(part[1]-part[0]))
		for rr.it.Next() {
			if !fn(hb, rr.it.Record()) {
				return true, true, next, nil
			}
		}
		if err := rr.it.Err(); err != nil {
			return true, false, 0, err
		}
	}
	return true, false, next, nil
}
