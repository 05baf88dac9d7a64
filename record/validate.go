package record

import (
	"fmt"
	"math"
)

// Origin says who is appending a batch; the checks differ (docs/format.md §1.6, 5.3).
type Origin int8

const (
	// OriginClient is a producer. Its batches get every check.
	OriginClient Origin = iota
	// OriginCoordinator is a transaction coordinator writing markers.
	OriginCoordinator
	// OriginReplication is a follower copying a leader's batches, or
	// recovery replaying the log: offsets and sequences are not checked.
	OriginReplication
)

func (o Origin) String() string {
	switch o {
	case OriginClient:
		return "client"
	case OriginCoordinator:
		return "coordinator"
	case OriginReplication:
		return "replication"
	}
	return fmt.Sprintf("origin(%d)", int8(o))
}

// DefaultMaxMessageBytes is Kafka's max.message.bytes default: 1 MiB + 12.
const DefaultMaxMessageBytes = 1048588

// ValidateOptions are the topic settings an append is checked against.
type ValidateOptions struct {
	// Origin selects the checks. The default is OriginClient.
	Origin Origin
	// MaxMessageBytes is the largest batch accepted (max.message.bytes).
	// The default is 1048588.
	MaxMessageBytes int
	// TimestampType is the topic's message.timestamp.type. With
	// LogAppendTime record timestamps are not checked. The default is
	// CreateTime.
	TimestampType TimestampType
	// TimestampBeforeMaxMs and TimestampAfterMaxMs bound how far a
	// CreateTime record may lie before or after NowMs
	// (message.timestamp.before.max.ms / after.max.ms). 0 means no bound,
	// Kafka's default of Long.MAX. The default is 0.
	TimestampBeforeMaxMs int64
	TimestampAfterMaxMs  int64
	// NowMs is the current time in milliseconds since the epoch.
	NowMs int64
	// Compacted refuses records without a key (a compacted topic). The
	// default is false.
	Compacted bool
	// MaxUncompressed bounds the decompressed size of the records. The
	// default is DefaultMaxUncompressed.
	MaxUncompressed int
	// Recompress stores a data batch of another codec with Compression
	// (a topic's compression.type other than "producer"): it is rebuilt,
	// as Kafka's broker rebuilds it, and checked against MaxMessageBytes
	// again. The default is false: the batch keeps its codec.
	Recompress  bool
	Compression Compression
}

// EnsureDefaults fills zero fields with their defaults.
func (o *ValidateOptions) EnsureDefaults() {
	if o.MaxMessageBytes == 0 {
		o.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if o.TimestampBeforeMaxMs == 0 {
		o.TimestampBeforeMaxMs = math.MaxInt64
	}
	if o.TimestampAfterMaxMs == 0 {
		o.TimestampAfterMaxMs = math.MaxInt64
	}
	if o.MaxUncompressed == 0 {
		o.MaxUncompressed = DefaultMaxUncompressed
	}
}

// Validated is a batch that passed ValidateAppend.
type Validated struct {
	// Batch is the batch to append: the input itself, or a rebuilt copy
	// when Rebuilt is set.
	Batch Batch
	// MaxTimestamp is the largest record timestamp, or -1 if no record has
	// one.
	MaxTimestamp int64
	// MaxTimestampDelta is the offset delta of the first record that
	// reached MaxTimestamp, or -1.
	MaxTimestampDelta int32
	// Rebuilt reports that the batch was rebuilt, as Kafka does: its
	// compressed records' inner offsets were not 0..n-1 (rebuilt with the
	// same codec), or it was recompressed (ValidateOptions.Recompress).
	Rebuilt bool
}

// ValidateAppend checks the bytes of one append as Kafka's
// analyzeAndValidateRecords and LogValidator do (docs/format.md §1.6): exactly one v2
// batch, within the size limit, with a valid CRC, consistent counts, no
// control batch and a sequence for idempotent data from clients, well-formed
// records, keys on compacted topics, and CreateTime timestamps within
// bounds. Failures are *Error values of kind ErrInvalidRecord,
// ErrCorruptBatch, ErrUnsupportedMagic, ErrUnknownCompression,
// ErrRecordTooLarge or ErrInvalidTimestamp, positioned in data. data is not
// changed.
func ValidateAppend(data []byte, opts ValidateOptions) (Validated, error) {
	opts.EnsureDefaults()
	if len(data) == 0 {
		return Validated{}, errAt(ErrInvalidRecord, 0, "append has no batches at all")
	}
	b, rest, err := ParseBatch(data)
	if err != nil {
		return Validated{}, err
	}
	if len(rest) > 0 {
		return Validated{}, errAt(ErrInvalidRecord, int64(b.Size()),
			"%d bytes follow the batch; an append holds exactly one batch", len(rest))
	}
	if b.Size() > opts.MaxMessageBytes {
		return Validated{}, errAt(ErrRecordTooLarge, 0, "batch of %d bytes, the limit is %d", b.Size(), opts.MaxMessageBytes)
	}
	if err := b.Verify(); err != nil {
		return Validated{}, err
	}
	if opts.Origin == OriginClient {
		if err := validateClientBatch(b); err != nil {
			return Validated{}, err
		}
	}
	if !b.Compression().Valid() {
		return Validated{}, errAt(ErrUnknownCompression, attributesOff, "codec id %d", int8(b.Compression()))
	}
	return validateRecords(b, opts)
}

func validateClientBatch(b Batch) error {
	fromOffsets := int64(b.LastOffsetDelta()) + 1
	switch count := b.NumRecords(); {
	case fromOffsets <= 0:
		return errAt(ErrInvalidRecord, lastOffsetDeltaOff, "invalid offset range [%d, %d]", b.BaseOffset(), b.LastOffset())
	case count <= 0:
		return errAt(ErrInvalidRecord, recordsCountOff, "invalid record count %d", count)
	case fromOffsets != int64(count):
		return errAt(ErrInvalidRecord, recordsCountOff, "offset range [%d, %d] does not match the record count %d",
			b.BaseOffset(), b.LastOffset(), count)
	case b.IsControl():
		return errAt(ErrInvalidRecord, attributesOff, "clients may not write control batches")
	case b.HasProducerID() && b.BaseSequence() < 0:
		return errAt(ErrInvalidRecord, baseSequenceOff, "invalid sequence %d for producer id %d", b.BaseSequence(), b.ProducerID())
	}
	return nil
}

// validateRecords checks every record the way Kafka's validateRecord does:
// the quick pass when it finds nothing to say, else the full one.
func validateRecords(b Batch, opts ValidateOptions) (Validated, error) {
	v := Validated{Batch: b}
	if maxTs, delta, ok := skimRecords(b, &opts); ok {
		v.MaxTimestamp, v.MaxTimestampDelta = maxTs, delta
		return finishValidated(b, v, opts)
	}
	return validateEach(b, opts)
}

// validateEach is validateRecords' full pass: every record decoded and
// checked, each refusal collected.
func validateEach(b Batch, opts ValidateOptions) (Validated, error) {
	v := Validated{Batch: b, MaxTimestamp: NoTimestamp, MaxTimestampDelta: -1}
	var (
		it         Iter
		errs       []RecordError
		timeErr    bool
		sequential = true
		index      int32
	)
	it.Reset(b, opts.MaxUncompressed)
	for ; it.Next(); index++ {
		r := it.Record()
		if r.OffsetDelta != index {
			sequential = false
		}
		if msg, isTime := checkRecord(b, r, &opts); msg != "" {
			errs = append(errs, RecordError{Index: int(index), Message: msg})
			timeErr = timeErr || isTime
			continue
		}
		if r.Timestamp > v.MaxTimestamp {
			v.MaxTimestamp, v.MaxTimestampDelta = r.Timestamp, r.OffsetDelta
		}
	}
	if err := it.Err(); err != nil {
		return Validated{}, err
	}
	if len(errs) > 0 {
		kind, reason := ErrInvalidRecord, fmt.Sprintf("%d records rejected", len(errs))
		if timeErr {
			kind, reason = ErrInvalidTimestamp, "one or more records have an invalid timestamp"
		}
		return Validated{}, &Error{Pos: recordsOff, Reason: reason, Err: kind, Records: errs}
	}
	if !sequential && !b.IsControl() && opts.Origin != OriginReplication && (b.Compression() != None || opts.Recompress && b.Compression() != opts.Compression) {
		return rebuild(b, opts)
	}
	return finishValidated(b, v, opts)
}

// finishValidated recompresses a valid batch whose records are in order
// when the topic's codec asks for it.
func finishValidated(b Batch, v Validated, opts ValidateOptions) (Validated, error) {
	switch recompress := opts.Recompress && b.Compression() != opts.Compression; {
	case b.IsControl():
	case recompress:
		// The records as they are, compressed with the topic's codec.
		nb, err := Recompress(b, opts.Compression, opts.MaxUncompressed)
		if err != nil {
			return Validated{}, err
		}
		if nb.Size() > opts.MaxMessageBytes {
			return Validated{}, errAt(ErrRecordTooLarge, 0, "recompressed batch of %d bytes, the limit is %d", nb.Size(), opts.MaxMessageBytes)
		}
		v.Batch, v.Rebuilt = nb, true
	}
	return v, nil
}

// skimRecords is validateRecords' quick path for an uncompressed
// CreateTime batch: one pass over the record bodies that decodes only the
// lengths, deltas and header counts it checks, and builds no Record. ok is
// false whenever the full pass could find anything to refuse or to
// rebuild (a malformed record, a missing key, a timestamp out of range,
// offsets out of order): that pass then runs and says why. Otherwise it
// returns what that pass would: the largest timestamp and its offset delta.
func skimRecords(b Batch, o *ValidateOptions) (maxTs int64, maxDelta int32, ok bool) {
	if b.Compression() != None || b.TimestampType() != CreateTime || len(b.b) < recordsOff {
		return 0, 0, false
	}
	d, n, base := b.b[recordsOff:], b.NumRecords(), b.BaseTimestamp()
	checkTs := o.TimestampType == CreateTime
	maxTs, maxDelta = NoTimestamp, -1
	pos := 0
	for index := int32(0); index < n; index++ {
		size, k := readVarint(d[pos:])
		if k <= 0 || size < 0 || int(size) > len(d)-pos-k {
			return 0, 0, false
		}
		r := d[pos+k : pos+k+int(size)]
		pos += k + int(size)
		if len(r) == 0 {
			return 0, 0, false
		}
		tsDelta, k := readVarlong(r[1:])
		if k <= 0 {
			return 0, 0, false
		}
		r = r[1+k:]
		delta, k := readVarint(r)
		if k <= 0 || delta != index {
			return 0, 0, false
		}
		r = r[k:]
		var key, value, headers int32
		if key, r = skimField(r); key < -1 || key == -1 && o.Compacted {
			return 0, 0, false
		}
		if value, r = skimField(r); value < -1 {
			return 0, 0, false
		}
		if headers, k = readVarint(r); k <= 0 || headers < 0 || int(headers) > (len(r)-k)/2 {
			return 0, 0, false
		}
		r = r[k:]
		for range headers {
			if key, r = skimField(r); key < 0 {
				return 0, 0, false
			}
			if value, r = skimField(r); value < -1 {
				return 0, 0, false
			}
		}
		if len(r) != 0 {
			return 0, 0, false
		}
		ts := base + tsDelta
		if checkTs && ts != NoTimestamp {
			if diff := o.NowMs - ts; diff > o.TimestampBeforeMaxMs || -diff > o.TimestampAfterMaxMs {
				return 0, 0, false
			}
		}
		if ts > maxTs {
			maxTs, maxDelta = ts, delta
		}
	}
	return maxTs, maxDelta, n >= 0 && pos == len(d)
}

// skimField passes over a length-prefixed field at the start of r: its
// length (-1 for null) and what follows it, or -2 if it is malformed.
func skimField(r []byte) (int32, []byte) {
	l, k := readVarint(r)
	switch {
	case k <= 0 || l < -1 || int(l) > len(r)-k:
		return -2, r
	case l < 0:
		return -1, r[k:]
	}
	return l, r[k+int(l):]
}

// checkRecord returns why r is refused ("" if it is not) and whether the
// reason is its timestamp.
func checkRecord(b Batch, r *Record, o *ValidateOptions) (string, bool) {
	if o.Origin == OriginReplication {
		return "", false // (a leader's batch, taken as it wrote it: its timestamps, LogAppendTime included, are its own)
	}
	if o.Compacted && r.Key == nil {
		return "compacted topic cannot accept a record without a key", false
	}
	if o.TimestampType == CreateTime && r.Timestamp != NoTimestamp {
		diff := o.NowMs - r.Timestamp
		if diff > o.TimestampBeforeMaxMs || -diff > o.TimestampAfterMaxMs {
			return fmt.Sprintf("timestamp %d of record with offset %d is out of range [%d, %d]",
				r.Timestamp, r.Offset, o.NowMs-o.TimestampBeforeMaxMs, o.NowMs+o.TimestampAfterMaxMs), true
		}
	} else if b.TimestampType() == LogAppendTime {
		return "producers may not set the timestamp type to LogAppendTime", true
	}
	return "", false
}

// rebuild re-encodes a batch whose inner offsets are not 0..n-1 with
// offsets 0..n-1, the same producer fields and the same codec (or
// opts.Compression when recompressing).
func rebuild(b Batch, opts ValidateOptions) (Validated, error) {
	codec := b.Compression()
	if opts.Recompress {
		codec = opts.Compression
	}
	bl := NewBuilder(codec)
	bl.SetProducer(b.ProducerID(), b.ProducerEpoch(), b.BaseSequence())
	bl.SetTransactional(b.IsTransactional())
	bl.SetPartitionLeaderEpoch(b.PartitionLeaderEpoch())
	var it Iter
	it.Reset(b, opts.MaxUncompressed)
	for it.Next() {
		if err := bl.Append(*it.Record()); err != nil {
			return Validated{}, err
		}
	}
	if err := it.Err(); err != nil {
		return Validated{}, err
	}
	nb, err := bl.Build()
	if err != nil {
		return Validated{}, err
	}
	if nb.Size() > opts.MaxMessageBytes {
		return Validated{}, errAt(ErrRecordTooLarge, 0, "rebuilt batch of %d bytes, the limit is %d", nb.Size(), opts.MaxMessageBytes)
	}
	v, err := validateRecords(nb, opts)
	v.Rebuilt = true
	return v, err
}
