package tablet

import (
	"fmt"
	"iter"
	"sync"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/record"
)

// The consumer API reads in chunks that grow: the first read returns only
// the batch holding the offset asked for (a lookup of one record costs one
// batch), each later one twice the last, up to maxChunk (a scan reads in
// large sequential chunks).
const (
	firstChunk = 64 << 10
	maxChunk   = 1 << 20
	// maxPooledBuf is the largest buffer kept for the next caller.
	maxPooledBuf = 4 << 20
)

// recordReader is the state of one Records call, pooled so that a
// consumer in steady state allocates nothing per batch or per call.
type recordReader struct {
	res FetchResult
	buf []byte
	it  record.Iter
}

var recordReaders = sync.Pool{New: func() any { return new(recordReader) }}

// Records calls fn with every record from offset on that a consumer with
// the isolation sees — control batches and, for ReadCommitted, aborted
// transactions skipped — until fn returns false or the visible end. Every
// batch's CRC is checked first; a batch that fails it is a
// *seglog.CorruptionError with the .log's path and the batch's position,
// never served. The batch and record are valid only during the call.
//
// The first read returns only the batch holding from, so reading one record
// costs one batch; later reads grow to 1 MiB. A large uncompressed batch
// (32 KiB or more) read and checked whole once is remembered — where its
// records start, in a table bounded to 8 MiB across tablets and forgotten
// at a truncation — so that a later read from inside it reads only the
// records fn takes (fn's b is then the batch's header alone: its header
// fields are the batch's, its Bytes only the header). Buffers are pooled:
// in steady state Records allocates nothing.
func (t *Tablet) Records(from int64, iso Isolation, fn func(b record.Batch, r *record.Record) bool) error {
	rr := recordReaders.Get().(*recordReader)
	err := rr.run(t, from, iso, fn)
	rr.res.AbortedTxns = rr.res.AbortedTxns[:0]
	if cap(rr.buf) <= maxPooledBuf {
		recordReaders.Put(rr)
	}
	return err
}

// Scan is Records as an iterator: it yields each record a consumer with the
// isolation sees from offset from on, with a nil error, and ends at the
// visible end; a failure is yielded once as (nil, err), and ends it. The
// record is valid until the next iteration.
//
//	for r, err := range tab.Scan(0, tablet.ReadHighWatermark) {
//		if err != nil {
//			return err
//		}
//		fmt.Println(r.Offset, string(r.Value))
//	}
func (t *Tablet) Scan(from int64, iso Isolation) iter.Seq2[*record.Record, error] {
	return func(yield func(*record.Record, error) bool) {
		stopped := false
		err := t.Records(from, iso, func(_ record.Batch, r *record.Record) bool {
			if !yield(r, nil) {
				stopped = true
				return false
			}
			return true
		})
		if err != nil && !stopped {
			yield(nil, err)
		}
	}
}

func (rr *recordReader) run(t *Tablet, from int64, iso Isolation, fn func(b record.Batch, r *record.Record) bool) error {
	res := &rr.res
	opts := ReadOptions{MaxBytes: 1, Isolation: iso, MinOneMessage: true}
	for first := true; ; first = false {
		truncations := t.truncations.Load() // before the read: a truncation since changes it
		if err := t.ReadInto(res, from, opts); err != nil {
			return err
		}
		opts.MaxBytes = min(max(2*opts.MaxBytes, firstChunk), maxChunk)
		// The first read holds the batch of from alone: a large one
		// checked before is served from its table, record by record.
		key, table := batchKey{}, false
		if first {
			key, table = pointKey(res, truncations)
		}
		if table {
			served, stop, next, err := rr.point(key, truncations, from, fn)
			switch {
			case err != nil || stop:
				return err
			case served:
				from = max(from, next)
				continue
			}
		}
		var err error
		rr.buf, err = res.Records.AppendTo(rr.buf[:0])
		path, pos := "", res.Records.Position()
		if res.release != nil {
			path = res.release.LogPath()
		}
		// The aborted transactions stay in res (Close keeps them) for the
		// batches below; the next ReadInto reuses their array.
		res.Close()
		if err != nil {
			return err
		}
		if len(rr.buf) == 0 {
			return nil
		}
		for data := rr.buf; len(data) > 0; {
			at := pos + int64(len(rr.buf)-len(data))
			b, rest, err := record.ParseBatch(data)
			if err != nil {
				return &seglog.CorruptionError{Path: path, Offset: at, Reason: "unreadable batch", Err: err}
			}
			data = rest
			if err := b.Verify(); err != nil { // a flipped bit is reported, never served
				return &seglog.CorruptionError{Path: path, Offset: at, Err: err,
					Reason: fmt.Sprintf("the batch of offsets %d to %d fails its CRC check", b.BaseOffset(), b.LastOffset())}
			}
			if table {
				if e := newBatchTable(b, truncations); e != nil {
					verified.put(key, e)
				}
				table = false
			}
			next := b.NextOffset()
			if b.IsControl() || abortedBatch(b, res.AbortedTxns) {
				from = max(from, next)
				continue
			}
			rr.it.Reset(b, record.DefaultMaxUncompressed)
			for rr.it.Next() {
				if r := rr.it.Record(); r.Offset >= from && !fn(b, r) {
					return nil
				}
			}
			if err := rr.it.Err(); err != nil {
				return err
			}
			from = max(from, next)
		}
	}
}
