package main

import (
	"bufio"
	"context"
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// seglog playground (make cluster) runs a cluster in one process: it
// prints the bootstrap servers, a producer's acks=all records read back
// through them, and SIGINT stops it cleanly.
func TestPlayground(t *testing.T) {
	js, err := json.Marshal([]string{"playground", "--brokers", "3", "--etcd-members", "1", "--dir", t.TempDir()})
	require.NoError(t, err)
	cmd := childCmd("cli", "SEGLOG_CHILD_ARGS="+string(js))
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	reapAtCleanup(t, cmd)
	lines := bufio.NewScanner(out)
	var seeds []string
	for lines.Scan() {
		if rest, ok := strings.CutPrefix(lines.Text(), "bootstrap servers: "); ok {
			seeds = strings.Split(rest, ",")
			break
		}
	}
	require.Len(t, seeds, 3, "the bootstrap servers: %s", cmd.Stderr)
	go func() {
		for lines.Scan() {
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a deadline, not a wait
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic("try"), kgo.ConsumeTopics("try"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cl.Close()
	created, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 3, nil, "try")
	require.NoError(t, err)
	require.NoError(t, created.Err)
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte("hello")}).FirstErr())
	fs := cl.PollFetches(ctx)
	require.NoError(t, ctx.Err())
	require.Equal(t, "hello", string(fs.Records()[0].Value))
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	require.NoError(t, cmd.Wait(), "a clean stop: %s", cmd.Stderr)
}
