package record

import (
	"errors"
	"fmt"
)

// Header is a record header. Key is UTF-8 text by convention; a nil Value
// is null, distinct from an empty one.
type Header struct {
	Key   []byte
	Value []byte
}

// Record is one record of a batch. Slices point into the batch (or into the
// iterator's decompression buffer) and stay valid until the iterator moves
// on; copy what you keep. A nil Key or Value is null, distinct from empty.
type Record struct {
	// Attributes is the record's attribute byte (unused by Kafka, 0).
	Attributes int8
	// TimestampDelta and OffsetDelta are the stored deltas from the batch's
	// base timestamp and base offset.
	TimestampDelta int64
	OffsetDelta    int32
	// Offset is BaseOffset + OffsetDelta.
	Offset int64
	// Timestamp is BaseTimestamp + TimestampDelta for CreateTime batches and
	// the batch's MaxTimestamp for LogAppendTime batches.
	Timestamp int64
	// Sequence is the record's producer sequence, or -1.
	Sequence int32
	Key      []byte
	Value    []byte
	Headers  []Header
	// Raw is the record's encoding, its length prefix included.
	Raw []byte
}

// Iter iterates over the records of a batch, decompressing them first if
// the batch is compressed. It never panics and never allocates beyond the
// batch plus its decompressed records (bounded by a limit). The zero Iter
// is ready for Reset; an Iter may be reused for many batches, keeping its
// buffers.
//
//	var it record.Iter
//	it.Reset(batch, record.DefaultMaxUncompressed)
//	for it.Next() {
//		r := it.Record()
//		...
//	}
//	if err := it.Err(); err != nil { ... }
type Iter struct {
	batch     Batch
	limit     int
	started   bool
	data      []byte // the records section: batch bytes or buf
	pos       int    // next record's position in data
	compressd bool
	left      int32 // records still to read
	count     int32
	rec       Record
	headers   []Header
	buf       []byte // decompression buffer, kept across Resets
	err       error
}

// Reset prepares the iterator for batch. limit bounds the decompressed size
// of a compressed batch's records (and the zstd window); DefaultMaxUncompressed
// is a sensible choice.
func (it *Iter) Reset(b Batch, limit int) {
	*it = Iter{batch: b, limit: limit, headers: it.headers[:0], buf: it.buf[:0]}
}

// ResetPart prepares the iterator for count consecutive records at the
// start of records, a part of the records section of the uncompressed
// batch whose header b holds (b may be the header alone, from
// HeaderBatch): a point read that knows where a record starts reads only
// its bytes. The records' offsets, timestamps and sequences come from b.
func (it *Iter) ResetPart(b Batch, records []byte, count int32) {
	*it = Iter{batch: b, headers: it.headers[:0], buf: it.buf[:0], started: true,
		data: records, count: count, left: count}
}

// Err returns the first error met, or nil.// Err returns the first error met, or nil.
func (it *Iter) Err() error { return it.err }

// Record returns the current record. It is overwritten by the next call to
// Next.
func (it *Iter) Record() *Record { return &it.rec }

// Next moves to the next record, returning false at the end or on an error.
func (it *Iter) Next() bool {
	if it.err != nil {
		return false
	}
	if !it.started {
		it.started = true
		if it.err = it.start(); it.err != nil {
			return false
		}
	}
	if it.left == 0 {
		if it.pos != len(it.data) {
			it.err = it.fail(it.pos, "declared record count %d, but %d bytes remain after the last record",
				it.count, len(it.data)-it.pos)
		}
		return false
	}
	n, err := it.parse(it.data[it.pos:])
	if err != nil {
		it.err = err
		return false
	}
	it.pos += n
	it.left--
	return true
}

func (it *Iter) start() error {
	b := it.batch
	if len(b.b) < HeaderSize {
		return errAt(ErrCorruptBatch, 0, "batch of %d bytes has no header", len(b.b))
	}
	it.count = b.NumRecords()
	if it.count < 0 {
		return errAt(ErrInvalidRecord, recordsCountOff, "negative record count %d", it.count)
	}
	it.left = it.count
	c := b.Compression()
	if c == None {
		it.data = b.b[recordsOff:]
		return nil
	}
	if !c.Valid() {
		return errAt(ErrUnknownCompression, attributesOff, "codec id %d", int8(c))
	}
	var err error
	it.buf, err = decompress(it.buf[:0], c, b.b[recordsOff:], it.limit)
	if err != nil {
		kind := ErrInvalidRecord
		if errors.Is(err, ErrDecompressLimit) {
			kind = ErrDecompressLimit
		}
		return &Error{Pos: recordsOff, Reason: "decompressing " + c.String() + ": " + err.Error(), Err: kind}
	}
	it.data, it.compressd = it.buf, true
	return nil
}

// fail reports a record-level error at position pos of the records section.
func (it *Iter) fail(pos int, format string, args ...any) *Error {
	e := errAt(ErrInvalidRecord, recordsOff+int64(pos), format, args...)
	if it.compressd {
		e.Pos = recordsOff
		e.Reason += fmt.Sprintf(" (at byte %d of the decompressed records)", pos)
	}
	return e
}

// parse decodes the record at the start of d and returns its size.
func (it *Iter) parse(d []byte) (int, error) {
	index := it.count - it.left
	bodyLen, n := readVarint(d)
	switch {
	case n == 0:
		return 0, it.fail(it.pos, "premature end of records: %d of %d read", index, it.count)
	case n < 0:
		return 0, it.fail(it.pos, "record %d: length varint too long", index)
	case bodyLen < 0:
		return 0, it.fail(it.pos, "record %d: negative length %d", index, bodyLen)
	case int(bodyLen) > len(d)-n:
		return 0, it.fail(it.pos, "record %d: length %d, only %d bytes left", index, bodyLen, len(d)-n)
	}
	size := n + int(bodyLen)
	p := recordParser{b: d[n:size]}
	r := &it.rec
	r.Raw = d[:size]
	r.Attributes = int8(p.byte())
	r.TimestampDelta = p.varlong()
	r.OffsetDelta = p.varint()
	r.Key = p.bytes()
	r.Value = p.bytes()
	nh := p.varint()
	if p.err == "" && (nh < 0 || int(nh) > len(p.b)/2) {
		p.err = fmt.Sprintf("header count %d is invalid", nh)
	}
	it.headers = it.headers[:0]
	for i := int32(0); i < nh && p.err == ""; i++ {
		k := p.bytes()
		if k == nil && p.err == "" {
			p.err = "negative header key length"
		}
		it.headers = append(it.headers, Header{Key: k, Value: p.bytes()})
	}
	if p.err == "" && len(p.b) != 0 {
		p.err = fmt.Sprintf("%d bytes left over in the record body", len(p.b))
	}
	if p.err != "" {
		return 0, it.fail(it.pos, "record %d: %s", index, p.err)
	}
	r.Headers = it.headers
	b := it.batch
	r.Offset = b.BaseOffset() + int64(r.OffsetDelta)
	if b.TimestampType() == LogAppendTime {
		r.Timestamp = b.MaxTimestamp()
	} else {
		r.Timestamp = b.BaseTimestamp() + r.TimestampDelta
	}
	r.Sequence = NoSequence
	if base := b.BaseSequence(); base >= 0 {
		r.Sequence = IncrementSequence(base, r.OffsetDelta)
	}
	return size, nil
}

// recordParser reads the fields of one record body; the first failure is
// kept in err and later reads return zero values.
type recordParser struct {
	b   []byte
	err string
}

func (p *recordParser) byte() byte {
	if p.err != "" {
		return 0
	}
	if len(p.b) == 0 {
		p.err = "body ends before the attributes"
		return 0
	}
	c := p.b[0]
	p.b = p.b[1:]
	return c
}

func (p *recordParser) varint() int32 {
	if p.err != "" {
		return 0
	}
	v, n := readVarint(p.b)
	if n <= 0 {
		p.err = "truncated or overlong varint"
		return 0
	}
	p.b = p.b[n:]
	return v
}

func (p *recordParser) varlong() int64 {
	if p.err != "" {
		return 0
	}
	v, n := readVarlong(p.b)
	if n <= 0 {
		p.err = "truncated or overlong varlong"
		return 0
	}
	p.b = p.b[n:]
	return v
}

// bytes reads a length-prefixed field; a negative length is null (nil).
func (p *recordParser) bytes() []byte {
	l := p.varint()
	if p.err != "" || l < 0 {
		return nil
	}
	if int(l) > len(p.b) {
		p.err = fmt.Sprintf("field of %d bytes, only %d left", l, len(p.b))
		return nil
	}
	v := p.b[:l:l]
	p.b = p.b[l:]
	return v
}
