package broker

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/tablet"
)

// waitN receives n events from ch, failing if they have not all come by
// the time limit (a bound for a broken broker, far below the waits the
// events end).
func waitN(t *testing.T, ch <-chan struct{}, n int, limit time.Duration, what string) {
	t.Helper()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for i := range n {
		select {
		case <-ch:
		case <-timer.C:
			t.Fatalf("%s: %d of %d", what, i, n)
		}
	}
}

// TestLongPollsEndWithTheirClients: 300 clients long-poll an empty
// partition with a ten-minute wait; when they close their connections,
// every fetch ends and every connection's goroutines return, long before
// the wait would have (the connection's context is cancelled when its
// client goes). No goroutine is left in a long poll.
func TestLongPollsEndWithTheirClients(t *testing.T) {
	const clients = 300
	waiting, done := make(chan struct{}, clients), make(chan struct{}, clients)
	b, _, addr := testBrokerWith(t, Options{MaxFetchWait: 10 * time.Minute}, func(m *tablet.Manager, b *Broker) {
		_, err := m.Create(checkpoint.TopicPartition{Topic: "idle"}, nil)
		require.NoError(t, err)
		b.hooks.fetchWaiting = func() { waiting <- struct{}{} }
		b.hooks.connDone = func() { done <- struct{}{} }
	})
	before := runtime.NumGoroutine()

	conns := make([]*rawConn, clients)
	for i := range conns {
		conns[i] = dialRaw(t, addr)
		f := kmsg.NewPtrFetchRequest()
		f.MaxWaitMillis, f.MinBytes, f.MaxBytes, f.SessionEpoch = 600_000, 1, 1<<20, -1
		f.Topics = []kmsg.FetchRequestTopic{{Topic: "idle", Partitions: []kmsg.FetchRequestTopicPartition{{PartitionMaxBytes: 1 << 20}}}}
		conns[i].send(f, 12)
	}
	waitN(t, waiting, clients, time.Minute, "fetches in a long poll")
	require.Equal(t, float64(clients), testutil.ToFloat64(b.metrics.fetchesWaiting))
	require.Greater(t, runtime.NumGoroutine(), before+clients, "each connection holds goroutines")

	for _, c := range conns {
		require.NoError(t, c.Close())
	}
	waitN(t, done, clients, time.Minute, "connections ended after their clients closed")
	require.Zero(t, testutil.ToFloat64(b.metrics.fetchesWaiting), "no fetch waits on")
	require.Zero(t, testutil.ToFloat64(b.metrics.open))
	buf := make([]byte, 1<<22)
	stacks := string(buf[:runtime.Stack(buf, true)])
	for _, f := range []string{"broker.waitAny", "(*Broker).fetch(", "(*Broker).answer("} {
		require.NotContains(t, stacks, f, "a goroutine is left in %s", strings.TrimSuffix(f, "("))
	}
}
