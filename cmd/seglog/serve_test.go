package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/config"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/tablet"
	"github.com/seglog/seglog/tiering"
	"github.com/seglog/seglog/vfs"
)

// startServe starts seglog serve with args in a child process, killed at
// the end of the test if it is still running, and returns its stdout lines.
func startServe(t *testing.T, args ...string) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	js, err := json.Marshal(append([]string{"serve"}, args...))
	require.NoError(t, err)
	cmd := childCmd("cli", "SEGLOG_CHILD_ARGS="+string(js))
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	reapAtCleanup(t, cmd)
	return cmd, bufio.NewScanner(out)
}

// servedAddr reads serve's next line, "serving the Kafka protocol on
// ADDR (…)", and returns ADDR.
func servedAddr(t *testing.T, cmd *exec.Cmd, lines *bufio.Scanner) string {
	t.Helper()
	require.True(t, lines.Scan(), "serve printed nothing: %s", cmd.Stderr)
	line := lines.Text()
	require.True(t, strings.HasPrefix(line, "serving the Kafka protocol on "), line)
	return strings.Fields(strings.TrimPrefix(line, "serving the Kafka protocol on "))[0]
}

// reapAtCleanup kills a child still running when the test ends.
func reapAtCleanup(t *testing.T, cmd *exec.Cmd) {
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
}

// seglog serve in a child process: franz-go produces and consumes through
// it; SIGTERM closes it cleanly, and the directory verifies.
func TestServeCommand(t *testing.T) {
	d := filepath.Join(t.TempDir(), "data")
	props := filepath.Join(t.TempDir(), "server.properties")
	require.NoError(t, os.WriteFile(props, []byte("# a Kafka server.properties\nlisteners=PLAINTEXT://127.0.0.1:9092\n"+
		"log.dirs="+d+"\nnum.partitions=2\nlog.segment.bytes=1048576\nzookeeper.connect=localhost:2181\n"), 0o644))
	cmd, lines := startServe(t, "--config-file", props, "--config", "listeners=PLAINTEXT://127.0.0.1:0",
		"--config", "seglog.durable.acks=true", "--metrics-addr", "127.0.0.1:0")
	require.True(t, lines.Scan(), "serve printed nothing: %s", cmd.Stderr)
	metrics := strings.Fields(strings.TrimPrefix(lines.Text(), "metrics on "))[0]
	require.True(t, strings.HasPrefix(metrics, "http://127.0.0.1:"), lines.Text())
	require.True(t, lines.Scan(), "serve printed nothing more: %s", cmd.Stderr)
	line := lines.Text()
	require.Contains(t, line, "serving the Kafka protocol on 127.0.0.1:")
	addr := strings.Fields(strings.TrimPrefix(line, "serving the Kafka protocol on "))[0]

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.AllowAutoTopicCreation(), kgo.ConsumeTopics("orders"),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	require.NoError(t, err)
	defer cl.Close()
	for i := range 500 {
		cl.Produce(ctx, &kgo.Record{Topic: "orders", Value: fmt.Appendf(nil, "order %d", i)}, nil)
	}
	require.NoError(t, cl.Flush(ctx))
	n := 0
	for n < 500 {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err())
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("%s-%d: %v", topic, p, err) })
		n += fs.NumRecords()
	}
	require.Equal(t, 500, n)
	cl.Close()
	resp, err := http.Get(metrics)
	require.NoError(t, err)
	page, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Contains(t, string(page), `seglog_append_records_total{partition="0",topic="orders"}`)
	require.Contains(t, string(page), `seglog_broker_requests_total{api="Produce",version="`, "the broker's own collectors")
	// (The produce was answered before the fetches began: its times are in;
	// the last fetch's may be observed just after the client has its answer.)
	for _, h := range []string{"request_duration", "request_queue", "request_handle", "response_send"} {
		require.Contains(t, string(page), `seglog_broker_`+h+`_seconds_bucket{api="Produce"`)
	}
	require.Regexp(t, `seglog_broker_topic_bytes_in_total\{topic="orders"\} [1-9]`, string(page), "record bytes in by topic")
	require.Regexp(t, `seglog_broker_topic_bytes_out_total\{topic="orders"\} [1-9]`, string(page), "record bytes out by topic")
	require.Contains(t, string(page), "\ngo_goroutines ", "the Go collector")
	require.Contains(t, string(page), "\nprocess_resident_memory_bytes ", "the process collector")
	resp, err = http.Get(strings.TrimSuffix(metrics, "/metrics") + "/debug/pprof/goroutine?debug=1")
	require.NoError(t, err)
	profile, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(profile), "goroutine profile: total", "pprof on the metrics listener")
	require.Contains(t, string(page), `seglog_groups{state="Stable"} 0`, "the group coordinator's collectors")
	require.Contains(t, string(page), `seglog_transactions_open 0`, "the transaction coordinator's")
	cfg, err := tablet.ReadConfig(nil, filepath.Join(d, "orders-0"))
	require.NoError(t, err)
	require.Equal(t, int64(1048576), cfg.SegmentBytes, "log.segment.bytes from the file is the topics' default")

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait(), "a clean exit on SIGTERM: %s", cmd.Stderr)
	stderr := cmd.Stderr.(*bytes.Buffer) // complete once Wait returns
	require.Contains(t, stderr.String(), "configs not used by seglog serve", "a Kafka config serve does not take is logged")
	require.Contains(t, stderr.String(), "zookeeper.connect")
	_, err = os.Stat(filepath.Join(d, checkpoint.CleanShutdownFile))
	require.NoError(t, err, "closed cleanly: the next start skips recovery")
	code, vout, errOut := runSeglog(t, "verify", "--data-dir", d)
	require.Zero(t, code, "%s%s", vout, errOut)
	code, cout, _ := runSeglog(t, "consume", "--data-dir", d, "--topic", "orders", "--partition", "1", "--format", "value")
	require.Zero(t, code)
	require.Positive(t, strings.Count(cout, "\n"), "both partitions got records")
}

// SIGTERM under load: while a producer is writing, seglog serve stops,
// answers what is in flight and closes the directory cleanly; every record
// it acknowledged is there after, and the directory verifies.
func TestServeSIGTERMUnderLoad(t *testing.T) {
	d := filepath.Join(t.TempDir(), "data")
	cmd, lines := startServe(t, "--data-dir", d, "--config", "listeners=PLAINTEXT://127.0.0.1:0")
	addr := servedAddr(t, cmd, lines)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.AllowAutoTopicCreation(), kgo.RecordRetries(0),
		kgo.RequestRetries(0), kgo.ProduceRequestTimeout(10*time.Second))
	require.NoError(t, err)
	defer cl.Close()
	acked := make(chan int64, 100000)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 50000; i++ {
			select {
			case <-stop:
				return
			default:
			}
			cl.Produce(ctx, &kgo.Record{Topic: "load", Value: fmt.Appendf(nil, "r%d", i)}, func(r *kgo.Record, err error) {
				if err == nil {
					acked <- r.Offset
				}
			})
		}
	}()
	var max int64 = -1
	for range 1000 { // some acknowledged before the signal
		if o := <-acked; o > max {
			max = o
		}
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait(), "a clean exit under load: %s", cmd.Stderr)
	close(stop)
	wg.Wait()
	cl.Close() // what is still buffered fails: the broker is gone
	n := 1000
	for len(acked) > 0 {
		if o := <-acked; o > max {
			max = o
		}
		n++
	}
	_, err = os.Stat(filepath.Join(d, checkpoint.CleanShutdownFile))
	require.NoError(t, err, "closed cleanly")
	code, vout, errOut := runSeglog(t, "verify", "--data-dir", d)
	require.Zero(t, code, "%s%s", vout, errOut)
	code, offs, _ := runSeglog(t, "offsets", "--data-dir", d, "--topic", "load")
	require.Zero(t, code)
	var o tablet.Offsets
	require.NoError(t, json.Unmarshal([]byte(offs), &o))
	require.Greater(t, o.LogEndOffset, max, "every acknowledged offset is in the log (%d acknowledged)", n)
}

// seglog serve --store runs the tiering service inside the broker: a topic
// created with remote.storage.enable has its sealed segments uploaded (the
// service logs each), the tablet is bound to the store, the tier's
// collectors are on /metrics, and a consumer from the start reads every
// record, those only in the store included.
func TestServeWithStore(t *testing.T) {
	d := filepath.Join(t.TempDir(), "data")
	storeDir := t.TempDir()
	js, err := json.Marshal([]string{"serve", "--data-dir", d, "--store", "file://" + storeDir, "--http-addr", "127.0.0.1:0",
		"--config", "listeners=PLAINTEXT://127.0.0.1:0", "--config", "remote.log.manager.task.interval.ms=20"})
	require.NoError(t, err)
	cmd := childCmd("cli", "SEGLOG_CHILD_ARGS="+string(js))
	cmd.Stderr = nil
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	errPipe, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	reapAtCleanup(t, cmd)
	lines := bufio.NewScanner(out)
	require.True(t, lines.Scan())
	metrics := strings.Fields(strings.TrimPrefix(lines.Text(), "metrics on "))[0]
	addr := servedAddr(t, cmd, lines)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("cold"), kgo.ConsumeTopics("cold"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	_, err = adm.CreateTopic(ctx, 1, 1, map[string]*string{"remote.storage.enable": kmsg.StringPtr("true"),
		"segment.bytes": kmsg.StringPtr("8192"), "local.retention.bytes": kmsg.StringPtr("0")}, "cold")
	require.NoError(t, err)
	const n = 400
	for i := range n { // one batch each: the 8 KiB segments roll
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "record %04d %0100d", i, i)}).FirstErr())
	}

	// The service logs each upload: wait for one (a blocking read, no sleep).
	logs := bufio.NewScanner(errPipe)
	for !strings.Contains(logs.Text(), "uploaded segment") {
		require.True(t, logs.Scan(), "serve's stderr ended before an upload")
	}
	var rest bytes.Buffer // the rest of stderr, for a failure's message
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		for logs.Scan() {
			rest.WriteString(logs.Text() + "\n")
		}
	}()
	got := 0
	for got < n {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "consumed %d of %d", got, n)
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("%s-%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			require.Equal(t, fmt.Sprintf("record %04d %0100d", got, got), string(r.Value))
			got++
		})
	}
	resp, err := http.Get(metrics)
	require.NoError(t, err)
	page, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Contains(t, string(page), "seglog_tier_uploaded_bytes_total", "the tier's collectors")
	cl.Close()
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	<-drained // stderr ends with the process
	require.NoError(t, cmd.Wait(), "%s", rest.String())
	u, ok, err := tiering.StoreURL(vfs.OS, filepath.Join(d, "cold-0"))
	require.NoError(t, err)
	require.True(t, ok, "the tablet is bound to the store")
	require.Equal(t, "file://"+storeDir, u)
	code, cout, errOut := runSeglog(t, "consume", "--data-dir", d, "--topic", "cold", "--format", "value")
	require.Zero(t, code, errOut)
	require.Equal(t, n, strings.Count(cout, "\n"), "every record, through the store for the tiered ones")
}

// A node.id other than the one the data directory holds is refused, as
// Kafka refuses it, before anything is served.
func TestServeRefusesAnotherNodeID(t *testing.T) {
	d := filepath.Join(t.TempDir(), "data")
	m, err := tablet.OpenManager(vfs.OS, d, tablet.ManagerOptions{NodeID: 4})
	require.NoError(t, err)
	require.NoError(t, m.Close())
	code, _, errOut := runSeglog(t, "serve", "--data-dir", d, "--config", "node.id=5", "--config", "listeners=PLAINTEXT://127.0.0.1:0")
	require.NotZero(t, code)
	require.Contains(t, errOut, "node.id=5, but "+d+" holds node 4")
}

// advertised.listeners naming the meta-address of every interface is
// refused, as Kafka refuses it, naming the config, before anything is
// created.
func TestServeRefusesAMetaAddressAdvertised(t *testing.T) {
	for _, adv := range []string{"PLAINTEXT://0.0.0.0:9092", "PLAINTEXT://[::]:9092", "PLAINTEXT://:9092"} {
		d := filepath.Join(t.TempDir(), "data")
		code, _, errOut := runSeglog(t, "serve", "--data-dir", d, "--config", "listeners=PLAINTEXT://127.0.0.1:0",
			"--config", "advertised.listeners="+adv)
		require.NotZero(t, code, adv)
		require.Contains(t, errOut, "advertised.listeners PLAINTEXT", adv)
		require.Contains(t, errOut, "not an address a client can connect to", adv)
		_, err := os.Stat(d)
		require.ErrorIs(t, err, os.ErrNotExist, "%s: nothing is created", adv)
	}
}

// A key of server.properties (or --config) within a typo of one serve
// takes is an error with the suggestion, never a silent default;
// Kafka's configs serve leaves (zookeeper.connect) are only logged;
// broker.id is node.id's older name.
func TestServeConfigTypos(t *testing.T) {
	dir := t.TempDir()
	props := filepath.Join(dir, "server.properties")
	require.NoError(t, os.WriteFile(props, []byte("listners=PLAINTEXT://127.0.0.1:0\nzookeeper.connect=zk:2181\n"), 0o600))
	d := filepath.Join(dir, "data")
	code, _, errOut := runSeglog(t, "serve", "--data-dir", d, "--config-file", props)
	require.NotZero(t, code)
	require.Contains(t, errOut, `unknown broker config "listners": did you mean "listeners"?`)
	code, _, errOut = runSeglog(t, "serve", "--data-dir", d, "--config", "num.partiton=3")
	require.NotZero(t, code)
	require.Contains(t, errOut, `unknown broker config "num.partiton": did you mean "num.partitions"?`)
	code, _, errOut = runSeglog(t, "serve", "--data-dir", d, "--config", "frobnicate=3")
	require.NotZero(t, code)
	require.Contains(t, errOut, `unknown broker config "frobnicate" (seglog serve --help lists the ones it takes)`)

	m, err := tablet.OpenManager(vfs.OS, d, tablet.ManagerOptions{NodeID: 4})
	require.NoError(t, err)
	require.NoError(t, m.Close())
	code, _, errOut = runSeglog(t, "serve", "--data-dir", d, "--config", "broker.id=5", "--config", "listeners=PLAINTEXT://127.0.0.1:0")
	require.NotZero(t, code)
	require.Contains(t, errOut, "node.id=5, but "+d+" holds node 4", "broker.id is node.id")
}

// serve creates a missing data directory and says so first; a start that
// fails (its port in use) writes nothing: no data directory is left.
func TestServeCreatesNothingWhenItFails(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	d := filepath.Join(t.TempDir(), "data")
	code, _, errOut := runSeglog(t, "serve", "--data-dir", d, "--config", "listeners=PLAINTEXT://"+busy.Addr().String())
	require.NotZero(t, code)
	require.Contains(t, errOut, "address already in use")
	_, err = os.Stat(d)
	require.ErrorIs(t, err, os.ErrNotExist, "a failed start leaves no data directory")

	code, _, errOut = runSeglog(t, "serve", "--data-dir", d, "--config", "listeners=PLAINTEXT://127.0.0.1:0",
		"--metrics-addr", busy.Addr().String())
	require.NotZero(t, code)
	_, err = os.Stat(d)
	require.ErrorIs(t, err, os.ErrNotExist, "nor does a metrics address in use: %s", errOut)

	cmd, lines := startServe(t, "--data-dir", d, "--config", "listeners=PLAINTEXT://127.0.0.1:0")
	servedAddr(t, cmd, lines)
	log := stopServe(t, cmd)
	first, _, _ := strings.Cut(log, "\n")
	require.Contains(t, first, "creating the data directory: it does not exist")
	require.Contains(t, first, d)
	cmd, lines = startServe(t, "--data-dir", d, "--config", "listeners=PLAINTEXT://127.0.0.1:0")
	servedAddr(t, cmd, lines)
	require.NotContains(t, stopServe(t, cmd), "creating the data directory", "only when it was missing")
}

// serve's setters are package config's table's broker configs, one each:
// every config the table defines (but the topic defaults, set through
// their topic config, and the run-time-only ones) has a setter, and every
// setter a definition.
func TestServeSettersAreTheTables(t *testing.T) {
	for _, d := range config.Broker {
		_, has := serveSetters[d.Name]
		require.Equal(t, d.Topic == "" && !d.RunTime, has, "%s: a setter exactly when the table says serve sets it", d.Name)
	}
	for name := range serveSetters {
		_, ok := config.BrokerDef(name)
		require.True(t, ok, "%s has a setter and no definition in package config", name)
	}
	// The table's check runs first: a value out of its bounds is refused
	// with the table's reason, a topic default through its topic config.
	s := serveSettings{topic: tablet.DefaultConfig()}
	_, err := applyServeConfig(&s, "num.partitions", "0")
	require.ErrorContains(t, err, "not an integer in [1, 2³¹−1]")
	_, err = applyServeConfig(&s, "log.level", "loud")
	require.ErrorContains(t, err, "debug, info, warn, error")
	known, err := applyServeConfig(&s, "log.retention.hours", "2")
	require.True(t, known)
	require.NoError(t, err)
	require.Equal(t, int64(2*3600_000), s.topic.RetentionMs)
	_, err = applyServeConfig(&s, "leader.replication.throttled.rate", "10")
	require.ErrorContains(t, err, "run time only")
}
