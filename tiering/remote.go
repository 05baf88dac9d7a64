package tiering

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/tablet"
)

// Readahead bounds (docs/tiering.md §5): a miss fetches 512 KiB of
// blocks, doubling while reads of an object stay sequential, up to 32 MiB.
const (
	readaheadMin = 512 << 10
	readaheadMax = 32 << 20
)

// cache holds objects' indexes and blocks, bounded, with one fetch per
// missing block however many readers want it.
type cache struct {
	x         *Tier
	maxIdx    int
	maxBytes  int64
	mu        sync.Mutex               // guards the fields below
	idx       map[string]*list.Element // key → *idxItem
	idxLRU    *list.List
	blocks    map[blockKey]*list.Element // → *blockItem
	blockLRU  *list.List
	bytes     int64
	inflight  map[blockKey]*call
	readahead map[string]*seqState
	// Fetches counts ranged GETs (index tails and block runs), for tests
	// and metrics; hits and misses count block lookups.
	fetches      int64
	hits, misses int64
}

type blockKey struct {
	key   string
	block int // -1: the index
}

type idxItem struct {
	key string
	obj *Object
}

type blockItem struct {
	k    blockKey
	data []byte
}

type call struct {
	done chan struct{}
	obj  *Object // of an index fetch
	err  error
}

type seqState struct {
	last   int
	window int64
}

func newCache(x *Tier, maxIdx int, maxBytes int64) *cache {
	return &cache{x: x, maxIdx: maxIdx, maxBytes: maxBytes, idx: map[string]*list.Element{}, idxLRU: list.New(),
		blocks: map[blockKey]*list.Element{}, blockLRU: list.New(), inflight: map[blockKey]*call{},
		readahead: map[string]*seqState{}}
}

// index returns an object's footer, index and aux sections.
func (c *cache) index(ctx context.Context, e Entry) (*Object, error) {
	k := blockKey{e.Key, -1}
	c.mu.Lock()
	if el, ok := c.idx[e.Key]; ok {
		c.idxLRU.MoveToFront(el)
		c.mu.Unlock()
		return el.Value.(*idxItem).obj, nil
	}
	if cl, ok := c.inflight[k]; ok {
		c.mu.Unlock()
		return wait(ctx, cl)
	}
	cl := &call{done: make(chan struct{})}
	c.inflight[k] = cl
	c.fetches++
	c.mu.Unlock()

	cl.obj, cl.err = c.fetchIndex(ctx, e)
	c.mu.Lock()
	delete(c.inflight, k)
	if cl.err == nil {
		c.idx[e.Key] = c.idxLRU.PushFront(&idxItem{key: e.Key, obj: cl.obj})
		for c.idxLRU.Len() > c.maxIdx {
			old := c.idxLRU.Remove(c.idxLRU.Back()).(*idxItem)
			delete(c.idx, old.key)
		}
	}
	c.mu.Unlock()
	close(cl.done)
	return cl.obj, cl.err
}

func wait(ctx context.Context, cl *call) (*Object, error) {
	select {
	case <-cl.done:
		return cl.obj, cl.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *cache) fetchIndex(ctx context.Context, e Entry) (*Object, error) {
	o, err := FetchObject(ctx, c.x.store, e.Key, e.Size)
	if err != nil {
		return nil, err
	}
	if o.BaseOffset != e.Base || o.EndOffset != e.End {
		return nil, o.corrupt(e.Size-footerSize, "holds offsets [%d, %d), the manifest says [%d, %d)", o.BaseOffset, o.EndOffset, e.Base, e.End)
	}
	return o, nil
}

// FetchObject reads an object's footer, index and aux sections from a
// store: one ranged GET of TailSize(size) bytes, and a second, longer one
// when the index does not fit in it.
func FetchObject(ctx context.Context, s ObjectStore, key string, size int64) (*Object, error) {
	n := TailSize(size)
	for {
		tail, err := s.GetRange(ctx, key, size-n, int(n))
		if err != nil {
			return nil, err
		}
		o, need, err := ParseTail(key, tail, size)
		if err != nil || need == 0 {
			return o, err
		}
		if need <= n {
			return nil, fmt.Errorf("tiering: %s: the index does not fit the tail", key)
		}
		n = need
	}
}

// block returns block i's batches, CRC checked: from the cache, from a
// fetch in flight, or by a fetch of a run of blocks from i (readahead).
func (c *cache) block(ctx context.Context, e Entry, o *Object, i int) ([]byte, error) {
	k := blockKey{e.Key, i}
	c.mu.Lock()
	if el, ok := c.blocks[k]; ok {
		c.blockLRU.MoveToFront(el)
		c.sequential(e.Key, i)
		c.hits++
		c.mu.Unlock()
		return el.Value.(*blockItem).data, nil
	}
	c.misses++
	if cl, ok := c.inflight[k]; ok {
		c.mu.Unlock()
		select {
		case <-cl.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if cl.err != nil {
			return nil, cl.err
		}
		return c.block(ctx, e, o, i)
	}
	window := c.sequential(e.Key, i)
	// The run: blocks from i not cached nor being fetched, within the
	// window (at least block i), merged into one ranged GET.
	run := []int{i}
	size := int64(o.Blocks[i].Size)
	for j := i + 1; j < len(o.Blocks); j++ {
		kj := blockKey{e.Key, j}
		_, cached := c.blocks[kj]
		_, flying := c.inflight[kj]
		if cached || flying || size+int64(o.Blocks[j].Size) > window {
			break
		}
		run = append(run, j)
		size += int64(o.Blocks[j].Size)
	}
	cl := &call{done: make(chan struct{})}
	for _, j := range run {
		c.inflight[blockKey{e.Key, j}] = cl
	}
	c.fetches++
	c.mu.Unlock()

	first := o.Blocks[i]
	raw, err := c.x.store.GetRange(ctx, e.Key, first.Position, int(size))
	datas := make([][]byte, len(run))
	if err == nil {
		for n, j := range run {
			b := o.Blocks[j]
			at := b.Position - first.Position
			if datas[n], err = o.ParseBlock(j, raw[at:at+int64(b.Size)]); err != nil {
				break
			}
		}
	}
	cl.err = err
	c.mu.Lock()
	for n, j := range run {
		kj := blockKey{e.Key, j}
		delete(c.inflight, kj)
		if err == nil {
			c.blocks[kj] = c.blockLRU.PushFront(&blockItem{k: kj, data: datas[n]})
			c.bytes += int64(len(datas[n]))
		}
	}
	for c.bytes > c.maxBytes && c.blockLRU.Len() > len(run) {
		old := c.blockLRU.Remove(c.blockLRU.Back()).(*blockItem)
		delete(c.blocks, old.k)
		c.bytes -= int64(len(old.data))
	}
	c.mu.Unlock()
	close(cl.done)
	if err != nil {
		return nil, err
	}
	return datas[0], nil
}

// sequential records a read of block i of key and returns the readahead
// window: doubled when the read follows the last one, reset otherwise.
func (c *cache) sequential(key string, i int) int64 {
	st, ok := c.readahead[key]
	if !ok {
		if len(c.readahead) > 4*c.maxIdx {
			clear(c.readahead)
		}
		st = &seqState{last: -2, window: readaheadMin}
		c.readahead[key] = st
	}
	if i == st.last+1 {
		st.window = min(st.window*2, readaheadMax)
	} else if i != st.last {
		st.window = readaheadMin
	}
	st.last = i
	return st.window
}

// Fetches returns how many ranged GETs the cache has made.
func (x *Tier) Fetches() int64 {
	x.cache.mu.Lock()
	defer x.cache.mu.Unlock()
	return x.cache.fetches
}

// visibleFrom returns the visible objects from the one holding offset on,
// contiguous.
func (x *Tier) visibleFrom(offset int64) []Entry {
	vis := x.m.Visible()
	i := sort.Search(len(vis), func(i int) bool { return vis[i].End > offset })
	if i == len(vis) || vis[i].Base > offset {
		return nil
	}
	out := vis[i:]
	for j := 1; j < len(out); j++ {
		if out[j].Base != out[j-1].End {
			return out[:j]
		}
	}
	return out
}

// ReadRemote implements tablet.Remote: whole batches from the one holding
// offset, across blocks and objects, below upper.
func (x *Tier) ReadRemote(ctx context.Context, offset int64, maxBytes int, minOne bool, upper int64) (tablet.RemoteRead, error) {
	out, err := x.readRemote(ctx, offset, maxBytes, minOne, upper)
	x.stats.readRequests.Add(1)
	if err != nil {
		x.stats.readErrors.Add(1)
	}
	x.stats.readBytes.Add(int64(len(out.Data)))
	return out, err
}

func (x *Tier) readRemote(ctx context.Context, offset int64, maxBytes int, minOne bool, upper int64) (tablet.RemoteRead, error) {
	var out tablet.RemoteRead
	out.NextOffset = offset
	for _, e := range x.visibleFrom(offset) {
		if e.Base >= upper {
			break
		}
		if e.Key == "" {
			continue // a segment with no batch
		}
		o, err := x.cache.index(ctx, e)
		if err != nil {
			return readable(out, e, err)
		}
		i, ok := o.FindBlock(offset)
		for ; ok && i < len(o.Blocks); i++ {
			if o.Blocks[i].BaseOffset >= upper {
				return out, nil
			}
			data, err := x.cache.block(ctx, e, o, i)
			if err != nil {
				return readable(out, e, err)
			}
			for len(data) > 0 {
				b, rest, err := record.ParseBatch(data)
				if err != nil {
					return readable(out, e, &seglog.CorruptionError{Path: e.Key, Offset: o.Blocks[i].Position, Reason: "unreadable batch in a checked block", Err: err})
				}
				data = rest
				switch {
				case b.LastOffset() < offset:
					continue
				case b.BaseOffset() >= upper:
					return out, nil
				case len(out.Data) == 0 && b.Size() > maxBytes && !minOne:
					out.FirstEntryIncomplete = true
					return out, nil
				case len(out.Data) > 0 && len(out.Data)+b.Size() > maxBytes:
					return out, nil
				}
				out.Data = append(out.Data, b.Bytes()...)
				out.NextOffset = b.NextOffset()
				if len(out.Data) >= maxBytes {
					return out, nil
				}
			}
		}
	}
	return out, nil
}

// readable ends a remote read at a bad or missing object: the batches read
// before it are returned first (the reader comes back for the rest, and
// then gets the error); with none, the error, naming the object's key and
// the offsets it holds.
func readable(out tablet.RemoteRead, e Entry, err error) (tablet.RemoteRead, error) {
	if len(out.Data) > 0 {
		return out, nil
	}
	what := "unreadable"
	if errors.Is(err, ErrNotFound) {
		what = "missing from the store"
	}
	return tablet.RemoteRead{}, fmt.Errorf("tiering: object %s, holding offsets %d to %d, is %s: %w", e.Key, e.Base, e.End-1, what, err)
}

// RemoteAbortedTxns implements tablet.Remote from the objects' aux
// sections.
func (x *Tier) RemoteAbortedTxns(ctx context.Context, from, upper int64) ([]record.AbortedTxn, bool, error) {
	var out []record.AbortedTxn
	for _, e := range x.visibleFrom(from) {
		if e.Key == "" {
			continue
		}
		o, err := x.cache.index(ctx, e)
		if err != nil {
			return nil, false, err
		}
		for _, t := range o.Aborted {
			if t.LastOffset >= from && t.FirstOffset < upper {
				out = append(out, t)
			}
			if t.LastStableOffset >= upper {
				return out, true, nil
			}
		}
	}
	return out, false, nil
}

// RemoteOffsetForTimestamp implements tablet.Remote through the blocks'
// max timestamps.
func (x *Tier) RemoteOffsetForTimestamp(ctx context.Context, ts int64) (tablet.TimestampOffset, bool, error) {
	start := x.t.Offsets().LogStartOffset
	var it record.Iter
	for _, e := range x.visibleFrom(start) {
		if e.Key == "" || e.MaxTimestamp < ts {
			continue
		}
		o, err := x.cache.index(ctx, e)
		if err != nil {
			return tablet.TimestampOffset{}, false, err
		}
		for i, blk := range o.Blocks {
			if blk.MaxTimestamp < ts {
				continue
			}
			data, err := x.cache.block(ctx, e, o, i)
			if err != nil {
				return tablet.TimestampOffset{}, false, err
			}
			for len(data) > 0 {
				b, rest, err := record.ParseBatch(data)
				if err != nil {
					return tablet.TimestampOffset{}, false, err
				}
				data = rest
				if b.MaxTimestamp() < ts {
					continue
				}
				it.Reset(b, record.DefaultMaxUncompressed)
				for it.Next() {
					if r := it.Record(); r.Timestamp >= ts && r.Offset >= start {
						return tablet.TimestampOffset{Timestamp: r.Timestamp, Offset: r.Offset}, true, nil
					}
				}
				if err := it.Err(); err != nil {
					return tablet.TimestampOffset{}, false, err
				}
			}
		}
	}
	return tablet.TimestampOffset{}, false, nil
}

// RemoteEnd implements tablet.Remote: the manifest's tiered end.
func (x *Tier) RemoteEnd() int64 { return x.m.TieredEnd() }

// RemoteObjects lists the committed objects (tablet.RemoteLister).
func (x *Tier) RemoteObjects() []tablet.RemoteObject {
	vis := x.m.Visible()
	out := make([]tablet.RemoteObject, 0, len(vis))
	for _, e := range vis {
		out = append(out, tablet.RemoteObject{Key: e.Key, BaseOffset: e.Base, NextOffset: e.End, Size: e.Size, MaxTimestamp: e.MaxTimestamp})
	}
	return out
}

// DropCache empties the index and block caches (a cold start, for
// benchmarks and tests). Fetches in flight finish.
func (x *Tier) DropCache() {
	c := x.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.idx)
	c.idxLRU.Init()
	clear(c.blocks)
	c.blockLRU.Init()
	c.bytes = 0
	clear(c.readahead)
}
