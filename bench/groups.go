package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/coordinator/group"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/tablet"
)

// runGroups: offset commits through the broker (franz-go's kadm, 100
// partitions per commit, each answered after its fsync), one group and 8
// at once, against a write + fdatasync of the same bytes; and the time to
// load 100,000 groups' offsets from __consumer_offsets at start, against a
// scan of the same tablets (read, CRC, iterate).
func runGroups(o Options) (*Result, error) {
	dir, err := scratch(o, "groups")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	commits := max(100, min(o.Ops/200, 1000))
	groups := 100_000
	if o.Ops < 50_000 { // a check of the harness, not a measurement
		groups = 1000
	}
	var rate, rate8, base []float64
	var lat []float64
	for rep := range o.Repeat {
		step := fmt.Sprintf("groups commits %d/%d", rep+1, o.Repeat)
		l, b, r8, err := commitRate(filepath.Join(dir, fmt.Sprintf("commit-%d", rep)), commits)
		if err != nil {
			return nil, err
		}
		o.Progress(step, 1, 1)
		lat = append(lat, l...)
		rate = append(rate, 1e6/mean(l))
		base = append(base, 1e6/mean(b))
		rate8 = append(rate8, r8)
	}
	one := figure("groups.commit-rate", "commits/s", rate, "write + fdatasync of the same bytes", base).atLeast(0.7)
	eight := figure("groups.commit-rate.groups=8", "commits/s", rate8, "1 group", rate)
	p99 := latency("groups.commit-latency", lat, "", nil)

	loadDir := filepath.Join(dir, "load")
	records, err := writeGroups(loadDir, groups, 5)
	if err != nil {
		return nil, err
	}
	var loads, scans []float64
	for rep := range o.Repeat {
		o.Progress(fmt.Sprintf("groups load %d/%d", rep+1, o.Repeat), 0, 1)
		l, s, err := loadGroups(loadDir, groups)
		if err != nil {
			return nil, err
		}
		loads, scans = append(loads, l), append(scans, s)
	}
	load := figure("groups.load-time", "ms", loads, "Tablet.Records over the same tablets (read + CRC + iterate)", scans)
	load = load.target("≤ 3 × the scan", load.Ratio <= 3)
	return &Result{Workload: "groups", Params: fmt.Sprintf("%d commits of 100 partitions' offsets per run (kadm, durable), "+
		"8 groups at once; %d groups of 5 offsets (%d records) loaded at start", commits, groups, records),
		Figures: []Figure{one, eight, p99, load}}, nil
}

func mean(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(max(1, len(xs)))
}

// commitRate times commits of 100 partitions' offsets, one at a time,
// alternating with a write + fdatasync of the same size on a file beside
// (µs each); then 8 groups committing at once (commits/s in all).
func commitRate(dir string, n int) (lat, base []float64, rate8 float64, err error) {
	t, err := startSeglog(dir, 100, false)
	if err != nil {
		return nil, nil, 0, err
	}
	defer t.close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(t.addr))
	if err != nil {
		return nil, nil, 0, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	offsets := func(at int64) kadm.Offsets {
		offs := kadm.Offsets{}
		for p := range int32(100) {
			offs.Add(kadm.Offset{Topic: serveTopic, Partition: p, At: at, LeaderEpoch: -1})
		}
		return offs
	}
	f, err := os.Create(filepath.Join(dir, "fsync-baseline"))
	if err != nil {
		return nil, nil, 0, err
	}
	defer f.Close()
	key, value := group.OffsetRecord("bench-group", serveTopic, 0, group.Offset{ExpireTimestamp: -1})
	chunk := make([]byte, 61+100*(len(key)+len(value)+8))
	for i := range n + 10 {
		start := time.Now()
		resp, err := adm.CommitOffsets(ctx, "bench-group", offsets(int64(i)))
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			return nil, nil, 0, err
		}
		mid := time.Now()
		if _, err := f.WriteAt(chunk, int64(i*len(chunk))); err != nil {
			return nil, nil, 0, err
		}
		if err := f.Sync(); err != nil {
			return nil, nil, 0, err
		}
		if i >= 10 {
			lat = append(lat, float64(mid.Sub(start).Nanoseconds())/1e3)
			base = append(base, float64(time.Since(mid).Nanoseconds())/1e3)
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	start := time.Now()
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range n / 8 {
				resp, err := adm.CommitOffsets(ctx, fmt.Sprintf("bench-group-%d", g), offsets(int64(i)))
				if err == nil {
					err = resp.Error()
				}
				if err != nil {
					errs[g] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := firstErr(errs); err != nil {
		return nil, nil, 0, err
	}
	return lat, base, float64(8*(n/8)) / time.Since(start).Seconds(), nil
}

// writeGroups writes n empty groups of perGroup committed offsets each
// into a new data directory's __consumer_offsets (50 partitions), as the
// coordinator writes them, and returns the records written.
func writeGroups(dir string, n, perGroup int) (int, error) {
	m, err := tablet.OpenManager(nil, dir, tablet.ManagerOptions{Tablet: tablet.Options{Logger: quiet}})
	if err != nil {
		return 0, err
	}
	const partitions = 50
	cfg := m.DefaultConfig()
	cfg.CleanupPolicy = "compact"
	builders := make([]*record.Builder, partitions)
	tabs := make([]*tablet.Tablet, partitions)
	for p := range int32(partitions) {
		if tabs[p], err = m.Create(checkpoint.TopicPartition{Topic: group.Topic, Partition: p}, &cfg); err != nil {
			m.Close()
			return 0, err
		}
		builders[p] = record.NewBuilder(record.None)
	}
	flush := func(p int32) error {
		b, err := builders[p].Build()
		if err != nil {
			return err
		}
		_, err = tabs[p].Append(b.Bytes(), tablet.AppendOptions{})
		builders[p].Reset()
		return err
	}
	now := time.Now().UnixMilli()
	records := 0
	for i := range n {
		id := fmt.Sprintf("group-%06d", i)
		p := group.PartitionFor(id, partitions)
		for q := range perGroup {
			k, v := group.OffsetRecord(id, "topic", int32(q), group.Offset{Offset: int64(i), LeaderEpoch: -1, CommitTimestamp: now, ExpireTimestamp: -1})
			if err := builders[p].Append(record.Record{Timestamp: now, Key: k, Value: v}); err != nil {
				m.Close()
				return 0, err
			}
		}
		k, v := group.EmptyGroupRecord(id, "consumer", 3, now)
		if err := builders[p].Append(record.Record{Timestamp: now, Key: k, Value: v}); err != nil {
			m.Close()
			return 0, err
		}
		records += perGroup + 1
		if builders[p].Len() >= 500 {
			if err := flush(p); err != nil {
				m.Close()
				return 0, err
			}
		}
	}
	for p := range int32(partitions) {
		if builders[p].Len() > 0 {
			if err := flush(p); err != nil {
				m.Close()
				return 0, err
			}
		}
	}
	return records, m.Close()
}

// loadGroups opens the directory and times the coordinator's load (ms),
// then a scan of the same tablets.
func loadGroups(dir string, want int) (float64, float64, error) {
	m, err := tablet.OpenManager(nil, dir, tablet.ManagerOptions{Tablet: tablet.Options{Logger: quiet}})
	if err != nil {
		return 0, 0, err
	}
	defer m.Close()
	start := time.Now()
	c, err := group.New(m, group.Options{Logger: quiet})
	if err != nil {
		return 0, 0, err
	}
	load := time.Since(start)
	got := len(c.Groups())
	if err := c.Close(); err != nil {
		return 0, 0, err
	}
	if got != want {
		return 0, 0, fmt.Errorf("loaded %d groups, wrote %d", got, want)
	}
	start = time.Now()
	n := 0
	for _, t := range m.Tablets() {
		if err := t.Records(0, tablet.ReadLogEnd, func(_ record.Batch, r *record.Record) bool {
			n += len(r.Key)
			return true
		}); err != nil {
			return 0, 0, err
		}
	}
	scan := time.Since(start)
	return float64(load.Microseconds()) / 1e3, float64(scan.Microseconds()) / 1e3, nil
}
