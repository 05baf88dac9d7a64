package main

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func newTopicsCmd() *cobra.Command {
	var (
		client                                 clientFlags
		create, list, describe, alter, del     bool
		topic                                  string
		partitions                             int32
		replicationFactor                      int16
		configs                                []string
		excludeInternal, ifNotExists, ifExists bool
	)
	cmd := &cobra.Command{
		Use:   "topics --bootstrap-server H:P (--create | --list | --describe | --alter | --delete) [--topic T] [--partitions N] [--config k=v]...",
		Short: "Create, list, describe, grow and delete topics on a running broker, like kafka-topics.sh",
		Long: `topics manages the topics of a running broker, as kafka-topics.sh does
(CreateTopics, Metadata, DescribeConfigs, CreatePartitions, DeleteTopics),
with --command-config for the client's own security settings:

  --create --topic T [--partitions N] [--replication-factor R] [--config k=v]...
  --list                         the topic names, one a line
  --describe [--topic T]         a line per topic (Topic, TopicId, PartitionCount,
                                 ReplicationFactor, Configs: the ones set on it),
                                 then one per partition (Leader, Replicas, Isr)
  --alter --topic T --partitions N   grow the topic to N partitions
  --delete --topic T

--partitions and --replication-factor default to the broker's num.partitions
and 1.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			n := 0
			for _, b := range []bool{create, list, describe, alter, del} {
				if b {
					n++
				}
			}
			switch {
			case n != 1:
				return errors.New("give one of --create, --list, --describe, --alter, --delete")
			case client.bootstrap == "":
				return errors.New("--bootstrap-server is required: topics asks a running broker")
			case (create || alter || del) && topic == "":
				return errors.New("--topic is required")
			case alter && partitions <= 0:
				return errors.New("--alter needs --partitions, the new count")
			}
			c, err := client.dial()
			if err != nil {
				return err
			}
			defer c.close()
			out := cmd.OutOrStdout()
			switch {
			case create:
				cfg := map[string]*string{}
				for _, kv := range configs {
					k, v, ok := strings.Cut(kv, "=")
					if !ok {
						return fmt.Errorf("--config %q is not key=value", kv)
					}
					cfg[k] = &v
				}
				p, rf := partitions, replicationFactor
				if p <= 0 {
					p = -1 // the broker's num.partitions
				}
				if rf <= 0 {
					rf = -1
				}
				res, err := c.adm.CreateTopic(c.ctx, p, rf, cfg, topic)
				if err == nil {
					err = res.Err
				}
				if err != nil {
					if ifNotExists && strings.Contains(err.Error(), "TOPIC_ALREADY_EXISTS") {
						return nil
					}
					return fmt.Errorf("creating topic %q: %w", topic, err)
				}
				fmt.Fprintf(out, "Created topic %s.\n", topic)
			case list:
				ts, err := c.adm.ListTopicsWithInternal(c.ctx)
				if err != nil {
					return err
				}
				for _, name := range ts.Names() {
					if excludeInternal && ts[name].IsInternal {
						continue
					}
					fmt.Fprintln(out, name)
				}
			case describe:
				return describeTopics(c, out, topic, excludeInternal)
			case alter:
				res, err := c.adm.UpdatePartitions(c.ctx, int(partitions), topic)
				if err == nil {
					var r kadm.CreatePartitionsResponse
					if r, err = res.On(topic, nil); err == nil {
						err = r.Err
					}
				}
				if err != nil {
					return fmt.Errorf("altering topic %q: %w", topic, err)
				}
				fmt.Fprintf(out, "Topic %s now has %d partitions.\n", topic, partitions)
			case del:
				res, err := c.adm.DeleteTopic(c.ctx, topic)
				if err == nil {
					err = res.Err
				}
				if err != nil {
					if ifExists && strings.Contains(err.Error(), "UNKNOWN_TOPIC_OR_PARTITION") {
						return nil
					}
					return fmt.Errorf("deleting topic %q: %w", topic, err)
				}
				fmt.Fprintf(out, "Deleted topic %s.\n", topic)
			}
			return nil
		},
	}
	client.add(cmd)
	fl := cmd.Flags()
	fl.BoolVar(&create, "create", false, "create --topic")
	fl.BoolVar(&list, "list", false, "list the topics")
	fl.BoolVar(&describe, "describe", false, "describe --topic, or every topic")
	fl.BoolVar(&alter, "alter", false, "grow --topic to --partitions")
	fl.BoolVar(&del, "delete", false, "delete --topic")
	fl.StringVar(&topic, "topic", "", "the topic")
	fl.Int32Var(&partitions, "partitions", 0, "the partition count (--create: the broker's num.partitions by default; --alter: the new count)")
	fl.Int16Var(&replicationFactor, "replication-factor", 0, "the replication factor (--create; default 1)")
	fl.StringArrayVar(&configs, "config", nil, "a topic config as key=value, repeatable (--create)")
	fl.BoolVar(&excludeInternal, "exclude-internal", false, "leave __consumer_offsets and __transaction_state out of --list and --describe")
	fl.BoolVar(&ifNotExists, "if-not-exists", false, "--create: a topic that exists is not an error")
	fl.BoolVar(&ifExists, "if-exists", false, "--delete: a topic that does not exist is not an error")
	return cmd
}

// describeTopics prints topics as kafka-topics.sh --describe does.
func describeTopics(c *adminConn, out io.Writer, topic string, excludeInternal bool) error {
	var names []string
	if topic != "" {
		names = []string{topic}
	}
	ts, err := c.adm.ListTopicsWithInternal(c.ctx, names...)
	if err != nil {
		return err
	}
	if topic != "" {
		if d, ok := ts[topic]; !ok || d.Err != nil {
			return fmt.Errorf("topic %q: %w", topic, errors.Join(errTopicNotFound, d.Err))
		}
	}
	var shown []string
	for _, name := range ts.Names() {
		if !(excludeInternal && ts[name].IsInternal) {
			shown = append(shown, name)
		}
	}
	cfgs, err := c.adm.DescribeTopicConfigs(c.ctx, shown...)
	if err != nil {
		return err
	}
	elr := eligibleReplicas(c, shown)
	for _, name := range shown {
		d := ts[name]
		var set []string
		if rc, err := cfgs.On(name, nil); err == nil {
			for _, cf := range rc.Configs {
				if cf.Source == kmsg.ConfigSourceDynamicTopicConfig && cf.Value != nil { // set on the topic
					set = append(set, cf.Key+"="+*cf.Value)
				}
			}
		}
		slices.Sort(set)
		rf := 0
		if len(d.Partitions) > 0 {
			rf = len(d.Partitions.Sorted()[0].Replicas)
		}
		fmt.Fprintf(out, "Topic: %s\tTopicId: %s\tPartitionCount: %d\tReplicationFactor: %d\tConfigs: %s\n",
			name, base64.RawURLEncoding.EncodeToString(d.ID[:]), len(d.Partitions), rf, strings.Join(set, ","))
		for _, p := range d.Partitions.Sorted() {
			fmt.Fprintf(out, "\tTopic: %s\tPartition: %d\tLeader: %d\tReplicas: %s\tIsr: %s%s\n", name, p.Partition, p.Leader,
				ids(p.Replicas), ids(p.ISR), elr.text(name, p.Partition))
		}
	}
	return nil
}

var errTopicNotFound = errors.New("no such topic")
