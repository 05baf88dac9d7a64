package bench

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/seglog/seglog/tablet"
	"github.com/seglog/seglog/tiering"
)

// tierSegmentBytes is the segment size of the tier workload: objects above
// the single-PUT limit, so uploads go multipart as real segments do (a
// quarter of the bytes in small runs, so there are segments to tier).
const tierSegmentBytes = 64 << 20

// runTier: sealed segments uploaded as stream objects against a raw put of
// the same .log bytes to the same store; then, the segments deleted
// locally, the whole log read back through the tier against raw GETs of
// the objects, and the first-byte latency of a read at a random offset
// with cold caches against a raw ranged GET of one readahead (512 KiB).
func runTier(o Options) (*Result, error) {
	dir, err := scratch(o, "tier")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	bytes := min(o.Bytes, 512<<20)
	segBytes := min(int64(tierSegmentBytes), max(bytes/4, 1<<20))
	m, t, logs, err := filledSegments(filepath.Join(dir, "data"), bytes, o.BatchRecords, o.RecordSize, segBytes,
		func(d, n int64) { o.Progress("tier: writing", d, n) })
	if err != nil {
		return nil, err
	}
	defer m.Close()
	sealed := logs[:len(logs)-1]
	if len(sealed) == 0 {
		return nil, fmt.Errorf("bench: tier needs more than one segment: raise --bytes above %d MiB", segBytes>>20)
	}
	ctx := context.Background()
	var store tiering.ObjectStore
	if o.Store != "" {
		store, err = tiering.OpenStore(ctx, o.Store, nil)
	} else {
		store, err = tiering.OpenFileStore(filepath.Join(dir, "store"))
	}
	if err != nil {
		return nil, err
	}
	var logBytes int64
	for _, p := range sealed {
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		logBytes += st.Size()
	}
	quiet := &tiering.Options{Logger: slog.New(slog.DiscardHandler)}
	rawPut := func(rep int) (float64, error) {
		start := time.Now()
		for i, p := range sealed {
			f, err := os.Open(p)
			if err != nil {
				return 0, err
			}
			st, err := f.Stat()
			if err == nil {
				_, err = tiering.Upload(ctx, store, fmt.Sprintf("raw/%d/%d.log", rep, i), f, st.Size())
			}
			f.Close()
			if err != nil {
				return 0, err
			}
		}
		return float64(logBytes) / time.Since(start).Seconds() / 1e6, nil
	}
	var ours, raw []float64
	var x *tiering.Tier
	for rep := range o.Repeat {
		o.Progress("tier: upload", int64(rep), int64(o.Repeat))
		// The two take turns going first: each leaves dirty pages the
		// other's fsyncs may pay for.
		measureRaw := func() error {
			r, err := rawPut(rep)
			raw = append(raw, r)
			return err
		}
		if rep%2 == 0 {
			if err := measureRaw(); err != nil {
				return nil, err
			}
		}
		if x != nil { // start over: a new manifest, the same segments
			if err := x.Close(); err != nil {
				return nil, err
			}
			if err := os.RemoveAll(filepath.Join(t.Dir(), tiering.ManifestDir)); err != nil {
				return nil, err
			}
		}
		// Under a name of its own each time: a new manifest would otherwise
		// be rebuilt from the last repetition's mirror in the store.
		if x, err = tiering.Open(ctx, t, fmt.Sprintf("bench-rep%d", rep), 0, store, quiet); err != nil {
			return nil, err
		}
		start := time.Now()
		up, err := x.Upload(ctx, nil)
		if err != nil {
			return nil, err
		}
		if len(up.Objects) != len(sealed) {
			return nil, fmt.Errorf("bench: %d objects uploaded of %d segments", len(up.Objects), len(sealed))
		}
		ours = append(ours, float64(logBytes)/time.Since(start).Seconds()/1e6)
		if rep%2 == 1 {
			if err := measureRaw(); err != nil {
				return nil, err
			}
		}
	}
	defer x.Close()
	o.Progress("tier: upload", int64(o.Repeat), int64(o.Repeat))

	cfg := t.Config()
	cfg.LocalRetentionBytes = 0
	if err := t.SetConfig(cfg); err != nil {
		return nil, err
	}
	if _, err := x.DeleteLocal(); err != nil {
		return nil, err
	}
	localStart := t.Offsets().LocalLogStartOffset
	if localStart == 0 {
		return nil, fmt.Errorf("bench: nothing was deleted locally")
	}
	vis := x.Manifest().Visible()
	buf := make([]byte, 1<<20)
	var readOurs, readRaw []float64
	for rep := range o.Repeat {
		o.Progress("tier: remote read", int64(rep), int64(o.Repeat))
		start := time.Now()
		var got int64
		for _, e := range vis {
			b, err := store.GetRange(ctx, e.Key, 0, int(e.Size))
			if err != nil {
				return nil, err
			}
			got += int64(len(b))
		}
		readRaw = append(readRaw, float64(got)/time.Since(start).Seconds()/1e6)
		x.DropCache()
		start = time.Now()
		n, _, err := readAll(t, buf)
		if err != nil {
			return nil, err
		}
		readOurs = append(readOurs, float64(n)/time.Since(start).Seconds()/1e6)
	}
	o.Progress("tier: remote read", int64(o.Repeat), int64(o.Repeat))

	ops := max(50, min(o.Ops/1000, 500))
	rng := rand.New(rand.NewPCG(3, 4))
	res := new(tablet.FetchResult)
	var first, firstRaw []float64
	for i := range ops {
		if i%16 == 0 {
			o.Progress("tier: first byte", int64(i), int64(ops))
		}
		e := vis[rng.IntN(len(vis))]
		pos := rng.Int64N(max(1, e.Size-readaheadBytes))
		start := time.Now()
		if _, err := store.GetRange(ctx, e.Key, pos, int(min(readaheadBytes, e.Size))); err != nil {
			return nil, err
		}
		firstRaw = append(firstRaw, float64(time.Since(start).Nanoseconds())/1e3)
		x.DropCache()
		off := rng.Int64N(localStart)
		start = time.Now()
		if err := t.ReadInto(res, off, tablet.ReadOptions{MaxBytes: 1, Isolation: tablet.ReadLogEnd, MinOneMessage: true}); err != nil {
			return nil, err
		}
		first = append(first, float64(time.Since(start).Nanoseconds())/1e3)
		if res.Records.Size() == 0 {
			return nil, fmt.Errorf("bench: the read at %d found nothing", off)
		}
		res.Close()
	}
	o.Progress("tier: first byte", int64(ops), int64(ops))

	up := figure("tier.upload", "MB/s", ours, fmt.Sprintf("raw put of the same .log bytes to %s", storeKind(o)), raw)
	up = up.target("≥ 0.8 × baseline", up.Ratio >= 0.8)
	rd := figure("tier.remote-read", "MB/s", readOurs, "raw GET of the whole objects", readRaw)
	fb := latency("tier.first-byte", first, "raw ranged GET of 512 KiB", firstRaw)
	return &Result{Workload: "tier", Params: fmt.Sprintf("%d MiB in %d segments of %d MiB (%d × %d B batches), %s, %d cold first reads",
		logBytes>>20, len(sealed), segBytes>>20, o.BatchRecords, o.RecordSize, storeKind(o), ops),
		Figures: []Figure{up, rd, fb}, Samples: map[string][]float64{"tier first byte": first, "GET 512 KiB": firstRaw}}, nil
}

const readaheadBytes = 512 << 10

func storeKind(o Options) string {
	if o.Store != "" {
		return o.Store
	}
	return "a file:// store"
}
