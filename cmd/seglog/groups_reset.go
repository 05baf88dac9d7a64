package main

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/coordinator/group"
	"github.com/seglog/seglog/tablet"
)

// offsetSource is where --reset-offsets finds a group's partitions and
// their offsets, and commits the new ones: the data directory, or a
// running broker.
type offsetSource interface {
	// check refuses a group that has members: its consumers would
	// overwrite the reset.
	check(group string) error
	// committed lists the partitions the group has offsets for.
	committed(group string) ([]checkpoint.TopicPartition, error)
	// partitions lists a topic's partitions.
	partitions(topic string) ([]int32, error)
	// bounds gives each partition's log start offset and high watermark,
	// and, with at >= 0, the first offset at or after that time (the high
	// watermark when there is none).
	bounds(tps []checkpoint.TopicPartition, at int64) (map[checkpoint.TopicPartition]partitionBounds, error)
	commit(group string, next map[checkpoint.TopicPartition]int64) error
}

type partitionBounds struct{ start, end, atTime int64 }

// resetOffsets computes each partition's new offset and, with --execute,
// commits them.
func resetOffsets(cmd *cobra.Command, src offsetSource, ids []string, f groupsFlags) error {
	how := 0
	for _, b := range []bool{f.toEarliest, f.toLatest, f.toOffset >= 0, f.toDatetime != ""} {
		if b {
			how++
		}
	}
	if how != 1 {
		return errors.New("give one of --to-earliest, --to-latest, --to-offset, --to-datetime")
	}
	if len(f.topics) > 0 && f.allTopics {
		return errors.New("give --topic or --all-topics, not both")
	}
	if len(f.topics) == 0 && !f.allTopics {
		return errors.New("--reset-offsets needs --topic T (or T:P,P) or --all-topics")
	}
	at := int64(-1)
	if f.toDatetime != "" {
		ts, err := time.Parse("2006-01-02T15:04:05.000", f.toDatetime)
		if err != nil {
			return fmt.Errorf("--to-datetime %q: %w", f.toDatetime, err)
		}
		at = ts.UnixMilli()
	}
	type plan struct {
		Group     string `json:"group"`
		Topic     string `json:"topic"`
		Partition int32  `json:"partition"`
		Offset    int64  `json:"newOffset"`
	}
	var plans []plan
	for _, id := range ids {
		if err := src.check(id); err != nil {
			return err
		}
		tps, err := resetPartitions(src, id, f)
		if err != nil {
			return err
		}
		bounds, err := src.bounds(tps, at)
		if err != nil {
			return err
		}
		next := map[checkpoint.TopicPartition]int64{}
		for _, tp := range tps {
			b := bounds[tp]
			var off int64
			switch {
			case f.toEarliest:
				off = b.start
			case f.toLatest:
				off = b.end
			case f.toOffset >= 0:
				off = min(max(f.toOffset, b.start), b.end)
			default:
				off = b.atTime
			}
			next[tp] = off
			plans = append(plans, plan{id, tp.Topic, tp.Partition, off})
		}
		if f.execute {
			if err := src.commit(id, next); err != nil {
				return err
			}
		}
	}
	slices.SortFunc(plans, func(a, b plan) int {
		return strings.Compare(fmt.Sprintf("%s\x00%s\x00%010d", a.Group, a.Topic, a.Partition),
			fmt.Sprintf("%s\x00%s\x00%010d", b.Group, b.Topic, b.Partition))
	})
	if f.asJSON {
		return printJSON(cmd.OutOrStdout(), plans)
	}
	w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "GROUP\tTOPIC\tPARTITION\tNEW-OFFSET")
	for _, p := range plans {
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\n", p.Group, p.Topic, p.Partition, p.Offset)
	}
	if !f.execute {
		fmt.Fprintln(w, "(a dry run: --execute commits these)")
	}
	return w.Flush()
}

// resetPartitions are the partitions --topic (T or T:P,P) or --all-topics
// name for a group.
func resetPartitions(src offsetSource, id string, f groupsFlags) ([]checkpoint.TopicPartition, error) {
	if f.allTopics {
		return src.committed(id)
	}
	var tps []checkpoint.TopicPartition
	for _, spec := range f.topics {
		topic, parts, hasParts := strings.Cut(spec, ":")
		all, err := src.partitions(topic)
		if err != nil {
			return nil, err
		}
		n := 0
		for _, p := range all {
			if hasParts && !slices.Contains(strings.Split(parts, ","), strconv.Itoa(int(p))) {
				continue
			}
			tps = append(tps, checkpoint.TopicPartition{Topic: topic, Partition: p})
			n++
		}
		if n == 0 {
			return nil, fmt.Errorf("%w: topic %s", tablet.ErrNotFound, spec)
		}
	}
	return tps, nil
}

// dirOffsets resets offsets in a data directory, the broker stopped.
type dirOffsets struct {
	m *tablet.Manager
	c *group.Coordinator
}

func (d dirOffsets) check(string) error { return nil } // c.ResetOffsets refuses a group with members

func (d dirOffsets) committed(id string) ([]checkpoint.TopicPartition, error) {
	g, ok := d.c.Describe(id)
	if !ok {
		return nil, fmt.Errorf("%w: %q", group.ErrGroupNotFound, id)
	}
	var tps []checkpoint.TopicPartition
	for _, o := range g.Offsets {
		tps = append(tps, o.TopicPartition)
	}
	return tps, nil
}

func (d dirOffsets) partitions(topic string) ([]int32, error) {
	var ps []int32
	for _, t := range d.m.Tablets() {
		if tp := t.TopicPartition(); tp.Topic == topic {
			ps = append(ps, tp.Partition)
		}
	}
	return ps, nil
}

func (d dirOffsets) bounds(tps []checkpoint.TopicPartition, at int64) (map[checkpoint.TopicPartition]partitionBounds, error) {
	out := map[checkpoint.TopicPartition]partitionBounds{}
	for _, tp := range tps {
		t, ok := d.m.Get(tp)
		if !ok {
			return nil, fmt.Errorf("%w: %s", tablet.ErrNotFound, tp)
		}
		o := t.Offsets()
		b := partitionBounds{start: o.LogStartOffset, end: o.HighWatermark, atTime: o.HighWatermark}
		if at >= 0 {
			found, err := t.OffsetForTimestamp(at)
			switch {
			case errors.Is(err, tablet.ErrNoOffsetForTimestamp):
			case err != nil:
				return nil, fmt.Errorf("%s: %w", tp, err)
			default:
				b.atTime = found.Offset
			}
		}
		out[tp] = b
	}
	return out, nil
}

func (d dirOffsets) commit(id string, next map[checkpoint.TopicPartition]int64) error {
	return d.c.ResetOffsets(id, next)
}

// brokerOffsets resets offsets through a running broker: ListOffsets,
// then OffsetCommit as an admin (no member, generation -1), which the
// group coordinator accepts only while the group is empty.
type brokerOffsets struct{ c *adminConn }

func (b brokerOffsets) check(id string) error {
	described, err := b.c.adm.DescribeGroups(b.c.ctx, id)
	if err != nil {
		return err
	}
	g, ok := described[id]
	if !ok || errors.Is(g.Err, kerr.GroupIDNotFound) {
		return nil // no such group (DescribeGroups v6+): nothing runs in it
	}
	if g.Err != nil {
		return fmt.Errorf("describing group %q: %w", id, g.Err)
	}
	if g.State != "Empty" && g.State != "Dead" {
		return fmt.Errorf("offsets can only be reset while group %q is inactive (no consumer running), but it is %s", id, g.State)
	}
	return nil
}

func (b brokerOffsets) committed(id string) ([]checkpoint.TopicPartition, error) {
	fetched, err := b.c.adm.FetchOffsets(b.c.ctx, id)
	if err == nil {
		err = fetched.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("the offsets of group %q: %w", id, err)
	}
	var tps []checkpoint.TopicPartition
	for _, o := range fetched.Sorted() {
		tps = append(tps, checkpoint.TopicPartition{Topic: o.Topic, Partition: o.Partition})
	}
	if len(tps) == 0 {
		return nil, fmt.Errorf("group %q has no committed offsets (--all-topics resets those)", id)
	}
	return tps, nil
}

func (b brokerOffsets) partitions(topic string) ([]int32, error) {
	listed, err := b.c.adm.ListTopics(b.c.ctx, topic)
	if err != nil {
		return nil, err
	}
	d, ok := listed[topic]
	if !ok {
		return nil, fmt.Errorf("%w: topic %s", tablet.ErrNotFound, topic)
	}
	if d.Err != nil {
		return nil, fmt.Errorf("topic %s: %w", topic, d.Err)
	}
	return d.Partitions.Numbers(), nil
}

func (b brokerOffsets) bounds(tps []checkpoint.TopicPartition, at int64) (map[checkpoint.TopicPartition]partitionBounds, error) {
	var topics []string
	for _, tp := range tps {
		if !slices.Contains(topics, tp.Topic) {
			topics = append(topics, tp.Topic)
		}
	}
	list := func(what string, l func() (kadm.ListedOffsets, error)) (kadm.ListedOffsets, error) {
		listed, err := l()
		if err == nil {
			err = listed.Error()
		}
		if err != nil {
			return nil, fmt.Errorf("listing %s offsets: %w", what, err)
		}
		return listed, nil
	}
	starts, err := list("start", func() (kadm.ListedOffsets, error) { return b.c.adm.ListStartOffsets(b.c.ctx, topics...) })
	if err != nil {
		return nil, err
	}
	ends, err := list("end", func() (kadm.ListedOffsets, error) { return b.c.adm.ListEndOffsets(b.c.ctx, topics...) })
	if err != nil {
		return nil, err
	}
	atTime := ends
	if at >= 0 {
		if atTime, err = list("time", func() (kadm.ListedOffsets, error) { return b.c.adm.ListOffsetsAfterMilli(b.c.ctx, at, topics...) }); err != nil {
			return nil, err
		}
	}
	out := map[checkpoint.TopicPartition]partitionBounds{}
	for _, tp := range tps {
		s, okS := starts.Lookup(tp.Topic, tp.Partition)
		e, okE := ends.Lookup(tp.Topic, tp.Partition)
		t, okT := atTime.Lookup(tp.Topic, tp.Partition)
		if !okS || !okE || !okT {
			return nil, fmt.Errorf("%w: %s", tablet.ErrNotFound, tp)
		}
		out[tp] = partitionBounds{start: s.Offset, end: e.Offset, atTime: t.Offset}
	}
	return out, nil
}

func (b brokerOffsets) commit(id string, next map[checkpoint.TopicPartition]int64) error {
	var os kadm.Offsets
	for tp, o := range next {
		os.Add(kadm.Offset{Topic: tp.Topic, Partition: tp.Partition, At: o, LeaderEpoch: -1})
	}
	committed, err := b.c.adm.CommitOffsets(b.c.ctx, id, os)
	if err == nil {
		err = committed.Error()
	}
	if err != nil {
		return fmt.Errorf("resetting the offsets of group %q: %w", id, err)
	}
	return nil
}
