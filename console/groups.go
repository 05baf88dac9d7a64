package console

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupRow is a consumer group: its state, protocol, members and lag.
type groupRow struct {
	ID           string
	State        string
	Type         string // "classic" or "consumer"
	ProtocolType string
	Protocol     string
	Members      []memberRow
	Offsets      []offsetRow
	Lag          int64 // summed over the partitions with a commit and a known end
	Error        string
	// LagChart is its total lag sampled over the last hour (its page only).
	LagChart *chart
}

type memberRow struct {
	ID, InstanceID, ClientID, Host string
	Assigned                       []string // topic-partition names
}

// offsetRow is a group's committed offset of a partition and its lag
// behind the partition's high watermark.
type offsetRow struct {
	Topic     string
	Partition int32
	Committed int64
	End       int64 // -1: unknown
	Lag       int64 // -1: unknown
	Metadata  string
}

func (c *Console) groups(ctx context.Context, r *http.Request) (string, view, error) {
	lg, missed, err := c.listGroups(ctx, r)
	if err != nil {
		return "", view{}, err
	}
	var rows []groupRow
	for _, g := range lg {
		rows = append(rows, groupRow{ID: g.Group, State: g.GroupState, Type: g.GroupType, ProtocolType: g.ProtocolType})
	}
	if err := c.fillGroupOffsets(ctx, r, rows); err != nil {
		return "", view{}, err
	}
	if err := c.fillLag(ctx, r, rows); err != nil {
		return "", view{}, err
	}
	slices.SortFunc(rows, func(a, b groupRow) int { return strings.Compare(a.ID, b.ID) })
	return "groups", view{Title: "Consumer groups", Nav: "groups", Data: rows, Warning: missedWarning(missed, "groups")}, nil
}

// listGroups lists every broker's groups (each lists the ones it
// coordinates), sorted by id; missed names the brokers that did not
// answer.
func (c *Console) listGroups(ctx context.Context, r *http.Request) (_ []kmsg.ListGroupsResponseGroup, missed []string, _ error) {
	var out []kmsg.ListGroupsResponseGroup
	missed, err := c.everyBroker(ctx, r, func() kmsg.Request { return kmsg.NewPtrListGroupsRequest() }, func(resp kmsg.Response) error {
		lg := resp.(*kmsg.ListGroupsResponse)
		out = append(out, lg.Groups...)
		return kerr.ErrorForCode(lg.ErrorCode)
	})
	slices.SortFunc(out, func(a, b kmsg.ListGroupsResponseGroup) int { return strings.Compare(a.Group, b.Group) })
	return slices.CompactFunc(out, func(a, b kmsg.ListGroupsResponseGroup) bool { return a.Group == b.Group }), missed, err
}

// describeGroup is DescribeGroups of one group, asked of its coordinator.
func (c *Console) describeGroup(ctx context.Context, r *http.Request, id string) (kmsg.DescribeGroupsResponseGroup, error) {
	node, err := c.coordinator(ctx, r, groupKey, id)
	if err != nil {
		return kmsg.DescribeGroupsResponseGroup{}, fmt.Errorf("group %s: %w", id, err)
	}
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{id}
	resp, err := c.requestTo(ctx, r, node, req)
	if err != nil {
		return kmsg.DescribeGroupsResponseGroup{}, err
	}
	dg := resp.(*kmsg.DescribeGroupsResponse)
	if len(dg.Groups) != 1 {
		return kmsg.DescribeGroupsResponseGroup{}, fmt.Errorf("group %q: %d groups described: %w", id, len(dg.Groups), errNotFound)
	}
	return dg.Groups[0], kerr.ErrorForCode(dg.Groups[0].ErrorCode)
}

func (c *Console) group(ctx context.Context, r *http.Request) (string, view, error) {
	id := r.PathValue("group")
	g, err := c.describeGroup(ctx, r, id)
	if ke := (*kerr.Error)(nil); errors.As(err, &ke) { // (not one of the caller's, or not there)
		return "", view{}, fmt.Errorf("group %q: %v: %w", id, err, errNotFound)
	}
	if err != nil {
		return "", view{}, err
	}
	if g.State == "Dead" {
		return "", view{}, fmt.Errorf("group %q does not exist: %w", id, errNotFound)
	}
	row := groupRow{ID: id, State: g.State, ProtocolType: g.ProtocolType, Protocol: g.Protocol}
	for _, m := range g.Members {
		mr := memberRow{ID: m.MemberID, InstanceID: deref(m.InstanceID), ClientID: m.ClientID, Host: m.ClientHost}
		var a kmsg.ConsumerMemberAssignment
		if g.ProtocolType == "consumer" && a.ReadFrom(m.MemberAssignment) == nil {
			for _, t := range a.Topics {
				for _, p := range t.Partitions {
					mr.Assigned = append(mr.Assigned, fmt.Sprintf("%s-%d", t.Topic, p))
				}
			}
		}
		row.Members = append(row.Members, mr)
	}
	groups := []groupRow{row}
	if err := c.fillGroupOffsets(ctx, r, groups); err != nil {
		return "", view{}, err
	}
	if err := c.fillLag(ctx, r, groups); err != nil {
		return "", view{}, err
	}
	ch := c.lagChart(id)
	groups[0].LagChart = &ch
	return "group", view{Title: "Group " + id, Nav: "groups", Data: groups[0]}, nil
}

// fillGroupOffsets reads the groups' committed offsets: one OffsetFetch
// of every partition of its groups a coordinator. A group whose
// coordinator could not be asked has its Error.
func (c *Console) fillGroupOffsets(ctx context.Context, r *http.Request, groups []groupRow) error {
	index := make(map[string]int, len(groups))
	ids := make([]string, len(groups))
	for i, g := range groups {
		index[g.ID], ids[i] = i, g.ID
	}
	failed := func(id string, err error) { groups[index[id]].Error = err.Error() }
	nodes, split, err := c.byCoordinator(ctx, r, groupKey, ids, failed)
	if err != nil {
		return err
	}
	var names map[[16]byte]string
	for _, node := range nodes {
		req := kmsg.NewPtrOffsetFetchRequest()
		for _, id := range split[node] {
			rg := kmsg.NewOffsetFetchRequestGroup()
			rg.Group = id // Topics nil: every partition with a commit
			req.Groups = append(req.Groups, rg)
		}
		resp, err := c.requestTo(ctx, r, node, req)
		if err != nil {
			for _, id := range split[node] {
				failed(id, err)
			}
			continue
		}
		if err := c.setGroupOffsets(ctx, r, resp.(*kmsg.OffsetFetchResponse), groups, index, &names); err != nil {
			return err
		}
	}
	return nil
}

// setGroupOffsets sets the groups' offsets an OffsetFetch answered. From
// v10 it names topics by id: names, asked once, names them (a topic the
// caller may not describe, or gone, is left out).
func (c *Console) setGroupOffsets(ctx context.Context, r *http.Request, resp *kmsg.OffsetFetchResponse, groups []groupRow,
	index map[string]int, names *map[[16]byte]string) error {
	for _, rgp := range resp.Groups {
		for i, t := range rgp.Topics {
			if t.Topic != "" {
				continue
			}
			if *names == nil {
				md, err := c.metadata(ctx, r)
				if err != nil {
					return err
				}
				*names = make(map[[16]byte]string, len(md.Topics))
				for _, mt := range md.Topics {
					(*names)[mt.TopicID] = deref(mt.Topic)
				}
			}
			rgp.Topics[i].Topic = (*names)[t.TopicID]
		}
	}
	for _, rgp := range resp.Groups {
		i, ok := index[rgp.Group]
		if !ok {
			continue
		}
		g := &groups[i]
		if err := kerr.ErrorForCode(rgp.ErrorCode); err != nil {
			g.Error = err.Error()
			continue
		}
		for _, t := range rgp.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 || p.Offset < 0 || t.Topic == "" {
					continue
				}
				g.Offsets = append(g.Offsets, offsetRow{Topic: t.Topic, Partition: p.Partition, Committed: p.Offset,
					End: -1, Lag: -1, Metadata: deref(p.Metadata)})
			}
		}
		slices.SortFunc(g.Offsets, func(a, b offsetRow) int {
			return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
		})
	}
	return nil
}

// fillLag sets every committed offset's lag behind its partition's high
// watermark, and each group's total: one ListOffsets for all the groups'
// partitions.
func (c *Console) fillLag(ctx context.Context, r *http.Request, groups []groupRow) error {
	var rows []topicRow
	for _, g := range groups {
		for _, o := range g.Offsets {
			if findPartition(rows, o.Topic, o.Partition) != nil {
				continue
			}
			i := slices.IndexFunc(rows, func(t topicRow) bool { return t.Name == o.Topic })
			if i < 0 {
				i, rows = len(rows), append(rows, topicRow{Name: o.Topic})
			}
			rows[i].Partitions = append(rows[i].Partitions, partitionRow{Partition: o.Partition, HW: -1})
		}
	}
	if err := c.listOffsets(ctx, r, rows, -1, 0, func(p *partitionRow, o int64, err error) {
		if err == nil {
			p.HW = o
		}
	}); err != nil {
		return err
	}
	for i := range groups {
		g := &groups[i]
		g.Lag = 0
		for j := range g.Offsets {
			o := &g.Offsets[j]
			if p := findPartition(rows, o.Topic, o.Partition); p != nil && p.HW >= 0 {
				o.End, o.Lag = p.HW, max(p.HW-o.Committed, 0)
				g.Lag += o.Lag
			}
		}
	}
	return nil
}

// resetTargets are the places a group's offsets may be reset to, as
// kafka-consumer-groups.sh --reset-offsets names them.
var resetTargets = []string{"earliest", "latest", "time", "offset"}

func (c *Console) planReset(r *http.Request) (string, error) {
	to, value := r.PostForm.Get("to"), strings.TrimSpace(r.PostForm.Get("value"))
	where := "every partition it has committed"
	if t := strings.TrimSpace(r.PostForm.Get("topic")); t != "" {
		where = "every partition of " + t
	}
	g := r.PathValue("group")
	switch to {
	case "earliest", "latest":
		return fmt.Sprintf("Reset group %s's offsets of %s to the %s offset.", g, where, to), nil
	case "time":
		if _, err := time.ParseInLocation(timeLayout, value, time.UTC); err != nil {
			return "", fmt.Errorf("time %q (YYYY-MM-DDThh:mm, UTC): %w", value, errBadRequest)
		}
		return fmt.Sprintf("Reset group %s's offsets of %s to the first record at or after %s UTC.", g, where, value), nil
	case "offset":
		if _, err := strconv.ParseInt(value, 10, 64); err != nil {
			return "", fmt.Errorf("offset %q: %w", value, errBadRequest)
		}
		return fmt.Sprintf("Reset group %s's offsets of %s to %s (within each partition's log).", g, where, value), nil
	}
	return "", fmt.Errorf("reset to %q: one of %s: %w", to, strings.Join(resetTargets, ", "), errBadRequest)
}

// resetOffsets commits the group's new offsets, as Kafka's tool does: only
// while the group has no members (their commits would overwrite it), each
// partition's new offset within its log (an offset below the log start is
// the log start, past the end the end; a time after the last record is
// the end).
func (c *Console) resetOffsets(ctx context.Context, r *http.Request) (string, string, error) {
	g, to := r.PathValue("group"), r.PostForm.Get("to")
	d, err := c.describeGroup(ctx, r, g)
	if err != nil {
		return "", "", fmt.Errorf("group %s: %w", g, err)
	}
	if len(d.Members) > 0 {
		return "", "", fmt.Errorf("group %s has %d members (state %s): its offsets are reset only while it has none; stop its consumers first: %w",
			g, len(d.Members), d.State, errConflict)
	}
	var rows []topicRow
	if topic := strings.TrimSpace(r.PostForm.Get("topic")); topic != "" {
		if rows, err = c.describeTopics(ctx, r, []string{topic}); err != nil {
			return "", "", err
		}
		if len(rows) != 1 || rows[0].Error != "" {
			return "", "", fmt.Errorf("topic %s: %w", topic, errNotFound)
		}
	} else {
		groups := []groupRow{{ID: g}}
		if err := c.fillGroupOffsets(ctx, r, groups); err != nil {
			return "", "", err
		}
		for _, o := range groups[0].Offsets {
			i := slices.IndexFunc(rows, func(t topicRow) bool { return t.Name == o.Topic })
			if i < 0 {
				i, rows = len(rows), append(rows, topicRow{Name: o.Topic})
			}
			rows[i].Partitions = append(rows[i].Partitions, partitionRow{Partition: o.Partition, LogStart: -1, HW: -1, LSO: -1})
		}
		if len(rows) == 0 {
			return "", "", fmt.Errorf("group %s has no committed offsets: name a topic: %w", g, errBadRequest)
		}
		if err := c.fillOffsets(ctx, r, rows); err != nil {
			return "", "", err
		}
	}
	// The new offset of each partition, in LSO's place.
	target := map[*partitionRow]int64{}
	switch to {
	case "earliest", "latest", "offset":
		n, _ := strconv.ParseInt(strings.TrimSpace(r.PostForm.Get("value")), 10, 64)
		for _, t := range rows {
			for j := range t.Partitions {
				p := &t.Partitions[j]
				switch to {
				case "earliest":
					target[p] = p.LogStart
				case "latest":
					target[p] = p.HW
				default:
					target[p] = min(max(n, p.LogStart), p.HW)
				}
			}
		}
	case "time":
		ts, _ := time.ParseInLocation(timeLayout, strings.TrimSpace(r.PostForm.Get("value")), time.UTC)
		if err := c.listOffsets(ctx, r, rows, ts.UnixMilli(), 0, func(p *partitionRow, o int64, err error) {
			if err == nil {
				target[p] = o
				if o < 0 {
					target[p] = p.HW
				}
			}
		}); err != nil {
			return "", "", err
		}
	}
	// (OffsetCommit names topics by id from v10.)
	names := make([]string, len(rows))
	for i, t := range rows {
		names[i] = t.Name
	}
	ids, err := c.topicIDs(ctx, r, names...)
	if err != nil {
		return "", "", err
	}
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation, req.MemberID = g, -1, ""
	n := 0
	for _, t := range rows {
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic, rt.TopicID = t.Name, ids[t.Name]
		for j := range t.Partitions {
			p := &t.Partitions[j]
			o, ok := target[p]
			if !ok || o < 0 {
				return "", "", fmt.Errorf("%s-%d: its offsets are unknown (%s): nothing was reset", t.Name, p.Partition, p.Error)
			}
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch = p.Partition, o, -1
			rt.Partitions = append(rt.Partitions, rp)
			n++
		}
		req.Topics = append(req.Topics, rt)
	}
	node, err := c.coordinator(ctx, r, groupKey, g)
	if err != nil {
		return "", "", fmt.Errorf("group %s: %w", g, err)
	}
	resp, err := c.requestTo(ctx, r, node, req)
	if err != nil {
		return "", "", err
	}
	for _, t := range resp.(*kmsg.OffsetCommitResponse).Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return "", "", fmt.Errorf("committing %s-%d for group %s: %w", t.Topic, p.Partition, g, err)
			}
		}
	}
	return fmt.Sprintf("Reset group %s's offsets of %d partitions.", g, n), "", nil
}
