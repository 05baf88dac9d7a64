package bench

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/broker"
	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/server"
	"github.com/seglog/seglog/tablet"
)

// serveTarget is one broker a serve workload drives over loopback: seglog
// on a data directory, the null broker (the protocol floor) or kfake (the
// peer, in memory).
type serveTarget struct {
	addr  string
	close func() error
	m     *tablet.Manager // seglog's, for its fsync counts
	proc  *procBroker     // the process serving, if not this one
}

const serveTopic = "bench"

// startSeglog serves a fresh data directory with the topic created.
func startSeglog(dir string, partitions int32, durable bool) (*serveTarget, error) {
	m, err := tablet.OpenManager(nil, dir, tablet.ManagerOptions{Tablet: tablet.Options{Logger: quiet}})
	if err != nil {
		return nil, err
	}
	for p := range partitions {
		cfg := m.DefaultConfig()
		cfg.DurableAcks = durable
		if _, err := m.Create(checkpoint.TopicPartition{Topic: serveTopic, Partition: p}, &cfg); err != nil {
			m.Close()
			return nil, err
		}
	}
	b, err := server.Compose(m, broker.Options{Logger: quiet})
	if err != nil {
		m.Close()
		return nil, err
	}
	t, err := serveOn(b, func() error { return m.Close() })
	if t != nil {
		t.m = m
	}
	return t, err
}

// serveOn serves a broker on a loopback port.
func serveOn(b *broker.Broker, after func() error) (*serveTarget, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- b.Serve(ln) }()
	return &serveTarget{addr: ln.Addr().String(), close: func() error {
		err := b.Close()
		<-done
		return errors.Join(err, after())
	}}, nil
}

func startNull(partitions int32) (*serveTarget, error) {
	return serveOn(broker.NewNull(map[string]int32{serveTopic: partitions}, broker.Options{Logger: quiet}),
		func() error { return nil })
}

func startKfake(partitions int32) (*serveTarget, error) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, serveTopic))
	if err != nil {
		return nil, err
	}
	return &serveTarget{addr: c.ListenAddrs()[0], close: func() error { c.Close(); return nil }}, nil
}

// randomValues are distinct random record values (snappy and friends
// inflate zero-filled ones), cycled through.
func randomValues(size int) [][]byte {
	rng := rand.New(rand.NewPCG(7, 8))
	out := make([][]byte, 1024)
	for i := range out {
		v := make([]byte, size)
		var word [8]byte
		for j := 0; j < size; j += 8 {
			binary.LittleEndian.PutUint64(word[:], rng.Uint64())
			copy(v[j:], word[:]) // (the last word cut at size)
		}
		out[i] = v
	}
	return out
}

// connected returns a franz-go client that has reached the broker (its
// connection set up outside the timing), a context for it, and what closes
// both.
func connected(addr string, opts ...kgo.Opt) (*kgo.Client, context.Context, func(), error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	done := func() { cancel(); cl.Close() }
	if err := cl.Ping(ctx); err != nil {
		done()
		return nil, nil, nil, err
	}
	return cl, ctx, done, nil
}

// produceAll produces n records (idempotent, acks=-1, no compression) and
// returns the throughput in MB/s of record values.
func produceAll(addr string, values [][]byte, n int, opts ...kgo.Opt) (float64, error) {
	cl, ctx, done, err := connected(addr, append([]kgo.Opt{kgo.DefaultProduceTopic(serveTopic),
		kgo.ProducerBatchCompression(kgo.NoCompression())}, opts...)...)
	if err != nil {
		return 0, err
	}
	defer done()
	runtime.GC() // what the run before left (kfake holds its records) is not collected during this one
	var mu sync.Mutex
	var failed error
	start := time.Now()
	for i := range n {
		cl.Produce(ctx, &kgo.Record{Value: values[i%len(values)]}, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				failed = cmp.Or(failed, err)
				mu.Unlock()
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return 0, err
	}
	took := time.Since(start)
	mu.Lock()
	defer mu.Unlock()
	if failed != nil {
		return 0, failed
	}
	return float64(n*len(values[0])) / took.Seconds() / 1e6, nil
}

// consumeAll consumes n records from the start and returns MB/s.
func consumeAll(addr string, n, size int, opts ...kgo.Opt) (float64, error) {
	cl, ctx, done, err := connected(addr, append([]kgo.Opt{kgo.ConsumeTopics(serveTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(50 << 20), kgo.FetchMaxPartitionBytes(8 << 20)}, opts...)...)
	if err != nil {
		return 0, err
	}
	defer done()
	runtime.GC()
	start := time.Now()
	got := 0
	for got < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return 0, fmt.Errorf("bench: consumed %d of %d: %w", got, n, err)
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = err })
		if ferr != nil {
			return 0, ferr
		}
		got += fs.NumRecords()
	}
	return float64(got*size) / time.Since(start).Seconds() / 1e6, nil
}

// runServe: seglog serve's produce and consume through franz-go over
// loopback, 1, 4, 16 and 1,000 partitions and 1, 10 and 100 clients,
// against the null broker (produce) and kfake (produce and consume), each
// a process of its own (see startTarget), one after another in every
// repetition, with each one's CPU seconds per GB and resident memory; the
// same with librdkafka's client (kcat); the latency of a durable acks=-1
// produce against a write + fdatasync of the same size; and the memory
// 1,000 idle connections hold.
func runServe(o Options) (*Result, error) {
	dir, err := scratch(o, "serve")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	size := o.RecordSize
	n := int(min(o.Bytes, 64<<20) / int64(size))
	bytes := int64(n * size)
	values := randomValues(size)
	var figs []Figure
	procs := o.Serve != nil
	run := 0
	// point runs kind with parts partitions once: produce (and consume,
	// unless nil), into the samples.
	point := func(kind string, parts int32, produce func(addr string) (float64, error), consume bool, p, c *serveSample) error {
		run++
		data := filepath.Join(dir, fmt.Sprintf("data-%d", run))
		t, err := startTarget(o, kind, data, parts)
		if err != nil {
			return err
		}
		mbps, cpu, err := t.run(bytes, func() (float64, error) { return produce(t.addr) })
		var cm, ccpu float64
		if err == nil && consume {
			cm, ccpu, err = t.run(bytes, func() (float64, error) { return consumeAll(t.addr, n, size) })
		}
		rss, rerr := t.rssBytes()
		if err := errors.Join(err, rerr, t.close(), os.RemoveAll(data)); err != nil {
			return fmt.Errorf("bench: %s, %d partitions: %w", kind, parts, err)
		}
		p.add(mbps, cpu, rss)
		if consume {
			c.add(cm, ccpu, rss)
		}
		return nil
	}
	franz := func(opts ...kgo.Opt) func(string) (float64, error) {
		return func(addr string) (float64, error) { return produceAll(addr, values, n, opts...) }
	}
	for _, parts := range []int32{1, 4, 16} {
		var ours, null, peer, oursC, peerC serveSample
		// A run is short (64 MiB at close to 1 GB/s): at least five
		// repetitions, alternating the brokers, for a median that holds
		// (but one for a check of the harness).
		reps := max(o.Repeat, 5)
		if o.Ops < 50_000 {
			reps = o.Repeat
		}
		for rep := range reps {
			o.Progress(fmt.Sprintf("serve: %d partitions", parts), int64(rep), int64(reps))
			if err := errors.Join(point("seglog", parts, franz(), true, &ours, &oursC),
				point("null", parts, franz(), false, &null, nil),
				point("kfake", parts, franz(), true, &peer, &peerC)); err != nil {
				return nil, err
			}
		}
		name := fmt.Sprintf("serve.produce.p%d", parts)
		f := figure(name, "MB/s", ours.mbps, "null broker", null.mbps)
		want := 0.8
		if parts == 16 {
			want = 0.9
		}
		figs = append(figs, f.target(fmt.Sprintf("≥ %g × null broker", want), f.Ratio >= want))
		f = figure(name+".kfake", "MB/s", ours.mbps, "kfake", peer.mbps)
		figs = append(figs, f.target("≥ 1.5 × kfake", f.Ratio >= 1.5))
		f = figure(fmt.Sprintf("serve.consume.p%d", parts), "MB/s", oursC.mbps, "kfake", peerC.mbps)
		figs = append(figs, f.target("≥ 2 × kfake", f.Ratio >= 2))
		if procs {
			figs = append(figs, figure(name+".cpu", "CPU-s/GB", ours.cpu, "kfake", peer.cpu),
				figure(fmt.Sprintf("serve.consume.p%d.cpu", parts), "CPU-s/GB", oursC.cpu, "kfake", peerC.cpu),
				figure(fmt.Sprintf("serve.rss.p%d", parts), "MiB", mib(ours.rss), "kfake", mib(peer.rss)))
		}
	}

	// Many partitions, small batches: records spread round robin over
	// 1,000 partitions (a batch of a few records each; 100 for a check of
	// the harness).
	manyParts := int32(1000)
	if o.Ops < 50_000 {
		manyParts = 100
	}
	var many, manyNull serveSample
	roundRobin := franz(kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	for rep := range o.Repeat {
		o.Progress(fmt.Sprintf("serve: %d partitions", manyParts), int64(rep), int64(o.Repeat))
		if err := errors.Join(point("seglog", manyParts, roundRobin, false, &many, nil),
			point("null", manyParts, roundRobin, false, &manyNull, nil)); err != nil {
			return nil, err
		}
	}
	f := figure(fmt.Sprintf("serve.produce.p%d", manyParts), "MB/s", many.mbps, "null broker", manyNull.mbps)
	figs = append(figs, f.target("≥ 0.8 × null broker", f.Ratio >= 0.8))
	if procs {
		figs = append(figs, figure(fmt.Sprintf("serve.produce.p%d.cpu", manyParts), "CPU-s/GB", many.cpu, "null broker", manyNull.cpu),
			figure(fmt.Sprintf("serve.rss.p%d", manyParts), "MiB", mib(many.rss), "null broker", mib(manyNull.rss)))
	}

	// Many clients: each its own connection and share of the records.
	for _, clients := range []int{10, 100} {
		var ours, null serveSample
		several := func(addr string) (float64, error) { return produceClients(addr, values, n, clients) }
		for rep := range o.Repeat {
			o.Progress(fmt.Sprintf("serve: %d clients", clients), int64(rep), int64(o.Repeat))
			if err := errors.Join(point("seglog", 16, several, false, &ours, nil),
				point("null", 16, several, false, &null, nil)); err != nil {
				return nil, err
			}
		}
		figs = append(figs, figure(fmt.Sprintf("serve.produce.p16.clients=%d", clients), "MB/s", ours.mbps, "null broker", null.mbps))
		if procs {
			figs = append(figs, figure(fmt.Sprintf("serve.rss.p16.clients=%d", clients), "MiB", mib(ours.rss), "null broker", mib(null.rss)))
		}
	}

	// librdkafka's client, the same brokers.
	clientsUsed := "franz-go"
	if kcat, err := exec.LookPath("kcat"); err == nil {
		clientsUsed += " and kcat (librdkafka)"
		file, err := kcatRecords(dir, n, size)
		if err != nil {
			return nil, err
		}
		produce := func(addr string) (float64, error) { return kcatProduce(kcat, addr, file, n, size) }
		var ours, null, peer serveSample
		for rep := range o.Repeat {
			o.Progress("serve: kcat", int64(rep), int64(o.Repeat))
			if err := errors.Join(point("seglog", 4, produce, false, &ours, nil), point("null", 4, produce, false, &null, nil),
				point("kfake", 4, produce, false, &peer, nil)); err != nil {
				return nil, err
			}
		}
		figs = append(figs, figure("serve.produce.p4.kcat", "MB/s", ours.mbps, "null broker", null.mbps),
			figure("serve.produce.p4.kcat.kfake", "MB/s", ours.mbps, "kfake", peer.mbps))
	}

	lat, fsyncs, err := durableProduceLatency(filepath.Join(dir, "durable"), values[0], min(o.Ops, 2000))
	if err != nil {
		return nil, err
	}
	// The p99s compared: the figure's value is the produce's p99.
	f = latency("serve.durable-produce-p99", lat, "", nil)
	f.Value, f.Baseline, f.BaselineValue = f.P99, "write + fdatasync of the batch, p99", percentile(sortedCopy(fsyncs), 99)
	f.Ratio = f.Value / f.BaselineValue
	figs = append(figs, f.target("≤ 3 × fsync p99", f.Ratio <= 3))

	perConn, err := idleConnectionBytes(filepath.Join(dir, "idle"), 1000)
	if err != nil {
		return nil, err
	}
	figs = append(figs, Figure{Name: "serve.idle-connection-bytes", Value: perConn, Min: perConn, Max: perConn, Unit: "B"})
	where := "in this process"
	if procs {
		where = "each a process of its own (CPU seconds and RSS from /proc)"
	}
	return &Result{Workload: "serve", Params: fmt.Sprintf("%s over loopback, %d records of %d B (random) per run, idempotent acks=-1; "+
		"seglog serve (page-cache acks), the null broker, kfake, %s; 1, 4, 16 and 1,000 partitions (round robin), 1, 10 and 100 clients; "+
		"%d durable produces; 1,000 idle connections", clientsUsed, n, size, where, len(lat)),
		Figures: figs, Samples: map[string][]float64{"durable produce": lat, "fdatasync": fsyncs}}, nil
}

func sortedCopy(xs []float64) []float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s
}

// durableProduceLatency times acks=-1 produces answered after their fsync
// (seglog.durable.acks), one at a time, alternating with a write of the
// same batch size + fdatasync on a file beside the data directory (µs).
func durableProduceLatency(dir string, value []byte, n int) ([]float64, []float64, error) {
	t, err := startSeglog(dir, 1, true)
	if err != nil {
		return nil, nil, err
	}
	defer t.close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(t.addr), kgo.DefaultProduceTopic(serveTopic),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		return nil, nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	f, err := os.Create(filepath.Join(dir, "fsync-baseline"))
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	chunk := make([]byte, len(value)+record100Overhead)
	copy(chunk, value)
	var lat, base []float64
	for i := range n + 10 {
		start := time.Now()
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
			return nil, nil, err
		}
		mid := time.Now()
		if _, err := f.WriteAt(chunk, int64(i*len(chunk))); err != nil {
			return nil, nil, err
		}
		if err := f.Sync(); err != nil {
			return nil, nil, err
		}
		if i >= 10 { // the first ones open the connections
			lat = append(lat, float64(mid.Sub(start).Nanoseconds())/1e3)
			base = append(base, float64(time.Since(mid).Nanoseconds())/1e3)
		}
	}
	return lat, base, nil
}

// serveSample is a point's repetitions: MB/s, the server's CPU seconds
// per GB, its resident bytes at the end.
type serveSample struct{ mbps, cpu, rss []float64 }

func (s *serveSample) add(mbps, cpu, rss float64) {
	s.mbps, s.cpu, s.rss = append(s.mbps, mbps), append(s.cpu, cpu), append(s.rss, rss)
}

func mib(bytes []float64) []float64 {
	out := make([]float64, len(bytes))
	for i, b := range bytes {
		out[i] = b / (1 << 20)
	}
	return out
}

// record100Overhead is what a batch of one record adds to its value.
const record100Overhead = 61 + 10

// idleConnectionBytes opens conns connections to a broker, each answered
// one ApiVersions, and returns the heap and stacks they hold per
// connection (both ends: the client's sockets are in this process too).
func idleConnectionBytes(dir string, conns int) (float64, error) {
	t, err := startSeglog(dir, 1, false)
	if err != nil {
		return 0, err
	}
	defer t.close()
	var before, after runtime.MemStats
	// Twice: the pools' victim caches (the frames of earlier workloads)
	// go only at the second collection.
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	var open []net.Conn
	defer func() {
		for _, c := range open {
			c.Close()
		}
	}()
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(0)
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("idle")).AppendRequest(nil, req, 1)
	resp := make([]byte, 64<<10)
	for range conns {
		c, err := net.Dial("tcp", t.addr)
		if err != nil {
			return 0, err
		}
		open = append(open, c)
		if _, err := c.Write(frame); err != nil {
			return 0, err
		}
		var sz [4]byte
		if _, err := io.ReadFull(c, sz[:]); err != nil {
			return 0, err
		}
		if _, err := io.ReadFull(c, resp[:binary.BigEndian.Uint32(sz[:])]); err != nil {
			return 0, err
		}
	}
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	held := float64(after.HeapInuse+after.StackInuse) - float64(before.HeapInuse+before.StackInuse)
	return held / float64(conns), nil
}
