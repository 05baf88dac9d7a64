package tablet_test

import (
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog/internal/invariants"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/tablet"
)

// consumerTablet opens a tablet of batches batches of perBatch records of
// size bytes each (record i's value starts with "v<i>"), on the real
// filesystem.
func consumerTablet(tb testing.TB, batches, perBatch, size int, codec record.Compression) *tablet.Tablet {
	tb.Helper()
	m, err := tablet.OpenManager(nil, tb.TempDir(), quietManager())
	require.NoError(tb, err)
	tb.Cleanup(func() { m.Close() })
	tab, err := m.Create(tablet.TopicPartition{Topic: "consume", Partition: 0}, nil)
	require.NoError(tb, err)
	values := make([]byte, perBatch*size)
	recs := make([]record.Record, perBatch)
	for i := range batches {
		for j := range recs {
			v := values[j*size : (j+1)*size]
			copy(v, fmt.Sprintf("v%d-", i*perBatch+j))
			recs[j] = record.Record{Value: v}
		}
		_, err := tab.AppendRecords(recs, codec, tablet.AppendOptions{})
		require.NoError(tb, err)
	}
	return tab
}

// Records and Scan see every record once, in order, from any offset (the
// middle of a batch too), and stop when told.
func TestRecordsAndScan(t *testing.T) {
	for _, codec := range []record.Compression{record.None, record.LZ4} {
		t.Run(codec.String(), func(t *testing.T) {
			// 300 batches of 7 × 1 KiB: several reads, the chunk growing.
			tab := consumerTablet(t, 300, 7, 1024, codec)
			end := tab.Offsets().LogEndOffset
			require.Equal(t, int64(2100), end)
			for _, from := range []int64{0, 3, 699, 2099, 2100} {
				next := from
				require.NoError(t, tab.Records(from, tablet.ReadHighWatermark, func(_ record.Batch, r *record.Record) bool {
					require.Equal(t, next, r.Offset)
					require.Equal(t, fmt.Sprintf("v%d-", next), string(r.Value[:len(fmt.Sprintf("v%d-", next))]))
					next++
					return true
				}))
				require.Equal(t, end, next, "from %d", from)

				next = from
				for r, err := range tab.Scan(from, tablet.ReadHighWatermark) {
					require.NoError(t, err)
					require.Equal(t, next, r.Offset)
					next++
				}
				require.Equal(t, end, next, "Scan from %d", from)
			}

			var n int
			require.NoError(t, tab.Records(10, tablet.ReadHighWatermark, func(_ record.Batch, r *record.Record) bool {
				n++
				return n < 5
			}))
			require.Equal(t, 5, n, "fn returning false stops Records")
			n = 0
			for range tab.Scan(10, tablet.ReadHighWatermark) {
				if n++; n == 5 {
					break
				}
			}
			require.Equal(t, 5, n)
		})
	}
}

// Scan yields a failure once and ends.
func TestScanError(t *testing.T) {
	tab := consumerTablet(t, 2, 1, 10, record.None)
	var errs int
	for r, err := range tab.Scan(99, tablet.ReadHighWatermark) {
		require.Nil(t, r)
		require.ErrorIs(t, err, tablet.ErrOffsetOutOfRange)
		errs++
	}
	require.Equal(t, 1, errs)
}

// A consumer in steady state allocates nothing per batch, nor per call.
// sync.Pool drops items at random under the race detector, so the count is
// taken only without it.
func TestRecordsAllocatesNothing(t *testing.T) {
	if invariants.Enabled {
		t.Skip("under -race (or -tags invariants) sync.Pool drops items at random: allocation counts mean nothing")
	}
	tab := consumerTablet(t, 2000, 10, 100, record.None)
	count := 0
	fn := func(_ record.Batch, _ *record.Record) bool { count++; return true }
	scan := func() { require.NoError(t, tab.Records(0, tablet.ReadHighWatermark, fn)) }
	scan()
	count = 0
	allocs := testing.AllocsPerRun(20, scan)
	require.Equal(t, 20000*21, count, "AllocsPerRun runs once more than asked")
	require.Zero(t, allocs, "a whole scan of 2000 batches allocates nothing")

	rng := rand.New(rand.NewPCG(1, 2))
	one := func() {
		require.NoError(t, tab.Records(rng.Int64N(20000), tablet.ReadHighWatermark, func(_ record.Batch, _ *record.Record) bool { return false }))
	}
	one()
	require.Zero(t, testing.AllocsPerRun(200, one), "one record at a random offset allocates nothing")
}

// readIntoBatch is the baseline consumer: ReadInto of the batch holding
// off, its bytes into buf, the CRC checked, and its records iterated to
// the one at off.
func readIntoBatch(tb testing.TB, tab *tablet.Tablet, res *tablet.FetchResult, it *record.Iter, buf []byte, off int64, maxBytes int) (int, int64) {
	if err := tab.ReadInto(res, off, tablet.ReadOptions{MaxBytes: maxBytes, MinOneMessage: true}); err != nil {
		tb.Fatal(err)
	}
	size := int(res.Records.Size())
	if size > len(buf) {
		tb.Fatalf("a %d-byte read does not fit the %d-byte buffer", size, len(buf))
	}
	if _, err := res.Records.ReadAt(buf[:size], 0); err != nil && err != io.EOF {
		tb.Fatal(err)
	}
	res.Close()
	next := off
	records := 0
	for data := buf[:size]; len(data) > 0; {
		b, rest, err := record.ParseBatch(data)
		if err != nil {
			tb.Fatal(err)
		}
		if err := b.Verify(); err != nil {
			tb.Fatal(err)
		}
		data = rest
		it.Reset(b, record.DefaultMaxUncompressed)
		for it.Next() {
			if it.Record().Offset >= off {
				records++
			}
		}
		next = b.NextOffset()
	}
	return records, next
}

// BenchmarkRecords measures the consumer API from outside the package
// against the baseline loop a careful caller would write — ReadInto, the
// bytes into its own buffer, CRC check, Iter — alternating the two in one
// run so both see the same machine. It reports both and their ratio:
// random (one record at a random offset; the target is ≤ 2 × the
// baseline's one batch) and scan (the whole tablet; the target is ≥ 0.9 ×
// the baseline's throughput, i.e. a time ratio ≤ 1.11).
//
//	go test -run '^$' -bench 'BenchmarkRecords/random' -benchtime 20000x ./tablet
//	go test -run '^$' -bench 'BenchmarkRecords/scan' -benchtime 20x ./tablet
func BenchmarkRecords(b *testing.B) {
	// 1 KiB records, 10 per batch: 16,384 batches, 160 MiB.
	const batches, perBatch, size = 16384, 10, 1024
	tab := consumerTablet(b, batches, perBatch, size, record.None)
	total := int64(batches * perBatch)
	res := new(tablet.FetchResult)
	var it record.Iter
	buf := make([]byte, 2<<20)

	b.Run("random", func(b *testing.B) {
		rng := rand.New(rand.NewPCG(3, 4))
		var base, recs time.Duration
		b.ReportAllocs()
		for b.Loop() {
			off := rng.Int64N(total)
			t0 := time.Now()
			readIntoBatch(b, tab, res, &it, buf, off, 1)
			t1 := time.Now()
			if err := tab.Records(off, tablet.ReadHighWatermark, func(_ record.Batch, r *record.Record) bool { return false }); err != nil {
				b.Fatal(err)
			}
			t2 := time.Now()
			base, recs = base+t1.Sub(t0), recs+t2.Sub(t1)
		}
		n := float64(b.N)
		b.ReportMetric(float64(recs.Nanoseconds())/n, "records-ns/op")
		b.ReportMetric(float64(base.Nanoseconds())/n, "readinto-ns/op")
		b.ReportMetric(float64(recs)/float64(base), "ratio")
	})
	b.Run("scan", func(b *testing.B) {
		var base, recs time.Duration
		b.SetBytes(2 * total * size)
		b.ReportAllocs()
		for b.Loop() {
			t0 := time.Now()
			for off := int64(0); off < total; {
				_, off = readIntoBatch(b, tab, res, &it, buf, off, 1<<20)
			}
			t1 := time.Now()
			n := int64(0)
			if err := tab.Records(0, tablet.ReadHighWatermark, func(_ record.Batch, r *record.Record) bool { n++; return true }); err != nil {
				b.Fatal(err)
			}
			if n != total {
				b.Fatalf("Records saw %d records of %d", n, total)
			}
			t2 := time.Now()
			base, recs = base+t1.Sub(t0), recs+t2.Sub(t1)
		}
		mb := float64(total*size) / 1e6
		b.ReportMetric(mb*float64(b.N)/recs.Seconds(), "records-MB/s")
		b.ReportMetric(mb*float64(b.N)/base.Seconds(), "readinto-MB/s")
		b.ReportMetric(float64(base)/float64(recs), "ratio")
	})
}
