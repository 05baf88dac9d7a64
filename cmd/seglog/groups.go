package main

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/coordinator/group"
	"github.com/seglog/seglog/tablet"
)

type groupsFlags struct {
	dataDir                    string
	client                     clientFlags
	list, describe, del, reset bool
	groups                     []string
	all                        bool
	members, state             bool
	types                      string // --type: "any" when given bare
	topics                     []string
	allTopics                  bool
	toEarliest, toLatest       bool
	toOffset                   int64
	toDatetime                 string
	execute, asJSON            bool
}

func newGroupsCmd() *cobra.Command {
	var f groupsFlags
	f.toOffset = -1
	cmd := &cobra.Command{
		Use:   "groups (--data-dir D | --bootstrap-server H:P) (--list | --describe | --delete | --reset-offsets) [--group G]...",
		Short: "List, describe, delete consumer groups and reset their offsets, like kafka-consumer-groups.sh",
		Long: `groups reads the consumer groups a broker keeps in the data directory's
__consumer_offsets (seglog serve writes them there, in Kafka's record format):

  --list                    the groups (with --state, each one's state; with
                            --type, each one's type, classic or consumer, and
                            with --type classic|consumer only those)
  --describe --group G      each partition's committed offset, log end offset and
                            lag, and the member it is assigned to; with --members,
                            the members; with --state, the group's state
  --delete --group G        delete an empty group: its offsets and metadata
  --reset-offsets --group G --topic T[:P,P...] | --all-topics
        --to-earliest | --to-latest | --to-offset N | --to-datetime 2006-01-02T15:04:05.000
                            print the new offsets; with --execute, commit them
                            (the group must be empty: no consumer running)

With --data-dir it opens the data directory itself, so a broker must not be
serving it (list and describe take a shared lock and change nothing; delete and
an executed reset take the writer's lock). With --bootstrap-server (and
--command-config) it asks a running broker instead: --list and --describe
(ListGroups, DescribeGroups, OffsetFetch, ListOffsets: the lag while it
serves), --delete (DeleteGroups) and --reset-offsets (ListOffsets, then
OffsetCommit, which the broker accepts only while the group is empty).
--group may be repeated, or --all-groups given.`,
		// --type's value may follow it as the next argument (--type
		// consumer), as kafka-consumer-groups.sh takes it; bare, it is
		// "any".
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) == 0:
				return nil
			case len(args) == 1 && f.types == "any":
				f.types = args[0]
				return nil
			}
			return cobra.NoArgs(cmd, args)
		},
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			actions := 0
			for _, a := range []bool{f.list, f.describe, f.del, f.reset} {
				if a {
					actions++
				}
			}
			if actions != 1 {
				return errors.New("give one of --list, --describe, --delete, --reset-offsets")
			}
			if f.client.bootstrap != "" {
				if f.dataDir != "" {
					return errors.New("give --data-dir or --bootstrap-server, not both")
				}
				return remoteGroups(cmd, f)
			}
			a := readOnly
			if f.del || f.reset && f.execute {
				a = write
			}
			m, err := openManager(cmd, f.dataDir, a)
			if err != nil {
				return err
			}
			defer func() { err = errors.Join(err, m.Close()) }()
			c, err := group.New(m, group.Options{ReadOnly: a == readOnly, Logger: quietLogger(cmd)})
			if err != nil {
				return err
			}
			defer func() { err = errors.Join(err, c.Close()) }()
			ids := f.groups
			if f.all || f.list {
				ids = nil
				for _, g := range c.Groups() {
					ids = append(ids, g.ID)
				}
			} else if len(ids) == 0 {
				return errors.New("--group (or --all-groups) is required")
			}
			switch {
			case f.list:
				return listGroups(cmd, c, f)
			case f.describe:
				return describeGroups(cmd, m, c, ids, f)
			case f.del:
				for _, id := range ids {
					if err := c.DeleteGroup(id); err != nil {
						return err
					}
					fmt.Fprintf(cmd.OutOrStdout(), "Deletion of requested consumer groups ('%s') was successful.\n", id)
				}
				return nil
			default:
				return resetOffsets(cmd, dirOffsets{m, c}, ids, f)
			}
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.dataDir, "data-dir", "", "the data directory")
	f.client.add(cmd)
	fl.BoolVar(&f.list, "list", false, "list the groups")
	fl.BoolVar(&f.describe, "describe", false, "describe groups: offsets, lag, members")
	fl.BoolVar(&f.del, "delete", false, "delete empty groups")
	fl.BoolVar(&f.reset, "reset-offsets", false, "reset a group's committed offsets (with --execute)")
	fl.StringArrayVar(&f.groups, "group", nil, "a group (repeatable)")
	fl.BoolVar(&f.all, "all-groups", false, "every group")
	fl.BoolVar(&f.members, "members", false, "with --describe: the members")
	fl.BoolVar(&f.state, "state", false, "with --list or --describe: the state")
	fl.StringVar(&f.types, "type", "", "with --list: each group's type (classic: JoinGroup; consumer: KIP-848), and with a value (classic, consumer, comma-separated) only groups of those types")
	fl.Lookup("type").NoOptDefVal = "any"
	fl.StringArrayVar(&f.topics, "topic", nil, "with --reset-offsets: a topic, or topic:partition,partition (repeatable)")
	fl.BoolVar(&f.allTopics, "all-topics", false, "with --reset-offsets: every topic the group has offsets for")
	fl.BoolVar(&f.toEarliest, "to-earliest", false, "reset to the log start offset")
	fl.BoolVar(&f.toLatest, "to-latest", false, "reset to the log end offset")
	fl.Int64Var(&f.toOffset, "to-offset", -1, "reset to this offset (within the log start and end)")
	fl.StringVar(&f.toDatetime, "to-datetime", "", "reset to the first record at or after this time (2006-01-02T15:04:05.000, UTC)")
	fl.BoolVar(&f.execute, "execute", false, "commit the reset (otherwise only print it)")
	fl.BoolVar(&f.asJSON, "json", false, "print JSON")
	return cmd
}

func listGroups(cmd *cobra.Command, c *group.Coordinator, f groupsFlags) error {
	return printGroupList(cmd, c.Groups(), f)
}

// printGroupList prints --list: the groups, with --type their types (and
// only those of the types it names), with --state their states.
func printGroupList(cmd *cobra.Command, infos []group.Info, f groupsFlags) error {
	if f.types != "" && f.types != "any" {
		want := strings.Split(strings.ToLower(f.types), ",")
		for _, typ := range want {
			if typ != "classic" && typ != "consumer" {
				return fmt.Errorf("--type %s: the types are classic and consumer", typ)
			}
		}
		infos = slices.DeleteFunc(infos, func(g group.Info) bool { return !slices.Contains(want, strings.ToLower(g.Type)) })
	}
	if f.asJSON {
		return printJSON(cmd.OutOrStdout(), infos)
	}
	w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	header := []string{"GROUP"}
	if f.types != "" {
		header = append(header, "TYPE")
	}
	if f.state {
		header = append(header, "STATE")
	}
	if len(header) > 1 {
		fmt.Fprintln(w, strings.Join(header, "\t"))
	}
	for _, g := range infos {
		row := []string{g.ID}
		if f.types != "" && g.Type != "" {
			// Kafka's tool prints Classic and Consumer.
			row = append(row, strings.ToUpper(g.Type[:1])+g.Type[1:])
		}
		if f.state {
			row = append(row, g.State)
		}
		fmt.Fprintln(w, strings.Join(row, "\t"))
	}
	return w.Flush()
}

// groupLag is one row of --describe: a partition's committed offset,
// log end and lag, and its member.
type groupLag struct {
	Group     string `json:"group"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Current   int64  `json:"currentOffset"`
	LogEnd    int64  `json:"logEndOffset"`
	Lag       int64  `json:"lag"`
	Member    string `json:"consumerId"`
	Host      string `json:"host"`
	Client    string `json:"clientId"`
}

func describeGroups(cmd *cobra.Command, m *tablet.Manager, c *group.Coordinator, ids []string, f groupsFlags) error {
	infos, rows, err := localGroupRows(m, c, ids)
	if err != nil {
		return err
	}
	return printGroups(cmd, infos, rows, f)
}

// localGroupRows describes groups from the data directory: their infos
// and a lag row per partition.
func localGroupRows(m *tablet.Manager, c *group.Coordinator, ids []string) ([]group.Info, []groupLag, error) {
	var infos []group.Info
	var rows []groupLag
	for _, id := range ids {
		g, ok := c.Describe(id)
		if !ok {
			return nil, nil, fmt.Errorf("%w: %q", group.ErrGroupNotFound, id)
		}
		infos = append(infos, g)
		owner := map[checkpoint.TopicPartition]group.MemberInfo{}
		for _, mi := range g.Members {
			for _, tp := range mi.Assigned {
				owner[tp] = mi
			}
		}
		seen := map[checkpoint.TopicPartition]bool{}
		add := func(tp checkpoint.TopicPartition, current int64) {
			seen[tp] = true
			row := groupLag{Group: id, Topic: tp.Topic, Partition: tp.Partition, Current: current, LogEnd: -1, Lag: -1}
			if t, ok := m.Get(tp); ok {
				row.LogEnd = t.Offsets().HighWatermark
				if current >= 0 {
					row.Lag = max(0, row.LogEnd-current)
				}
			}
			if mi, ok := owner[tp]; ok {
				row.Member, row.Host, row.Client = mi.ID, mi.Host, mi.ClientID
			}
			rows = append(rows, row)
		}
		for _, o := range g.Offsets {
			add(o.TopicPartition, o.Offset.Offset)
		}
		for tp := range owner {
			if !seen[tp] {
				add(tp, -1)
			}
		}
	}
	return infos, rows, nil
}

// printGroups prints --describe: the lag table, or --members, or --state.
func printGroups(cmd *cobra.Command, infos []group.Info, rows []groupLag, f groupsFlags) error {
	slices.SortFunc(rows, func(a, b groupLag) int {
		return strings.Compare(fmt.Sprintf("%s\x00%s\x00%010d", a.Group, a.Topic, a.Partition),
			fmt.Sprintf("%s\x00%s\x00%010d", b.Group, b.Topic, b.Partition))
	})
	if f.asJSON {
		return printJSON(cmd.OutOrStdout(), map[string]any{"groups": infos, "offsets": rows})
	}
	out := cmd.OutOrStdout()
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	dash := func(n int64) string {
		if n < 0 {
			return "-"
		}
		return strconv.FormatInt(n, 10)
	}
	orDash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	for _, g := range infos {
		switch {
		case f.state:
			fmt.Fprintln(w, "GROUP\tASSIGNMENT-STRATEGY\tSTATE\tGENERATION\t#MEMBERS")
			fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\n", g.ID, orDash(g.Protocol), g.State, g.Generation, len(g.Members))
		case f.members:
			fmt.Fprintln(w, "GROUP\tCONSUMER-ID\tGROUP-INSTANCE-ID\tHOST\tCLIENT-ID\t#PARTITIONS")
			for _, mi := range g.Members {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\n", g.ID, mi.ID, orDash(mi.InstanceID), mi.Host, mi.ClientID, len(mi.Assigned))
			}
		}
		if len(g.Members) == 0 {
			fmt.Fprintf(w, "Consumer group '%s' has no active members.\n", g.ID)
		}
	}
	if !f.state && !f.members {
		fmt.Fprintln(w, "GROUP\tTOPIC\tPARTITION\tCURRENT-OFFSET\tLOG-END-OFFSET\tLAG\tCONSUMER-ID\tHOST\tCLIENT-ID")
		for _, r := range rows {
			fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Group, r.Topic, r.Partition, dash(r.Current), dash(r.LogEnd),
				dash(r.Lag), orDash(r.Member), orDash(r.Host), orDash(r.Client))
		}
	}
	return w.Flush()
}

// remoteGroups answers --list, --describe and --delete through a running
// broker.
func remoteGroups(cmd *cobra.Command, f groupsFlags) error {
	c, err := f.client.dial()
	if err != nil {
		return err
	}
	defer c.close()
	if f.reset {
		if len(f.groups) == 0 || f.all {
			return errors.New("--reset-offsets through a running broker needs --group")
		}
		return resetOffsets(cmd, brokerOffsets{c}, f.groups, f)
	}
	ids := f.groups
	if f.all || f.list {
		listed, err := c.adm.ListGroups(c.ctx)
		if err != nil {
			return err
		}
		ids = nil
		for _, g := range listed.Sorted() {
			ids = append(ids, g.Group)
		}
		if f.list {
			var infos []group.Info
			for _, g := range listed.Sorted() {
				typ := strings.ToLower(g.GroupType)
				if typ == "" {
					typ = "classic" // a broker before ListGroups v5
				}
				infos = append(infos, group.Info{ID: g.Group, State: g.State, Type: typ})
			}
			return printGroupList(cmd, infos, f)
		}
	} else if len(ids) == 0 {
		return errors.New("--group (or --all-groups) is required")
	}
	if f.del {
		res, err := c.adm.DeleteGroups(c.ctx, ids...)
		if err != nil {
			return err
		}
		for _, id := range ids {
			if r, ok := res[id]; ok && r.Err != nil {
				return fmt.Errorf("deleting group %q: %w", id, r.Err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Deletion of requested consumer groups ('%s') was successful.\n", id)
		}
		return nil
	}
	lags, err := c.adm.Lag(c.ctx, ids...)
	if err != nil {
		return err
	}
	var infos []group.Info
	var rows []groupLag
	for _, id := range ids {
		l, ok := lags[id]
		if !ok || l.State == "Dead" || errors.Is(l.DescribeErr, kerr.GroupIDNotFound) {
			return fmt.Errorf("%w: %q", group.ErrGroupNotFound, id)
		}
		if l.DescribeErr != nil {
			return fmt.Errorf("describing group %q: %w", id, l.DescribeErr)
		}
		if l.FetchErr != nil {
			return fmt.Errorf("the offsets of group %q: %w", id, l.FetchErr)
		}
		info := group.Info{ID: id, State: l.State, ProtocolType: l.ProtocolType, Protocol: l.Protocol}
		for _, m := range l.Members {
			mi := group.MemberInfo{ID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost}
			if m.InstanceID != nil {
				mi.InstanceID = *m.InstanceID
			}
			if a, ok := m.Assigned.AsConsumer(); ok {
				for _, t := range a.Topics {
					for _, p := range t.Partitions {
						mi.Assigned = append(mi.Assigned, checkpoint.TopicPartition{Topic: t.Topic, Partition: p})
					}
				}
			}
			info.Members = append(info.Members, mi)
		}
		infos = append(infos, info)
		for _, ml := range l.Lag.Sorted() {
			row := groupLag{Group: id, Topic: ml.Topic, Partition: ml.Partition, Current: ml.Commit.At, LogEnd: ml.End.Offset, Lag: ml.Lag}
			if ml.End.Err != nil {
				row.LogEnd = -1
			}
			if ml.Member != nil {
				row.Member, row.Host, row.Client = ml.Member.MemberID, ml.Member.ClientHost, ml.Member.ClientID
			}
			rows = append(rows, row)
		}
	}
	return printGroups(cmd, infos, rows, f)
}
