package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/seglog/seglog/broker"
)

// segmentsShown bounds the segments the partition page lists (the
// newest): each is opened to read its first batch and its index.
const segmentsShown = 200

// partitionPage is the partition page's data: the partition as the
// cluster's metadata has it, and what this broker's replica holds.
type partitionPage struct {
	Topic string
	partitionRow
	// Held reports that this broker holds a replica: the rest is its.
	Held          bool
	Offsets       broker.ReplicaOffsets
	Segments      []segmentRow
	SegmentCount  int
	Tiered        bool
	TierObjects   []tierRow
	TieredBytes   int64
	Leading       bool
	Followers     []followerRow
	TieredEnd     int64
	LocalLogStart int64
}

type segmentRow struct {
	broker.SegmentDetail
	Active bool
}

// IndexFill is the offset index's entries over its slots, in percent.
func (s segmentRow) IndexFill() int {
	if s.IndexSlots == 0 {
		return 0
	}
	return s.IndexEntries * 100 / s.IndexSlots
}

type tierRow struct{ broker.TierObject }

// followerRow is a follower's progress: its lag in records behind the
// leader's log end, and how long since it was last caught up.
type followerRow struct {
	Replica       int32
	LogEnd        int64
	Lag           int64
	CaughtUpAgo   string
	InSync        bool
	NotYetFetched bool
}

func (c *Console) partition(ctx context.Context, r *http.Request) (string, view, error) {
	name := r.PathValue("topic")
	p, err := strconv.ParseInt(r.PathValue("partition"), 10, 32)
	if err != nil || p < 0 {
		return "", view{}, fmt.Errorf("partition %q: %w", r.PathValue("partition"), errNotFound)
	}
	rows, err := c.describeTopics(ctx, r, []string{name})
	if err != nil {
		return "", view{}, err
	}
	if len(rows) != 1 || rows[0].Error != "" {
		return "", view{}, fmt.Errorf("topic %q: %w", name, errNotFound)
	}
	pr := findPartition(rows, name, int32(p))
	if pr == nil {
		return "", view{}, fmt.Errorf("partition %s-%d: %w", name, p, errNotFound)
	}
	page := partitionPage{Topic: name, partitionRow: *pr}
	d, err := c.b.DescribePartition(c.caller(r), name, int32(p), segmentsShown)
	switch {
	case errors.Is(err, broker.ErrNoReplica):
	case err != nil:
		return "", view{}, fmt.Errorf("partition %s-%d: %w", name, p, err)
	default:
		page.fill(d)
	}
	return "partition", view{Title: fmt.Sprintf("Partition %s-%d", name, p), Nav: "topics", Data: page}, nil
}

func (page *partitionPage) fill(d broker.PartitionDetail) {
	page.Held, page.Offsets, page.SegmentCount, page.Tiered, page.Leading = true, d.Offsets, d.SegmentCount, d.Tiered, d.Leading
	page.LocalLogStart = d.Offsets.LocalLogStartOffset
	for i, s := range d.Segments {
		page.Segments = append(page.Segments, segmentRow{SegmentDetail: s, Active: i == len(d.Segments)-1})
	}
	page.TieredBytes = tierBytes(d.TierObjects)
	for _, o := range d.TierObjects {
		page.TierObjects = append(page.TierObjects, tierRow{o})
		page.TieredEnd = max(page.TieredEnd, o.NextOffset)
	}
	for _, f := range d.Followers {
		row := followerRow{Replica: f.Replica, LogEnd: f.LogEnd, NotYetFetched: f.LogEnd < 0}
		if !row.NotYetFetched {
			row.Lag = max(d.Offsets.LogEndOffset-f.LogEnd, 0)
			row.CaughtUpAgo = time.Since(f.LastCaughtUp).Round(time.Second).String()
		}
		for _, r := range page.ISR {
			row.InSync = row.InSync || r == f.Replica
		}
		page.Followers = append(page.Followers, row)
	}
}
