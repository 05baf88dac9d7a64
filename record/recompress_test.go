package record

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// Recompress changes the codec and nothing else: the header but for its
// codec bits and CRC, and every record, read back, are the original's.
func TestRecompress(t *testing.T) {
	for _, from := range []Compression{None, Gzip, Snappy, LZ4, Zstd} {
		bl := NewBuilder(from)
		bl.SetProducer(7, 2, 40)
		bl.SetTransactional(true)
		for i := range 20 {
			require.NoError(t, bl.Append(Record{Timestamp: 1_700_000_000_000 + int64(i), Key: []byte{byte(i)},
				Value: bytes.Repeat([]byte{'v'}, 100+i), Headers: []Header{{Key: []byte("h"), Value: []byte{byte(i)}}}}))
		}
		orig, err := bl.Build()
		require.NoError(t, err)
		for _, to := range []Compression{None, Gzip, Snappy, LZ4, Zstd} {
			got, err := Recompress(orig, to, DefaultMaxUncompressed)
			require.NoError(t, err, "%v to %v", from, to)
			require.NoError(t, got.Verify(), "%v to %v: a valid CRC", from, to)
			oh, gh := orig.Header(), got.Header()
			require.Equal(t, to, gh.Attributes.Compression())
			oh.Attributes, gh.Attributes = oh.Attributes&^compressionMask, gh.Attributes&^compressionMask
			require.Equal(t, oh, gh, "%v to %v: the same header", from, to)
			var a, b Iter
			a.Reset(orig, DefaultMaxUncompressed)
			b.Reset(got, DefaultMaxUncompressed)
			n := 0
			for a.Next() {
				require.True(t, b.Next())
				ra, rb := a.Record(), b.Record()
				require.Equal(t, ra.Timestamp, rb.Timestamp)
				require.Equal(t, ra.Key, rb.Key)
				require.Equal(t, ra.Value, rb.Value)
				require.Equal(t, ra.Headers, rb.Headers)
				n++
			}
			require.False(t, b.Next())
			require.NoError(t, a.Err())
			require.NoError(t, b.Err())
			require.Equal(t, 20, n)
		}
	}
	_, err := Recompress(Batch{}, Compression(9), 0)
	require.ErrorIs(t, err, ErrUnknownCompression)
}

// ValidateAppend with Recompress stores a data batch of another codec with
// the target one (Rebuilt), leaves one of that codec and a control batch
// as they are, and checks the recompressed size against MaxMessageBytes.
func TestValidateAppendRecompresses(t *testing.T) {
	bl := NewBuilder(Zstd)
	for i := range 50 {
		require.NoError(t, bl.Append(Record{Timestamp: int64(i), Value: bytes.Repeat([]byte{'x'}, 1000)}))
	}
	zstd, err := bl.Build()
	require.NoError(t, err)
	opts := ValidateOptions{Recompress: true, Compression: LZ4}
	v, err := ValidateAppend(zstd.Bytes(), opts)
	require.NoError(t, err)
	require.True(t, v.Rebuilt)
	require.Equal(t, LZ4, v.Batch.Compression())
	require.Equal(t, int64(49), v.MaxTimestamp)

	opts.Compression = Zstd
	v, err = ValidateAppend(zstd.Bytes(), opts)
	require.NoError(t, err)
	require.False(t, v.Rebuilt, "already the topic's codec")

	opts.Compression, opts.MaxMessageBytes = None, zstd.Size()+100 // 50,000 bytes uncompressed
	_, err = ValidateAppend(zstd.Bytes(), opts)
	require.ErrorIs(t, err, ErrRecordTooLarge, "uncompressed, it is over the limit")

	marker, err := EndTxnMarker{Type: ControlCommit, ProducerID: 1, Timestamp: 1}.AppendTo(nil)
	require.NoError(t, err)
	v, err = ValidateAppend(marker, ValidateOptions{Origin: OriginCoordinator, Recompress: true, Compression: Zstd})
	require.NoError(t, err)
	require.False(t, v.Rebuilt, "a control batch as it came")
}
