package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func newClusterCmd() *cobra.Command {
	var (
		client                                clientFlags
		underReplicated, offline, underMinISR bool
	)
	cmd := &cobra.Command{
		Use:   "cluster --bootstrap-server H:P [--under-replicated-partitions | --unavailable-partitions | --under-min-isr-partitions]",
		Short: "The brokers of a running cluster and the partitions that are not well replicated",
		Long: `cluster asks a running broker (Metadata, DescribeCluster, DescribeConfigs,
ListPartitionReassignments) for its cluster: without a filter, a line per broker
(Id, Rack, Address, and the controller marked), then the partitions that are
under-replicated, unavailable or under min.insync.replicas (with their
Eligible Leader Replicas, KIP-966: Elr and LastKnownElr), then the
reassignments in progress (their replicas, those being added and removed); with
one filter, only those partitions, as
kafka-topics.sh --describe prints them with the same flag:

  --under-replicated-partitions   ISR smaller than the replicas
  --unavailable-partitions        no leader (Kafka's name: offline)
  --under-min-isr-partitions      ISR below the topic's min.insync.replicas

It exits 0 whether or not such partitions exist.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if client.bootstrap == "" {
				return errors.New("--bootstrap-server is required: cluster asks a running broker")
			}
			c, err := client.dial()
			if err != nil {
				return err
			}
			defer c.close()
			md, err := c.adm.Metadata(c.ctx)
			if err != nil {
				return err
			}
			minISR, err := minInsyncReplicas(c, md.Topics.Names())
			if err != nil {
				return err
			}
			elr := eligibleReplicas(c, md.Topics.Names())
			out := cmd.OutOrStdout()
			all := !underReplicated && !offline && !underMinISR
			if all {
				printBrokers(out, md)
			}
			printed := 0
			for _, name := range md.Topics.Names() {
				t := md.Topics[name]
				for _, p := range t.Partitions.Sorted() {
					why := partitionTrouble(p, minISR[name])
					show := all && why != "" || underReplicated && strings.Contains(why, "under-replicated") ||
						offline && strings.Contains(why, "unavailable") || underMinISR && strings.Contains(why, "under-min-isr")
					if !show {
						continue
					}
					if all && printed == 0 {
						fmt.Fprintln(out)
					}
					printed++
					fmt.Fprintf(out, "\tTopic: %s\tPartition: %d\tLeader: %s\tReplicas: %s\tIsr: %s", name, p.Partition,
						leaderText(p.Leader), ids(p.Replicas), ids(p.ISR))
					if len(p.OfflineReplicas) > 0 {
						fmt.Fprintf(out, "\tOffline: %s", ids(p.OfflineReplicas))
					}
					fmt.Fprint(out, elr.text(name, p.Partition))
					if all {
						fmt.Fprintf(out, "\t(%s)", why)
					}
					fmt.Fprintln(out)
				}
			}
			if all && printed == 0 {
				fmt.Fprintln(out, "\nEvery partition is fully replicated.")
			}
			if all {
				return printReassignments(c, out)
			}
			return nil
		},
	}
	client.add(cmd)
	cmd.Flags().BoolVar(&underReplicated, "under-replicated-partitions", false, "only partitions whose ISR is smaller than their replicas")
	cmd.Flags().BoolVar(&offline, "unavailable-partitions", false, "only partitions without a leader")
	cmd.Flags().BoolVar(&underMinISR, "under-min-isr-partitions", false, "only partitions whose ISR is below min.insync.replicas")
	return cmd
}

// printReassignments prints the reassignments in progress, if any.
func printReassignments(c *adminConn, out io.Writer) error {
	resp, err := kmsg.NewPtrListPartitionReassignmentsRequest().RequestWith(c.ctx, c.cl)
	if err != nil {
		return err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return fmt.Errorf("listing the reassignments: %w", err)
	}
	for i, t := range resp.Topics {
		if i == 0 {
			fmt.Fprintln(out, "\nReassignments in progress:")
		}
		for _, p := range t.Partitions {
			fmt.Fprintf(out, "\tTopic: %s\tPartition: %d\tReplicas: %s\tAdding: %s\tRemoving: %s\n", t.Topic, p.Partition,
				ids(p.Replicas), ids(p.AddingReplicas), ids(p.RemovingReplicas))
		}
	}
	return nil
}

// printBrokers prints a line per broker, the controller marked.
func printBrokers(out io.Writer, md kadm.Metadata) {
	fmt.Fprintf(out, "Cluster: %s\tController: %s\tBrokers: %d\n", md.Cluster, leaderText(md.Controller), len(md.Brokers))
	brokers := slices.Clone(md.Brokers)
	slices.SortFunc(brokers, func(a, b kadm.BrokerDetail) int { return int(a.NodeID - b.NodeID) })
	for _, b := range brokers {
		rack := "-"
		if b.Rack != nil {
			rack = *b.Rack
		}
		mark := ""
		if b.NodeID == md.Controller {
			mark = "\t(controller)"
		}
		fmt.Fprintf(out, "\tId: %d\tRack: %s\tAddress: %s:%d%s\n", b.NodeID, rack, b.Host, b.Port, mark)
	}
}

// partitionTrouble says what is wrong with a partition ("" if nothing).
func partitionTrouble(p kadm.PartitionDetail, minISR int) string {
	var why []string
	if p.Leader < 0 {
		why = append(why, "unavailable")
	}
	if len(p.ISR) < len(p.Replicas) {
		why = append(why, "under-replicated")
	}
	if len(p.ISR) < minISR {
		why = append(why, "under-min-isr")
	}
	return strings.Join(why, ", ")
}

// minInsyncReplicas reads each topic's min.insync.replicas.
func minInsyncReplicas(c *adminConn, topics []string) (map[string]int, error) {
	out := map[string]int{}
	if len(topics) == 0 {
		return out, nil
	}
	rcs, err := c.adm.DescribeTopicConfigs(c.ctx, topics...)
	if err != nil {
		return nil, err
	}
	for _, rc := range rcs {
		out[rc.Name] = 1
		for _, cfg := range rc.Configs {
			if cfg.Key == "min.insync.replicas" && cfg.Value != nil {
				if n, err := strconv.Atoi(*cfg.Value); err == nil {
					out[rc.Name] = n
				}
			}
		}
	}
	return out, nil
}

func leaderText(id int32) string {
	if id < 0 {
		return "none"
	}
	return strconv.Itoa(int(id))
}

func ids(xs []int32) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(int(x))
	}
	return strings.Join(s, ",")
}

// elrs are partitions' Eligible Leader Replicas and last known ELR
// (KIP-966), by topic and partition.
type elrs map[string]map[int32][2][]int32

// eligibleReplicas asks DescribeTopicPartitions for topics' ELRs, page by
// page; nil if the broker does not answer it (an older broker), which
// prints as N/A, as kafka-topics.sh prints it.
func eligibleReplicas(c *adminConn, topics []string) elrs {
	if len(topics) == 0 {
		return nil
	}
	out := elrs{}
	req := kmsg.NewPtrDescribeTopicPartitionsRequest()
	for _, t := range topics {
		rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
		rt.Topic = t
		req.Topics = append(req.Topics, rt)
	}
	for {
		resp, err := req.RequestWith(c.ctx, c.cl)
		if err != nil {
			return nil
		}
		for _, t := range resp.Topics {
			if t.Topic == nil || t.ErrorCode != 0 {
				continue
			}
			if out[*t.Topic] == nil {
				out[*t.Topic] = map[int32][2][]int32{}
			}
			for _, p := range t.Partitions {
				out[*t.Topic][p.Partition] = [2][]int32{p.EligibleLeaderReplicas, p.LastKnownELR}
			}
		}
		if resp.NextCursor == nil {
			return out
		}
		req.Cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: resp.NextCursor.Topic, Partition: resp.NextCursor.Partition}
	}
}

// text is a partition's "\tElr: …\tLastKnownElr: …", as kafka-topics.sh
// --describe ends its line.
func (e elrs) text(topic string, p int32) string {
	sets, ok := e[topic][p]
	if !ok {
		return "\tElr: N/A\tLastKnownElr: N/A"
	}
	return "\tElr: " + ids(sets[0]) + "\tLastKnownElr: " + ids(sets[1])
}
