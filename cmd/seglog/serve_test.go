package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
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
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/tablet"
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
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd, bufio.NewScanner(out)
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
	metrics := strings.TrimPrefix(lines.Text(), "metrics on ")
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
	require.Contains(t, string(page), `seglog_broker_requests_total{api="Produce"}`, "the broker's own collectors")
	require.Contains(t, string(page), `seglog_broker_request_seconds_bucket{api="Fetch"`)
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
	require.True(t, lines.Scan(), "serve printed nothing: %s", cmd.Stderr)
	addr := strings.Fields(strings.TrimPrefix(lines.Text(), "serving the Kafka protocol on "))[0]

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
