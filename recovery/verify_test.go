package recovery

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/seglog/seglog/logfile"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/segment"
	"github.com/seglog/seglog/vfs"
)

// verifiedDir writes a closed tablet with rolled segments, two leader
// epochs, aborted and committed transactions, and everything a data
// directory holds; it returns the data directory and the tablet's.
func verifiedDir(t *testing.T) (data, dir string) {
	d := dataDir(t)
	l := newTestLog(t, vfs.OS, d, segment.Options{SegmentBytes: 128 * 5, IndexIntervalBytes: 1})
	l.records(5, 10)
	l.epoch = 2
	mixedTransactions(l)
	l.records(20, 10)
	l.closeClean()
	require.NoError(t, checkpoint.WritePartitionMetadata(vfs.OS, filepath.Join(l.dir, checkpoint.PartitionMetadataFile),
		checkpoint.NewTopicID()))
	require.NoError(t, checkpoint.WriteMetaProperties(vfs.OS, filepath.Join(d, checkpoint.MetaPropertiesFile),
		checkpoint.MetaProperties{Version: 1, ClusterID: "c", NodeID: 1}))
	l.checkpoint(checkpoint.LogStartOffsetFile, 0)
	require.Greater(t, len(l.segs), 4)
	return d, l.dir
}

func verify(t *testing.T, d string) *VerifyReport {
	r, err := Verify(vfs.OS, d, VerifyOptions{})
	require.NoError(t, err)
	return r
}

// A leader-epoch entry at the log end, of an epoch above every batch's,
// is what a leader elected there writes before its first batch: not a
// problem (it was reported as one). One inside the log is.
func TestVerifyEpochAtLogEnd(t *testing.T) {
	for _, c := range []struct {
		start int64
		ok    bool
	}{{115, true}, {114, false}} {
		t.Run(fmt.Sprintf("start=%d", c.start), func(t *testing.T) {
			d, dir := verifiedDir(t)
			path := filepath.Join(dir, checkpoint.LeaderEpochFile)
			es, err := checkpoint.ReadEpochs(vfs.OS, path)
			require.NoError(t, err)
			es = append(es, checkpoint.EpochEntry{Epoch: es[len(es)-1].Epoch + 3, StartOffset: c.start})
			require.NoError(t, checkpoint.WriteEpochs(vfs.OS, path, es))
			r := verify(t, d)
			require.Equal(t, c.ok, r.OK(), "%+v", r)
		})
	}
}

func TestVerifyCleanDirectory(t *testing.T) {
	d, dir := verifiedDir(t)
	r := verify(t, d)
	require.True(t, r.OK(), "%+v", r)
	require.Len(t, r.Tablets, 1)
	tr := r.Tablets[0]
	require.Equal(t, int64(115), tr.LogEndOffset)
	require.Equal(t, int64(115), tr.Records)
	require.Greater(t, tr.Segments, 4)
	names, _ := os.ReadDir(dir)
	var logBytes int64
	for _, n := range names {
		if strings.HasSuffix(n.Name(), ".log") {
			info, _ := n.Info()
			logBytes += info.Size()
		}
	}
	require.Equal(t, logBytes, r.BytesRead, "every .log read once, nothing else counted")
}

func TestVerifyAfterRecovery(t *testing.T) {
	d, _ := verifiedDir(t)
	require.NoError(t, os.Remove(filepath.Join(d, checkpoint.CleanShutdownFile)))
	r, err := Load(vfs.OS, d, Options{Segment: segment.Options{SegmentBytes: 128 * 5, IndexIntervalBytes: 1}})
	require.NoError(t, err)
	require.NoError(t, r.CloseClean(r.BrokerEpoch))
	v := verify(t, d)
	require.True(t, v.OK(), "%+v", v)
}

// flip inverts one bit of a file at off (from the end when negative).
func flip(t *testing.T, path string, off int64) {
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	if off < 0 {
		off += int64(len(data))
	}
	data[off] ^= 0x10
	require.NoError(t, os.WriteFile(path, data, 0o644))
}

func truncateBy(t *testing.T, path string, n int64) {
	info, err := os.Stat(path)
	require.NoError(t, err)
	require.NoError(t, os.Truncate(path, info.Size()-n))
}

func appendZeros(t *testing.T, path string, n int) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.Write(make([]byte, n))
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

func remove(t *testing.T, path string) { require.NoError(t, os.Remove(path)) }

func copyFile(t *testing.T, from, to string) {
	data, err := os.ReadFile(from)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(to, data, 0o644))
}

func writeOffsets(t *testing.T, path string, o int64) {
	require.NoError(t, checkpoint.WriteOffsets(vfs.OS, path, checkpoint.Offsets{tp: o}))
}

func TestVerifyFindsEveryDamage(t *testing.T) {
	seg := func(base int64, k logfile.Kind) string { return logfile.Filename(base, k) }
	cases := []struct {
		name   string
		damage func(t *testing.T, data, dir string)
		file   string // the base name of the file the problem names
		offset int64  // its byte position, or -1
		reason string // a part of the reason
	}{
		{"bit flip in a sealed segment", func(t *testing.T, _, dir string) {
			flip(t, filepath.Join(dir, seg(19, logfile.Log)), 91+70)
		}, seg(19, logfile.Log), 91 + 17, "crc mismatch"},
		{"a batch length past the end of a sealed segment", func(t *testing.T, _, dir string) {
			flip(t, filepath.Join(dir, seg(19, logfile.Log)), 91+9)
		}, seg(19, logfile.Log), 91, "torn"},
		{"truncated active segment", func(t *testing.T, _, dir string) {
			truncateBy(t, filepath.Join(dir, seg(95, logfile.Log)), 7)
		}, seg(95, logfile.Log), 0, "torn"},
		{"zeroes after the active segment", func(t *testing.T, _, dir string) {
			appendZeros(t, filepath.Join(dir, seg(95, logfile.Log)), 4096)
		}, seg(95, logfile.Log), 476, "zero"},
		{"offset index entry", func(t *testing.T, _, dir string) {
			flip(t, filepath.Join(dir, seg(19, logfile.Index)), 6)
		}, seg(19, logfile.Index), 0, "position"},
		{"time index entry", func(t *testing.T, _, dir string) {
			flip(t, filepath.Join(dir, seg(19, logfile.TimeIndex)), 3)
		}, seg(19, logfile.TimeIndex), 0, "timestamp"},
		{"untrimmed sealed index", func(t *testing.T, _, dir string) {
			appendZeros(t, filepath.Join(dir, seg(19, logfile.Index)), 80)
		}, seg(19, logfile.Index), 32 + 80 - 8, "untrimmed"},
		{"txnindex entry", func(t *testing.T, _, dir string) {
			flip(t, filepath.Join(dir, seg(19, logfile.TxnIndex)), 10)
		}, seg(19, logfile.TxnIndex), -1, "the markers in"},
		{"txnindex missing", func(t *testing.T, _, dir string) {
			remove(t, filepath.Join(dir, seg(19, logfile.TxnIndex)))
		}, seg(19, logfile.TxnIndex), -1, "markers"},
		{"offset index missing", func(t *testing.T, _, dir string) {
			remove(t, filepath.Join(dir, seg(41, logfile.Index)))
		}, seg(41, logfile.Index), -1, "missing"},
		{"snapshot bit flip", func(t *testing.T, _, dir string) {
			flip(t, filepath.Join(dir, seg(64, logfile.Snapshot)), 30)
		}, seg(64, logfile.Snapshot), 0, "crc mismatch"},
		{"snapshot of another state", func(t *testing.T, _, dir string) {
			copyFile(t, filepath.Join(dir, seg(19, logfile.Snapshot)), filepath.Join(dir, seg(64, logfile.Snapshot)))
		}, seg(64, logfile.Snapshot), -1, "the replay"},
		{"snapshot inside a batch", func(t *testing.T, _, dir string) {
			copyFile(t, filepath.Join(dir, seg(64, logfile.Snapshot)), filepath.Join(dir, seg(70, logfile.Snapshot)))
		}, seg(70, logfile.Snapshot), -1, "no batch boundary"},
		{"snapshot of another offset", func(t *testing.T, _, dir string) {
			copyFile(t, filepath.Join(dir, seg(64, logfile.Snapshot)), filepath.Join(dir, seg(79, logfile.Snapshot)))
		}, seg(79, logfile.Snapshot), -1, "the replay"},
		{"snapshot past the end", func(t *testing.T, _, dir string) {
			copyFile(t, filepath.Join(dir, seg(115, logfile.Snapshot)), filepath.Join(dir, seg(200, logfile.Snapshot)))
		}, seg(200, logfile.Snapshot), -1, "past the log end"},
		{"overlapping segments", func(t *testing.T, _, dir string) {
			for _, k := range []logfile.Kind{logfile.Log, logfile.Index, logfile.TimeIndex, logfile.TxnIndex} {
				copyFile(t, filepath.Join(dir, seg(64, k)), filepath.Join(dir, seg(60, k)))
			}
		}, seg(64, logfile.Log), -1, "inside the segment before"},
		{"recovery point past the end", func(t *testing.T, data, _ string) {
			writeOffsets(t, filepath.Join(data, checkpoint.RecoveryPointFile), 500)
		}, checkpoint.RecoveryPointFile, -1, "past the log end"},
		{"recovery point short of the end after a clean close", func(t *testing.T, data, _ string) {
			writeOffsets(t, filepath.Join(data, checkpoint.RecoveryPointFile), 90)
		}, checkpoint.RecoveryPointFile, -1, "closed cleanly"},
		{"log start past the end", func(t *testing.T, data, _ string) {
			writeOffsets(t, filepath.Join(data, checkpoint.LogStartOffsetFile), 116)
		}, checkpoint.LogStartOffsetFile, -1, "past the log end"},
		{"checkpoint bit flip", func(t *testing.T, data, _ string) {
			flip(t, filepath.Join(data, checkpoint.RecoveryPointFile), 0)
		}, checkpoint.RecoveryPointFile, 0, "version"},
		{"checkpoint for a missing tablet", func(t *testing.T, data, _ string) {
			require.NoError(t, checkpoint.WriteOffsets(vfs.OS, filepath.Join(data, checkpoint.RecoveryPointFile),
				checkpoint.Offsets{tp: 115, {Topic: "gone", Partition: 3}: 7}))
		}, checkpoint.RecoveryPointFile, -1, "gone-3"},
		{"partition.metadata damaged", func(t *testing.T, _, dir string) {
			flip(t, filepath.Join(dir, checkpoint.PartitionMetadataFile), 2)
		}, checkpoint.PartitionMetadataFile, 0, "version"},
		{"partition.metadata missing", func(t *testing.T, _, dir string) {
			remove(t, filepath.Join(dir, checkpoint.PartitionMetadataFile))
		}, checkpoint.PartitionMetadataFile, -1, "missing"},
		{"meta.properties damaged", func(t *testing.T, data, _ string) {
			flip(t, filepath.Join(data, checkpoint.MetaPropertiesFile), -3)
		}, checkpoint.MetaPropertiesFile, -1, "version"},
		{"leader epochs wrong", func(t *testing.T, _, dir string) {
			require.NoError(t, checkpoint.WriteEpochs(vfs.OS, filepath.Join(dir, checkpoint.LeaderEpochFile),
				[]checkpoint.EpochEntry{{Epoch: 0, StartOffset: 0}, {Epoch: 2, StartOffset: 6}}))
		}, checkpoint.LeaderEpochFile, -1, "carry"},
		{"leftover .deleted", func(t *testing.T, _, dir string) {
			copyFile(t, filepath.Join(dir, seg(19, logfile.Log)), filepath.Join(dir, seg(19, logfile.Log)+".deleted"))
		}, seg(19, logfile.Log) + ".deleted", -1, "deletion"},
		{"leftover .cleaned", func(t *testing.T, _, dir string) {
			copyFile(t, filepath.Join(dir, seg(19, logfile.Log)), filepath.Join(dir, seg(19, logfile.Log)+".cleaned"))
		}, seg(19, logfile.Log) + ".cleaned", -1, "replacement"},
		{"leftover .swap", func(t *testing.T, _, dir string) {
			copyFile(t, filepath.Join(dir, seg(19, logfile.Index)), filepath.Join(dir, seg(19, logfile.Index)+".swap"))
		}, seg(19, logfile.Index) + ".swap", -1, "replacement"},
		{"leftover .tmp in the tablet", func(t *testing.T, _, dir string) {
			copyFile(t, filepath.Join(dir, checkpoint.LeaderEpochFile), filepath.Join(dir, checkpoint.LeaderEpochFile+".tmp"))
		}, checkpoint.LeaderEpochFile + ".tmp", -1, "interrupted"},
		{"leftover .tmp in the data directory", func(t *testing.T, data, _ string) {
			copyFile(t, filepath.Join(data, checkpoint.RecoveryPointFile), filepath.Join(data, checkpoint.RecoveryPointFile+".tmp"))
		}, checkpoint.RecoveryPointFile + ".tmp", -1, "interrupted"},
		{"orphan index", func(t *testing.T, _, dir string) {
			copyFile(t, filepath.Join(dir, seg(19, logfile.Index)), filepath.Join(dir, seg(300, logfile.Index)))
		}, seg(300, logfile.Index), -1, "without its .log"},
		{"unknown file", func(t *testing.T, _, dir string) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o644))
		}, "notes.txt", -1, "Kafka does not write"},
		{"unknown directory", func(t *testing.T, data, _ string) {
			require.NoError(t, os.Mkdir(filepath.Join(data, "lost+found"), 0o755))
		}, "lost+found", -1, "not a tablet"},
		{"deleted tablet left over", func(t *testing.T, data, _ string) {
			require.NoError(t, os.Mkdir(filepath.Join(data, "old-0.0123abcd-delete"), 0o755))
		}, "old-0.0123abcd-delete", -1, "delete"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, dir := verifiedDir(t)
			c.damage(t, d, dir)
			r := verify(t, d)
			require.False(t, r.OK())
			all := append([]Problem{}, r.Problems...)
			for _, tr := range r.Tablets {
				all = append(all, tr.Problems...)
			}
			for _, p := range all {
				t.Logf("%s", p)
			}
			require.True(t, slices.ContainsFunc(all, func(p Problem) bool {
				return filepath.Base(p.File) == c.file && p.Offset == c.offset && strings.Contains(p.Reason, c.reason)
			}), "want a problem in %s at %d with %q", c.file, c.offset, c.reason)
		})
	}
}

// A missing segment leaves a gap: a note, not a problem, since a power cut
// can leave one (a segment's unacknowledged tail lost, the next segment's
// creation kept).
// A gap below the recovery point — everywhere, in a directory closed
// cleanly — is damage: those offsets had been made durable. Above it, it is
// what a power cut can leave: a note.
func TestVerifyGaps(t *testing.T) {
	d, dir := verifiedDir(t)
	// The snapshots past the gap no longer match a replay that lacks the
	// missing segment's transactions; they go with it here.
	for _, base := range []int64{64, 90, 95, 115} {
		_ = os.Remove(filepath.Join(dir, logfile.Filename(base, logfile.Snapshot)))
	}
	for _, k := range []logfile.Kind{logfile.Log, logfile.Index, logfile.TimeIndex, logfile.TxnIndex} {
		_ = os.Remove(filepath.Join(dir, logfile.Filename(64, k)))
	}
	r := verify(t, d)
	require.Len(t, r.Tablets, 1)
	require.False(t, r.OK())
	var gap *Problem
	for i, p := range r.Tablets[0].Problems {
		if strings.Contains(p.Reason, "offsets 64 to 89 are missing between segments") {
			gap = &r.Tablets[0].Problems[i]
		}
	}
	require.NotNil(t, gap, "%+v", r.Tablets[0].Problems)
	require.Contains(t, gap.Reason, "below the log end of a directory closed cleanly")
	require.Equal(t, logfile.Filename(90, logfile.Log), filepath.Base(gap.File))
	require.Empty(t, r.Tablets[0].Notes)

	// After a crash with the recovery point below the gap, it is a note.
	require.NoError(t, os.Remove(filepath.Join(d, checkpoint.CleanShutdownFile)))
	require.NoError(t, checkpoint.WriteOffsets(nil, filepath.Join(d, checkpoint.RecoveryPointFile), checkpoint.Offsets{tp: 60}))
	r = verify(t, d)
	require.Len(t, r.Tablets[0].Notes, 1)
	require.Contains(t, r.Tablets[0].Notes[0].Reason, "offsets 64 to 89 are missing between segments (unacknowledged records lost in a power cut")
	for _, p := range r.Tablets[0].Problems {
		require.NotContains(t, p.Reason, "missing between segments")
	}
}

func TestVerifyOneTablet(t *testing.T) {
	d, _ := verifiedDir(t)
	require.NoError(t, os.Mkdir(filepath.Join(d, "other-1"), 0o755)) // a tablet with no segment
	r := verify(t, d)
	require.False(t, r.OK())
	require.Len(t, r.Tablets, 2)
	r, err := Verify(vfs.OS, d, VerifyOptions{Only: &tp})
	require.NoError(t, err)
	require.True(t, r.OK(), "%+v", r)
	require.Len(t, r.Tablets, 1)
}
