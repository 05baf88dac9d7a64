package console

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Where a request goes. In a cluster a partition's offsets, records and
// producers are its leader's, a group's offsets and members its
// coordinator's, a transaction its coordinator's, and each broker lists
// only the groups and transactions it coordinates: the console asks the
// broker that knows, through its own broker (Requester.RequestTo), which
// forwards the request in an envelope to be authorized there as the
// caller's. Metadata, configs and the admin APIs are answered by any
// broker. On a single broker every answer is its own.

// requestTo asks broker node for the page's caller.
func (c *Console) requestTo(ctx context.Context, r *http.Request, node int32, req kmsg.Request) (kmsg.Response, error) {
	return c.b.RequestTo(ctx, c.caller(r), node, req)
}

// setLeaders sets the leader of every partition of rows from one Metadata
// of their topics; a partition the answer leaves out has none (-1).
func (c *Console) setLeaders(ctx context.Context, r *http.Request, rows []topicRow) error {
	if len(rows) == 0 {
		return nil
	}
	names := make([]string, len(rows))
	for i, t := range rows {
		names[i] = t.Name
	}
	md, err := c.metadata(ctx, r, names...)
	if err != nil {
		return err
	}
	for i := range rows {
		for j := range rows[i].Partitions {
			rows[i].Partitions[j].Leader = -1
		}
	}
	for _, t := range md.Topics {
		for _, p := range t.Partitions {
			if pr := findPartition(rows, deref(t.Topic), p.Partition); pr != nil && p.ErrorCode == 0 {
				pr.Leader = p.Leader
			}
		}
	}
	return nil
}

// byLeader splits rows' partitions by their Leader (-1: none), in the
// order of the leaders' ids.
func byLeader(rows []topicRow) ([]int32, map[int32][]topicRow) {
	split := map[int32][]topicRow{}
	for _, t := range rows {
		for _, p := range t.Partitions {
			part := split[p.Leader]
			if n := len(part); n == 0 || part[n-1].Name != t.Name {
				part = append(part, topicRow{Name: t.Name})
			}
			part[len(part)-1].Partitions = append(part[len(part)-1].Partitions, p)
			split[p.Leader] = part
		}
	}
	nodes := make([]int32, 0, len(split))
	for n := range split {
		nodes = append(nodes, n)
	}
	slices.Sort(nodes)
	return nodes, split
}

// numbers are the numbers of t's partitions.
func (t topicRow) numbers() []int32 {
	out := make([]int32, len(t.Partitions))
	for i, p := range t.Partitions {
		out[i] = p.Partition
	}
	return out
}

// errNoLeader is a partition without a leader to ask.
var errNoLeader = fmt.Errorf("no leader: %w", kerr.LeaderNotAvailable)

// toLeaders asks each leader of rows' partitions (their Leader set) the
// request ask makes of its share; a leader that cannot be asked, and the
// partitions without one, go to failed, partition by partition.
func (c *Console) toLeaders(ctx context.Context, r *http.Request, rows []topicRow,
	ask func(part []topicRow) kmsg.Request, answer func(kmsg.Response), failed func(topic string, partition int32, err error)) {
	nodes, split := byLeader(rows)
	for _, node := range nodes {
		part := split[node]
		err := errNoLeader
		if node >= 0 {
			var resp kmsg.Response
			if resp, err = c.requestTo(ctx, r, node, ask(part)); err == nil {
				answer(resp)
				continue
			}
		}
		for _, t := range part {
			for _, p := range t.Partitions {
				failed(t.Name, p.Partition, err)
			}
		}
	}
}

// leaderOf is the leader of one partition.
func (c *Console) leaderOf(ctx context.Context, r *http.Request, topic string, partition int32) (int32, error) {
	rows := []topicRow{{Name: topic, Partitions: []partitionRow{{Partition: partition}}}}
	if err := c.setLeaders(ctx, r, rows); err != nil {
		return -1, err
	}
	if l := rows[0].Partitions[0].Leader; l >= 0 {
		return l, nil
	}
	return -1, fmt.Errorf("%s-%d: %w", topic, partition, errNoLeader)
}

// Coordinator key types (FindCoordinator).
const (
	groupKey int8 = 0
	txnKey   int8 = 1
)

// coordinated is a key's coordinator, or why it has none.
type coordinated struct {
	node int32
	err  error
}

// coordinators finds the coordinator of each key (one FindCoordinator).
func (c *Console) coordinators(ctx context.Context, r *http.Request, typ int8, keys []string) (map[string]coordinated, error) {
	out := make(map[string]coordinated, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorType, req.CoordinatorKeys = typ, keys
	resp, err := c.b.Request(ctx, c.caller(r), req)
	if err != nil {
		return nil, err
	}
	for _, k := range resp.(*kmsg.FindCoordinatorResponse).Coordinators {
		out[k.Key] = coordinated{node: k.NodeID, err: codeErr(k.ErrorCode, k.ErrorMessage)}
	}
	for _, k := range keys {
		if _, ok := out[k]; !ok {
			out[k] = coordinated{node: -1, err: kerr.CoordinatorNotAvailable}
		}
	}
	return out, nil
}

// coordinator is one key's coordinator.
func (c *Console) coordinator(ctx context.Context, r *http.Request, typ int8, key string) (int32, error) {
	co, err := c.coordinators(ctx, r, typ, []string{key})
	if err != nil {
		return -1, err
	}
	return co[key].node, co[key].err
}

// byCoordinator splits keys by coordinator, in the order of the
// coordinators' ids; the keys without one are given to failed.
func (c *Console) byCoordinator(ctx context.Context, r *http.Request, typ int8, keys []string,
	failed func(key string, err error)) ([]int32, map[int32][]string, error) {
	co, err := c.coordinators(ctx, r, typ, keys)
	if err != nil {
		return nil, nil, err
	}
	split := map[int32][]string{}
	for _, k := range keys {
		if co[k].err != nil {
			failed(k, co[k].err)
			continue
		}
		split[co[k].node] = append(split[co[k].node], k)
	}
	nodes := make([]int32, 0, len(split))
	for n := range split {
		nodes = append(nodes, n)
	}
	slices.Sort(nodes)
	return nodes, split, nil
}

// everyBroker asks every broker of the cluster the request ask makes
// (ListGroups, ListTransactions: each lists what it coordinates). A broker
// that cannot answer does not stop the others: missed names each such
// broker and why, for the page to say what its list lacks; err is the
// cluster's broker list's failure.
func (c *Console) everyBroker(ctx context.Context, r *http.Request, ask func() kmsg.Request, answer func(kmsg.Response) error) (missed []string, err error) {
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{} // none: only the brokers
	resp, err := c.b.Request(ctx, c.caller(r), req)
	if err != nil {
		return nil, err
	}
	brokers := resp.(*kmsg.MetadataResponse).Brokers
	slices.SortFunc(brokers, func(a, b kmsg.MetadataResponseBroker) int { return int(a.NodeID - b.NodeID) })
	for _, b := range brokers {
		resp, err := c.requestTo(ctx, r, b.NodeID, ask())
		if err == nil {
			err = answer(resp)
		}
		if err != nil {
			missed = append(missed, fmt.Sprintf("broker %d (%v)", b.NodeID, err))
		}
	}
	return missed, nil
}

// missedWarning is what a list page says of the brokers everyBroker
// could not ask.
func missedWarning(missed []string, what string) string {
	if len(missed) == 0 {
		return ""
	}
	return fmt.Sprintf("Not every broker answered: the %s that %s coordinates are not listed.", what, strings.Join(missed, ", "))
}
