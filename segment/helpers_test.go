package segment

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/vfs"
)

// records is Kafka's LogSegmentTest.records: one uncompressed batch at
// offset, a record per value, every record timestamped offset * 10.
func records(t testing.TB, offset int64, values ...string) []byte {
	t.Helper()
	b := record.NewBuilder(record.None)
	b.SetBaseOffset(offset)
	for _, v := range values {
		require.NoError(t, b.Append(record.Record{Timestamp: offset * 10, Value: []byte(v)}))
	}
	batch, err := b.Build()
	require.NoError(t, err)
	return batch.Bytes()
}

// infoOf describes a batch as the tablet would when appending it.
func infoOf(t testing.TB, data []byte) AppendInfo {
	t.Helper()
	b, _, err := record.ParseBatch(data)
	require.NoError(t, err)
	return AppendInfo{LargestOffset: b.LastOffset(), LargestTimestamp: b.MaxTimestamp(), ShallowOffsetOfMaxTimestamp: b.LastOffset()}
}

// noTimestamp describes a batch appended with NO_TIMESTAMP, as many of
// Kafka's segment tests do.
func noTimestamp(t testing.TB, data []byte) AppendInfo {
	info := infoOf(t, data)
	info.LargestTimestamp, info.ShallowOffsetOfMaxTimestamp = record.NoTimestamp, -1
	return info
}

// fakeClock is a clock the test moves.
type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time             { return c.now }
func (c *fakeClock) sleep(ms int64)             { c.now = c.now.Add(time.Duration(ms) * time.Millisecond) }
func (c *fakeClock) milliseconds() int64        { return c.now.UnixMilli() }
func newClock() *fakeClock                      { return &fakeClock{now: time.UnixMilli(1_700_000_000_000)} }
func withClock(o Options, c *fakeClock) Options { o.Now = c.Now; return o }

func createSegment(t testing.TB, fsys vfs.FS, dir string, base int64, opts Options) *Segment {
	t.Helper()
	require.NoError(t, fsys.MkdirAll(dir, 0o755))
	s, err := Create(fsys, dir, base, opts)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// tempSegment creates a segment on the real filesystem with Kafka's test
// index interval of 10 bytes.
func tempSegment(t testing.TB, base int64) *Segment {
	return createSegment(t, vfs.OS, t.TempDir(), base, Options{IndexIntervalBytes: 10})
}

// batchesOf returns the last offsets of the batches in a read.
func batchesOf(t testing.TB, r ReadResult) []int64 {
	t.Helper()
	data, err := r.Records.AppendTo(nil)
	require.NoError(t, err)
	var out []int64
	for len(data) > 0 {
		b, rest, err := record.ParseBatch(data)
		require.NoError(t, err)
		require.NoError(t, b.Verify())
		out = append(out, b.LastOffset())
		data = rest
	}
	return out
}

// read is Kafka's seg.read(offset, maxSize): no max position bound but the
// segment's size.
func read(t testing.TB, s *Segment, offset int64, maxSize int) (ReadResult, bool) {
	t.Helper()
	r, ok, err := s.Read(offset, maxSize, s.Size(), false)
	require.NoError(t, err)
	return r, ok
}

// logOffsets returns the last offset of every batch in the segment's log.
func logOffsets(t testing.TB, s *Segment) []int64 {
	t.Helper()
	var out []int64
	tail, err := s.ScanLog(s.Size(), func(b record.Batch, _ int64) error {
		out = append(out, b.LastOffset())
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, CleanEnd, tail.Kind, "%v", tail)
	return out
}

func txnAborted(pid, first, last int64) record.AbortedTxn {
	return record.AbortedTxn{ProducerID: pid, FirstOffset: first, LastOffset: last, LastStableOffset: last + 1}
}
