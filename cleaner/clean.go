// Package cleaner compacts a log (cleanup.policy=compact) as Kafka's
// LogCleaner does: a map of every key's last offset over the dirty section,
// then a recopy of the log from its start into .cleaned segments that keep
// the last record of each key, grouped up to segment.bytes. The tablet
// gives it sealed segments and swaps the cleaned ones in under its lock.
//
// What survives a cleaning (Kafka's Cleaner.cleanInto):
//   - a record whose key's last offset in the map is not above its own, or
//     whose key is not in the map (a key only the clean section holds);
//   - a tombstone (null value) only while it is within delete.retention.ms
//     of the cleaned point (DeleteHorizonMs);
//   - no record of an aborted transaction; a transaction marker until the
//     cleaning after the one that removed its transaction's data, and then
//     only within delete.retention.ms, as tombstones;
//   - the last data batch of every active producer, emptied of records if
//     none survive, so that its sequence and epoch survive a restart;
//   - offsets as they were: a batch that loses records keeps its base and
//     last offset, and records keep their own.
//
// Records without a key are removed (a compacted topic refuses them).
package cleaner

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/logfile"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/segment"
	"github.com/seglog/seglog/vfs"
)

// ErrMapTooSmall is returned when the dedupe buffer cannot hold the keys
// of the first dirty batch: raise log.cleaner.dedupe.buffer.size.
var ErrMapTooSmall = seglog.NewKafkaError("cleaner: the dedupe buffer cannot hold one batch's keys", -1)

// Producer is what a cleaning must keep of an active producer: the last
// offset of its last data batch (-1 if the log holds none) and its epoch.
type Producer struct {
	LastDataOffset int64
	Epoch          int16
}

// Log is the part of a tablet a cleaning reads.
type Log struct {
	// Segments are the log's segments from its start whose base is below
	// End, in offset order, all sealed.
	Segments []*segment.Segment
	// FirstDirty is where the dirty section starts (the cleaner's
	// checkpoint, or the log start), and End the first offset not
	// cleanable (the last stable offset, the active segment's base, or the
	// first segment within min.compaction.lag.ms). Both fall on batch
	// boundaries.
	FirstDirty, End int64
	// Aborted holds the aborted transactions overlapping the log below End.
	Aborted []record.AbortedTxn
	// Producers are the active producers, by id.
	Producers map[int64]Producer
	// DeleteHorizonMs: a tombstone, or a removable marker, timestamped at
	// or below it is removed: it is delete.retention.ms older than the
	// cleaned point. (Kafka's older rule looked at whole segments'
	// modification times, which a grouping of old and new segments keeps
	// young; KIP-534 stamps a horizon into each batch. A record's own
	// timestamp against the cleaned point's needs neither.)
	DeleteHorizonMs int64
}

// Options configure a cleaning.
type Options struct {
	FS  vfs.FS
	Dir string
	// Segment configures the cleaned segments (the suffix is set here);
	// SegmentBytes and MaxIndexSize also bound a group.
	Segment segment.Options
	// Map is the dedupe buffer; it is cleared first.
	Map *OffsetMap
	// Throttle, if set, bounds the bytes read and written per second.
	Throttle *Throttler
	// MaxUncompressed bounds a batch's decompressed records. The default
	// is record.DefaultMaxUncompressed.
	MaxUncompressed int
	// Stop, when closed, ends the cleaning with ErrStopped at the next
	// segment: the groups swapped in so far stay.
	Stop <-chan struct{}

	// dead is what BuildMap learnt for Recopy: the batches of each
	// segment it read none of whose records is the last of its key.
	dead deadBatches
}

// ErrStopped is returned by a cleaning ended by Options.Stop.
var ErrStopped = seglog.NewKafkaError("cleaner: stopped", -1)

func (o *Options) ensureDefaults() {
	if o.MaxUncompressed <= 0 {
		o.MaxUncompressed = record.DefaultMaxUncompressed
	}
}

func (o *Options) stopped() error {
	select {
	case <-o.Stop:
		return ErrStopped
	default:
		return nil
	}
}

// Stats count what a cleaning did.
type Stats struct {
	// MapBytesRead is what building the map read; BytesRead what the
	// recopy read; BytesWritten what it wrote.
	MapBytesRead   int64 `json:"mapBytesRead"`
	BytesRead      int64 `json:"bytesRead"`
	BytesWritten   int64 `json:"bytesWritten"`
	RecordsRead    int64 `json:"recordsRead"`
	RecordsRemoved int64 `json:"recordsRemoved"`
	// BatchesRemoved were dropped whole; BatchesEmptied kept without
	// records (a producer's last batch).
	BatchesRemoved int64 `json:"batchesRemoved"`
	BatchesEmptied int64 `json:"batchesEmptied"`
	// BatchesSkipped of those removed were not read again: building the
	// map found none of their records the last of its key.
	BatchesSkipped int64 `json:"batchesSkipped"`
	// Keys is how many keys the map held.
	Keys int `json:"keys"`
	// Groups is how many cleaned segments replaced the old ones.
	Groups int `json:"cleanedSegments"`
}

// BuildMap fills o.Map with the last offset of every key in the dirty
// section [l.FirstDirty, l.End), skipping aborted transactions and control
// batches, and returns where the cleaning ends: l.End, or the first batch
// whose keys did not fit.
func BuildMap(l *Log, o *Options, st *Stats) (int64, error) {
	o.ensureDefaults()
	o.Map.Clear()
	o.dead.reset()
	tx := newTxns(l.Aborted)
	end := l.End
	var it record.Iter
	stop := errors.New("map full")
	for i, s := range l.Segments {
		if i+1 < len(l.Segments) && l.Segments[i+1].BaseOffset() <= l.FirstDirty {
			continue // wholly clean
		}
		if err := o.stopped(); err != nil {
			return 0, err
		}
		err := scan(s, true, nil, func(b record.Batch, pos int64) error {
			if b.LastOffset() < l.FirstDirty {
				return nil
			}
			if b.BaseOffset() >= l.End {
				return stop
			}
			st.MapBytesRead += int64(b.Size())
			o.Throttle.wait(int64(b.Size()))
			if b.IsControl() {
				tx.onControl(b)
				return nil
			}
			if tx.onData(b) {
				return nil // aborted: its records are not the keys' last
			}
			if o.Map.Len()+int(b.NumRecords()) > o.Map.Limit() {
				end = b.BaseOffset()
				return stop
			}
			it.Reset(b, o.MaxUncompressed)
			for it.Next() {
				if r := it.Record(); r.Key != nil {
					o.Map.Put(r.Key, r.Offset)
				}
			}
			if !b.IsTransactional() && !lastOfProducer(l, b) {
				o.dead.add(s, deadBatch{pos: pos, size: int32(b.Size()), records: b.NumRecords(), base: b.BaseOffset(), last: b.LastOffset()})
			}
			return it.Err()
		})
		if err == stop {
			break
		}
		if err != nil {
			return 0, err
		}
	}
	if end <= l.FirstDirty && end < l.End {
		return 0, fmt.Errorf("%w (%d keys fit; the batch at offset %d holds more)", ErrMapTooSmall, o.Map.Limit(), end)
	}
	st.Keys = o.Map.Len()
	o.dead.keepDead(o.Map)
	return end, nil
}

// scan calls fn with every batch of s, read into a buffer of 1 MiB (grown
// for a larger batch) chunk by chunk, CRC checked if verify; damage is a
// *seglog.CorruptionError with the file and position. The batch is valid
// only during fn. Reading, not mapping: a mapping's page faults, one per
// 4 KiB page and pass, and its unmapping cost the cleaner more than the
// copy does, and a file cut under a read is an error, not a fault.
//
// The batches skip lists (dead ones, in position order) are not read:
// its skipped is called with each instead, and no read reaches into one.
func scan(s *segment.Segment, verify bool, skip *deadList, fn func(b record.Batch, pos int64) error) error {
	log, err := s.LogSlice()
	if err != nil {
		return err
	}
	size := log.Size()
	bp := scanBufs.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= 4*scanChunk {
			scanBufs.Put(bp)
		}
	}()
	buf := (*bp)[:0]
	start := int64(0) // buf[0]'s position in the .log
	off := 0          // the next batch's position in buf
	for start+int64(off) < size {
		if d, ok := skip.at(start + int64(off)); ok {
			if err := skip.skipped(d); err != nil {
				return err
			}
			if off += int(d.size); off > len(buf) {
				start, off, buf = start+int64(off), 0, buf[:0]
			}
			continue
		}
		// The next batch's bytes, as many as it declares (or the file
		// has: ParseBatch reports a batch cut short).
		want := int64(record.LogOverhead)
		if rem := buf[off:]; len(rem) >= record.LogOverhead {
			want = int64(binary.BigEndian.Uint32(rem[8:12])) + record.LogOverhead
		}
		want = max(min(want, size-start-int64(off)), 1)
		if int64(len(buf)-off) < want {
			n := copy(buf[:cap(buf)], buf[off:])
			start, off = start+int64(off), 0
			if int64(cap(buf)) < want {
				grown := make([]byte, n, want)
				copy(grown, buf[:n])
				buf, *bp = grown, grown
			}
			fill := min(int64(cap(buf)), size-start, max(skip.next()-start, want))
			got, err := log.ReadAt(buf[n:fill], start+int64(n))
			buf = buf[:n+got]
			if got == 0 || (err != nil && !errors.Is(err, io.EOF)) {
				return fmt.Errorf("cleaner: reading %s at %d: %d bytes of %d (was it cut while being cleaned?): %v",
					s.LogPath(), start+int64(n), got, fill-int64(n), err)
			}
			continue
		}
		b, _, err := record.ParseBatch(buf[off:])
		if err == nil && verify {
			err = b.Verify()
		}
		if err != nil {
			at := start + int64(off)
			var re *record.Error
			if errors.As(err, &re) {
				at += re.Pos
			}
			return &seglog.CorruptionError{Path: s.LogPath(), Offset: at, Reason: err.Error(), Err: err}
		}
		if err := fn(b, start+int64(off)); err != nil {
			return err
		}
		off += b.Size()
	}
	return nil
}

// scanChunk is what scan reads at once.
const scanChunk = 1 << 20

var scanBufs = sync.Pool{New: func() any { b := make([]byte, 0, scanChunk); return &b }}

// Swap replaces the sources by cleaned, a sealed and synced segment whose
// files carry the .cleaned suffix; it returns an error, and the cleaning
// stops, if it cannot (the sources changed meanwhile).
type Swap func(sources []*segment.Segment, cleaned *segment.Segment) error

// Recopy cleans the segments whose base is below end, group by group:
// each group is copied into one .cleaned segment, which swap puts in its
// place before the next group is read. A failure removes the cleaned
// segment being written.
func Recopy(l *Log, end int64, o *Options, swap Swap, st *Stats) error {
	o.ensureDefaults()
	var segs []*segment.Segment
	for _, s := range l.Segments {
		if s.BaseOffset() < end {
			segs = append(segs, s)
		}
	}
	groups, err := group(segs, o.Segment.SegmentBytes, o.Segment.MaxIndexSize, l.End)
	if err != nil {
		return err
	}
	tx := newTxns(l.Aborted)
	c := &copier{l: l, o: o, st: st, tx: tx, end: end, b: record.NewBuilder(record.None)}
	for _, g := range groups {
		if err := o.stopped(); err != nil {
			return err
		}
		cleaned, err := c.cleanGroup(g)
		if err != nil {
			return err
		}
		if err := swap(g, cleaned); err != nil {
			return errors.Join(err, cleaned.RemoveFiles())
		}
		st.Groups++
	}
	return nil
}

// group splits segs into runs that fit one segment: their sizes within
// maxSize, their index entries within maxIndex, their offsets within
// MaxInt32 of the first base (Kafka's groupSegmentsBySize).
func group(segs []*segment.Segment, maxSize int64, maxIndex int, end int64) ([][]*segment.Segment, error) {
	var out [][]*segment.Segment
	for i := 0; i < len(segs); {
		g := []*segment.Segment{segs[i]}
		size := segs[i].Size()
		entries, err := indexEntries(segs[i])
		if err != nil {
			return nil, err
		}
		for i++; i < len(segs); i++ {
			n, err := indexEntries(segs[i])
			if err != nil {
				return nil, err
			}
			last := end - 1
			if i+1 < len(segs) {
				last = segs[i+1].BaseOffset() - 1
			}
			if size+segs[i].Size() > maxSize || (entries+n)*timeEntrySize > maxIndex ||
				last-g[0].BaseOffset() > math.MaxInt32 {
				break
			}
			g = append(g, segs[i])
			size += segs[i].Size()
			entries += n
		}
		out = append(out, g)
	}
	return out, nil
}

// timeEntrySize is the larger of the two index entries (a time entry).
const timeEntrySize = 12

func indexEntries(s *segment.Segment) (int, error) {
	info, err := s.IndexInfo()
	return info.OffsetEntries + 1, err // + the final time entry
}

// copier recopies groups of segments, carrying the transactions' state
// from one group to the next.
type copier struct {
	l   *Log
	o   *Options
	st  *Stats
	tx  *txns
	end int64
	b   *record.Builder
	it  record.Iter
	w   writer
}

func (c *copier) cleanGroup(g []*segment.Segment) (*segment.Segment, error) {
	opts := c.o.Segment
	opts.FileSuffix = logfile.CleanedSuffix
	opts.Preallocate = false
	fs := vfs.OrOS(c.o.FS)
	base := g[0].BaseOffset()
	// A .cleaned left by a pass that failed before is ours to replace.
	stale, err := segment.Open(fs, c.o.Dir, base, opts)
	if err == nil {
		if err := stale.RemoveFiles(); err != nil {
			return nil, err
		}
	}
	out, err := segment.Create(fs, c.o.Dir, base, opts)
	if err != nil {
		return nil, err
	}
	c.w.seg, c.w.chunk, c.w.st, c.w.throttle = out, max(opts.IndexIntervalBytes, 4096), c.st, c.o.Throttle
	c.w.reset()
	err = func() error {
		for _, s := range g {
			// A segment BuildMap read, CRC checked, is read again without.
			skip := c.o.dead.of(s, c.skipped)
			if err := scan(s, s.BaseOffset() < c.l.FirstDirty, skip, c.batch); err != nil {
				return err
			}
		}
		if err := c.w.flush(); err != nil {
			return err
		}
		if err := out.Seal(); err != nil {
			return err
		}
		return out.Flush()
	}()
	if err != nil {
		return nil, errors.Join(err, out.RemoveFiles())
	}
	return out, nil
}

// skipped counts a batch BuildMap found dead, removed without reading it.
func (c *copier) skipped(d deadBatch) error {
	c.st.RecordsRead += int64(d.records)
	c.st.RecordsRemoved += int64(d.records)
	c.st.BatchesRemoved++
	c.st.BatchesSkipped++
	c.tx.reach(d.last)
	return nil
}

// batch copies what survives of one batch.
func (c *copier) batch(b record.Batch, _ int64) error {
	c.st.BytesRead += int64(b.Size())
	c.o.Throttle.wait(int64(b.Size()))
	if b.BaseOffset() >= c.end {
		return c.w.add(b.Bytes(), b.LastOffset(), b.MaxTimestamp()) // past the map: as it is
	}
	n := int64(b.NumRecords())
	c.st.RecordsRead += n
	last := lastOfProducer(c.l, b)
	if b.IsControl() {
		removable, reindex := c.tx.onControl(b)
		if reindex != nil {
			if err := c.w.seg.AppendAbortedTxn(*reindex); err != nil {
				return err
			}
		}
		if removable && b.MaxTimestamp() <= c.l.DeleteHorizonMs && !last {
			c.st.RecordsRemoved += n
			c.st.BatchesRemoved++
			return nil
		}
		return c.w.add(b.Bytes(), b.LastOffset(), b.MaxTimestamp())
	}
	aborted := c.tx.onData(b)
	h := b.Header()
	c.b.Reset()
	maxTs := int64(record.NoTimestamp)
	kept := int64(0)
	if !aborted {
		c.it.Reset(b, c.o.MaxUncompressed)
		for c.it.Next() {
			r := c.it.Record()
			if r.Key == nil || r.Offset < c.o.Map.Get(r.Key) || (r.Value == nil && r.Timestamp <= c.l.DeleteHorizonMs) {
				continue
			}
			if err := c.b.AppendRaw(r); err != nil {
				return err
			}
			maxTs = max(maxTs, r.Timestamp)
			kept++
		}
		if err := c.it.Err(); err != nil {
			return err
		}
	}
	c.st.RecordsRemoved += n - kept
	switch {
	case kept == n:
		return c.w.add(b.Bytes(), b.LastOffset(), b.MaxTimestamp())
	case kept == 0 && !last:
		c.st.BatchesRemoved++
		return nil
	case kept == 0:
		// The producer's last batch stays, without records: its
		// sequence, epoch and offsets are what a restart rebuilds the
		// producer from.
		c.st.BatchesEmptied++
		h.Attributes = record.MakeAttributes(record.None, h.Attributes.TimestampType(), h.Attributes.IsTransactional(), false, false)
		h.BaseTimestamp = h.MaxTimestamp
	default:
		if h.Attributes.TimestampType() == record.CreateTime {
			h.MaxTimestamp = maxTs
		}
	}
	c.b.SetHeader(h)
	out, err := c.b.AppendTo(c.w.scratch[:0])
	if err != nil {
		return err
	}
	c.w.scratch = out
	return c.w.add(out, b.LastOffset(), h.MaxTimestamp)
}

// lastOfProducer says b is the last batch of an active producer (Kafka's
// isBatchLastRecordOfProducer): its last data batch, or, for a producer
// whose data is gone, a marker of its current epoch.
func lastOfProducer(l *Log, b record.Batch) bool {
	if !b.HasProducerID() {
		return false
	}
	p, ok := l.Producers[b.ProducerID()]
	if !ok {
		return false
	}
	if p.LastDataOffset >= 0 {
		return b.LastOffset() == p.LastDataOffset
	}
	return b.IsControl() && b.ProducerEpoch() == p.Epoch
}

// writer appends batches to a cleaned segment in chunks of about the
// index interval, each chunk one append (one index entry).
type writer struct {
	seg      *segment.Segment
	chunk    int
	buf      []byte
	info     segment.AppendInfo
	scratch  []byte // a rewritten batch
	st       *Stats
	throttle *Throttler
}

func (w *writer) reset() {
	w.buf = w.buf[:0]
	w.info = segment.AppendInfo{LargestTimestamp: record.NoTimestamp}
}

func (w *writer) add(batch []byte, last, maxTs int64) error {
	if len(w.buf) > 0 && len(w.buf)+len(batch) > w.chunk {
		if err := w.flush(); err != nil {
			return err
		}
	}
	w.buf = append(w.buf, batch...)
	w.info.LargestOffset = last
	if maxTs > w.info.LargestTimestamp {
		w.info.LargestTimestamp, w.info.ShallowOffsetOfMaxTimestamp = maxTs, last
	}
	return nil
}

func (w *writer) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	if err := w.seg.Append(w.info, w.buf); err != nil {
		return err
	}
	w.st.BytesWritten += int64(len(w.buf))
	w.throttle.wait(int64(len(w.buf)))
	w.reset()
	return nil
}

// txns follows transactions through the log in offset order (Kafka's
// CleanedTransactionMetadata).
type txns struct {
	aborted   []record.AbortedTxn // by first offset, not reached yet
	ongoingAb map[int64]*abortedTxn
	ongoingCo map[int64]bool
}

type abortedTxn struct {
	txn  record.AbortedTxn
	seen bool // a data batch of it was read (and removed)
}

func newTxns(aborted []record.AbortedTxn) *txns {
	a := slices.Clone(aborted)
	slices.SortFunc(a, func(x, y record.AbortedTxn) int { return int(x.FirstOffset - y.FirstOffset) })
	return &txns{aborted: a, ongoingAb: map[int64]*abortedTxn{}, ongoingCo: map[int64]bool{}}
}

func (t *txns) reach(offset int64) {
	for len(t.aborted) > 0 && t.aborted[0].FirstOffset <= offset {
		a := t.aborted[0]
		t.ongoingAb[a.ProducerID] = &abortedTxn{txn: a}
		t.aborted = t.aborted[1:]
	}
}

// onData reports that b is a batch of an aborted transaction.
func (t *txns) onData(b record.Batch) bool {
	t.reach(b.LastOffset())
	if !b.IsTransactional() {
		return false
	}
	if a := t.ongoingAb[b.ProducerID()]; a != nil {
		a.seen = true
		return true
	}
	t.ongoingCo[b.ProducerID()] = true
	return false
}

// onControl reports whether the marker b may be removed (no data of its
// transaction was read since it began), and, for an ABORT whose data this
// pass removed, the transaction to keep in the cleaned transaction index.
func (t *txns) onControl(b record.Batch) (removable bool, reindex *record.AbortedTxn) {
	t.reach(b.LastOffset())
	m, err := b.EndTxnMarker()
	if err != nil {
		return false, nil // not a transaction marker: kept
	}
	pid := b.ProducerID()
	switch m.Type {
	case record.ControlAbort:
		a := t.ongoingAb[pid]
		delete(t.ongoingAb, pid)
		if a != nil && a.seen {
			return false, &a.txn
		}
		return true, nil
	case record.ControlCommit:
		seen := t.ongoingCo[pid]
		delete(t.ongoingCo, pid)
		return !seen, nil
	}
	return false, nil
}

// Throttler bounds a cleaning's I/O to a rate
// (log.cleaner.io.max.bytes.per.second), sleeping when ahead of it.
type Throttler struct {
	rate  float64 // bytes per second
	start time.Time
	bytes int64
	sleep func(time.Duration)
	now   func() time.Time
}

// NewThrottler returns a throttler of rate bytes per second; a rate of 0
// or less (or +Inf) does not throttle.
func NewThrottler(rate float64) *Throttler {
	if rate <= 0 || math.IsInf(rate, 1) {
		return nil
	}
	return &Throttler{rate: rate, start: time.Now(), sleep: time.Sleep, now: time.Now}
}

func (t *Throttler) wait(n int64) {
	if t == nil {
		return
	}
	t.bytes += n
	want := time.Duration(float64(t.bytes) / t.rate * float64(time.Second))
	if ahead := want - t.now().Sub(t.start); ahead > 10*time.Millisecond {
		t.sleep(ahead)
	}
}
