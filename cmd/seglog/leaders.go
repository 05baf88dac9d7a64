package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

func newLeadersCmd() *cobra.Command {
	var (
		client    clientFlags
		election  string
		all       bool
		topic     string
		partition int32
		jsonFile  string
	)
	cmd := &cobra.Command{
		Use:   "leaders --bootstrap-server H:P --election-type preferred|unclean (--all-topic-partitions | --topic T --partition P | --path-to-json-file F)",
		Short: "Run leader elections in a running cluster, as kafka-leader-election.sh",
		Long: `leaders asks a running broker for leader elections (ElectLeaders), as
kafka-leader-election.sh does:

  --election-type preferred   make each partition's preferred replica (the first
                              of its replicas) its leader, if it is live and in
                              the ISR
  --election-type unclean     give each partition without a leader one, from
                              outside the ISR if no ISR member is live (what
                              only the ISR held may be lost)

for every partition (--all-topic-partitions), one (--topic and --partition), or
those of a JSON file (--path-to-json-file, Kafka's form:
{"partitions": [{"topic": "t", "partition": 0}, ...]}). It prints the partitions
elected, those that already had such a leader ("Valid replica already elected"),
and each failure; it exits 1 if any partition failed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if client.bootstrap == "" {
				return errors.New("--bootstrap-server is required: leaders asks a running broker")
			}
			how, name, err := electionType(election)
			if err != nil {
				return err
			}
			set, err := electionPartitions(cmd, all, topic, partition, jsonFile)
			if err != nil {
				return err
			}
			c, err := client.dial()
			if err != nil {
				return err
			}
			defer c.close()
			rs, err := c.adm.ElectLeaders(c.ctx, how, set)
			if err != nil {
				return err
			}
			return printElections(cmd, name, rs)
		},
	}
	client.add(cmd)
	cmd.Flags().StringVar(&election, "election-type", "", "preferred or unclean")
	cmd.Flags().BoolVar(&all, "all-topic-partitions", false, "every partition of every topic")
	cmd.Flags().StringVar(&topic, "topic", "", "the topic of one partition (with --partition)")
	cmd.Flags().Int32Var(&partition, "partition", -1, "the partition (with --topic)")
	cmd.Flags().StringVar(&jsonFile, "path-to-json-file", "", `a JSON file of partitions: {"partitions": [{"topic": "t", "partition": 0}, ...]}`)
	return cmd
}

// electionType reads --election-type.
func electionType(s string) (kadm.ElectLeadersHow, string, error) {
	switch strings.ToLower(s) {
	case "preferred":
		return kadm.ElectPreferredReplica, "PREFERRED", nil
	case "unclean":
		return kadm.ElectLiveReplica, "UNCLEAN", nil
	}
	return 0, "", fmt.Errorf("--election-type %q: preferred or unclean", s)
}

// electionPartitions reads which partitions are asked for: nil for all.
func electionPartitions(cmd *cobra.Command, all bool, topic string, partition int32, jsonFile string) (kadm.TopicsSet, error) {
	given := 0
	for _, b := range []bool{all, topic != "" || cmd.Flags().Changed("partition"), jsonFile != ""} {
		if b {
			given++
		}
	}
	if given != 1 {
		return nil, errors.New("one of --all-topic-partitions, --topic with --partition, or --path-to-json-file")
	}
	switch {
	case all:
		return nil, nil
	case jsonFile != "":
		return readPartitionsJSON(jsonFile)
	}
	if topic == "" || partition < 0 {
		return nil, errors.New("--topic and --partition go together (a partition of 0 or more)")
	}
	set := kadm.TopicsSet{}
	set.Add(topic, partition)
	return set, nil
}

// readPartitionsJSON reads Kafka's partitions file.
func readPartitionsJSON(path string) (kadm.TopicsSet, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc struct {
		Partitions []struct {
			Topic     string `json:"topic"`
			Partition *int32 `json:"partition"`
		} `json:"partitions"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(doc.Partitions) == 0 {
		return nil, fmt.Errorf("%s: no partitions (want {\"partitions\": [{\"topic\": \"t\", \"partition\": 0}, ...]})", path)
	}
	set := kadm.TopicsSet{}
	for i, p := range doc.Partitions {
		if p.Topic == "" || p.Partition == nil || *p.Partition < 0 {
			return nil, fmt.Errorf("%s: partitions[%d] needs a topic and a partition of 0 or more", path, i)
		}
		set.Add(p.Topic, *p.Partition)
	}
	return set, nil
}

// printElections prints the outcome as kafka-leader-election.sh does and
// fails if any partition failed.
func printElections(cmd *cobra.Command, name string, rs kadm.ElectLeadersResults) error {
	var done, noop []string
	var failed []kadm.ElectLeadersResult
	var all []kadm.ElectLeadersResult
	for _, ps := range rs {
		for _, r := range ps {
			all = append(all, r)
		}
	}
	slices.SortFunc(all, func(a, b kadm.ElectLeadersResult) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	for _, r := range all {
		tp := fmt.Sprintf("%s-%d", r.Topic, r.Partition)
		switch {
		case r.Err == nil:
			done = append(done, tp)
		case errors.Is(r.Err, kerr.ElectionNotNeeded):
			noop = append(noop, tp)
		default:
			failed = append(failed, r)
		}
	}
	out := cmd.OutOrStdout()
	if len(done) > 0 {
		fmt.Fprintf(out, "Successfully completed leader election (%s) for partitions %s\n", name, strings.Join(done, ", "))
	}
	if len(noop) > 0 {
		fmt.Fprintf(out, "Valid replica already elected for partitions %s\n", strings.Join(noop, ", "))
	}
	for _, r := range failed {
		msg := r.Err.Error()
		if r.ErrMessage != "" {
			msg += ": " + r.ErrMessage
		}
		fmt.Fprintf(out, "Error completing leader election (%s) for partition: %s-%d: %s\n", name, r.Topic, r.Partition, msg)
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d replica(s) could not be elected", len(failed))
	}
	return nil
}
