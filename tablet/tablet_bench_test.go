package tablet

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seglog/seglog/logfile"
	"github.com/seglog/seglog/record"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/vfs"
)

// manySegments writes a cleanly closed data directory whose tablet has n
// one-batch segments: one segment is built through the segment package and
// its files are copied n times with the base offset patched (it is outside
// the CRC; the indexes hold relative offsets).
func manySegments(b *testing.B, d string, n int) {
	m, err := OpenManager(vfs.OS, d, ManagerOptions{Tablet: Options{Logger: quiet}})
	if err != nil {
		b.Fatal(err)
	}
	tab, err := m.Create(tp0, nil)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := tab.Append(batch(&testing.T{}, 1, 1_700_000_000_000, 100), AppendOptions{}); err != nil {
		b.Fatal(err)
	}
	if err := m.Close(); err != nil {
		b.Fatal(err)
	}
	dir := filepath.Join(d, tp0.DirName())
	read := func(k logfile.Kind) []byte {
		data, err := os.ReadFile(filepath.Join(dir, logfile.Filename(0, k)))
		if err != nil {
			b.Fatal(err)
		}
		return data
	}
	log, index, timeIndex := read(logfile.Log), read(logfile.Index), read(logfile.TimeIndex)
	for i := 1; i < n; i++ {
		base := int64(i)
		binary.BigEndian.PutUint64(log, uint64(base))
		for k, data := range map[logfile.Kind][]byte{logfile.Log: log, logfile.Index: index, logfile.TimeIndex: timeIndex} {
			if err := os.WriteFile(filepath.Join(dir, logfile.Filename(base, k)), data, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	end := checkpoint.Offsets{tp0: int64(n)}
	for _, name := range []string{checkpoint.RecoveryPointFile, checkpoint.ReplicationOffsetFile} {
		if err := checkpoint.WriteOffsets(vfs.OS, filepath.Join(d, name), end); err != nil {
			b.Fatal(err)
		}
	}
	// The snapshot at the log end that a clean close leaves.
	if err := os.Rename(filepath.Join(dir, logfile.Filename(1, logfile.Snapshot)),
		filepath.Join(dir, logfile.Filename(int64(n), logfile.Snapshot))); err != nil {
		b.Fatal(err)
	}
	if err := checkpoint.WriteCleanShutdown(vfs.OS, d, 0); err != nil {
		b.Fatal(err)
	}
}

func openFDs(b *testing.B) int {
	names, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		b.Skip("no /proc/self/fd to count descriptors:", err)
	}
	return len(names)
}

// BenchmarkOpen10kSegments opens a data directory whose tablet has 10,000
// clean segments, beside the baseline of listing the directory and
// stat-ing every file (the least any open must do), and reports the
// descriptors held afterwards.
func BenchmarkOpen10kSegments(b *testing.B) {
	const n = 10000
	d := b.TempDir()
	manySegments(b, d, n)
	dir := filepath.Join(d, tp0.DirName())
	var baseline, open time.Duration
	held := 0
	for b.Loop() {
		t0 := time.Now()
		names, err := vfs.OS.List(dir)
		if err != nil {
			b.Fatal(err)
		}
		for _, name := range names {
			if _, err := vfs.OS.Stat(filepath.Join(dir, name)); err != nil {
				b.Fatal(err)
			}
		}
		t1 := time.Now()
		before := openFDs(b)
		m, err := OpenManager(vfs.OS, d, ManagerOptions{Tablet: Options{Logger: quiet}})
		if err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		held = openFDs(b) - before
		tab, _ := m.Get(tp0)
		if got := tab.Offsets().LogEndOffset; got != n {
			b.Fatalf("log end %d", got)
		}
		if err := m.Close(); err != nil {
			b.Fatal(err)
		}
		baseline, open = baseline+t1.Sub(t0), open+t2.Sub(t1)
	}
	b.ReportMetric(open.Seconds()/float64(b.N)*1000, "open-ms")
	b.ReportMetric(baseline.Seconds()/float64(b.N)*1000, "list+stat-ms")
	b.ReportMetric(open.Seconds()/baseline.Seconds(), "open/baseline")
	b.ReportMetric(float64(held), "fds-held")
}

// BenchmarkAppendVsBaseline appends producer batches of 100 records of 1
// KiB through a tablet (validation, writer state, stamping, one write,
// indexes, offsets published), interleaved with the baseline of what an
// append must do at least: CRC-32C the batch and pwrite it. Without and
// with a per-append Sync (each then waits for its fdatasync; the baseline
// fdatasyncs too).
func BenchmarkAppendVsBaseline(b *testing.B) {
	for _, sync := range []bool{false, true} {
		name := "sync=false"
		if sync {
			name = "sync=true"
		}
		b.Run(name, func(b *testing.B) {
			d := b.TempDir()
			m, err := OpenManager(vfs.OS, filepath.Join(d, "data"), ManagerOptions{Tablet: Options{Logger: quiet}})
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			cfg := DefaultConfig()
			cfg.SegmentBytes = 256 << 20
			tab, err := m.Create(tp0, &cfg)
			if err != nil {
				b.Fatal(err)
			}
			chunk := batch(&testing.T{}, 100, 1_700_000_000_000, 1024)
			work := append([]byte(nil), chunk...)
			raw, err := os.Create(filepath.Join(d, "raw"))
			if err != nil {
				b.Fatal(err)
			}
			defer raw.Close()
			var pos int64
			var baseline, appendTime time.Duration
			b.SetBytes(int64(len(chunk)))
			b.ReportAllocs()
			for b.Loop() {
				t0 := time.Now()
				if crc32Castagnoli(chunk[21:]) == 0 {
					b.Fatal("crc")
				}
				if _, err := raw.WriteAt(chunk, pos); err != nil {
					b.Fatal(err)
				}
				if sync {
					if err := raw.Sync(); err != nil {
						b.Fatal(err)
					}
				}
				t1 := time.Now()
				copy(work, chunk) // Append stamps the caller's bytes
				if _, err := tab.Append(work, AppendOptions{Sync: sync}); err != nil {
					b.Fatal(err)
				}
				baseline, appendTime = baseline+t1.Sub(t0), appendTime+time.Since(t1)
				// The raw file grows as the segments do, and starts over
				// where the tablet rolls: both allocate blocks alike.
				if pos += int64(len(chunk)); pos+int64(len(chunk)) > cfg.SegmentBytes {
					pos = 0
					if err := raw.Truncate(0); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(baseline.Seconds()/appendTime.Seconds(), "tablet/baseline")
			b.ReportMetric(float64(len(chunk))*float64(b.N)/appendTime.Seconds()/1e6, "tablet-MB/s")
			b.ReportMetric(float64(len(chunk))*float64(b.N)/baseline.Seconds()/1e6, "baseline-MB/s")
		})
	}
}

func crc32Castagnoli(b []byte) uint32 { return crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)) }

// BenchmarkSyncAppend10kSegments: Sync appends of one small batch to a
// tablet of 10,000 clean segments — what a flush looks at besides the
// fsync.
func BenchmarkSyncAppend10kSegments(b *testing.B) {
	d := b.TempDir()
	manySegments(b, d, 10000)
	m, err := OpenManager(vfs.OS, d, ManagerOptions{Tablet: Options{Logger: quiet}})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	tab, _ := m.Get(tp0)
	data := batch(&testing.T{}, 1, 1_700_000_000_000, 100)
	work := append([]byte(nil), data...)
	for b.Loop() {
		if _, err := tab.Append(work, AppendOptions{Sync: true}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGroupCommit: Sync appends of 100 KiB batches from 1 and 8
// producers, reporting appends per fsync (what group commit shares).
func BenchmarkGroupCommit(b *testing.B) {
	for _, producers := range []int{1, 8} {
		b.Run(fmt.Sprintf("producers=%d", producers), func(b *testing.B) {
			m, err := OpenManager(vfs.OS, b.TempDir(), ManagerOptions{Tablet: Options{Logger: quiet}})
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			tab, err := m.Create(tp0, nil)
			if err != nil {
				b.Fatal(err)
			}
			data := batch(&testing.T{}, 100, time.Now().UnixMilli(), 1000)
			b.SetBytes(int64(len(data)))
			before := tab.flush.fsyncs
			var next atomic.Int64
			b.ResetTimer()
			var wg sync.WaitGroup
			for range producers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					work := append([]byte(nil), data...)
					for next.Add(1) <= int64(b.N) {
						if _, err := tab.Append(work, AppendOptions{Sync: true}); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			tab.flush.mu.Lock()
			syncs := tab.flush.fsyncs - before
			tab.flush.mu.Unlock()
			b.ReportMetric(float64(b.N)/float64(max(syncs, 1)), "appends/fsync")
		})
	}
}

// BenchmarkAppendCompressionType is the cost of compression.type: the
// same lz4 batches (100 records of 1 KiB of text) appended to a topic that
// keeps the producer's codec, and to one that stores zstd (each batch
// decompressed and compressed again on append), in the same run.
func BenchmarkAppendCompressionType(b *testing.B) {
	bl := record.NewBuilder(record.LZ4)
	for i := range 100 {
		v := []byte(strings.Repeat(fmt.Sprintf("record %d of a batch, some text that compresses. ", i), 30)[:1024])
		if err := bl.Append(record.Record{Timestamp: 1, Value: v}); err != nil {
			b.Fatal(err)
		}
	}
	batch, err := bl.Build()
	if err != nil {
		b.Fatal(err)
	}
	for _, typ := range []string{"producer", "zstd"} {
		b.Run(typ, func(b *testing.B) {
			m, err := OpenManager(vfs.OS, b.TempDir(), ManagerOptions{Tablet: Options{Logger: quiet}})
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			cfg := DefaultConfig()
			if err := cfg.Set("compression.type", typ); err != nil {
				b.Fatal(err)
			}
			tab, err := m.Create(tp0, &cfg)
			if err != nil {
				b.Fatal(err)
			}
			data := make([]byte, len(batch.Bytes()))
			b.SetBytes(100 * 1024)
			for b.Loop() {
				copy(data, batch.Bytes()) // Append stamps the batch in place
				if _, err := tab.Append(data, AppendOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
