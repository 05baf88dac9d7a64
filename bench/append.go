package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/seglog/seglog/tablet"
)

// sink keeps results the compiler must not drop.
var sink atomic.Uint32

// tabletAppend appends n batches through producers goroutines, producer p
// to tablet p % len(tabs), each with its own copy of batch (an append
// stamps offsets in place). It returns the elapsed time.
func tabletAppend(tabs []*tablet.Tablet, batch []byte, n int64, producers int, syncEach bool, progress func(int64)) (time.Duration, error) {
	own := make([][]byte, producers)
	for p := range own {
		own[p] = append([]byte(nil), batch...)
	}
	var done atomic.Int64
	return spread(producers, n, func(p int, _ int64) error {
		if _, err := tabs[p%len(tabs)].Append(own[p], tablet.AppendOptions{Sync: syncEach}); err != nil {
			return err
		}
		if d := done.Add(1); d%256 == 0 {
			progress(d)
		}
		return nil
	})
}

func appendConfig() tablet.Config {
	cfg := tablet.DefaultConfig()
	cfg.SegmentBytes = 1 << 30
	return cfg
}

// runAppend: producers append o.Bytes of batches per repetition to fresh
// tablets, beside the baseline of CRC-32C + pwrite (+ fdatasync with Sync)
// of the same chunks to as many files.
func runAppend(o Options) (*Result, error) {
	dir, err := scratch(o, "append")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	batch, err := buildBatch(o.BatchRecords, o.RecordSize, 1)
	if err != nil {
		return nil, err
	}
	n := max(1, o.Bytes/int64(len(batch)))
	if o.Sync {
		n = max(1, min(n, 2000)) // an fsync each: bounded time
	}
	bytes := float64(n * int64(len(batch)))
	var ours, base []float64
	for rep := range o.Repeat {
		step := fmt.Sprintf("append %d/%d", rep+1, o.Repeat)
		b, err := rawAppend(dir, batch, n, o.Producers, o.Sync)
		if err != nil {
			return nil, err
		}
		data := filepath.Join(dir, fmt.Sprintf("data-%d", rep))
		m, tabs, err := openManager(data, o.Tablets, appendConfig())
		if err != nil {
			return nil, err
		}
		took, err := tabletAppend(tabs, batch, n, o.Producers, o.Sync, func(d int64) { o.Progress(step, d, n) })
		o.Progress(step, n, n)
		if err := firstErr([]error{err, m.Close(), os.RemoveAll(data)}); err != nil {
			return nil, err
		}
		ours, base = append(ours, bytes/took.Seconds()/1e6), append(base, bytes/b.Seconds()/1e6)
	}
	baseline := "pwrite + CRC-32C of the same chunks"
	if o.Sync {
		baseline = "pwrite + CRC-32C + fdatasync of the same chunks"
	}
	f := figure("append.throughput", "MB/s", ours, baseline, base)
	if !o.Sync && o.Producers == 1 {
		f = f.target("≥ 0.85 × baseline", f.Ratio >= 0.85)
	}
	return &Result{Workload: "append", Params: fmt.Sprintf("record %d B, %d per batch, %d producer(s), %d tablet(s), sync %v, %d MiB",
		o.RecordSize, o.BatchRecords, o.Producers, o.Tablets, o.Sync, int64(bytes)>>20), Figures: []Figure{f}}, nil
}

// AppendSizes runs the append workload for each record size (the
// throughput-against-record-size plot).
func AppendSizes(o Options, sizes []int) (*Result, error) {
	o.EnsureDefaults()
	r := &Result{Workload: "append-sizes", Params: fmt.Sprintf("%d MiB per point, %d records per batch", o.Bytes>>20, o.BatchRecords),
		Series: map[string][][2]float64{}}
	for _, size := range sizes {
		po := o
		po.RecordSize = size
		po.BatchRecords = max(1, min(o.BatchRecords, (1<<20)/size))
		res, err := runAppend(po)
		if err != nil {
			return nil, err
		}
		f := res.Figures[0]
		f.Name = fmt.Sprintf("append-sizes.%dB", size)
		f.Target, f.Met = "", nil
		r.Figures = append(r.Figures, f)
		r.Series["seglog append"] = append(r.Series["seglog append"], [2]float64{float64(size), f.Value})
		r.Series["pwrite + CRC-32C"] = append(r.Series["pwrite + CRC-32C"], [2]float64{float64(size), f.BaselineValue})
	}
	return r, nil
}

// runDurable: 1, 2, 4, … producers each append batches with Sync to one
// tablet; the group commit shares fsyncs. The baseline is one producer's
// write + fdatasync of the same chunks.
func runDurable(o Options) (*Result, error) {
	dir, err := scratch(o, "durable")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	batch, err := buildBatch(o.BatchRecords, o.RecordSize, 2)
	if err != nil {
		return nil, err
	}
	perRep := max(int64(200), min(o.Bytes/int64(len(batch))/8, 2000))
	r := &Result{Workload: "durable", Params: fmt.Sprintf("batches of %d B, Sync on every append, %d appends per point",
		len(batch), perRep), Series: map[string][][2]float64{}}
	var base, baseGroup, baseShared, basePipelined []float64
	byProducers := map[int][]float64{}
	group := make([]byte, 0, o.MaxProducers*len(batch)) // what a full group commit writes per fsync
	for range o.MaxProducers {
		group = append(group, batch...)
	}
	var counts []int
	for p := 1; p <= o.MaxProducers; p *= 2 {
		counts = append(counts, p)
	}
	for rep := range o.Repeat {
		b, err := rawAppend(dir, batch, perRep, 1, true)
		if err != nil {
			return nil, err
		}
		base = append(base, float64(perRep*int64(len(batch)))/b.Seconds()/1e6)
		groups := max(1, perRep/int64(o.MaxProducers))
		bg, err := rawAppend(dir, group, groups, 1, true)
		if err != nil {
			return nil, err
		}
		baseGroup = append(baseGroup, float64(groups*int64(len(group)))/bg.Seconds()/1e6)
		bs, err := rawSharedSync(dir, batch, perRep, o.MaxProducers)
		if err != nil {
			return nil, err
		}
		baseShared = append(baseShared, float64(perRep*int64(len(batch)))/bs.Seconds()/1e6)
		bp, err := rawPipelinedSync(dir, batch, perRep, o.MaxProducers)
		if err != nil {
			return nil, err
		}
		basePipelined = append(basePipelined, float64(perRep*int64(len(batch)))/bp.Seconds()/1e6)
		for _, p := range counts {
			step := fmt.Sprintf("durable %d producer(s) %d/%d", p, rep+1, o.Repeat)
			data := filepath.Join(dir, fmt.Sprintf("data-%d-%d", p, rep))
			m, tabs, err := openManager(data, 1, appendConfig())
			if err != nil {
				return nil, err
			}
			took, err := tabletAppend(tabs, batch, perRep, p, true, func(d int64) { o.Progress(step, d, perRep) })
			o.Progress(step, perRep, perRep)
			if err := firstErr([]error{err, m.Close(), os.RemoveAll(data)}); err != nil {
				return nil, err
			}
			byProducers[p] = append(byProducers[p], float64(perRep*int64(len(batch)))/took.Seconds()/1e6)
		}
	}
	one := figure("durable.throughput", "MB/s", byProducers[1], "write + fdatasync of the same chunks", base)
	one = one.target("≥ 0.9 × baseline", one.Ratio >= 0.9)
	r.Figures = append(r.Figures, one)
	for _, p := range counts[1:] {
		f := figure(fmt.Sprintf("durable.throughput.producers=%d", p), "MB/s", byProducers[p], "1 producer", byProducers[1])
		if p == 8 {
			f = f.target("≥ 4 × one producer", f.Ratio >= 4)
		}
		r.Figures = append(r.Figures, f)
	}
	// The device's own gain from syncing MaxProducers chunks at once: the
	// most a perfect group commit can get over one producer.
	dev := figure("durable.device-gain", "MB/s", baseGroup, "write + fdatasync of one chunk", base)
	dev.Name = fmt.Sprintf("durable.device-gain.chunks=%d", o.MaxProducers)
	// And what as many raw writers get, each syncing its own chunk on one
	// shared file (the kernel groups the syncs as it can).
	most := byProducers[counts[len(counts)-1]]
	shared := figure(fmt.Sprintf("durable.vs-raw-writers.producers=%d", o.MaxProducers), "MB/s", most,
		fmt.Sprintf("%d raw writers, write + fdatasync each, one file", o.MaxProducers), baseShared)
	// And what the same producers get from the least a pipelined group
	// commit can do (pwrite, then an fdatasync started as the last ended):
	// on a device whose fdatasync slows under concurrent writes, the most
	// pipelining can reach.
	pipelined := figure(fmt.Sprintf("durable.vs-raw-pipelined.producers=%d", o.MaxProducers), "MB/s", most,
		fmt.Sprintf("%d raw writers sharing pipelined fdatasyncs, one file", o.MaxProducers), basePipelined)
	// The target: the producers' gain close to the device's own.
	gain := figure(fmt.Sprintf("durable.vs-device-gain.producers=%d", o.MaxProducers), "MB/s", most,
		fmt.Sprintf("write + fdatasync of %d chunks at once", o.MaxProducers), baseGroup)
	gain = gain.target("≥ 0.85 × the device's gain", gain.Ratio >= 0.85)
	r.Figures = append(r.Figures, dev, shared, pipelined, gain)
	for _, p := range counts {
		v, _, _ := median(byProducers[p])
		r.Series["seglog, Sync per append"] = append(r.Series["seglog, Sync per append"], [2]float64{float64(p), v})
	}
	return r, nil
}
