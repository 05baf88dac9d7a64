package record

import (
	"crypto/rand"
	"fmt"
	"testing"
)

// benchBatch builds a batch of n records of size bytes each, with random
// (incompressible) values.
func benchBatch(b *testing.B, c Compression, n, size int) (Batch, []Record) {
	recs := make([]Record, n)
	for i := range recs {
		v := make([]byte, size)
		_, _ = rand.Read(v)
		recs[i] = Record{Timestamp: int64(1_700_000_000_000 + i), Key: []byte(fmt.Sprint(i)), Value: v}
	}
	bl := NewBuilder(c)
	for _, r := range recs {
		if err := bl.Append(r); err != nil {
			b.Fatal(err)
		}
	}
	batch, err := bl.Build()
	if err != nil {
		b.Fatal(err)
	}
	return batch, recs
}

func BenchmarkVerifyCRC(b *testing.B) {
	for _, size := range []int{1 << 10, 100 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("size=%dKiB", size>>10), func(b *testing.B) {
			batch, _ := benchBatch(b, None, max(size/1024, 1), 1000)
			b.SetBytes(int64(batch.Size()))
			b.ReportAllocs()
			for b.Loop() {
				if err := batch.Verify(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkIterate(b *testing.B) {
	for _, c := range allCodecs {
		b.Run("codec="+c.String(), func(b *testing.B) {
			batch, _ := benchBatch(b, c, 100, 1024)
			var it Iter
			b.SetBytes(int64(batch.Size()))
			b.ReportAllocs()
			for b.Loop() {
				it.Reset(batch, DefaultMaxUncompressed)
				n := 0
				for it.Next() {
					n += len(it.Record().Value)
				}
				if it.Err() != nil || n != 100*1024 {
					b.Fatal(it.Err(), n)
				}
			}
		})
	}
}

func BenchmarkBuild(b *testing.B) {
	for _, c := range allCodecs {
		b.Run("records=100x1KiB/codec="+c.String(), func(b *testing.B) {
			_, recs := benchBatch(b, None, 100, 1024)
			bl := NewBuilder(c)
			var dst []byte
			b.SetBytes(100 * 1024)
			b.ReportAllocs()
			for b.Loop() {
				bl.Reset()
				for _, r := range recs {
					if err := bl.Append(r); err != nil {
						b.Fatal(err)
					}
				}
				var err error
				if dst, err = bl.AppendTo(dst[:0]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkScan(b *testing.B) {
	batch, _ := benchBatch(b, None, 100, 1024)
	var data []byte
	for len(data) < 64<<20 {
		data = append(data, batch.Bytes()...)
	}
	r := bytesReaderAt(data)
	var s Scanner
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		s.Reset(r, 0, int64(len(data)))
		for s.Next() {
			bt, err := s.Batch()
			if err != nil {
				b.Fatal(err)
			}
			if err := bt.Verify(); err != nil {
				b.Fatal(err)
			}
		}
		if s.Stop() != AtEnd {
			b.Fatal(s.Stop())
		}
	}
}

type bytesReaderAt []byte

func (d bytesReaderAt) ReadAt(p []byte, off int64) (int, error) {
	n := copy(p, d[off:])
	return n, nil
}

// BenchmarkValidateAppend is a client batch's check on append: CRC and
// every record parsed, at 100 records of 128 bytes and of 1 KiB.
func BenchmarkValidateAppend(b *testing.B) {
	for _, size := range []int{128, 1024} {
		b.Run(fmt.Sprintf("records=100x%dB", size), func(b *testing.B) {
			batch, _ := benchBatch(b, None, 100, size)
			data := batch.Bytes()
			opts := ValidateOptions{Origin: OriginClient, MaxMessageBytes: 1 << 20, TimestampType: CreateTime,
				TimestampBeforeMaxMs: 1 << 62, TimestampAfterMaxMs: 1 << 62, NowMs: 1_700_000_000_000}
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				v, err := ValidateAppend(data, opts)
				if err != nil || v.Batch.NumRecords() != 100 {
					b.Fatal(err)
				}
			}
		})
	}
}
