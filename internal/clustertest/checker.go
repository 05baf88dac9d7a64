// Package clustertest is the checker of the cluster's tests: it records
// where each record was acknowledged and reads everything back, failing
// on a record lost, duplicated, moved or never acknowledged, and on a
// high watermark that goes back.
package clustertest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// At is a record's acknowledged place.
type At struct {
	Partition int32
	Offset    int64
}

// Checker records acknowledgements, by value (each record's value is
// unique).
type Checker struct {
	mu    sync.Mutex // guards acked and txns
	acked map[string]At
	txns  []*Txn // (Transact)
}

// New returns an empty checker.
func New() *Checker { return &Checker{acked: map[string]At{}} }

// Acked returns how many records were acknowledged.
func (c *Checker) Acked() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.acked)
}

// Produce produces records prefix0 … prefix(n-1) to topic one at a time
// through cl and records where each was acknowledged; it stops at the
// first failure. It is safe to call from any goroutine.
func (c *Checker) Produce(ctx context.Context, cl *kgo.Client, topic, prefix string, n int) error {
	for i := range n {
		r := &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "%s%d", prefix, i)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			return fmt.Errorf("record %s: %w", r.Value, err)
		}
		c.mu.Lock()
		c.acked[string(r.Value)] = At{r.Partition, r.Offset}
		c.mu.Unlock()
	}
	return nil
}

// Forget drops the acknowledged records gone chooses (records deleted
// on purpose, as by DeleteRecords): ReadBack no longer looks for them.
func (c *Checker) Forget(gone func(At) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, at := range c.acked {
		if gone(at) {
			delete(c.acked, k)
		}
	}
}

// ReadBack reads every partition of topic from the start through seeds
// and checks that each acknowledged record is there exactly once at the
// offset it was acknowledged at, that nothing unacknowledged is read
// (the producers here retry until acknowledged, so a record written is a
// record acknowledged), and that no partition's high watermark goes back.
func (c *Checker) ReadBack(t *testing.T, seeds []string, topic string, partitions int32) {
	t.Helper()
	c.mu.Lock()
	want := make(map[string]At, len(c.acked))
	for k, v := range c.acked {
		want[k] = v
	}
	c.mu.Unlock()
	offsets := map[int32]kgo.Offset{}
	for p := range partitions {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchMaxWait(100*time.Millisecond))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	seen := map[string]bool{}
	hw := map[int32]int64{}
	for len(seen) < len(want) {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "read %d of %d acknowledged records", len(seen), len(want))
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			if p.Err == nil {
				require.GreaterOrEqual(t, p.HighWatermark, hw[p.Partition], "partition %d: the high watermark went back", p.Partition)
				hw[p.Partition] = p.HighWatermark
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			v := string(r.Value)
			a, ok := want[v]
			require.True(t, ok, "a record never acknowledged: %s at %d/%d", v, r.Partition, r.Offset)
			require.Equal(t, a, At{r.Partition, r.Offset}, "record %s", v)
			require.False(t, seen[v], "record %s read twice", v)
			seen[v] = true
		})
	}
}
