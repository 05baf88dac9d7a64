package tablet

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/google/btree"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/segment"
)

// Isolation bounds what a read sees.
type Isolation int8

const (
	// ReadHighWatermark sees offsets below the high watermark: a
	// consumer's read_uncommitted.
	ReadHighWatermark Isolation = iota
	// ReadCommitted sees offsets below the last stable offset and returns
	// the aborted transactions in range, for the reader to skip.
	ReadCommitted
	// ReadLogEnd sees everything appended: a follower's read.
	ReadLogEnd
)

// ReadOptions shape a read.
type ReadOptions struct {
	// MaxBytes bounds the bytes returned. The default (0) returns none
	// unless MinOneMessage.
	MaxBytes int
	// Isolation is the bound. The default is ReadHighWatermark.
	Isolation Isolation
	// MinOneMessage returns the first batch whole even if it is larger
	// than MaxBytes. The default is false.
	MinOneMessage bool
}

// FetchResult is a read: whole batches of one segment, read in place,
// with the offsets as they were. It holds the segment open: Close it.
type FetchResult struct {
	// Records are whole batches; the first may begin below the offset
	// asked for. Empty at the bound or past the end of what is visible.
	Records segment.Slice
	// FirstEntryIncomplete reports that the first batch is larger than
	// MaxBytes (without MinOneMessage): Records is empty.
	FirstEntryIncomplete bool
	Offsets
	// AbortedTxns are the aborted transactions overlapping the records,
	// for ReadCommitted.
	AbortedTxns []record.AbortedTxn

	release *seg
	scratch *[]byte // the pooled buffer Records is served from, if any
	t       *Tablet
}

// Close releases the segment the records are read from.
func (r *FetchResult) Close() {
	if r.release != nil {
		r.t.done(r.release)
		r.release = nil
	}
	if r.scratch != nil {
		scratches.Put(r.scratch)
		r.scratch = nil
	}
}

// scratches lend reads the buffer a one-batch read is served from when
// the offset lookup already read the batch whole (one read of the file
// instead of two); a FetchResult holds it until Close.
var scratches = sync.Pool{New: func() any { b := make([]byte, 16<<10); return &b }}

// Read returns the batches from the one holding offset, within the
// isolation bound. An offset below the log start or above the log end
// fails with ErrOffsetOutOfRange; at or past the bound the result is
// empty. Read never waits for an append.
func (t *Tablet) Read(offset int64, opts ReadOptions) (*FetchResult, error) {
	res := new(FetchResult)
	if err := t.ReadInto(res, offset, opts); err != nil {
		return nil, err
	}
	return res, nil
}

// ReadInto is Read into a result the caller owns and reuses, for a reader
// that allocates nothing per read: res must be closed (or never filled)
// before it is read into again. On error res holds nothing to close.
func (t *Tablet) ReadInto(res *FetchResult, offset int64, opts ReadOptions) error {
	return t.ReadIntoContext(context.Background(), res, offset, opts)
}

// ReadIntoContext is ReadInto whose read from the tier's store (an offset
// below the local log start) ends with ctx, failing with ctx's error. A
// local read does not wait and is not cut short.
func (t *Tablet) ReadIntoContext(ctx context.Context, res *FetchResult, offset int64, opts ReadOptions) error {
	if res.release != nil {
		return fmt.Errorf("tablet: reading into a result that was not closed")
	}
	aborted := res.AbortedTxns[:0]
	*res = FetchResult{}
	if opts.MaxBytes < 0 {
		return fmt.Errorf("tablet: negative MaxBytes %d", opts.MaxBytes)
	}
	t.pub.RLock()
	v := t.pub.v
	g := floorSeg(v.segs, offset)
	if g != nil && !g.acquire() {
		g = nil
	}
	t.pub.RUnlock()

	*res = FetchResult{Offsets: t.offsetsOf(v), t: t}
	bound := v.hw
	switch opts.Isolation {
	case ReadCommitted:
		bound = v.lso
	case ReadLogEnd:
		bound = v.leo
	}
	if r := t.remoteTier(); r != nil && offset >= v.logStart && offset < v.localStart {
		if g != nil {
			t.done(g)
		}
		return t.readRemote(ctx, r, res, aborted, offset, opts, min(bound.offset, v.localStart))
	}
	if offset >= v.logStart && offset < v.localStart {
		if g != nil {
			t.done(g)
		}
		return fmt.Errorf("%w: offsets %d to %d of %s are in its tier's store; start the store or pass --store (the tier attaches when its store answers)",
			ErrTierNotAttached, v.logStart, v.localStart-1, t.tp.DirName())
	}
	if offset < v.localStart || offset > v.leo.offset {
		if g != nil {
			t.done(g)
		}
		return fmt.Errorf("%w: %d is not in [%d, %d]", ErrOffsetOutOfRange, offset, v.logStart, v.leo.offset)
	}
	if g == nil || offset >= bound.offset {
		if g != nil {
			t.done(g)
		}
		return nil
	}
	for {
		maxPos := g.Size()
		if g.base == bound.base {
			maxPos = bound.pos
		}
		scratch := scratches.Get().(*[]byte)
		r, found, err := g.ReadWith(offset, opts.MaxBytes, maxPos, opts.MinOneMessage, *scratch)
		if err != nil || !r.Records.InMemory() {
			scratches.Put(scratch)
			scratch = nil
		}
		if err != nil {
			t.done(g)
			return err
		}
		if found {
			res.Records, res.FirstEntryIncomplete, res.release, res.scratch = r.Records, r.FirstEntryIncomplete, g, scratch
			if opts.Isolation == ReadCommitted && r.Records.Size() > 0 {
				if res.AbortedTxns, err = t.abortedTxns(aborted, v.segs, g, offset, r, v.leo.offset); err != nil {
					res.Close()
					return err
				}
			}
			return nil
		}
		// The offset is past this segment's batches: the next one has it.
		next := higherSeg(v.segs, g.base)
		if next != nil && next.base > offset && !t.compacted.Load() {
			// Nothing holds [offset, next.base): offsets below the log
			// end that no segment has were lost to damage (recovery
			// removes the segments after a power cut's gap), never
			// skipped over quietly — unless the log is compacted, where
			// the cleaner removes them.
			err := &seglog.CorruptionError{Path: g.LogPath(), Offset: g.Size(), Err: seglog.ErrCorruption,
				Reason: fmt.Sprintf("offsets %d to %d are missing: %s holds none of them and the next segment starts at %d (the log is damaged: seglog verify tells more; a read from %d on goes on)",
					offset, next.base-1, filepath.Base(g.LogPath()), next.base, next.base)}
			t.done(g)
			return err
		}
		t.done(g)
		if next == nil || next.base > bound.base || !next.acquire() {
			return nil
		}
		g = next
	}
}

// higherSeg returns the segment after the one at base, or nil.
func higherSeg(tr *btree.BTreeG[*seg], base int64) *seg {
	var out *seg
	p := pivot(base + 1)
	tr.AscendGreaterOrEqual(p, func(g *seg) bool { out = g; return false })
	pivots.Put(p)
	return out
}

// abortedTxns collects the aborted transactions overlapping a read
// (Kafka's addAbortedTransactions): those with records below the offset
// after the fetched bytes, from the read's segment on through every later
// segment (an abort is indexed in its marker's segment) until an entry's
// last stable offset shows that no later one can overlap.
func (t *Tablet) abortedTxns(out []record.AbortedTxn, segs *btree.BTreeG[*seg], g *seg, offset int64, r segment.ReadResult, logEnd int64) ([]record.AbortedTxn, error) {
	upper := logEnd
	if o, ok, err := g.UpperBoundOffset(int32(r.Position), int(r.Records.Size())); err != nil {
		return nil, err
	} else if ok {
		upper = o
	} else if n := higherSeg(segs, g.base); n != nil {
		upper = n.base
	}
	return t.localAbortedTxns(out, segs, g, false, offset, upper)
}

// localAbortedTxns collects the aborted transactions overlapping
// [offset, upper) from segment cur on (held: the caller's use of cur is
// handed over) until an entry shows no later segment can hold another.
func (t *Tablet) localAbortedTxns(out []record.AbortedTxn, segs *btree.BTreeG[*seg], cur *seg, held bool, offset, upper int64) ([]record.AbortedTxn, error) {
	for cur != nil {
		// The active segment's index may gain an entry past the log end
		// this read saw (an append racing the read): it is not checked
		// against an end.
		segEnd := int64(-1)
		if n := higherSeg(segs, cur.base); n != nil {
			segEnd = n.base
		}
		var complete bool
		var err error
		out, complete, err = cur.CollectAbortedTxns(out, offset, upper, segEnd)
		if held {
			t.done(cur)
		}
		if err != nil {
			return nil, err
		}
		if complete {
			break
		}
		next := higherSeg(segs, cur.base)
		if next == nil || !next.acquire() {
			break
		}
		cur, held = next, true
	}
	return out, nil
}

// Timestamps with a meaning of their own in OffsetForTimestamp, as in
// Kafka's ListOffsets.
const (
	LatestTimestamp   = -1 // the log end
	EarliestTimestamp = -2 // the log start
)

// TimestampOffset is an offset found by time.
type TimestampOffset struct {
	Timestamp, Offset int64
}

// ErrNoOffsetForTimestamp is returned when no record has a timestamp at or
// after the one asked for.
var ErrNoOffsetForTimestamp = errors.New("tablet: no record at or after the timestamp")

// OffsetForTimestamp returns the first record with a timestamp at or after
// ts (docs/format.md §3.3), or for EarliestTimestamp and LatestTimestamp the log start
// and end.
func (t *Tablet) OffsetForTimestamp(ts int64) (TimestampOffset, error) {
	return t.OffsetForTimestampContext(context.Background(), ts)
}

// OffsetForTimestampContext is OffsetForTimestamp whose look-up in the
// tier's store ends with ctx, failing with ctx's error.
func (t *Tablet) OffsetForTimestampContext(ctx context.Context, ts int64) (TimestampOffset, error) {
	v, segs := t.acquireAll()
	defer func() {
		for _, g := range segs {
			t.done(g)
		}
	}()
	switch ts {
	case EarliestTimestamp:
		return TimestampOffset{Timestamp: record.NoTimestamp, Offset: v.logStart}, nil
	case LatestTimestamp:
		return TimestampOffset{Timestamp: record.NoTimestamp, Offset: v.leo.offset}, nil
	}
	if ts < 0 {
		return TimestampOffset{}, fmt.Errorf("tablet: timestamp %d is neither a time nor Earliest/LatestTimestamp", ts)
	}
	if t.remoteTier() == nil && v.logStart < v.localStart {
		return TimestampOffset{}, fmt.Errorf("%w: the offset for a time may be in the store of %s's tier", ErrTierNotAttached, t.tp.DirName())
	}
	if r := t.remoteTier(); r != nil && v.logStart < v.localStart {
		found, ok, err := r.RemoteOffsetForTimestamp(ctx, ts)
		if err != nil {
			return TimestampOffset{}, err
		}
		if ok && found.Offset >= v.logStart && found.Offset < v.localStart {
			return found, nil
		}
	}
	for _, g := range segs {
		largest, err := g.LargestTimestamp()
		if err != nil {
			return TimestampOffset{}, err
		}
		if largest < ts {
			continue
		}
		found, ok, err := g.FindOffsetByTimestamp(ts, v.logStart)
		if err != nil {
			return TimestampOffset{}, err
		}
		if ok && found.Offset < v.leo.offset {
			return TimestampOffset{Timestamp: found.Timestamp, Offset: found.Offset}, nil
		}
	}
	return TimestampOffset{}, fmt.Errorf("%w: %d", ErrNoOffsetForTimestamp, ts)
}

// abortedBatch reports whether a transactional batch belongs to one of the
// aborted transactions a read returned.
func abortedBatch(b record.Batch, aborted []record.AbortedTxn) bool {
	if !b.IsTransactional() {
		return false
	}
	for _, a := range aborted {
		if a.ProducerID == b.ProducerID() && a.FirstOffset <= b.BaseOffset() && b.BaseOffset() <= a.LastOffset {
			return true
		}
	}
	return false
}

// readRemote serves a read below the local log start from the tier, up
// to upper (the isolation bound, or the local log start: the next read
// goes on locally).
func (t *Tablet) readRemote(ctx context.Context, r Remote, res *FetchResult, aborted []record.AbortedTxn, offset int64, opts ReadOptions, upper int64) error {
	if offset >= upper {
		return nil
	}
	rr, err := r.ReadRemote(ctx, offset, opts.MaxBytes, opts.MinOneMessage, upper)
	if err != nil {
		return err
	}
	res.Records, res.FirstEntryIncomplete = segment.BytesSlice(rr.Data), rr.FirstEntryIncomplete
	if opts.Isolation != ReadCommitted || len(rr.Data) == 0 {
		return nil
	}
	txns, complete, err := r.RemoteAbortedTxns(ctx, offset, rr.NextOffset)
	if err != nil {
		return err
	}
	res.AbortedTxns = append(aborted, txns...)
	if complete {
		return nil
	}
	// The rest are indexed in the local segments holding their markers.
	t.pub.RLock()
	segs := t.pub.v.segs
	first, _ := segs.Min()
	if first != nil && !first.acquire() {
		first = nil
	}
	t.pub.RUnlock()
	if first == nil {
		return nil
	}
	res.AbortedTxns, err = t.localAbortedTxns(res.AbortedTxns, segs, first, true, offset, rr.NextOffset)
	return err
}
