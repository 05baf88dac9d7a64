package record

import (
	"encoding/binary"
	"hash/crc32"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum returns the CRC-32C (Castagnoli) of b, the checksum Kafka uses in
// batches, snapshots and index-free files.
func Checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// UpdateChecksum extends a CRC-32C computed over earlier bytes with b.
func UpdateChecksum(crc uint32, b []byte) uint32 { return crc32.Update(crc, castagnoli, b) }

// TimestampType says what a batch's timestamps mean (attribute bit 3).
type TimestampType int8

const (
	// CreateTime: each record carries the time its producer gave it.
	CreateTime TimestampType = 0
	// LogAppendTime: the broker's time at append; every record reads the
	// batch's max timestamp.
	LogAppendTime TimestampType = 1
)

func (t TimestampType) String() string {
	if t == LogAppendTime {
		return "LogAppendTime"
	}
	return "CreateTime"
}

// Attributes is the attributes field of a batch header.
type Attributes int16

// Compression returns the codec (bits 0–2); it may be invalid (5–7).
func (a Attributes) Compression() Compression { return Compression(a & compressionMask) }

// TimestampType returns CreateTime or LogAppendTime (bit 3).
func (a Attributes) TimestampType() TimestampType {
	if a&timestampTypeBit != 0 {
		return LogAppendTime
	}
	return CreateTime
}

// IsTransactional reports bit 4.
func (a Attributes) IsTransactional() bool { return a&transactionalBit != 0 }

// IsControl reports bit 5: the batch holds control records (markers).
func (a Attributes) IsControl() bool { return a&controlBit != 0 }

// HasDeleteHorizon reports bit 6: the base timestamp holds the delete
// horizon set by the compactor.
func (a Attributes) HasDeleteHorizon() bool { return a&deleteHorizonBit != 0 }

// MakeAttributes composes an attributes field from its parts, with bits
// 7–15 zero as Kafka writes them.
func MakeAttributes(c Compression, t TimestampType, transactional, control, deleteHorizon bool) Attributes {
	a := Attributes(c) & compressionMask
	if t == LogAppendTime {
		a |= timestampTypeBit
	}
	if transactional {
		a |= transactionalBit
	}
	if control {
		a |= controlBit
	}
	if deleteHorizon {
		a |= deleteHorizonBit
	}
	return a
}

// Batch is a zero-copy view over the bytes of one RecordBatch v2. A Batch
// comes from ParseBatch, a Scanner or a Builder, which guarantee that the
// header is present and the length field matches; the CRC is checked only
// by Verify. The setters change the bytes in place.
type Batch struct {
	b []byte
}

// ParseBatch reads the batch at the start of b and returns it with the rest
// of b. It checks the framing only — length, magic, header size — not the
// CRC: call Verify for that. A b shorter than the batch it announces fails
// with ErrCorruptBatch; the error's Pos is relative to b.
func ParseBatch(b []byte) (Batch, []byte, error) {
	if len(b) < PrefixSize {
		return Batch{}, b, errAt(ErrCorruptBatch, 0, "%d bytes, fewer than a batch header prefix (%d)", len(b), PrefixSize)
	}
	size, err := entrySize(b, 0)
	if err != nil {
		return Batch{}, b, err
	}
	if size > int64(len(b)) {
		return Batch{}, b, errAt(ErrCorruptBatch, 0, "batch of %d bytes, only %d present", size, len(b))
	}
	if b[magicOff] != Magic {
		return Batch{}, b, errAt(ErrUnsupportedMagic, magicOff, "magic %d", int8(b[magicOff]))
	}
	if size < HeaderSize {
		return Batch{}, b, errAt(ErrCorruptBatch, lengthOff, "batch size %d is below the header size %d", size, HeaderSize)
	}
	return Batch{b: b[:size:size]}, b[size:], nil
}

// ParseHeader reads the header of the batch at the start of b, which must
// hold at least HeaderSize bytes (the records need not be there), and
// returns it with the batch's total size. It checks the framing like
// ParseBatch, but not that the whole batch is present, nor the CRC.
func ParseHeader(b []byte) (BatchHeader, int64, error) {
	if len(b) < HeaderSize {
		return BatchHeader{}, 0, errAt(ErrCorruptBatch, 0, "%d bytes, fewer than a batch header (%d)", len(b), HeaderSize)
	}
	size, err := entrySize(b, 0)
	if err != nil {
		return BatchHeader{}, 0, err
	}
	if b[magicOff] != Magic {
		return BatchHeader{}, 0, errAt(ErrUnsupportedMagic, magicOff, "magic %d", int8(b[magicOff]))
	}
	if size < HeaderSize {
		return BatchHeader{}, 0, errAt(ErrCorruptBatch, lengthOff, "batch size %d is below the header size %d", size, HeaderSize)
	}
	return Batch{b: b[:HeaderSize]}.Header(), size, nil
}

// HeaderBatch returns the batch whose first HeaderSize bytes are h as a
// Batch of its header alone — its header fields are the batch's, Bytes is
// the header and NumRecords still counts every record of the batch —
// after the framing checks of ParseHeader. A point read hands it out with
// the records it read (Iter.ResetPart).
func HeaderBatch(h []byte) (Batch, error) {
	if _, _, err := ParseHeader(h); err != nil {
		return Batch{}, err
	}
	return Batch{b: h[:HeaderSize:HeaderSize]}, nil
}

// entrySize returns the total size declared by the prefix at b, failing if
// the length field is below Kafka's minimum. pos is only for the error.
func entrySize(b []byte, pos int64) (int64, error) {
	length := int32(binary.BigEndian.Uint32(b[lengthOff:]))
	if length < MinEntrySize {
		return 0, errAt(ErrCorruptBatch, pos+lengthOff, "size field %d is below the minimum %d", length, MinEntrySize)
	}
	return int64(length) + LogOverhead, nil
}

// Bytes returns the batch's bytes (not a copy).
func (b Batch) Bytes() []byte { return b.b }

// Size returns the batch's size in bytes: length + 12.
func (b Batch) Size() int { return len(b.b) }

// BaseOffset returns the offset of the first record slot.
func (b Batch) BaseOffset() int64 { return int64(binary.BigEndian.Uint64(b.b[baseOffsetOff:])) }

// LastOffset returns BaseOffset + LastOffsetDelta.
func (b Batch) LastOffset() int64 { return b.BaseOffset() + int64(b.LastOffsetDelta()) }

// NextOffset returns LastOffset + 1.
func (b Batch) NextOffset() int64 { return b.LastOffset() + 1 }

// PartitionLeaderEpoch returns the leader epoch stamped at append, or -1.
func (b Batch) PartitionLeaderEpoch() int32 {
	return int32(binary.BigEndian.Uint32(b.b[leaderEpochOff:]))
}

// Magic returns the format version (always 2 for a parsed batch).
func (b Batch) Magic() int8 { return int8(b.b[magicOff]) }

// CRC returns the stored checksum.
func (b Batch) CRC() uint32 { return binary.BigEndian.Uint32(b.b[crcOff:]) }

// ComputeCRC returns the CRC-32C of the bytes the stored CRC covers.
func (b Batch) ComputeCRC() uint32 { return Checksum(b.b[attributesOff:]) }

// Verify checks the stored CRC against the contents; a mismatch fails with
// ErrCorruptBatch at the CRC field.
func (b Batch) Verify() error {
	if stored, computed := b.CRC(), b.ComputeCRC(); stored != computed {
		return errAt(ErrCorruptBatch, crcOff, "crc mismatch: stored %08x, computed %08x", stored, computed)
	}
	return nil
}

// Attributes returns the attributes field. Only its low byte carries
// meaning.
func (b Batch) Attributes() Attributes {
	return Attributes(binary.BigEndian.Uint16(b.b[attributesOff:]))
}

// Compression returns the batch's codec.
func (b Batch) Compression() Compression { return b.Attributes().Compression() }

// TimestampType returns CreateTime or LogAppendTime.
func (b Batch) TimestampType() TimestampType { return b.Attributes().TimestampType() }

// IsTransactional reports whether the batch belongs to a transaction.
func (b Batch) IsTransactional() bool { return b.Attributes().IsTransactional() }

// IsControl reports whether the batch holds control records.
func (b Batch) IsControl() bool { return b.Attributes().IsControl() }

// LastOffsetDelta returns LastOffset - BaseOffset.
func (b Batch) LastOffsetDelta() int32 {
	return int32(binary.BigEndian.Uint32(b.b[lastOffsetDeltaOff:]))
}

// BaseTimestamp returns the timestamp record deltas are relative to (the
// delete horizon when HasDeleteHorizon), or -1 for an empty batch.
func (b Batch) BaseTimestamp() int64 {
	return int64(binary.BigEndian.Uint64(b.b[baseTimestampOff:]))
}

// MaxTimestamp returns the largest record timestamp (CreateTime) or the
// append time (LogAppendTime).
func (b Batch) MaxTimestamp() int64 {
	return int64(binary.BigEndian.Uint64(b.b[maxTimestampOff:]))
}

// ProducerID returns the producer id, or -1.
func (b Batch) ProducerID() int64 { return int64(binary.BigEndian.Uint64(b.b[producerIDOff:])) }

// HasProducerID reports whether the producer id is set (≥ 0).
func (b Batch) HasProducerID() bool { return b.ProducerID() >= 0 }

// ProducerEpoch returns the producer epoch, or -1.
func (b Batch) ProducerEpoch() int16 {
	return int16(binary.BigEndian.Uint16(b.b[producerEpochOff:]))
}

// BaseSequence returns the first record's sequence number, or -1.
func (b Batch) BaseSequence() int32 {
	return int32(binary.BigEndian.Uint32(b.b[baseSequenceOff:]))
}

// LastSequence returns the last record's sequence number (wrapping at
// MaxInt32), or -1 when BaseSequence is -1.
func (b Batch) LastSequence() int32 {
	base := b.BaseSequence()
	if base == NoSequence {
		return NoSequence
	}
	return IncrementSequence(base, b.LastOffsetDelta())
}

// NumRecords returns the declared record count.
func (b Batch) NumRecords() int32 { return int32(binary.BigEndian.Uint32(b.b[recordsCountOff:])) }

// SetBaseOffset stamps the base offset in place. The CRC does not cover it.
func (b Batch) SetBaseOffset(o int64) { binary.BigEndian.PutUint64(b.b[baseOffsetOff:], uint64(o)) }

// SetLastOffset stamps the base offset so that the last offset becomes
// last. The CRC does not cover it.
func (b Batch) SetLastOffset(last int64) { b.SetBaseOffset(last - int64(b.LastOffsetDelta())) }

// SetPartitionLeaderEpoch stamps the leader epoch in place. The CRC does not
// cover it.
func (b Batch) SetPartitionLeaderEpoch(e int32) {
	binary.BigEndian.PutUint32(b.b[leaderEpochOff:], uint32(e))
}

// SetMaxTimestamp sets the timestamp type and max timestamp. If either
// changes, the attributes are rewritten (bits 7–15 cleared) and the CRC is
// recomputed; otherwise nothing is written. With LogAppendTime every record
// then reads ts as its timestamp.
func (b Batch) SetMaxTimestamp(t TimestampType, ts int64) {
	if b.TimestampType() == t && b.MaxTimestamp() == ts {
		return
	}
	a := b.Attributes()
	attrs := MakeAttributes(a.Compression(), t, a.IsTransactional(), a.IsControl(), a.HasDeleteHorizon())
	binary.BigEndian.PutUint16(b.b[attributesOff:], uint16(attrs))
	binary.BigEndian.PutUint64(b.b[maxTimestampOff:], uint64(ts))
	binary.BigEndian.PutUint32(b.b[crcOff:], b.ComputeCRC())
}
