package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func newConfigsCmd() *cobra.Command {
	var (
		client          clientFlags
		describe, alter bool
		entityType      string
		entityName      string
		add, remove     []string
		all, defaults   bool
	)
	cmd := &cobra.Command{
		Use:   "configs --bootstrap-server H:P --entity-type topics|brokers (--entity-name N | --entity-default) (--describe [--all] | --alter [--add-config k=v,...] [--delete-config k,...])",
		Short: "Describe and alter topic and broker configs on a running broker, like kafka-configs.sh",
		Long: `configs describes and alters the configs of a topic or a broker, as
kafka-configs.sh does (DescribeConfigs, IncrementalAlterConfigs), with
--command-config for the client's own security settings.

  --describe   the configs set on the entity (with --all, every config, each
               with its source)
  --alter      --add-config k=v,k=v sets them, --delete-config k,k returns
               them to their defaults; a bad one changes nothing

A broker's topic defaults (log.retention.ms, log.cleanup.policy,
message.max.bytes, ...) are dynamic, as Kafka's: --alter of a broker
(--entity-name its node id) or of every broker's default (--entity-default)
changes them at once for every topic that does not set the config itself,
and they are kept in the data directory. A broker's other configs are
static (server.properties): an alter of one is refused, as Kafka refuses
it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case describe == alter:
				return errors.New("give one of --describe, --alter")
			case client.bootstrap == "":
				return errors.New("--bootstrap-server is required: configs asks a running broker")
			case entityType != "topics" && entityType != "brokers" && entityType != "topic" && entityType != "broker":
				return fmt.Errorf("--entity-type %q is not topics or brokers", entityType)
			case defaults && (entityName != "" || !strings.HasPrefix(entityType, "broker")):
				return errors.New("--entity-default is every broker's: with --entity-type brokers, without --entity-name")
			case entityName == "" && !defaults:
				return errors.New("--entity-name (or, for brokers, --entity-default) is required")
			case alter && len(add) == 0 && len(remove) == 0:
				return errors.New("--alter needs --add-config or --delete-config")
			}
			broker := strings.HasPrefix(entityType, "broker")
			var brokerID int32
			if broker && !defaults {
				n, err := strconv.ParseInt(entityName, 10, 32)
				if err != nil {
					return fmt.Errorf("--entity-name %q: a broker is named by its node id", entityName)
				}
				brokerID = int32(n)
			}
			c, err := client.dial()
			if err != nil {
				return err
			}
			defer c.close()
			out := cmd.OutOrStdout()
			if describe {
				var rcs kadm.ResourceConfigs
				switch {
				case defaults: // every broker's dynamic default
					rcs, err = c.adm.DescribeBrokerConfigs(c.ctx)
				case broker:
					rcs, err = c.adm.DescribeBrokerConfigs(c.ctx, brokerID)
				default:
					rcs, err = c.adm.DescribeTopicConfigs(c.ctx, entityName)
				}
				if err != nil {
					return err
				}
				for _, rc := range rcs {
					if rc.Err != nil {
						return fmt.Errorf("%s %s: %w", entityType, rc.Name, rc.Err)
					}
					what := "Dynamic configs"
					if all {
						what = "All configs"
					}
					kind := "topic"
					if broker {
						kind = "broker"
					}
					if defaults {
						fmt.Fprintln(out, "Default configs for brokers in the cluster are:")
					} else {
						fmt.Fprintf(out, "%s for %s %s are:\n", what, kind, rc.Name)
					}
					for _, cf := range rc.Configs {
						dynamic := cf.Source == kmsg.ConfigSourceDynamicTopicConfig || cf.Source == kmsg.ConfigSourceDynamicBrokerConfig ||
							cf.Source == kmsg.ConfigSourceDynamicDefaultBrokerConfig && defaults
						if !all && !dynamic {
							continue
						}
						shown := func(v *string) string {
							if v == nil || cf.Sensitive {
								return "null"
							}
							return *v
						}
						// Kafka's synonyms: the value at each level, highest first.
						syns := []string{fmt.Sprintf("%s:%s=%s", cf.Source, cf.Key, shown(cf.Value))}
						if len(cf.Synonyms) > 0 {
							syns = syns[:0]
							for _, s := range cf.Synonyms {
								syns = append(syns, fmt.Sprintf("%s:%s=%s", s.Source, s.Key, shown(s.Value)))
							}
						}
						fmt.Fprintf(out, "  %s=%s sensitive=%t synonyms={%s}\n", cf.Key, shown(cf.Value), cf.Sensitive, strings.Join(syns, ", "))
					}
				}
				return nil
			}
			var ops []kadm.AlterConfig
			for _, a := range add {
				for _, kv := range splitConfigList(a) {
					k, v, ok := strings.Cut(kv, "=")
					if !ok {
						return fmt.Errorf("--add-config %q is not key=value", kv)
					}
					ops = append(ops, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: &v})
				}
			}
			for _, r := range remove {
				for _, k := range splitConfigList(r) {
					ops = append(ops, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
				}
			}
			var res kadm.AlterConfigsResponses
			switch {
			case defaults:
				res, err = c.adm.AlterBrokerConfigs(c.ctx, ops)
			case broker:
				res, err = c.adm.AlterBrokerConfigs(c.ctx, ops, brokerID)
			default:
				res, err = c.adm.AlterTopicConfigs(c.ctx, ops, entityName)
			}
			if err != nil {
				return err
			}
			if err := alterErr(res, nil); err != nil {
				return fmt.Errorf("altering %s %w", entityType, err)
			}
			if defaults {
				fmt.Fprintln(out, "Completed updating default config for brokers in the cluster.")
			} else {
				fmt.Fprintf(out, "Completed updating config for %s %s.\n", strings.TrimSuffix(entityType, "s"), entityName)
			}
			return nil
		},
	}
	client.add(cmd)
	fl := cmd.Flags()
	fl.BoolVar(&describe, "describe", false, "describe the entity's configs")
	fl.BoolVar(&alter, "alter", false, "alter the entity's configs")
	fl.BoolVar(&all, "all", false, "--describe: every config, not only those set")
	fl.StringVar(&entityType, "entity-type", "", "topics or brokers")
	fl.StringVar(&entityName, "entity-name", "", "the topic, or the broker's node id")
	fl.BoolVar(&defaults, "entity-default", false, "with --entity-type brokers: every broker's dynamic default")
	fl.StringArrayVar(&add, "add-config", nil, "k=v,k=v to set (repeatable)")
	fl.StringArrayVar(&remove, "delete-config", nil, "k,k to return to their defaults (repeatable)")
	return cmd
}

// splitConfigList splits kafka-configs.sh's comma lists, where a value
// in square brackets may hold commas (cleanup.policy=[compact,delete]).
func splitConfigList(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, r := range s {
		switch r {
		case '[':
			depth++
		case ']':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	out = append(out, s[start:])
	for i, kv := range out {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(v, "[") && strings.HasSuffix(v, "]") {
			out[i] = k + "=" + v[1:len(v)-1]
		}
	}
	return out
}
