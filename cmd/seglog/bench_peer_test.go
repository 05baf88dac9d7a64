package main

import (
	"bufio"
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The serve workload's baselines run as processes of their own: each
// serves its topic with its partitions, takes an idempotent acks=all
// produce, and ends cleanly at SIGTERM.
func TestBenchPeer(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"null", "kfake"} {
		cmd := selfServe("bench-peer", "--kind", kind, "--topic", "bench", "--partitions", "3")
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		lines := bufio.NewScanner(out)
		addr := ""
		for addr == "" && lines.Scan() {
			if rest, ok := strings.CutPrefix(lines.Text(), "serving the Kafka protocol on "); ok {
				addr = rest
			}
		}
		require.NotEmpty(t, addr, kind)
		require.True(t, strings.HasPrefix(addr, "127.0.0.1:"), "loopback: %s", addr)

		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("bench"))
		require.NoError(t, err)
		topics, err := kadm.NewClient(cl).ListTopics(ctx, "bench")
		require.NoError(t, err)
		require.Len(t, topics["bench"].Partitions, 3, kind)
		for i := range 10 {
			require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte{byte(i)}}).FirstErr(), kind)
		}
		cl.Close()
		cancel()
		require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
		require.NoError(t, cmd.Wait(), "%s ends cleanly at SIGTERM", kind)
	}
	code, _, errOut := runSeglog(t, "bench-peer", "--kind", "nope")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "kfake or null")
}
