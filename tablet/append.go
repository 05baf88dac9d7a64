package tablet

import (
	"errors"
	"fmt"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/segment"
	"github.com/seglog/seglog/writerstate"
)

// AppendOptions say who appends and how durably.
type AppendOptions struct {
	// Origin selects Kafka's rules (docs/format.md §1.6, 5.3): a client producer
	// (every check; offsets assigned here), a transaction coordinator
	// (COMMIT/ABORT markers), or replication (the batch keeps the offsets
	// and leader epoch it carries, which must follow the log end). The
	// default is OriginClient.
	Origin record.Origin
	// Sync returns only after the append is durable. Concurrent Sync
	// appends share one fsync (group commit), and it is of the .log files
	// only (and the directory for a new segment): the indexes and writer
	// snapshots wait for the next full flush — a roll, Flush, flush.ms or
	// flush.messages, Close — which moves the recovery point; a crash
	// before it makes recovery read the records from the recovery point
	// again. Offsets.DurableOffset shows what Sync appends made durable.
	// The default is false: the append is in the page cache, and durable
	// at the next flush.
	Sync bool
}

// AppendResult is where an append went.
type AppendResult struct {
	FirstOffset, LastOffset int64
	// Duplicate reports a retry of one of the producer's last five batches:
	// nothing was written, and the offsets are those of the original.
	Duplicate bool
	// LogAppendTime is the time stamped on the batch when the topic uses
	// LogAppendTime, or -1.
	LogAppendTime int64
	// LogStartOffset is the log start after the append.
	LogStartOffset int64
}

var (
	// ErrUnexpectedAppendOffset is returned by a replication append whose
	// first offset is below the log end.
	ErrUnexpectedAppendOffset = seglog.NewKafkaError("tablet: unexpected append offset", -1)
	// ErrOffsetsOutOfOrder is returned by a replication append whose
	// offsets do not increase.
	ErrOffsetsOutOfOrder = seglog.NewKafkaError("tablet: offsets out of order", -1)
)

// Append appends one RecordBatch v2 (raw bytes, as a producer sends it:
// base offset 0). The batch is validated (docs/format.md §1.6), checked against the
// writer state (a duplicate is answered with the original offsets), and
// written with one positional write after its offsets, leader epoch and,
// for LogAppendTime, its timestamp are stamped in place: data is changed.
// A rejected batch writes nothing and moves no offset.
func (t *Tablet) Append(data []byte, opts AppendOptions) (AppendResult, error) {
	if err := t.readOnlyErr(); err != nil {
		return AppendResult{}, err
	}
	cfg := t.Config()
	now := t.opts.Now().UnixMilli()
	// compression.type: a client's batch is stored with the topic's codec
	// (a replica's as its leader stored it).
	codec, recompress, _ := compressionTarget(cfg.CompressionType)
	v, err := record.ValidateAppend(data, record.ValidateOptions{Origin: opts.Origin, MaxMessageBytes: cfg.MaxMessageBytes,
		TimestampType: cfg.TimestampType, TimestampBeforeMaxMs: cfg.TimestampBeforeMaxMs,
		TimestampAfterMaxMs: cfg.TimestampAfterMaxMs, NowMs: now,
		Compacted:  cfg.Compacted() && opts.Origin == record.OriginClient,
		Recompress: recompress && opts.Origin == record.OriginClient, Compression: codec})
	if err == nil && int64(v.Batch.Size()) > cfg.SegmentBytes {
		err = fmt.Errorf("%w: %d bytes, segment.bytes is %d", ErrRecordBatchTooLarge, v.Batch.Size(), cfg.SegmentBytes)
	}
	if err != nil {
		t.stats.reject(err)
		return AppendResult{}, err
	}
	res, err := t.append(v, opts, now)
	switch {
	case err != nil:
		t.stats.reject(err)
		return res, err
	case res.Duplicate:
		t.stats.duplicates.Add(1)
		return res, nil
	}
	t.stats.appends.Add(1)
	t.stats.bytes.Add(int64(v.Batch.Size()))
	t.stats.records.Add(int64(v.Batch.NumRecords()))
	if opts.Sync {
		return res, t.syncTo(res.LastOffset + 1)
	}
	return res, t.maybeFlush(res.LastOffset + 1)
}

// append does the locked part of Append.
func (t *Tablet) append(v record.Validated, opts AppendOptions, now int64) (AppendResult, error) {
	b := v.Batch
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.usableLocked(); err != nil {
		return AppendResult{}, err
	}
	pub := t.view()
	leo := pub.leo.offset
	res := AppendResult{LogAppendTime: -1, LogStartOffset: pub.logStart}

	a := t.mu.state.NewAppend(opts.Origin)
	if b.HasProducerID() && !b.IsControl() && opts.Origin != record.OriginReplication {
		if dup, ok := a.Duplicate(b); ok {
			res.FirstOffset, res.LastOffset, res.Duplicate = dup.FirstOffset(), dup.LastOffset, true
			return res, nil
		}
	}

	epoch := t.mu.epoch
	if opts.Origin == record.OriginReplication {
		if b.BaseOffset() < leo {
			return res, fmt.Errorf("%w: first offset %d is below the log end %d", ErrUnexpectedAppendOffset, b.BaseOffset(), leo)
		}
		if b.LastOffset() < b.BaseOffset() {
			return res, fmt.Errorf("%w: last offset %d below first offset %d", ErrOffsetsOutOfOrder, b.LastOffset(), b.BaseOffset())
		}
		epoch = b.PartitionLeaderEpoch()
	}
	first := leo
	if opts.Origin == record.OriginReplication {
		first = b.BaseOffset()
	}
	last := first + int64(b.LastOffsetDelta())

	cfg := t.mu.cfg
	maxTs := v.MaxTimestamp
	if cfg.TimestampType == record.LogAppendTime && opts.Origin != record.OriginReplication {
		maxTs, res.LogAppendTime = now, now
	}
	reason, err := t.mu.active.ShouldRoll(segment.RollParams{SegmentBytes: cfg.SegmentBytes, SegmentMs: cfg.SegmentMs,
		MaxTimestamp: maxTs, MaxOffset: last, Size: int64(b.Size()), NowMs: now})
	if err != nil {
		return res, err
	}
	if reason != segment.RollNone {
		if err := t.rollLocked(max(first, leo), reason); err != nil {
			return res, err
		}
	}

	// Stamp in place (docs/format.md §1.5): nothing is written yet, so a rejection
	// below leaves the log as it was.
	if opts.Origin != record.OriginReplication {
		b.SetLastOffset(last)
		b.SetPartitionLeaderEpoch(epoch)
		switch {
		case res.LogAppendTime >= 0:
			b.SetMaxTimestamp(record.LogAppendTime, now)
		case b.TimestampType() == record.CreateTime && v.MaxTimestamp >= 0:
			b.SetMaxTimestamp(record.CreateTime, v.MaxTimestamp)
		}
	}
	completed, err := a.AddBatch(b)
	if err != nil {
		return res, err
	}

	active := t.mu.active
	if err := active.Append(segment.AppendInfo{LargestOffset: last, LargestTimestamp: b.MaxTimestamp(),
		ShallowOffsetOfMaxTimestamp: last}, b.Bytes()); err != nil {
		if errors.Is(err, segment.ErrOffsetOverflow) || errors.Is(err, segment.ErrIndexFull) {
			return res, err
		}
		// A write that failed (even one the segment undid) fails the
		// tablet, as Kafka takes the directory offline: the device may
		// have lost more than this write. Reopening recovers.
		if failedErr := active.Failed(); failedErr != nil {
			err = failedErr
		}
		return res, t.failLocked(err)
	}
	active.dirty.Store(true)
	active.unsynced.Store(true)
	t.mu.state.Apply(a)
	if completed != nil {
		if err := t.completeTxnLocked(*completed); err != nil {
			return res, t.failLocked(err)
		}
	}
	if latest, ok := t.mu.epochs.LatestEpoch(); !ok || epoch > latest {
		if err := t.mu.epochs.AssignLazy(epoch, first); err != nil {
			return res, t.failLocked(err)
		}
		t.mu.epoch = max(t.mu.epoch, epoch)
	}
	t.mu.state.UpdateMapEndOffset(last + 1)

	end := mark{offset: last + 1, base: active.base, pos: active.Size()}
	pub.leo = end
	if !t.manualHW.Load() {
		pub.hw = end
		t.mu.state.OnHighWatermarkUpdated(end.offset)
	}
	pub.lso = t.lsoMarkLocked(pub.hw, pub.logStart)
	t.publishLocked(pub)
	res.FirstOffset, res.LastOffset = first, last
	return res, nil
}

// completeTxnLocked indexes an aborted transaction and ends it in the
// writer state.
func (t *Tablet) completeTxnLocked(c writerstate.CompletedTxn) error {
	if c.IsAborted {
		at := record.AbortedTxn{ProducerID: c.ProducerID, FirstOffset: c.FirstOffset, LastOffset: c.LastOffset,
			LastStableOffset: t.mu.state.LastStableOffsetOf(c)}
		if err := t.mu.active.AppendAbortedTxn(at); err != nil {
			return err
		}
	}
	return t.mu.state.CompleteTxn(c)
}

// maybeFlush flushes when flush.messages records are waiting (Kafka's
// unflushedMessages = log end − recovery point).
func (t *Tablet) maybeFlush(end int64) error {
	cfg := t.Config()
	if end-t.view().recoveryPoint >= cfg.FlushMessages {
		return t.flushTo(end)
	}
	return nil
}

// rollLocked seals the active segment and starts one at base (docs/format.md §3.6).
// The writer state is snapshotted at base (synced by the next flush), and a
// background flush makes everything below base durable.
func (t *Tablet) rollLocked(base int64, why segment.RollReason) error {
	old := t.mu.active
	if old.base == base {
		if old.Size() > 0 {
			return fmt.Errorf("tablet: rolling onto the existing segment at %d", base)
		}
		return nil // an empty active segment is already where the roll would go
	}
	if err := old.Seal(); err != nil {
		return t.failLocked(err)
	}
	next, err := old.ReadNextOffset()
	if err != nil {
		return t.failLocked(err)
	}
	old.next.Store(next)
	old.sealed.Store(true)
	t.touch(old) // it counts against MaxOpenSegments from now on
	s, err := segment.Create(t.fsys, t.dir, base, t.segmentOptionsLocked())
	if err != nil {
		return t.failLocked(err)
	}
	g := newSeg(s)
	g.dirty.Store(true) // its creation needs a directory sync (named is false)
	t.putSegLocked(g)
	t.mu.active = g
	t.mu.state.UpdateMapEndOffset(base)
	// Published before the snapshot: a failure there leaves the tablet
	// failed with a view that matches its segments.
	v := t.view()
	v.leo = mark{offset: v.leo.offset, base: base, pos: 0}
	if v.hw.offset == v.leo.offset {
		v.hw = v.leo
	}
	if v.lso.offset == v.leo.offset {
		v.lso = v.leo
	}
	t.publishLocked(v)
	// The snapshot is synced by the flush that moves the recovery point
	// past it — or now, if the recovery point is there already (a roll
	// right after a flush): no later flush would.
	if err := t.mu.state.TakeSnapshot(base <= v.recoveryPoint); err != nil {
		return t.failLocked(err)
	}
	t.stats.rolls.Add(1)
	t.opts.Logger.Debug("rolled", "tablet", t.tp.String(), "base", base, "reason", why.String())
	t.bg.Add(1)
	go func() {
		defer t.bg.Done()
		if err := t.flushTo(base); err != nil && !errors.Is(err, ErrClosed) && !errors.Is(err, ErrFailed) { // (failing, reported once)
			t.opts.Logger.Error("flushing after a roll", "tablet", t.tp.String(), "err", err)
		}
	}()
	return nil
}

func (t *Tablet) segmentOptionsLocked() segment.Options {
	o := t.mu.cfg.segmentOptions()
	o.Now = t.opts.Now
	return o
}

// AppendRecords builds one batch from plain records (no producer) with the
// codec and appends it. Only Key, Value, Headers and Timestamp of each record
// are used. A record without a timestamp (0, the zero value, or
// record.NoTimestamp) is stamped with the append time from the tablet's
// clock, as a Kafka producer stamps a record it is given without one: a
// timestamp of 0 would put the record 56 years in the past, and the default
// retention.ms (7 days) would delete it at the next retention pass. records
// is not changed.
func (t *Tablet) AppendRecords(records []record.Record, codec record.Compression, opts AppendOptions) (AppendResult, error) {
	b := record.NewBuilder(codec)
	now := int64(-1)
	for _, r := range records {
		if r.Timestamp == 0 || r.Timestamp == record.NoTimestamp {
			if now < 0 {
				now = t.opts.Now().UnixMilli()
			}
			r.Timestamp = now
		}
		if err := b.Append(r); err != nil {
			return AppendResult{}, err
		}
	}
	batch, err := b.Build()
	if err != nil {
		return AppendResult{}, err
	}
	return t.Append(batch.Bytes(), opts)
}

// LeaderEpoch is the leader epoch stamped on appended batches (the
// latest of the log's, at open).
func (t *Tablet) LeaderEpoch() int32 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.epoch
}

// SetLeaderEpoch sets the leader epoch stamped on appended batches from
// now on; it may not go down.
func (t *Tablet) SetLeaderEpoch(epoch int32) error {
	if err := t.readOnlyErr(); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if epoch < t.mu.epoch {
		return fmt.Errorf("tablet: leader epoch %d is below the current %d", epoch, t.mu.epoch)
	}
	t.mu.epoch = epoch
	return nil
}

// BecomeLeader makes epoch the leader epoch stamped on appended batches
// and records in the leader-epoch cache that it starts at the log end,
// as Kafka's new leader does before its first append: a follower asking
// where an older epoch ends (OffsetForLeaderEpoch) is answered at once.
// The epoch may not go down.
func (t *Tablet) BecomeLeader(epoch int32) error {
	if err := t.readOnlyErr(); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.usableLocked(); err != nil {
		return err
	}
	if latest, ok := t.mu.epochs.LatestEpoch(); epoch < t.mu.epoch || ok && epoch < latest {
		return fmt.Errorf("tablet: leader epoch %d is below the current %d", epoch, max(t.mu.epoch, latest))
	}
	if err := t.mu.epochs.Assign(epoch, t.view().leo.offset); err != nil {
		return t.failLocked(err)
	}
	t.mu.epoch = epoch
	return nil
}

// SetManualHighWatermark leaves the high watermark to SetHighWatermark
// from now on (on), as a replicated partition's, or makes it follow the
// log end again (off), moving it there at once.
func (t *Tablet) SetManualHighWatermark(on bool) error {
	if t.manualHW.Swap(on) == on || on {
		return nil
	}
	return t.SetHighWatermark(t.Offsets().LogEndOffset)
}

// SetHighWatermark moves the high watermark (with ManualHighWatermark);
// it is clamped to [log start, log end].
func (t *Tablet) SetHighWatermark(hw int64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.usableLocked(); err != nil {
		return err
	}
	v := t.view()
	hw = min(max(hw, v.logStart), v.leo.offset)
	v.hw = t.markOfLocked(hw, v.leo)
	t.mu.state.OnHighWatermarkUpdated(hw)
	v.lso = t.lsoMarkLocked(v.hw, v.logStart)
	t.publishLocked(v)
	return nil
}
