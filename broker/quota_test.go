package broker

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/broker/auth"
	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/record"
)

// TestRate: Kafka's windowed rate — a burst is measured over at least ten
// windows, old samples expire — and its throttle, (rate − quota) / quota ×
// the window, capped.
func TestRate(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var r rate
	v, w := r.record(t0, 20480)
	require.Equal(t, 2048.0, v, "20 KiB at once is 2 KiB/s over the minimum ten seconds")
	require.Equal(t, 10*time.Second, w)
	require.Equal(t, 10*time.Second, throttleFor(v, 1024, w), "twice the quota: a whole window")
	require.Zero(t, throttleFor(v, 4096, w))
	v, w = r.record(t0.Add(10500*time.Millisecond), 0)
	require.InDelta(t, 20480/10.5, v, 1e-9, "after ten and a half seconds")
	require.Equal(t, 10500*time.Millisecond, w)
	v, _ = r.measure(t0.Add(12 * time.Second))
	require.Zero(t, v, "the burst's sample has expired")
	require.Equal(t, quotaSamples*quotaWindow, throttleFor(1e9, 1, time.Minute), "capped at the whole window")

	// Idle rates go once there are many: the map of per-address rates
	// does not grow without bound.
	var s sensors
	for i := range maxIdleSensors {
		s.get("k", fmt.Sprint(i)).touched = time.Now().Add(-time.Minute)
	}
	busy := s.get("k", "busy")
	require.Len(t, s.m, 1, "the idle ones dropped")
	require.Same(t, busy, s.get("k", "busy"))
}

// TestQuotas: AlterClientQuotas sets alice's producer_byte_rate and
// request_percentage (durably, checked as Kafka checks them) and
// DescribeClientQuotas shows them; alice's produce over the rate is told
// its throttle and the connection's next request waits it out on the
// broker's clock; bob, without a quota, is not throttled; a fetch over
// consumer_byte_rate gets no records; an IP's connection_creation_rate
// refuses connections past it.
func TestQuotas(t *testing.T) {
	sb := serveSecure(t, Options{SASLMechanisms: []string{auth.PLAIN}}, TLSOptions{},
		map[string]string{"alice": "alice-secret", "bob": "bob-secret"})
	advance := fakeClock(sb.b, time.Unix(1_000_000, 0))
	adm, _, ctx := adminClient(t, sb.addrs[ProtocolPlaintext])
	alice := kadm.ClientQuotaEntityComponent{Type: auth.EntityUser, Name: kmsg.StringPtr("alice")}
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
		{Entity: kadm.ClientQuotaEntity{alice}, Ops: []kadm.AlterClientQuotaOp{{Key: auth.ProducerByteRate, Value: 1024},
			{Key: auth.ConsumerByteRate, Value: 1024}}},
		{Entity: kadm.ClientQuotaEntity{{Type: auth.EntityIP, Name: kmsg.StringPtr("127.0.0.1")}},
			Ops: []kadm.AlterClientQuotaOp{{Key: auth.ConnectionCreationRate, Value: 10}}},
		{Entity: kadm.ClientQuotaEntity{{Type: auth.EntityIP, Name: kmsg.StringPtr("x")}},
			Ops: []kadm.AlterClientQuotaOp{{Key: auth.ConnectionCreationRate, Value: 1}}},
		{Entity: kadm.ClientQuotaEntity{alice}, Ops: []kadm.AlterClientQuotaOp{{Key: auth.ConnectionCreationRate, Value: 1}}},
	})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	require.NoError(t, res[1].Err)
	require.ErrorIs(t, res[2].Err, kerr.InvalidRequest, "not an IP address")
	require.ErrorIs(t, res[3].Err, kerr.InvalidRequest, "a user has no connection rate")
	described, err := adm.DescribeClientQuotas(ctx, true, []kadm.DescribeClientQuotaComponent{{Type: auth.EntityUser,
		MatchName: kmsg.StringPtr("alice")}})
	require.NoError(t, err)
	require.Len(t, described, 1)
	require.Len(t, described[0].Values, 2)
	stored, err := auth.OpenQuotas(nil, filepath.Join(sb.b.m.Dir(), auth.QuotasFile))
	require.NoError(t, err)
	require.Len(t, stored.Entries(), 2, "the quotas are on disk")

	_, err = sb.b.m.Create(checkpoint.TopicPartition{Topic: "q"}, nil)
	require.NoError(t, err)
	bl := record.NewBuilder(record.None)
	require.NoError(t, bl.Append(record.Record{Timestamp: time.Now().UnixMilli(), Value: make([]byte, 20000)}))
	batch, err := bl.Build()
	require.NoError(t, err)
	produce := func(c *rawConn) *kmsg.ProduceResponse {
		p := kmsg.NewPtrProduceRequest()
		p.Acks, p.TimeoutMillis = -1, 1000
		p.Topics = []kmsg.ProduceRequestTopic{{Topic: "q", Partitions: []kmsg.ProduceRequestTopicPartition{{Records: batch.Bytes()}}}}
		resp := kmsg.NewPtrProduceResponse()
		c.do(p, 9, resp)
		require.Zero(t, resp.Topics[0].Partitions[0].ErrorCode)
		return resp
	}
	login := func(user string) *rawConn {
		c := dialRaw(t, sb.addrs[ProtocolSASLPlaintext])
		require.Zero(t, handshake(c, 1, auth.PLAIN).ErrorCode)
		require.Zero(t, authenticate(c, 1, "\x00"+user+"\x00"+user+"-secret").ErrorCode)
		return c
	}
	a := login("alice")
	size := float64(len(batch.Bytes()))
	want := throttleFor(size/10, 1024, 10*time.Second)
	require.Positive(t, want)
	require.Equal(t, int32(want.Milliseconds()), produce(a).ThrottleMillis, "alice is over her producer_byte_rate")
	require.Zero(t, produce(login("bob")).ThrottleMillis, "bob has no quota")
	// The connection is muted until the broker's clock passes the
	// throttle (TestMute checks the mute itself); moved past it, the
	// connection goes on at once.
	advance(want)
	metadataOK(a)

	f := kmsg.NewPtrFetchRequest()
	f.MaxWaitMillis, f.MaxBytes, f.SessionEpoch = 0, 1<<20, -1
	f.Topics = []kmsg.FetchRequestTopic{{Topic: "q", Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 0, PartitionMaxBytes: 1 << 20}}}}
	fetch := func(c *rawConn) *kmsg.FetchResponse {
		resp := kmsg.NewPtrFetchResponse()
		c.do(f, 11, resp)
		return resp
	}
	first := fetch(a)
	require.NotEmpty(t, first.Topics[0].Partitions[0].RecordBatches, "under the quota: records")
	require.Positive(t, first.ThrottleMillis, "and now over it")
	// Another connection of alice's is not muted, but her rate is hers:
	// still over it.
	second := fetch(login("alice"))
	require.Positive(t, second.ThrottleMillis, "still over the rate")
	require.Empty(t, second.Topics, "a fetch over consumer_byte_rate gets no records")

	// request_percentage: bob's requests may take a millionth of a
	// percent of a thread; any request goes over.
	res, err = adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: kadm.ClientQuotaEntity{{Type: auth.EntityUser,
		Name: kmsg.StringPtr("bob")}}, Ops: []kadm.AlterClientQuotaOp{{Key: auth.RequestPercentage, Value: 1e-6}}}})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	md := kmsg.NewPtrMetadataResponse()
	login("bob").do(kmsg.NewPtrMetadataRequest(), 12, md)
	require.Positive(t, md.ThrottleMillis, "over request_percentage")
	require.Positive(t, testutil.ToFloat64(sb.b.metrics.throttled.WithLabelValues(auth.RequestPercentage)))

	// 10 connections a second from 127.0.0.1, over at least ten seconds:
	// the broker's clock stands still, so after about a hundred the next
	// is refused (closed at once, nothing answered).
	accepted := 0
	for ; accepted < 200; accepted++ {
		c, err := net.Dial("tcp", sb.addrs[ProtocolPlaintext])
		require.NoError(t, err)
		_ = c.SetDeadline(time.Now().Add(time.Minute))
		req := kmsg.NewPtrApiVersionsRequest()
		f := frameOf(req, 0)
		_, err = c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(f))), f...))
		var size [4]byte
		if err == nil {
			_, err = io.ReadFull(c, size[:])
		}
		c.Close()
		if err != nil {
			break
		}
	}
	require.Less(t, accepted, 101, "the rate was never enforced")
	require.Greater(t, accepted, 90, "refused too early")
	require.Equal(t, 1.0, testutil.ToFloat64(sb.b.metrics.refusedRate))
}

// TestMute: a request over its quota mutes its connection until now +
// the throttle, on the broker's clock; the next request waits until then
// (none once the clock has passed it) and unmutes it.
func TestMute(t *testing.T) {
	b, _, _ := testBroker(t, Options{})
	t0 := time.Unix(1_000_000, 0)
	advance := fakeClock(b, t0)
	_, err := b.quotas.Alter([]auth.Entity{{auth.EntityUser: kmsg.StringPtr("alice")}},
		[][]auth.QuotaOp{{{Key: auth.ProducerByteRate, Value: 1024}}}, false)
	require.NoError(t, err)
	sess := &session{principal: "User:alice", authed: true}
	h := header{sess: sess, host: "/127.0.0.1"}
	req := kmsg.NewPtrProduceRequest()
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: "t", Partitions: []kmsg.ProduceRequestTopicPartition{{Records: make([]byte, 20480)}}}}
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	b.limits.recordQuotas(h, quotaProduce, req, resp, 0)
	require.Equal(t, int32(10_000), resp.ThrottleMillis, "2 KiB/s against 1 KiB/s over ten seconds: ten seconds")
	require.Equal(t, t0.Add(10*time.Second), sess.mutedUntil, "muted for the throttle")

	bob := &session{principal: "User:bob", authed: true}
	b.limits.recordQuotas(header{sess: bob, host: "/127.0.0.1"}, quotaProduce, req, req.ResponseKind(), 0)
	require.True(t, bob.mutedUntil.IsZero(), "no quota, no mute")

	advance(10 * time.Second)
	b.limits.waitMuted(sess) // returns at once: the clock is past it
	require.True(t, sess.mutedUntil.IsZero(), "unmuted")
}
