package bench

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/seglog/seglog/cleaner"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/tablet"
)

// compactKeys is the key space of the compact workload.
const compactKeys = 10_000

// runCompact: a compacted tablet of records over 10,000 keys, sealed, is
// cleaned once per repetition (written afresh each time), against reading
// and CRC-checking the same .log files; and the memory the offset map
// takes per million keys.
func runCompact(o Options) (*Result, error) {
	dir, err := scratch(o, "compact")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	bytes := min(o.Bytes, 256<<20)
	var ours, base, oursCold, baseCold []float64
	var removed, kept int64
	buf := make([]byte, 1<<20)
	for rep := range o.Repeat {
		for _, cold := range []bool{false, true} {
			data := filepath.Join(dir, fmt.Sprintf("data-%d-%v", rep, cold))
			step := fmt.Sprintf("compact %d/%d", rep+1, o.Repeat)
			m, tab, logs, dirty, err := dirtyTablet(data, bytes, o.BatchRecords, o.RecordSize, uint64(rep), func(d, n int64) { o.Progress(step, d, n) })
			if err != nil {
				return nil, err
			}
			// Cold: the pages dropped before the baseline's read and
			// before the cleaning (whose second pass then finds them).
			drop := func() error {
				if cold {
					return dropCache(logs)
				}
				return nil
			}
			err = drop()
			var n int64
			var took time.Duration
			if err == nil {
				n, took, err = rawReadCRC(logs, buf)
			}
			if err == nil {
				err = drop()
			}
			var res tablet.CleanResult
			if err == nil {
				res, err = tab.Clean(tablet.CleanOptions{})
			}
			if err := firstErr([]error{err, m.Close(), os.RemoveAll(data)}); err != nil {
				return nil, err
			}
			mbps, baseMBps := float64(dirty)/res.Took.Seconds()/1e6, float64(n)/took.Seconds()/1e6
			if cold {
				oursCold, baseCold = append(oursCold, mbps), append(baseCold, baseMBps)
			} else {
				ours, base = append(ours, mbps), append(base, baseMBps)
			}
			removed, kept = res.RecordsRemoved, res.RecordsRead-res.RecordsRemoved
		}
	}
	// The cleaner reads the dirty section twice (the map, then the
	// recopy): from the page cache it is CPU-bound, at most half of one
	// read + CRC; cold, the second read finds the pages the first brought.
	f := figure("compact.throughput", "MB/s", ours, "read + CRC-32C of the same .log files, in the page cache", base)
	f = f.target("≥ 0.5 × read + CRC", f.Ratio >= 0.5)
	fc := figure("compact.throughput.cold", "MB/s", oursCold, "read + CRC-32C of the same .log files, cache dropped", baseCold)
	fc = fc.target("≥ 0.5 × read + CRC", fc.Ratio >= 0.5)
	// The offset map's table after a million distinct keys (it grows by
	// half as keys come, up to the dedupe buffer).
	m := cleaner.NewOffsetMap(tablet.DefaultDedupeBufferBytes, tablet.DefaultDedupeLoadFactor)
	for i := range 1_000_000 {
		m.Put(fmt.Appendf(buf[:0], "key-%d", i), int64(i))
	}
	perMillion := float64(m.Bytes()) / 1e6
	mem := Figure{Name: "compact.map-bytes-per-million-keys", Value: perMillion, Min: perMillion, Max: perMillion, Unit: "MB",
		Baseline: "the 24-byte entries alone", BaselineValue: cleaner.EntryBytes, Ratio: perMillion / cleaner.EntryBytes}
	return &Result{Workload: "compact", Params: fmt.Sprintf("%d MiB of %d-byte records in batches of %d over %d keys, cleaned once "+
		"(%d records removed, %d kept; hot and with the cache dropped); the default 128 MiB dedupe buffer holds %d keys",
		bytes>>20, o.RecordSize, o.BatchRecords, compactKeys, removed, kept, m.Limit()),
		Figures: []Figure{f, fc, mem}}, nil
}

// dirtyTablet writes about bytes of keyed records to a compacted tablet,
// rolls it and flushes it, and returns its sealed .log files and their
// size: everything but the empty active segment is dirty.
func dirtyTablet(dir string, bytes int64, perBatch, size int, seed uint64, progress func(int64, int64)) (*tablet.Manager, *tablet.Tablet, []string, int64, error) {
	cfg := tablet.DefaultConfig()
	cfg.CleanupPolicy = tablet.PolicyCompact
	cfg.SegmentBytes = 64 << 20
	m, tabs, err := openManager(dir, 1, cfg)
	if err != nil {
		return nil, nil, nil, 0, err
	}
	t := tabs[0]
	rng := rand.New(rand.NewPCG(seed, 3))
	value := make([]byte, size)
	for i := range value {
		value[i] = byte(rng.Uint32())
	}
	b := record.NewBuilder(record.None)
	var written int64
	for written < bytes {
		b.Reset()
		for range perBatch {
			v := value[rng.IntN(size/2):]
			if err := b.Append(record.Record{Timestamp: time.Now().UnixMilli(), Key: fmt.Appendf(nil, "key-%d", rng.IntN(compactKeys)), Value: v}); err != nil {
				m.Close()
				return nil, nil, nil, 0, err
			}
		}
		batch, err := b.Build()
		if err == nil {
			_, err = t.Append(batch.Bytes(), tablet.AppendOptions{})
		}
		if err != nil {
			m.Close()
			return nil, nil, nil, 0, err
		}
		written += int64(batch.Size())
		progress(written, bytes)
	}
	// One more append rolls, segment.bytes now the active segment's size:
	// what came before is sealed.
	segs := t.Segments()
	cfg.SegmentBytes = max(segs[len(segs)-1].Size, record.PrefixSize)
	if err := t.SetConfig(cfg); err != nil {
		m.Close()
		return nil, nil, nil, 0, err
	}
	if _, err := t.AppendRecords([]record.Record{{Key: []byte("last"), Value: []byte("x")}}, record.None, tablet.AppendOptions{}); err != nil {
		m.Close()
		return nil, nil, nil, 0, err
	}
	if err := t.Flush(); err != nil {
		m.Close()
		return nil, nil, nil, 0, err
	}
	var logs []string
	var dirty int64
	segs = t.Segments()
	for _, s := range segs[:len(segs)-1] {
		logs = append(logs, s.Path)
		dirty += s.Size
	}
	return m, t, logs, dirty, nil
}
