package broker

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

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

	// ListOffsets v8's earliest local (-4) and v9's latest tiered (-5),
	// against the tablet's own offsets; a topic with no tier has no
	// tiered offset (-1).
	_, err = m.Create(checkpoint.TopicPartition{Topic: "warm"}, nil)
	require.NoError(t, err)
	tieredEnd, ok := tb.TieredEnd()
	require.True(t, ok)
	require.GreaterOrEqual(t, tieredEnd, local)
	lo := kmsg.NewPtrListOffsetsRequest()
	for _, topic := range []string{"cold", "warm"} {
		lo.Topics = append(lo.Topics, kmsg.ListOffsetsRequestTopic{Topic: topic, Partitions: []kmsg.ListOffsetsRequestTopicPartition{
			{Partition: 0, Timestamp: -4, CurrentLeaderEpoch: -1}, {Partition: 0, Timestamp: -5, CurrentLeaderEpoch: -1}}})
	}
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer conn.Close()
	lresp := kmsg.NewPtrListOffsetsResponse()
	exchange(t, conn, lo, 10, lresp)
	cold, warm := lresp.Topics[0].Partitions, lresp.Topics[1].Partitions
	require.Equal(t, local, cold[0].Offset, "earliest local")
	require.Equal(t, tieredEnd-1, cold[1].Offset, "latest tiered")
	require.Zero(t, warm[0].Offset)
	require.Equal(t, int64(-1), warm[1].Offset, "nothing tiered")
}

// stuckRemote is a tier whose store never answers: a read waits for its
// context and keeps the deadline it was given.
type stuckRemote struct{ deadlines chan time.Time }

func (s stuckRemote) ReadRemote(ctx context.Context, _ int64, _ int, _ bool, _ int64) (tablet.RemoteRead, error) {
	d, _ := ctx.Deadline()
	s.deadlines <- d
	<-ctx.Done()
	return tablet.RemoteRead{}, ctx.Err()
}

func (s stuckRemote) RemoteAbortedTxns(ctx context.Context, _, _ int64) ([]record.AbortedTxn, bool, error) {
	<-ctx.Done()
	return nil, false, ctx.Err()
}

func (s stuckRemote) RemoteEnd() int64 { return 0 }

func (s stuckRemote) RemoteOffsetForTimestamp(ctx context.Context, _ int64) (tablet.TimestampOffset, bool, error) {
	<-ctx.Done()
	return tablet.TimestampOffset{}, false, ctx.Err()
}

// A fetch's read from a tier whose store does not answer is bounded by
// the fetch's own wait (MaxWaitMs, above remote.fetch.max.wait.ms): the
// store sees that deadline, and the partition is answered with no records
// and no error, as Kafka answers a remote fetch that did not finish.
func TestRemoteReadBoundedByTheFetchWait(t *testing.T) {
	_, m, addr := testBroker(t, Options{RemoteFetchMaxWait: 10 * time.Millisecond})
	cfg := tablet.DefaultConfig()
	require.NoError(t, cfg.Set("segment.bytes", "8192"))
	tb, err := m.Create(checkpoint.TopicPartition{Topic: "stuck"}, &cfg)
	require.NoError(t, err)
	for i := range 200 {
		_, err := tb.AppendRecords([]record.Record{{Value: fmt.Appendf(nil, "record %04d %0100d", i, i)}}, record.None, tablet.AppendOptions{})
		require.NoError(t, err)
	}
	remote := stuckRemote{deadlines: make(chan time.Time, 1)}
	require.NoError(t, tb.SetRemote(remote, 0))
	_, err = tb.DeleteLocalBefore(tb.Offsets().HighWatermark)
	require.NoError(t, err)
	require.Positive(t, tb.Offsets().LocalLogStartOffset)

	const wait = 200 * time.Millisecond
	c := dialRaw(t, addr)
	f := kmsg.NewPtrFetchRequest()
	f.MaxWaitMillis, f.MinBytes, f.MaxBytes, f.SessionEpoch = int32(wait.Milliseconds()), 1, 1<<20, -1
	f.Topics = []kmsg.FetchRequestTopic{{Topic: "stuck", Partitions: []kmsg.FetchRequestTopicPartition{{PartitionMaxBytes: 1 << 20}}}}
	sent := time.Now()
	resp := kmsg.NewPtrFetchResponse()
	c.do(f, 12, resp)
	answered := time.Now()
	deadline := <-remote.deadlines
	require.False(t, deadline.IsZero(), "the store's read has a deadline")
	// The broker took the request between sent and answered: the deadline
	// is its wait from then (not remote.fetch.max.wait.ms, shorter here).
	require.False(t, deadline.Before(sent.Add(wait)), "the fetch's own wait")
	require.False(t, deadline.After(answered.Add(wait)), "no later than the fetch's own wait")
	p := resp.Topics[0].Partitions[0]
	require.Zero(t, p.ErrorCode)
	require.Empty(t, p.RecordBatches)
	require.Equal(t, tb.Offsets().HighWatermark, p.HighWatermark)
}
