package broker

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/tablet"
)

// The budget grants first come first served: a waiter that does not fit
// holds back the smaller ones behind it; a release wakes what fits; a
// cancelled wait leaves nothing reserved.
func TestMemBudget(t *testing.T) {
	m := &memBudget{limit: 100}
	ctx := context.Background()
	require.True(t, m.acquire(ctx, 60, func() { t.Error("60 of 100 fits at once") }))
	big, waiting := make(chan bool), make(chan struct{})
	go func() { big <- m.acquire(ctx, 50, func() { close(waiting) }) }()
	<-waiting
	cctx, cancel := context.WithCancel(ctx)
	small := make(chan bool)
	go func() { small <- m.acquire(cctx, 10, cancel) }()
	require.False(t, <-small, "10 bytes would fit, but the 50 came first; its wait was cancelled")
	require.Equal(t, int64(60), m.inUse())
	m.release(60)
	require.True(t, <-big)
	require.Equal(t, int64(50), m.inUse())
	m.release(50)
	require.Zero(t, m.inUse())

	var none *memBudget
	require.True(t, none.acquire(ctx, 1<<40, nil), "no budget, no bound")
}

// The request memory of every connection together is bounded: a frame
// announced as 1 MiB and sent in part holds the memory of what arrived
// (growing four-fold), and at the bound another connection's reading
// waits — logged, counted — until memory comes back; a frame never takes
// its announced size before its bytes come.
func TestRequestMemoryIsBounded(t *testing.T) {
	type change struct {
		used    int64
		waiting int
	}
	changes := make(chan change, 1<<16) // (a frame's reads are a handful of changes)
	b, _, addr := testBrokerWith(t, Options{MaxRequestBytes: 1 << 20, QueuedMaxRequestBytes: 1 << 20}, func(_ *tablet.Manager, b *Broker) {
		b.reqMem.observe = func(used int64, waiting int) { changes <- change{used, waiting} }
	})
	until := func(want change) {
		t.Helper()
		for c := range changes {
			if c == want {
				return
			}
			require.LessOrEqual(t, c.used, int64(1<<20), "never beyond the bound")
		}
	}
	slow, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	_, err = slow.Write(binary.BigEndian.AppendUint32(nil, 1<<20))
	require.NoError(t, err)
	until(change{firstFrameChunk, 0})
	_, err = slow.Write(make([]byte, firstFrameChunk+1))
	require.NoError(t, err)
	until(change{4 * firstFrameChunk, 0})
	_, err = slow.Write(make([]byte, 3*firstFrameChunk))
	require.NoError(t, err)
	until(change{1 << 20, 0})

	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	answered := make(chan struct{})
	go func() {
		defer close(answered)
		resp := kmsg.NewPtrApiVersionsResponse()
		exchange(t, c, kmsg.NewPtrApiVersionsRequest(), 0, resp)
	}()
	until(change{1 << 20, 1}) // the ApiVersions frame waits
	require.Equal(t, 1.0, testutil.ToFloat64(b.metrics.memoryWaits))
	slow.Close() // its frame is dropped, its memory given back
	<-answered
	until(change{0, 0}) // every frame's memory given back once answered
}

// A fetch gets at most fetch.max.bytes of records whatever its max_bytes
// asks (2^31-1 here), the first batch whole even when larger.
func TestFetchMaxBytesCapsTheResponse(t *testing.T) {
	var o Options
	o.ensureDefaults()
	require.Equal(t, int32(55<<20), o.FetchMaxBytes, "Kafka's default")

	_, m, addr := testBroker(t, Options{FetchMaxBytes: 64 << 10})
	tb, err := m.Create(checkpoint.TopicPartition{Topic: "t"}, nil)
	require.NoError(t, err)
	for range 20 {
		_, err := tb.AppendRecords([]record.Record{{Value: bytes.Repeat([]byte("x"), 16<<10)}}, record.None, tablet.AppendOptions{})
		require.NoError(t, err)
	}
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	fetch := func(offset int64) []byte {
		req := kmsg.NewPtrFetchRequest()
		req.MaxBytes = 1<<31 - 1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.FetchOffset, rp.PartitionMaxBytes = offset, 1<<31-1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := kmsg.NewPtrFetchResponse()
		exchange(t, c, req, 12, resp)
		require.Zero(t, resp.Topics[0].Partitions[0].ErrorCode)
		return resp.Topics[0].Partitions[0].RecordBatches
	}
	// wholeBatches counts the batches the bytes hold, failing on a cut one.
	wholeBatches := func(data []byte) int {
		n := 0
		for len(data) > 0 {
			require.GreaterOrEqual(t, len(data), 12)
			size := 12 + int(binary.BigEndian.Uint32(data[8:12]))
			require.LessOrEqual(t, size, len(data), "a whole batch")
			data, n = data[size:], n+1
		}
		return n
	}
	got := fetch(0)
	require.LessOrEqual(t, len(got), 64<<10)
	require.Equal(t, 3, wholeBatches(got), "as many whole batches of 16 KiB as fit")
	_, err = tb.AppendRecords([]record.Record{{Value: bytes.Repeat([]byte("y"), 100<<10)}}, record.None, tablet.AppendOptions{})
	require.NoError(t, err)
	got = fetch(20)
	require.Greater(t, len(got), 100<<10, "the first batch whole though larger than fetch.max.bytes")
	require.Equal(t, 1, wholeBatches(got))
}
