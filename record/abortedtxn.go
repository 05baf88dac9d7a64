package record

import (
	"encoding/binary"
	"fmt"
)

// The aborted-transaction entry of a .txnindex (and of a stream object's
// aux section): part of the on-disk format; never change.
//
//	┌─────────┬────────────┬─────────────┬────────────┬──────────────────┐
//	│ version │ producerId │ firstOffset │ lastOffset │ lastStableOffset │
//	│ int16 0 │ int64      │ int64       │ int64      │ int64            │
//	└─────────┴────────────┴─────────────┴────────────┴──────────────────┘
const (
	// AbortedTxnSize is the size of an encoded AbortedTxn.
	AbortedTxnSize = 34
	// AbortedTxnVersion is the only entry version.
	AbortedTxnVersion = 0
)

// AbortedTxn is an aborted transaction, what an ABORT marker leaves for
// read-committed consumers to skip (docs/format.md §2.5): its producer, its first
// offset, the offset of its ABORT marker, and the partition's last stable
// offset when the marker was written. A fetch returns the ones overlapping
// its records.
type AbortedTxn struct {
	ProducerID       int64
	FirstOffset      int64
	LastOffset       int64
	LastStableOffset int64
}

// AppendTo appends the 34-byte entry.
func (t AbortedTxn) AppendTo(dst []byte) []byte {
	dst = binary.BigEndian.AppendUint16(dst, AbortedTxnVersion)
	dst = binary.BigEndian.AppendUint64(dst, uint64(t.ProducerID))
	dst = binary.BigEndian.AppendUint64(dst, uint64(t.FirstOffset))
	dst = binary.BigEndian.AppendUint64(dst, uint64(t.LastOffset))
	return binary.BigEndian.AppendUint64(dst, uint64(t.LastStableOffset))
}

// ParseAbortedTxn decodes the entry at the start of b and returns its
// version too, for the caller to check. Kafka reads the version as one byte
// — the high byte of the int16 — and so does this. Fewer than
// AbortedTxnSize bytes are an error.
func ParseAbortedTxn(b []byte) (AbortedTxn, int8, error) {
	if len(b) < AbortedTxnSize {
		return AbortedTxn{}, 0, fmt.Errorf("record: %d bytes are not a %d-byte aborted transaction", len(b), AbortedTxnSize)
	}
	return AbortedTxn{
		ProducerID:       int64(binary.BigEndian.Uint64(b[2:])),
		FirstOffset:      int64(binary.BigEndian.Uint64(b[10:])),
		LastOffset:       int64(binary.BigEndian.Uint64(b[18:])),
		LastStableOffset: int64(binary.BigEndian.Uint64(b[26:])),
	}, int8(b[0]), nil
}

// ParseAbortedTxns decodes whole entries, as in a .txnindex file or a
// stream object's aux section.
func ParseAbortedTxns(b []byte) ([]AbortedTxn, error) {
	if len(b)%AbortedTxnSize != 0 {
		return nil, fmt.Errorf("record: %d bytes are not whole %d-byte aborted transactions", len(b), AbortedTxnSize)
	}
	out := make([]AbortedTxn, 0, len(b)/AbortedTxnSize)
	for ; len(b) > 0; b = b[AbortedTxnSize:] {
		t, v, _ := ParseAbortedTxn(b)
		if v != AbortedTxnVersion {
			return nil, fmt.Errorf("record: aborted transaction entry version %d", v)
		}
		out = append(out, t)
	}
	return out, nil
}
