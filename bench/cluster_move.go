package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/cluster"
	"github.com/seglog/seglog/tablet"
)

// The move of a tiered partition: four brokers over one file:// store; a
// partition holding tiered bytes in the store and local bytes on its
// replicas moves from brokers 1, 2, 3 to 4, 2, 3 (AlterPartitionReassignments'
// path), and broker 4 copies only the local tail (starting from the tier);
// the baseline is the same move of a partition holding the same bytes all
// local (the whole log copied), on the same brokers, in the same run.

// movedFigures are what moveTiered measured.
type movedFigures struct {
	tieredMs, wholeMs       float64
	tieredBytes, wholeBytes int64
	tiered, local           int64 // the tiered partition's bytes in the store and locally
}

// moveTiered runs the move of a tiered partition against the whole log's.
func moveTiered(o Options, dir string) (movedFigures, error) {
	var f movedFigures
	c, err := startBenchClusterWith(dir, 4, "file://"+filepath.Join(dir, "store"))
	if err != nil {
		return f, err
	}
	defer c.close()
	local := max(o.Bytes/4, 512<<10)
	tiered := 4 * o.Bytes
	segment := max(local/8, 256<<10)
	topics := map[string]map[string]string{
		"tiered": {"remote.storage.enable": "true", "segment.bytes": strconv.FormatInt(segment, 10), "local.retention.bytes": strconv.FormatInt(local, 10)},
		"whole":  {"segment.bytes": strconv.FormatInt(segment, 10)},
	}
	values := randomValues(max(o.RecordSize, 1024))
	n := int((tiered + local) / int64(len(values[0])))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	m := c.anyMember()
	for _, name := range []string{"tiered", "whole"} {
		if _, err := m.CreateTopic(ctx, cluster.TopicSpec{Name: name, Assignment: [][]int32{{1, 2, 3}}, Configs: topics[name]}); err != nil {
			return f, err
		}
		for _, s := range c.servers {
			if err := s.Replicas().Await(ctx, m.Snapshot().Revision); err != nil {
				return f, err
			}
		}
		if _, err := produceAll(c.seeds()[0], values, n, kgo.DefaultProduceTopic(name), kgo.SeedBrokers(c.seeds()...),
			kgo.ProducerBatchMaxBytes(int32(min(segment/4, 512<<10)))); err != nil {
			return f, fmt.Errorf("bench: producing to %s: %w", name, err)
		}
	}
	for _, id := range []int32{1, 2, 3} { // the leader first: it uploads and publishes
		if _, err := c.servers[id].Tiering().RunOnce(ctx, false); err != nil {
			return f, err
		}
	}
	tb, ok := c.servers[1].Manager().Get(checkpoint.TopicPartition{Topic: "tiered"})
	if !ok {
		return f, fmt.Errorf("bench: broker 1 holds no replica of the tiered partition")
	}
	x, err := c.servers[1].Tiering().Tier(ctx, tb)
	if err != nil {
		return f, err
	}
	for _, e := range x.Manifest().Visible() {
		f.tiered += e.Size
	}
	f.local = segmentBytes(tb.Segments())
	for _, t := range []struct {
		name  string
		ms    *float64
		bytes *int64
	}{{"whole", &f.wholeMs, &f.wholeBytes}, {"tiered", &f.tieredMs, &f.tieredBytes}} {
		start := time.Now()
		if err := m.Reassign(ctx, t.name, 0, []int32{4, 2, 3}); err != nil {
			return f, err
		}
		done, err := m.Until(ctx, func(s *cluster.Snapshot) bool {
			ts := s.Topics[t.name]
			return slices.Equal(ts.Replicas[0], []int32{4, 2, 3}) && !ts.Partitions[0].Reassigning()
		})
		if err != nil {
			return f, fmt.Errorf("bench: moving %s: %w", t.name, err)
		}
		*t.ms = float64(time.Since(start).Microseconds()) / 1000
		if err := c.servers[4].Replicas().Await(ctx, done.Revision); err != nil {
			return f, err
		}
		moved, ok := c.servers[4].Manager().Get(checkpoint.TopicPartition{Topic: t.name})
		if !ok {
			return f, fmt.Errorf("bench: broker 4 holds no replica of %s after the move", t.name)
		}
		*t.bytes = segmentBytes(moved.Segments())
	}
	return f, nil
}

// segmentBytes is the size of segments.
func segmentBytes(segs []tablet.SegmentInfo) int64 {
	var n int64
	for _, s := range segs {
		n += s.Size
	}
	return n
}
