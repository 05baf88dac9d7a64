package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/seglog/seglog/checkpoint"
)

// seglog serve in a child process: franz-go produces and consumes through
// it; SIGTERM closes it cleanly, and the directory verifies.
func TestServeCommand(t *testing.T) {
	d := filepath.Join(t.TempDir(), "data")
	args, err := json.Marshal([]string{"serve", "--data-dir", d, "--config", "listeners=PLAINTEXT://127.0.0.1:0",
		"--config", "seglog.durable.acks=true", "--config", "num.partitions=2", "--metrics-addr", "127.0.0.1:0"})
	require.NoError(t, err)
	cmd := childCmd("cli", "SEGLOG_CHILD_ARGS="+string(args))
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	lines := bufio.NewScanner(out)
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

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait(), "a clean exit on SIGTERM: %s", cmd.Stderr)
	_, err = os.Stat(filepath.Join(d, checkpoint.CleanShutdownFile))
	require.NoError(t, err, "closed cleanly: the next start skips recovery")
	code, vout, errOut := runSeglog(t, "verify", "--data-dir", d)
	require.Zero(t, code, "%s%s", vout, errOut)
	code, cout, _ := runSeglog(t, "consume", "--data-dir", d, "--topic", "orders", "--partition", "1", "--format", "value")
	require.Zero(t, code)
	require.Positive(t, strings.Count(cout, "\n"), "both partitions got records")
}
