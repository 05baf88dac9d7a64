package writerstate

import (
	"slices"

	"github.com/seglog/seglog/record"
)

// BatchesToRetain is how many batches per producer are kept for duplicate
// detection: the idempotent producer's largest
// max.in.flight.requests.per.connection.
const BatchesToRetain = 5

// BatchMetadata describes one appended batch of a producer.
type BatchMetadata struct {
	LastSeq     int32
	LastOffset  int64
	OffsetDelta int32 // LastOffset - first offset, and LastSeq - first sequence
	Timestamp   int64 // the batch's max timestamp
}

// FirstSeq returns the batch's first sequence (wrapping).
func (b BatchMetadata) FirstSeq() int32 { return record.DecrementSequence(b.LastSeq, b.OffsetDelta) }

// FirstOffset returns the batch's first offset.
func (b BatchMetadata) FirstOffset() int64 { return b.LastOffset - int64(b.OffsetDelta) }

// Entry is the state of one producer id.
type Entry struct {
	ProducerID       int64
	Epoch            int16 // -1: none (a new, expired or deleted producer)
	CoordinatorEpoch int32 // -1 initially
	// LastTimestamp is the max timestamp of the producer's last batch or
	// marker: record time, not wall-clock time.
	LastTimestamp int64
	// CurrentTxnFirstOffset is the first offset of the producer's open
	// transaction, or -1.
	CurrentTxnFirstOffset int64
	// Batches are the producer's most recent batches, oldest first, at most
	// BatchesToRetain, all of epoch Epoch.
	Batches []BatchMetadata
}

func emptyEntry(pid int64) *Entry {
	return &Entry{ProducerID: pid, Epoch: record.NoProducerEpoch, CoordinatorEpoch: -1,
		LastTimestamp: record.NoTimestamp, CurrentTxnFirstOffset: -1}
}

func (e *Entry) clone() *Entry {
	c := *e
	c.Batches = slices.Clone(e.Batches)
	return &c
}

// IsEmpty reports whether no batch is retained.
func (e Entry) IsEmpty() bool { return len(e.Batches) == 0 }

// FirstSeq returns the first sequence of the oldest retained batch, or -1.
func (e Entry) FirstSeq() int32 {
	if e.IsEmpty() {
		return record.NoSequence
	}
	return e.Batches[0].FirstSeq()
}

// LastSeq returns the last sequence of the newest retained batch, or -1.
func (e Entry) LastSeq() int32 {
	if e.IsEmpty() {
		return record.NoSequence
	}
	return e.Batches[len(e.Batches)-1].LastSeq
}

// FirstDataOffset returns the first offset of the oldest retained batch, or
// -1.
func (e Entry) FirstDataOffset() int64 {
	if e.IsEmpty() {
		return -1
	}
	return e.Batches[0].FirstOffset()
}

// LastDataOffset returns the last offset of the newest retained batch, or
// -1.
func (e Entry) LastDataOffset() int64 {
	if e.IsEmpty() {
		return -1
	}
	return e.Batches[len(e.Batches)-1].LastOffset
}

// LastOffsetDelta returns the offset delta of the newest retained batch, or
// 0.
func (e Entry) LastOffsetDelta() int32 {
	if e.IsEmpty() {
		return 0
	}
	return e.Batches[len(e.Batches)-1].OffsetDelta
}

// maybeUpdateEpoch sets the epoch, dropping the batches of an older one.
func (e *Entry) maybeUpdateEpoch(epoch int16) {
	if e.Epoch != epoch {
		e.Batches = e.Batches[:0]
		e.Epoch = epoch
	}
}

func (e *Entry) addBatchMetadata(b BatchMetadata) {
	if len(e.Batches) == BatchesToRetain {
		e.Batches = append(e.Batches[:0], e.Batches[1:]...)
	}
	e.Batches = append(e.Batches, b)
}

func (e *Entry) addBatch(epoch int16, lastSeq int32, lastOffset int64, offsetDelta int32, timestamp int64) {
	e.maybeUpdateEpoch(epoch)
	e.addBatchMetadata(BatchMetadata{LastSeq: lastSeq, LastOffset: lastOffset, OffsetDelta: offsetDelta, Timestamp: timestamp})
	e.LastTimestamp = timestamp
}

// merge applies an append's updated entry to the stored one.
func (e *Entry) merge(next *Entry) {
	e.maybeUpdateEpoch(next.Epoch)
	for _, b := range next.Batches {
		e.addBatchMetadata(b)
	}
	e.CoordinatorEpoch = next.CoordinatorEpoch
	e.CurrentTxnFirstOffset = next.CurrentTxnFirstOffset
	e.LastTimestamp = next.LastTimestamp
}

// duplicateOf returns the retained batch with the same epoch and sequence
// range, if any.
func (e *Entry) duplicateOf(epoch int16, firstSeq, lastSeq int32) (BatchMetadata, bool) {
	if epoch != e.Epoch {
		return BatchMetadata{}, false
	}
	for _, b := range e.Batches {
		if b.FirstSeq() == firstSeq && b.LastSeq == lastSeq {
			return b, true
		}
	}
	return BatchMetadata{}, false
}

// TxnMetadata is a transaction on the partition: its producer, its first
// offset, and the offset of its marker (-1 while it is open).
type TxnMetadata struct {
	ProducerID  int64
	FirstOffset int64
	LastOffset  int64
}

// CompletedTxn is a transaction a marker ended.
type CompletedTxn struct {
	ProducerID  int64
	FirstOffset int64
	LastOffset  int64 // the marker's offset
	IsAborted   bool
}
