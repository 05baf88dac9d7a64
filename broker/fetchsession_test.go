package broker

import (
	"maps"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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
		for _, p := range slices.Sorted(maps.Keys(parts)) {
			rt.Partitions = append(rt.Partitions, kmsg.FetchRequestTopicPartition{Partition: p, FetchOffset: parts[p],
				PartitionMaxBytes: 1 << 20, CurrentLeaderEpoch: -1, LastFetchedEpoch: -1, LogStartOffset: -1})
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
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(b.Collector()))
	require.Equal(t, 1.0, gaugeValue(t, reg, "seglog_broker_fetch_sessions"), "the gauge of open sessions")

	_, m, addr = testBroker(t, Options{FetchSessionSlots: -1}) // none: every fetch a full one
	_, err := m.Create(checkpoint.TopicPartition{Topic: "s"}, nil)
	require.NoError(t, err)
	c = dialRaw(t, addr)
	require.Zero(t, do(sessionFetch(0, 0, "s", [16]byte{}, map[int32]int64{0: 0})).SessionID)
}

// A measurement, not a test (SEGLOG_MEASURE=1 runs it; the figures are in
// BENCHMARKS.md): a consumer of 1,000 partitions fetching while one
// partition a fetch gets a record, with full fetches and with a session:
// request and response bytes a fetch, and the process's CPU a fetch (the
// broker and the client, the same for both).
func TestMeasureFetchSessions(t *testing.T) {
	if os.Getenv("SEGLOG_MEASURE") == "" {
		t.Skip("a measurement, not a test: SEGLOG_MEASURE=1 runs it (its figures are in BENCHMARKS.md)")
	}
	const parts, fetches = 1000, 2000
	_, m, addr := testBroker(t, Options{})
	tbs := make([]*tablet.Tablet, parts)
	offsets := map[int32]int64{}
	for p := range int32(parts) {
		tb, err := m.Create(checkpoint.TopicPartition{Topic: "wide", Partition: p}, nil)
		require.NoError(t, err)
		tbs[p] = tb
		offsets[p] = 0
	}
	all := func() *kmsg.FetchRequest {
		f := sessionFetch(0, -1, "wide", [16]byte{}, nil)
		rt := kmsg.FetchRequestTopic{Topic: "wide"}
		for p := range int32(parts) {
			rt.Partitions = append(rt.Partitions, kmsg.FetchRequestTopicPartition{Partition: p, FetchOffset: offsets[p],
				PartitionMaxBytes: 1 << 20, CurrentLeaderEpoch: -1, LastFetchedEpoch: -1, LogStartOffset: -1})
		}
		f.Topics = []kmsg.FetchRequestTopic{rt}
		return f
	}
	cpu := func() time.Duration {
		var ru syscall.Rusage
		require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	run := func(session bool) (reqBytes, respBytes int, perFetch time.Duration) {
		c := dialRaw(t, addr)
		var id, epoch int32
		if session {
			resp := kmsg.NewPtrFetchResponse()
			f := all()
			f.SessionEpoch = 0
			c.do(f, 12, resp)
			id, epoch = resp.SessionID, 1
			require.NotZero(t, id)
		}
		moved := map[int32]int64{} // partitions whose offset the session must be told
		start := cpu()
		for i := range fetches {
			p := int32(i*7919) % parts
			_, err := tbs[p].AppendRecords([]record.Record{{Value: []byte("v")}}, record.None, tablet.AppendOptions{})
			require.NoError(t, err)
			var f *kmsg.FetchRequest
			if session {
				f = sessionFetch(id, epoch, "wide", [16]byte{}, moved)
				moved = map[int32]int64{}
				epoch++
			} else {
				f = all()
			}
			reqBytes += len(f.AppendTo(nil))
			resp := kmsg.NewPtrFetchResponse()
			c.do(f, 12, resp)
			respBytes += len(resp.AppendTo(nil))
			for _, rt := range resp.Topics {
				for _, rp := range rt.Partitions {
					if len(rp.RecordBatches) > 0 {
						offsets[rp.Partition] = rp.HighWatermark
						moved[rp.Partition] = rp.HighWatermark
					}
				}
			}
		}
		return reqBytes / fetches, respBytes / fetches, (cpu() - start) / fetches
	}
	fullReq, fullResp, fullCPU := run(false)
	for p := range int32(parts) {
		offsets[p] = tbs[p].Offsets().HighWatermark
	}
	sessReq, sessResp, sessCPU := run(true)
	t.Logf("1,000 partitions, one new record a fetch: full fetches %d B request, %d B response, %v CPU a fetch; "+
		"a session %d B request, %d B response, %v CPU a fetch (%.3fx the bytes, %.2fx the CPU)",
		fullReq, fullResp, fullCPU, sessReq, sessResp, sessCPU,
		float64(sessReq+sessResp)/float64(fullReq+fullResp), float64(sessCPU)/float64(fullCPU))
}

// gaugeValue is the value of the one gauge of a family the registry
// gathers.
func gaugeValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() == name {
			require.Len(t, f.GetMetric(), 1)
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
