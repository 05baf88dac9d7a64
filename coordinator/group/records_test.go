package group

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"
)

// Kafka's partition of a group: abs(String.hashCode) % partitions, the
// hashes computed here by Java's rule over UTF-16 (the last is the string
// whose hash is MinInt32, which Kafka's abs makes 0).
func TestPartitionForIsKafkas(t *testing.T) {
	for id, want := range map[string]int32{"abc": 4, "my-group": 12, "console-consumer-40213": 31, "grüße": 23,
		"😀group": 32, "polygenelubricants": 0} {
		require.Equal(t, want, PartitionFor(id, 50), id)
	}
}

// The records are Kafka's schemas byte for byte: OffsetCommitKey v1,
// OffsetCommitValue v3 (v1 with an expiry), GroupMetadataKey v2, written
// out here field by field.
func TestRecordsAreKafkasBytes(t *testing.T) {
	str := func(b []byte, s string) []byte {
		b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
		return append(b, s...)
	}
	var key []byte
	key = binary.BigEndian.AppendUint16(key, 1)
	key = str(key, "g")
	key = str(key, "orders")
	key = binary.BigEndian.AppendUint32(key, 7)
	require.Equal(t, key, offsetKey("g", "orders", 7))

	var val []byte
	val = binary.BigEndian.AppendUint16(val, 3)
	val = binary.BigEndian.AppendUint64(val, 1234)
	val = binary.BigEndian.AppendUint32(val, 5)
	val = str(val, "meta")
	val = binary.BigEndian.AppendUint64(val, 1_700_000_000_000)
	o := Offset{Offset: 1234, LeaderEpoch: 5, Metadata: "meta", CommitTimestamp: 1_700_000_000_000, ExpireTimestamp: -1}
	require.Equal(t, val, offsetValue(o))

	var v1 []byte
	v1 = binary.BigEndian.AppendUint16(v1, 1)
	v1 = binary.BigEndian.AppendUint64(v1, 1234)
	v1 = str(v1, "meta")
	v1 = binary.BigEndian.AppendUint64(v1, 1_700_000_000_000)
	v1 = binary.BigEndian.AppendUint64(v1, 1_700_000_060_000)
	o.ExpireTimestamp = 1_700_000_060_000
	require.Equal(t, v1, offsetValue(o))

	var gk []byte
	gk = binary.BigEndian.AppendUint16(gk, 2)
	gk = str(gk, "g")
	require.Equal(t, gk, groupKey("g"))

	d, err := Decode(key, val)
	require.NoError(t, err)
	require.True(t, d.IsOffset)
	require.Equal(t, "orders", d.Topic)
	require.Equal(t, int32(7), d.Partition)
	require.Equal(t, int64(1234), d.Offset.Offset)
	require.Equal(t, int32(5), d.Offset.LeaderEpoch)
	d, err = Decode(key, nil)
	require.NoError(t, err)
	require.Nil(t, d.Offset, "a tombstone deletes")
	d, err = Decode(key, v1)
	require.NoError(t, err)
	require.Equal(t, int32(-1), d.Offset.LeaderEpoch, "v1 has no leader epoch")
	require.Equal(t, int64(1_700_000_060_000), d.Offset.ExpireTimestamp)

	_, err = Decode([]byte{0, 9, 0}, nil)
	require.ErrorContains(t, err, "unknown record type 9")
	_, err = Decode(key[:5], nil)
	require.Error(t, err, "a truncated key")
	_, err = Decode(key, val[:7])
	require.Error(t, err, "a truncated value")
}
