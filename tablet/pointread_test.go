package tablet

import (
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/vfs"
)

// countingFS counts the bytes read from .log files.
type countingFS struct {
	vfs.FS
	read atomic.Int64
}

func (c *countingFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := c.FS.OpenFile(name, flag, perm)
	if err != nil || !strings.HasSuffix(name, ".log") {
		return f, err
	}
	return &countingFile{File: f, c: c}, nil
}

type countingFile struct {
	vfs.File
	c *countingFS
}

func (f *countingFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	f.c.read.Add(int64(n))
	return n, err
}

// valuedBatch builds a batch of n records of size bytes, record i's value
// "<tag>-<i>" padded.
func valuedBatch(t *testing.T, n, size int, tag string) []byte {
	b := record.NewBuilder(record.None)
	for i := range n {
		v := make([]byte, size)
		copy(v, fmt.Sprintf("%s-%d", tag, i))
		require.NoError(t, b.Append(record.Record{Timestamp: int64(i), Key: fmt.Appendf(nil, "k%d", i), Value: v}))
	}
	out, err := b.Build()
	require.NoError(t, err)
	return out.Bytes()
}

func pointRead(t *testing.T, tab *Tablet, off int64) (record.Record, int64) {
	var got record.Record
	n := int64(0)
	require.NoError(t, tab.Records(off, ReadLogEnd, func(b record.Batch, r *record.Record) bool {
		got = *r
		got.Value = append([]byte(nil), r.Value...)
		n = int64(b.NumRecords())
		return false
	}))
	return got, n
}

// A record read again from a large batch already checked whole reads its
// own bytes, not the batch's; what it returns is the same.
func TestPointReadFromAVerifiedBatch(t *testing.T) {
	c := &countingFS{FS: vfs.NewMem()}
	e := newEnv(t, c, "/data")
	tab := e.create(DefaultConfig())
	for b := range 4 {
		_, err := tab.Append(valuedBatch(t, 100, 1024, fmt.Sprint("b", b)), AppendOptions{})
		require.NoError(t, err)
	}
	seen := map[int64]bool{}
	for _, off := range []int64{0, 57, 99, 100, 250, 399, 201} {
		want := fmt.Sprintf("b%d-%d", off/100, off%100)
		before := c.read.Load()
		r, _ := pointRead(t, tab, off)
		first := c.read.Load() - before
		require.Equal(t, off, r.Offset)
		require.True(t, strings.HasPrefix(string(r.Value), want+"\x00"), "offset %d: %q", off, r.Value[:16])
		if !seen[off/100] {
			require.Greater(t, first, int64(100*1024), "the first read of a batch reads and checks it whole")
		}
		seen[off/100] = true

		before = c.read.Load()
		r, n := pointRead(t, tab, off)
		again := c.read.Load() - before
		require.Equal(t, off, r.Offset)
		require.True(t, strings.HasPrefix(string(r.Value), want+"\x00"))
		require.Equal(t, int64(100), n, "the batch's header is handed out")
		// The record and the lookup's read: a header, or a scanner's
		// window in the first and last batches, which the index brackets
		// on one side only.
		require.Less(t, again, int64(10<<10), "offset %d read again: %d bytes", off, again)
		if off >= 100 && off < 300 {
			require.Less(t, again, int64(2<<10), "offset %d read again: %d bytes", off, again)
		}
	}
	// Going on from a point read serves the rest of the batch, then the
	// next batches.
	got := offsetsOf(readAll(t, tab, 150, ReadLogEnd))
	require.Equal(t, seq(150, 400), got)
}

// A truncation forgets what was checked: the bytes at a batch's position
// may be another batch's since — here one of the same size whose second
// record starts elsewhere.
func TestPointReadAfterATruncation(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/data")
	tab := e.create(DefaultConfig())
	for b := range 3 {
		_, err := tab.Append(valuedBatch(t, 100, 1024, fmt.Sprint("old", b)), AppendOptions{})
		require.NoError(t, err)
	}
	for range 2 { // the second from the table
		r, _ := pointRead(t, tab, 101)
		require.True(t, strings.HasPrefix(string(r.Value), "old1-1\x00"))
	}

	require.NoError(t, tab.TruncateTo(100))
	b := record.NewBuilder(record.None)
	for i := range 100 {
		size := 1024 + map[int]int{0: 10, 1: -10}[i]
		v := make([]byte, size)
		copy(v, fmt.Sprintf("new-%d", i))
		require.NoError(t, b.Append(record.Record{Timestamp: int64(i), Key: fmt.Appendf(nil, "k%d", i), Value: v}))
	}
	nb, err := b.Build()
	require.NoError(t, err)
	old := valuedBatch(t, 100, 1024, "old1")
	require.Len(t, nb.Bytes(), len(old), "the new batch takes the old one's place and size")
	_, err = tab.Append(nb.Bytes(), AppendOptions{})
	require.NoError(t, err)
	r, _ := pointRead(t, tab, 101)
	require.True(t, strings.HasPrefix(string(r.Value), "new-1\x00"), "got %q", r.Value[:16])
	require.Len(t, r.Value, 1014)
}

// A point read from a table skips what a consumer does not see: the
// aborted transaction's records for ReadCommitted.
func TestPointReadSkipsControlAndAborted(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/data")
	tab := e.create(DefaultConfig())
	big := func(pid int64, seq int32) []byte {
		b := record.NewBuilder(record.None)
		b.SetProducer(pid, 0, seq)
		b.SetTransactional(true)
		for i := range 100 {
			require.NoError(t, b.Append(record.Record{Timestamp: 1, Value: fmt.Appendf(make([]byte, 0, 1024), "p%d-%d%s", pid, i, make([]byte, 1000))}))
		}
		out, err := b.Build()
		require.NoError(t, err)
		return out.Bytes()
	}
	_, err := tab.Append(big(7, 0), AppendOptions{})
	require.NoError(t, err)
	_, err = tab.Append(marker(t, 7, 0, true, 2), AppendOptions{Origin: record.OriginCoordinator})
	require.NoError(t, err)
	_, err = tab.Append(valuedBatch(t, 100, 1024, "after"), AppendOptions{})
	require.NoError(t, err)
	for range 2 { // the second time from the table
		r, _ := pointRead(t, tab, 30)
		require.Equal(t, int64(30), r.Offset, "ReadLogEnd sees the aborted records")
		var first int64 = -1
		require.NoError(t, tab.Records(30, ReadCommitted, func(_ record.Batch, r *record.Record) bool { first = r.Offset; return false }))
		require.Equal(t, int64(101), first, "ReadCommitted skips the aborted batch and the marker")
	}
}

// A batch whose last records were cleaned away keeps its last offset: a
// point read from an offset past its last record, but inside the batch,
// finds nothing in it and goes on with the next batch.
func TestPointReadPastACleanedBatchsLastRecord(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/data")
	tab := e.create(DefaultConfig())
	full := valuedBatch(t, 100, 1024, "c")
	parsed, _, err := record.ParseBatch(full)
	require.NoError(t, err)
	b := record.NewBuilder(record.None)
	var it record.Iter
	it.Reset(parsed, record.DefaultMaxUncompressed)
	for it.Next() && it.Record().OffsetDelta < 60 { // records 60–99 cleaned away
		require.NoError(t, b.AppendRaw(it.Record()))
	}
	h := parsed.Header()
	h.NumRecords, h.PartitionLeaderEpoch = 60, 0
	b.SetHeader(h) // the last offset delta stays 99
	cleaned, err := b.Build()
	require.NoError(t, err)
	require.Equal(t, int64(99), cleaned.LastOffset())
	_, err = tab.Append(cleaned.Bytes(), AppendOptions{Origin: record.OriginReplication})
	require.NoError(t, err)
	next := valuedBatch(t, 100, 1024, "n")
	np, _, err := record.ParseBatch(next)
	require.NoError(t, err)
	np.SetBaseOffset(100)
	np.SetPartitionLeaderEpoch(0)
	_, err = tab.Append(next, AppendOptions{Origin: record.OriginReplication})
	require.NoError(t, err)
	for range 2 { // the second from the table
		r, _ := pointRead(t, tab, 80)
		require.Equal(t, int64(100), r.Offset, "the next record after the cleaned gap")
		require.True(t, strings.HasPrefix(string(r.Value), "n-0\x00"))
	}
}
