package record

import (
	"encoding/binary"
	"fmt"
)

// ControlType is the type of a control record, from its key.
type ControlType int16

// Control record types: part of the on-disk format; never change.
const (
	ControlAbort          ControlType = 0
	ControlCommit         ControlType = 1
	ControlLeaderChange   ControlType = 2
	ControlSnapshotHeader ControlType = 3
	ControlSnapshotFooter ControlType = 4
	ControlKRaftVersion   ControlType = 5
	ControlKRaftVoters    ControlType = 6
	// ControlUnknown stands for any other type; such records are ignored.
	ControlUnknown ControlType = -1
)

var controlNames = [...]string{"ABORT", "COMMIT", "LEADER_CHANGE", "SNAPSHOT_HEADER",
	"SNAPSHOT_FOOTER", "KRAFT_VERSION", "KRAFT_VOTERS"}

func (t ControlType) String() string {
	if t >= 0 && int(t) < len(controlNames) {
		return controlNames[t]
	}
	return "UNKNOWN"
}

// ParseControlKey returns the type in a control record's key: an int16
// version (≥ 0; newer versions are read as version 0) and an int16 type.
// Types Kafka does not define come back as ControlUnknown.
func ParseControlKey(key []byte) (ControlType, error) {
	if len(key) < controlKeySize {
		return ControlUnknown, errAt(ErrInvalidRecord, 0, "control key of %d bytes, want %d", len(key), controlKeySize)
	}
	if v := int16(binary.BigEndian.Uint16(key)); v < 0 {
		return ControlUnknown, errAt(ErrInvalidRecord, 0, "control key version %d", v)
	}
	t := ControlType(binary.BigEndian.Uint16(key[2:]))
	if t < ControlAbort || t > ControlKRaftVoters {
		t = ControlUnknown
	}
	return t, nil
}

// ParseEndTxnMarker returns the coordinator epoch in the value of a COMMIT
// or ABORT record: an int16 version (≥ 0) and an int32 epoch.
func ParseEndTxnMarker(value []byte) (coordinatorEpoch int32, err error) {
	if len(value) < endTxnMarkerSize {
		return 0, errAt(ErrInvalidRecord, 0, "end transaction marker value of %d bytes, want %d", len(value), endTxnMarkerSize)
	}
	if v := int16(binary.BigEndian.Uint16(value)); v < 0 {
		return 0, errAt(ErrInvalidRecord, 0, "end transaction marker version %d", v)
	}
	return int32(binary.BigEndian.Uint32(value[2:])), nil
}

// EndTxnMarker is a COMMIT or ABORT marker as written by a transaction
// coordinator.
type EndTxnMarker struct {
	Type             ControlType // ControlCommit or ControlAbort
	ProducerID       int64
	ProducerEpoch    int16
	CoordinatorEpoch int32
	Timestamp        int64
}

// MarkerType is the type of a transaction's marker: ControlCommit when it
// commits, ControlAbort when it aborts.
func MarkerType(commit bool) ControlType {
	if commit {
		return ControlCommit
	}
	return ControlAbort
}

// AppendTo appends the 78-byte marker batch at base offset 0 with no leader
// epoch; stamp both at append time.
func (m EndTxnMarker) AppendTo(dst []byte) ([]byte, error) {
	if m.Type != ControlCommit && m.Type != ControlAbort {
		return dst, fmt.Errorf("%w: marker type %v", ErrBuilder, m.Type)
	}
	var key, value [endTxnMarkerSize]byte
	binary.BigEndian.PutUint16(key[0:], controlRecordVersion)
	binary.BigEndian.PutUint16(key[2:], uint16(m.Type))
	binary.BigEndian.PutUint16(value[0:], controlRecordVersion)
	binary.BigEndian.PutUint32(value[2:], uint32(m.CoordinatorEpoch))
	h := BatchHeader{
		PartitionLeaderEpoch: NoPartitionLeaderEpoch,
		Attributes:           MakeAttributes(None, CreateTime, true, true, false),
		BaseTimestamp:        m.Timestamp,
		MaxTimestamp:         m.Timestamp,
		ProducerID:           m.ProducerID,
		ProducerEpoch:        m.ProducerEpoch,
		BaseSequence:         NoSequence,
		NumRecords:           1,
	}
	start := len(dst)
	dst = h.AppendTo(dst, ControlBatchSize)
	dst = appendRecord(dst, 0, 0, 0, key[:controlKeySize], value[:], nil)
	binary.BigEndian.PutUint32(dst[start+crcOff:], Checksum(dst[start+attributesOff:]))
	return dst, nil
}

// EndTxnMarker reads a COMMIT or ABORT marker from a control batch. A
// batch holding another control type, or not exactly one record, fails with
// ErrInvalidRecord.
func (b Batch) EndTxnMarker() (EndTxnMarker, error) {
	if !b.IsControl() {
		return EndTxnMarker{}, errAt(ErrInvalidRecord, attributesOff, "not a control batch")
	}
	var it Iter
	it.Reset(b, 1<<16)
	if !it.Next() {
		if err := it.Err(); err != nil {
			return EndTxnMarker{}, err
		}
		return EndTxnMarker{}, errAt(ErrInvalidRecord, recordsCountOff, "control batch without records")
	}
	r := it.Record()
	t, err := ParseControlKey(r.Key)
	if err != nil {
		return EndTxnMarker{}, err
	}
	if t != ControlCommit && t != ControlAbort {
		return EndTxnMarker{}, errAt(ErrInvalidRecord, recordsOff, "control record of type %v is not a transaction marker", t)
	}
	epoch, err := ParseEndTxnMarker(r.Value)
	if err != nil {
		return EndTxnMarker{}, err
	}
	if it.Next() || it.Err() != nil {
		return EndTxnMarker{}, errAt(ErrInvalidRecord, recordsCountOff, "control batch with %d records", b.NumRecords())
	}
	return EndTxnMarker{Type: t, ProducerID: b.ProducerID(), ProducerEpoch: b.ProducerEpoch(),
		CoordinatorEpoch: epoch, Timestamp: b.MaxTimestamp()}, nil
}
