package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// NATS JetStream at R3 is the cluster workload's peer for latency at a
// fixed rate: three nats-server processes (Options.NATSServer, built once
// per machine by make bench) clustered on loopback, a stream of three
// subjects replicated three times in files, fsynced by neither per
// message (JetStream's default sync interval; seglog's brokers acknowledge
// from the page cache), under the same schedule as seglog's brokers
// (rate.go): each message's publish latency is its send to its PubAck,
// its end-to-end latency its receipt by an ordered consumer minus its send
// time (a header, as the seglog run's records carry it).

// natsCluster is three nats-server processes.
type natsCluster struct {
	cmds []*exec.Cmd
	urls []string
}

// freePorts returns n loopback ports free now.
func freePorts(n int) ([]int, error) {
	var out []int
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// startNATS runs three JetStream servers clustered on loopback, their
// stores under dir, and returns once a stream replicated three times can
// be made.
func startNATS(bin, dir string) (*natsCluster, error) {
	ports, err := freePorts(6)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	c := &natsCluster{}
	for i := range 3 {
		var routes []string
		for j := range 3 {
			if j != i {
				routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", ports[3+j]))
			}
		}
		cmd := exec.Command(bin, "-a", "127.0.0.1", "-p", strconv.Itoa(ports[i]), "-n", fmt.Sprintf("n%d", i+1), "-js",
			"-sd", filepath.Join(dir, fmt.Sprintf("n%d", i+1)), "--cluster_name", "bench",
			"--cluster", fmt.Sprintf("nats://127.0.0.1:%d", ports[3+i]), "--routes", strings.Join(routes, ","))
		log, err := os.Create(filepath.Join(dir, fmt.Sprintf("n%d.log", i+1)))
		if err != nil {
			c.close()
			return nil, err
		}
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			c.close()
			return nil, fmt.Errorf("bench: nats-server: %w", err)
		}
		c.cmds = append(c.cmds, cmd)
		c.urls = append(c.urls, fmt.Sprintf("nats://127.0.0.1:%d", ports[i]))
	}
	// Each one listening before it is used.
	deadline := time.Now().Add(30 * time.Second)
	for _, p := range ports[:3] {
		for {
			conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", p), time.Second)
			if err == nil {
				conn.Close()
				break
			}
			if time.Now().After(deadline) {
				c.close()
				return nil, fmt.Errorf("bench: nats-server on port %d: %w", p, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return c, nil
}

// close stops the servers (SIGTERM, then their end).
func (c *natsCluster) close() {
	for _, cmd := range c.cmds {
		_ = cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, cmd := range c.cmds {
		_ = cmd.Wait()
	}
}

// natsStream makes the stream (named and subjects name.*) at R3, tried
// again until the cluster's meta leader is elected.
func natsStream(ctx context.Context, js jetstream.JetStream, name string) error {
	var err error
	for wait := 50 * time.Millisecond; ctx.Err() == nil; wait = min(2*wait, time.Second) {
		attempt, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err = js.CreateStream(attempt, jetstream.StreamConfig{Name: name, Subjects: []string{name + ".*"}, Replicas: 3,
			Storage: jetstream.FileStorage})
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
		}
	}
	return fmt.Errorf("bench: a JetStream stream at R3: %w", errors.Join(err, ctx.Err()))
}

// natsSent is the header that carries a message's (and in rate.go a
// record's) send time, Unix ns.
const natsSent = "Bench-Sent"

// natsRateLatencies is rateLatencies against the NATS cluster: n
// messages of values at rate a second over three subjects of a new
// stream.
func natsRateLatencies(ctx context.Context, urls []string, stream string, values [][]byte, rate, n int) (*rateRun, error) {
	if rate <= 0 || n <= 0 {
		return nil, errors.New("bench: a fixed-rate run needs a rate and records")
	}
	pub, err := nats.Connect(strings.Join(urls, ","))
	if err != nil {
		return nil, err
	}
	defer pub.Close()
	sub, err := nats.Connect(strings.Join(urls, ","))
	if err != nil {
		return nil, err
	}
	defer sub.Close()
	js, err := jetstream.New(pub)
	if err != nil {
		return nil, err
	}
	if err := natsStream(ctx, js, stream); err != nil {
		return nil, err
	}
	sjs, err := jetstream.New(sub)
	if err != nil {
		return nil, err
	}
	cons, err := sjs.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return nil, err
	}
	run := &rateRun{publish: make([]float64, n), e2e: make([]float64, 0, n)}
	var mu sync.Mutex
	consumed := make(chan struct{})
	ready := make(chan struct{}) // closed at the warm-up message's receipt
	cc, err := cons.Consume(func(m jetstream.Msg) {
		now := time.Now()
		sent, err := strconv.ParseInt(m.Headers().Get(natsSent), 10, 64)
		if err != nil { // (the warm-up message)
			select {
			case <-ready:
			default:
				close(ready)
			}
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if run.e2e = append(run.e2e, float64(now.Sub(time.Unix(0, sent)).Microseconds())); len(run.e2e) == n {
			close(consumed)
		}
	})
	if err != nil {
		return nil, err
	}
	defer cc.Stop()
	// A message first, consumed before the schedule starts: the clients'
	// connections and the consumer's start are not timed.
	if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: stream + ".0", Data: values[0], Header: nats.Header{"Warm-Up": {"1"}}}); err != nil {
		return nil, err
	}
	select {
	case <-ready:
	case <-ctx.Done():
		return nil, fmt.Errorf("bench: the NATS consumer's start: %w", ctx.Err())
	}
	var wg sync.WaitGroup
	var failed error
	var published error
	onSchedule(rate, n, func(i int) {
		if published != nil {
			return
		}
		sent := time.Now()
		msg := &nats.Msg{Subject: fmt.Sprintf("%s.%d", stream, i%3), Data: values[i%len(values)],
			Header: nats.Header{natsSent: {strconv.FormatInt(sent.UnixNano(), 10)}}}
		f, err := js.PublishMsgAsync(msg)
		if err != nil {
			published = fmt.Errorf("bench: publishing to NATS: %w", err)
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-f.Ok():
				run.publish[i] = float64(time.Since(sent).Microseconds())
			case err := <-f.Err():
				mu.Lock()
				failed = errors.Join(failed, err)
				mu.Unlock()
			case <-ctx.Done():
			}
		}()
	})
	wg.Wait()
	if published != nil {
		return nil, published
	}
	if failed != nil {
		return nil, fmt.Errorf("bench: publishing to NATS at %d/s: %w", rate, failed)
	}
	select {
	case <-consumed:
	case <-ctx.Done():
		return nil, fmt.Errorf("bench: consuming from NATS: %w", ctx.Err())
	}
	return run, nil
}
