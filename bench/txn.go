package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// runTxn: transactions through the broker (franz-go, 10 records of 100
// bytes each, committed), by 1 producer and by 8 at once, with the fsyncs
// each costs (data partitions and __transaction_state), against a write +
// fdatasync of one such transaction's records.
func runTxn(o Options) (*Result, error) {
	dir, err := scratch(o, "txn")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	n := max(50, min(o.Ops/500, 400))
	var one, eight, base, fsyncs []float64
	for rep := range o.Repeat {
		o.Progress(fmt.Sprintf("txn %d/%d", rep+1, o.Repeat), 0, 1)
		r1, r8, b, f, err := txnRate(filepath.Join(dir, fmt.Sprintf("run-%d", rep)), n)
		if err != nil {
			return nil, err
		}
		one, eight, base, fsyncs = append(one, r1), append(eight, r8), append(base, b), append(fsyncs, f)
	}
	return &Result{Workload: "txn", Params: fmt.Sprintf("%d transactions of 10 records of 100 B per producer and run, committed; 1 and 8 producers", n),
		Figures: []Figure{
			figure("txn.rate", "txn/s", one, "write + fdatasync of the records", base).atLeast(0.4),
			figure("txn.rate.producers=8", "txn/s", eight, "1 producer", one).atLeast(3),
			figure("txn.fsyncs-per-txn", "fsyncs", fsyncs, "", nil),
		}}, nil
}

// txnRate times n transactions by one producer, then n by each of 8 at
// once, and a write + fdatasync loop of the same bytes (per second each);
// and the fsyncs per transaction of the first.
func txnRate(dir string, n int) (rate1, rate8, base, fsyncsPer float64, err error) {
	t, err := startSeglog(dir, 8, false)
	if err != nil {
		return 0, 0, 0, 0, err
	}
	defer t.close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	value := make([]byte, 100)
	run := func(id string, count int) error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(t.addr), kgo.TransactionalID(id), kgo.DefaultProduceTopic(serveTopic),
			kgo.ProducerBatchCompression(kgo.NoCompression()))
		if err != nil {
			return err
		}
		defer cl.Close()
		for range count {
			if err := cl.BeginTransaction(); err != nil {
				return err
			}
			for range 10 {
				cl.Produce(ctx, &kgo.Record{Value: value}, nil)
			}
			if err := cl.Flush(ctx); err != nil {
				return err
			}
			if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
				return err
			}
		}
		return nil
	}
	if err := run("bench-warm", 5); err != nil { // connections, __transaction_state
		return 0, 0, 0, 0, err
	}
	fsyncs := func() (n int64) {
		for _, tab := range t.m.Tablets() {
			n += tab.FsyncCount()
		}
		return n
	}
	before := fsyncs()
	start := time.Now()
	if err := run("bench-1", n); err != nil {
		return 0, 0, 0, 0, err
	}
	rate1 = float64(n) / time.Since(start).Seconds()
	fsyncsPer = float64(fsyncs()-before) / float64(n)

	var wg sync.WaitGroup
	errs := make([]error, 8)
	start = time.Now()
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = run(fmt.Sprintf("bench-8-%d", i), n)
		}()
	}
	wg.Wait()
	if err := firstErr(errs); err != nil {
		return 0, 0, 0, 0, err
	}
	rate8 = float64(8*n) / time.Since(start).Seconds()

	f, err := os.Create(filepath.Join(dir, "fsync-baseline"))
	if err != nil {
		return 0, 0, 0, 0, err
	}
	defer f.Close()
	chunk := make([]byte, 61+10*(len(value)+10))
	start = time.Now()
	for i := range n {
		if _, err := f.WriteAt(chunk, int64(i*len(chunk))); err != nil {
			return 0, 0, 0, 0, err
		}
		if err := f.Sync(); err != nil {
			return 0, 0, 0, 0, err
		}
	}
	base = float64(n) / time.Since(start).Seconds()
	return rate1, rate8, base, fsyncsPer, nil
}
