package writerstate

import (
	"fmt"
	"math"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/record"
)

// Errors an append may fail with (docs/format.md §5.3). Each is wrapped with the
// producer, offset and values involved.
var (
	// ErrInvalidProducerEpoch: a batch or marker of an epoch below the
	// producer's current one (a fenced producer).
	ErrInvalidProducerEpoch = seglog.NewKafkaError("writerstate: invalid producer epoch", 47)
	// ErrOutOfOrderSequence: a sequence that does not follow the producer's
	// last one.
	ErrOutOfOrderSequence = seglog.NewKafkaError("writerstate: out of order sequence number", 45)
	// ErrInvalidTxnState: non-transactional data from a producer with an
	// open transaction.
	ErrInvalidTxnState = seglog.NewKafkaError("writerstate: invalid transaction state", 48)
	// ErrCoordinatorFenced: a marker from a transaction coordinator older
	// than the last one seen.
	ErrCoordinatorFenced = seglog.NewKafkaError("writerstate: transaction coordinator fenced", 52)
)

// DataBatch describes a batch of records of one producer, with the offsets
// the log gave it.
type DataBatch struct {
	Epoch         int16
	FirstSeq      int32
	LastSeq       int32
	MaxTimestamp  int64
	FirstOffset   int64
	LastOffset    int64
	Transactional bool
}

// Marker describes a COMMIT or ABORT marker at Offset.
type Marker struct {
	Epoch            int16
	Offset           int64
	Timestamp        int64
	Aborted          bool
	CoordinatorEpoch int32
}

// appendInfo is one producer's part of an append (Kafka's
// ProducerAppendInfo): the stored entry, the entry as this append leaves
// it, and the transactions it started.
type appendInfo struct {
	pid          int64
	current      *Entry // stored, or empty; never changed here
	updated      Entry  // current's fields with no batches, then this append's
	verification *Verification
	started      []TxnMetadata
}

// Append is a set of batches checked against the writer state and applied
// together by State.Apply. Nothing in the State changes until then.
type Append struct {
	s      *State
	origin record.Origin
	// infos are the producers' parts in the order first seen. A client's
	// append holds one producer's batch, which a search finds without a
	// map; byPID indexes them once there are more than a few (a rebuild
	// replays a whole segment of many producers as one append).
	infos []*appendInfo
	byPID map[int64]*appendInfo
}

// searchedInfos is how many producers' parts an append searches before
// it indexes them.
const searchedInfos = 8

// NewAppend starts an append from origin: clients get every check,
// coordinators the epoch checks, replication (and recovery) none but
// logging.
func (s *State) NewAppend(origin record.Origin) *Append {
	return &Append{s: s, origin: origin}
}

func (a *Append) info(pid int64) *appendInfo {
	if a.byPID != nil {
		if ai, ok := a.byPID[pid]; ok {
			return ai
		}
	} else {
		for _, ai := range a.infos {
			if ai.pid == pid {
				return ai
			}
		}
	}
	current, ok := a.s.producers[pid]
	if !ok {
		current = emptyEntry(pid)
	}
	ai := &appendInfo{pid: pid, current: current, updated: *current}
	ai.updated.Batches = nil
	if len(a.s.verification) > 0 {
		ai.verification = a.s.verification[pid]
	}
	a.infos = append(a.infos, ai)
	switch {
	case a.byPID != nil:
		a.byPID[pid] = ai
	case len(a.infos) > searchedInfos:
		a.byPID = make(map[int64]*appendInfo, 2*len(a.infos))
		for _, x := range a.infos {
			a.byPID[x.pid] = x
		}
	}
	return ai
}

// Duplicate returns the retained batch of a client data batch's producer
// with the batch's epoch and sequence range: a retry of it, to be answered
// with the original offsets instead of being written again (docs/format.md
// §5.2). It is FindDuplicate through the producer's part of this append,
// whose entry the batch's AddBatch then uses without looking it up again.
func (a *Append) Duplicate(b record.Batch) (BatchMetadata, bool) {
	return a.info(b.ProducerID()).current.duplicateOf(b.ProducerEpoch(), b.BaseSequence(), b.LastSequence())
}

// AddBatch checks and records one batch (records or a marker) whose offsets
// are assigned. A batch without a producer id changes nothing. A marker
// that ends a transaction returns it.
func (a *Append) AddBatch(b record.Batch) (*CompletedTxn, error) {
	if !b.HasProducerID() {
		return nil, nil
	}
	if !b.IsControl() {
		return nil, a.AddData(b.ProducerID(), DataBatch{Epoch: b.ProducerEpoch(), FirstSeq: b.BaseSequence(),
			LastSeq: b.LastSequence(), MaxTimestamp: b.MaxTimestamp(), FirstOffset: b.BaseOffset(),
			LastOffset: b.LastOffset(), Transactional: b.IsTransactional()})
	}
	if b.NumRecords() == 0 {
		return nil, nil // the compactor removed the marker: nothing to do
	}
	m, err := b.EndTxnMarker() // ErrInvalidRecord for anything but COMMIT or ABORT, as in Kafka
	if err != nil {
		return nil, err
	}
	return a.AddMarker(b.ProducerID(), Marker{Epoch: b.ProducerEpoch(), Offset: b.BaseOffset(),
		Timestamp: m.Timestamp, Aborted: m.Type == record.ControlAbort, CoordinatorEpoch: m.CoordinatorEpoch})
}

// AddData checks and records a data batch of producer pid.
func (a *Append) AddData(pid int64, d DataBatch) error {
	ai := a.info(pid)
	if err := a.checkEpoch(ai, d.Epoch, d.FirstOffset); err != nil {
		return err
	}
	if a.origin == record.OriginClient {
		if err := checkSequence(ai, d.Epoch, d.FirstSeq, d.FirstOffset); err != nil {
			return err
		}
	}
	ai.updated.addBatch(d.Epoch, d.LastSeq, d.LastOffset, int32(d.LastOffset-d.FirstOffset), d.MaxTimestamp)
	switch open := ai.updated.CurrentTxnFirstOffset >= 0; {
	case open && !d.Transactional:
		return fmt.Errorf("%w: non-transactional write from producer %d at offset %d during its transaction",
			ErrInvalidTxnState, pid, d.FirstOffset)
	case !open && d.Transactional:
		ai.updated.CurrentTxnFirstOffset = d.FirstOffset
		ai.started = append(ai.started, TxnMetadata{ProducerID: pid, FirstOffset: d.FirstOffset, LastOffset: -1})
	}
	return nil
}

// AddMarker checks and records a COMMIT or ABORT marker of producer pid. It
// returns the transaction the marker ends, or nil for a transaction without
// data (which needs no index entry and moves no stable offset).
func (a *Append) AddMarker(pid int64, m Marker) (*CompletedTxn, error) {
	ai := a.info(pid)
	if err := a.checkEpoch(ai, m.Epoch, m.Offset); err != nil {
		return nil, err
	}
	if ai.updated.CoordinatorEpoch > m.CoordinatorEpoch && a.origin != record.OriginReplication {
		return nil, fmt.Errorf("%w: producer %d at offset %d: coordinator epoch %d, the current one is %d",
			ErrCoordinatorFenced, pid, m.Offset, m.CoordinatorEpoch, ai.updated.CoordinatorEpoch)
	}
	var completed *CompletedTxn
	if first := ai.updated.CurrentTxnFirstOffset; first >= 0 {
		completed = &CompletedTxn{ProducerID: pid, FirstOffset: first, LastOffset: m.Offset, IsAborted: m.Aborted}
	}
	ai.updated.maybeUpdateEpoch(m.Epoch)
	ai.updated.CoordinatorEpoch = m.CoordinatorEpoch
	ai.updated.CurrentTxnFirstOffset = -1
	ai.updated.LastTimestamp = m.Timestamp
	return completed, nil
}

// checkEpoch refuses an epoch below the producer's, except from
// replication, which only reports it.
func (a *Append) checkEpoch(ai *appendInfo, epoch int16, offset int64) error {
	if current := ai.updated.Epoch; epoch < current && a.origin != record.OriginReplication {
		return fmt.Errorf("%w: producer %d at offset %d has epoch %d, below the current %d",
			ErrInvalidProducerEpoch, ai.pid, offset, epoch, current)
	}
	return nil
}

// checkSequence is Kafka's sequence check for client appends (docs/format.md §5.3).
func checkSequence(ai *appendInfo, epoch int16, firstSeq int32, offset int64) error {
	if v := ai.verification; v != nil && firstSeq > v.LowestSequence {
		return fmt.Errorf("%w: producer %d at offset %d: sequence %d is above the lowest verified %d",
			ErrOutOfOrderSequence, ai.pid, offset, firstSeq, v.LowestSequence)
	}
	if epoch != ai.updated.Epoch {
		if firstSeq != 0 && ai.updated.Epoch != record.NoProducerEpoch {
			return fmt.Errorf("%w: producer %d at offset %d: sequence %d for its new epoch %d (was %d) must be 0",
				ErrOutOfOrderSequence, ai.pid, offset, firstSeq, epoch, ai.updated.Epoch)
		}
		return nil
	}
	lastSeq := record.NoSequence
	switch {
	case !ai.updated.IsEmpty():
		lastSeq = ai.updated.LastSeq()
	case epoch == ai.current.Epoch:
		lastSeq = ai.current.LastSeq()
	}
	// A producer with no epoch (all its records deleted by retention or
	// DeleteRecords) may continue from any sequence.
	if ai.current.Epoch == record.NoProducerEpoch || inSequence(lastSeq, firstSeq) {
		return nil
	}
	return fmt.Errorf("%w: producer %d at offset %d: sequence %d after %d",
		ErrOutOfOrderSequence, ai.pid, offset, firstSeq, lastSeq)
}

func inSequence(lastSeq, nextSeq int32) bool {
	return int64(nextSeq) == int64(lastSeq)+1 || (nextSeq == 0 && lastSeq == math.MaxInt32)
}
