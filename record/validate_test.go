package record

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"
)

// kafkaRecords is LogValidatorTest.createRecords: three records with the
// same timestamp.
func kafkaRecords(t *testing.T, c Compression, ts int64) Batch {
	var recs []Record
	for _, v := range []string{"hello", "there", "beautiful"} {
		recs = append(recs, Record{Timestamp: ts, Value: []byte(v)})
	}
	return build(t, c, recs, nil)
}

// override pokes the count and lastOffsetDelta fields and fixes the CRC, so
// only the validator's own checks can object.
func override(b Batch, lastOffsetDelta, count int32) []byte {
	data := bytes.Clone(b.Bytes())
	binary.BigEndian.PutUint32(data[recordsCountOff:], uint32(count))
	binary.BigEndian.PutUint32(data[lastOffsetDeltaOff:], uint32(lastOffsetDelta))
	binary.BigEndian.PutUint32(data[crcOff:], Checksum(data[attributesOff:]))
	return data
}

// Scenario 70: testRecordBatchWithCountOverrides, testInconsistentCountAndOffset,
// testUnmatchedNumberOfRecords.
func TestValidateCountOverrides(t *testing.T) {
	opts := ValidateOptions{TimestampType: LogAppendTime, TimestampBeforeMaxMs: 1000, TimestampAfterMaxMs: 1000}
	for _, c := range []Compression{None, Gzip} {
		batch := kafkaRecords(t, c, 1234)
		_, err := ValidateAppend(override(batch, 2, 3), opts)
		require.NoError(t, err)
		for _, tc := range [][2]int32{{0, 3}, {15, 3}, {-3, 3}, {5, 6}, {1, 2}} {
			_, err := ValidateAppend(override(batch, tc[0], tc[1]), opts)
			require.ErrorIs(t, err, ErrInvalidRecord, "%v lastOffsetDelta=%d count=%d", c, tc[0], tc[1])
		}
	}
}

// Scenario 71: testInvalidCreateTime*V2, testRecordWith{Past,Future}TimestampIsRejected.
func TestValidateTimestamps(t *testing.T) {
	const now = 1_700_000_000_000
	const fiveMin = 5 * 60 * 1000
	for _, c := range []Compression{None, Gzip, Zstd} {
		opts := ValidateOptions{NowMs: now, TimestampBeforeMaxMs: 1000, TimestampAfterMaxMs: 1000}
		_, err := ValidateAppend(kafkaRecords(t, c, now-1001).Bytes(), opts)
		require.ErrorIs(t, err, ErrInvalidTimestamp)
		var e *Error
		require.ErrorAs(t, err, &e)
		require.Len(t, e.Records, 3, "every record is reported")
		for i, r := range e.Records {
			require.Equal(t, i, r.Index)
			require.Contains(t, r.Message, "out of range")
		}
		_, err = ValidateAppend(kafkaRecords(t, c, now+1001).Bytes(), opts)
		require.ErrorIs(t, err, ErrInvalidTimestamp)
		v, err := ValidateAppend(kafkaRecords(t, c, now-1000).Bytes(), opts)
		require.NoError(t, err)
		require.Equal(t, int64(now-1000), v.MaxTimestamp)

		past := ValidateOptions{NowMs: now, TimestampBeforeMaxMs: fiveMin}
		_, err = ValidateAppend(kafkaRecords(t, c, now-6*60*1000).Bytes(), past)
		require.ErrorIs(t, err, ErrInvalidTimestamp)
		_, err = ValidateAppend(kafkaRecords(t, c, now+6*60*1000).Bytes(), past)
		require.NoError(t, err, "no after bound set")
		future := ValidateOptions{NowMs: now, TimestampAfterMaxMs: fiveMin}
		_, err = ValidateAppend(kafkaRecords(t, c, now+6*60*1000).Bytes(), future)
		require.ErrorIs(t, err, ErrInvalidTimestamp)
		_, err = ValidateAppend(kafkaRecords(t, c, 0).Bytes(), future)
		require.NoError(t, err, "no before bound set")
	}
	// A record without a timestamp is not checked.
	_, err := ValidateAppend(kafkaRecords(t, None, NoTimestamp).Bytes(),
		ValidateOptions{NowMs: now, TimestampBeforeMaxMs: 1, TimestampAfterMaxMs: 1})
	require.NoError(t, err)
}

func TestValidateLogAppendTimeFromProducer(t *testing.T) {
	lat := build(t, None, sampleRecords()[:2], func(b *Builder) { b.SetLogAppendTime(5) })
	_, err := ValidateAppend(lat.Bytes(), ValidateOptions{TimestampType: LogAppendTime})
	require.ErrorIs(t, err, ErrInvalidTimestamp)
	require.Contains(t, err.Error(), "LogAppendTime")
}

// Scenario 72: testControlRecordsNotAllowedFromClients and
// testControlRecordsNotCompressed.
// A follower takes its leader's batches as the leader wrote them: a
// LogAppendTime batch (the leader stamped it), any timestamp, and a
// compressed batch whose offsets a compaction left with gaps, all unchanged
// (a follower that refused LogAppendTime batches never replicated such a
// topic: librdkafka's test 0052).
func TestValidateReplicatedBatchesAsTheLeaderWroteThem(t *testing.T) {
	lat := build(t, None, sampleRecords()[:2], func(b *Builder) { b.SetLogAppendTime(5) })
	for _, tt := range []TimestampType{LogAppendTime, CreateTime} {
		v, err := ValidateAppend(lat.Bytes(), ValidateOptions{Origin: OriginReplication, TimestampType: tt, NowMs: 1 << 50,
			TimestampBeforeMaxMs: 1, TimestampAfterMaxMs: 1})
		require.NoError(t, err, "topic timestamp type %v", tt)
		require.Equal(t, lat.Bytes(), v.Batch.Bytes())
	}
	_, err := ValidateAppend(lat.Bytes(), ValidateOptions{Origin: OriginClient, TimestampType: LogAppendTime})
	require.Error(t, err, "a producer's still is refused")
}

func TestValidateControlBatches(t *testing.T) {
	marker, err := EndTxnMarker{Type: ControlCommit, ProducerID: 5, ProducerEpoch: 1, Timestamp: 10}.AppendTo(nil)
	require.NoError(t, err)
	_, err = ValidateAppend(marker, ValidateOptions{})
	require.ErrorIs(t, err, ErrInvalidRecord)
	require.Contains(t, err.Error(), "control")

	v, err := ValidateAppend(marker, ValidateOptions{Origin: OriginCoordinator})
	require.NoError(t, err)
	require.False(t, v.Rebuilt)
	require.Equal(t, marker, v.Batch.Bytes(), "a marker is appended as it came, uncompressed")
}

func TestValidateRejections(t *testing.T) {
	good := build(t, None, sampleRecords(), nil).Bytes()
	badCRC := bytes.Clone(good)
	badCRC[len(badCRC)-1] ^= 1
	idempotentNoSeq := build(t, None, sampleRecords()[:1], func(b *Builder) { b.SetProducer(3, 0, -1) }).Bytes()
	unknownCodec := override(build(t, None, sampleRecords()[:1], nil), 0, 1)
	binary.BigEndian.PutUint16(unknownCodec[attributesOff:], 6)
	binary.BigEndian.PutUint32(unknownCodec[crcOff:], Checksum(unknownCodec[attributesOff:]))
	cases := []struct {
		name string
		data []byte
		opts ValidateOptions
		kind error
		pos  int64
	}{
		{"no batches", nil, ValidateOptions{}, ErrInvalidRecord, 0},
		{"two batches", append(bytes.Clone(good), good...), ValidateOptions{}, ErrInvalidRecord, int64(len(good))},
		{"trailing bytes", append(bytes.Clone(good), 0, 0, 0), ValidateOptions{}, ErrInvalidRecord, int64(len(good))},
		{"too large", good, ValidateOptions{MaxMessageBytes: len(good) - 1}, ErrRecordTooLarge, 0},
		{"bad crc", badCRC, ValidateOptions{}, ErrCorruptBatch, crcOff},
		{"truncated", good[:len(good)-1], ValidateOptions{}, ErrCorruptBatch, 0},
		{"idempotent without sequence", idempotentNoSeq, ValidateOptions{}, ErrInvalidRecord, baseSequenceOff},
		{"unknown codec", unknownCodec, ValidateOptions{}, ErrUnknownCompression, attributesOff},
		{"compacted null key", good, ValidateOptions{Compacted: true}, ErrInvalidRecord, recordsOff},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ValidateAppend(tc.data, tc.opts)
			require.ErrorIs(t, err, tc.kind)
			var e *Error
			require.ErrorAs(t, err, &e)
			require.Equal(t, tc.pos, e.Pos)
		})
	}
	// Replication skips the client checks.
	_, err := ValidateAppend(idempotentNoSeq, ValidateOptions{Origin: OriginReplication})
	require.NoError(t, err)
	// A batch exactly at the limit passes.
	_, err = ValidateAppend(good, ValidateOptions{MaxMessageBytes: len(good)})
	require.NoError(t, err)
}

func TestValidateMaxTimestampAnchor(t *testing.T) {
	recs := []Record{{Timestamp: 5}, {Timestamp: 9}, {Timestamp: 7}, {Timestamp: 9}}
	v, err := ValidateAppend(build(t, None, recs, nil).Bytes(), ValidateOptions{})
	require.NoError(t, err)
	require.Equal(t, int64(9), v.MaxTimestamp)
	require.Equal(t, int32(1), v.MaxTimestampDelta, "the first record reaching the max")
}

// Kafka rebuilds a compressed batch whose inner offsets are not 0..n-1; an
// uncompressed one is kept as it is.
func TestValidateNonSequentialInnerOffsets(t *testing.T) {
	// Records at offsets 0 and 2, with the header claiming the range [0, 1]
	// so that the count check passes.
	mk := func(c Compression) []byte {
		b := NewBuilder(c)
		b.SetProducer(8, 2, 100)
		require.NoError(t, b.AppendWithOffset(0, Record{Timestamp: 50, Value: []byte("v")}))
		require.NoError(t, b.AppendWithOffset(2, Record{Timestamp: 52, Value: []byte("v")}))
		batch, err := b.Build()
		require.NoError(t, err)
		return override(batch, 1, 2)
	}
	v, err := ValidateAppend(mk(Gzip), ValidateOptions{})
	require.NoError(t, err)
	require.True(t, v.Rebuilt)
	require.NoError(t, v.Batch.Verify())
	require.Equal(t, Gzip, v.Batch.Compression())
	require.Equal(t, int64(8), v.Batch.ProducerID())
	require.Equal(t, int32(100), v.Batch.BaseSequence())
	got := readAll(t, v.Batch)
	require.Equal(t, []int64{0, 1}, []int64{got[0].Offset, got[1].Offset})
	require.Equal(t, []int64{50, 52}, []int64{got[0].Timestamp, got[1].Timestamp})

	v, err = ValidateAppend(mk(None), ValidateOptions{})
	require.NoError(t, err)
	require.False(t, v.Rebuilt)
	got = readAll(t, v.Batch)
	require.Equal(t, []int64{0, 2}, []int64{got[0].Offset, got[1].Offset})

	// Uncompressed, recompressed with the topic's codec: rebuilt in order.
	v, err = ValidateAppend(mk(None), ValidateOptions{Recompress: true, Compression: Gzip})
	require.NoError(t, err)
	require.True(t, v.Rebuilt)
	got = readAll(t, v.Batch)
	require.Equal(t, []int64{0, 1}, []int64{got[0].Offset, got[1].Offset})
}
