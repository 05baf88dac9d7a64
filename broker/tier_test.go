package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/tablet"
	"github.com/seglog/seglog/tiering"
)

// Offsets below the local log start are fetched from the tier: once the
// sealed segments are uploaded and deleted locally, a franz-go consumer
// from the start still reads every record, in order.
func TestFetchBelowLocalStartFromTier(t *testing.T) {
	_, m, addr := testBroker(t, Options{})
	cfg := tablet.DefaultConfig()
	require.NoError(t, cfg.Set("segment.bytes", "8192"))
	require.NoError(t, cfg.Set("local.retention.bytes", "0"))
	require.NoError(t, cfg.Set("remote.storage.enable", "true"))
	tb, err := m.Create(checkpoint.TopicPartition{Topic: "cold"}, &cfg)
	require.NoError(t, err)
	const n = 400
	for i := range n {
		_, err := tb.AppendRecords([]record.Record{{Value: fmt.Appendf(nil, "record %04d %0100d", i, i)}}, record.None, tablet.AppendOptions{})
		require.NoError(t, err)
	}
	store, err := tiering.OpenFileStore(t.TempDir())
	require.NoError(t, err)
	svc := tiering.NewService(m, store, &tiering.ServiceOptions{Tier: tiering.Options{Logger: quiet}})
	t.Cleanup(func() { require.NoError(t, svc.Close()) }) // before the manager closes (cleanups run in reverse)
	_, err = svc.RunOnce(context.Background(), false)
	require.NoError(t, err)
	local := tb.Offsets().LocalLogStartOffset
	require.Greater(t, local, int64(n/2), "most of the log is only in the store now")
	require.Zero(t, tb.Offsets().LogStartOffset)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("cold"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100*time.Millisecond))
	require.NoError(t, err)
	defer c.Close()
	var got []string
	for len(got) < n {
		fs := c.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "consumed %d of %d", len(got), n)
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("%s-%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			require.Equal(t, int64(len(got)), r.Offset)
			got = append(got, string(r.Value))
		})
	}
	require.Equal(t, fmt.Sprintf("record %04d %0100d", 0, 0), got[0])
	require.Equal(t, fmt.Sprintf("record %04d %0100d", n-1, n-1), got[n-1])
}
