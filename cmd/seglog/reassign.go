package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/cluster"
)

// The replication throttle configs kafka-reassign-partitions.sh sets.
const (
	leaderRate       = "leader.replication.throttled.rate"
	followerRate     = "follower.replication.throttled.rate"
	leaderReplicas   = "leader.replication.throttled.replicas"
	followerReplicas = "follower.replication.throttled.replicas"
)

func newReassignCmd() *cobra.Command {
	var (
		client                              clientFlags
		file, topicsFile, brokerList        string
		execute, verify, cancel, generate   bool
		additional                          bool
		throttle                            int64
		preserveThrottles, disableRackAware bool
	)
	cmd := &cobra.Command{
		Use:   "reassign --bootstrap-server H:P (--reassignment-json-file F (--execute [--throttle B] [--additional] | --verify | --cancel) | --topics-to-move-json-file F --broker-list 1,2,3 --generate)",
		Short: "Move partitions between brokers of a running cluster, as kafka-reassign-partitions.sh",
		Long: `reassign moves partitions between the brokers of a running cluster
(AlterPartitionReassignments, ListPartitionReassignments), taking and printing
Kafka's JSON: {"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2,3]}]}.

  --execute    start the reassignments of --reassignment-json-file (refused while
               others are in progress, unless --additional); prints the
               current assignment first (to roll back with). The new replicas
               copy the log, join the ISR, and then the old ones are removed.
               --throttle B limits the copy to B bytes/s on each broker
               involved (leader. and follower.replication.throttled.rate, with
               the moving replicas named in the topics' throttled.replicas).
  --verify     say of each partition whether its reassignment is completed or
               still in progress; once all are, the throttles are cleared
               (unless --preserve-throttles).
  --cancel     cancel the reassignments in progress of the file's partitions:
               their replicas are the old ones again.
  --generate   propose an assignment of the topics of --topics-to-move-json-file
               ({"version":1,"topics":[{"topic":"t"}]}) over --broker-list, with
               Kafka's rack-aware round robin; nothing is changed.

It exits 1 if a partition's reassignment failed to start or cancel.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if client.bootstrap == "" {
				return errors.New("--bootstrap-server is required: reassign asks a running broker")
			}
			n := 0
			for _, b := range []bool{execute, verify, cancel, generate} {
				if b {
					n++
				}
			}
			if n != 1 {
				return errors.New("one of --execute, --verify, --cancel or --generate")
			}
			if (file != "") == generate || generate && (topicsFile == "" || brokerList == "") {
				return errors.New("--execute, --verify and --cancel take --reassignment-json-file; --generate takes --topics-to-move-json-file and --broker-list")
			}
			c, err := client.dial()
			if err != nil {
				return err
			}
			defer c.close()
			out := cmd.OutOrStdout()
			if generate {
				return generateReassignment(c, out, topicsFile, brokerList, disableRackAware)
			}
			plan, err := readReassignment(file)
			if err != nil {
				return err
			}
			switch {
			case execute:
				return executeReassignment(c, out, plan, throttle, additional)
			case verify:
				return verifyReassignment(c, out, plan, preserveThrottles)
			}
			return cancelReassignment(c, out, plan)
		},
	}
	client.add(cmd)
	f := cmd.Flags()
	f.StringVar(&file, "reassignment-json-file", "", "the partitions' new replicas, Kafka's JSON")
	f.BoolVar(&execute, "execute", false, "start the reassignments")
	f.BoolVar(&verify, "verify", false, "say whether the reassignments are complete (and then clear the throttles)")
	f.BoolVar(&cancel, "cancel", false, "cancel the reassignments in progress")
	f.BoolVar(&generate, "generate", false, "propose an assignment (changes nothing)")
	f.StringVar(&topicsFile, "topics-to-move-json-file", "", `with --generate: {"version":1,"topics":[{"topic":"t"}]}`)
	f.StringVar(&brokerList, "broker-list", "", "with --generate: the brokers to place replicas on, as 1,2,3")
	f.Int64Var(&throttle, "throttle", -1, "with --execute: the copy's bytes/s on each broker involved")
	f.BoolVar(&preserveThrottles, "preserve-throttles", false, "with --verify: leave the throttles set")
	f.BoolVar(&additional, "additional", false, "with --execute: start these reassignments although others are in progress")
	f.BoolVar(&disableRackAware, "disable-rack-aware", false, "with --generate: ignore the brokers' racks")
	return cmd
}

// movedPartition is one partition of Kafka's reassignment JSON.
type movedPartition struct {
	Topic     string   `json:"topic"`
	Partition int32    `json:"partition"`
	Replicas  []int32  `json:"replicas"`
	LogDirs   []string `json:"log_dirs,omitempty"`
}

// reassignment is Kafka's reassignment JSON.
type reassignment struct {
	Version    int              `json:"version"`
	Partitions []movedPartition `json:"partitions"`
}

func (p movedPartition) String() string { return fmt.Sprintf("%s-%d", p.Topic, p.Partition) }

// readReassignment reads and checks a reassignment file.
func readReassignment(path string) (reassignment, error) {
	var plan reassignment
	data, err := os.ReadFile(path)
	if err != nil {
		return plan, err
	}
	if err := json.Unmarshal(data, &plan); err != nil {
		return plan, fmt.Errorf("%s: %w", path, err)
	}
	if len(plan.Partitions) == 0 {
		return plan, fmt.Errorf("%s: no partitions", path)
	}
	seen := map[string]bool{}
	for _, p := range plan.Partitions {
		switch {
		case p.Topic == "" || p.Partition < 0:
			return plan, fmt.Errorf("%s: a partition needs a topic and a partition of 0 or more", path)
		case seen[p.String()]:
			return plan, fmt.Errorf("%s: %s is given twice", path, p)
		case len(p.Replicas) == 0:
			return plan, fmt.Errorf("%s: %s has no replicas", path, p)
		case slices.ContainsFunc(p.LogDirs, func(d string) bool { return d != "any" }):
			return plan, fmt.Errorf("%s: %s: log_dirs other than \"any\" (one log directory per broker here)", path, p)
		}
		seen[p.String()] = true
	}
	return plan, nil
}

// currentAssignment is the plan's partitions' replicas now, as Kafka's
// JSON.
func currentAssignment(md kadm.Metadata, plan reassignment) (reassignment, error) {
	cur := reassignment{Version: 1}
	for _, p := range plan.Partitions {
		pd, ok := md.Topics[p.Topic].Partitions[p.Partition]
		if !ok {
			return cur, fmt.Errorf("%s: no such partition", p)
		}
		cur.Partitions = append(cur.Partitions, movedPartition{Topic: p.Topic, Partition: p.Partition, Replicas: pd.Replicas, LogDirs: anyDirs(len(pd.Replicas))})
	}
	return cur, nil
}

func anyDirs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "any"
	}
	return out
}

// executeReassignment starts the plan, as kafka-reassign-partitions.sh
// --execute: the current assignment printed to roll back with, the
// throttles set when asked, then the reassignments.
func executeReassignment(c *adminConn, out io.Writer, plan reassignment, throttle int64, additional bool) error {
	md, err := c.adm.Metadata(c.ctx, topicsOf(plan)...)
	if err != nil {
		return err
	}
	if !additional {
		resp, err := kmsg.NewPtrListPartitionReassignmentsRequest().RequestWith(c.ctx, c.cl)
		if err != nil {
			return err
		}
		if len(resp.Topics) > 0 {
			return errors.New("cannot execute because there is an existing partition assignment; use --additional to start these in addition to the existing ones")
		}
	}
	cur, err := currentAssignment(md, plan)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "Current partition replica assignment")
	fmt.Fprintln(out)
	if err := printJSON(out, cur); err != nil {
		return err
	}
	fmt.Fprintln(out)
	fmt.Fprintln(out, "Save this to use as the --reassignment-json-file option during rollback")
	if throttle >= 0 {
		if err := setThrottles(c, plan, cur, throttle); err != nil {
			return err
		}
		fmt.Fprintln(out, "Warning: You must run --verify periodically, until the reassignment completes, to ensure the throttle is removed.")
		fmt.Fprintf(out, "The inter-broker throttle limit was set to %d B/s\n", throttle)
	}
	var req kadm.AlterPartitionAssignmentsReq
	for _, p := range plan.Partitions {
		req.Assign(p.Topic, p.Partition, p.Replicas)
	}
	return reportAlter(c, out, plan, req, "Successfully started partition reassignments for %s\n")
}

// cancelReassignment cancels the plan's reassignments in progress.
func cancelReassignment(c *adminConn, out io.Writer, plan reassignment) error {
	// (Metadata first: the client learns the brokers and the controller,
	// which the reassignment requests go to, from the broker it was given.)
	if _, err := c.adm.Metadata(c.ctx, topicsOf(plan)...); err != nil {
		return err
	}
	listed, err := c.adm.ListPartitionReassignments(c.ctx, setOf(plan))
	if err != nil {
		return err
	}
	var req kadm.AlterPartitionAssignmentsReq
	var active reassignment
	for _, p := range plan.Partitions {
		if _, ok := listed[p.Topic][p.Partition]; ok {
			req.CancelAssign(p.Topic, p.Partition)
			active.Partitions = append(active.Partitions, p)
		}
	}
	if len(active.Partitions) == 0 {
		fmt.Fprintln(out, "None of the specified partition moves are active.")
		return nil
	}
	return reportAlter(c, out, active, req, "Successfully cancelled partition reassignments for: %s\n")
}

// reportAlter sends req and prints the partitions it started (or
// cancelled) with done, and each failure.
func reportAlter(c *adminConn, out io.Writer, plan reassignment, req kadm.AlterPartitionAssignmentsReq, done string) error {
	rs, err := c.adm.AlterPartitionAssignments(c.ctx, req)
	if err != nil {
		return err
	}
	var ok, failed []string
	for _, p := range plan.Partitions {
		r, found := rs[p.Topic][p.Partition]
		switch {
		case !found:
			failed = append(failed, fmt.Sprintf("%s: not answered", p))
		case r.Err != nil:
			failed = append(failed, fmt.Sprintf("%s: %v %s", p, r.Err, r.ErrMessage))
		default:
			ok = append(ok, p.String())
		}
	}
	if len(ok) > 0 {
		fmt.Fprintf(out, done, strings.Join(ok, ","))
	}
	for _, f := range failed {
		fmt.Fprintf(out, "Error reassigning partition(s): %s\n", f)
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d partition reassignment(s) failed", len(failed))
	}
	return nil
}

// verifyReassignment says of each partition of the plan whether it is
// done, and clears the throttles once all are.
func verifyReassignment(c *adminConn, out io.Writer, plan reassignment, preserve bool) error {
	md, err := c.adm.Metadata(c.ctx, topicsOf(plan)...)
	if err != nil {
		return err
	}
	listed, err := c.adm.ListPartitionReassignments(c.ctx, setOf(plan))
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "Status of partition reassignment:")
	complete := true
	for _, p := range plan.Partitions {
		pd, exists := md.Topics[p.Topic].Partitions[p.Partition]
		_, moving := listed[p.Topic][p.Partition]
		switch {
		case moving:
			complete = false
			fmt.Fprintf(out, "Reassignment of partition %s is still in progress.\n", p)
		case exists && slices.Equal(pd.Replicas, p.Replicas):
			fmt.Fprintf(out, "Reassignment of partition %s is completed.\n", p)
		default:
			complete = false
			fmt.Fprintf(out, "There is no active reassignment of partition %s, but replica set is %s rather than %s.\n",
				p, ids(pd.Replicas), ids(p.Replicas))
		}
	}
	if !complete || preserve {
		return nil
	}
	fmt.Fprintln(out)
	return clearThrottles(c, out, md, plan)
}

// setThrottles sets the rate on every broker the plan involves and names
// the moving replicas in their topics' throttled replicas: the current
// ones as leaders, the new ones as followers (Kafka's rule).
func setThrottles(c *adminConn, plan, cur reassignment, rate int64) error {
	brokers := map[int32]bool{}
	leaders, followers := map[string][]string{}, map[string][]string{}
	for i, p := range plan.Partitions {
		old := cur.Partitions[i].Replicas
		for _, r := range old {
			brokers[r] = true
			leaders[p.Topic] = append(leaders[p.Topic], fmt.Sprintf("%d:%d", p.Partition, r))
		}
		for _, r := range p.Replicas {
			brokers[r] = true
			if !slices.Contains(old, r) {
				followers[p.Topic] = append(followers[p.Topic], fmt.Sprintf("%d:%d", p.Partition, r))
			}
		}
	}
	v := strconv.FormatInt(rate, 10)
	var alters []kadm.AlterConfig
	alters = append(alters, kadm.AlterConfig{Name: leaderRate, Value: &v}, kadm.AlterConfig{Name: followerRate, Value: &v})
	for _, b := range slices.Sorted(maps.Keys(brokers)) {
		rs, err := c.adm.AlterBrokerConfigs(c.ctx, alters, b)
		if err := alterErr(rs, err); err != nil {
			return fmt.Errorf("throttling broker %d: %w", b, err)
		}
	}
	for _, t := range topicsOf(plan) {
		l, f := strings.Join(leaders[t], ","), strings.Join(followers[t], ",")
		ac := []kadm.AlterConfig{{Name: leaderReplicas, Value: &l}}
		if f != "" {
			ac = append(ac, kadm.AlterConfig{Name: followerReplicas, Value: &f})
		}
		rs, err := c.adm.AlterTopicConfigs(c.ctx, ac, t)
		if err := alterErr(rs, err); err != nil {
			return fmt.Errorf("throttling topic %s: %w", t, err)
		}
	}
	return nil
}

// clearThrottles removes the throttles of every broker and of the plan's
// topics, as --verify does once the reassignments are complete.
func clearThrottles(c *adminConn, out io.Writer, md kadm.Metadata, plan reassignment) error {
	var brokers []int32
	del := []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: leaderRate}, {Op: kadm.DeleteConfig, Name: followerRate}}
	for _, b := range md.Brokers {
		brokers = append(brokers, b.NodeID)
	}
	slices.Sort(brokers)
	for _, b := range md.Brokers {
		rs, err := c.adm.AlterBrokerConfigs(c.ctx, del, b.NodeID)
		if err := alterErr(rs, err); err != nil {
			return fmt.Errorf("clearing broker %d's throttle: %w", b.NodeID, err)
		}
	}
	fmt.Fprintf(out, "Clearing broker-level throttles on brokers %s\n", ids(brokers))
	for _, t := range topicsOf(plan) {
		rs, err := c.adm.AlterTopicConfigs(c.ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: leaderReplicas}, {Op: kadm.DeleteConfig, Name: followerReplicas}}, t)
		if err := alterErr(rs, err); err != nil {
			return fmt.Errorf("clearing topic %s's throttle: %w", t, err)
		}
		fmt.Fprintf(out, "Clearing topic-level throttles on topic %s\n", t)
	}
	return nil
}

// alterErr is an AlterConfigs answer's first failure (the request's, or
// a resource's with its message), or nil.
func alterErr(rs kadm.AlterConfigsResponses, err error) error {
	if err != nil {
		return err
	}
	for _, r := range rs {
		if r.Err == nil {
			continue
		}
		if r.ErrMessage != "" {
			return fmt.Errorf("%s: %w: %s", r.Name, r.Err, r.ErrMessage)
		}
		return fmt.Errorf("%s: %w", r.Name, r.Err)
	}
	return nil
}

// generateReassignment proposes an assignment of the topics over the
// brokers, as --generate does.
func generateReassignment(c *adminConn, out io.Writer, topicsFile, brokerList string, noRacks bool) error {
	data, err := os.ReadFile(topicsFile)
	if err != nil {
		return err
	}
	var doc struct {
		Topics []struct {
			Topic string `json:"topic"`
		} `json:"topics"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("%s: %w", topicsFile, err)
	}
	var topics []string
	for _, t := range doc.Topics {
		if t.Topic == "" {
			return fmt.Errorf("%s: a topic without a name", topicsFile)
		}
		topics = append(topics, t.Topic)
	}
	if len(topics) == 0 {
		return fmt.Errorf("%s: no topics", topicsFile)
	}
	var ids []int32
	for _, s := range strings.Split(brokerList, ",") {
		id, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
		if err != nil {
			return fmt.Errorf("--broker-list %q: %w", brokerList, err)
		}
		ids = append(ids, int32(id))
	}
	md, err := c.adm.Metadata(c.ctx, topics...)
	if err != nil {
		return err
	}
	var brokers []cluster.Placed
	for _, id := range ids {
		i := slices.IndexFunc(md.Brokers, func(b kadm.BrokerDetail) bool { return b.NodeID == id })
		if i < 0 {
			return fmt.Errorf("--broker-list: broker %d is not in the cluster", id)
		}
		p := cluster.Placed{ID: id}
		if b := md.Brokers[i]; b.Rack != nil && !noRacks {
			p.Rack = *b.Rack
		}
		brokers = append(brokers, p)
	}
	cur, proposed := reassignment{Version: 1}, reassignment{Version: 1}
	for _, t := range slices.Sorted(slices.Values(topics)) {
		td, ok := md.Topics[t]
		if !ok || td.Err != nil {
			return fmt.Errorf("topic %s: no such topic", t)
		}
		parts := td.Partitions.Sorted()
		for _, p := range parts {
			cur.Partitions = append(cur.Partitions, movedPartition{Topic: t, Partition: p.Partition, Replicas: p.Replicas, LogDirs: anyDirs(len(p.Replicas))})
		}
		placed, err := cluster.Place(brokers, len(parts), len(parts[0].Replicas), 0, -1, nil)
		if err != nil {
			return fmt.Errorf("topic %s: %w", t, err)
		}
		for p, rs := range placed {
			proposed.Partitions = append(proposed.Partitions, movedPartition{Topic: t, Partition: int32(p), Replicas: rs, LogDirs: anyDirs(len(rs))})
		}
	}
	fmt.Fprintln(out, "Current partition replica assignment")
	if err := printJSON(out, cur); err != nil {
		return err
	}
	fmt.Fprintln(out)
	fmt.Fprintln(out, "Proposed partition reassignment configuration")
	return printJSON(out, proposed)
}

func topicsOf(plan reassignment) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range plan.Partitions {
		if !seen[p.Topic] {
			seen[p.Topic] = true
			out = append(out, p.Topic)
		}
	}
	slices.Sort(out)
	return out
}

func setOf(plan reassignment) kadm.TopicsSet {
	s := kadm.TopicsSet{}
	for _, p := range plan.Partitions {
		s.Add(p.Topic, p.Partition)
	}
	return s
}
