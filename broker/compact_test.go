package broker

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/checkpoint"
)

// createCompacted creates a compacted topic of one partition with small
// segments, so that most of what is produced is sealed and cleanable.
func createCompacted(t *testing.T, ctx context.Context, adm *kadm.Client, topic string, segmentBytes int) {
	t.Helper()
	created, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": kmsg.StringPtr("compact"),
		"segment.bytes": kmsg.StringPtr(strconv.Itoa(segmentBytes))}, topic)
	require.NoError(t, err)
	require.NoError(t, created.Err)
}

// A compacted topic through real clients: kadm creates it, franz-go
// produces (a record without a key refused as Kafka does), the cleaner
// runs, and franz-go reads the compacted log from the start — the last
// value of every key at its own offset, the emptied batches stepped over.
func TestCompactedTopicWithFranzGo(t *testing.T) {
	_, m, addr := testBroker(t, Options{NoAutoCreate: true})
	adm, cl, ctx := adminClient(t, addr)
	createCompacted(t, ctx, adm, "changes", 4096)
	c := configOf(t, ctx, adm, "changes", "cleanup.policy")
	require.Equal(t, "compact", valueOf(c))
	require.Equal(t, kmsg.ConfigSourceDynamicTopicConfig, c.Source)

	const n, keys = 2000, 20
	want := map[string]string{}
	wantOffset := map[string]int64{}
	for i := range n / 100 {
		var recs []*kgo.Record
		for j := range 100 {
			k, v := fmt.Sprintf("k%d", (i*100+j)%keys), fmt.Sprintf("v%d", i*100+j)
			recs = append(recs, &kgo.Record{Topic: "changes", Key: []byte(k), Value: []byte(v)})
			want[k] = v
		}
		res := cl.ProduceSync(ctx, recs...)
		require.NoError(t, res.FirstErr())
		for _, r := range res {
			wantOffset[string(r.Record.Key)] = r.Record.Offset
		}
	}
	err := cl.ProduceSync(ctx, &kgo.Record{Topic: "changes", Value: []byte("no key")}).FirstErr()
	require.ErrorIs(t, err, kerr.InvalidRecord, "a compacted topic refuses a record without a key")

	tab, ok := m.Get(checkpoint.TopicPartition{Topic: "changes"})
	require.True(t, ok)
	require.NoError(t, tab.Flush())
	res, err := m.CleanDirty()
	require.NoError(t, err)
	require.Positive(t, res[tab.TopicPartition()].RecordsRemoved)

	consumer, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("changes"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer consumer.Close()
	got, gotOffset := map[string]string{}, map[string]int64{}
	read, last := 0, int64(-1)
	for last < n-1 {
		fs := consumer.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "read to %d", last)
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("%s-%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			require.Greater(t, r.Offset, last, "offsets only go up")
			last = r.Offset
			got[string(r.Key)], gotOffset[string(r.Key)] = string(r.Value), r.Offset
			read++
		})
	}
	require.Equal(t, want, got)
	require.Equal(t, wantOffset, gotOffset, "each key's last record at its own offset")
	require.Less(t, read, n, "the cleaned records are gone")
}

// kcat (librdkafka, an independent reader) produces keyed records to a
// compacted topic idempotently and reads the cleaned log back to its end:
// the last value of each key, the emptied producer batch stepped over.
func TestCompactedTopicWithKcat(t *testing.T) {
	kcat := tool(t, "kcat")
	_, m, addr := testBroker(t, Options{NoAutoCreate: true})
	adm, _, ctx := adminClient(t, addr)
	createCompacted(t, ctx, adm, "kc", 1024)
	run := kcatRun(t, kcat, addr)
	var in strings.Builder
	want := map[string]string{}
	for i := range 500 {
		k, v := fmt.Sprintf("k%d", i%7), fmt.Sprintf("v%d", i)
		fmt.Fprintf(&in, "%s:%s\n", k, v)
		want[k] = v
	}
	run(in.String(), "-P", "-t", "kc", "-K", ":", "-X", "enable.idempotence=true", "-X", "batch.num.messages=20")
	tab, ok := m.Get(checkpoint.TopicPartition{Topic: "kc"})
	require.True(t, ok)
	require.NoError(t, tab.Flush())
	res, err := m.CleanDirty()
	require.NoError(t, err)
	require.Positive(t, res[tab.TopicPartition()].RecordsRemoved)

	out := run("", "-C", "-t", "kc", "-o", "beginning", "-e", "-q", "-f", "%k:%s\n")
	got := map[string]string{}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for _, l := range lines {
		k, v, _ := strings.Cut(l, ":")
		got[k] = v
	}
	require.Equal(t, want, got)
	require.Less(t, len(lines), 500, "the cleaned records are gone")
}
