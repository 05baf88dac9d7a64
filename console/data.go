package console

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/broker"
	"github.com/seglog/seglog/broker/auth"
)

// brokerRow is one broker of the cluster page.
type brokerRow struct {
	ID         int32
	Host       string
	Port       int32
	Rack       string
	Controller bool
}

// partitionRow is one partition: its replicas and offsets.
type partitionRow struct {
	Partition           int32
	Leader, LeaderEpoch int32
	Replicas, ISR       []int32
	Offline             []int32
	LogStart, HW, LSO   int64
	LogEnd              int64 // this broker's replica's (-1: it holds none)
	Bytes, Tiered       int64
	Error               string
	// MinISR is the topic's min.insync.replicas (0: unknown).
	MinISR int
}

func (p partitionRow) UnderReplicated() bool { return len(p.ISR) < len(p.Replicas) }
func (p partitionRow) IsOffline() bool       { return p.Leader < 0 }

// UnderMinISR reports a partition whose ISR is below min.insync.replicas:
// acks=all producers are refused (NOT_ENOUGH_REPLICAS).
func (p partitionRow) UnderMinISR() bool { return !p.IsOffline() && len(p.ISR) < p.MinISR }

// topicRow is one topic of the topics page, and the topic page's head.
type topicRow struct {
	Name       string
	Internal   bool
	Partitions []partitionRow
	Cleanup    string
	Retention  string
	Bytes      int64
	Tiered     int64 // bytes in the tier's objects, on this broker's replicas
	Records    int64 // high watermark less log start, summed: the records a consumer would read at most
	// Rate is the records appended per second over the last sample
	// interval (-1: unknown, not yet sampled or no replica here).
	Rate  float64
	Error string
	// Configs are every config of the topic, on its own page only.
	Configs []configRow
}

// configRow is a topic's config: its value and where it comes from
// (DescribeConfigs' source: the topic's own, the broker's default, …).
type configRow struct{ Name, Value, Source string }

// sum adds f over the topic's partitions.
func (t topicRow) sum(f func(partitionRow) int64) (n int64) {
	for _, p := range t.Partitions {
		n += f(p)
	}
	return n
}

func (t topicRow) UnderReplicated() (n int) {
	for _, p := range t.Partitions {
		if p.UnderReplicated() {
			n++
		}
	}
	return n
}

func (t topicRow) UnderMinISR() (n int) {
	for _, p := range t.Partitions {
		if p.UnderMinISR() {
			n++
		}
	}
	return n
}

func (t topicRow) Offline() (n int) {
	for _, p := range t.Partitions {
		if p.IsOffline() {
			n++
		}
	}
	return n
}

// cluster is the cluster page's data.
type cluster struct {
	ID              string
	Brokers         []brokerRow
	Controller      int32
	Topics          int
	Partitions      int
	UnderReplicated int
	UnderMinISR     int
	Offline         int
	// Charts are the broker's throughput and request charts, for a
	// principal that may describe the cluster.
	Charts []chart
}

// metadata asks for every topic (topics nil) or the ones named.
func (c *Console) metadata(ctx context.Context, r *http.Request, topics ...string) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range topics { // none: req.Topics stays nil, every topic
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, mt)
	}
	resp, err := c.b.Request(ctx, c.caller(r), req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.MetadataResponse), nil
}

func (c *Console) cluster(ctx context.Context, r *http.Request) (string, view, error) {
	md, err := c.metadata(ctx, r)
	if err != nil {
		return "", view{}, err
	}
	cl := cluster{ID: deref(md.ClusterID), Controller: md.ControllerID}
	for _, b := range md.Brokers {
		cl.Brokers = append(cl.Brokers, brokerRow{ID: b.NodeID, Host: b.Host, Port: b.Port, Rack: deref(b.Rack),
			Controller: b.NodeID == md.ControllerID})
	}
	slices.SortFunc(cl.Brokers, func(a, b brokerRow) int { return cmp.Compare(a.ID, b.ID) })
	rows := described(topicRows(md))
	if err := c.fillConfigs(ctx, r, rows); err != nil {
		return "", view{}, err
	}
	for _, t := range rows {
		cl.Topics++
		cl.Partitions += len(t.Partitions)
		cl.Offline += t.Offline()
		cl.UnderReplicated += t.UnderReplicated()
		cl.UnderMinISR += t.UnderMinISR()
	}
	if c.b.Authorized(c.caller(r), kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeCluster, auth.ClusterName) {
		cl.Charts = c.brokerCharts()
	}
	return "cluster", view{Title: "Cluster", Nav: "cluster", Data: cl}, nil
}

func (c *Console) topics(ctx context.Context, r *http.Request) (string, view, error) {
	rows, err := c.describeTopics(ctx, r, nil)
	if err != nil {
		return "", view{}, err
	}
	return "topics", view{Title: "Topics", Nav: "topics", Data: rows}, nil
}

func (c *Console) topic(ctx context.Context, r *http.Request) (string, view, error) {
	name := r.PathValue("topic")
	rows, err := c.describeTopics(ctx, r, []string{name})
	if err != nil {
		return "", view{}, err
	}
	if len(rows) != 1 {
		return "", view{}, fmt.Errorf("topic %q: %w", name, errNotFound)
	}
	if rows[0].Error != "" {
		return "", view{}, fmt.Errorf("topic %q: %s: %w", name, rows[0].Error, errNotFound)
	}
	return "topic", view{Title: "Topic " + name, Nav: "topics", Data: rows[0]}, nil
}

// describeTopics gathers the topics' metadata, offsets, sizes and
// configs (all topics when names is nil), sorted by name.
func (c *Console) describeTopics(ctx context.Context, r *http.Request, names []string) ([]topicRow, error) {
	md, err := c.metadata(ctx, r, names...)
	if err != nil {
		return nil, err
	}
	rows := topicRows(md)
	if err := c.fillOffsets(ctx, r, rows); err != nil {
		return nil, err
	}
	if err := c.fillSizes(ctx, r, rows); err != nil {
		return nil, err
	}
	if err := c.fillConfigs(ctx, r, rows); err != nil {
		return nil, err
	}
	return rows, nil
}

// topicRows are the topics of a Metadata answer, sorted by name, their
// partitions by number.
func topicRows(md *kmsg.MetadataResponse) []topicRow {
	var rows []topicRow
	for _, t := range md.Topics {
		row := topicRow{Name: deref(t.Topic), Internal: t.IsInternal, Rate: -1}
		if t.ErrorCode != 0 {
			row.Error = kerr.ErrorForCode(t.ErrorCode).Error()
		}
		for _, p := range t.Partitions {
			pr := partitionRow{Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, Replicas: p.Replicas,
				ISR: p.ISR, Offline: p.OfflineReplicas, LogStart: -1, HW: -1, LSO: -1, LogEnd: -1}
			if p.ErrorCode != 0 {
				pr.Error = kerr.ErrorForCode(p.ErrorCode).Error()
			}
			row.Partitions = append(row.Partitions, pr)
		}
		slices.SortFunc(row.Partitions, func(a, b partitionRow) int { return cmp.Compare(a.Partition, b.Partition) })
		rows = append(rows, row)
	}
	slices.SortFunc(rows, func(a, b topicRow) int { return strings.Compare(a.Name, b.Name) })
	return rows
}

// fillOffsets asks each partition's log start (earliest), high watermark
// (latest, read uncommitted) and last stable offset (latest, read
// committed). A partition the answer leaves out, or answers with an error,
// keeps -1 (shown as unknown).
func (c *Console) fillOffsets(ctx context.Context, r *http.Request, rows []topicRow) error {
	for _, q := range []struct {
		ts        int64
		isolation int8
		set       func(*partitionRow, int64)
	}{
		{-2, 0, func(p *partitionRow, o int64) { p.LogStart = o }},
		{-1, 0, func(p *partitionRow, o int64) { p.HW = o }},
		{-1, 1, func(p *partitionRow, o int64) { p.LSO = o }},
	} {
		if err := c.listOffsets(ctx, r, rows, q.ts, q.isolation, func(p *partitionRow, o int64, err error) {
			if err == nil {
				q.set(p, o)
			}
		}); err != nil {
			return err
		}
	}
	for i := range rows {
		rows[i].Records = rows[i].sum(func(p partitionRow) int64 {
			if p.HW < 0 || p.LogStart < 0 {
				return 0 // unknown
			}
			return p.HW - p.LogStart
		})
	}
	return nil
}

// listOffsets asks each partition of rows (the topics described without
// an error) its offset at timestamp ts (-2 earliest, -1 latest) and
// isolation, one ListOffsets a leader; set gets each partition's answer,
// its offset or its error (a leader that could not be asked, none).
func (c *Console) listOffsets(ctx context.Context, r *http.Request, rows []topicRow, ts int64, isolation int8,
	set func(p *partitionRow, offset int64, err error)) error {
	asked := described(rows)
	if err := c.setLeaders(ctx, r, asked); err != nil {
		return err
	}
	c.toLeaders(ctx, r, asked, func(part []topicRow) kmsg.Request {
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID, req.IsolationLevel = -1, isolation
		for _, t := range part {
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = t.Name
			for _, p := range t.Partitions {
				rp := kmsg.NewListOffsetsRequestTopicPartition()
				rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = p.Partition, ts, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
		}
		return req
	}, func(resp kmsg.Response) {
		for _, t := range resp.(*kmsg.ListOffsetsResponse).Topics {
			for _, p := range t.Partitions {
				if pr := findPartition(rows, t.Topic, p.Partition); pr != nil {
					set(pr, p.Offset, kerr.ErrorForCode(p.ErrorCode))
				}
			}
		}
	}, func(topic string, partition int32, err error) {
		if pr := findPartition(rows, topic, partition); pr != nil {
			set(pr, -1, err)
		}
	})
	return nil
}

// described are the topics of rows described without an error: the ones
// to ask more of.
func described(rows []topicRow) []topicRow {
	out := make([]topicRow, 0, len(rows))
	for _, t := range rows {
		if t.Error == "" {
			out = append(out, t)
		}
	}
	return out
}

// fillSizes adds each partition's bytes on its leader's disks
// (DescribeLogDirs of the leader), this broker's replica's log end and the
// bytes in the tier (when this broker holds a replica), and each topic's
// rate.
func (c *Console) fillSizes(ctx context.Context, r *http.Request, rows []topicRow) error {
	asked := described(rows)
	if err := c.setLeaders(ctx, r, asked); err != nil {
		return err
	}
	c.toLeaders(ctx, r, asked, func(part []topicRow) kmsg.Request {
		req := kmsg.NewPtrDescribeLogDirsRequest()
		for _, t := range part {
			rt := kmsg.NewDescribeLogDirsRequestTopic()
			rt.Topic, rt.Partitions = t.Name, t.numbers()
			req.Topics = append(req.Topics, rt)
		}
		return req
	}, func(resp kmsg.Response) {
		for _, d := range resp.(*kmsg.DescribeLogDirsResponse).Dirs {
			for _, t := range d.Topics {
				for _, p := range t.Partitions {
					if pr := findPartition(rows, t.Topic, p.Partition); pr != nil {
						pr.Bytes += p.Size
					}
				}
			}
		}
	}, func(string, int32, error) {}) // (its size unknown: not counted)
	for _, t := range described(rows) {
		for _, p := range t.Partitions {
			if d, err := c.b.DescribePartition(c.caller(r), t.Name, p.Partition, 0); err == nil {
				pr := findPartition(rows, t.Name, p.Partition)
				pr.Tiered, pr.LogEnd = tierBytes(d.TierObjects), d.Offsets.LogEndOffset
			}
		}
	}
	for i := range rows {
		rows[i].Bytes = rows[i].sum(func(p partitionRow) int64 { return p.Bytes })
		rows[i].Tiered = rows[i].sum(func(p partitionRow) int64 { return p.Tiered })
		if rate, ok := c.topicRate(rows[i].Name); ok {
			rows[i].Rate = rate
		}
	}
	return nil
}

func tierBytes(objs []broker.TierObject) (n int64) {
	for _, o := range objs {
		n += o.Size
	}
	return n
}

// fillConfigs adds each topic's cleanup.policy, retention.ms and
// min.insync.replicas, and all its configs when it is the only one.
func (c *Console) fillConfigs(ctx context.Context, r *http.Request, rows []topicRow) error {
	req := kmsg.NewPtrDescribeConfigsRequest()
	for _, t := range described(rows) {
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, t.Name
		if len(rows) > 1 {
			rr.ConfigNames = []string{"cleanup.policy", "retention.ms", "min.insync.replicas"}
		}
		req.Resources = append(req.Resources, rr)
	}
	if len(req.Resources) == 0 {
		return nil
	}
	resp, err := c.b.Request(ctx, c.caller(r), req)
	if err != nil {
		return err
	}
	for _, res := range resp.(*kmsg.DescribeConfigsResponse).Resources {
		i := slices.IndexFunc(rows, func(t topicRow) bool { return t.Name == res.ResourceName })
		if i < 0 || res.ErrorCode != 0 {
			continue
		}
		for _, cfg := range res.Configs {
			if len(rows) == 1 {
				src := strings.ReplaceAll(strings.ToLower(strings.TrimSuffix(cfg.Source.String(), "_CONFIG")), "_", " ")
				rows[i].Configs = append(rows[i].Configs, configRow{Name: cfg.Name, Value: deref(cfg.Value), Source: src})
			}
			switch cfg.Name {
			case "cleanup.policy":
				rows[i].Cleanup = deref(cfg.Value)
			case "retention.ms":
				rows[i].Retention = retention(deref(cfg.Value))
			case "min.insync.replicas":
				n, _ := strconv.Atoi(deref(cfg.Value))
				for j := range rows[i].Partitions {
					rows[i].Partitions[j].MinISR = n
				}
			}
		}
	}
	return nil
}

func findPartition(rows []topicRow, topic string, partition int32) *partitionRow {
	for i := range rows {
		if rows[i].Name != topic {
			continue
		}
		for j := range rows[i].Partitions {
			if rows[i].Partitions[j].Partition == partition {
				return &rows[i].Partitions[j]
			}
		}
	}
	return nil
}

// retention shows retention.ms in the largest whole unit ("forever" for -1).
func retention(ms string) string {
	n, err := strconv.ParseInt(ms, 10, 64)
	switch {
	case err != nil:
		return ms
	case n < 0:
		return "forever"
	}
	for _, u := range []struct {
		ms   int64
		name string
	}{{86_400_000, "d"}, {3_600_000, "h"}, {60_000, "min"}, {1000, "s"}} {
		if n >= u.ms && n%u.ms == 0 {
			return fmt.Sprintf("%d %s", n/u.ms, u.name)
		}
	}
	return fmt.Sprintf("%d ms", n)
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

func joinInt32s(vs []int32) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = strconv.Itoa(int(v))
	}
	return strings.Join(parts, ", ")
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func hostOf(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}
