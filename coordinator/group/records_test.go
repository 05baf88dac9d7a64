package group

import (
	"encoding/binary"
	"testing"
	"time"

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

// Format prints records as Kafka's dump tool does with --offsets-decoder.
func TestFormatIsKafkasDump(t *testing.T) {
	o := Offset{Offset: 5, LeaderEpoch: -1, Metadata: "", CommitTimestamp: 1700000000000, ExpireTimestamp: -1}
	k, v, err := Format(offsetKey("g", "t", 0), offsetValue(o))
	require.NoError(t, err)
	require.Equal(t, `{"type":"1","data":{"group":"g","topic":"t","partition":0}}`, k)
	require.Equal(t, `{"version":"3","data":{"offset":5,"leaderEpoch":-1,"metadata":"","commitTimestamp":1700000000000}}`, v)
	_, v, err = Format(offsetKey("g", "t", 0), nil)
	require.NoError(t, err)
	require.Equal(t, "<DELETE>", v)

	g := newGroup("g", 0, time.UnixMilli(1700000000000))
	g.protocol, g.generation = "range", 3
	g.add(&member{id: "m-1", protocolType: "consumer", clientID: "c", clientHost: "/127.0.0.1", sessionTimeout: 45 * time.Second,
		rebalanceTimeout: time.Minute, protocols: []protocol{{name: "range", metadata: []byte{1}}}, assignment: []byte{2}})
	k, v, err = Format(groupKey("g"), groupValue(g))
	require.NoError(t, err)
	require.Equal(t, `{"type":"2","data":{"group":"g"}}`, k)
	require.Equal(t, `{"version":"3","data":{"protocolType":"consumer","generation":3,"protocol":"range","leader":"m-1",`+
		`"currentStateTimestamp":1700000000000,"members":[{"memberId":"m-1","groupInstanceId":null,"clientId":"c",`+
		`"clientHost":"/127.0.0.1","rebalanceTimeout":60000,"sessionTimeout":45000,"subscription":"AQ==","assignment":"Ag=="}]}}`, v)
}

// A group's members, decoded, own their subscription and assignment: the
// load reads __consumer_offsets into a buffer it reuses, and a member's
// bytes must outlive it.
func TestDecodedMembersOwnTheirBytes(t *testing.T) {
	g := &group{id: "g", protocolType: "consumer", protocol: "range", generation: 3, leader: "m1",
		members: map[string]*member{"m1": {id: "m1", clientID: "c", clientHost: "/127.0.0.1", sessionTimeout: time.Second,
			rebalanceTimeout: time.Second, protocols: []protocol{{name: "range", metadata: []byte("subscription")}},
			assignment: []byte("assignment")}},
		order: []string{"m1"}}
	value := groupValue(g)
	d, err := Decode(groupKey("g"), value)
	require.NoError(t, err)
	clear(value) // the buffer, reused
	require.Len(t, d.Metadata.Members, 1)
	require.Equal(t, "subscription", string(d.Metadata.Members[0].Subscription))
	require.Equal(t, "assignment", string(d.Metadata.Members[0].Assignment))
}
