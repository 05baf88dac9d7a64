package segment

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog/internal/testenv"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/vfs"
)

// modelBatch is a batch as the model keeps it.
type modelBatch struct {
	data       []byte
	base, last int64
	maxTS      int64
	timestamps []int64 // per record, for time lookups
	offsets    []int64
}

// randomBatch builds a batch at offset with random records, codec and
// timestamps (which need not increase).
func randomBatch(t testing.TB, rng *rand.Rand, offset int64) modelBatch {
	codecs := []record.Compression{record.None, record.None, record.Gzip, record.Zstd, record.LZ4, record.Snappy}
	b := record.NewBuilder(codecs[rng.IntN(len(codecs))])
	b.SetBaseOffset(offset)
	m := modelBatch{base: offset, maxTS: record.NoTimestamp}
	n := 1 + rng.IntN(5)
	for i := range n {
		ts := 1_000_000 + offset*10 + rng.Int64N(200) - 100
		require.NoError(t, b.Append(record.Record{Timestamp: ts, Value: bytes.Repeat([]byte{byte(i)}, rng.IntN(300))}))
		m.timestamps = append(m.timestamps, ts)
		m.offsets = append(m.offsets, offset+int64(i))
		m.maxTS = max(m.maxTS, ts)
	}
	batch, err := b.Build()
	require.NoError(t, err)
	m.data, m.last = batch.Bytes(), batch.LastOffset()
	return m
}

// A model test: random appends, reads, time lookups, truncations, flushes
// and reopens against an in-memory list of batches. Replay a failure with
// SEGLOG_SEED.
func TestModel(t *testing.T) {
	sd := testenv.Seed(t)
	rng := rand.New(rand.NewPCG(sd, 4))
	mem := vfs.NewMem()
	opts := Options{IndexIntervalBytes: 1 + rng.IntN(600), MaxIndexSize: 1 << 16}
	const base = 1000
	s := createSegment(t, mem, "/d", base, opts)
	var model []modelBatch
	next := int64(base)
	for step := range 2000 {
		msg := fmt.Sprintf("seed %d step %d", sd, step)
		switch op := rng.IntN(20); {
		case op < 9: // append, sometimes leaving a gap in the offsets
			next += int64(rng.IntN(3) / 2 * rng.IntN(5))
			m := randomBatch(t, rng, next)
			require.NoError(t, s.Append(AppendInfo{m.last, m.maxTS, m.last}, m.data), msg)
			model = append(model, m)
			next = m.last + 1
		case op < 13: // read
			if len(model) == 0 {
				continue
			}
			target := base - 2 + rng.Int64N(next-base+4)
			maxSize, minOne := rng.IntN(3000), rng.IntN(2) == 0
			r, ok, err := s.Read(target, maxSize, s.Size(), minOne)
			require.NoError(t, err, msg)
			first := -1
			for i, m := range model {
				if m.last >= target {
					first = i
					break
				}
			}
			require.Equal(t, first >= 0, ok, msg)
			if !ok {
				continue
			}
			limit := maxSize
			if minOne {
				limit = max(limit, len(model[first].data))
			}
			var want []byte
			for _, m := range model[first:] {
				if len(want)+len(m.data) > limit {
					break
				}
				want = append(want, m.data...)
			}
			// Kafka: a read of 0 bytes is empty, not an incomplete first entry.
			require.Equal(t, len(want) == 0 && limit > 0, r.FirstEntryIncomplete, msg)
			got, err := r.Records.AppendTo(nil)
			require.NoError(t, err, msg)
			require.Equal(t, want, got, msg)
		case op < 15: // time lookup
			ts := 1_000_000 + (base+rng.Int64N(next-base+1))*10 + rng.Int64N(300) - 150
			start := base + rng.Int64N(next-base+1)
			got, ok, err := s.FindOffsetByTimestamp(ts, start)
			require.NoError(t, err, msg)
			var want *TimestampOffset
		search:
			for _, m := range model {
				for i, off := range m.offsets {
					if m.timestamps[i] >= ts && off >= start {
						want = &TimestampOffset{Timestamp: m.timestamps[i], Offset: off, LeaderEpoch: -1}
						break search
					}
				}
			}
			require.Equal(t, want != nil, ok, msg)
			if ok {
				require.Equal(t, *want, got, msg)
			}
		case op < 17: // truncate
			if len(model) == 0 {
				continue
			}
			to := base + rng.Int64N(next-base+1)
			_, err := s.TruncateTo(to)
			require.NoError(t, err, msg)
			keep := 0
			for keep < len(model) && model[keep].last < to {
				keep++
			}
			model = model[:keep]
			next = base
			if keep > 0 {
				next = model[keep-1].last + 1
			}
			got, err := s.ReadNextOffset()
			require.NoError(t, err, msg)
			require.Equal(t, next, got, msg)
		case op < 18:
			require.NoError(t, s.Flush(), msg)
		default: // close and reopen, as a clean restart would (then maybe recover)
			require.NoError(t, s.Close(), msg)
			var err error
			s, err = Open(mem, "/d", base, opts)
			require.NoError(t, err, msg)
			t.Cleanup(func() { s.Close() })
			if rng.IntN(2) == 0 {
				tail, err := s.Recover(nil)
				require.NoError(t, err, msg)
				require.Equal(t, CleanEnd, tail.Kind, msg)
			}
			_, err = s.offsetIndex().Resize(opts.MaxIndexSize)
			require.NoError(t, err, msg)
			_, err = s.timeIndex().Resize(opts.MaxIndexSize)
			require.NoError(t, err, msg)
		}
		size := 0
		for _, m := range model {
			size += len(m.data)
		}
		require.Equal(t, int64(size), s.Size(), msg)
	}
}

// Crashes at random points of a run of appends, flushes and seals: after
// recovery every flushed batch is there, byte for byte, the log ends on a
// batch boundary, and what follows the flushed part is a prefix of what was
// appended.
func TestCrash(t *testing.T) {
	seeds := testenv.CrashSeeds(t, 40, 1)
	for sd := range seeds {
		rng := rand.New(rand.NewPCG(sd, 5))
		mem := vfs.NewMem()
		require.NoError(t, mem.MkdirAll("/d", 0o755))
		require.NoError(t, mem.SyncDir("/"))
		opts := Options{IndexIntervalBytes: 100, MaxIndexSize: 1 << 14, Preallocate: rng.IntN(2) == 0, SegmentBytes: 1 << 18}
		s, err := Create(mem, "/d", 0, opts)
		require.NoError(t, err)
		require.NoError(t, mem.SyncDir("/d"))
		var appended []modelBatch
		flushed := 0
		n := 5 + rng.IntN(40)
		var next int64
		for i := range n {
			m := randomBatch(t, rng, next)
			require.NoError(t, s.Append(AppendInfo{m.last, m.maxTS, m.last}, m.data))
			appended = append(appended, m)
			next = m.last + 1
			switch rng.IntN(6) {
			case 0:
				require.NoError(t, s.Flush())
				flushed = i + 1
			case 1:
				if i == n-1 {
					require.NoError(t, s.Seal())
				}
			}
		}
		modes := []vfs.CrashMode{vfs.CrashRandom, vfs.CrashRandom, vfs.CrashDropAll, vfs.CrashKeepAll}
		after := mem.Crash(modes[sd%4], sd)
		r, err := Open(after, "/d", 0, opts)
		require.NoError(t, err, "seed %d", sd)
		tail, err := r.Recover(nil)
		require.NoError(t, err, "seed %d", sd)
		data, err := vfs.ReadFile(after, "/d/00000000000000000000.log")
		require.NoError(t, err)
		require.Equal(t, tail.Position, int64(len(data)), "seed %d: the log is cut at the valid end", sd)
		var want []byte
		for i, m := range appended {
			if len(want)+len(m.data) > len(data) {
				require.GreaterOrEqual(t, i, flushed, "seed %d: flushed batch %d lost (%v)", sd, i, tail)
				break
			}
			want = append(want, m.data...)
		}
		require.Equal(t, string(want), string(data), "seed %d: the surviving log is a prefix of what was appended (%v)", sd, tail)
		if modes[sd%4] == vfs.CrashKeepAll {
			require.Len(t, want, int(s.Size()), "seed %d: nothing is lost without a power cut", sd)
		}
		require.NoError(t, r.Close())
	}
}
