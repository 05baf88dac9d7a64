package broker

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/recovery"
	"github.com/seglog/seglog/tablet"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// testBroker serves a new data directory on a loopback port.
func testBroker(t *testing.T, opts Options) (*Broker, *tablet.Manager, string) {
	t.Helper()
	return testBrokerWith(t, opts, nil)
}

// testBrokerWith is testBroker with setup run on the data directory and
// the broker before it serves.
func testBrokerWith(t *testing.T, opts Options, setup func(*tablet.Manager, *Broker)) (*Broker, *tablet.Manager, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	m, err := tablet.OpenManager(nil, dir, tablet.ManagerOptions{Tablet: tablet.Options{Logger: quiet}})
	require.NoError(t, err)
	opts.Logger = quiet
	b, err := compose(m, opts)
	require.NoError(t, err)
	if setup != nil {
		setup(m, b)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	serveTest(t, b, m, ln)
	return b, m, ln.Addr().String()
}

// serveTest serves ln until the test ends, then closes the broker and its
// manager; Serve's result is on the returned channel once it ends.
func serveTest(t *testing.T, b *Broker, m *tablet.Manager, ln net.Listener) <-chan error {
	served := make(chan error, 1)
	go func() { served <- b.Serve(ln) }()
	t.Cleanup(func() {
		require.NoError(t, b.Close())
		require.ErrorIs(t, <-served, ErrClosed)
		require.NoError(t, m.Close())
	})
	return served
}

// franz-go produces 100,000 records idempotently to an auto-created topic of three
// partitions and consumes every record back, in order per partition, with
// its offset — through the broker, with the protocol of a real client.
func TestFranzGoProduceConsume(t *testing.T) {
	_, m, addr := testBroker(t, Options{NumPartitions: 3, DurableAcks: true})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.AllowAutoTopicCreation(), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	require.NoError(t, err)
	defer p.Close()
	const n = 100_000
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: "events", Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "value %d", i)})
	}
	require.NoError(t, p.ProduceSync(ctx, recs...).FirstErr())
	require.Len(t, m.Tablets(), 3, "auto-created with num.partitions")

	c, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("events"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond))
	require.NoError(t, err)
	defer c.Close()
	got := map[int32][]*kgo.Record{}
	seen := 0
	for seen < n {
		fs := c.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "consumed %d of %d", seen, n)
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("%s-%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			got[r.Partition] = append(got[r.Partition], r)
			seen++
		})
	}
	require.Equal(t, n, seen)
	var values []string
	for p, rs := range got {
		for i, r := range rs {
			require.Equal(t, int64(i), r.Offset, "partition %d offsets from 0, contiguous", p)
			values = append(values, string(r.Value))
		}
	}
	sort.Strings(values)
	want := make([]string, n)
	for i := range want {
		want[i] = fmt.Sprintf("value %d", i)
	}
	sort.Strings(want)
	require.Equal(t, want, values, "every record exactly once")
	for _, tab := range m.Tablets() {
		require.Len(t, tab.Producers(), 1, "one idempotent producer per partition")
	}
}

// A consumer waiting at the end of the log gets a record appended after
// its fetch began, without polling: the long poll wakes on the append.
func TestFetchLongPollWakesOnAppend(t *testing.T) {
	_, m, addr := testBroker(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.AllowAutoTopicCreation())
	require.NoError(t, err)
	defer p.Close()
	require.NoError(t, p.ProduceSync(ctx, &kgo.Record{Topic: "tail", Value: []byte("first")}).FirstErr())
	c, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("tail"), kgo.FetchMaxWait(30*time.Second))
	require.NoError(t, err)
	defer c.Close()
	fs := c.PollFetches(ctx)
	require.Equal(t, 1, fs.NumRecords())
	done := make(chan *kgo.Record, 1)
	go func() {
		fs := c.PollFetches(ctx)
		var got *kgo.Record
		fs.EachRecord(func(r *kgo.Record) { got = r })
		done <- got
	}()
	tab, _ := m.Get(tablet.TopicPartition{Topic: "tail"})
	require.NotNil(t, tab)
	require.NoError(t, p.ProduceSync(ctx, &kgo.Record{Topic: "tail", Value: []byte("second")}).FirstErr())
	r := <-done
	require.NotNil(t, r, "the long poll returned the record (30 s MaxWait, so not by its timer)")
	require.Equal(t, "second", string(r.Value))
	require.Equal(t, int64(1), r.Offset)
}

// Requests the broker does not serve, and bad frames, close only their
// connection; ApiVersions at an unknown version answers v0 with
// UNSUPPORTED_VERSION and the list.
func TestBadRequestsCloseTheConnectionOnly(t *testing.T) {
	b, _, addr := testBroker(t, Options{MaxRequestBytes: 1 << 20, NoAutoCreate: true})
	send := func(frame []byte) ([]byte, error) {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write(frame); err != nil {
			return nil, err
		}
		var size [4]byte
		if _, err := io.ReadFull(c, size[:]); err != nil {
			return nil, err
		}
		body := make([]byte, int(size[0])<<24|int(size[1])<<16|int(size[2])<<8|int(size[3]))
		_, err = io.ReadFull(c, body)
		return body, err
	}
	frame := func(payload []byte) []byte {
		n := len(payload)
		return append([]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}, payload...)
	}
	_, err := send([]byte{0x7f, 0, 0, 0}) // 2 GiB
	require.ErrorIs(t, err, io.EOF, "a frame over socket.request.max.bytes closes the connection")
	_, err = send(frame([]byte{1, 2, 3}))
	require.ErrorIs(t, err, io.EOF, "a header that does not parse closes it")
	_, err = send(frame([]byte{0, 99, 0, 0, 0, 0, 0, 1, 0, 0})) // API key 99
	require.ErrorIs(t, err, io.EOF)

	// ApiVersions v99: the v0 answer.
	body, err := send(frame([]byte{0, 18, 0, 99, 0, 0, 0, 7, 0xff, 0xff}))
	require.NoError(t, err)
	require.Equal(t, []byte{0, 0, 0, 7}, body[:4], "the correlation id")
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(0)
	require.NoError(t, resp.ReadFrom(body[4:]))
	require.Equal(t, kerr.UnsupportedVersion.Code, resp.ErrorCode)
	require.NotEmpty(t, resp.ApiKeys)
	require.Equal(t, 3.0, testutil.ToFloat64(b.metrics.closedBad), "the collectors count each bad connection")
	require.Equal(t, 1.0, testutil.ToFloat64(b.metrics.errors.WithLabelValues("ApiVersions", "UNSUPPORTED_VERSION")))

	// The broker still serves others.
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, cl.Ping(ctx))

	// The collectors count the errors a response carries.
	md := kmsg.NewPtrMetadataRequest()
	md.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("missing")}, {Topic: kmsg.StringPtr("absent")}}
	_, err = md.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Equal(t, 2.0, testutil.ToFloat64(b.metrics.errors.WithLabelValues("Metadata", "UNKNOWN_TOPIC_OR_PARTITION")))
	require.GreaterOrEqual(t, testutil.ToFloat64(b.metrics.requests.WithLabelValues("Metadata", "13")), 1.0)
	require.Positive(t, testutil.ToFloat64(b.metrics.bytesIn))
	require.Positive(t, testutil.ToFloat64(b.metrics.bytesOut))
	require.GreaterOrEqual(t, testutil.ToFloat64(b.metrics.open), 1.0, "the client's connection")
}

// Producer ids are never handed out twice, across restarts: a block is
// reserved durably before its first id is.
func TestProducerIDsAreDurable(t *testing.T) {
	path := filepath.Join(t.TempDir(), checkpoint.ProducerIDBlockFile)
	p, err := openProducerIDs(nil, path)
	require.NoError(t, err)
	seen := map[int64]bool{}
	for range 1500 {
		id, err := p.allocate()
		require.NoError(t, err)
		require.False(t, seen[id])
		seen[id] = true
	}
	q, err := openProducerIDs(nil, path) // a restart: the rest of the block is skipped
	require.NoError(t, err)
	id, err := q.allocate()
	require.NoError(t, err)
	require.False(t, seen[id])
	require.Equal(t, int64(2*producerIDBlock), id)
	require.NoError(t, os.WriteFile(path, []byte("garbage"), 0o644))
	_, err = openProducerIDs(nil, path)
	require.ErrorContains(t, err, "not a producer id")
}

// A directory a broker served passes seglog verify after the close.
func TestServedDirectoryVerifies(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	m, err := tablet.OpenManager(nil, dir, tablet.ManagerOptions{Tablet: tablet.Options{Logger: quiet}})
	require.NoError(t, err)
	b, err := compose(m, Options{Logger: quiet})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = b.Serve(ln) }()
	cl, err := kgo.NewClient(kgo.SeedBrokers(ln.Addr().String()), kgo.AllowAutoTopicCreation())
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range 100 {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "v", Value: fmt.Appendf(nil, "%d", i)}).FirstErr())
	}
	cl.Close()
	require.NoError(t, b.Close())
	require.NoError(t, m.Close())
	r, err := recovery.Verify(nil, dir, recovery.VerifyOptions{})
	require.NoError(t, err)
	require.True(t, r.OK(), "%+v", r)
}

// franz-go with every codec, a 1 MiB record, and a batch over
// max.message.bytes refused with MESSAGE_TOO_LARGE.
func TestFranzGoCodecsAndLimits(t *testing.T) {
	_, _, addr := testBroker(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	codecs := map[string]kgo.CompressionCodec{"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(),
		"snappy": kgo.SnappyCompression(), "lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression()}
	for name, codec := range codecs {
		p, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.AllowAutoTopicCreation(), kgo.ProducerBatchCompression(codec))
		require.NoError(t, err)
		for i := range 50 {
			p.Produce(ctx, &kgo.Record{Topic: "codec-" + name, Value: fmt.Appendf(nil, "%s record %d %s", name, i, strings.Repeat("z", 200))}, nil)
		}
		require.NoError(t, p.Flush(ctx), name)
		p.Close()
		c, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("codec-"+name), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchMaxWait(100*time.Millisecond))
		require.NoError(t, err)
		n := 0
		for n < 50 {
			fs := c.PollFetches(ctx)
			require.NoError(t, ctx.Err(), name)
			fs.EachRecord(func(r *kgo.Record) {
				require.Equal(t, fmt.Sprintf("%s record %d %s", name, r.Offset, strings.Repeat("z", 200)), string(r.Value))
				n++
			})
		}
		c.Close()
	}

	big := make([]byte, 1<<20) // random: a codec must not shrink it under the limit
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range big {
		big[i] = byte(rng.Uint32())
	}
	p, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.AllowAutoTopicCreation(), kgo.ProducerBatchMaxBytes(4<<20))
	require.NoError(t, err)
	defer p.Close()
	require.NoError(t, p.ProduceSync(ctx, &kgo.Record{Topic: "big", Value: big[:1<<20-200]}).FirstErr(), "a 1 MiB record")
	err = p.ProduceSync(ctx, &kgo.Record{Topic: "big", Value: append(big, big...)}).FirstErr()
	require.ErrorIs(t, err, kerr.MessageTooLarge, "a batch over max.message.bytes")
	c, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("big"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(8<<20))
	require.NoError(t, err)
	defer c.Close()
	fs := c.PollFetches(ctx)
	require.NoError(t, ctx.Err())
	recs := fs.Records()
	require.Len(t, recs, 1, "the refused batch wrote nothing")
	require.Equal(t, big[:1<<20-200], recs[0].Value)
}

// A connection beyond max.connections is closed at once; the others are
// served.
func TestMaxConnections(t *testing.T) {
	_, _, addr := testBroker(t, Options{MaxConnections: 1})
	first, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer first.Close()
	// The first is registered once the broker answers on it.
	_, err = first.Write([]byte{0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 1, 0xff, 0xff})
	require.NoError(t, err)
	var size [4]byte
	_, err = io.ReadFull(first, size[:])
	require.NoError(t, err)
	second, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer second.Close()
	_ = second.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, err = second.Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF, "the second connection is closed")
}

// max.connections.per.ip: the third connection from 127.0.0.1 is closed at
// once; an override for the address lets it have more.
func TestMaxConnectionsPerIP(t *testing.T) {
	answered := func(addr string) bool {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		_, err = c.Write([]byte{0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 1, 0xff, 0xff}) // ApiVersions v0
		require.NoError(t, err)
		var size [4]byte
		_, err = io.ReadFull(c, size[:])
		return err == nil
	}
	_, _, addr := testBroker(t, Options{MaxConnectionsPerIP: 2})
	require.True(t, answered(addr))
	require.True(t, answered(addr))
	require.False(t, answered(addr), "a third from the same address")
	_, _, addr = testBroker(t, Options{MaxConnectionsPerIP: 2, MaxConnectionsPerIPOverrides: map[string]int{"127.0.0.1": 3}})
	for range 3 {
		require.True(t, answered(addr))
	}
	require.False(t, answered(addr), "past the override")
}
