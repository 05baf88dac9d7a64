package bench

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A fixed-rate run answers one publish and one end-to-end latency for
// each record of the schedule (the warm-up record left out), each a time
// that passed; the schedule holds the rate: n records at r a second take
// at least (n-1)/r seconds.
func TestRateLatencies(t *testing.T) {
	target, err := startSeglog(filepath.Join(t.TempDir(), "data"), 3, false)
	require.NoError(t, err)
	defer func() { require.NoError(t, target.close()) }()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const rate, n = 1000, 200
	start := time.Now()
	run, err := rateLatencies(ctx, []string{target.addr}, serveTopic, randomValues(100), rate, n, kgo.ProducerLinger(0))
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Since(start), time.Duration(n-1)*time.Second/rate)
	require.Len(t, run.publish, n)
	require.Len(t, run.e2e, n)
	require.Positive(t, slices.Min(run.publish), "every record's acknowledgement timed")
	require.Positive(t, slices.Min(run.e2e), "every record's receipt timed from its send")

	_, err = rateLatencies(ctx, []string{target.addr}, serveTopic, randomValues(100), 0, n)
	require.Error(t, err, "no rate")
}
