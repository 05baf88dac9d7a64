package main

import (
	"bufio"
	"cmp"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/logfile"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/recovery"
	"github.com/seglog/seglog/tablet"
	"github.com/seglog/seglog/tiering"
	"github.com/seglog/seglog/vfs"
)

// tabletFlags are the flags every tablet command shares.
type tabletFlags struct {
	dataDir   string
	topic     string
	partition int32
	configs   []string
	// m is the data directory withTablet opened, for fn.
	m *tablet.Manager
}

func (f *tabletFlags) register(cmd *cobra.Command, writes bool) {
	f.registerTopic(cmd, writes, "the topic (required)")
}

// registerTopic registers the flags, with the --topic flag's own help (the
// commands where it is optional say so).
func (f *tabletFlags) registerTopic(cmd *cobra.Command, writes bool, topicHelp string) {
	cmd.Flags().StringVar(&f.dataDir, "data-dir", "", "the data directory (required)")
	cmd.Flags().StringVar(&f.topic, "topic", "", topicHelp)
	cmd.Flags().Int32Var(&f.partition, "partition", 0, "the partition")
	if writes {
		cmd.Flags().StringArrayVar(&f.configs, "config", nil,
			"a topic config as key=value, repeatable: "+strings.Join(tablet.ConfigKeys(), ", ")+
				" (kept in the tablet directory for later commands)")
	}
}

// remote checks the flags of a command sent to a running broker
// (--bootstrap-server) and returns its partition: --partition's, or -1
// for every one.
func (f *tabletFlags) remote(cmd *cobra.Command) (int32, error) {
	if f.dataDir != "" {
		return 0, errors.New("give --data-dir or --bootstrap-server, not both")
	}
	if f.topic == "" {
		return 0, errors.New("--topic is required")
	}
	if cmd.Flags().Changed("partition") {
		return f.partition, nil
	}
	return -1, nil
}

func (f *tabletFlags) tp() checkpoint.TopicPartition {
	return checkpoint.TopicPartition{Topic: f.topic, Partition: f.partition}
}

// access is how a command uses a data directory.
type access int8

const (
	readOnly access = iota // shared lock, nothing on disk changes
	write                  // exclusive lock
	create                 // exclusive lock; a missing tablet (or directory) is created
)

// openManager is the one way every command opens a data directory: the
// engine's opener, which refuses what is not a data directory and takes its
// lock — shared for a command that only reads (which then changes no byte
// on disk, recovering in memory if it must), exclusive for one that writes
// — with a logger that only speaks up for warnings, on stderr.
func openManager(cmd *cobra.Command, dataDir string, a access) (*tablet.Manager, error) {
	if dataDir == "" {
		return nil, errors.New("--data-dir is required")
	}
	if a != create {
		// Only a command that creates tablets may create the directory.
		if _, err := os.Stat(dataDir); errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("no data directory %s", dataDir)
		}
	}
	m, err := tablet.OpenManager(vfs.OS, dataDir, tablet.ManagerOptions{ReadOnly: a == readOnly,
		Tablet: tablet.Options{Logger: quietLogger(cmd)}, Recovery: recovery.Options{Progress: recoveryProgress(cmd.ErrOrStderr(), dataDir)}})
	if err == nil {
		printLoadChanges(cmd.ErrOrStderr(), m, a == readOnly)
	}
	return m, err
}

// quietLogger is a command's logger: warnings and errors only, on stderr.
func quietLogger(cmd *cobra.Command) *slog.Logger {
	return slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// printLoadChanges tells what loading the directory changed — nothing is
// ever done quietly — on stderr: for a reader, what recovery did in memory
// only (the directory itself is as it was).
func printLoadChanges(w io.Writer, m *tablet.Manager, inMemory bool) {
	how := ""
	if inMemory {
		how = " (in memory only: the directory is unchanged; seglog recover does it on disk)"
	}
	all := m.Loaded.Report
	for _, t := range m.Loaded.Tablets {
		all = append(all, t.Report...)
	}
	// Damage is a line each; notes of the same kind (the same action for
	// the same reason: 56 indexes rebuilt after a crash) are one line with
	// their count and a few of their files, so that no damage line is
	// buried under them.
	type kind struct {
		action recovery.Action
		why    string
	}
	notes := map[kind][]recovery.Change{}
	var order []kind
	for _, c := range all {
		if isDamage(m, c) {
			fmt.Fprintf(w, "damage: %s%s\n", seglog.Humanize(c.String()), how)
			continue
		}
		k := kind{c.Action, c.Why}
		if notes[k] == nil {
			order = append(order, k)
		}
		notes[k] = append(notes[k], c)
	}
	const shown = 3
	for _, k := range order {
		cs := notes[k]
		if len(cs) == 1 {
			fmt.Fprintf(w, "note: %s%s\n", seglog.Humanize(cs[0].String()), how)
			continue
		}
		var files []string
		for _, c := range cs[:min(len(cs), shown)] {
			files = append(files, c.File)
		}
		if len(cs) > shown {
			files = append(files, fmt.Sprintf("%d more", len(cs)-shown))
		}
		line := fmt.Sprintf("%d files: %s", len(cs), k.action)
		if k.why != "" {
			line += ": " + k.why
		}
		fmt.Fprintf(w, "note: %s (%s)%s\n", seglog.Humanize(line), strings.Join(files, ", "), how)
	}
}

// isDamage reports whether a load change means records that had been
// acknowledged as durable are gone or unreadable: data cut after a clean
// shutdown, or below the recovery point.
func isDamage(m *tablet.Manager, c recovery.Change) bool {
	switch {
	case c.Action == recovery.Lost:
		return true
	case !m.Loaded.CleanShutdown:
		return false // a torn tail after a crash: unacknowledged, expected
	case c.Action == recovery.Truncated:
		return true
	case c.Action == recovery.Deleted:
		n, err := logfile.ParseFilename(filepath.Base(c.File))
		return err == nil && n.Kind == logfile.Log && n.Suffix == ""
	}
	return false
}

// damageOf returns the load's damage in a tablet at or after offset from
// (a read that starts past the damage is not failed by it), as one error,
// or nil.
func damageOf(m *tablet.Manager, t *tablet.Tablet, from int64) error {
	// below reports whether a change is wholly below from: a Lost range
	// ending there, or a segment file whose successor starts there.
	below := func(c recovery.Change) bool {
		if c.Action == recovery.Lost {
			return c.ToOffset <= from
		}
		n, err := logfile.ParseFilename(filepath.Base(c.File))
		if err != nil {
			return false
		}
		for _, s := range t.Segments() {
			if s.BaseOffset > n.Base {
				return s.BaseOffset <= from
			}
		}
		return false
	}
	var errs []error
	for _, rt := range m.Loaded.Tablets {
		if rt.Dir != t.Dir() {
			continue
		}
		for _, c := range rt.Report {
			if isDamage(m, c) && !below(c) {
				errs = append(errs, errors.New(c.String()))
			}
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%s is damaged — the records after the last one printed are not readable, though they were acknowledged (seglog verify tells more; seglog recover cuts the damage for good):\n%w",
		t.TopicPartition().DirName(), errors.Join(errs...))
}

// withTablet opens the data directory, gets the tablet (creating it, for a
// command that creates, with the --config values over the defaults; or
// changing an existing one's configs), runs fn and closes the directory
// (cleanly, for a writer; a reader leaves it as it was).
func (f *tabletFlags) withTablet(cmd *cobra.Command, a access, fn func(t *tablet.Tablet) error) (err error) {
	if f.topic == "" {
		return errors.New("--topic is required")
	}
	m, err := openManager(cmd, f.dataDir, a)
	if err != nil {
		return err
	}
	f.m = m
	defer func() { err = errors.Join(err, m.Close()) }()
	t, ok := m.Get(f.tp())
	if !ok {
		if a != create {
			return fmt.Errorf("%w: %s in %s", tablet.ErrNotFound, f.tp(), f.dataDir)
		}
		cfg, err := applyConfigs(tablet.DefaultConfig(), f.configs)
		if err != nil {
			return err
		}
		if t, err = m.Create(f.tp(), &cfg); err != nil {
			return err
		}
	} else if len(f.configs) > 0 {
		cfg, err := applyConfigs(t.Config(), f.configs)
		if err != nil {
			return err
		}
		if err := t.SetConfig(cfg); err != nil {
			return err
		}
	}
	tiers, err := attachTiers(cmd, m, func(tp checkpoint.TopicPartition) bool { return tp == f.tp() })
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, tiers.Close()) }()
	return fn(t)
}

// withTablets runs fn on the topic's partitions, in partition order: the
// one --partition names when one, else every one the directory holds
// (read-only).
func (f *tabletFlags) withTablets(cmd *cobra.Command, one bool, fn func(ts []*tablet.Tablet) error) (err error) {
	if one {
		return f.withTablet(cmd, readOnly, func(t *tablet.Tablet) error { return fn([]*tablet.Tablet{t}) })
	}
	if f.topic == "" {
		return errors.New("--topic is required")
	}
	m, err := openManager(cmd, f.dataDir, readOnly)
	if err != nil {
		return err
	}
	f.m = m
	defer func() { err = errors.Join(err, m.Close()) }()
	var ts []*tablet.Tablet
	for _, t := range m.Tablets() {
		if t.TopicPartition().Topic == f.topic {
			ts = append(ts, t)
		}
	}
	if len(ts) == 0 {
		return fmt.Errorf("%w: topic %q in %s", tablet.ErrNotFound, f.topic, f.dataDir)
	}
	slices.SortFunc(ts, func(a, b *tablet.Tablet) int {
		return cmp.Compare(a.TopicPartition().Partition, b.TopicPartition().Partition)
	})
	tiers, err := attachTiers(cmd, m, func(tp checkpoint.TopicPartition) bool { return tp.Topic == f.topic })
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, tiers.Close()) }()
	return fn(ts)
}

// attachTiers attaches the tier of each matching tablet that was tiered
// (seglog tier), so reads below the local log start go to the store.
// S3 credentials come from the standard AWS chain. A tier that cannot be
// attached (its store down) is said on stderr and the command goes on: the
// tablet keeps its log start and serves its local records, and a read
// below them says the tier is not attached.
func attachTiers(cmd *cobra.Command, m *tablet.Manager, match func(checkpoint.TopicPartition) bool) (*tiering.Attached, error) {
	logger := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	a, err := tiering.Attach(cmd.Context(), m, match, nil, &tiering.Options{Logger: logger})
	if err != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s\n  (the local records are served; those below the local log start are not until the store answers)\n",
			seglog.Humanize(err.Error()))
	}
	return a, nil
}

func applyConfigs(cfg tablet.Config, kvs []string) (tablet.Config, error) {
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return cfg, fmt.Errorf("%w: --config %q is not key=value", tablet.ErrConfig, kv)
		}
		if err := cfg.Set(strings.TrimSpace(k), v); err != nil {
			return cfg, err
		}
	}
	return cfg, nil
}

func nowMs() int64 { return time.Now().UnixMilli() }

func printJSON(w io.Writer, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", data)
	return err
}

// The most a RecordBatch v2 adds to its records (the 61-byte header) and
// a record to its key and value (attributes, varint lengths and deltas, no
// headers): produce cuts batches by them before max.message.bytes.
const (
	batchOverhead  = record.HeaderSize
	recordOverhead = 1 + 5 + 10 + 5 + 5 + 5 + 1
)

func newProduceCmd() *cobra.Command {
	var (
		f            tabletFlags
		batchRecords int
		keySep       string
		codec        string
		sync         bool
		acksFile     string
		client       clientFlags
		headers      []string
	)
	cmd := &cobra.Command{
		Use:   "produce (--data-dir D | --bootstrap-server H:P) --topic T",
		Short: "Append the lines of stdin as records",
		Long: `produce reads stdin line by line and appends each line as a record (its
value; with --key-separator, the part before the first separator is the key),
--batch-records records to a batch. It prints
{"records":N,"batches":B,"firstOffset":X,"lastOffset":Y}.

With --sync every batch is durable (fsynced) before the next is read. With
--acks-file, after each batch is durable (--sync) or written, its first and
last offsets are appended to the file as "first last" and the file is
fsynced: what the file lists was acknowledged.

With --bootstrap-server (and --command-config) it sends the lines to a
running broker instead, as kafka-console-producer.sh does: acks all,
idempotent, --header k=v on every record, the client's partitioner unless
--partition is given; it prints nothing, and exits 1 naming the first line
that failed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if client.bootstrap != "" {
				p, err := f.remote(cmd)
				if err != nil {
					return err
				}
				return produceRemote(cmd, client, f.topic, p, keySep, codec, headers)
			}
			c, err := record.ParseCompression(codec)
			if err != nil {
				return err
			}
			if batchRecords <= 0 {
				return fmt.Errorf("--batch-records must be positive, not %d", batchRecords)
			}
			var acks *os.File
			syncAcks := true
			if acksFile != "" {
				if acks, err = os.OpenFile(acksFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644); err != nil {
					return err
				}
				defer acks.Close()
				// A pipe or a terminal (--acks-file /dev/stdout) has nothing to fsync.
				if info, err := acks.Stat(); err == nil && !info.Mode().IsRegular() {
					syncAcks = false
				}
			}
			return f.withTablet(cmd, create, func(t *tablet.Tablet) error {
				sum := struct {
					Records     int   `json:"records"`
					Batches     int   `json:"batches"`
					FirstOffset int64 `json:"firstOffset"`
					LastOffset  int64 `json:"lastOffset"`
				}{FirstOffset: -1, LastOffset: -1}
				var pending []record.Record
				flush := func() error {
					if len(pending) == 0 {
						return nil
					}
					res, err := t.AppendRecords(pending, c, tablet.AppendOptions{Sync: sync})
					if err != nil {
						return err
					}
					if sum.FirstOffset < 0 {
						sum.FirstOffset = res.FirstOffset
					}
					sum.LastOffset = res.LastOffset
					sum.Records += len(pending)
					sum.Batches++
					pending = pending[:0]
					if acks != nil {
						if _, err := fmt.Fprintf(acks, "%d %d\n", res.FirstOffset, res.LastOffset); err != nil {
							return err
						}
						if syncAcks {
							return acks.Sync()
						}
					}
					return nil
				}
				// A batch is cut before it would pass max.message.bytes, and a
				// record that cannot fit in any batch fails alone: what came
				// before it is produced, and the summary says so.
				limit := t.Config().MaxMessageBytes
				pendingBytes := 0
				lineNo := 0
				produce := func() error {
					sc := bufio.NewScanner(cmd.InOrStdin())
					sc.Buffer(make([]byte, 64<<10), 64<<20)
					for sc.Scan() {
						lineNo++
						line := sc.Bytes()
						r := record.Record{Timestamp: nowMs(), Value: append([]byte(nil), line...)}
						if keySep != "" {
							if k, v, ok := strings.Cut(string(line), keySep); ok {
								r.Key, r.Value = []byte(k), []byte(v)
							}
						}
						size := recordOverhead + len(r.Key) + len(r.Value)
						if batchOverhead+size > limit {
							if err := flush(); err != nil {
								return err
							}
							return fmt.Errorf("record too large: line %d is %d bytes, the limit is max.message.bytes=%d; raise it with --config max.message.bytes=N",
								lineNo, len(line), limit)
						}
						if len(pending) > 0 && batchOverhead+pendingBytes+size > limit {
							if err := flush(); err != nil {
								return err
							}
						}
						pending = append(pending, r)
						pendingBytes = 0
						for _, p := range pending {
							pendingBytes += recordOverhead + len(p.Key) + len(p.Value)
						}
						if len(pending) == batchRecords {
							if err := flush(); err != nil {
								return err
							}
						}
					}
					if err := sc.Err(); err != nil {
						if errors.Is(err, bufio.ErrTooLong) {
							return fmt.Errorf("line %d is longer than 64 MiB, the longest line produce reads", lineNo+1)
						}
						return err
					}
					return flush()
				}
				err := produce()
				if sum.Records > 0 || err == nil {
					// What was written is said even when a later line failed.
					err = errors.Join(err, printJSON(cmd.OutOrStdout(), sum))
				}
				return err
			})
		},
	}
	f.register(cmd, true)
	cmd.Flags().IntVar(&batchRecords, "batch-records", 100, "records per batch")
	client.add(cmd)
	cmd.Flags().StringArrayVar(&headers, "header", nil, "with --bootstrap-server: a header key=value on every record (repeatable)")
	cmd.Flags().StringVar(&keySep, "key-separator", "", "split each line into key and value at the first occurrence")
	cmd.Flags().StringVar(&codec, "compression", "none", "none, gzip, snappy, lz4 or zstd")
	cmd.Flags().BoolVar(&sync, "sync", false, "make each batch durable before the next")
	cmd.Flags().StringVar(&acksFile, "acks-file", "", "append each acknowledged batch's offsets to this file (fsynced)")
	return cmd
}

func newAppendCmd() *cobra.Command {
	var (
		f       tabletFlags
		batches string
		origin  string
	)
	cmd := &cobra.Command{
		Use:   "append --data-dir D --topic T --batches FILE|-",
		Short: "Append raw RecordBatch v2 bytes as a producer sends them",
		Long: `append reads one or more RecordBatch v2 batches, back to back, as a producer
sends them (base offset 0), and appends each with Kafka's rules for
--origin: client (every check; COMMIT/ABORT markers refused), coordinator
(markers accepted) or replication (the batches keep the offsets and leader
epoch they carry). One JSON line per batch:
{"baseOffset":B,"lastOffset":L,"duplicate":false} or
{"error":"OUT_OF_ORDER_SEQUENCE_NUMBER","message":"…"} with Kafka's error
names. The exit status is 1 if any batch was rejected.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, err := parseOrigin(origin)
			if err != nil {
				return err
			}
			var data []byte
			switch batches {
			case "":
				return errors.New("--batches is required (a file, or - for stdin)")
			case "-":
				data, err = io.ReadAll(cmd.InOrStdin())
			default:
				data, err = os.ReadFile(batches)
			}
			if err != nil {
				return err
			}
			if len(data) == 0 {
				return fmt.Errorf("no batch to append: %s is empty", map[bool]string{true: "stdin", false: batches}[batches == "-"])
			}
			rejected := 0
			err = f.withTablet(cmd, create, func(t *tablet.Tablet) error {
				w := cmd.OutOrStdout()
				for len(data) > 0 {
					size := len(data)
					if _, hsize, err := record.ParseHeader(data); err == nil && hsize <= int64(len(data)) {
						size = int(hsize)
					}
					res, err := t.Append(data[:size], tablet.AppendOptions{Origin: o})
					data = data[size:]
					if err != nil {
						rejected++
						if err := printJSON(w, map[string]string{"error": tablet.ErrorName(err), "message": err.Error()}); err != nil {
							return err
						}
						continue
					}
					if err := printJSON(w, struct {
						BaseOffset int64 `json:"baseOffset"`
						LastOffset int64 `json:"lastOffset"`
						Duplicate  bool  `json:"duplicate"`
					}{res.FirstOffset, res.LastOffset, res.Duplicate}); err != nil {
						return err
					}
				}
				return nil
			})
			if err == nil && rejected > 0 {
				return &exitError{code: 1, msg: fmt.Sprintf("%d batch(es) rejected", rejected)}
			}
			return err
		},
	}
	f.register(cmd, true)
	cmd.Flags().StringVar(&batches, "batches", "", "the file of batches, or - for stdin")
	cmd.Flags().StringVar(&origin, "origin", "client", "client, coordinator or replication")
	return cmd
}

func parseOrigin(s string) (record.Origin, error) {
	switch s {
	case "client":
		return record.OriginClient, nil
	case "coordinator":
		return record.OriginCoordinator, nil
	case "replication":
		return record.OriginReplication, nil
	}
	return 0, fmt.Errorf("--origin %q is not client, coordinator or replication", s)
}

func newEndTxnCmd() *cobra.Command {
	var (
		f                tabletFlags
		pid              int64
		epoch            int16
		coordinatorEpoch int32
		commit, abort    bool
	)
	cmd := &cobra.Command{
		Use:   "end-txn --data-dir D --topic T --producer-id ID --producer-epoch E --commit|--abort",
		Short: "Write a COMMIT or ABORT marker as the transaction coordinator would",
		Long: `end-txn writes a transaction marker (a control batch) for the producer, as
the transaction coordinator does, and prints {"offset":O}. An ABORT indexes
the transaction in the .txnindex so that read-committed readers skip it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if commit == abort {
				return errors.New("give one of --commit and --abort")
			}
			data, err := record.EndTxnMarker{Type: record.MarkerType(commit), ProducerID: pid, ProducerEpoch: epoch,
				CoordinatorEpoch: coordinatorEpoch, Timestamp: nowMs()}.AppendTo(nil)
			if err != nil {
				return err
			}
			return f.withTablet(cmd, write, func(t *tablet.Tablet) error {
				res, err := t.Append(data, tablet.AppendOptions{Origin: record.OriginCoordinator})
				if err != nil {
					return &exitError{code: 1, msg: tablet.ErrorName(err) + ": " + err.Error()}
				}
				return printJSON(cmd.OutOrStdout(), map[string]int64{"offset": res.FirstOffset})
			})
		},
	}
	f.register(cmd, false)
	cmd.Flags().Int64Var(&pid, "producer-id", -1, "the producer id (required)")
	cmd.Flags().Int16Var(&epoch, "producer-epoch", 0, "the producer epoch")
	cmd.Flags().Int32Var(&coordinatorEpoch, "coordinator-epoch", 0, "the coordinator epoch")
	cmd.Flags().BoolVar(&commit, "commit", false, "commit the transaction")
	cmd.Flags().BoolVar(&abort, "abort", false, "abort the transaction")
	return cmd
}

func newConsumeCmd() *cobra.Command {
	var (
		f          tabletFlags
		fromOffset int64
		fromTime   int64
		from       string
		maxRecords int
		isolation  string
		format     string
		client     clientFlags
		group      string
		beginning  bool
		timeoutMs  int64
	)
	cmd := &cobra.Command{
		Use:   "consume (--data-dir D | --bootstrap-server H:P) --topic T",
		Short: "Print records",
		Long: `consume prints the records of every partition of --topic, partition by
partition in partition order (or of --partition's alone), from --from-offset
(with --partition, if the topic has several), --from-time (the first record at or after that time, in
ms) or --from earliest|latest (the default is earliest), at most
--max-records of them in all. --isolation read-committed stops
at the last stable offset and hides aborted transactions; read-uncommitted
(the default) stops at the high watermark.

--format json (the default) prints one object per record,
{"offset":O,"timestamp":T,"key":K,"value":V,"headers":{…}} (with
"partition":P first when every partition is read), where a key,
value or header that is not valid UTF-8 is base64 and named in
"base64":["key",…]; --format value prints the values, one per line.

With --bootstrap-server (and --command-config) it reads from a running
broker instead, as kafka-console-consumer.sh does: every partition (or
--partition's), from --group's committed offsets where it has some (and
the offsets of what it printed committed at the end), else from the end,
or the start with --from-beginning; until --max-records,
--timeout-ms without a record, or SIGINT/SIGTERM. Each JSON record names
its partition.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			iso := tablet.ReadHighWatermark
			switch isolation {
			case "read-uncommitted", "read_uncommitted": // (Kafka's spelling too)
			case "read-committed", "read_committed":
				iso = tablet.ReadCommitted
			default:
				return fmt.Errorf("--isolation %q is not read-uncommitted or read-committed", isolation)
			}
			if format != "json" && format != "value" {
				return fmt.Errorf("--format %q is not json or value", format)
			}
			if maxRecords < 0 {
				return fmt.Errorf("--max-records %d is negative", maxRecords)
			}
			if client.bootstrap != "" {
				p, err := f.remote(cmd)
				if err != nil {
					return err
				}
				return consumeRemote(cmd, client, f.topic, p, group, beginning, iso == tablet.ReadCommitted, maxRecords,
					time.Duration(timeoutMs)*time.Millisecond, format)
			}
			if group != "" || beginning || timeoutMs > 0 {
				return errors.New("--group, --from-beginning and --timeout-ms are for --bootstrap-server (with --data-dir: --from earliest)")
			}
			if cmd.Flags().Changed("from-offset") && fromOffset < 0 {
				return fmt.Errorf("--from-offset %d is negative: offsets start at 0 (--from earliest reads from the log start)", fromOffset)
			}
			if cmd.Flags().Changed("from-time") && fromTime < 0 {
				return fmt.Errorf("--from-time %d is negative: a time is milliseconds since 1970", fromTime)
			}
			one := cmd.Flags().Changed("partition")
			return f.withTablets(cmd, one, func(ts []*tablet.Tablet) error {
				if len(ts) > 1 && cmd.Flags().Changed("from-offset") {
					return fmt.Errorf("--from-offset needs --partition: topic %q has %d partitions, and an offset is a partition's", f.topic, len(ts))
				}
				one = one || len(ts) == 1
				w := bufio.NewWriter(cmd.OutOrStdout())
				defer w.Flush()
				n := 0
				for _, t := range ts {
					if maxRecords > 0 && n >= maxRecords {
						return nil
					}
					start, err := startOffset(cmd, t, fromOffset, fromTime, from)
					if err != nil {
						return err
					}
					var werr error
					err = t.Records(start, iso, func(_ record.Batch, r *record.Record) bool {
						if maxRecords > 0 && n >= maxRecords {
							return false
						}
						n++
						if format == "value" {
							_, werr = fmt.Fprintf(w, "%s\n", r.Value)
						} else {
							out := recordJSON(r)
							if !one {
								p := t.TopicPartition().Partition
								out.Partition = &p
							}
							werr = printJSON(w, out)
						}
						return werr == nil
					})
					if err == nil && werr == nil && (maxRecords == 0 || n < maxRecords) {
						// At the end: damage that loading found there is an error,
						// never a quiet end of the log.
						err = damageOf(f.m, t, start)
					}
					if err = errors.Join(err, werr); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
	f.register(cmd, false)
	cmd.Flags().Int64Var(&fromOffset, "from-offset", -1, "the first offset")
	cmd.Flags().Int64Var(&fromTime, "from-time", -1, "start at the first record at or after this time (ms)")
	cmd.Flags().StringVar(&from, "from", "", "earliest or latest")
	cmd.Flags().IntVar(&maxRecords, "max-records", 0, "stop after this many records (0: no limit)")
	cmd.Flags().IntVar(&maxRecords, "max-messages", 0, "Kafka's name of --max-records")
	cmd.Flags().StringVar(&isolation, "isolation", "read-uncommitted", "read-uncommitted or read-committed")
	cmd.Flags().StringVar(&isolation, "isolation-level", "read-uncommitted", "Kafka's name of --isolation")
	client.add(cmd)
	cmd.Flags().StringVar(&group, "group", "", "with --bootstrap-server: consume as this group, from its committed offsets")
	cmd.Flags().BoolVar(&beginning, "from-beginning", false, "with --bootstrap-server: from the start, not the end (without --group's offsets)")
	cmd.Flags().Int64Var(&timeoutMs, "timeout-ms", 0, "with --bootstrap-server: stop after this long without a record (0: run until stopped)")
	cmd.Flags().StringVar(&format, "format", "json", "json or value")
	return cmd
}

func startOffset(cmd *cobra.Command, t *tablet.Tablet, fromOffset, fromTime int64, from string) (int64, error) {
	set := 0
	for _, s := range []bool{fromOffset >= 0, fromTime >= 0, from != ""} {
		if s {
			set++
		}
	}
	if set > 1 {
		return 0, errors.New("give at most one of --from-offset, --from-time and --from")
	}
	switch {
	case fromOffset >= 0:
		return fromOffset, nil
	case fromTime >= 0:
		o, err := t.OffsetForTimestamp(fromTime)
		if errors.Is(err, tablet.ErrNoOffsetForTimestamp) {
			return t.Offsets().LogEndOffset, nil
		}
		return o.Offset, err
	case from == "latest":
		return t.Offsets().LogEndOffset, nil
	case from == "" || from == "earliest":
		return t.Offsets().LogStartOffset, nil
	}
	return 0, fmt.Errorf("--from %q is not earliest or latest", from)
}

type recordOut struct {
	Partition *int32            `json:"partition,omitempty"` // when several are read
	Offset    int64             `json:"offset"`
	Timestamp int64             `json:"timestamp"`
	Key       *string           `json:"key"`
	Value     *string           `json:"value"`
	Headers   map[string]string `json:"headers,omitempty"`
	Base64    []string          `json:"base64,omitempty"`
}

func recordJSON(r *record.Record) recordOut {
	out := recordOut{Offset: r.Offset, Timestamp: r.Timestamp}
	text := func(name string, b []byte) *string {
		if b == nil {
			return nil
		}
		s := string(b)
		if !utf8.Valid(b) {
			s = base64.StdEncoding.EncodeToString(b)
			out.Base64 = append(out.Base64, name)
		}
		return &s
	}
	out.Key, out.Value = text("key", r.Key), text("value", r.Value)
	for _, h := range r.Headers {
		if out.Headers == nil {
			out.Headers = map[string]string{}
		}
		if v := text("header:"+string(h.Key), h.Value); v != nil {
			out.Headers[string(h.Key)] = *v
		} else {
			out.Headers[string(h.Key)] = ""
		}
	}
	return out
}

func newOffsetsCmd() *cobra.Command {
	var f tabletFlags
	cmd := &cobra.Command{
		Use:   "offsets --data-dir D [--topic T --partition P]",
		Short: "Print a tablet's offsets and segments (every tablet's without --topic)",
		Long: `offsets prints, as JSON, each tablet's logStartOffset, localLogStartOffset,
highWatermark, lastStableOffset, logEndOffset and recoveryPoint, and its
segments (base offset, next offset, size, path); for a compacted tablet, the
cleaner's checkpoint and its clean and dirty sections (bytes, dirty ratio).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			m, err := openManager(cmd, f.dataDir, readOnly)
			if err != nil {
				return err
			}
			defer func() { err = errors.Join(err, m.Close()) }()
			tiers, err := attachTiers(cmd, m, nil)
			if err != nil {
				return err
			}
			defer func() { err = errors.Join(err, tiers.Close()) }()
			type cleanerOut struct {
				// Checkpoint is the cleaner-offset-checkpoint's entry (-1:
				// never cleaned).
				Checkpoint int64 `json:"checkpoint"`
				tablet.Cleanable
			}
			type out struct {
				Topic     string `json:"topic"`
				Partition int32  `json:"partition"`
				tablet.Offsets
				// Cleaner is there for a compacted tablet.
				Cleaner  *cleanerOut          `json:"cleaner,omitempty"`
				Segments []tablet.SegmentInfo `json:"segments"`
			}
			var all []out
			for _, t := range m.Tablets() {
				tp := t.TopicPartition()
				if f.topic != "" && tp != f.tp() {
					continue
				}
				o := out{Topic: tp.Topic, Partition: tp.Partition, Offsets: t.Offsets(), Segments: t.Segments()}
				if t.Config().Compacted() || t.CleanerCheckpoint() >= 0 {
					c, err := t.Cleanable()
					if err != nil {
						return fmt.Errorf("%s: %w", tp, err)
					}
					o.Cleaner = &cleanerOut{Checkpoint: t.CleanerCheckpoint(), Cleanable: c}
				}
				all = append(all, o)
			}
			if f.topic != "" {
				if len(all) == 0 {
					return fmt.Errorf("%w: %s in %s", tablet.ErrNotFound, f.tp(), f.dataDir)
				}
				return printJSON(cmd.OutOrStdout(), all[0])
			}
			if all == nil {
				all = []out{}
			}
			return printJSON(cmd.OutOrStdout(), all)
		},
	}
	f.registerTopic(cmd, false, "only this topic's tablet (every tablet's without it)")
	return cmd
}
