package broker

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/broker/auth"
	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/record"
)

// TestTokenBucket: Kafka's controller mutation bucket — full at eleven
// seconds' worth, refilled at the quota, a strict take refused only once
// overdrawn, the throttle the time back to zero.
func TestTokenBucket(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var r rate
	ok, d := r.take(t0, 2, 20, true)
	require.True(t, ok)
	require.Zero(t, d, "2 of 22 left")
	ok, d = r.take(t0, 2, 5, true)
	require.True(t, ok, "not yet overdrawn: one request may go past zero")
	require.Equal(t, 1500*time.Millisecond, d, "3 below zero at 2 a second")
	ok, d = r.take(t0, 2, 1, true)
	require.False(t, ok)
	require.Equal(t, 1500*time.Millisecond, d)
	ok, _ = r.take(t0, 2, 1, false)
	require.True(t, ok, "a permissive take always draws")
	ok, d = r.take(t0.Add(2*time.Second), 2, 1, true)
	require.True(t, ok, "refilled to 0")
	require.Equal(t, 500*time.Millisecond, d)
	ok, _ = r.take(t0.Add(time.Hour), 2, 22, true)
	require.True(t, ok)
	ok, _ = r.take(t0.Add(time.Hour), 2, 1, true)
	require.True(t, ok, "the bucket holds at most 22")
	ok, _ = r.take(t0.Add(time.Hour), 2, 1, true)
	require.False(t, ok)
}

// metadataFor asks for topics by name, allowing auto-creation, and returns
// each one's error code.
func metadataFor(t *testing.T, c net.Conn, names []string) map[string]int16 {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = true
	for _, n := range names {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(n)
		req.Topics = append(req.Topics, rt)
	}
	resp := kmsg.NewPtrMetadataResponse()
	exchange(t, c, req, 9, resp)
	codes := map[string]int16{}
	for _, rt := range resp.Topics {
		codes[*rt.Topic] = rt.ErrorCode
	}
	return codes
}

func created(codes map[string]int16) int {
	n := 0
	for _, c := range codes {
		if c == 0 {
			n++
		}
	}
	return n
}

// One Metadata request naming thousands of new topics creates a few (the
// others are UNKNOWN_TOPIC_OR_PARTITION, which clients retry), and over
// many requests auto-creation makes no more partitions a second than its
// bound (with its burst): nothing past it is created, on disk or in
// memory. Produce's auto-creation draws from the same bound.
func TestAutoCreationIsBounded(t *testing.T) {
	b, m, addr := testBroker(t, Options{AutoCreateMaxRate: 10, AutoCreateMaxTopicsPerRequest: 5})
	advance := fakeClock(b, time.Unix(1_000_000, 0))
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	next := 0
	names := func(n int) []string {
		var out []string
		for range n {
			out = append(out, fmt.Sprintf("auto-%05d", next))
			next++
		}
		return out
	}

	codes := metadataFor(t, c, names(5000))
	require.Equal(t, 5, created(codes), "at most five topics a request")
	for _, code := range codes {
		require.Contains(t, []int16{0, kerr.UnknownTopicOrPartition.Code}, code)
	}
	total := 5
	for {
		n := created(metadataFor(t, c, names(5)))
		if n == 0 {
			break
		}
		total += n
	}
	require.Equal(t, 10*11+1, total, "the bucket's eleven seconds at 10 a second, and the take that overdrew it")
	advance(time.Second)
	total = 0
	for n := -1; n != 0; total += n {
		n = created(metadataFor(t, c, names(5)))
	}
	require.Equal(t, 10, total, "a second refills ten")

	// Produce's auto-creation is refused too: UNKNOWN_TOPIC_OR_PARTITION.
	bl := record.NewBuilder(record.None)
	require.NoError(t, bl.Append(record.Record{Timestamp: 1, Value: []byte("v")}))
	batch, err := bl.Build()
	require.NoError(t, err)
	preq := kmsg.NewPtrProduceRequest()
	preq.Acks, preq.TimeoutMillis = 1, 5000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "produced-new"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = batch.Bytes()
	pt.Partitions = append(pt.Partitions, pp)
	preq.Topics = append(preq.Topics, pt)
	presp := kmsg.NewPtrProduceResponse()
	exchange(t, c, preq, 7, presp)
	require.Equal(t, kerr.UnknownTopicOrPartition.Code, presp.Topics[0].Partitions[0].ErrorCode)

	require.Len(t, m.Tablets(), 111+10)
	dirs, err := os.ReadDir(m.Dir())
	require.NoError(t, err)
	parts := 0
	for _, d := range dirs {
		if _, suffix, err := checkpoint.ParseDirName(d.Name()); d.IsDir() && err == nil && suffix == "" {
			parts++
		}
	}
	require.Equal(t, 111+10, parts, "a directory for each partition made, and no other")
	require.Positive(t, testutil.ToFloat64(b.metrics.autoCreateRefused))
}

// controller_mutation_rate (KIP-599): CreateTopics v6+, CreatePartitions
// v3+ and DeleteTopics v5+ refuse a topic with THROTTLING_QUOTA_EXCEEDED
// once the client's bucket is overdrawn, tell the throttle, and create
// nothing for it; older versions, which do not know that error, are done
// and throttled.
func TestControllerMutationQuota(t *testing.T) {
	b, m, addr := testBroker(t, Options{})
	advance := fakeClock(b, time.Unix(1_000_000, 0))
	_, err := b.quotas.Alter([]auth.Entity{{auth.EntityClientID: kmsg.StringPtr("fuzz")}},
		[][]auth.QuotaOp{{{Key: auth.ControllerMutationRate, Value: 2}}}, false)
	require.NoError(t, err)
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	create := func(version int16, topics map[string]int32, order ...string) *kmsg.CreateTopicsResponse {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 5000
		for _, n := range order {
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = n, topics[n], 1
			req.Topics = append(req.Topics, rt)
		}
		resp := kmsg.NewPtrCreateTopicsResponse()
		exchange(t, c, req, version, resp)
		return resp
	}
	codes := func(resp *kmsg.CreateTopicsResponse) []int16 {
		var out []int16
		for _, rt := range resp.Topics {
			out = append(out, rt.ErrorCode)
		}
		return out
	}
	resp := create(7, map[string]int32{"a": 20, "b": 5, "c": 1}, "a", "b", "c")
	require.Equal(t, []int16{0, 0, kerr.ThrottlingQuotaExceeded.Code}, codes(resp), "b overdraws the bucket; c is refused")
	require.Equal(t, int32(1500), resp.ThrottleMillis)
	require.NotNil(t, resp.Topics[2].ErrorMessage)
	_, err = os.Stat(filepath.Join(m.Dir(), "c-0"))
	require.ErrorIs(t, err, os.ErrNotExist)

	advance(time.Minute) // the mute, and the bucket refilled to 22
	resp = create(7, map[string]int32{"d": 23}, "d")
	require.Equal(t, []int16{0}, codes(resp))
	resp = create(5, map[string]int32{"e": 1}, "e")
	require.Equal(t, []int16{0}, codes(resp), "v5 does not know the error: done, and throttled")
	require.Equal(t, int32(1000), resp.ThrottleMillis)

	advance(time.Second) // the bucket at 0 again: not overdrawn, so one more may go
	cp := kmsg.NewPtrCreatePartitionsRequest()
	cpt := kmsg.NewCreatePartitionsRequestTopic()
	cpt.Topic, cpt.Count = "e", 3
	cp.Topics = append(cp.Topics, cpt)
	cpt.Topic = "c-not-there"
	cp.Topics = append(cp.Topics, cpt)
	cpResp := kmsg.NewPtrCreatePartitionsResponse()
	exchange(t, c, cp, 3, cpResp)
	require.Equal(t, int16(0), cpResp.Topics[0].ErrorCode)
	require.Equal(t, int32(1000), cpResp.ThrottleMillis)

	dt := kmsg.NewPtrDeleteTopicsRequest()
	dt.TopicNames = []string{"a"}
	dtResp := kmsg.NewPtrDeleteTopicsResponse()
	exchange(t, c, dt, 5, dtResp)
	require.Equal(t, kerr.ThrottlingQuotaExceeded.Code, dtResp.Topics[0].ErrorCode)
	_, ok := m.Get(checkpoint.TopicPartition{Topic: "a", Partition: 0})
	require.True(t, ok, "a refused deletion deletes nothing")
	require.Equal(t, 3, len(partitionsOf(b, "e")))
	require.Positive(t, testutil.ToFloat64(b.metrics.throttled.WithLabelValues(auth.ControllerMutationRate)))
}
