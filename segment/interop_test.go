package segment

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/seglog/seglog/logfile"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/vfs"
)

// franzSegment puts the segment franz-go's encoder wrote
// (record/testdata/franz.log) in a temporary directory, with the indexes a
// broker keeps for it, encoded independently by cmd/seglog's golden test.
func franzSegment(t *testing.T) string {
	dir := t.TempDir()
	copyFile := func(from, to string) {
		data, err := os.ReadFile(from)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, to), data, 0o644))
	}
	copyFile(filepath.Join("..", "record", "testdata", "franz.log"), logfile.Filename(0, logfile.Log))
	for _, k := range []logfile.Kind{logfile.Index, logfile.TimeIndex, logfile.TxnIndex} {
		copyFile(filepath.Join("..", "cmd", "seglog", "testdata", logfile.Filename(0, k)), logfile.Filename(0, k))
	}
	return dir
}

// A segment written by another implementation reads back through segment:
// every offset, every timestamp, the aborted transaction, and indexes that
// verify against the log.
func TestReadsAnotherImplementationsSegment(t *testing.T) {
	dir := franzSegment(t)
	s, err := Open(vfs.OS, dir, 0, Options{ReadOnly: true})
	require.NoError(t, err)
	defer s.Close()
	data, err := os.ReadFile(filepath.Join(dir, logfile.Filename(0, logfile.Log)))
	require.NoError(t, err)
	require.Equal(t, int64(len(data)), s.Size())
	next, err := s.ReadNextOffset()
	require.NoError(t, err)
	require.Equal(t, int64(18), next)

	for off := int64(0); off < 18; off++ {
		r, ok, err := s.Read(off, 1, s.Size(), true)
		require.NoError(t, err)
		require.True(t, ok)
		got, err := r.Records.AppendTo(nil)
		require.NoError(t, err)
		b, rest, err := record.ParseBatch(got)
		require.NoError(t, err)
		require.Empty(t, rest)
		require.NoError(t, b.Verify())
		require.LessOrEqual(t, b.BaseOffset(), off)
		require.GreaterOrEqual(t, b.LastOffset(), off)
		require.True(t, bytes.Contains(data, got))
	}
	got, ok, err := s.FindOffsetByTimestamp(1_700_000_002_001, 0)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, TimestampOffset{Timestamp: 1_700_000_002_002, Offset: 8, LeaderEpoch: 5}, got)
	got, ok, err = s.FindOffsetByTimestamp(1_700_000_009_000, 0)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int64(15), got.Offset, "the LogAppendTime batch")

	aborted, err := s.txnIndex().CollectAbortedTxns(0, 100, -1)
	require.NoError(t, err)
	require.Len(t, aborted.Txns, 1)
	require.Equal(t, int64(3000), aborted.Txns[0].ProducerID)
	for _, k := range []logfile.Kind{logfile.Index, logfile.TimeIndex, logfile.TxnIndex} {
		problems, err := s.VerifyIndex(k)
		require.NoError(t, err)
		require.Empty(t, problems, "%v", k)
	}
	tail, err := s.ScanLog(s.Size(), nil)
	require.NoError(t, err)
	require.Equal(t, CleanEnd, tail.Kind)
}

// Recovery of that segment rebuilds indexes equal to the independent ones
// (with the same interval: every batch after the first).
func TestRecoveryRebuildsTheSameIndexes(t *testing.T) {
	dir := franzSegment(t)
	want := map[logfile.Kind][]byte{}
	for _, k := range []logfile.Kind{logfile.Index, logfile.TimeIndex} {
		data, err := os.ReadFile(filepath.Join(dir, logfile.Filename(0, k)))
		require.NoError(t, err)
		want[k] = data
		require.NoError(t, os.Remove(filepath.Join(dir, logfile.Filename(0, k))))
	}
	s, err := Open(vfs.OS, dir, 0, Options{IndexIntervalBytes: IndexEveryAppend})
	require.NoError(t, err)
	tail, err := s.Recover(nil)
	require.NoError(t, err)
	require.Equal(t, CleanEnd, tail.Kind)
	require.NoError(t, s.Close())
	for _, k := range []logfile.Kind{logfile.Index, logfile.TimeIndex} {
		got, err := os.ReadFile(filepath.Join(dir, logfile.Filename(0, k)))
		require.NoError(t, err)
		require.Equal(t, want[k], got, "%v", k)
	}
}
