package bench

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/tablet"
)

// consumeBaseline is the loop a careful consumer writes by hand: ReadInto
// the batches from off (at most maxBytes, at least one), their bytes into
// its own buffer, each batch's CRC checked, its records iterated. It
// returns the records at or after off and the offset after the last batch.
func consumeBaseline(t *tablet.Tablet, res *tablet.FetchResult, it *record.Iter, buf []byte, off int64, maxBytes int) (int64, int64, error) {
	if err := t.ReadInto(res, off, tablet.ReadOptions{MaxBytes: maxBytes, MinOneMessage: true}); err != nil {
		return 0, 0, err
	}
	size := int(res.Records.Size())
	if size > len(buf) {
		res.Close()
		return 0, 0, fmt.Errorf("bench: a %d-byte read does not fit the %d-byte buffer", size, len(buf))
	}
	_, err := res.Records.ReadAt(buf[:size], 0)
	res.Close()
	if err != nil && err != io.EOF {
		return 0, 0, err
	}
	var n int64
	next := off
	for data := buf[:size]; len(data) > 0; {
		b, rest, err := record.ParseBatch(data)
		if err != nil {
			return 0, 0, err
		}
		if err := b.Verify(); err != nil {
			return 0, 0, err
		}
		data = rest
		it.Reset(b, record.DefaultMaxUncompressed)
		for it.Next() {
			if it.Record().Offset >= off {
				n++
			}
		}
		if err := it.Err(); err != nil {
			return 0, 0, err
		}
		next = b.NextOffset()
	}
	return n, next, nil
}

// runConsume: the consumer API, Tablet.Records, against the hand-written
// ReadInto + CRC + Iter loop on the same tablet, alternating: one record at
// a random offset, and a whole scan.
func runConsume(o Options) (*Result, error) {
	dir, err := scratch(o, "consume")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	perBatch := max(1, o.BatchRecords/10) // small batches: a random read is one batch
	m, t, logs, err := filled(filepath.Join(dir, "data"), min(o.Bytes, 256<<20), perBatch, o.RecordSize,
		func(d, n int64) { o.Progress("consume: writing", d, n) })
	if err != nil {
		return nil, err
	}
	defer m.Close()
	if _, _, err := rawRead(logs, make([]byte, 1<<20)); err != nil { // into the page cache
		return nil, err
	}
	end := t.Offsets().LogEndOffset
	res := new(tablet.FetchResult)
	var it record.Iter
	buf := make([]byte, 2<<20)
	rng := rand.New(rand.NewPCG(9, 10))
	first := func(record.Batch, *record.Record) bool { return false }

	var ours, base []float64
	for i := range o.Ops {
		if i%1024 == 0 {
			o.Progress("consume random", int64(i), int64(o.Ops))
		}
		off := rng.Int64N(end)
		start := time.Now()
		if _, _, err := consumeBaseline(t, res, &it, buf, off, 1); err != nil {
			return nil, err
		}
		mid := time.Now()
		if err := t.Records(off, tablet.ReadHighWatermark, first); err != nil {
			return nil, err
		}
		stop := time.Now()
		base = append(base, float64(mid.Sub(start).Nanoseconds())/1e3)
		ours = append(ours, float64(stop.Sub(mid).Nanoseconds())/1e3)
	}
	o.Progress("consume random", int64(o.Ops), int64(o.Ops))

	var scan, scanBase []float64
	var allocs float64
	for rep := range o.Repeat {
		o.Progress("consume scan", int64(rep), int64(o.Repeat))
		start := time.Now()
		var records int64
		for off := int64(0); off < end; {
			n, next, err := consumeBaseline(t, res, &it, buf, off, 1<<20)
			if err != nil {
				return nil, err
			}
			records, off = records+n, next
		}
		took := time.Since(start)
		scanBase = append(scanBase, float64(records*int64(o.RecordSize))/took.Seconds()/1e6)

		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start = time.Now()
		var seen, batches int64
		last := int64(-1)
		err := t.Records(0, tablet.ReadHighWatermark, func(b record.Batch, _ *record.Record) bool {
			if b.BaseOffset() != last {
				last, batches = b.BaseOffset(), batches+1
			}
			seen++
			return true
		})
		took = time.Since(start)
		runtime.ReadMemStats(&after)
		if err != nil {
			return nil, err
		}
		if seen != records {
			return nil, fmt.Errorf("bench: Records saw %d records, the baseline %d", seen, records)
		}
		scan = append(scan, float64(seen*int64(o.RecordSize))/took.Seconds()/1e6)
		allocs = float64(after.Mallocs-before.Mallocs) / float64(max(batches, 1))
	}
	o.Progress("consume scan", int64(o.Repeat), int64(o.Repeat))

	b100, b100Base, err := pointReads(o, dir)
	if err != nil {
		return nil, err
	}

	r := latency("consume.random", ours, "ReadInto of the batch + CRC + Iter", base)
	r = r.target("p50 ≤ 2 × baseline", r.Ratio <= 2)
	s := figure("consume.scan", "MB/s", scan, "ReadInto 1 MiB + CRC + Iter", scanBase)
	s = s.target("≥ 0.9 × baseline", s.Ratio >= 0.9)
	a := Figure{Name: "consume.allocs-per-batch", Value: allocs, Unit: "allocs", Min: allocs, Max: allocs}
	a = a.target("0", allocs < 0.5)
	p := latency("consume.random.b100", b100, fmt.Sprintf("pread of %d B", o.RecordSize), b100Base)
	p = p.target("p50 ≤ 4 × baseline", p.Ratio <= 4)
	return &Result{Workload: "consume", Params: fmt.Sprintf("Tablet.Records over %d records of %d B, %d to a batch; %d random reads; "+
		"%d random reads of one record from batches of 100", end, o.RecordSize, perBatch, len(ours), len(b100)),
		Figures: []Figure{r, s, a, p},
		Samples: map[string][]float64{"Records": ours, "ReadInto": base, "Records (batches of 100)": b100, "pread of a record": b100Base}}, nil
}

// pointReads: one record at a random offset through Records from a tablet
// of batches of 100 records (hot: the files in the page cache; the batches
// read before are remembered), against a pread of one record's bytes at a
// random position of the same files.
func pointReads(o Options, dir string) (ours, base []float64, err error) {
	m, t, logs, err := filled(filepath.Join(dir, "b100"), min(o.Bytes, 64<<20), 100, o.RecordSize,
		func(d, n int64) { o.Progress("consume: writing batches of 100", d, n) })
	if err != nil {
		return nil, nil, err
	}
	defer m.Close()
	if _, _, err := rawRead(logs, make([]byte, 1<<20)); err != nil {
		return nil, nil, err
	}
	files := make([]*os.File, len(logs))
	sizes := make([]int64, len(logs))
	for i, p := range logs {
		if files[i], err = os.Open(p); err != nil {
			return nil, nil, err
		}
		defer files[i].Close()
		info, err := files[i].Stat()
		if err != nil {
			return nil, nil, err
		}
		sizes[i] = info.Size()
	}
	end := t.Offsets().LogEndOffset
	rng := rand.New(rand.NewPCG(11, 12))
	buf := make([]byte, o.RecordSize)
	var got int64
	one := func(_ record.Batch, r *record.Record) bool { got = r.Offset; return false }
	for i := range o.Ops {
		if i%1024 == 0 {
			o.Progress("consume random (batches of 100)", int64(i), int64(o.Ops))
		}
		f := rng.IntN(len(files))
		pos := rng.Int64N(max(1, sizes[f]-int64(len(buf))))
		off := rng.Int64N(end)
		start := time.Now()
		if _, err := files[f].ReadAt(buf, pos); err != nil && err != io.EOF {
			return nil, nil, err
		}
		mid := time.Now()
		if err := t.Records(off, tablet.ReadHighWatermark, one); err != nil {
			return nil, nil, err
		}
		stop := time.Now()
		if got != off {
			return nil, nil, fmt.Errorf("bench: Records from %d gave %d", off, got)
		}
		base = append(base, float64(mid.Sub(start).Nanoseconds())/1e3)
		ours = append(ours, float64(stop.Sub(mid).Nanoseconds())/1e3)
	}
	o.Progress("consume random (batches of 100)", int64(o.Ops), int64(o.Ops))
	return ours, base, nil
}
