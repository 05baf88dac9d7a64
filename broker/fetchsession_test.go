package broker

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/tablet"
)

// sessionFetch is a fetch of a session at an epoch; parts are partition
// → fetch offset, forget the partitions to forget.
func sessionFetch(id, epoch int32, topic string, tid [16]byte, parts map[int32]int64, forget ...int32) *kmsg.FetchRequest {
	f := kmsg.NewPtrFetchRequest()
	f.MaxBytes, f.SessionID, f.SessionEpoch = 1<<20, id, epoch
	if len(parts) > 0 {
		rt := kmsg.FetchRequestTopic{Topic: topic, TopicID: tid}
		for p := range int32(8) {
			if o, ok := parts[p]; ok {
				rt.Partitions = append(rt.Partitions, kmsg.FetchRequestTopicPartition{Partition: p, FetchOffset: o,
					PartitionMaxBytes: 1 << 20, CurrentLeaderEpoch: -1, LastFetchedEpoch: -1, LogStartOffset: -1})
			}
		}
		f.Topics = append(f.Topics, rt)
	}
	if len(forget) > 0 {
		f.ForgottenTopics = []kmsg.FetchRequestForgottenTopic{{Topic: topic, TopicID: tid, Partitions: forget}}
	}
	return f
}

// answered lists an answer's partitions as "p:records?".
func answered(resp *kmsg.FetchResponse) map[int32]bool {
	out := map[int32]bool{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[p.Partition] = len(p.RecordBatches) > 0
		}
	}
	return out
}

// Incremental fetch sessions as Kafka serves them (KIP-227), at a
// version by name and one by topic id: epoch 0 opens a session and
// answers every partition; a later epoch sends only what changed and is
// answered only what is new (records, a moved high watermark); forgotten
// partitions leave the session; a wrong epoch is INVALID_FETCH_SESSION_EPOCH,
// an unknown session FETCH_SESSION_ID_NOT_FOUND; epoch -1 closes it.
func TestFetchSessions(t *testing.T) {
	for _, v := range []int16{12, 13} {
		_, m, addr := testBroker(t, Options{})
		tps := make([]*tablet.Tablet, 3)
		for p := range int32(3) {
			tb, err := m.Create(checkpoint.TopicPartition{Topic: "s", Partition: p}, nil)
			require.NoError(t, err)
			tps[p] = tb
		}
		tid, _ := m.TopicID("s")
		produce := func(p int) {
			_, err := tps[p].AppendRecords([]record.Record{{Value: []byte("x")}}, record.None, tablet.AppendOptions{})
			require.NoError(t, err)
		}
		produce(0)
		c := dialRaw(t, addr)
		do := func(f *kmsg.FetchRequest) *kmsg.FetchResponse {
			resp := kmsg.NewPtrFetchResponse()
			c.do(f, v, resp)
			return resp
		}

		first := do(sessionFetch(0, 0, "s", tid, map[int32]int64{0: 0, 1: 0, 2: 0}))
		require.Zero(t, first.ErrorCode)
		id := first.SessionID
		require.NotZero(t, id, "v%d: a session", v)
		require.Equal(t, map[int32]bool{0: true, 1: false, 2: false}, answered(first), "every partition, the first time")

		next := do(sessionFetch(id, 1, "s", tid, map[int32]int64{0: 1}))
		require.Zero(t, next.ErrorCode)
		require.Equal(t, id, next.SessionID)
		require.Empty(t, answered(next), "nothing new")

		produce(2)
		next = do(sessionFetch(id, 2, "s", tid, nil))
		require.Equal(t, map[int32]bool{2: true}, answered(next), "partition 2's record, from the offset the session keeps")

		stale := do(sessionFetch(id, 2, "s", tid, nil))
		require.Equal(t, kerr.InvalidFetchSessionEpoch.Code, stale.ErrorCode)
		require.Empty(t, stale.Topics)
		missing := do(sessionFetch(id+1, 1, "s", tid, nil))
		require.Equal(t, kerr.FetchSessionIDNotFound.Code, missing.ErrorCode)

		next = do(sessionFetch(id, 3, "s", tid, map[int32]int64{2: 1}, 1))
		require.Empty(t, answered(next))
		produce(1)
		produce(2)
		next = do(sessionFetch(id, 4, "s", tid, nil))
		require.Equal(t, map[int32]bool{2: true}, answered(next), "partition 1 was forgotten")

		closing := do(sessionFetch(id, -1, "s", tid, map[int32]int64{0: 0}))
		require.Zero(t, closing.ErrorCode)
		require.Zero(t, closing.SessionID, "a full fetch without a session")
		require.Equal(t, map[int32]bool{0: true}, answered(closing))
		gone := do(sessionFetch(id, 5, "s", tid, nil))
		require.Equal(t, kerr.FetchSessionIDNotFound.Code, gone.ErrorCode, "closed")
	}
}

// max.incremental.fetch.session.cache.slots bounds the sessions: a new
// one takes the slot of a smaller one (its next fetch finds no session),
// and one no larger than every session kept gets none (full fetches).
func TestFetchSessionSlots(t *testing.T) {
	b, m, addr := testBroker(t, Options{FetchSessionSlots: 1})
	for p := range int32(2) {
		_, err := m.Create(checkpoint.TopicPartition{Topic: "s", Partition: p}, nil)
		require.NoError(t, err)
	}
	c := dialRaw(t, addr)
	do := func(f *kmsg.FetchRequest) *kmsg.FetchResponse {
		resp := kmsg.NewPtrFetchResponse()
		c.do(f, 12, resp)
		return resp
	}
	small := do(sessionFetch(0, 0, "s", [16]byte{}, map[int32]int64{0: 0})).SessionID
	require.NotZero(t, small)
	large := do(sessionFetch(0, 0, "s", [16]byte{}, map[int32]int64{0: 0, 1: 0})).SessionID
	require.NotZero(t, large)
	require.Equal(t, kerr.FetchSessionIDNotFound.Code, do(sessionFetch(small, 1, "s", [16]byte{}, nil)).ErrorCode, "evicted")
	require.Zero(t, do(sessionFetch(large, 1, "s", [16]byte{}, nil)).ErrorCode)
	none := do(sessionFetch(0, 0, "s", [16]byte{}, map[int32]int64{1: 0}))
	require.Zero(t, none.SessionID, "no room: full fetches")
	require.Equal(t, 1, b.sessions.count())
}
