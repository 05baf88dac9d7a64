package bench

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// NATS JetStream at R3 runs the fixed-rate schedule: three servers
// clustered, a stream at R3, one publish and one end-to-end latency for
// each message of the schedule.
func TestNATSRateLatencies(t *testing.T) {
	bin := os.Getenv("SEGLOG_NATS_SERVER")
	if bin == "" {
		t.Skip("SEGLOG_NATS_SERVER names no nats-server (make test builds it)")
	}
	dir := t.TempDir()
	c, err := startNATS(bin, dir)
	defer func() {
		if t.Failed() { // (what the servers said)
			for _, n := range []string{"n1.log", "n2.log", "n3.log"} {
				b, _ := os.ReadFile(filepath.Join(dir, n))
				t.Logf("%s:\n%s", n, b)
			}
		}
	}()
	require.NoError(t, err)
	defer c.close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const rate, n = 1000, 200
	run, err := natsRateLatencies(ctx, c.urls, "bench", randomValues(128), rate, n)
	require.NoError(t, err)
	require.Len(t, run.publish, n)
	require.Len(t, run.e2e, n)
	require.Positive(t, slices.Min(run.publish))
	require.GreaterOrEqual(t, slices.Min(run.e2e), 0.0)
}
