package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

var allCodecs = []Compression{None, Gzip, Snappy, LZ4, Zstd}

// sampleRecords covers null and empty keys and values, headers with null
// and empty values, negative and large timestamps.
func sampleRecords() []Record {
	return []Record{
		{Timestamp: 1000, Key: []byte("k0"), Value: []byte("v0")},
		{Timestamp: 999, Key: nil, Value: []byte("null key")},
		{Timestamp: 1005, Key: []byte{}, Value: nil},
		{Timestamp: 1001, Key: []byte("h"), Value: []byte("headers"), Headers: []Header{
			{Key: []byte("a"), Value: []byte("1")},
			{Key: []byte("b"), Value: nil},
			{Key: []byte(""), Value: []byte{}},
		}},
		{Timestamp: 1002, Key: bytes.Repeat([]byte("K"), 300), Value: bytes.Repeat([]byte("value "), 2000)},
	}
}

type recordCopy struct {
	Offset, Timestamp int64
	Sequence          int32
	Key, Value        []byte
	Headers           []Header
}

func copyRecord(r *Record) recordCopy {
	c := recordCopy{Offset: r.Offset, Timestamp: r.Timestamp, Sequence: r.Sequence,
		Key: bytes.Clone(r.Key), Value: bytes.Clone(r.Value)}
	for _, h := range r.Headers {
		c.Headers = append(c.Headers, Header{Key: bytes.Clone(h.Key), Value: bytes.Clone(h.Value)})
	}
	return c
}

func readAll(t testing.TB, b Batch) []recordCopy {
	t.Helper()
	var it Iter
	it.Reset(b, DefaultMaxUncompressed)
	var out []recordCopy
	for it.Next() {
		out = append(out, copyRecord(it.Record()))
	}
	require.NoError(t, it.Err())
	return out
}

func build(t testing.TB, c Compression, recs []Record, setup func(*Builder)) Batch {
	t.Helper()
	b := NewBuilder(c)
	if setup != nil {
		setup(b)
	}
	for _, r := range recs {
		require.NoError(t, b.Append(r))
	}
	batch, err := b.Build()
	require.NoError(t, err)
	return batch
}

func TestBuildAndIterateEveryCodec(t *testing.T) {
	recs := sampleRecords()
	for _, c := range allCodecs {
		t.Run(c.String(), func(t *testing.T) {
			batch := build(t, c, recs, func(b *Builder) {
				b.SetBaseOffset(100)
				b.SetPartitionLeaderEpoch(7)
				b.SetProducer(42, 3, 10)
				b.SetTransactional(true)
			})
			parsed, rest, err := ParseBatch(batch.Bytes())
			require.NoError(t, err)
			require.Empty(t, rest)
			require.NoError(t, parsed.Verify())
			require.Equal(t, int64(100), parsed.BaseOffset())
			require.Equal(t, int64(104), parsed.LastOffset())
			require.Equal(t, int32(4), parsed.LastOffsetDelta())
			require.Equal(t, int32(7), parsed.PartitionLeaderEpoch())
			require.Equal(t, int8(2), parsed.Magic())
			require.Equal(t, c, parsed.Compression())
			require.Equal(t, CreateTime, parsed.TimestampType())
			require.True(t, parsed.IsTransactional())
			require.False(t, parsed.IsControl())
			require.Equal(t, int64(1000), parsed.BaseTimestamp())
			require.Equal(t, int64(1005), parsed.MaxTimestamp())
			require.Equal(t, int64(42), parsed.ProducerID())
			require.Equal(t, int16(3), parsed.ProducerEpoch())
			require.Equal(t, int32(10), parsed.BaseSequence())
			require.Equal(t, int32(14), parsed.LastSequence())
			require.Equal(t, int32(5), parsed.NumRecords())
			require.Equal(t, len(batch.Bytes()), parsed.Size())
			require.Equal(t, uint32(parsed.Size()-LogOverhead), binary.BigEndian.Uint32(parsed.Bytes()[8:]))

			got := readAll(t, parsed)
			require.Len(t, got, len(recs))
			for i, r := range recs {
				require.Equal(t, int64(100+i), got[i].Offset)
				require.Equal(t, r.Timestamp, got[i].Timestamp)
				require.Equal(t, int32(10+i), got[i].Sequence)
				require.Equal(t, r.Key == nil, got[i].Key == nil, "record %d key nullness", i)
				require.Equal(t, r.Value == nil, got[i].Value == nil, "record %d value nullness", i)
				require.Equal(t, string(r.Key), string(got[i].Key))
				require.Equal(t, string(r.Value), string(got[i].Value))
				require.Len(t, got[i].Headers, len(r.Headers))
				for j, h := range r.Headers {
					require.Equal(t, string(h.Key), string(got[i].Headers[j].Key))
					require.Equal(t, h.Value == nil, got[i].Headers[j].Value == nil)
					require.Equal(t, string(h.Value), string(got[i].Headers[j].Value))
				}
			}
		})
	}
}

func TestEmptyBatch(t *testing.T) {
	batch := build(t, None, nil, nil)
	require.Equal(t, HeaderSize, batch.Size())
	require.Equal(t, NoTimestamp, batch.BaseTimestamp())
	require.Equal(t, NoTimestamp, batch.MaxTimestamp())
	require.Equal(t, int32(0), batch.NumRecords())
	require.NoError(t, batch.Verify())
	require.Empty(t, readAll(t, batch))
}

// Scenario 73 (DefaultRecordBatchTest): stamping the offset and leader
// epoch keeps the CRC valid; LogAppendTime rewrites it and every record
// reads the append time; poking a covered field breaks it.
func TestStampingKeepsCRC(t *testing.T) {
	batch := build(t, None, sampleRecords(), nil)
	crc := batch.CRC()
	batch.SetLastOffset(500)
	require.Equal(t, int64(496), batch.BaseOffset())
	require.Equal(t, int64(500), batch.LastOffset())
	batch.SetPartitionLeaderEpoch(15)
	require.Equal(t, int32(15), batch.PartitionLeaderEpoch())
	require.Equal(t, crc, batch.CRC())
	require.NoError(t, batch.Verify())
	got := readAll(t, batch)
	require.Equal(t, int64(496), got[0].Offset)
	require.Equal(t, int64(500), got[4].Offset)
}

func TestSetMaxTimestamp(t *testing.T) {
	for _, c := range allCodecs {
		t.Run(c.String(), func(t *testing.T) {
			batch := build(t, c, sampleRecords(), nil)
			before := bytes.Clone(batch.Bytes())
			batch.SetMaxTimestamp(CreateTime, batch.MaxTimestamp())
			require.Equal(t, before, batch.Bytes(), "an unchanged max timestamp must not rewrite anything")

			batch.SetMaxTimestamp(LogAppendTime, 1_700_000_000_000)
			require.NoError(t, batch.Verify())
			require.NotEqual(t, before, batch.Bytes())
			require.Equal(t, LogAppendTime, batch.TimestampType())
			require.Equal(t, int64(1_700_000_000_000), batch.MaxTimestamp())
			require.Equal(t, c, batch.Compression())
			for _, r := range readAll(t, batch) {
				require.Equal(t, int64(1_700_000_000_000), r.Timestamp)
			}
		})
	}
}

func TestSetMaxTimestampClearsUnknownAttributeBits(t *testing.T) {
	batch := build(t, None, sampleRecords()[:1], nil)
	binary.BigEndian.PutUint16(batch.Bytes()[attributesOff:], 0xff00)
	batch.SetMaxTimestamp(CreateTime, 77)
	require.Equal(t, Attributes(0), batch.Attributes())
	require.NoError(t, batch.Verify())
}

func TestBuilderLogAppendTime(t *testing.T) {
	batch := build(t, Zstd, sampleRecords(), func(b *Builder) { b.SetLogAppendTime(5555) })
	require.Equal(t, LogAppendTime, batch.TimestampType())
	require.Equal(t, int64(5555), batch.MaxTimestamp())
	require.Equal(t, int64(1000), batch.BaseTimestamp())
	for _, r := range readAll(t, batch) {
		require.Equal(t, int64(5555), r.Timestamp)
	}
}

func TestInvalidCRC(t *testing.T) {
	batch := build(t, None, sampleRecords(), nil)
	require.NoError(t, batch.Verify())
	binary.BigEndian.PutUint32(batch.Bytes()[lastOffsetDeltaOff:], 23)
	err := batch.Verify()
	require.ErrorIs(t, err, ErrCorruptBatch)
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, int64(crcOff), e.Pos)
	require.Contains(t, e.Error(), "crc mismatch")
}

func TestEveryCoveredByteIsChecked(t *testing.T) {
	batch := build(t, None, sampleRecords()[:2], nil)
	for i := 0; i < batch.Size(); i++ {
		b := bytes.Clone(batch.Bytes())
		b[i] ^= 0x10
		parsed, _, err := ParseBatch(b)
		if err != nil {
			continue // the framing caught it
		}
		if i < attributesOff && i != crcOff && i != crcOff+1 && i != crcOff+2 && i != crcOff+3 {
			require.NoError(t, parsed.Verify(), "byte %d is outside the CRC", i)
		} else {
			require.ErrorIs(t, parsed.Verify(), ErrCorruptBatch, "byte %d", i)
		}
	}
}

// Scenario 73: testIncrementSequence / testDecrementSequence.
func TestSequenceArithmetic(t *testing.T) {
	require.Equal(t, int32(10), IncrementSequence(5, 5))
	require.Equal(t, int32(0), IncrementSequence(math.MaxInt32, 1))
	require.Equal(t, int32(4), IncrementSequence(math.MaxInt32-5, 10))
	require.Equal(t, int32(0), DecrementSequence(5, 5))
	require.Equal(t, int32(math.MaxInt32), DecrementSequence(0, 1))
	require.Equal(t, int32(math.MaxInt32-4), DecrementSequence(5, 10))
	for _, s := range []int32{0, 1, 1000, math.MaxInt32 - 3, math.MaxInt32} {
		for _, n := range []int32{0, 1, 7, math.MaxInt32} {
			require.Equal(t, s, DecrementSequence(IncrementSequence(s, n), n), "s=%d n=%d", s, n)
		}
	}
	// A batch's last sequence wraps too.
	batch := build(t, None, sampleRecords(), func(b *Builder) { b.SetProducer(1, 0, math.MaxInt32-1) })
	require.Equal(t, int32(2), batch.LastSequence())
	got := readAll(t, batch)
	require.Equal(t, []int32{math.MaxInt32 - 1, math.MaxInt32, 0, 1, 2},
		[]int32{got[0].Sequence, got[1].Sequence, got[2].Sequence, got[3].Sequence, got[4].Sequence})
	noSeq := build(t, None, sampleRecords(), nil)
	require.Equal(t, NoSequence, noSeq.LastSequence())
}

func TestBuilderOffsets(t *testing.T) {
	b := NewBuilder(None)
	b.SetBaseOffset(40)
	require.NoError(t, b.AppendWithOffset(40, Record{Timestamp: 1}))
	require.NoError(t, b.AppendWithOffset(43, Record{Timestamp: 2}))
	require.ErrorIs(t, b.AppendWithOffset(43, Record{}), ErrBuilder)
	require.ErrorIs(t, b.AppendWithOffset(41, Record{}), ErrBuilder)
	require.ErrorIs(t, b.AppendWithOffset(40+math.MaxInt32+1, Record{}), ErrBuilder)
	require.NoError(t, b.Append(Record{Timestamp: 3}))
	require.Equal(t, 3, b.Len())
	batch, err := b.Build()
	require.NoError(t, err)
	require.Equal(t, int64(44), batch.LastOffset())
	got := readAll(t, batch)
	require.Equal(t, []int64{40, 43, 44}, []int64{got[0].Offset, got[1].Offset, got[2].Offset})

	// Reset keeps the codec and clears the rest.
	b = NewBuilder(Gzip)
	b.SetProducer(9, 9, 9)
	require.NoError(t, b.Append(Record{Timestamp: 5}))
	b.Reset()
	data, err := b.AppendTo([]byte("prefix"))
	require.NoError(t, err)
	batch, _, err = ParseBatch(data[len("prefix"):])
	require.NoError(t, err)
	require.Equal(t, Gzip, batch.Compression())
	require.Equal(t, NoProducerID, batch.ProducerID())
	require.Equal(t, int32(0), batch.NumRecords())
}

func TestBuildAppendsToDst(t *testing.T) {
	dst := []byte("xyz")
	b := NewBuilder(None)
	require.NoError(t, b.Append(Record{Value: []byte("v")}))
	data, err := b.AppendTo(dst)
	require.NoError(t, err)
	require.Equal(t, "xyz", string(data[:3]))
	batch, rest, err := ParseBatch(data[3:])
	require.NoError(t, err)
	require.Empty(t, rest)
	require.NoError(t, batch.Verify())
}

func TestParseBatchFraming(t *testing.T) {
	good := build(t, None, sampleRecords()[:1], nil).Bytes()
	cases := []struct {
		name string
		mod  func([]byte) []byte
		kind error
	}{
		{"short prefix", func(b []byte) []byte { return b[:16] }, ErrCorruptBatch},
		{"truncated", func(b []byte) []byte { return b[:len(b)-1] }, ErrCorruptBatch},
		{"size below 14", func(b []byte) []byte { binary.BigEndian.PutUint32(b[8:], 13); return b }, ErrCorruptBatch},
		{"negative size", func(b []byte) []byte { binary.BigEndian.PutUint32(b[8:], 0xffffffff); return b }, ErrCorruptBatch},
		{"below header", func(b []byte) []byte { binary.BigEndian.PutUint32(b[8:], 30); return b }, ErrCorruptBatch},
		{"magic 1", func(b []byte) []byte { b[16] = 1; return b }, ErrUnsupportedMagic},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := ParseBatch(tc.mod(bytes.Clone(good)))
			require.ErrorIs(t, err, tc.kind)
			var e *Error
			require.ErrorAs(t, err, &e)
		})
	}
	two := append(bytes.Clone(good), good...)
	b1, rest, err := ParseBatch(two)
	require.NoError(t, err)
	require.Equal(t, len(good), b1.Size())
	require.Equal(t, good, rest)
}

func TestParseHeader(t *testing.T) {
	batch := build(t, Gzip, sampleRecords(), func(b *Builder) { b.SetProducer(3, 4, 5) })
	h, size, err := ParseHeader(batch.Bytes()[:HeaderSize])
	require.NoError(t, err)
	require.Equal(t, batch.Header(), h)
	require.Equal(t, int64(batch.Size()), size)
	_, _, err = ParseHeader(batch.Bytes()[:HeaderSize-1])
	require.ErrorIs(t, err, ErrCorruptBatch)
	bad := bytes.Clone(batch.Bytes()[:HeaderSize])
	bad[magicOff] = 1
	_, _, err = ParseHeader(bad)
	require.ErrorIs(t, err, ErrUnsupportedMagic)
	binary.BigEndian.PutUint32(bad[lengthOff:], 5)
	_, _, err = ParseHeader(bad)
	require.ErrorIs(t, err, ErrCorruptBatch)
}

func TestControlMarkers(t *testing.T) {
	for _, typ := range []ControlType{ControlCommit, ControlAbort} {
		m := EndTxnMarker{Type: typ, ProducerID: 77, ProducerEpoch: 4, CoordinatorEpoch: 19, Timestamp: 123456}
		data, err := m.AppendTo(nil)
		require.NoError(t, err)
		require.Len(t, data, ControlBatchSize)
		require.Equal(t, uint32(66), binary.BigEndian.Uint32(data[8:]))
		batch, _, err := ParseBatch(data)
		require.NoError(t, err)
		require.NoError(t, batch.Verify())
		require.True(t, batch.IsControl())
		require.True(t, batch.IsTransactional())
		require.Equal(t, None, batch.Compression())
		require.Equal(t, CreateTime, batch.TimestampType())
		require.Equal(t, NoSequence, batch.BaseSequence())
		require.Equal(t, int32(1), batch.NumRecords())
		got, err := batch.EndTxnMarker()
		require.NoError(t, err)
		require.Equal(t, m, got)

		var it Iter
		it.Reset(batch, DefaultMaxUncompressed)
		require.True(t, it.Next())
		require.Len(t, it.Record().Raw, 17, "a marker record is 17 bytes")
	}
	_, err := EndTxnMarker{Type: ControlLeaderChange}.AppendTo(nil)
	require.ErrorIs(t, err, ErrBuilder)
	_, err = build(t, None, sampleRecords()[:1], nil).EndTxnMarker()
	require.ErrorIs(t, err, ErrInvalidRecord)
}

func TestParseControlKeyAndValue(t *testing.T) {
	key := func(v, typ int16) []byte {
		return binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, uint16(v)), uint16(typ))
	}
	for typ := ControlAbort; typ <= ControlKRaftVoters; typ++ {
		got, err := ParseControlKey(key(0, int16(typ)))
		require.NoError(t, err)
		require.Equal(t, typ, got)
	}
	got, err := ParseControlKey(key(0, 99))
	require.NoError(t, err)
	require.Equal(t, ControlUnknown, got)
	got, err = ParseControlKey(key(3, 1)) // a newer version reads as v0
	require.NoError(t, err)
	require.Equal(t, ControlCommit, got)
	_, err = ParseControlKey(key(-1, 1))
	require.ErrorIs(t, err, ErrInvalidRecord)
	_, err = ParseControlKey([]byte{0, 0, 1})
	require.ErrorIs(t, err, ErrInvalidRecord)

	val := binary.BigEndian.AppendUint32([]byte{0, 0}, 12)
	epoch, err := ParseEndTxnMarker(val)
	require.NoError(t, err)
	require.Equal(t, int32(12), epoch)
	_, err = ParseEndTxnMarker(val[:5])
	require.ErrorIs(t, err, ErrInvalidRecord)
	_, err = ParseEndTxnMarker(append([]byte{0xff, 0xff}, val[2:]...))
	require.ErrorIs(t, err, ErrInvalidRecord)
	require.Equal(t, "COMMIT", ControlCommit.String())
	require.Equal(t, "UNKNOWN", ControlType(50).String())
}

func TestCompressionNames(t *testing.T) {
	for _, c := range allCodecs {
		got, err := ParseCompression(c.String())
		require.NoError(t, err)
		require.Equal(t, c, got)
		require.True(t, c.Valid())
	}
	_, err := ParseCompression("brotli")
	require.ErrorIs(t, err, ErrUnknownCompression)
	require.False(t, Compression(5).Valid())
	require.Equal(t, "unknown(6)", Compression(6).String())
}

func TestUnknownCompressionIterates(t *testing.T) {
	batch := build(t, Gzip, sampleRecords(), nil)
	binary.BigEndian.PutUint16(batch.Bytes()[attributesOff:], 5)
	var it Iter
	it.Reset(batch, DefaultMaxUncompressed)
	require.False(t, it.Next())
	require.ErrorIs(t, it.Err(), ErrUnknownCompression)
}

func TestVarints(t *testing.T) {
	for _, v := range []int32{0, 1, -1, 63, -64, 64, -65, 8191, 8192, math.MaxInt32, math.MinInt32} {
		b := appendVarint(nil, v)
		require.Equal(t, sizeOfVarint(v), len(b))
		got, n := readVarint(b)
		require.Equal(t, v, got)
		require.Equal(t, len(b), n)
		_, n = readVarint(b[:len(b)-1])
		require.Equal(t, 0, n, "truncated varint %d", v)
	}
	for _, v := range []int64{0, -1, 1 << 40, math.MaxInt64, math.MinInt64} {
		b := appendVarlong(nil, v)
		require.Equal(t, sizeOfVarlong(v), len(b))
		got, n := readVarlong(b)
		require.Equal(t, v, got)
		require.Equal(t, len(b), n)
	}
	// Kafka's encodings: 300 zig-zags to 600 = 0xd8 0x04; -1 to 1.
	require.Equal(t, []byte{0xd8, 0x04}, appendVarint(nil, 300))
	require.Equal(t, []byte{0x01}, appendVarint(nil, -1))
	_, n := readVarint([]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x01})
	require.Equal(t, -1, n, "a 6-byte varint is too long")
	_, n = readVarlong(bytes.Repeat([]byte{0x80}, 11))
	require.Equal(t, -1, n)
}

// rawBatch assembles a batch from a header and raw records bytes with a
// valid CRC, for tests that need malformed records.
func rawBatch(h BatchHeader, records []byte) Batch {
	data := h.AppendTo(nil, HeaderSize+len(records))
	data = append(data, records...)
	binary.BigEndian.PutUint32(data[crcOff:], Checksum(data[attributesOff:]))
	return Batch{b: data}
}

func TestMalformedRecords(t *testing.T) {
	rec := func(r Record) []byte {
		return appendRecord(nil, 0, r.TimestampDelta, r.OffsetDelta, r.Key, r.Value, r.Headers)
	}
	one := rec(Record{Key: []byte("k"), Value: []byte("v")})
	hdr := BatchHeader{NumRecords: 1, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	withCount := func(n int32) BatchHeader { h := hdr; h.NumRecords = n; return h }
	cases := []struct {
		name    string
		h       BatchHeader
		records []byte
		reason  string
	}{
		{"premature EOF", withCount(2), one, "premature end"},
		{"records remaining", withCount(1), append(bytes.Clone(one), one...), "remain after the last record"},
		{"negative count", withCount(-1), one, "negative record count"},
		{"length past end", hdr, append([]byte{0x20}, one[1:]...), "only"},
		{"negative length", hdr, append([]byte{0x03}, one[1:]...), "negative length"},
		{"overlong varint", hdr, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, "too long"},
		{"negative header count", hdr, []byte{0x0c, 0, 0, 0, 1, 1, 0x01}, "header count -1"},
		{"header count too large", hdr, []byte{0x0c, 0, 0, 0, 1, 1, 0x7e}, "header count 63"},
		{"negative header key", hdr, []byte{0x10, 0, 0, 0, 1, 1, 0x02, 0x01, 0x01}, "negative header key"},
		{"bytes left in body", hdr, []byte{0x0e, 0, 0, 0, 1, 1, 0, 0, 0}, "left over"},
		{"a byte left in the last body", hdr, []byte{0x0e, 0, 0, 0, 1, 1, 0, 0}, "left over"},
		{"key past body", hdr, []byte{0x08, 0, 0, 0, 0x20}, "field of 16 bytes"},
		{"empty body", hdr, []byte{0x00}, "attributes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var it Iter
			it.Reset(rawBatch(tc.h, tc.records), DefaultMaxUncompressed)
			for it.Next() {
			}
			require.ErrorIs(t, it.Err(), ErrInvalidRecord)
			require.Contains(t, it.Err().Error(), tc.reason)
			var e *Error
			require.ErrorAs(t, it.Err(), &e)
			require.GreaterOrEqual(t, e.Pos, int64(recordsCountOff))

			// The append's check (its quick pass included) refuses it too.
			_, err := ValidateAppend(rawBatch(tc.h, tc.records).Bytes(), ValidateOptions{Origin: OriginReplication, TimestampType: LogAppendTime})
			require.ErrorIs(t, err, ErrInvalidRecord)
			require.Contains(t, err.Error(), tc.reason)
		})
	}
}

func TestCompressedRecordErrorsNameTheDecompressedPosition(t *testing.T) {
	b := NewBuilder(Gzip)
	require.NoError(t, b.Append(Record{Value: []byte("x")}))
	batch, err := b.Build()
	require.NoError(t, err)
	binary.BigEndian.PutUint32(batch.Bytes()[recordsCountOff:], 2)
	var it Iter
	it.Reset(batch, DefaultMaxUncompressed)
	require.True(t, it.Next())
	require.False(t, it.Next())
	require.ErrorIs(t, it.Err(), ErrInvalidRecord)
	require.Contains(t, it.Err().Error(), "of the decompressed records")
}

func TestCorruptCompressedData(t *testing.T) {
	for _, c := range allCodecs[1:] {
		t.Run(c.String(), func(t *testing.T) {
			batch := build(t, c, sampleRecords(), nil)
			data := batch.Bytes()
			for i := recordsOff; i < len(data); i += 3 {
				data[i] ^= 0x5a
			}
			var it Iter
			it.Reset(batch, DefaultMaxUncompressed)
			for it.Next() {
			}
			require.Error(t, it.Err())
			require.True(t, errors.Is(it.Err(), ErrInvalidRecord) || errors.Is(it.Err(), ErrDecompressLimit), "%v", it.Err())
		})
	}
}

func TestDecompressLimit(t *testing.T) {
	big := Record{Value: make([]byte, 1<<20)} // compresses to almost nothing
	for _, c := range allCodecs[1:] {
		t.Run(c.String(), func(t *testing.T) {
			batch := build(t, c, []Record{big, big}, nil)
			require.Less(t, batch.Size(), 200<<10)
			var it Iter
			it.Reset(batch, 1<<20)
			for it.Next() {
			}
			require.ErrorIs(t, it.Err(), ErrDecompressLimit)
			it.Reset(batch, 3<<20)
			n := 0
			for it.Next() {
				n++
			}
			require.NoError(t, it.Err())
			require.Equal(t, 2, n)
		})
	}
}

func TestSnappyRawAndXerial(t *testing.T) {
	payload := bytes.Repeat([]byte("snappy framing "), 10000) // spans several xerial blocks
	framed := appendXerial(nil, payload)
	require.True(t, bytes.HasPrefix(framed, xerialMagic))
	got, err := decompress(nil, Snappy, framed, len(payload))
	require.NoError(t, err)
	require.Equal(t, payload, got)
	_, err = decompress(nil, Snappy, framed, len(payload)-1)
	require.ErrorIs(t, err, ErrDecompressLimit)

	raw, err := compressRawSnappyForTest(payload)
	require.NoError(t, err)
	got, err = decompress(nil, Snappy, raw, len(payload))
	require.NoError(t, err)
	require.Equal(t, payload, got)
	_, err = decompress(nil, Snappy, raw, 100)
	require.ErrorIs(t, err, ErrDecompressLimit)

	for _, bad := range [][]byte{framed[:12], append(bytes.Clone(framed[:16]), 0, 0), append(bytes.Clone(framed[:16]), 0, 0, 1, 0, 1)} {
		_, err = decompress(nil, Snappy, bad, 1<<20)
		require.Error(t, err)
	}
}

func TestErrorMessage(t *testing.T) {
	e := &Error{Pos: 61, Reason: "bad", Err: ErrInvalidTimestamp, Records: []RecordError{
		{0, "a"}, {1, "b"}, {2, "c"}, {3, "d"}, {4, "e"}}}
	require.Equal(t, "record: invalid timestamp at byte 61: bad; record 0: a; record 1: b; record 2: c (and 2 more)", e.Error())
	require.ErrorIs(t, e, ErrInvalidTimestamp)
	require.Equal(t, "LogAppendTime", LogAppendTime.String())
	require.Equal(t, "CreateTime", CreateTime.String())
	require.Equal(t, "replication", OriginReplication.String())
	require.Equal(t, fmt.Sprint(Running), "running")
}

// A point read: the header alone and some consecutive records give the
// records with the batch's offsets, timestamps and sequences.
func TestResetPartOfAHeaderBatch(t *testing.T) {
	b := NewBuilder(None)
	b.SetProducer(9, 1, 40)
	for i := range 5 {
		require.NoError(t, b.Append(Record{Timestamp: 1000 + int64(i), Value: []byte{byte('a' + i)}}))
	}
	batch, err := b.Build()
	require.NoError(t, err)
	var starts []int
	var it Iter
	it.Reset(batch, DefaultMaxUncompressed)
	pos := 0
	for it.Next() {
		starts = append(starts, pos)
		pos += len(it.Record().Raw)
	}
	require.NoError(t, it.Err())
	starts = append(starts, pos)

	head, err := HeaderBatch(batch.Bytes()[:HeaderSize])
	require.NoError(t, err)
	require.Equal(t, HeaderSize, head.Size())
	require.Equal(t, batch.NumRecords(), head.NumRecords())
	records := batch.Bytes()[HeaderSize:]
	it.ResetPart(head, records[starts[2]:starts[5]], 3)
	var got []string
	for it.Next() {
		r := it.Record()
		got = append(got, fmt.Sprintf("%d %d %d %s", r.Offset, r.Timestamp, r.Sequence, r.Value))
	}
	require.NoError(t, it.Err())
	require.Equal(t, []string{"2 1002 42 c", "3 1003 43 d", "4 1004 44 e"}, got)

	_, err = HeaderBatch(batch.Bytes()[:HeaderSize-1])
	require.ErrorIs(t, err, ErrCorruptBatch)
}
