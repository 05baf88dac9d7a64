package recovery

import (
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/segment"
	"github.com/seglog/seglog/vfs"
)

// benchDataDir writes tablets × mib MiB of 16 KiB idempotent batches (16
// records of 1000 random bytes) in 128 MiB segments, left as a crash
// leaves them: no marker, no checkpoint. It returns the .log files.
func benchDataDir(b *testing.B, d string, tablets, mib int) []string {
	rng := rand.New(rand.NewPCG(1, 2))
	value := make([]byte, 1000)
	var logs []string
	for p := range tablets {
		dir := filepath.Join(d, checkpoint.TopicPartition{Topic: "bench", Partition: int32(p)}.DirName())
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		if err := checkpoint.WritePartitionMetadata(vfs.OS, filepath.Join(dir, checkpoint.PartitionMetadataFile),
			checkpoint.NewTopicID()); err != nil {
			b.Fatal(err)
		}
		var (
			seg  *segment.Segment
			next int64
			seq  int32
		)
		for written := 0; written < mib<<20; {
			if seg == nil || seg.Size() >= 128<<20 {
				if seg != nil {
					if err := seg.Close(); err != nil {
						b.Fatal(err)
					}
				}
				var err error
				if seg, err = segment.Create(vfs.OS, dir, next, segment.Options{}); err != nil {
					b.Fatal(err)
				}
				logs = append(logs, seg.LogPath())
			}
			bl := record.NewBuilder(record.None)
			bl.SetBaseOffset(next)
			bl.SetProducer(int64(p), 0, seq)
			for range 16 {
				for i := range value {
					value[i] = byte(rng.Uint32())
				}
				if err := bl.Append(record.Record{Timestamp: 1_700_000_000_000 + next, Value: value}); err != nil {
					b.Fatal(err)
				}
			}
			batch, err := bl.Build()
			if err != nil {
				b.Fatal(err)
			}
			if err := seg.Append(segment.AppendInfo{LargestOffset: batch.LastOffset(), LargestTimestamp: batch.MaxTimestamp(),
				ShallowOffsetOfMaxTimestamp: batch.LastOffset()}, batch.Bytes()); err != nil {
				b.Fatal(err)
			}
			next, seq, written = batch.NextOffset(), seq+16, written+batch.Size()
		}
		if err := seg.Close(); err != nil {
			b.Fatal(err)
		}
	}
	return logs
}

// readAndChecksum is the raw-hardware baseline of recovery: read every
// .log in 1 MiB preads and compute CRC-32C over it.
func readAndChecksum(b *testing.B, logs []string, buf []byte) {
	for _, path := range logs {
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		var crc uint32
		for off := int64(0); ; {
			n, err := f.ReadAt(buf, off)
			crc = record.UpdateChecksum(crc, buf[:n])
			off += int64(n)
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		benchSink ^= crc
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

var benchSink uint32

// BenchmarkLoad measures a full unclean recovery of a data directory of 4
// tablets × 64 MiB (every batch read and CRC-checked, indexes rebuilt, the
// writer state replayed and snapshotted) beside the baseline of reading
// the same files and computing CRC-32C, alternating in one run. The files
// are in the page cache: this is the CPU cost of recovery.
func BenchmarkLoad(b *testing.B) {
	for _, parallelism := range []int{1, 2} {
		b.Run("tablets=4x64MiB/parallelism="+string(rune('0'+parallelism)), func(b *testing.B) {
			d := b.TempDir()
			logs := benchDataDir(b, d, 4, 64)
			var size int64
			for _, p := range logs {
				info, err := os.Stat(p)
				if err != nil {
					b.Fatal(err)
				}
				size += info.Size()
			}
			buf := make([]byte, 1<<20)
			var baseline, load time.Duration
			b.SetBytes(size)
			for b.Loop() {
				t0 := time.Now()
				readAndChecksum(b, logs, buf)
				t1 := time.Now()
				r, err := Load(vfs.OS, d, Options{Parallelism: parallelism})
				if err != nil {
					b.Fatal(err)
				}
				t2 := time.Now()
				if r.RecoveredBytes() != size {
					b.Fatalf("recovered %d of %d bytes", r.RecoveredBytes(), size)
				}
				if err := r.Close(); err != nil { // no marker: the next load recovers again
					b.Fatal(err)
				}
				baseline, load = baseline+t1.Sub(t0), load+t2.Sub(t1)
			}
			gib := float64(size) * float64(b.N) / (1 << 30)
			b.ReportMetric(gib/load.Seconds(), "load-GiB/s")
			b.ReportMetric(gib/baseline.Seconds(), "baseline-GiB/s")
			b.ReportMetric(baseline.Seconds()/load.Seconds(), "load/baseline")
		})
	}
}

// BenchmarkVerify measures Verify over a closed data directory of 4
// tablets × 64 MiB beside the baseline of reading the same .log files and
// computing CRC-32C, alternating in one run (page cache).
func BenchmarkVerify(b *testing.B) {
	d := b.TempDir()
	logs := benchDataDir(b, d, 4, 64)
	r, err := Load(vfs.OS, d, Options{})
	if err != nil {
		b.Fatal(err)
	}
	if err := r.CloseClean(r.BrokerEpoch); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	var baseline, verify time.Duration
	var size int64
	for b.Loop() {
		t0 := time.Now()
		readAndChecksum(b, logs, buf)
		t1 := time.Now()
		v, err := Verify(vfs.OS, d, VerifyOptions{})
		if err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		if len(v.Tablets) != 4 || len(v.Tablets[0].Problems) > 0 {
			b.Fatalf("%+v", v.Tablets[0])
		}
		size = v.BytesRead
		baseline, verify = baseline+t1.Sub(t0), verify+t2.Sub(t1)
	}
	b.SetBytes(size)
	gib := float64(size) * float64(b.N) / (1 << 30)
	b.ReportMetric(gib/verify.Seconds(), "verify-GiB/s")
	b.ReportMetric(gib/baseline.Seconds(), "baseline-GiB/s")
	b.ReportMetric(baseline.Seconds()/verify.Seconds(), "verify/baseline")
}
