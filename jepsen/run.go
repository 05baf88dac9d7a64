package jepsen

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Options configure a run.
type Options struct {
	// Seglog and Etcd are the binaries run: seglog's, and etcd's
	// (Debian's etcd-server: /usr/bin/etcd). Both required.
	Seglog, Etcd string
	// Dir holds the run: the processes' data and logs, history.jsonl and
	// report.txt. Required.
	Dir string
	// Seed makes the schedule; a failing run replays from it.
	Seed int64
	// Schedule, if set, is run instead of one made from the seed.
	Schedule []Step
	// Faults is how many faults a made schedule has (default 10), drawn
	// from Kinds (default AllFaults), in turn when Cycle is set.
	Faults int
	Kinds  []string
	Cycle  bool
	// Brokers (3) and EtcdMembers (3) are the processes.
	Brokers, EtcdMembers int
	// Partitions (6), ReplicationFactor (3) and MinISR (2) are the
	// topic's.
	Partitions, ReplicationFactor, MinISR int
	// SessionTimeout is broker.session.timeout.ms (default 3 s);
	// LagTime replica.lag.time.max.ms (default 10 s).
	SessionTimeout, LagTime time.Duration
	// Producers (4) and Consumers (2) are the queue workload's clients,
	// TxnWorkers (2) the txn workload's transactional workers, on a topic
	// of TxnPartitions (4); a negative count runs none.
	Producers, Consumers, TxnWorkers, TxnPartitions int
	// Logf receives the run's progress (default: none).
	Logf func(format string, args ...any)
	// TB, if set, puts fault proxies on the brokers' links (to etcd, and
	// the inter-broker listener) for the network faults, closed when it
	// ends; without it those faults are left out of a made schedule.
	TB testing.TB
}

func (o *Options) defaults() error {
	if o.Seglog == "" || o.Etcd == "" || o.Dir == "" {
		return errors.New("jepsen: the seglog and etcd binaries and a directory are required")
	}
	set := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	set(&o.Faults, 10)
	set(&o.Brokers, 3)
	set(&o.EtcdMembers, 3)
	set(&o.Partitions, 6)
	set(&o.ReplicationFactor, 3)
	set(&o.MinISR, 2)
	set(&o.Producers, 4)
	set(&o.Consumers, 2)
	if o.TxnWorkers == 0 { // (negative: none)
		o.TxnWorkers = 2
	}
	set(&o.TxnPartitions, 4)
	if len(o.Kinds) == 0 {
		o.Kinds = AllFaults
	}
	if o.TB == nil {
		o.Kinds = slices.DeleteFunc(slices.Clone(o.Kinds), func(k string) bool { return slices.Contains(NetworkFaults, k) })
	}
	if o.SessionTimeout <= 0 {
		o.SessionTimeout = 3 * time.Second
	}
	if o.LagTime <= 0 {
		o.LagTime = 10 * time.Second
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if o.Schedule == nil {
		o.Schedule = Schedule(o.Seed, o.Faults, o.Kinds, o.Cycle)
	}
	return nil
}

// Report is a run's outcome.
type Report struct {
	Seed     int64
	Schedule []Step
	Result   *Result
	// Unstable lists the faults after which the cluster did not get back
	// a full ISR in time (not an anomaly by itself: what followed it ran
	// on a degraded cluster).
	Unstable []string
	// Windows are the faults' times and the produce stalls they caused.
	Windows []Window
	// History, Text and Picture are the files written.
	History, Text, Picture string
	Took                   time.Duration
}

// Run runs the cluster, the workload and the schedule, then reads
// everything back and checks the history.
func Run(ctx context.Context, opts Options) (*Report, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	began := time.Now()
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, err
	}
	rep := &Report{Seed: opts.Seed, Schedule: opts.Schedule, History: filepath.Join(opts.Dir, "history.jsonl"),
		Text: filepath.Join(opts.Dir, "report.txt"), Picture: filepath.Join(opts.Dir, "report.png")}
	h, err := NewHistory(rep.History)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	c, err := startCluster(sctx, opts)
	cancel()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	const topic, txnTopic = "jepsen", "jepsen-txn"
	q := &queue{h: h, seeds: c.Seeds(), topic: topic, partitions: int32(opts.Partitions)}
	tx := &txns{h: h, q: q, topic: txnTopic, group: "jepsen-txn", partitions: int32(opts.TxnPartitions), seed: opts.Seed}
	if err := createTopic(ctx, q, topic, opts.Partitions, opts); err != nil {
		return nil, err
	}
	if opts.TxnWorkers > 0 {
		if err := createTopic(ctx, q, txnTopic, opts.TxnPartitions, opts); err != nil {
			return nil, err
		}
	}
	n := &nemesis{c: c, h: h, opts: opts, topic: topic, group: tx.group, log: opts.Logf}
	if !n.stable(ctx, 2*time.Minute) {
		return nil, errors.New("jepsen: the topic never had a full ISR")
	}
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := range opts.Producers {
		wg.Go(func() { _ = q.produce(wctx, i) })
	}
	for i := range opts.Consumers {
		wg.Go(func() { _ = q.consume(wctx, i) })
	}
	for i := range max(opts.TxnWorkers, 0) {
		wg.Go(func() { tx.work(wctx, i) })
	}
	if opts.TxnWorkers > 0 {
		wg.Go(func() { tx.watchOffsets(wctx) })
	}
	var runErr error
	for i, s := range opts.Schedule {
		pause(ctx, s.Quiet)
		opts.Logf("jepsen: fault %d of %d: %s", i+1, len(opts.Schedule), s.Fault)
		if err := n.run(ctx, s); err != nil {
			runErr = err
			break
		}
		if !n.stable(ctx, 90*time.Second) {
			rep.Unstable = append(rep.Unstable, fmt.Sprintf("%d:%s", i+1, s.Fault))
			opts.Logf("jepsen: after fault %d (%s) the ISR is not full in 90 s", i+1, s.Fault)
		}
	}
	pause(ctx, 2*time.Second)
	stop()
	wg.Wait()
	if runErr == nil {
		n.stable(ctx, 2*time.Minute)
		fctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		runErr = q.final(fctx)
		if runErr == nil && opts.TxnWorkers > 0 {
			runErr = tx.final(fctx)
		}
		cancel()
	}
	ops := h.Ops()
	rep.Result = Check(ops)
	// The replicas, once stopped (a clean stop writes the simulated disks
	// back): no two may hold different records at one offset.
	if err := c.Close(); err != nil {
		opts.Logf("jepsen: stopping: %v", err)
	}
	var dirs []string
	for _, b := range c.brk {
		dirs = append(dirs, b.dir)
	}
	compare := map[string]int{topic: opts.Partitions}
	if opts.TxnWorkers > 0 {
		compare[txnTopic] = opts.TxnPartitions
	}
	for t, parts := range compare {
		diverged, err := CompareReplicas(dirs, t, parts)
		if err != nil {
			runErr = errors.Join(runErr, err)
		}
		for _, d := range diverged {
			rep.Result.add(InconsistentOffsets, "replicas: "+d)
		}
	}
	rep.Windows = Windows(ops)
	if err := Plot(ops, rep.Picture); err != nil {
		opts.Logf("jepsen: the picture: %v", err)
	}
	rep.Took = time.Since(began)
	if err := os.WriteFile(rep.Text, []byte(rep.String()), 0o644); err != nil {
		return rep, err
	}
	return rep, runErr
}

// createTopic creates a workload's topic (retrying while the cluster
// settles).
func createTopic(ctx context.Context, q *queue, topic string, partitions int, o Options) error {
	cl, err := kgo.NewClient(q.clientOpts()...)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var last error
	for range 60 {
		tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		r, err := adm.CreateTopic(tctx, int32(partitions), int16(o.ReplicationFactor),
			map[string]*string{"min.insync.replicas": kadm.StringPtr(fmt.Sprint(o.MinISR))}, topic)
		cancel()
		if err == nil {
			err = r.Err
		}
		if err == nil || strings.Contains(err.Error(), "TOPIC_ALREADY_EXISTS") {
			return nil
		}
		last = err
		pause(ctx, 500*time.Millisecond)
	}
	return fmt.Errorf("jepsen: creating the topic: %w", last)
}

// String is the report's text: the anomaly table, the seed and the
// schedule.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seglog fault checker: seed %d, %d faults, %v\n\n", r.Seed, len(r.Schedule), r.Took.Round(time.Second))
	if r.Result != nil {
		b.WriteString(r.Result.Table())
	}
	if len(r.Unstable) > 0 {
		fmt.Fprintf(&b, "\nnot back to a full ISR within 90 s after: %s\n", strings.Join(r.Unstable, ", "))
	}
	b.WriteString("\nschedule (each fault's start, and the longest time after it without an acknowledged send):\n")
	for i, s := range r.Schedule {
		fmt.Fprintf(&b, "  %3d  after %-6v %-18s", i+1, s.Quiet, s.Fault)
		if i < len(r.Windows) {
			fmt.Fprintf(&b, " at %7.1fs  stall %v", r.Windows[i].Start.Seconds(), r.Windows[i].Stall.Round(10*time.Millisecond))
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "\nhistory: %s\npicture: %s\n", r.History, r.Picture)
	return b.String()
}
