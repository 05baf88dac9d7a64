package record

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/seglog/seglog"
)

// ErrBuilder reports a misuse of the Builder: offsets that do not increase,
// deltas that overflow, or a batch too large for the format.
var ErrBuilder = seglog.NewKafkaError("record: invalid builder input", 87)

// BatchHeader holds every field of a batch header except the length, the magic
// and the CRC, which are derived.
type BatchHeader struct {
	BaseOffset           int64
	PartitionLeaderEpoch int32
	Attributes           Attributes
	LastOffsetDelta      int32
	BaseTimestamp        int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	NumRecords           int32
}

// Header returns the batch's header fields.
func (b Batch) Header() BatchHeader {
	return BatchHeader{
		BaseOffset:           b.BaseOffset(),
		PartitionLeaderEpoch: b.PartitionLeaderEpoch(),
		Attributes:           b.Attributes(),
		LastOffsetDelta:      b.LastOffsetDelta(),
		BaseTimestamp:        b.BaseTimestamp(),
		MaxTimestamp:         b.MaxTimestamp(),
		ProducerID:           b.ProducerID(),
		ProducerEpoch:        b.ProducerEpoch(),
		BaseSequence:         b.BaseSequence(),
		NumRecords:           b.NumRecords(),
	}
}

// AppendTo appends the 61-byte header with the given batch size (header
// included) and a zero CRC.
func (h BatchHeader) AppendTo(dst []byte, size int) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(h.BaseOffset))
	dst = binary.BigEndian.AppendUint32(dst, uint32(size-LogOverhead))
	dst = binary.BigEndian.AppendUint32(dst, uint32(h.PartitionLeaderEpoch))
	dst = append(dst, Magic)
	dst = binary.BigEndian.AppendUint32(dst, 0)
	dst = binary.BigEndian.AppendUint16(dst, uint16(h.Attributes))
	dst = binary.BigEndian.AppendUint32(dst, uint32(h.LastOffsetDelta))
	dst = binary.BigEndian.AppendUint64(dst, uint64(h.BaseTimestamp))
	dst = binary.BigEndian.AppendUint64(dst, uint64(h.MaxTimestamp))
	dst = binary.BigEndian.AppendUint64(dst, uint64(h.ProducerID))
	dst = binary.BigEndian.AppendUint16(dst, uint16(h.ProducerEpoch))
	dst = binary.BigEndian.AppendUint32(dst, uint32(h.BaseSequence))
	return binary.BigEndian.AppendUint32(dst, uint32(h.NumRecords))
}

// Builder turns records into one batch, like Kafka's MemoryRecordsBuilder.
// Records are encoded as they are appended, so the Builder keeps no
// reference to the caller's slices. A Builder may be reused after Reset.
//
//	b := record.NewBuilder(record.Zstd)
//	b.SetProducer(pid, epoch, seq)
//	b.Append(record.Record{Timestamp: ts, Key: k, Value: v})
//	batch, err := b.Build()
type Builder struct {
	hdr       BatchHeader
	exact     bool // SetHeader: write hdr as given
	lat       bool
	count     int32
	lastDelta int64 // offset delta of the last record, -1 if none
	firstTS   int64
	maxTS     int64
	recs      []byte // encoded, uncompressed records
	scratch   []byte // compression output
}

// NewBuilder returns a builder of CreateTime batches at base offset 0 with
// codec c, no producer id and no leader epoch.
func NewBuilder(c Compression) *Builder {
	b := &Builder{}
	b.hdr.Attributes = MakeAttributes(c, CreateTime, false, false, false)
	b.Reset()
	return b
}

// Reset drops the appended records and the header fields, keeping the codec
// and the buffers.
func (b *Builder) Reset() {
	c := b.hdr.Attributes.Compression()
	*b = Builder{recs: b.recs[:0], scratch: b.scratch[:0]}
	b.hdr = BatchHeader{
		Attributes:           MakeAttributes(c, CreateTime, false, false, false),
		PartitionLeaderEpoch: NoPartitionLeaderEpoch,
		ProducerID:           NoProducerID,
		ProducerEpoch:        NoProducerEpoch,
		BaseSequence:         NoSequence,
	}
	b.lastDelta, b.firstTS, b.maxTS = -1, NoTimestamp, NoTimestamp
}

// SetBaseOffset sets the offset of the first record slot (default 0; a
// producer batch is always built at 0).
func (b *Builder) SetBaseOffset(o int64) { b.hdr.BaseOffset = o }

// SetPartitionLeaderEpoch sets the leader epoch (default -1).
func (b *Builder) SetPartitionLeaderEpoch(e int32) { b.hdr.PartitionLeaderEpoch = e }

// SetProducer sets the producer id, epoch and the first record's sequence
// (default -1 for each: no producer).
func (b *Builder) SetProducer(id int64, epoch int16, baseSequence int32) {
	b.hdr.ProducerID, b.hdr.ProducerEpoch, b.hdr.BaseSequence = id, epoch, baseSequence
}

// SetTransactional marks the batch as part of a transaction.
func (b *Builder) SetTransactional(t bool) { b.setBit(transactionalBit, t) }

// SetLogAppendTime makes the batch a LogAppendTime batch whose max timestamp,
// and so every record's timestamp, is ts. Record deltas are still computed
// from the timestamps given to Append.
func (b *Builder) SetLogAppendTime(ts int64) {
	b.lat = true
	b.setBit(timestampTypeBit, true)
	b.hdr.MaxTimestamp = ts
}

// SetHeader makes Build write h exactly as given — attributes, deltas and
// timestamps included — except NumRecords, which is the number of records
// appended. Record deltas are computed against h.BaseOffset and
// h.BaseTimestamp. It reproduces a batch byte for byte from its header and
// records.
func (b *Builder) SetHeader(h BatchHeader) {
	b.hdr, b.exact = h, true
}

func (b *Builder) setBit(bit Attributes, on bool) {
	if on {
		b.hdr.Attributes |= bit
	} else {
		b.hdr.Attributes &^= bit
	}
}

// Len returns the number of records appended.
func (b *Builder) Len() int { return int(b.count) }

// Append adds r at the next offset (the base offset for the first record).
// r.Offset, r.OffsetDelta, r.TimestampDelta, r.Sequence and r.Raw are
// ignored.
func (b *Builder) Append(r Record) error {
	return b.appendDelta(b.lastDelta+1, r)
}

// AppendWithOffset adds r at offset off, which must be above the previous
// record's offset and within MaxInt32 of the base offset.
func (b *Builder) AppendWithOffset(off int64, r Record) error {
	return b.appendDelta(off-b.hdr.BaseOffset, r)
}

// AppendRaw adds a record as an Iter read it: its encoding (r.Raw) is
// copied as it is, stored deltas included, so the batch must have the base
// offset and base timestamp it was read with (SetHeader with the original
// header), as a cleaner rewriting a batch with fewer records does.
func (b *Builder) AppendRaw(r *Record) error {
	if int64(r.OffsetDelta) <= b.lastDelta || b.count == math.MaxInt32 {
		return fmt.Errorf("%w: raw record at offset delta %d does not follow %d", ErrBuilder, r.OffsetDelta, b.lastDelta)
	}
	b.recs = append(b.recs, r.Raw...)
	b.maxTS = max(b.maxTS, r.Timestamp)
	b.lastDelta = int64(r.OffsetDelta)
	b.count++
	return nil
}

func (b *Builder) appendDelta(delta int64, r Record) error {
	switch {
	case delta <= b.lastDelta:
		return fmt.Errorf("%w: offset %d does not follow %d", ErrBuilder,
			b.hdr.BaseOffset+delta, b.hdr.BaseOffset+b.lastDelta)
	case delta > math.MaxInt32:
		return fmt.Errorf("%w: offset %d is more than MaxInt32 past the base %d", ErrBuilder,
			b.hdr.BaseOffset+delta, b.hdr.BaseOffset)
	case b.count == math.MaxInt32:
		return fmt.Errorf("%w: too many records", ErrBuilder)
	}
	if b.count == 0 && !b.exact {
		b.hdr.BaseTimestamp = r.Timestamp
	}
	b.recs = appendRecord(b.recs, r.Attributes, r.Timestamp-b.hdr.BaseTimestamp, int32(delta), r.Key, r.Value, r.Headers)
	b.maxTS = max(b.maxTS, r.Timestamp)
	b.lastDelta = delta
	b.count++
	return nil
}

// Build returns the batch in a new buffer. The builder keeps its records;
// call Reset to start another batch.
func (b *Builder) Build() (Batch, error) {
	data, err := b.AppendTo(nil)
	if err != nil {
		return Batch{}, err
	}
	return Batch{b: data}, nil
}

// AppendTo appends the batch to dst and returns the extended buffer.
func (b *Builder) AppendTo(dst []byte) ([]byte, error) {
	h := b.hdr
	h.NumRecords = b.count
	if !b.exact {
		h.LastOffsetDelta = int32(max(b.lastDelta, 0))
		if b.count == 0 {
			h.BaseTimestamp = NoTimestamp
		}
		if !b.lat {
			h.MaxTimestamp = b.maxTS
		}
	}
	body := b.recs
	if c := h.Attributes.Compression(); c != None {
		var err error
		if b.scratch, err = compress(b.scratch[:0], c, b.recs); err != nil {
			return dst, fmt.Errorf("%w: compressing with %v: %w", ErrBuilder, c, err)
		}
		body = b.scratch
	}
	size := HeaderSize + len(body)
	if size-LogOverhead > math.MaxInt32 {
		return dst, fmt.Errorf("%w: batch of %d bytes", ErrBuilder, size)
	}
	start := len(dst)
	dst = h.AppendTo(dst, size)
	dst = append(dst, body...)
	binary.BigEndian.PutUint32(dst[start+crcOff:], Checksum(dst[start+attributesOff:]))
	return dst, nil
}

// appendRecord appends one record in Kafka's encoding.
func appendRecord(dst []byte, attrs int8, tsDelta int64, offDelta int32, key, value []byte, headers []Header) []byte {
	body := 1 + sizeOfVarlong(tsDelta) + sizeOfVarint(offDelta) +
		sizeOfField(key) + sizeOfField(value) + sizeOfVarint(int32(len(headers)))
	for _, h := range headers {
		body += sizeOfVarint(int32(len(h.Key))) + len(h.Key) + sizeOfField(h.Value)
	}
	dst = appendVarint(dst, int32(body))
	dst = append(dst, byte(attrs))
	dst = appendVarlong(dst, tsDelta)
	dst = appendVarint(dst, offDelta)
	dst = appendField(dst, key)
	dst = appendField(dst, value)
	dst = appendVarint(dst, int32(len(headers)))
	for _, h := range headers {
		dst = appendVarint(dst, int32(len(h.Key)))
		dst = append(dst, h.Key...)
		dst = appendField(dst, h.Value)
	}
	return dst
}

func sizeOfField(f []byte) int {
	if f == nil {
		return 1
	}
	return sizeOfVarint(int32(len(f))) + len(f)
}

func appendField(dst, f []byte) []byte {
	if f == nil {
		return appendVarint(dst, -1)
	}
	dst = appendVarint(dst, int32(len(f)))
	return append(dst, f...)
}
