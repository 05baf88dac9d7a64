package bench

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"github.com/seglog/seglog/logfile"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/tablet"
	"github.com/seglog/seglog/vfs"
)

// runRecovery: an unclean reopen of o.Bytes over o.Tablets tablets (no
// clean-shutdown marker, recovery points at 0: every batch CRC-checked,
// indexes rebuilt, writer state replayed), against reading the same .log
// files and computing CRC-32C.
func runRecovery(o Options) (*Result, error) {
	dir, err := scratch(o, "recovery")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	data := filepath.Join(dir, "data")
	batch, err := buildBatch(o.BatchRecords, o.RecordSize, 6)
	if err != nil {
		return nil, err
	}
	cfg := tablet.DefaultConfig()
	cfg.SegmentBytes = 128 << 20
	m, tabs, err := openManager(data, o.Tablets, cfg)
	if err != nil {
		return nil, err
	}
	n := max(1, o.Bytes/int64(len(batch)))
	if _, err := tabletAppend(tabs, batch, n, o.Tablets, false, func(d int64) { o.Progress("recovery: writing", d, n) }); err != nil {
		m.Close()
		return nil, err
	}
	var logs []string
	for _, t := range tabs {
		for _, s := range t.Segments() {
			logs = append(logs, s.Path)
		}
	}
	if err := m.Close(); err != nil {
		return nil, err
	}
	buf := make([]byte, 1<<20)
	var ours, base []float64
	for rep := range o.Repeat {
		o.Progress("recovery", int64(rep), int64(o.Repeat))
		read, took, err := rawReadCRC(logs, buf)
		if err != nil {
			return nil, err
		}
		base = append(base, float64(read)/took.Seconds()/(1<<30))
		// As after a crash: no marker, and recovery points that cover nothing.
		if err := os.Remove(filepath.Join(data, checkpoint.CleanShutdownFile)); err != nil {
			return nil, err
		}
		zero := checkpoint.Offsets{}
		for i := range tabs {
			zero[tp(i)] = 0
		}
		if err := checkpoint.WriteOffsets(vfs.OS, filepath.Join(data, checkpoint.RecoveryPointFile), zero); err != nil {
			return nil, err
		}
		start := time.Now()
		m, err := tablet.OpenManager(vfs.OS, data, tablet.ManagerOptions{Tablet: tablet.Options{Logger: quiet}})
		if err != nil {
			return nil, err
		}
		took = time.Since(start)
		recovered := m.Loaded.RecoveredBytes()
		if err := m.Close(); err != nil {
			return nil, err
		}
		if recovered != read {
			return nil, fmt.Errorf("bench: recovery read %d bytes of %d", recovered, read)
		}
		ours = append(ours, float64(recovered)/took.Seconds()/(1<<30))
	}
	o.Progress("recovery", int64(o.Repeat), int64(o.Repeat))
	f := figure("recovery.throughput", "GiB/s", ours, "read + CRC-32C of the same files", base)
	f = f.target("≥ 1 GiB/s", f.Value >= 1)
	return &Result{Workload: "recovery", Params: fmt.Sprintf("%d MiB over %d tablet(s), page cache", o.Bytes>>20, o.Tablets),
		Figures: []Figure{f}}, nil
}

// manySegments writes a cleanly closed data directory whose tablet has n
// one-batch segments: one is written through the engine and its files are
// copied with the base offset patched (it is outside the CRC; the indexes
// hold relative offsets).
func manySegments(d string, n int) error {
	m, tabs, err := openManager(d, 1, tablet.DefaultConfig())
	if err != nil {
		return err
	}
	batch, err := buildBatch(1, 100, 4)
	if err != nil {
		return err
	}
	if _, err := tabs[0].Append(batch, tablet.AppendOptions{}); err != nil {
		return err
	}
	if err := m.Close(); err != nil {
		return err
	}
	dir := filepath.Join(d, tp(0).DirName())
	files := map[logfile.Kind][]byte{}
	for _, k := range []logfile.Kind{logfile.Log, logfile.Index, logfile.TimeIndex} {
		if files[k], err = os.ReadFile(filepath.Join(dir, logfile.Filename(0, k))); err != nil {
			return err
		}
	}
	for i := 1; i < n; i++ {
		binary.BigEndian.PutUint64(files[logfile.Log], uint64(i))
		for k, data := range files {
			if err := os.WriteFile(filepath.Join(dir, logfile.Filename(int64(i), k)), data, 0o640); err != nil {
				return err
			}
		}
	}
	end := checkpoint.Offsets{tp(0): int64(n)}
	for _, name := range []string{checkpoint.RecoveryPointFile, checkpoint.ReplicationOffsetFile} {
		if err := checkpoint.WriteOffsets(vfs.OS, filepath.Join(d, name), end); err != nil {
			return err
		}
	}
	if err := os.Rename(filepath.Join(dir, logfile.Filename(1, logfile.Snapshot)),
		filepath.Join(dir, logfile.Filename(int64(n), logfile.Snapshot))); err != nil {
		return err
	}
	return checkpoint.WriteCleanShutdown(vfs.OS, d, 0)
}

// runOpen: a clean open of a tablet of o.Segments segments — time, the
// heap the open tablet holds, descriptors held — against listing the directory
// and stat-ing every file.
func runOpen(o Options) (*Result, error) {
	dir, err := scratch(o, "open")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	data := filepath.Join(dir, "data")
	o.Progress("open: writing", 0, 1)
	if err := manySegments(data, o.Segments); err != nil {
		return nil, err
	}
	o.Progress("open: writing", 1, 1)
	tdir := filepath.Join(data, tp(0).DirName())
	var ours, base []float64
	var fds, mem []float64
	for rep := range o.Repeat {
		o.Progress("open", int64(rep), int64(o.Repeat))
		start := time.Now()
		names, err := vfs.OS.List(tdir)
		if err != nil {
			return nil, err
		}
		for _, name := range names {
			if _, err := vfs.OS.Stat(filepath.Join(tdir, name)); err != nil {
				return nil, err
			}
		}
		base = append(base, float64(time.Since(start).Microseconds())/1e3)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		fd0 := openFDs()
		start = time.Now()
		m, err := tablet.OpenManager(vfs.OS, data, tablet.ManagerOptions{Tablet: tablet.Options{Logger: quiet}})
		if err != nil {
			return nil, err
		}
		ours = append(ours, float64(time.Since(start).Microseconds())/1e3)
		fds = append(fds, float64(openFDs()-fd0))
		runtime.GC()
		runtime.ReadMemStats(&after)
		mem = append(mem, (float64(after.HeapAlloc)-float64(before.HeapAlloc))/(1<<20))
		t, _ := m.Get(tp(0))
		if got := t.Offsets().LogEndOffset; got != int64(o.Segments) {
			m.Close()
			return nil, fmt.Errorf("bench: the opened tablet ends at %d, not %d", got, o.Segments)
		}
		if err := m.Close(); err != nil {
			return nil, err
		}
	}
	o.Progress("open", int64(o.Repeat), int64(o.Repeat))
	f := figure("open.time", "ms", ours, "list + stat of every file", base)
	f = f.target("≤ 1000 ms", f.Value <= 1000)
	fd := figure("open.descriptors", "fds", fds, "", nil)
	fd = fd.target("bounded (≤ 2 × MaxOpenSegments)", fd.Max <= 2*128)
	parts, err := openPartitions(o, filepath.Join(dir, "partitions"))
	if err != nil {
		return nil, err
	}
	return &Result{Workload: "open", Params: fmt.Sprintf("%d clean segments; %d partitions of one record", o.Segments, o.Segments),
		Figures: append([]Figure{f, fd, figure("open.heap", "MiB", mem, "", nil)}, parts...)}, nil
}

// openPartitions: o.Segments partitions of one record each (their indexes
// created) — the disk each costs while open (blocks, directories
// included, against the 2 × segment.index.bytes that preallocating the
// indexes whole would take), and the time a clean open of them all takes.
func openPartitions(o Options, data string) ([]Figure, error) {
	n := o.Segments
	o.Progress("open: partitions", 0, int64(n))
	m, tabs, err := openManager(data, n, tablet.DefaultConfig())
	if err != nil {
		return nil, err
	}
	batch, err := buildBatch(1, 100, 4)
	if err == nil {
		for _, t := range tabs {
			if _, err = t.Append(batch, tablet.AppendOptions{}); err != nil {
				break
			}
		}
	}
	var used int64
	if err == nil {
		used, err = diskUsage(data)
	}
	if err = errors.Join(err, m.Close()); err != nil {
		return nil, err
	}
	perPartition := float64(used) / float64(n) / (1 << 10)
	whole := float64(2*tablet.DefaultConfig().SegmentIndexBytes) / (1 << 10)
	var ours, base []float64
	for rep := range o.Repeat {
		o.Progress("open: partitions", int64(rep), int64(o.Repeat))
		start := time.Now()
		if err := filepath.WalkDir(data, func(path string, d fs.DirEntry, err error) error {
			if err == nil {
				_, err = os.Stat(path)
			}
			return err
		}); err != nil {
			return nil, err
		}
		base = append(base, float64(time.Since(start).Microseconds())/1e3)
		start = time.Now()
		m, err := tablet.OpenManager(vfs.OS, data, tablet.ManagerOptions{Tablet: tablet.Options{Logger: quiet}})
		if err != nil {
			return nil, err
		}
		ours = append(ours, float64(time.Since(start).Microseconds())/1e3)
		if got := len(m.Tablets()); got != n {
			m.Close()
			return nil, fmt.Errorf("bench: %d partitions opened, not %d", got, n)
		}
		if err := m.Close(); err != nil {
			return nil, err
		}
	}
	return []Figure{
		figure("open.partitions.disk", "KiB", []float64{perPartition}, "2 × segment.index.bytes, preallocated whole", []float64{whole}),
		figure("open.partitions.time", "ms", ours, "walk + stat of every file", base),
	}, nil
}

// diskUsage is the disk a directory tree takes: its files' and
// directories' allocated blocks.
func diskUsage(dir string) (int64, error) {
	var used int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(path, &st); err != nil {
			return err
		}
		used += st.Blocks * 512
		return nil
	})
	return used, err
}
