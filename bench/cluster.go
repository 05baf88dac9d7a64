package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/seglog/seglog/cluster"
	"github.com/seglog/seglog/server"
)

// The cluster workload: three brokers in this process over an etcd member
// in this process, driven by franz-go over loopback. Replication's cost is
// measured as replication factor 3 against 1 on the same brokers (the same
// client, the same run); a leader's controlled shutdown as the longest
// gap between acknowledgements of a producer writing through it; a
// leader's loss as the time from the end of its lease to the first
// acknowledgement by the next leader.

const clusterPrefix = "/seglog-bench/"

// benchCluster is the brokers and their etcd.
type benchCluster struct {
	dir     string
	etcd    *embed.Etcd
	cli     *clientv3.Client
	servers map[int32]*server.Server
	stops   map[int32]func() error
	store   string // (tiering to it, stepped by the caller)
}

func freeLoopbackURL() (url.URL, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return url.URL{}, err
	}
	defer ln.Close()
	return url.URL{Scheme: "http", Host: ln.Addr().String()}, nil
}

func startBenchCluster(dir string, n int) (*benchCluster, error) {
	return startBenchClusterWith(dir, n, "")
}

// startBenchClusterWith starts n brokers; with store, each tiers to it
// (stepped by the caller: RunOnce).
func startBenchClusterWith(dir string, n int, store string) (*benchCluster, error) {
	client, err := freeLoopbackURL()
	if err != nil {
		return nil, err
	}
	peer, err := freeLoopbackURL()
	if err != nil {
		return nil, err
	}
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir = "bench", filepath.Join(dir, "etcd")
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = "bench=" + peer.String()
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.TickMs, cfg.ElectionMs = 50, 500
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, err
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(time.Minute):
		e.Close()
		return nil, errors.New("bench: etcd did not start in a minute")
	}
	c := &benchCluster{dir: dir, etcd: e, servers: map[int32]*server.Server{}, stops: map[int32]func() error{}, store: store}
	if c.cli, err = clientv3.New(clientv3.Config{Endpoints: []string{client.String()}, Logger: zap.NewNop()}); err != nil {
		c.close()
		return nil, err
	}
	for id := range int32(n) {
		if err := c.start(id + 1); err != nil {
			c.close()
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.servers[1].Member().Until(ctx, func(s *cluster.Snapshot) bool { return len(s.Brokers) == n }); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

// start runs broker id.
func (c *benchCluster) start(id int32) error {
	cfg := server.Config{DataDir: filepath.Join(c.dir, strconv.Itoa(int(id))), Logger: quiet,
		Listeners: []server.Listener{{Name: "PLAINTEXT", Address: "127.0.0.1:0"}},
		Cluster: &server.ClusterConfig{Endpoints: []string{c.etcd.Clients[0].Addr().String()}, Prefix: clusterPrefix,
			SessionTimeout: 2 * time.Second, HeartbeatInterval: 200 * time.Millisecond, ShutdownTimeout: 10 * time.Second}}
	cfg.Manager.NodeID = id
	cfg.Manager.Tablet.Logger = quiet
	if c.store != "" {
		cfg.Store, cfg.TierInterval = c.store, time.Hour
	}
	s, err := server.New(context.Background(), cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	c.servers[id] = s
	c.stops[id] = func() error { err := s.Close(); cancel(); return errors.Join(err, <-done) }
	return nil
}

func (c *benchCluster) stop(id int32) error {
	err := c.stops[id]()
	delete(c.servers, id)
	delete(c.stops, id)
	return err
}

func (c *benchCluster) close() {
	for id := range c.stops {
		_ = c.stop(id)
	}
	if c.cli != nil {
		c.cli.Close()
	}
	c.etcd.Close()
}

func (c *benchCluster) seeds() []string {
	var out []string
	for _, s := range c.servers {
		out = append(out, s.Listeners()[0].Addr.String())
	}
	return out
}

// anyMember is a live broker's membership.
func (c *benchCluster) anyMember() *cluster.Member {
	for _, s := range c.servers {
		return s.Member()
	}
	return nil
}

// createTopic creates a topic of partitions with rf replicas and waits
// until every broker has its replicas.
func (c *benchCluster) createTopic(name string, partitions, rf int) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m := c.anyMember()
	if _, err := m.CreateTopic(ctx, cluster.TopicSpec{Name: name, Partitions: partitions, ReplicationFactor: rf}); err != nil {
		return err
	}
	for _, s := range c.servers {
		if err := s.Replicas().Await(ctx, m.Snapshot().Revision); err != nil {
			return err
		}
	}
	return nil
}

// leaderOf is partition 0's leader of topic.
func (c *benchCluster) leaderOf(topic string) int32 {
	st, _ := c.anyMember().Snapshot().Partition(topic, 0)
	return st.Leader
}

func runCluster(o Options) (*Result, error) {
	dir, err := scratch(o, "cluster")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	c, err := startBenchCluster(dir, 3)
	if err != nil {
		return nil, err
	}
	defer c.close()
	for _, t := range []struct {
		name string
		rf   int
	}{{"rf1", 1}, {"rf3", 3}} {
		if err := c.createTopic(t.name, 3, t.rf); err != nil {
			return nil, err
		}
	}
	size := o.RecordSize
	n := max(int(o.Bytes/int64(size))/8, 1000) // (replication triples the writes: an eighth of a serve run)
	values := randomValues(size)
	var rf1, rf3 []float64
	for range o.Repeat { // alternating, repetition by repetition
		for _, t := range []struct {
			topic string
			out   *[]float64
		}{{"rf1", &rf1}, {"rf3", &rf3}} {
			mbs, err := produceAll(c.seeds()[0], values, n, kgo.DefaultProduceTopic(t.topic), kgo.SeedBrokers(c.seeds()...))
			if err != nil {
				return nil, fmt.Errorf("bench: producing to %s: %w", t.topic, err)
			}
			*t.out = append(*t.out, mbs)
		}
	}
	lat1, lat3, err := c.syncLatencies(values[0], 1000)
	if err != nil {
		return nil, err
	}
	stall, stallErrs, err := c.controlledShutdownStall(values[0])
	if err != nil {
		return nil, err
	}
	failover, err := c.failoverAfterLease(values[0])
	if err != nil {
		return nil, err
	}
	for id := range c.stops { // (the processes' run has the machine to itself)
		if err := c.stop(id); err != nil {
			return nil, err
		}
	}
	mv, err := moveTiered(o, filepath.Join(dir, "move"))
	if err != nil {
		return nil, err
	}
	params := fmt.Sprintf("3 brokers in one process over one etcd member; %d records of %d B per run to 3 partitions, acks=all; 1,000 one-at-a-time produces for latencies; session timeout 2 s", n, size)
	params += fmt.Sprintf("; a partition moved onto a fourth broker with %d MiB in a file:// store and %d MiB local, against one of the same bytes all local",
		mv.tiered>>20, mv.local>>20)
	var procFigs []Figure
	if o.Serve != nil {
		pn := max(n, 32768) // (a run long enough that the client's start does not weigh)
		r, err := runProcCluster(o, filepath.Join(dir, "procs"), "http://"+c.etcd.Clients[0].Addr().String(), pn)
		if err != nil {
			return nil, err
		}
		procFigs = r.figures()
		params += fmt.Sprintf("; then 3 seglog serve processes over it (a leader SIGKILLed; %d s of %d acks=all records a second to 3 partitions, the producer's linger at 0 and at franz-go's default; %d partitions at replication factor 3; %d records per produce run)",
			fixedRateSeconds, fixedRate, manyPartitions, pn)
	}
	met := stall <= 1000 && stallErrs == 0
	return &Result{Workload: "cluster",
		Params:  params,
		Samples: map[string][]float64{"rf3": lat3, "rf1": lat1},
		Figures: append([]Figure{
			figure("cluster.produce.rf3", "MB/s", rf3, "replication factor 1, the same brokers", rf1),
			latency("cluster.produce-latency.rf3", lat3, "replication factor 1", lat1),
			Figure{Name: "cluster.controlled-shutdown.stall", Unit: "ms", Value: stall, Min: stall, Max: stall}.target(
				fmt.Sprintf("≤ 1,000 ms and no client error (%d errors)", stallErrs), met),
			Figure{Name: "cluster.failover.after-lease", Unit: "ms", Value: failover, Min: failover, Max: failover}.target(
				"≤ 1,000 ms after the lease ends (a killed broker's lease ends broker.session.timeout.ms after its last renewal)", failover <= 1000),
			figure("cluster.move.tiered", "ms", []float64{mv.tieredMs}, "the same move of a partition of the same bytes all local", []float64{mv.wholeMs}),
			figure("cluster.move.tiered-copied", "MiB", []float64{float64(mv.tieredBytes) / (1 << 20)}, "the whole log copied (the partition all local)",
				[]float64{float64(mv.wholeBytes) / (1 << 20)}).target(fmt.Sprintf("≤ 2 × the local tail (%.1f MiB)", float64(mv.local)/(1<<20)),
				mv.tieredBytes <= 2*mv.local),
		}, procFigs...)}, nil
}

// syncLatencies times n one-at-a-time acks=all produces to rf1 and rf3
// (alternating), in µs.
func (c *benchCluster) syncLatencies(value []byte, n int) ([]float64, []float64, error) {
	cl, ctx, done, err := connected(c.seeds()[0], kgo.SeedBrokers(c.seeds()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return nil, nil, err
	}
	defer done()
	var lat1, lat3 []float64
	for i := range 2 * n {
		topic, out := "rf1", &lat1
		if i%2 == 1 {
			topic, out = "rf3", &lat3
		}
		start := time.Now()
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: value}).FirstErr(); err != nil {
			return nil, nil, err
		}
		*out = append(*out, float64(time.Since(start).Microseconds()))
	}
	return lat1, lat3, nil
}

// failoverClient is a client of the cluster that produces to the
// partitions it names and learns a new leader at once.
func failoverClient(seeds []string) (*kgo.Client, context.Context, func(), error) {
	return connected(seeds[0], kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.MetadataMinAge(50*time.Millisecond))
}

// produceThrough produces one record at a time to topic's partition 0
// until stop is closed, recording each acknowledgement's time and each
// error.
func produceThrough(cl *kgo.Client, ctx context.Context, topic string, value []byte, stop <-chan struct{}) (acks []time.Time, errs int) {
	for {
		select {
		case <-stop:
			return acks, errs
		default:
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: value}).FirstErr(); err != nil {
			errs++
			continue
		}
		acks = append(acks, time.Now())
	}
}

// longestGap is the longest time between consecutive acknowledgements
// from since on, in ms.
func longestGap(acks []time.Time, since time.Time) float64 {
	var gap time.Duration
	prev := since
	for _, a := range acks {
		if a.Before(since) {
			continue
		}
		gap = max(gap, a.Sub(prev))
		prev = a
	}
	return float64(gap.Microseconds()) / 1000
}

// controlledShutdownStall shuts down the leader of a replicated
// partition while a producer writes to it, and returns the longest gap
// between acknowledgements from the shutdown on (ms) and the producer's
// errors; the broker comes back afterwards.
func (c *benchCluster) controlledShutdownStall(value []byte) (float64, int, error) {
	if err := c.createTopic("shutdown", 1, 3); err != nil {
		return 0, 0, err
	}
	cl, ctx, done, err := failoverClient(c.seeds())
	if err != nil {
		return 0, 0, err
	}
	defer done()
	stop := make(chan struct{})
	type out struct {
		acks []time.Time
		errs int
	}
	res := make(chan out, 1)
	go func() { a, e := produceThrough(cl, ctx, "shutdown", value, stop); res <- out{a, e} }()
	time.Sleep(500 * time.Millisecond) // (producing steadily before the shutdown)
	leader := c.leaderOf("shutdown")
	at := time.Now()
	if err := c.stop(leader); err != nil {
		close(stop)
		<-res
		return 0, 0, err
	}
	time.Sleep(time.Second) // (producing through the new leader after it)
	close(stop)
	r := <-res
	if err := c.start(leader); err != nil {
		return 0, 0, err
	}
	return longestGap(r.acks, at), r.errs, nil
}

// failoverAfterLease ends the lease of a replicated partition's leader
// (as its expiry after a crash would) while a producer writes to it, and
// returns the time from then to the first acknowledgement by another
// leader (ms).
func (c *benchCluster) failoverAfterLease(value []byte) (float64, error) {
	if err := c.createTopic("failover", 1, 3); err != nil {
		return 0, err
	}
	cl, ctx, done, err := failoverClient(c.seeds())
	if err != nil {
		return 0, err
	}
	defer done()
	leader := c.leaderOf("failover")
	resp, err := c.cli.Get(ctx, clusterPrefix+"brokers/"+strconv.Itoa(int(leader)))
	if err != nil || len(resp.Kvs) == 0 {
		return 0, fmt.Errorf("bench: the leader's registration: %v", err)
	}
	stop := make(chan struct{})
	res := make(chan []time.Time, 1)
	go func() { a, _ := produceThrough(cl, ctx, "failover", value, stop); res <- a }()
	time.Sleep(500 * time.Millisecond) // (producing steadily before the loss)
	at := time.Now()
	if _, err := c.cli.Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
		close(stop)
		<-res
		return 0, err
	}
	if _, err := c.anyMember().Until(ctx, func(s *cluster.Snapshot) bool {
		st, _ := s.Partition("failover", 0)
		return st.Leader != leader && st.Leader >= 0
	}); err != nil {
		close(stop)
		<-res
		return 0, err
	}
	time.Sleep(time.Second) // (producing through the new leader)
	close(stop)
	acks := <-res
	i := sort.Search(len(acks), func(i int) bool { return acks[i].After(at) })
	if i == len(acks) {
		return 0, errors.New("bench: nothing acknowledged after the leader's lease ended")
	}
	// The first acknowledgement after the lease ended may still be the old
	// leader's answer in flight; the longest gap from then is the outage.
	return max(float64(acks[i].Sub(at).Microseconds())/1000, longestGap(acks[i:], at)), nil
}
