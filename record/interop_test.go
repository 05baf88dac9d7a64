package record_test

import (
	"bytes"
	"encoding/binary"
	"flag"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/record"
)

// Interoperability with franz-go, an independent Kafka implementation:
// batches seglog builds decode with kgo.ProcessFetchPartition (CRCs
// checked), and batches franz-go encodes parse and iterate identically in
// seglog.

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// batchSpec describes one batch of the interoperability workload.
type batchSpec struct {
	codec         record.Compression
	producerID    int64
	producerEpoch int16
	baseSequence  int32
	transactional bool
	logAppendTime int64              // > 0: a LogAppendTime batch
	marker        record.ControlType // with isMarker
	isMarker      bool
	records       []record.Record
}

func recs(base int64, kv ...string) []record.Record {
	var out []record.Record
	for i := 0; i+1 < len(kv); i += 2 {
		r := record.Record{Timestamp: base + int64(i), Key: []byte(kv[i]), Value: []byte(kv[i+1])}
		if kv[i] == "<null>" {
			r.Key = nil
		}
		if i%4 == 2 {
			r.Headers = []record.Header{{Key: []byte("trace"), Value: []byte(kv[i])}, {Key: []byte("empty"), Value: []byte{}}}
		}
		out = append(out, r)
	}
	return out
}

// workload is the mix every interoperability test uses: each codec, plain,
// idempotent and transactional data, LogAppendTime, COMMIT and ABORT.
var workload = []batchSpec{
	{codec: record.None, producerID: -1, producerEpoch: -1, baseSequence: -1,
		records: recs(1_700_000_000_000, "k1", "plain", "<null>", "null key", "k3", "")},
	{codec: record.Gzip, producerID: 1000, producerEpoch: 2, baseSequence: 0,
		records: recs(1_700_000_001_000, "a", "idempotent gzip", "b", "second", "c", "third", "d", "fourth")},
	{codec: record.Snappy, producerID: 2000, producerEpoch: 0, baseSequence: 0, transactional: true,
		records: recs(1_700_000_002_000, "t1", "txn snappy", "t2", "two")},
	{codec: record.None, producerID: 2000, producerEpoch: 0, baseSequence: -1, transactional: true, marker: record.ControlCommit, isMarker: true},
	{codec: record.LZ4, producerID: 1000, producerEpoch: 2, baseSequence: 4,
		records: recs(1_700_000_003_000, "l", "lz4 frame", "m", "more")},
	{codec: record.Zstd, producerID: 3000, producerEpoch: 7, baseSequence: 10, transactional: true,
		records: recs(1_700_000_004_000, "z", "zstd txn", "y", "aborted")},
	{codec: record.None, producerID: 3000, producerEpoch: 7, baseSequence: -1, transactional: true, marker: record.ControlAbort, isMarker: true},
	{codec: record.Zstd, producerID: -1, producerEpoch: -1, baseSequence: -1, logAppendTime: 1_700_000_009_999,
		records: recs(1_700_000_005_000, "lat", "log append time", "x", "y")},
	{codec: record.Gzip, producerID: -1, producerEpoch: -1, baseSequence: -1,
		records: recs(1_700_000_006_000, "big", string(bytes.Repeat([]byte("compressible "), 5000)))},
}

const leaderEpoch = 5

// encodeSeglog writes the workload with seglog's Builder.
func encodeSeglog(t testing.TB) []byte {
	var data []byte
	var next int64
	for _, s := range workload {
		var err error
		if s.isMarker {
			start := len(data)
			data, err = record.EndTxnMarker{Type: s.marker, ProducerID: s.producerID, ProducerEpoch: s.producerEpoch,
				CoordinatorEpoch: 3, Timestamp: 1_700_000_000_500}.AppendTo(data)
			require.NoError(t, err)
			b, _, err := record.ParseBatch(data[start:])
			require.NoError(t, err)
			b.SetBaseOffset(next)
			b.SetPartitionLeaderEpoch(leaderEpoch)
			next++
			continue
		}
		b := record.NewBuilder(s.codec)
		b.SetBaseOffset(next)
		b.SetPartitionLeaderEpoch(leaderEpoch)
		b.SetProducer(s.producerID, s.producerEpoch, s.baseSequence)
		b.SetTransactional(s.transactional)
		if s.logAppendTime > 0 {
			b.SetLogAppendTime(s.logAppendTime)
		}
		for _, r := range s.records {
			require.NoError(t, b.Append(r))
		}
		data, err = b.AppendTo(data)
		require.NoError(t, err)
		next += int64(len(s.records))
	}
	return data
}

var franzCodecs = map[record.Compression]kgo.CompressionCodec{
	record.Gzip: kgo.GzipCompression(), record.Snappy: kgo.SnappyCompression(),
	record.LZ4: kgo.Lz4Compression(), record.Zstd: kgo.ZstdCompression(),
}

// encodeFranz writes the workload with franz-go's kmsg encoders and kgo's
// compressors; the CRC is computed with the standard library.
func encodeFranz(t testing.TB) []byte {
	var data []byte
	var next int64
	for _, s := range workload {
		rb := kmsg.RecordBatch{
			FirstOffset: next, PartitionLeaderEpoch: leaderEpoch, Magic: 2,
			ProducerID: s.producerID, ProducerEpoch: s.producerEpoch, FirstSequence: s.baseSequence,
		}
		var raw []byte
		if s.isMarker {
			rb.Attributes = 0x30
			rb.FirstTimestamp, rb.MaxTimestamp, rb.NumRecords = 1_700_000_000_500, 1_700_000_000_500, 1
			key := []byte{0, 0, 0, byte(s.marker)}
			value := []byte{0, 0, 0, 0, 0, 3}
			raw = appendKmsgRecord(raw, kmsg.Record{Key: key, Value: value})
		} else {
			base := s.records[0].Timestamp
			rb.FirstTimestamp = base
			for i, r := range s.records {
				kr := kmsg.Record{TimestampDelta64: r.Timestamp - base, OffsetDelta: int32(i), Key: r.Key, Value: r.Value}
				for _, h := range r.Headers {
					kr.Headers = append(kr.Headers, kmsg.Header{Key: string(h.Key), Value: h.Value})
				}
				raw = appendKmsgRecord(raw, kr)
				rb.MaxTimestamp = max(rb.MaxTimestamp, r.Timestamp)
			}
			rb.NumRecords = int32(len(s.records))
			rb.LastOffsetDelta = int32(len(s.records) - 1)
			rb.Attributes = int16(s.codec)
			if s.transactional {
				rb.Attributes |= 0x10
			}
			if s.logAppendTime > 0 {
				rb.Attributes |= 0x08
				rb.MaxTimestamp = s.logAppendTime
			}
			if s.codec != record.None {
				c, err := kgo.DefaultCompressor(franzCodecs[s.codec])
				require.NoError(t, err)
				out, codec := c.Compress(new(bytes.Buffer), raw)
				require.Equal(t, int8(s.codec), int8(codec))
				raw = bytes.Clone(out)
			}
		}
		rb.Records = raw
		rb.Length = int32(record.HeaderSize - record.LogOverhead + len(raw))
		enc := rb.AppendTo(nil)
		binary.BigEndian.PutUint32(enc[17:], crc32.Checksum(enc[21:], crc32.MakeTable(crc32.Castagnoli)))
		data = append(data, enc...)
		next += int64(max(len(s.records), 1))
	}
	return data
}

func appendKmsgRecord(dst []byte, r kmsg.Record) []byte {
	body := len(r.AppendTo(nil)) - 1 // encoded with Length 0, a one-byte varint
	r.Length = int32(body)
	return r.AppendTo(dst)
}

// checkWithFranz decodes data with kgo.ProcessFetchPartition (CRC checked)
// and compares it with the workload.
func checkWithFranz(t *testing.T, data []byte) {
	t.Helper()
	fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{KeepControlRecords: true},
		&kmsg.FetchResponseTopicPartition{RecordBatches: data, HighWatermark: 1 << 40, LastStableOffset: 1 << 40},
		kgo.DefaultDecompressor(), nil)
	require.NoError(t, fp.Err)
	var i int
	var next int64
	for _, s := range workload {
		if s.isMarker {
			r := fp.Records[i]
			require.True(t, r.Attrs.IsControl())
			require.True(t, r.Attrs.IsTransactional())
			require.Equal(t, []byte{0, 0, 0, byte(s.marker)}, r.Key)
			require.Equal(t, []byte{0, 0, 0, 0, 0, 3}, r.Value)
			require.Equal(t, next, r.Offset)
			require.Equal(t, s.producerID, r.ProducerID)
			i++
			next++
			continue
		}
		for _, want := range s.records {
			r := fp.Records[i]
			require.Equal(t, next, r.Offset)
			require.Equal(t, string(want.Key), string(r.Key))
			require.Equal(t, want.Key == nil, r.Key == nil, "key nullness at offset %d", next)
			require.Equal(t, string(want.Value), string(r.Value))
			ts := want.Timestamp
			if s.logAppendTime > 0 {
				ts = s.logAppendTime
				require.True(t, r.Attrs.TimestampType() == 1)
			}
			require.Equal(t, time.UnixMilli(ts), r.Timestamp)
			require.Equal(t, s.producerID, r.ProducerID)
			require.Equal(t, s.producerEpoch, r.ProducerEpoch)
			require.Equal(t, s.transactional, r.Attrs.IsTransactional())
			require.Equal(t, int8(s.codec), int8(r.Attrs.CompressionType()))
			require.Equal(t, int32(leaderEpoch), r.LeaderEpoch)
			require.Len(t, r.Headers, len(want.Headers))
			for j, h := range want.Headers {
				require.Equal(t, string(h.Key), r.Headers[j].Key)
				require.Equal(t, string(h.Value), string(r.Headers[j].Value))
			}
			i++
			next++
		}
	}
	require.Len(t, fp.Records, i)
}

// checkWithSeglog scans data with seglog and compares it with the workload.
func checkWithSeglog(t *testing.T, data []byte) {
	t.Helper()
	s := record.NewScanner(bytes.NewReader(data), 0, int64(len(data)))
	var next int64
	var it record.Iter
	for _, spec := range workload {
		require.True(t, s.Next(), "batch at %d: %v %v", s.Pos(), s.Stop(), s.Err())
		b, err := s.Batch()
		require.NoError(t, err)
		require.NoError(t, b.Verify())
		require.Equal(t, next, b.BaseOffset())
		require.Equal(t, int32(leaderEpoch), b.PartitionLeaderEpoch())
		require.Equal(t, spec.producerID, b.ProducerID())
		require.Equal(t, spec.producerEpoch, b.ProducerEpoch())
		require.Equal(t, spec.transactional, b.IsTransactional())
		require.Equal(t, spec.codec, b.Compression())
		if spec.isMarker {
			m, err := b.EndTxnMarker()
			require.NoError(t, err)
			require.Equal(t, spec.marker, m.Type)
			require.Equal(t, int32(3), m.CoordinatorEpoch)
			require.Equal(t, record.ControlBatchSize, b.Size())
			next++
			continue
		}
		require.Equal(t, int32(len(spec.records)), b.NumRecords())
		it.Reset(b, record.DefaultMaxUncompressed)
		for _, want := range spec.records {
			require.True(t, it.Next(), "%v", it.Err())
			r := it.Record()
			require.Equal(t, next, r.Offset)
			require.Equal(t, want.Key == nil, r.Key == nil)
			require.Equal(t, string(want.Key), string(r.Key))
			require.Equal(t, string(want.Value), string(r.Value))
			if spec.logAppendTime > 0 {
				require.Equal(t, spec.logAppendTime, r.Timestamp)
			} else {
				require.Equal(t, want.Timestamp, r.Timestamp)
			}
			require.Len(t, r.Headers, len(want.Headers))
			for j, h := range want.Headers {
				require.Equal(t, string(h.Key), string(r.Headers[j].Key))
				require.Equal(t, string(h.Value), string(r.Headers[j].Value))
				require.NotNil(t, r.Headers[j].Value)
			}
			next++
		}
		require.False(t, it.Next())
		require.NoError(t, it.Err())
	}
	require.False(t, s.Next())
	require.Equal(t, record.AtEnd, s.Stop())
}

func TestSeglogBatchesDecodeWithFranz(t *testing.T) {
	data := encodeSeglog(t)
	checkWithFranz(t, data)
	checkWithSeglog(t, data)

	// franz-go checks the CRC too: one flipped byte is refused.
	bad := bytes.Clone(data)
	bad[100] ^= 1
	fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{KeepControlRecords: true},
		&kmsg.FetchResponseTopicPartition{RecordBatches: bad, HighWatermark: 1 << 40}, kgo.DefaultDecompressor(), nil)
	require.ErrorContains(t, fp.Err, "crc")
}

func TestFranzBatchesReadBySeglog(t *testing.T) {
	data := encodeFranz(t)
	checkWithFranz(t, data) // the encoding itself is sound
	checkWithSeglog(t, data)
}

// The header fields kmsg reads from our batches equal ours, CRC included.
func TestKmsgReadsSeglogHeaders(t *testing.T) {
	data := encodeSeglog(t)
	for len(data) > 0 {
		b, rest, err := record.ParseBatch(data)
		require.NoError(t, err)
		var rb kmsg.RecordBatch
		require.NoError(t, rb.ReadFrom(b.Bytes()))
		require.Equal(t, b.BaseOffset(), rb.FirstOffset)
		require.Equal(t, int32(b.Size()-record.LogOverhead), rb.Length)
		require.Equal(t, b.CRC(), uint32(rb.CRC))
		require.Equal(t, int16(b.Attributes()), rb.Attributes)
		require.Equal(t, b.LastOffsetDelta(), rb.LastOffsetDelta)
		require.Equal(t, b.BaseTimestamp(), rb.FirstTimestamp)
		require.Equal(t, b.MaxTimestamp(), rb.MaxTimestamp)
		require.Equal(t, b.BaseSequence(), rb.FirstSequence)
		require.Equal(t, b.NumRecords(), rb.NumRecords)
		data = rest
	}
}

// Golden files: testdata/franz.log holds the workload as franz-go encoded
// it (committed, so a change in either library cannot hide a difference);
// testdata/seglog-none.log holds seglog's encoding of the uncompressed
// batches, which must not change byte for byte. go test -run Golden -update
// rewrites both.
func TestGoldenFiles(t *testing.T) {
	franzPath := filepath.Join("testdata", "franz.log")
	oursPath := filepath.Join("testdata", "seglog-none.log")
	ours := uncompressedOnly(t, encodeSeglog(t))
	if *update {
		require.NoError(t, os.WriteFile(franzPath, encodeFranz(t), 0o644))
		require.NoError(t, os.WriteFile(oursPath, ours, 0o644))
	}
	franz, err := os.ReadFile(franzPath)
	require.NoError(t, err)
	checkWithSeglog(t, franz)
	checkWithFranz(t, franz)
	golden, err := os.ReadFile(oursPath)
	require.NoError(t, err)
	require.Equal(t, golden, ours, "seglog's encoding of uncompressed batches changed")
	// Uncompressed batches are the same bytes whoever writes them.
	require.Equal(t, uncompressedOnly(t, franz), golden)
}

func uncompressedOnly(t *testing.T, data []byte) []byte {
	var out []byte
	for len(data) > 0 {
		b, rest, err := record.ParseBatch(data)
		require.NoError(t, err)
		if b.Compression() == record.None {
			out = append(out, b.Bytes()...)
		}
		data = rest
	}
	return out
}
