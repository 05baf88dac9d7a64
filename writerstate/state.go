package writerstate

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/vfs"
)

// Defaults, Kafka's.
const (
	// DefaultProducerIDExpirationMs is producer.id.expiration.ms: 1 day.
	DefaultProducerIDExpirationMs = 24 * 60 * 60 * 1000
	// DefaultMaxTransactionTimeoutMs is transaction.max.timeout.ms: 15 min.
	DefaultMaxTransactionTimeoutMs = 15 * 60 * 1000
	// LateTransactionBufferMs is added to the transaction timeout before an
	// open transaction counts as late.
	LateTransactionBufferMs = 5 * 60 * 1000
)

// Options configure a State.
type Options struct {
	// ProducerIDExpirationMs is how long a producer with no open
	// transaction is kept after its last timestamp
	// (producer.id.expiration.ms). The default is 86400000.
	ProducerIDExpirationMs int64
	// MaxTransactionTimeoutMs is the longest transaction timeout
	// (transaction.max.timeout.ms). The default is 900000.
	MaxTransactionTimeoutMs int64
	// SyncSnapshots fsyncs each snapshot as it is written. The default is
	// false (the tablet fsyncs them before the recovery point moves).
	SyncSnapshots bool
	// Now is the clock. The default is time.Now.
	Now func() time.Time
}

// EnsureDefaults fills zero fields with their defaults.
func (o *Options) EnsureDefaults() {
	if o.ProducerIDExpirationMs == 0 {
		o.ProducerIDExpirationMs = DefaultProducerIDExpirationMs
	}
	if o.MaxTransactionTimeoutMs == 0 {
		o.MaxTransactionTimeoutMs = DefaultMaxTransactionTimeoutMs
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Verification is a transaction-verification entry: the broker checked with
// the coordinator that the producer's transaction is ongoing, and the
// lowest sequence it saw doing so. A client append with a higher first
// sequence is refused.
type Verification struct {
	LowestSequence int32
	Epoch          int16
	TimestampMs    int64 // when it was created, for expiry
}

// State is the writer state of one tablet. It is not safe for concurrent
// use: the tablet's lock guards it.
type State struct {
	fsys vfs.FS
	dir  string
	opts Options

	producers    map[int64]*Entry
	verification map[int64]*Verification
	ongoing      []TxnMetadata // open transactions, by first offset
	unreplicated []TxnMetadata // completed, marker above the high watermark, by first offset
	snapshots    []int64       // snapshot files in dir, ascending
	unsynced     []int64       // those written without fsync and not yet synced, ascending
	mapEnd       int64         // the offset after the last one applied
	snapEnd      int64         // the offset of the last snapshot taken or loaded
	oldestTxnTS  int64         // last timestamp of the oldest open transaction's producer, or -1
}

// Open returns the writer state of the tablet in dir, empty, with the
// snapshot files found there listed (TruncateAndReload loads one).
func Open(fsys vfs.FS, dir string, opts Options) (*State, error) {
	fsys = vfs.OrOS(fsys)
	opts.EnsureDefaults()
	s := &State{fsys: fsys, dir: dir, opts: opts, producers: map[int64]*Entry{},
		verification: map[int64]*Verification{}, oldestTxnTS: -1}
	var err error
	if s.snapshots, err = listSnapshots(fsys, dir); err != nil {
		return nil, err
	}
	return s, nil
}

// Apply makes an append's changes to the producers and starts its
// transactions. Call it once the append's batches are in the log; then
// complete the transactions its markers ended (LastStableOffsetOf,
// CompleteTxn) and move the map end (UpdateMapEndOffset).
func (s *State) Apply(a *Append) {
	for _, ai := range a.infos {
		if e, ok := s.producers[ai.pid]; ok {
			e.merge(&ai.updated)
		} else {
			s.producers[ai.pid] = ai.updated.clone()
		}
		for _, t := range ai.started {
			s.ongoing = insertTxn(s.ongoing, t)
		}
	}
	s.updateOldestTxnTimestamp()
}

func insertTxn(txns []TxnMetadata, t TxnMetadata) []TxnMetadata {
	i, found := slices.BinarySearchFunc(txns, t.FirstOffset, func(x TxnMetadata, first int64) int {
		return cmp.Compare(x.FirstOffset, first)
	})
	if found {
		txns[i] = t
		return txns
	}
	return slices.Insert(txns, i, t)
}

func (s *State) updateOldestTxnTimestamp() {
	s.oldestTxnTS = -1
	if len(s.ongoing) > 0 {
		if e, ok := s.producers[s.ongoing[0].ProducerID]; ok {
			s.oldestTxnTS = e.LastTimestamp
		}
	}
}

// Replay applies one batch as replication does, moves the map end past
// it, and returns the transaction it aborted (with its last stable offset)
// for the transaction index of the segment holding it. It is the hook
// segment recovery calls.
func (s *State) Replay(b record.Batch) ([]record.AbortedTxn, error) {
	a := s.NewAppend(record.OriginReplication)
	completed, err := a.AddBatch(b)
	if err != nil {
		return nil, err
	}
	s.Apply(a)
	var aborted []record.AbortedTxn
	if completed != nil {
		if completed.IsAborted {
			aborted = append(aborted, record.AbortedTxn{ProducerID: completed.ProducerID,
				FirstOffset: completed.FirstOffset, LastOffset: completed.LastOffset,
				LastStableOffset: s.LastStableOffsetOf(*completed)})
		}
		if err := s.CompleteTxn(*completed); err != nil {
			return nil, err
		}
	}
	s.UpdateMapEndOffset(b.LastOffset() + 1)
	return aborted, nil
}

// LastStableOffsetOf returns the last stable offset once c completes, for
// its transaction index entry: the first offset of the earliest open
// transaction of another producer, else the offset after the marker. Call
// it before CompleteTxn.
func (s *State) LastStableOffsetOf(c CompletedTxn) int64 {
	for _, t := range s.ongoing {
		if t.ProducerID != c.ProducerID {
			return t.FirstOffset
		}
	}
	return c.LastOffset + 1
}

// CompleteTxn moves a transaction from ongoing to completed-but-unreplicated,
// where it stays until the high watermark passes its marker.
func (s *State) CompleteTxn(c CompletedTxn) error {
	i := slices.IndexFunc(s.ongoing, func(t TxnMetadata) bool { return t.FirstOffset == c.FirstOffset })
	if i < 0 {
		return fmt.Errorf("writerstate: completing transaction %+v, which was not started", c)
	}
	t := s.ongoing[i]
	s.ongoing = slices.Delete(s.ongoing, i, i+1)
	t.LastOffset = c.LastOffset
	s.unreplicated = insertTxn(s.unreplicated, t)
	s.updateOldestTxnTimestamp()
	return nil
}

// FindDuplicate returns the retained batch of a client batch's producer
// with the batch's epoch and sequence range: a retry of it, to be answered
// with the original offsets instead of being written again (docs/format.md §5.2).
func (s *State) FindDuplicate(pid int64, epoch int16, firstSeq, lastSeq int32) (BatchMetadata, bool) {
	e, ok := s.producers[pid]
	if !ok {
		return BatchMetadata{}, false
	}
	return e.duplicateOf(epoch, firstSeq, lastSeq)
}

// Producer returns a copy of the state of producer pid.
func (s *State) Producer(pid int64) (Entry, bool) {
	e, ok := s.producers[pid]
	if !ok {
		return Entry{}, false
	}
	return *e.clone(), true
}

// Producers returns a copy of every producer's state, by producer id.
func (s *State) Producers() []Entry {
	out := make([]Entry, 0, len(s.producers))
	for _, e := range s.producers {
		out = append(out, *e.clone())
	}
	slices.SortFunc(out, func(a, b Entry) int { return cmp.Compare(a.ProducerID, b.ProducerID) })
	return out
}

// ProducerCount returns the number of producers with state.
func (s *State) ProducerCount() int { return len(s.producers) }

// IsEmpty reports whether there are no producers and no unreplicated
// transactions.
func (s *State) IsEmpty() bool { return len(s.producers) == 0 && len(s.unreplicated) == 0 }

// MapEndOffset returns the offset after the last one the state covers.
func (s *State) MapEndOffset() int64 { return s.mapEnd }

// UpdateMapEndOffset sets the offset after the last one the state covers.
// Every append moves it, with or without a producer id.
func (s *State) UpdateMapEndOffset(offset int64) { s.mapEnd = offset }

// FirstUndecidedOffset returns the first offset of the earliest open
// transaction.
func (s *State) FirstUndecidedOffset() (int64, bool) {
	if len(s.ongoing) == 0 {
		return 0, false
	}
	return s.ongoing[0].FirstOffset, true
}

// FirstUnstableOffset returns the earliest first offset among the open
// transactions and the completed ones whose markers are above the high
// watermark.
func (s *State) FirstUnstableOffset() (int64, bool) {
	first, ok := s.FirstUndecidedOffset()
	if len(s.unreplicated) > 0 && (!ok || s.unreplicated[0].FirstOffset < first) {
		return s.unreplicated[0].FirstOffset, true
	}
	return first, ok
}

// LastStableOffset returns the partition's last stable offset: the first
// unstable offset (never below logStart) if it is below the high
// watermark, else the high watermark.
func (s *State) LastStableOffset(highWatermark, logStart int64) int64 {
	if fuo, ok := s.FirstUnstableOffset(); ok {
		if fuo = max(fuo, logStart); fuo < highWatermark {
			return fuo
		}
	}
	return highWatermark
}

// OnHighWatermarkUpdated forgets the completed transactions whose markers
// are now below the high watermark.
func (s *State) OnHighWatermarkUpdated(highWatermark int64) {
	s.removeUnreplicatedBelow(highWatermark)
}

func (s *State) removeUnreplicatedBelow(offset int64) {
	s.unreplicated = slices.DeleteFunc(s.unreplicated, func(t TxnMetadata) bool { return t.LastOffset < offset })
}

// OnLogStartOffsetIncremented drops what lies below a new log start.
func (s *State) OnLogStartOffsetIncremented(logStart int64) {
	s.removeUnreplicatedBelow(logStart)
	s.mapEnd = max(s.mapEnd, logStart)
	s.snapEnd = logStart
	if n := len(s.snapshots); n > 0 {
		s.snapEnd = s.snapshots[n-1]
	}
}

// HasLateTransaction reports whether the oldest open transaction's last
// write is older than the transaction timeout plus a buffer.
func (s *State) HasLateTransaction(nowMs int64) bool {
	return s.oldestTxnTS > 0 && nowMs-s.oldestTxnTS > s.opts.MaxTransactionTimeoutMs+LateTransactionBufferMs
}

func (s *State) expired(nowMs int64, e *Entry) bool {
	return e.CurrentTxnFirstOffset < 0 && nowMs-e.LastTimestamp >= s.opts.ProducerIDExpirationMs
}

// RemoveExpiredProducers forgets the producers with no open transaction
// whose last timestamp is at least the expiration old, and the
// verification entries that old.
func (s *State) RemoveExpiredProducers(nowMs int64) {
	for pid, e := range s.producers {
		if s.expired(nowMs, e) {
			delete(s.producers, pid)
		}
	}
	for pid, v := range s.verification {
		if nowMs-v.TimestampMs >= s.opts.ProducerIDExpirationMs {
			delete(s.verification, pid)
		}
	}
}

// MaybeCreateVerification records that producer pid's transaction was
// verified with its coordinator at sequence seq and epoch. An existing
// entry keeps the lower sequence of a same epoch, takes a higher epoch's,
// and ignores a lower epoch.
func (s *State) MaybeCreateVerification(pid int64, seq int32, epoch int16) Verification {
	v, ok := s.verification[pid]
	switch {
	case !ok:
		v = &Verification{LowestSequence: seq, Epoch: epoch, TimestampMs: s.opts.Now().UnixMilli()}
		s.verification[pid] = v
	case epoch > v.Epoch:
		v.LowestSequence, v.Epoch = seq, epoch
	case epoch == v.Epoch:
		v.LowestSequence = min(v.LowestSequence, seq)
	}
	return *v
}

// VerificationOf returns producer pid's verification entry.
func (s *State) VerificationOf(pid int64) (Verification, bool) {
	v, ok := s.verification[pid]
	if !ok {
		return Verification{}, false
	}
	return *v, true
}

// ClearVerification drops producer pid's verification entry (once its
// transactional data is written).
func (s *State) ClearVerification(pid int64) { delete(s.verification, pid) }

// LoadEntries adds producer entries as a snapshot would (a tiered tablet
// restores them from its newest object's snapshot). Their open
// transactions become ongoing ones.
func (s *State) LoadEntries(entries []Entry) {
	for i := range entries {
		s.loadEntry(entries[i].clone())
	}
	s.updateOldestTxnTimestamp()
}

// loadEntry adds an entry read from a snapshot.
func (s *State) loadEntry(e *Entry) {
	s.producers[e.ProducerID] = e
	if e.CurrentTxnFirstOffset >= 0 {
		s.ongoing = insertTxn(s.ongoing, TxnMetadata{ProducerID: e.ProducerID, FirstOffset: e.CurrentTxnFirstOffset, LastOffset: -1})
	}
}
