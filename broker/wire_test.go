package broker

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/tablet"
)

// exchange sends one request on a raw connection and decodes its answer.
func exchange(t *testing.T, c net.Conn, req kmsg.Request, version int16, resp kmsg.Response) {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(time.Minute))
	f := frameOf(req, version)
	_, err := c.Write(binary.BigEndian.AppendUint32(nil, uint32(len(f))))
	require.NoError(t, err)
	_, err = c.Write(f)
	require.NoError(t, err)
	var size [4]byte
	_, err = io.ReadFull(c, size[:])
	require.NoError(t, err)
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err = io.ReadFull(c, body)
	require.NoError(t, err)
	require.Equal(t, uint32(7), binary.BigEndian.Uint32(body), "the correlation id")
	body = body[4:]
	resp.SetVersion(version)
	if resp.IsFlexible() && resp.Key() != 18 {
		body = body[1:] // the response header's empty tagged fields (ApiVersions' header is always v0)
	}
	require.NoError(t, resp.ReadFrom(body))
}

// A fetch's records go from the segment files into the response — large
// ones with sendfile, small ones copied in — and decode to exactly the
// bytes the log holds, at a non-flexible (v4) and a flexible (v12)
// version, beside partitions with no records and errors.
func TestFetchSendsRecordsFromFiles(t *testing.T) {
	_, m, addr := testBroker(t, Options{})
	rng := rand.New(rand.NewPCG(1, 2))
	want := map[int32][]byte{}
	for p, n := range []int{0, 1, 3, 300} { // batches of 1 KiB records, per partition
		tp := checkpoint.TopicPartition{Topic: "big", Partition: int32(p)}
		tb, err := m.Create(tp, nil)
		require.NoError(t, err)
		for range n {
			v := make([]byte, 1024)
			for i := range v {
				v[i] = byte(rng.Uint32())
			}
			_, err := tb.AppendRecords([]record.Record{{Value: v}}, record.None, tablet.AppendOptions{})
			require.NoError(t, err)
		}
		res, err := tb.Read(0, tablet.ReadOptions{MaxBytes: 1 << 30})
		require.NoError(t, err)
		want[int32(p)], err = res.Records.AppendTo(nil)
		res.Close()
		require.NoError(t, err)
	}
	require.Greater(t, len(want[3]), smallRecords, "one partition goes by sendfile")
	require.Less(t, len(want[2]), smallRecords, "others are copied in")

	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	for _, version := range []int16{4, 11, 12} {
		req := kmsg.NewPtrFetchRequest()
		req.MaxBytes = 1 << 30
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = "big"
		for p := range int32(5) { // partition 4 does not exist
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.PartitionMaxBytes = p, 1<<30
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp := kmsg.NewPtrFetchResponse()
		exchange(t, c, req, version, resp)
		require.Len(t, resp.Topics, 1)
		got := resp.Topics[0].Partitions
		require.Len(t, got, 5)
		for p := range int32(4) {
			require.Zero(t, got[p].ErrorCode)
			require.True(t, bytes.Equal(want[p], got[p].RecordBatches), "v%d partition %d: %d bytes, want %d", version, p,
				len(got[p].RecordBatches), len(want[p]))
		}
		require.NotZero(t, got[4].ErrorCode, "the missing partition's error")
	}
}

// Requests sent back to back, without waiting, are answered in request
// order with their correlation ids — an acks=0 produce among them is not
// answered at all — and a malformed frame after them closes the
// connection only once the requests before it are answered.
func TestPipelinedRequestsAnswerInOrder(t *testing.T) {
	_, m, addr := testBroker(t, Options{})
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Minute))
	batch := func() []byte {
		bl := record.NewBuilder(record.None)
		require.NoError(t, bl.Append(record.Record{Timestamp: 1, Value: []byte("v")}))
		out, err := bl.Build()
		require.NoError(t, err)
		return out.Bytes()
	}
	produce := func(acks int16) kmsg.Request {
		p := kmsg.NewPtrProduceRequest()
		p.Acks, p.TimeoutMillis = acks, 1000
		p.Topics = []kmsg.ProduceRequestTopic{{Topic: "pipe", Partitions: []kmsg.ProduceRequestTopicPartition{{Records: batch()}}}}
		return p
	}
	meta := kmsg.NewPtrMetadataRequest()
	meta.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("pipe")}}
	type versioned struct {
		req     kmsg.Request
		version int16
	}
	reqs := []versioned{{kmsg.NewPtrApiVersionsRequest(), 3}, {meta, 12}}
	for range 20 {
		reqs = append(reqs, versioned{produce(1), 9}, versioned{produce(0), 9})
	}
	var out []byte
	formatter := kmsg.NewRequestFormatter(kmsg.FormatterClientID("pipe"))
	for i, r := range reqs {
		r.req.SetVersion(r.version)
		f := formatter.AppendRequest(nil, r.req, int32(i))
		out = append(out, f...) // AppendRequest includes the size
	}
	out = append(out, 0, 0, 0, 3, 1, 2, 3) // a frame with no header
	_, err = c.Write(out)
	require.NoError(t, err)

	var got []int32
	for {
		var size [4]byte
		if _, err := io.ReadFull(c, size[:]); err != nil {
			require.ErrorIs(t, err, io.EOF, "the bad frame closes the connection after the answers")
			break
		}
		body := make([]byte, binary.BigEndian.Uint32(size[:]))
		_, err := io.ReadFull(c, body)
		require.NoError(t, err)
		got = append(got, int32(binary.BigEndian.Uint32(body)))
	}
	want := []int32{0, 1}
	for i := 2; i < len(reqs); i += 2 {
		want = append(want, int32(i)) // the acks=1 produces; the acks=0 ones get no answer
	}
	require.Equal(t, want, got)
	tb, ok := m.Get(checkpoint.TopicPartition{Topic: "pipe"})
	require.True(t, ok)
	require.Equal(t, int64(40), tb.Offsets().LogEndOffset, "every produce appended, acks=0 too")
}

// ApiVersions v3 validates the client's software name and version as Kafka
// does (KIP-511): a bad one is INVALID_REQUEST without the list.
func TestApiVersionsValidatesClientSoftware(t *testing.T) {
	_, _, addr := testBroker(t, Options{})
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	for _, sw := range []struct {
		name, version string
		ok            bool
	}{{"kgo", "1.2.3", true}, {"confluent-kafka-python", "2.3.0-rdkafka-2.3.0", true}, {"", "1", false},
		{"bad name", "1", false}, {"x", "1.", false}, {"-x", "1", false}} {
		req := kmsg.NewPtrApiVersionsRequest()
		req.ClientSoftwareName, req.ClientSoftwareVersion = sw.name, sw.version
		resp := kmsg.NewPtrApiVersionsResponse()
		exchange(t, c, req, 3, resp)
		if sw.ok {
			require.Zero(t, resp.ErrorCode, "%+v", sw)
			require.NotEmpty(t, resp.ApiKeys)
		} else {
			require.Equal(t, kerr.InvalidRequest.Code, resp.ErrorCode, "%+v", sw)
			require.Empty(t, resp.ApiKeys)
		}
	}
}

// A batch with records Kafka refuses gets the partition's error and the
// index of each refused record (RecordErrors), and nothing is appended.
func TestProduceRecordErrors(t *testing.T) {
	b, m, addr := testBroker(t, Options{})
	cfg := tablet.DefaultConfig()
	cfg.TimestampBeforeMaxMs = 60_000 // a record more than a minute old is refused
	_, err := m.Create(checkpoint.TopicPartition{Topic: "ts"}, &cfg)
	require.NoError(t, err)
	now := time.Now().UnixMilli()
	bl := record.NewBuilder(record.None)
	for _, ts := range []int64{now, now - 3_600_000, now, now - 7_200_000} {
		require.NoError(t, bl.Append(record.Record{Timestamp: ts, Value: []byte("v")}))
	}
	batch, err := bl.Build()
	require.NoError(t, err)
	p := kmsg.NewPtrProduceRequest()
	p.Acks, p.TimeoutMillis = -1, 1000
	p.Topics = []kmsg.ProduceRequestTopic{{Topic: "ts", Partitions: []kmsg.ProduceRequestTopicPartition{{Records: batch.Bytes()}}}}
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	resp := kmsg.NewPtrProduceResponse()
	exchange(t, c, p, 9, resp)
	sp := resp.Topics[0].Partitions[0]
	require.Equal(t, kerr.InvalidTimestamp.Code, sp.ErrorCode)
	require.Len(t, sp.ErrorRecords, 2)
	require.Equal(t, int32(1), sp.ErrorRecords[0].RelativeOffset)
	require.Equal(t, int32(3), sp.ErrorRecords[1].RelativeOffset)
	require.Contains(t, *sp.ErrorRecords[0].ErrorMessage, "out of range")
	tb, _ := m.Get(checkpoint.TopicPartition{Topic: "ts"})
	require.Zero(t, tb.Offsets().LogEndOffset, "nothing appended")
	require.Equal(t, 1.0, testutil.ToFloat64(b.metrics.errors.WithLabelValues("Produce", "INVALID_TIMESTAMP")),
		"a partition's error is counted")
}

// A connection without a request for connections.max.idle.ms is closed;
// one whose long poll outlasts that is not (a request in flight is not
// idleness), and is answered.
func TestIdleConnectionsClose(t *testing.T) {
	b, m, addr := testBroker(t, Options{IdleTimeout: 50 * time.Millisecond})
	_, err := m.Create(checkpoint.TopicPartition{Topic: "idle"}, nil)
	require.NoError(t, err)
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Minute))
	_, err = c.Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF, "closed by the broker")
	require.Equal(t, 1.0, testutil.ToFloat64(b.metrics.closedIdle))

	busy, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer busy.Close()
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 300, 1, 1<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "idle"
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := kmsg.NewPtrFetchResponse()
	exchange(t, busy, req, 12, resp) // a 300 ms long poll on an empty partition, 6 idle timeouts long
	require.Zero(t, resp.Topics[0].Partitions[0].ErrorCode)
}

// Request frames come in size classes (powers of four from 64 KiB to
// 64 MiB), so that a pooled frame serves the next request of about the
// same size — a 9 MB produce's too — instead of a new one being allocated
// for each size.
func TestFramesRoundUp(t *testing.T) {
	for _, n := range []int{1, 1000, 4097, 1<<20 + 1, 9 << 20, maxPooledFrame} {
		b := getFrame(n)
		c := cap(*b)
		require.GreaterOrEqual(t, c, n)
		require.Zero(t, c&(c-1), "a power of two: %d for %d", c, n)
		require.GreaterOrEqual(t, c, minFrameClass)
		require.Less(t, c, 4*max(n, minFrameClass), "the class above %d", n)
		putFrame(b)
		// (A sync.Pool may drop what it is given — the race detector
		// makes it drop some at random — so a few tries.)
		var again *[]byte
		for range 100 {
			if again = pooledFrame(n); again != nil {
				break
			}
			putFrame(getFrame(n))
		}
		require.NotNil(t, again, "a frame of %d bytes is pooled", n)
		require.GreaterOrEqual(t, cap(*again), n)
		putFrame(again)
	}
	b := getFrame(maxPooledFrame + 1)
	require.Equal(t, maxPooledFrame+1, cap(*b), "larger frames are not pooled, nor rounded")
	putFrame(b)
	require.Nil(t, pooledFrame(maxPooledFrame+1))
}

// Produce v13 and Fetch v13+ name topics by id, as Kafka 4 does: a record
// produced by id is fetched back by id, each response naming the topic by
// its id; an unknown id (or none) is UNKNOWN_TOPIC_ID. ApiVersions lists
// Produce from v0 (librdkafka before 2.11.1 compresses only for a broker
// that lists it), but a Produce below v3 closes the connection, as Kafka 4
// refuses it.
func TestTopicIDsOnTheWire(t *testing.T) {
	_, m, addr := testBroker(t, Options{})
	_, err := m.Create(checkpoint.TopicPartition{Topic: "ids"}, nil)
	require.NoError(t, err)
	id, ok := m.TopicID("ids")
	require.True(t, ok)
	c := dialRaw(t, addr)

	vers := kmsg.NewPtrApiVersionsResponse()
	c.do(kmsg.NewPtrApiVersionsRequest(), 0, vers)
	ranges := map[int16][2]int16{}
	for _, k := range vers.ApiKeys {
		ranges[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	require.Equal(t, [2]int16{0, 13}, ranges[0], "Produce")
	require.Equal(t, [2]int16{4, 17}, ranges[1], "Fetch")

	bl := record.NewBuilder(record.None)
	require.NoError(t, bl.Append(record.Record{Value: []byte("by id")}))
	batch, err := bl.Build()
	require.NoError(t, err)
	unknown := [16]byte{1, 2, 3}
	p := kmsg.NewPtrProduceRequest()
	p.Acks, p.TimeoutMillis = -1, 1000
	for _, tid := range [][16]byte{id, unknown, {}} {
		p.Topics = append(p.Topics, kmsg.ProduceRequestTopic{TopicID: tid, Partitions: []kmsg.ProduceRequestTopicPartition{{Records: batch.Bytes()}}})
	}
	presp := kmsg.NewPtrProduceResponse()
	c.do(p, 13, presp)
	require.Len(t, presp.Topics, 3)
	require.Equal(t, id, checkpoint.TopicID(presp.Topics[0].TopicID))
	require.Zero(t, presp.Topics[0].Partitions[0].ErrorCode)
	require.Equal(t, kerr.UnknownTopicID.Code, presp.Topics[1].Partitions[0].ErrorCode)
	require.Equal(t, kerr.UnknownTopicID.Code, presp.Topics[2].Partitions[0].ErrorCode, "the zero id")

	for _, v := range []int16{13, 16, 17} {
		f := kmsg.NewPtrFetchRequest()
		f.MaxBytes, f.SessionEpoch = 1<<20, -1
		for _, tid := range [][16]byte{id, unknown} {
			f.Topics = append(f.Topics, kmsg.FetchRequestTopic{TopicID: tid, Partitions: []kmsg.FetchRequestTopicPartition{{PartitionMaxBytes: 1 << 20}}})
		}
		fresp := kmsg.NewPtrFetchResponse()
		c.do(f, v, fresp)
		require.Len(t, fresp.Topics, 2, "v%d", v)
		got := fresp.Topics[0]
		require.Equal(t, id, checkpoint.TopicID(got.TopicID), "v%d", v)
		require.Zero(t, got.Partitions[0].ErrorCode, "v%d", v)
		h, _, err := record.ParseHeader(got.Partitions[0].RecordBatches)
		require.NoError(t, err, "v%d", v)
		require.Equal(t, int64(0), h.BaseOffset)
		require.Equal(t, int32(1), h.NumRecords)
		require.Equal(t, kerr.UnknownTopicID.Code, fresp.Topics[1].Partitions[0].ErrorCode, "v%d", v)
	}

	old := kmsg.NewPtrProduceRequest()
	old.Acks, old.TimeoutMillis = -1, 1000
	old.Topics = []kmsg.ProduceRequestTopic{{Topic: "ids", Partitions: []kmsg.ProduceRequestTopicPartition{{Records: batch.Bytes()}}}}
	c.send(old, 2)
	c.closed("Produce v2 is listed, not served")
	tb, _ := m.Get(checkpoint.TopicPartition{Topic: "ids"})
	require.Equal(t, int64(1), tb.Offsets().LogEndOffset, "one record, by id; none by v2")
}

// Every served API at every served version is answered at the request's
// version, on its ordinary paths and its error paths — a default (empty)
// request to a plain broker, and the same from a principal denied
// everything (ACLs on, no rule) — and franz-go's kmsg decodes each answer
// at that version. (A JoinGroup to a broker that was not the group's
// coordinator was answered with a version 0 body: the cluster's side is
// server's TestClusterErrorAnswersAtTheirVersion.)
func TestEveryAnswerAtItsVersion(t *testing.T) {
	for _, authz := range []bool{false, true} {
		t.Run(fmt.Sprintf("authorizer=%v", authz), func(t *testing.T) {
			_, _, addr := testBroker(t, Options{Authorizer: authz})
			for _, a := range served() {
				if a.key == 36 { // (SaslAuthenticate only follows a handshake)
					continue
				}
				for v := a.min; v <= a.max; v++ {
					req := kmsg.RequestForKey(a.key)
					if d, ok := req.(interface{ Default() }); ok {
						d.Default()
					}
					switch r := req.(type) {
					case *kmsg.ProduceRequest:
						r.Acks, r.TimeoutMillis = -1, 1000
					case *kmsg.FetchRequest:
						r.MaxWaitMillis = 0
					}
					c := dialRaw(t, addr)
					resp := req.ResponseKind()
					t.Run(fmt.Sprintf("%s/v%d", kmsg.NameForKey(a.key), v), func(t *testing.T) {
						exchange(t, c.Conn, req, v, resp)
					})
					c.Close()
				}
			}
		})
	}
}
