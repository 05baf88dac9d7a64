package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The cluster workload's second part runs the brokers as processes of
// their own (seglog serve, through Options.Serve), over the same etcd
// member: what a crash is (a SIGKILL: no controlled shutdown, no lease
// revoked, the lease left to expire), acks=all latency at a fixed rate
// (2,000 records of 1 KiB a second to 3 partitions at replication factor
// 3, publish and end-to-end: rate.go), and what 10,000 partitions cost
// (each broker holds a replica of every one; three processes keep their
// descriptors and mappings apart, as three machines would).

const procsPrefix = "/seglog-bench-procs/"

// manyPartitions is the partition count of the many-partitions figures.
const manyPartitions = 10000

// procBroker is one broker process.
type procBroker struct {
	cmd  *exec.Cmd
	addr string
	done chan error
}

// procCluster is brokers in processes of their own.
type procCluster struct {
	o       Options
	dir     string
	etcd    string
	brokers map[int32]*procBroker
}

// start runs broker id and returns once it serves.
func (c *procCluster) start(id int32) error {
	cmd := c.o.Serve("serve", "--data-dir", filepath.Join(c.dir, fmt.Sprint(id)),
		"--config", "listeners=PLAINTEXT://127.0.0.1:0", "--config", fmt.Sprintf("node.id=%d", id),
		"--config", "seglog.etcd.endpoints="+c.etcd, "--config", "seglog.etcd.prefix="+procsPrefix,
		"--config", "broker.session.timeout.ms=2000", "--config", "broker.heartbeat.interval.ms=200",
		"--config", "default.replication.factor=3", "--config", "min.insync.replicas=2",
		"--config", "log.level=warn")
	b, err := startServing(cmd)
	if err != nil {
		return fmt.Errorf("bench: broker %d: %w", id, err)
	}
	c.brokers[id] = b
	return nil
}

// startServing runs cmd, a server that says on its stdout where it serves
// ("serving the Kafka protocol on ADDR", as seglog serve does), and
// returns once it serves.
func startServing(cmd *exec.Cmd) (*procBroker, error) {
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	lines := bufio.NewScanner(out)
	b := &procBroker{cmd: cmd, done: make(chan error, 1)}
	for lines.Scan() {
		if rest, ok := strings.CutPrefix(lines.Text(), "serving the Kafka protocol on "); ok {
			b.addr = strings.Fields(rest)[0]
			break
		}
	}
	if b.addr == "" {
		_ = cmd.Process.Kill()
		return nil, fmt.Errorf("it did not serve: %v %s", cmd.Wait(), stderr.String())
	}
	go func() {
		for lines.Scan() { // (drained: the server never blocks on its stdout)
		}
		b.done <- cmd.Wait()
	}()
	return b, nil
}

// stop ends the process with SIGTERM (a clean shutdown), SIGKILL after a
// minute.
func (b *procBroker) stop() {
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.done:
	case <-time.After(time.Minute):
		_ = b.cmd.Process.Kill()
		<-b.done
	}
}

// kill SIGKILLs broker id and waits for its process to end.
func (c *procCluster) kill(id int32) {
	b := c.brokers[id]
	_ = b.cmd.Process.Signal(syscall.SIGKILL)
	<-b.done
	delete(c.brokers, id)
}

// close stops every broker (SIGTERM: a controlled shutdown).
func (c *procCluster) close() {
	for id, b := range c.brokers {
		b.stop()
		delete(c.brokers, id)
	}
}

func (c *procCluster) seeds() []string {
	var out []string
	for _, b := range c.brokers {
		out = append(out, b.addr)
	}
	return out
}

// metadata asks for the topics (nil: all) through cl.
func metadata(ctx context.Context, cl *kgo.Client, topics ...string) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range topics {
		req.Topics = append(req.Topics, kmsg.MetadataRequestTopic{Topic: kmsg.StringPtr(t)})
	}
	return req.RequestWith(ctx, cl)
}

// await asks for metadata until cond holds of it, for up to a minute.
func await(ctx context.Context, cl *kgo.Client, what string, cond func(*kmsg.MetadataResponse) bool, topics ...string) error {
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := metadata(ctx, cl, topics...)
		if err == nil && cond(resp) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bench: waited a minute for %s (%v)", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// fullyReplicated holds when every partition of the topics asked has
// every replica in its ISR.
func fullyReplicated(brokers int) func(*kmsg.MetadataResponse) bool {
	return func(r *kmsg.MetadataResponse) bool {
		if len(r.Brokers) < brokers {
			return false
		}
		for _, t := range r.Topics {
			if t.ErrorCode != 0 || len(t.Partitions) == 0 {
				return false
			}
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 || p.Leader < 0 || len(p.ISR) != len(p.Replicas) {
					return false
				}
			}
		}
		return true
	}
}

// createTopic creates a topic and waits until it is fully replicated.
func (c *procCluster) createTopic(ctx context.Context, cl *kgo.Client, name string, partitions int32) error {
	adm := kadm.NewClient(cl)
	adm.SetTimeoutMillis(int32((5 * time.Minute).Milliseconds())) // (10,000 partitions take a while)
	r, err := adm.CreateTopic(ctx, partitions, 3, nil, name)
	if err == nil {
		err = r.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) { // (a retry of a request that did create it)
		return fmt.Errorf("bench: creating %s: %w", name, err)
	}
	return await(ctx, cl, name+" fully replicated", fullyReplicated(3), name)
}

// procResults are the figures of the process cluster.
type procResults struct {
	failover              float64 // ms from the SIGKILL to the first acknowledgement after it
	metaFew, metaMany     []float64
	produceFew, produceBy []float64 // MB/s to 3 partitions, before and with the many partitions
	spread                []float64 // MB/s over the many partitions
	create                float64   // s to create them, fully replicated
	// rated and ratedDefaults are the fixed-rate runs (rate.go): the
	// producer's linger at 0, and franz-go's defaults.
	rated, ratedDefaults *rateRun
	// nats is the same schedule against NATS JetStream at R3 (nil: not
	// run).
	nats *rateRun
}

// fixedRate is the fixed-rate runs' records a second (1 KiB each: 2 MB/s,
// a load every broker of this machine sustains with room), and
// fixedRateSeconds their length.
const (
	fixedRate        = 2000
	fixedRateSeconds = 10
)

// runProcCluster runs the process cluster's measurements, n records per
// produce run.
func runProcCluster(o Options, dir, etcd string, n int) (*procResults, error) {
	var r procResults
	if o.NATSServer != "" { // (first, on its own: seglog's brokers are not started yet)
		o.Progress(fmt.Sprintf("cluster: NATS JetStream R3 at %d records a second", fixedRate), 0, 1)
		nc, err := startNATS(o.NATSServer, filepath.Join(dir, "nats"))
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		r.nats, err = natsRateLatencies(ctx, nc.urls, "bench", randomValues(o.RecordSize), fixedRate, fixedRate*fixedRateSeconds)
		cancel()
		nc.close()
		if err != nil {
			return nil, err
		}
	}
	c := &procCluster{o: o, dir: dir, etcd: etcd, brokers: map[int32]*procBroker{}}
	defer c.close()
	for id := range int32(3) {
		if err := c.start(id + 1); err != nil {
			return nil, err
		}
	}
	cl, ctx, done, err := connected(c.seeds()[0], kgo.SeedBrokers(c.seeds()...), kgo.MetadataMinAge(50*time.Millisecond))
	if err != nil {
		return nil, err
	}
	defer done()
	// The fixed-rate runs first, on a cluster that has had no fault.
	o.Progress(fmt.Sprintf("cluster: acks=all at %d records a second", fixedRate), 0, 1)
	for _, run := range []struct {
		topic string
		into  **rateRun
		opts  []kgo.Opt
	}{{"rated", &r.rated, []kgo.Opt{kgo.ProducerLinger(0)}}, {"rated-defaults", &r.ratedDefaults, nil}} {
		if err := c.createTopic(ctx, cl, run.topic, 3); err != nil {
			return nil, err
		}
		if *run.into, err = rateLatencies(ctx, c.seeds(), run.topic, randomValues(o.RecordSize), fixedRate, fixedRate*fixedRateSeconds, run.opts...); err != nil {
			return nil, err
		}
	}
	o.Progress("cluster: a leader SIGKILLed", 0, 1)
	if r.failover, err = c.failoverAfterKill(ctx, cl); err != nil {
		return nil, err
	}
	if err := await(ctx, cl, "the killed broker back in the ISR", fullyReplicated(3), "kill"); err != nil {
		return nil, err
	}

	values := randomValues(o.RecordSize)
	if err := c.createTopic(ctx, cl, "few", 3); err != nil {
		return nil, err
	}
	measure := func(meta, few *[]float64, spread *[]float64) error {
		for range o.Repeat {
			ms, err := metadataLatencies(ctx, cl, 50)
			if err != nil {
				return err
			}
			*meta = append(*meta, ms...)
			mbs, err := produceAll(c.seeds()[0], values, n, kgo.DefaultProduceTopic("few"), kgo.SeedBrokers(c.seeds()...))
			if err != nil {
				return fmt.Errorf("bench: producing to few: %w", err)
			}
			*few = append(*few, mbs)
			if spread != nil {
				mbs, err := produceAll(c.seeds()[0], values, n, kgo.DefaultProduceTopic("many"), kgo.SeedBrokers(c.seeds()...))
				if err != nil {
					return fmt.Errorf("bench: producing to many: %w", err)
				}
				*spread = append(*spread, mbs)
			}
		}
		return nil
	}
	o.Progress("cluster: 3 partitions", 0, 1)
	if err := measure(&r.metaFew, &r.produceFew, nil); err != nil {
		return nil, err
	}
	o.Progress(fmt.Sprintf("cluster: creating %d partitions", manyPartitions), 0, 1)
	start := time.Now()
	if err := c.createTopic(ctx, cl, "many", manyPartitions); err != nil {
		return nil, err
	}
	r.create = time.Since(start).Seconds()
	o.Progress(fmt.Sprintf("cluster: %d partitions", manyPartitions), 0, 1)
	if err := measure(&r.metaMany, &r.produceBy, &r.spread); err != nil {
		return nil, err
	}
	return &r, nil
}

// metadataLatencies times n Metadata requests for every topic, in µs.
func metadataLatencies(ctx context.Context, cl *kgo.Client, n int) ([]float64, error) {
	var out []float64
	for range n {
		start := time.Now()
		if _, err := metadata(ctx, cl); err != nil {
			return nil, err
		}
		out = append(out, float64(time.Since(start).Microseconds()))
	}
	return out, nil
}

// failoverAfterKill SIGKILLs the leader of a replicated partition while
// a producer writes to it, and returns the longest time without an
// acknowledgement from the kill on (ms); the broker comes back
// afterwards.
func (c *procCluster) failoverAfterKill(ctx context.Context, admin *kgo.Client) (float64, error) {
	if err := c.createTopic(ctx, admin, "kill", 1); err != nil {
		return 0, err
	}
	cl, ctx, done, err := failoverClient(c.seeds())
	if err != nil {
		return 0, err
	}
	defer done()
	resp, err := metadata(ctx, admin, "kill")
	if err != nil {
		return 0, err
	}
	leader := resp.Topics[0].Partitions[0].Leader
	if c.brokers[leader] == nil {
		return 0, fmt.Errorf("bench: partition kill-0 is led by %d, not a broker of this run", leader)
	}
	stop := make(chan struct{})
	res := make(chan []time.Time, 1)
	go func() { a, _ := produceThrough(cl, ctx, "kill", []byte("failover"), stop); res <- a }()
	time.Sleep(500 * time.Millisecond) // (producing steadily before the kill)
	at := time.Now()
	c.kill(leader)
	err = await(ctx, admin, "another leader", func(r *kmsg.MetadataResponse) bool {
		l := r.Topics[0].Partitions[0].Leader
		return l >= 0 && l != leader
	}, "kill")
	if err == nil {
		time.Sleep(time.Second) // (producing through the new leader)
	}
	close(stop)
	acks := <-res
	if err == nil {
		err = c.start(leader)
	}
	if err != nil {
		return 0, err
	}
	i := sort.Search(len(acks), func(i int) bool { return acks[i].After(at) })
	if i == len(acks) {
		return 0, errors.New("bench: nothing acknowledged after the leader was killed")
	}
	// The first acknowledgements after the kill may be the dead leader's
	// answers already on their way; the longest gap from the kill on is
	// the outage.
	return longestGap(acks[i:], at), nil
}

func (r *procResults) figures() []Figure {
	one := func(name, unit string, v float64) Figure {
		return Figure{Name: name, Unit: unit, Value: v, Min: v, Max: v}
	}
	figs := []Figure{
		one("cluster.failover.sigkill", "ms", r.failover).target(
			"≤ broker.session.timeout.ms + 1 s (3,000 ms): the longest time without an acknowledgement from the SIGKILL on", r.failover <= 3000),
		one(fmt.Sprintf("cluster.create.%dk-partitions", manyPartitions/1000), "s", r.create),
		latency(fmt.Sprintf("cluster.metadata-latency.%dk-partitions", manyPartitions/1000), r.metaMany,
			"every topic's Metadata with 3 partitions in the cluster", r.metaFew),
		figure(fmt.Sprintf("cluster.produce.beside-%dk-partitions", manyPartitions/1000), "MB/s", r.produceBy,
			"the same 3-partition topic before the 10,000 partitions", r.produceFew),
		figure(fmt.Sprintf("cluster.produce.into-%dk-partitions", manyPartitions/1000), "MB/s", r.spread,
			"a 3-partition topic beside them", r.produceBy),
		latency("cluster.publish-latency.rate.client-defaults", r.ratedDefaults.publish, "the producer's linger at 0", r.rated.publish),
	}
	if r.nats == nil {
		return append(figs, latency("cluster.publish-latency.rate", r.rated.publish, "", nil),
			latency("cluster.e2e-latency.rate", r.rated.e2e, "the publish latency", r.rated.publish))
	}
	const nats = "NATS JetStream R3, the same schedule"
	return append(figs, latency("cluster.publish-latency.rate", r.rated.publish, nats, r.nats.publish),
		latency("cluster.e2e-latency.rate", r.rated.e2e, nats, r.nats.e2e),
		latency("cluster.publish-latency.rate.nats", r.nats.publish, "", nil),
		latency("cluster.e2e-latency.rate.nats", r.nats.e2e, "", nil))
}
