package record

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// fuzzLimit bounds decompression in the fuzz targets, so a hostile input
// cannot make them allocate much.
const fuzzLimit = 1 << 20

// seedBatches returns every batch of the golden files plus a few built
// here, as fuzz seeds.
func seedBatches(f *testing.F) [][]byte {
	var seeds [][]byte
	for _, name := range []string{"franz.log", "seglog-none.log"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		require.NoError(f, err)
		for len(data) > 0 {
			b, rest, err := ParseBatch(data)
			require.NoError(f, err)
			seeds = append(seeds, bytes.Clone(b.Bytes()))
			data = rest
		}
	}
	for _, c := range allCodecs {
		b := NewBuilder(c)
		b.SetProducer(1, 1, 1)
		for _, r := range sampleRecords()[:4] {
			require.NoError(f, b.Append(r))
		}
		batch, err := b.Build()
		require.NoError(f, err)
		seeds = append(seeds, batch.Bytes())
	}
	return seeds
}

// FuzzBatch parses arbitrary bytes as a batch and iterates its records. It
// must never panic; a CRC-valid, uncompressed batch whose records decode
// must rebuild byte for byte through the Builder.
func FuzzBatch(f *testing.F) {
	for _, s := range seedBatches(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		b, _, err := ParseBatch(data)
		if err != nil {
			return
		}
		_ = b.Header()
		_ = b.LastSequence()
		valid := b.Verify() == nil
		checkRoundTrip(t, b, valid)
		if b.IsControl() {
			_, _ = b.EndTxnMarker()
		}
	})
}

// FuzzRecords fuzzes the records section behind a valid header and CRC, so
// the fuzzer reaches record decoding without forging checksums.
func FuzzRecords(f *testing.F) {
	for _, s := range seedBatches(f) {
		b := Batch{b: s}
		f.Add(int16(b.Attributes()), b.NumRecords(), b.BaseSequence(), s[recordsOff:])
	}
	f.Fuzz(func(t *testing.T, attrs int16, count, baseSeq int32, records []byte) {
		h := BatchHeader{BaseOffset: 1000, Attributes: Attributes(attrs), LastOffsetDelta: count - 1,
			BaseTimestamp: 1_700_000_000_000, MaxTimestamp: 1_700_000_000_000,
			ProducerID: 7, ProducerEpoch: 1, BaseSequence: baseSeq, NumRecords: count}
		b := rawBatch(h, records)
		require.NoError(t, b.Verify())
		checkRoundTrip(t, b, true)
		_, _ = ValidateAppend(b.Bytes(), ValidateOptions{MaxUncompressed: fuzzLimit})
		for _, compacted := range []bool{false, true} {
			checkSkim(t, b, ValidateOptions{Origin: OriginReplication, MaxUncompressed: fuzzLimit, Compacted: compacted})
		}
	})
}

// checkSkim holds validateRecords' quick pass to the full one: when it
// passes a batch, the full pass refuses nothing, finds the records in
// order and the same largest timestamp.
func checkSkim(t *testing.T, b Batch, opts ValidateOptions) {
	opts.EnsureDefaults()
	maxTs, delta, ok := skimRecords(b, &opts)
	if !ok {
		return
	}
	v, err := validateEach(b, opts)
	require.NoError(t, err)
	require.Equal(t, b, v.Batch, "the full pass would have rebuilt it")
	require.Equal(t, v.MaxTimestamp, maxTs)
	require.Equal(t, v.MaxTimestampDelta, delta)
	var it Iter
	var index int32
	for it.Reset(b, fuzzLimit); it.Next(); index++ {
		require.Equal(t, index, it.Record().OffsetDelta)
	}
}

// checkRoundTrip iterates b and, for a valid uncompressed batch whose
// records all decode, rebuilds it and compares.
func checkRoundTrip(t *testing.T, b Batch, valid bool) {
	var it Iter
	it.Reset(b, fuzzLimit)
	bl := NewBuilder(None)
	bl.SetHeader(b.Header())
	canonical := true
	var n int32
	for it.Next() {
		r := it.Record()
		n++
		if bl.AppendWithOffset(r.Offset, Record{Attributes: r.Attributes, Timestamp: b.BaseTimestamp() + r.TimestampDelta,
			Key: r.Key, Value: r.Value, Headers: r.Headers}) != nil {
			canonical = false
		}
		if !bytes.Equal(appendRecord(nil, r.Attributes, r.TimestampDelta, r.OffsetDelta, r.Key, r.Value, r.Headers), r.Raw) {
			canonical = false // e.g. an overlong varint or a null written as -5
		}
	}
	if it.Err() != nil {
		return
	}
	require.Equal(t, b.NumRecords(), n)
	if !valid || b.Compression() != None || !canonical {
		return
	}
	rebuilt, err := bl.Build()
	require.NoError(t, err)
	require.Equal(t, b.Bytes(), rebuilt.Bytes())
}

// Hostile lengths — a record count, a record length, a key length and a
// header count near MaxInt32 — are refused without allocating for them.
func TestHostileLengthsDoNotAllocate(t *testing.T) {
	hdr := BatchHeader{NumRecords: 1, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	huge := appendVarint(nil, 1<<30)
	cases := map[string]Batch{
		"count":         rawBatch(BatchHeader{NumRecords: 1 << 30}, appendRecord(nil, 0, 0, 0, nil, nil, nil)),
		"record length": rawBatch(hdr, huge),
		"key length":    rawBatch(hdr, append(append([]byte{0x10, 0, 0, 0}, huge...), 0, 0, 0)),
		"header count":  rawBatch(hdr, append(append([]byte{0x10, 0, 0, 0, 1, 1}, huge...), 0)),
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			var it Iter
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for it.Reset(b, DefaultMaxUncompressed); it.Next(); {
			}
			runtime.ReadMemStats(&after)
			require.ErrorIs(t, it.Err(), ErrInvalidRecord)
			require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(64<<10))
		})
	}
}
