package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/seglog/seglog/broker"
	"github.com/seglog/seglog/logfile"
	"github.com/seglog/seglog/server"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/recovery"
	"github.com/seglog/seglog/tablet"
	"github.com/seglog/seglog/tiering"
	"github.com/seglog/seglog/vfs"
)

func newDemoCmd() *cobra.Command {
	dir := filepath.Join("data", "demo")
	records := 1_000_000
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "A tour: produce a million records, read them back, retry, crash a copy and recover it",
		Long: `demo is a tour of the engine on a data directory of its own (--dir, removed
first): it produces --records records over three topics (plain lz4 batches,
an idempotent producer, transactions of which every tenth is aborted), sends
one idempotent batch again to show the retry dropped, reads everything back
(read-committed where there are transactions), finds an offset by time,
writes a topic of every kind of batch and dumps it, serves the Kafka protocol
on a loopback port for a real Kafka client (franz-go) to produce and consume,
tiers the sealed segments, closes the directory cleanly, then crashes a copy of
it (the marker gone, a torn batch, an index deleted), recovers the copy and
prints the offsets.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if records < 30 {
				return fmt.Errorf("--records must be at least 30, not %d", records)
			}
			return runTour(cmd.OutOrStdout(), cmd.ErrOrStderr(), dir, records)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", dir, "the data directory of the tour (removed first)")
	cmd.Flags().IntVar(&records, "records", records, "how many records to produce")
	return cmd
}

// tour carries the tour's output and state.
type tour struct {
	w     io.Writer
	dir   string
	m     *tablet.Manager
	logs  *slog.Logger
	start time.Time // the records' timestamps start here
	tiers *tiering.Attached
}

func (t *tour) printf(format string, args ...any) { fmt.Fprintf(t.w, format, args...) }

func runTour(w, errw io.Writer, dir string, n int) (err error) {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	t := &tour{w: w, dir: dir, logs: slog.New(slog.NewTextHandler(errw, &slog.HandlerOptions{Level: slog.LevelWarn})),
		start: time.Now().Add(-time.Hour).Truncate(time.Second)}
	if t.m, err = tablet.OpenManager(vfs.OS, dir, tablet.ManagerOptions{Tablet: tablet.Options{Logger: t.logs}}); err != nil {
		return err
	}
	defer func() {
		if t.m != nil {
			err = errors.Join(err, t.m.Close())
		}
	}()
	t.printf("seglog demo: a tour on %s\n\n", dir)
	cfg := tablet.DefaultConfig()
	// Small segments, so that there are several to roll, read across, tier
	// and recover: 1 MiB for the default million records (~11 bytes each).
	cfg.SegmentBytes = min(max(int64(n)*11/10, 64<<10), 1<<20)
	clicks, payments, orders := n*4/10, n*3/10, n-n*4/10-n*3/10

	t.printf("1. Produce %d records over three topics\n", n)
	began := time.Now()
	var bytes int64
	steps := []struct {
		name    string
		records int
		produce func(*tablet.Tablet, int) (int64, string, error)
	}{
		{"clicks", clicks, t.produceClicks},
		{"payments", payments, t.producePayments},
		{"orders", orders, t.produceOrders},
	}
	for _, s := range steps {
		tab, err := t.m.Create(checkpoint.TopicPartition{Topic: s.name}, &cfg)
		if err != nil {
			return err
		}
		b, what, err := s.produce(tab, s.records)
		if err != nil {
			return fmt.Errorf("producing %s: %w", s.name, err)
		}
		bytes += b
		t.printf("   %-11s %8d records, %s\n", s.name+"-0", s.records, what)
	}
	took := time.Since(began)
	t.printf("   → %d records, %.1f MB in %.2f s (%.0f MB/s, %.0f records/s)\n\n", n, float64(bytes)/1e6, took.Seconds(),
		float64(bytes)/1e6/took.Seconds(), float64(n)/took.Seconds())

	if err := t.retry(); err != nil {
		return err
	}
	if err := t.readBack(); err != nil {
		return err
	}
	if err := t.byTime("4. Offsets by time"); err != nil {
		return err
	}
	if err := t.kinds(); err != nil {
		return err
	}
	if err := t.metrics(); err != nil {
		return err
	}
	if err := t.serve(); err != nil {
		return fmt.Errorf("serving: %w", err)
	}
	if err := t.tier(); err != nil {
		return fmt.Errorf("tiering: %w", err)
	}
	t.printf("9. Close cleanly: every tablet flushed, its writer state snapshotted, the checkpoints written, then the clean-shutdown marker\n\n")
	err = t.m.Close()
	t.m = nil
	if err != nil {
		return err
	}
	return t.crashCopy()
}

func (t *tour) produceClicks(tab *tablet.Tablet, n int) (int64, string, error) {
	var bytes int64
	batches := 0
	for i := 0; i < n; i += 1000 {
		recs := make([]record.Record, 0, 1000)
		for j := i; j < min(i+1000, n); j++ {
			recs = append(recs, record.Record{Timestamp: t.start.UnixMilli() + int64(j/100),
				Key: fmt.Appendf(nil, "user-%d", j%977), Value: fmt.Appendf(nil, `{"page":"/p/%d","ms":%d}`, j%31, j%500)})
		}
		if _, err := tab.AppendRecords(recs, record.LZ4, tablet.AppendOptions{}); err != nil {
			return 0, "", err
		}
		batches++
	}
	for _, s := range tab.Segments() {
		bytes += s.Size
	}
	return bytes, fmt.Sprintf("%d lz4 batches in %d segment(s)", batches, len(tab.Segments())), nil
}

// paymentsPID is the tour's idempotent producer.
const paymentsPID = 7

func (t *tour) producePayments(tab *tablet.Tablet, n int) (int64, string, error) {
	var bytes int64
	seq := int32(0)
	for i := 0; i < n; i += 500 {
		b := record.NewBuilder(record.Zstd)
		b.SetProducer(paymentsPID, 0, seq)
		for j := i; j < min(i+500, n); j++ {
			if err := b.Append(record.Record{Timestamp: t.start.UnixMilli() + int64(j/100),
				Key: fmt.Appendf(nil, "account-%d", j%101), Value: fmt.Appendf(nil, "%d.%02d EUR", j%1000, j%100)}); err != nil {
				return 0, "", err
			}
			seq++
		}
		batch, err := b.Build()
		if err != nil {
			return 0, "", err
		}
		bytes += int64(batch.Size())
		if _, err := tab.Append(batch.Bytes(), tablet.AppendOptions{}); err != nil {
			return 0, "", err
		}
	}
	return bytes, fmt.Sprintf("zstd batches of 500 from idempotent producer %d", paymentsPID), nil
}

func (t *tour) produceOrders(tab *tablet.Tablet, n int) (int64, string, error) {
	var bytes int64
	txns, aborted := 0, 0
	for i := 0; i < n; i += 300 {
		pid := int64(100 + txns%3)
		b := record.NewBuilder(record.Snappy)
		b.SetProducer(pid, 0, int32(txns/3*300))
		b.SetTransactional(true)
		for j := i; j < min(i+300, n); j++ {
			if err := b.Append(record.Record{Timestamp: t.start.UnixMilli() + int64(j/100),
				Key: fmt.Appendf(nil, "order-%d", j), Value: fmt.Appendf(nil, "%d items", 1+j%9)}); err != nil {
				return 0, "", err
			}
		}
		batch, err := b.Build()
		if err != nil {
			return 0, "", err
		}
		if _, err := tab.Append(batch.Bytes(), tablet.AppendOptions{}); err != nil {
			return 0, "", err
		}
		typ := record.ControlCommit
		if txns%10 == 9 {
			typ, aborted = record.ControlAbort, aborted+1
		}
		marker, err := record.EndTxnMarker{Type: typ, ProducerID: pid, ProducerEpoch: 0, CoordinatorEpoch: 1,
			Timestamp: t.start.UnixMilli() + int64(i/100)}.AppendTo(nil)
		if err != nil {
			return 0, "", err
		}
		if _, err := tab.Append(marker, tablet.AppendOptions{Origin: record.OriginCoordinator}); err != nil {
			return 0, "", err
		}
		bytes += int64(batch.Size() + len(marker))
		txns++
	}
	return bytes, fmt.Sprintf("%d snappy transactions of 300 from 3 producers, %d aborted", txns, aborted), nil
}

func (t *tour) get(topic string) *tablet.Tablet {
	tab, _ := t.m.Get(checkpoint.TopicPartition{Topic: topic})
	return tab
}

// retry sends the idempotent producer's first batch again.
func (t *tour) retry() error {
	tab := t.get("payments")
	end := tab.Offsets().LogEndOffset
	first := (end - 1) / 500 * 500 // the last batch's first offset, and sequence
	b := record.NewBuilder(record.Zstd)
	b.SetProducer(paymentsPID, 0, int32(first))
	for j := first; j < end; j++ {
		if err := b.Append(record.Record{Timestamp: t.start.UnixMilli(), Value: []byte("a retry")}); err != nil {
			return err
		}
	}
	batch, err := b.Build()
	if err != nil {
		return err
	}
	res, err := tab.Append(batch.Bytes(), tablet.AppendOptions{})
	if err != nil {
		return err
	}
	t.printf("2. A producer retry: producer %d sends its last batch (sequence %d) again\n", paymentsPID, first)
	t.printf("   → duplicate: %v, answered with the original offsets [%d, %d]; the log end stays %d\n\n",
		res.Duplicate, res.FirstOffset, res.LastOffset, tab.Offsets().LogEndOffset)
	return nil
}

// readBack reads every topic as a consumer would.
func (t *tour) readBack() error {
	t.printf("3. Read everything back, CRCs checked (orders read-committed: aborted transactions hidden)\n")
	return t.readAll("records", "\n")
}

// readAll reads every topic from offset 0 as a consumer would (orders
// read-committed), printing each count as "N <what>".
func (t *tour) readAll(what, after string) error {
	began := time.Now()
	total := 0
	for _, topic := range []string{"clicks", "payments", "orders"} {
		iso := tablet.ReadHighWatermark
		if topic == "orders" {
			iso = tablet.ReadCommitted
		}
		n := 0
		if err := t.get(topic).Records(0, iso, func(record.Batch, *record.Record) bool { n++; return true }); err != nil {
			return err
		}
		total += n
		t.printf("   %-11s %8d %s\n", topic+"-0", n, what)
	}
	took := time.Since(began)
	t.printf("   → %d records in %.2f s (%.0f records/s)%s\n", total, took.Seconds(), float64(total)/took.Seconds(), after)
	return nil
}

// byTime finds an offset by timestamp.
func (t *tour) byTime(label string) error {
	clicks := t.get("clicks")
	end := clicks.Offsets().LogEndOffset
	ts := t.start.UnixMilli() + end/100/2
	o, err := clicks.OffsetForTimestamp(ts)
	if err != nil {
		return err
	}
	t.printf("%s: the first click at or after %s is offset %d (timestamp %s)\n\n", label,
		time.UnixMilli(ts).UTC().Format(time.RFC3339), o.Offset, time.UnixMilli(o.Timestamp).UTC().Format(time.RFC3339))
	return nil
}

// kinds appends one batch of every kind and dumps the segment.
func (t *tour) kinds() error {
	tab, err := t.m.Create(checkpoint.TopicPartition{Topic: "kinds"}, nil)
	if err != nil {
		return err
	}
	appends, err := demoAppends(time.Now().UnixMilli())
	if err != nil {
		return err
	}
	for _, a := range appends {
		if a.logAppendTime {
			continue // a LogAppendTime topic's; this one is CreateTime
		}
		if _, err := tab.Append(a.data, tablet.AppendOptions{Origin: a.origin, Sync: true}); err != nil {
			return err
		}
	}
	path := filepath.Join(tab.Dir(), logfile.Filename(0, logfile.Log))
	t.printf("5. Every kind of batch (each codec, an idempotent producer, a committed and an aborted transaction) in kinds-0, dumped:\n")
	d := &dumper{w: t.w, opts: dumpOptions{printData: true}}
	if err := d.dumpFile(vfs.OS, path); err != nil {
		return err
	}
	t.printf("\n")
	return nil
}

// metrics prints a summary of what the manager's Prometheus collector
// exposes.
func (t *tour) metrics() error {
	reg := prometheus.NewRegistry()
	if err := reg.Register(t.m.Collector()); err != nil {
		return err
	}
	families, err := reg.Gather()
	if err != nil {
		return err
	}
	sums := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			switch {
			case m.GetCounter() != nil:
				sums[f.GetName()] += m.GetCounter().GetValue()
			case m.GetGauge() != nil && f.GetName() != "seglog_offset":
				sums[f.GetName()] += m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				sums[f.GetName()+"_count"] += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	t.printf("6. What the Prometheus collector (Manager.Collector) reports, summed over the tablets:\n")
	t.printf("   appends %.0f, records %.0f, bytes %.0f, duplicates %.0f, rejections %.0f\n", sums["seglog_appends_total"],
		sums["seglog_append_records_total"], sums["seglog_append_bytes_total"], sums["seglog_duplicates_total"],
		sums["seglog_rejections_total"])
	t.printf("   rolls %.0f, segments %.0f (%.1f MB), flushes %.0f, sealed segments open %.0f\n\n", sums["seglog_rolls_total"],
		sums["seglog_segments"], sums["seglog_size_bytes"]/1e6, sums["seglog_flushes_total"], sums["seglog_open_segments"])
	return nil
}

// crashCopy copies the closed directory, damages the copy as a crash
// would, recovers it and prints what recovery did and the offsets.
func (t *tour) crashCopy() (err error) {
	crashed := t.dir + "-crash"
	if err := os.RemoveAll(crashed); err != nil {
		return err
	}
	if err := os.CopyFS(crashed, os.DirFS(t.dir)); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(crashed, checkpoint.CleanShutdownFile)); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(crashed, checkpoint.RecoveryPointFile)); err != nil {
		return err
	}
	clicks := filepath.Join(crashed, "clicks-0")
	names, err := os.ReadDir(clicks)
	if err != nil {
		return err
	}
	var active string
	for _, n := range names {
		if name, err := logfile.ParseFilename(n.Name()); err == nil && name.Kind == logfile.Log {
			active = filepath.Join(clicks, n.Name())
		}
	}
	f, err := os.OpenFile(active, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	torn := make([]byte, 200)
	copy(torn, []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x40, 0}) // a batch header promising 16 KiB
	_, err = f.Write(torn)
	if err = errors.Join(err, f.Close()); err != nil {
		return err
	}
	indexes, err := filepath.Glob(filepath.Join(crashed, "payments-0", "*.index"))
	if err != nil || len(indexes) == 0 {
		return errors.Join(err, fmt.Errorf("no .index in %s", crashed))
	}
	if err := os.Remove(indexes[0]); err != nil { // the first local one (older segments are in the store)
		return err
	}
	t.printf("10. Crash a copy (%s): no clean-shutdown marker, no recovery-point checkpoint, 200 bytes of a torn batch\n", crashed)
	t.printf("    at the end of clicks-0, the first local .index of payments-0 deleted. Open it:\n")
	m, err := tablet.OpenManager(vfs.OS, crashed, tablet.ManagerOptions{Tablet: tablet.Options{Logger: t.logs}})
	if err != nil {
		return err
	}
	defer func() {
		if t.tiers != nil {
			err = errors.Join(err, t.tiers.Close())
		}
	}()
	r := m.Loaded
	t.printf("   → recovered %.1f MB of .log in %.2f s (%.2f GiB/s)\n", float64(r.RecoveredBytes())/1e6, r.Duration.Seconds(),
		float64(r.RecoveredBytes())/(1<<30)/r.Duration.Seconds())
	for _, rt := range r.Tablets {
		checked, dropped := 0, 0
		for _, c := range rt.Report {
			switch {
			case c.Action == recovery.RebuiltIndex && c.Why == "recovering after an unclean shutdown":
				checked++ // every segment, after an unclean shutdown without a checkpoint
			case c.Action == recovery.Deleted && strings.HasSuffix(c.File, ".snapshot"):
				dropped++
			default:
				t.printf("     %s\n", c)
			}
		}
		t.printf("     %s: %d segment(s) checked batch by batch, %d writer-state snapshot(s) retaken\n",
			rt.TopicPartition, checked, dropped)
	}
	if err := t.attachCopy(m); err != nil {
		return err
	}
	t.printf("\n11. Offsets after recovery (the copy's tiers attached: the log starts in the store)\n")
	for _, tab := range m.Tablets() {
		o := tab.Offsets()
		t.printf("   %-11s log start %d, log end %d, high watermark %d, last stable %d, recovery point %d, %d segment(s)\n",
			tab.TopicPartition().String(), o.LogStartOffset, o.LogEndOffset, o.HighWatermark, o.LastStableOffset,
			o.RecoveryPoint, len(tab.Segments()))
	}
	if err := m.Close(); err != nil {
		return err
	}
	t.printf("\nInspect it yourself:\n")
	t.printf("   seglog offsets --data-dir %s\n", t.dir)
	t.printf("   seglog consume --data-dir %s --topic orders --isolation read-committed --max-records 5\n", t.dir)
	t.printf("   seglog dump --print-data-log %s\n", filepath.Join(t.dir, "kinds-0", logfile.Filename(0, logfile.Log)))
	t.printf("   seglog tier ls --store %s --data-dir %s\n", t.storeURL(), t.dir)
	t.printf("   seglog serve --data-dir %s    # then, from another shell:\n", t.dir)
	t.printf("   kcat -b 127.0.0.1:9092 -C -t orders -o beginning -e -X isolation.level=read_committed\n")
	return nil
}

// storeURL is the tour's object store: a directory beside its data.
func (t *tour) storeURL() string {
	abs, _ := filepath.Abs(t.dir + "-store")
	return "file://" + abs
}

// tier uploads the three topics' sealed segments to the tour's store,
// deletes them locally, and reads everything back through the store.
func (t *tour) tier() error {
	store := t.storeURL()
	if err := os.RemoveAll(strings.TrimPrefix(store, "file://")); err != nil {
		return err
	}
	ctx := context.Background()
	s, err := tiering.OpenStore(ctx, store, nil)
	if err != nil {
		return err
	}
	t.printf("8. Tier: the sealed segments of clicks, payments and orders uploaded to %s as stream objects,\n", store)
	t.printf("   then deleted locally (local.retention.bytes=0); every read below the local log start goes to the store\n")
	began := time.Now()
	var objects int
	var uploaded, deleted int64
	var tiers []*tiering.Tier
	defer func() {
		for _, x := range tiers {
			_ = x.Close()
		}
	}()
	for _, topic := range []string{"clicks", "payments", "orders"} {
		tab := t.get(topic)
		cfg := tab.Config()
		cfg.LocalRetentionBytes = 0
		if err := tab.SetConfig(cfg); err != nil {
			return err
		}
		if err := tiering.SaveStoreURL(vfs.OS, tab.Dir(), store); err != nil {
			return err
		}
		x, err := tiering.Open(ctx, tab, topic, 0, s, &tiering.Options{Logger: t.logs})
		if err != nil {
			return err
		}
		tiers = append(tiers, x)
		up, err := x.Upload(ctx, nil)
		if err != nil {
			return err
		}
		del, err := x.DeleteLocal()
		if err != nil {
			return err
		}
		objects += len(up.Objects)
		uploaded += up.Bytes
		deleted += del.Bytes
		o := tab.Offsets()
		t.printf("   %-11s %d object(s); log start %d, local log start %d, log end %d\n", topic+"-0", len(up.Objects),
			o.LogStartOffset, o.LocalLogStartOffset, o.LogEndOffset)
	}
	took := time.Since(began)
	t.printf("   → %d objects, %.1f MB uploaded and %.1f MB deleted locally in %.2f s (%.0f MB/s)\n", objects,
		float64(uploaded)/1e6, float64(deleted)/1e6, took.Seconds(), float64(uploaded)/1e6/took.Seconds())
	if err := t.readAll("records read back from offset 0", ", the same as step 3"); err != nil {
		return err
	}
	return t.byTime("   By time, through the store")
}

// attachCopy attaches the crashed copy's tiers (it was tiered before the
// copy), so its log starts in the store again.
func (t *tour) attachCopy(m *tablet.Manager) error {
	a, err := tiering.Attach(context.Background(), m, nil, nil, &tiering.Options{Logger: t.logs})
	t.tiers = a
	return err
}

// serve serves the Kafka protocol on the tour's data directory, on a
// loopback port of its own, and drives it with a real Kafka client
// (franz-go): an idempotent producer to a topic it auto-creates, a
// consumer of it and of clicks from the beginning.
func (t *tour) serve() (err error) {
	b, err := server.Compose(t.m, broker.Options{Logger: t.logs, NumPartitions: 3})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	served := make(chan error, 1)
	go func() { served <- b.Serve(ln) }()
	defer func() {
		err = errors.Join(err, b.Close())
		if serr := <-served; !errors.Is(serr, broker.ErrClosed) {
			err = errors.Join(err, serr)
		}
	}()
	addr := ln.Addr().String()
	t.printf("7. Serve the Kafka protocol on %s (seglog serve does this on 127.0.0.1:9092): a Kafka client, franz-go, talks to it\n", addr)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("kafka"))
	if err != nil {
		return err
	}
	defer p.Close()
	const n = 3000
	began := time.Now()
	for i := range n {
		p.Produce(ctx, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i%100), Value: fmt.Appendf(nil, "from a Kafka client %d", i)}, nil)
	}
	if err := p.Flush(ctx); err != nil {
		return err
	}
	t.printf("   produced %d records to kafka (auto-created, 3 partitions; idempotent, acks=-1) in %.0f ms\n", n,
		float64(time.Since(began).Microseconds())/1e3)
	for _, c := range []struct {
		topic string
		want  int
	}{{"kafka", n}, {"clicks", int(t.get("clicks").Offsets().HighWatermark)}} {
		began = time.Now()
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(c.topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		if err != nil {
			return err
		}
		got := 0
		for got < c.want {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				cl.Close()
				return fmt.Errorf("consuming %s: %d of %d records: %w", c.topic, got, c.want, ctx.Err())
			}
			if err := fs.Err0(); err != nil {
				cl.Close()
				return err
			}
			got += fs.NumRecords()
		}
		cl.Close()
		t.printf("   consumed %s from the beginning: %d records in %.0f ms\n", c.topic, got, float64(time.Since(began).Microseconds())/1e3)
	}
	t.printf("\n")
	return nil
}
