package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seglog/seglog/logfile"
	"github.com/seglog/seglog/tablet"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/segment"
	"github.com/seglog/seglog/vfs"
)

// tabletDir writes a tablet of n one-record batches (leader epoch 4) in
// data directory d, as a crash would leave it: no marker, no checkpoint,
// and the first 30 bytes of one more batch at the end. It returns the size
// of the whole batches.
func tabletDir(t *testing.T, d string, n int) int64 {
	dir := filepath.Join(d, "events-3")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, checkpoint.WriteMetaProperties(nil, filepath.Join(d, checkpoint.MetaPropertiesFile),
		checkpoint.MetaProperties{Version: 1, ClusterID: "test", NodeID: 0}))
	seg, err := segment.Create(vfs.OS, dir, 0, segment.Options{})
	require.NoError(t, err)
	for i := range n {
		require.NoError(t, seg.Append(segment.AppendInfo{LargestOffset: int64(i), LargestTimestamp: 1_700_000_000_000 + int64(i),
			ShallowOffsetOfMaxTimestamp: int64(i)}, oneRecordBatch(t, int64(i))))
	}
	size := seg.Size()
	require.NoError(t, seg.Close())
	f, err := os.OpenFile(filepath.Join(dir, logfile.Filename(0, logfile.Log)), os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.Write(oneRecordBatch(t, int64(n))[:30])
	require.NoError(t, err)
	require.NoError(t, f.Close())
	return size
}

func oneRecordBatch(t *testing.T, offset int64) []byte {
	b := record.NewBuilder(record.None)
	b.SetBaseOffset(offset)
	b.SetPartitionLeaderEpoch(4)
	require.NoError(t, b.Append(record.Record{Timestamp: 1_700_000_000_000 + offset, Value: []byte(fmt.Sprint(offset))}))
	batch, err := b.Build()
	require.NoError(t, err)
	return batch.Bytes()
}

func TestRecoverCommand(t *testing.T) {
	d := t.TempDir()
	size := tabletDir(t, d, 10)
	code, out, errOut := runSeglog(t, "recover", "--data-dir", d)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "after an unclean shutdown: 1 tablet(s)")
	require.Contains(t, out, "events-3: log start 0, log end 10, recovery point 0, 1 segment(s), 0 producer(s)")
	require.Contains(t, out, fmt.Sprintf("00000000000000000000.log: truncated (30 bytes): torn tail at position %d", size))
	require.Contains(t, out, "Closed cleanly")
	info, err := os.Stat(filepath.Join(d, "events-3", logfile.Filename(0, logfile.Log)))
	require.NoError(t, err)
	require.Equal(t, size, info.Size())

	// The second run finds a clean shutdown and changes nothing.
	code, out, errOut = runSeglog(t, "recover", "--data-dir", d, "--json")
	require.Equal(t, 0, code, errOut)
	var rep recoverReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.True(t, rep.CleanShutdown)
	require.Zero(t, rep.RecoveredBytes)
	require.Len(t, rep.Tablets, 1)
	require.Equal(t, tabletSummary{Tablet: "events-3", LogEndOffset: 10, RecoveryPoint: 10, Segments: 1,
		Changes: []changeJSON{}}, rep.Tablets[0])

	// The files recover wrote, read back by dump.
	code, out, errOut = runSeglog(t, "dump",
		filepath.Join(d, checkpoint.RecoveryPointFile), filepath.Join(d, checkpoint.LogStartOffsetFile),
		filepath.Join(d, checkpoint.CleanShutdownFile), filepath.Join(d, "events-3", checkpoint.LeaderEpochFile))
	require.Equal(t, 0, code, errOut)
	require.Equal(t, strings.Join([]string{
		"Dumping " + filepath.Join(d, checkpoint.RecoveryPointFile),
		"topic: events partition: 3 offset: 10",
		"Dumping " + filepath.Join(d, checkpoint.LogStartOffsetFile),
		"topic: events partition: 3 offset: 0",
		"Dumping " + filepath.Join(d, checkpoint.CleanShutdownFile),
		"version: 0",
		"brokerEpoch: 0",
		"Dumping " + filepath.Join(d, "events-3", checkpoint.LeaderEpochFile),
		"epoch: 4 startOffset: 0",
	}, "\n")+"\n", out)
}

func TestRecoverCommandFails(t *testing.T) {
	code, _, errOut := runSeglog(t, "recover")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "--data-dir is required")

	// A batch whose offset does not fit its segment (one Kafka would
	// split) cannot be loaded: the error names the file, and nothing is
	// marked clean.
	d := t.TempDir()
	tabletDir(t, d, 3)
	log := filepath.Join(d, "events-3", logfile.Filename(0, logfile.Log))
	data, err := os.ReadFile(log)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(log, append(data[:len(data)-30], oneRecordBatch(t, 1<<40)...), 0o644))
	code, _, errOut = runSeglog(t, "recover", "--data-dir", d)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "00000000000000000000.log")
	require.Contains(t, errOut, "must be split")
	_, err = os.Stat(filepath.Join(d, checkpoint.CleanShutdownFile))
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestDumpCheckpointFiles(t *testing.T) {
	d := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(d, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
		return p
	}
	meta := write(checkpoint.MetaPropertiesFile, "#\n#Mon Nov 30 10:00:00 UTC 2026\nnode.id=1\nversion=1\ncluster.id=abc\n")
	pm := write(checkpoint.PartitionMetadataFile, "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ\n")
	offsets := write(checkpoint.ReplicationOffsetFile, "0\n2\nb 1 7\na 0 5\n")
	code, out, errOut := runSeglog(t, "dump", "--json", meta, pm, offsets)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, strings.Join([]string{
		`{"kind":"property","key":"cluster.id","value":"abc"}`,
		`{"kind":"property","key":"node.id","value":"1"}`,
		`{"kind":"property","key":"version","value":"1"}`,
		`{"kind":"property","key":"version","value":"0"}`,
		`{"kind":"property","key":"topic_id","value":"AAAAAAAAAAAAAAAAAAAAAQ"}`,
		`{"kind":"offset","topic":"a","partition":0,"offset":5}`,
		`{"kind":"offset","topic":"b","partition":1,"offset":7}`,
	}, "\n")+"\n", out)

	// Malformed files are problems at the byte where they go wrong.
	epochs := write(checkpoint.LeaderEpochFile, "0\n2\n1 0\nx 5\n")
	marker := write(checkpoint.CleanShutdownFile, `{"version":3,"brokerEpoch":1}`)
	code, out, _ = runSeglog(t, "dump", epochs, marker)
	require.Equal(t, 1, code)
	require.Contains(t, out, `error at position 8: line 4: "x 5" is not epoch, start offset`)
	require.Contains(t, out, "error: version 3 is not 0")
}

// The recovery progress bar is drawn from the engine's callback: its
// description, then cleared when done reaches the total.
func TestBarProgress(t *testing.T) {
	var buf strings.Builder
	p := barProgress(&buf, "recovering data")
	p(10, 100)
	p(100, 100)
	require.Contains(t, buf.String(), "recovering data")
	require.True(t, strings.HasSuffix(buf.String(), "\r"), "the bar is cleared when recovery ends: %q", buf.String())

	var notTerm strings.Builder
	require.Nil(t, recoveryProgress(&notTerm, "data"), "no bar where stderr is not a terminal")
}

// recover honours each tablet's config (its index size), and the
// checkpoints it writes at the close are what it loaded: the high watermark
// of a tail a crash tore off is written back at the log end, so verify
// passes after it.
func TestRecoverHonoursConfigAndClampsCheckpoints(t *testing.T) {
	d := filepath.Join(t.TempDir(), "data")
	code, _, errOut := runWithStdin(t, lines(100), "produce", "--data-dir", d, "--topic", "t", "--batch-records", "5",
		"--config", "segment.index.bytes=65536")
	require.Equal(t, 0, code, errOut)
	// A crash: the marker gone, the recovery point at 50, and the last of
	// the log torn off mid-batch (below the high watermark of 100).
	require.NoError(t, os.Remove(filepath.Join(d, checkpoint.CleanShutdownFile)))
	tp := checkpoint.TopicPartition{Topic: "t"}
	require.NoError(t, checkpoint.WriteOffsets(nil, filepath.Join(d, checkpoint.RecoveryPointFile), checkpoint.Offsets{tp: 50}))
	hw, err := checkpoint.ReadOffsets(nil, filepath.Join(d, checkpoint.ReplicationOffsetFile))
	require.NoError(t, err)
	require.Equal(t, int64(100), hw[tp])
	log := filepath.Join(d, "t-0", logfile.Filename(0, logfile.Log))
	info, err := os.Stat(log)
	require.NoError(t, err)
	require.NoError(t, os.Truncate(log, info.Size()-200))

	code, out, errOut := runSeglog(t, "recover", "--data-dir", d)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "truncated")
	idx, err := os.Stat(filepath.Join(d, "t-0", logfile.Filename(0, logfile.Index)))
	require.NoError(t, err)
	require.LessOrEqual(t, idx.Size(), int64(65536), "the tablet's segment.index.bytes, not the 10 MiB default")

	end := func(name string) int64 {
		o, err := checkpoint.ReadOffsets(nil, filepath.Join(d, name))
		require.NoError(t, err)
		return o[tp]
	}
	code, out, _ = runSeglog(t, "offsets", "--data-dir", d, "--topic", "t")
	require.Equal(t, 0, code)
	var o tablet.Offsets
	require.NoError(t, json.Unmarshal([]byte(out), &o))
	require.Less(t, o.LogEndOffset, int64(100))
	require.Equal(t, o.LogEndOffset, end(checkpoint.ReplicationOffsetFile), "the high watermark written back at the log end")
	require.Equal(t, o.LogEndOffset, end(checkpoint.RecoveryPointFile))
	code, out, errOut = runSeglog(t, "verify", "--data-dir", d)
	require.Equal(t, 0, code, "%s%s", out, errOut)
}
