package segment

import (
	"crypto/rand"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/vfs"
)

const benchWrap = 256 << 20 // files wrap at this size, so runs do not fill the disk

// benchChunk is one producer batch of 100 records of 1 KiB each, with
// random (incompressible) values.
func benchChunk(b *testing.B, offset int64) []byte {
	bl := record.NewBuilder(record.None)
	bl.SetBaseOffset(offset)
	v := make([]byte, 1024)
	for i := range 100 {
		_, _ = rand.Read(v)
		if err := bl.Append(record.Record{Timestamp: int64(1_700_000_000_000 + i), Value: v}); err != nil {
			b.Fatal(err)
		}
	}
	batch, err := bl.Build()
	if err != nil {
		b.Fatal(err)
	}
	return batch.Bytes()
}

// benchPwriteCRC is the baseline of an append: the CRC-32C check of the
// batch and one pwrite of it at the end of a file.
func benchPwriteCRC(b *testing.B) {
	chunk := benchChunk(b, 0)
	f, err := os.Create(filepath.Join(b.TempDir(), "raw"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	b.SetBytes(int64(len(chunk)))
	b.ReportAllocs()
	var pos int64
	for b.Loop() {
		if record.Checksum(chunk[21:]) == 0 {
			b.Fatal("crc")
		}
		if _, err := f.WriteAt(chunk, pos); err != nil {
			b.Fatal(err)
		}
		if pos += int64(len(chunk)); pos > benchWrap {
			b.StopTimer()
			pos = 0
			if err := f.Truncate(0); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	}
}

// benchSegmentAppend is the same through a segment: the CRC check, then
// Append with its index maintenance.
func benchSegmentAppend(b *testing.B) {
	chunk := benchChunk(b, 0)
	batch, _, err := record.ParseBatch(chunk)
	if err != nil {
		b.Fatal(err)
	}
	s, err := Create(vfs.OS, b.TempDir(), 0, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.SetBytes(int64(len(chunk)))
	b.ReportAllocs()
	var next int64
	for b.Loop() {
		if err := batch.Verify(); err != nil {
			b.Fatal(err)
		}
		batch.SetLastOffset(next + int64(batch.LastOffsetDelta()))
		next = batch.NextOffset()
		if err := s.Append(AppendInfo{next - 1, batch.MaxTimestamp(), next - 1}, chunk); err != nil {
			b.Fatal(err)
		}
		if s.Size() > benchWrap {
			b.StopTimer()
			if _, err := s.TruncateTo(0); err != nil {
				b.Fatal(err)
			}
			next = 0
			b.StartTimer()
		}
	}
}

func BenchmarkAppend(b *testing.B) {
	b.Run("batch=100x1KiB/baseline=pwrite+crc32c", benchPwriteCRC)
	b.Run("batch=100x1KiB/segment", benchSegmentAppend)
}

// BenchmarkAppendVsBaseline interleaves the baseline (CRC check + pwrite)
// and the segment append, timing each, and reports the segment's
// throughput as a fraction of the baseline's (target ≥ 0.85). Interleaving
// exposes both to the same machine at the same moment.
func BenchmarkAppendVsBaseline(b *testing.B) {
	chunk := benchChunk(b, 0)
	segChunk := append([]byte(nil), chunk...)
	batch, _, err := record.ParseBatch(segChunk)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	raw, err := os.Create(filepath.Join(dir, "raw"))
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	s, err := Create(vfs.OS, dir, 0, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var (
		pos, next            int64
		baseline, appendTime time.Duration
	)
	b.SetBytes(int64(len(chunk)))
	b.ReportAllocs()
	for b.Loop() {
		t0 := time.Now()
		if record.Checksum(chunk[21:]) == 0 {
			b.Fatal("crc")
		}
		if _, err := raw.WriteAt(chunk, pos); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := batch.Verify(); err != nil {
			b.Fatal(err)
		}
		batch.SetLastOffset(next + int64(batch.LastOffsetDelta()))
		next = batch.NextOffset()
		if err := s.Append(AppendInfo{next - 1, batch.MaxTimestamp(), next - 1}, segChunk); err != nil {
			b.Fatal(err)
		}
		baseline, appendTime = baseline+t1.Sub(t0), appendTime+time.Since(t1)
		if pos += int64(len(chunk)); pos > benchWrap {
			b.StopTimer()
			pos, next = 0, 0
			if err := raw.Truncate(0); err != nil {
				b.Fatal(err)
			}
			if _, err := s.TruncateTo(0); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	}
	b.ReportMetric(float64(baseline)/float64(appendTime), "segment/baseline")
	b.ReportMetric(float64(len(chunk))*float64(b.N)/baseline.Seconds()/1e6, "baseline-MB/s")
	b.ReportMetric(float64(len(chunk))*float64(b.N)/appendTime.Seconds()/1e6, "segment-MB/s")
}

// benchSegment fills a segment with n batches of 100 × 1 KiB.
func benchSegment(b *testing.B, n int) *Segment {
	s, err := Create(vfs.OS, b.TempDir(), 0, Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	chunk := benchChunk(b, 0)
	batch, _, _ := record.ParseBatch(chunk)
	for i := range n {
		batch.SetBaseOffset(int64(i * 100))
		if err := s.Append(AppendInfo{batch.LastOffset(), batch.MaxTimestamp(), batch.LastOffset()}, chunk); err != nil {
			b.Fatal(err)
		}
	}
	return s
}

// BenchmarkRead sends a whole 128 MiB segment (page cache) to a file and to
// a loopback socket, beside the baseline of reading it with pread into a
// buffer.
func BenchmarkRead(b *testing.B) {
	s := benchSegment(b, 1280)
	size := s.Size()
	b.Run("size=128MiB/baseline=pread", func(b *testing.B) {
		f, err := os.Open(s.LogPath())
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		buf := make([]byte, 1<<20)
		b.SetBytes(size)
		for b.Loop() {
			for off := int64(0); off < size; off += int64(len(buf)) {
				if _, err := f.ReadAt(buf[:min(int64(len(buf)), size-off)], off); err != nil && err != io.EOF {
					b.Fatal(err)
				}
			}
		}
	})
	read := func(b *testing.B) Slice {
		r, ok, err := s.Read(0, math.MaxInt32, size, false)
		if err != nil || !ok || r.Records.Size() != size {
			b.Fatal(err, ok, r.Records.Size())
		}
		return r.Records
	}
	b.Run("size=128MiB/to=file", func(b *testing.B) {
		out, err := os.Create(filepath.Join(b.TempDir(), "out"))
		if err != nil {
			b.Fatal(err)
		}
		defer out.Close()
		b.SetBytes(size)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := out.Seek(0, io.SeekStart); err != nil {
				b.Fatal(err)
			}
			if n, err := read(b).WriteTo(out); err != nil || n != size {
				b.Fatal(err, n)
			}
		}
	})
	b.Run("size=128MiB/to=loopback-tcp", func(b *testing.B) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		defer ln.Close()
		go func() {
			c, err := ln.Accept()
			if err == nil {
				_, _ = io.Copy(io.Discard, c)
				c.Close()
			}
		}()
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		b.SetBytes(size)
		b.ReportAllocs()
		for b.Loop() {
			if n, err := read(b).WriteTo(conn); err != nil || n != size {
				b.Fatal(err, n)
			}
		}
	})
}

// BenchmarkTranslateOffset finds random offsets in a 128 MiB segment
// through its index.
func BenchmarkTranslateOffset(b *testing.B) {
	s := benchSegment(b, 1280)
	targets := make([]int64, 4096)
	for i := range targets {
		var r [8]byte
		_, _ = rand.Read(r[:])
		targets[i] = int64(uint64(r[0])<<8|uint64(r[1])) % 128000
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, ok, err := s.TranslateOffset(targets[i%len(targets)], 0); err != nil || !ok {
			b.Fatal(err, ok)
		}
		i++
	}
}

// BenchmarkRecover rebuilds the indexes of a 128 MiB segment (CRC of every
// batch), beside the baseline of reading the file and computing the CRC.
func BenchmarkRecover(b *testing.B) {
	s := benchSegment(b, 1280)
	size := s.Size()
	b.Run("size=128MiB/baseline=pread+crc32c", func(b *testing.B) {
		f, err := os.Open(s.LogPath())
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		buf := make([]byte, 1<<20)
		b.SetBytes(size)
		for b.Loop() {
			var crc uint32
			for off := int64(0); off < size; off += int64(len(buf)) {
				n, err := f.ReadAt(buf[:min(int64(len(buf)), size-off)], off)
				if err != nil && err != io.EOF {
					b.Fatal(err)
				}
				crc = record.UpdateChecksum(crc, buf[:n])
			}
			_ = crc
		}
	})
	b.Run("size=128MiB/recover", func(b *testing.B) {
		b.SetBytes(size)
		b.ReportAllocs()
		for b.Loop() {
			tail, err := s.Recover(nil)
			if err != nil || tail.Kind != CleanEnd {
				b.Fatal(err, tail)
			}
		}
		b.ReportMetric(float64(size)*float64(b.N)/b.Elapsed().Seconds()/(1<<30), "GiB/s")
	})
}

// BenchmarkReadOneBatch reads the batch holding a random offset of a 128
// MiB segment into a buffer: the hot path of a random read.
func BenchmarkReadOneBatch(b *testing.B) {
	s := benchSegment(b, 1280)
	targets := make([]int64, 4096)
	for i := range targets {
		var r [2]byte
		_, _ = rand.Read(r[:])
		targets[i] = int64(uint64(r[0])<<8|uint64(r[1])) % 128000
	}
	buf := make([]byte, 128<<10)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		r, ok, err := s.Read(targets[i%len(targets)], 1, s.Size(), true)
		if err != nil || !ok {
			b.Fatal(err, ok)
		}
		if _, err := r.Records.ReadAt(buf[:r.Records.Size()], 0); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
