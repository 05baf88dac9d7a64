package tablet_test

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seglog/seglog/logfile"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/recovery"
	"github.com/seglog/seglog/tablet"
	"github.com/seglog/seglog/tablet/tablettest"
	"github.com/seglog/seglog/vfs"
)

// golden is a data directory written once, cleanly closed, that every
// corruption case damages a copy of.
type golden struct {
	dir     string // the data directory
	records map[int64]string
	bases   []int64 // segment base offsets
	// positions and ends of the batches of each segment, by base offset
	batches map[int64][]batchAt
	leo     int64
}

type batchAt struct {
	pos, size   int64
	first, last int64
}

func quietManager() tablet.ManagerOptions {
	return tablet.ManagerOptions{Tablet: tablet.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}}
}

// writeGolden writes the mixed workload over several segments and ends
// with a small plain batch.
func writeGolden(t *testing.T) *golden {
	g := &golden{dir: filepath.Join(t.TempDir(), "data"), records: map[int64]string{}, batches: map[int64][]batchAt{}}
	m, err := tablet.OpenManager(vfs.OS, g.dir, quietManager())
	require.NoError(t, err)
	cfg := tablet.DefaultConfig()
	cfg.SegmentBytes = 16 << 10
	cfg.IndexIntervalBytes = 512
	tab, err := m.Create(crashTP, &cfg)
	require.NoError(t, err)
	clock := int64(1_700_000_000_000)
	now := func() int64 { clock++; return clock }
	w := tablettest.New(tab, 0, 3, now, func(tablettest.Ack) error { return nil })
	for range 60 {
		require.NoError(t, w.Step())
	}
	_, err = tab.AppendRecords([]record.Record{{Timestamp: now(), Key: []byte("last"), Value: []byte("the small last batch")}},
		record.None, tablet.AppendOptions{})
	require.NoError(t, err)
	require.NoError(t, tab.Records(0, tablet.ReadLogEnd, func(_ record.Batch, r *record.Record) bool {
		g.records[r.Offset] = string(r.Key) + "=" + string(r.Value)
		return true
	}))
	g.leo = tab.Offsets().LogEndOffset
	require.NoError(t, m.Close())
	dir := filepath.Join(g.dir, crashTP.DirName())
	names, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, n := range names {
		f, err := logfile.ParseFilename(n.Name())
		if err != nil || f.Kind != logfile.Log || f.Suffix != "" {
			continue
		}
		g.bases = append(g.bases, f.Base)
		data, err := os.ReadFile(filepath.Join(dir, n.Name()))
		require.NoError(t, err)
		for pos := int64(0); pos < int64(len(data)); {
			b, _, err := record.ParseBatch(data[pos:])
			require.NoError(t, err)
			g.batches[f.Base] = append(g.batches[f.Base], batchAt{pos: pos, size: int64(b.Size()), first: b.BaseOffset(), last: b.LastOffset()})
			pos += int64(b.Size())
		}
	}
	require.Greater(t, len(g.bases), 3, "the workload spans segments")
	return g
}

// corruptionCase damages a fresh copy of the golden directory.
type corruptionCase struct {
	name    string
	unclean bool // the clean-shutdown marker removed too: recovery runs
	damage  func(t *testing.T, c *caseDir)
	// refuse, if set, is the base name of the file OpenManager's
	// CorruptionError must name (at refuseAt, or anywhere if -2).
	refuse   string
	refuseAt int64
	// intact: every record below it must read back as written (the
	// damage point); records at or above it may be gone.
	intact int64
	// readErr: reading from intact on fails with a CorruptionError in
	// this file (damage a clean load does not look at).
	readErr string
	// committedErr: a read-committed read fails with a CorruptionError in
	// this file (a transaction index that cannot be right).
	committedErr string
	// verifyNames: after a clean close, verify still reports a problem in
	// this file (damage no load repairs); otherwise verify passes.
	verifyNames string
}

type caseDir struct {
	g    *golden
	data string // the data directory copy
	dir  string // its tablet directory
}

func (c *caseDir) file(base int64, k logfile.Kind) string {
	return filepath.Join(c.dir, logfile.Filename(base, k))
}

func flipBit(t *testing.T, path string, off int64) {
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	if off < 0 {
		off += int64(len(data))
	}
	data[off] ^= 0x04
	require.NoError(t, os.WriteFile(path, data, 0o640))
}

func cutTo(t *testing.T, path string, size int64) { require.NoError(t, os.Truncate(path, size)) }

func addZeros(t *testing.T, path string, n int) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.Write(make([]byte, n))
	require.NoError(t, errors.Join(err, f.Close()))
}

func copyTo(t *testing.T, from, to string) {
	data, err := os.ReadFile(from)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(to, data, 0o640))
}

func setCheckpoint(t *testing.T, path string, o int64) {
	require.NoError(t, checkpoint.WriteOffsets(vfs.OS, path, checkpoint.Offsets{crashTP: o}))
}

func TestCorruptionMatrix(t *testing.T) {
	g := writeGolden(t)
	sealed := g.bases[1]
	active := g.bases[len(g.bases)-1]
	mid := g.batches[sealed][len(g.batches[sealed])/2]
	last := g.batches[active][len(g.batches[active])-1]
	all := g.leo

	var cases []corruptionCase
	for cut := last.pos; cut < last.pos+last.size; cut += tablet.Sweep { // (sampled under the race detector)
		cases = append(cases, corruptionCase{name: fmt.Sprintf("last batch cut at byte %d", cut-last.pos), unclean: true,
			damage: func(t *testing.T, c *caseDir) { cutTo(t, c.file(active, logfile.Log), cut) }, intact: last.first})
	}
	cases = append(cases,
		corruptionCase{name: "last batch cut, clean shutdown", damage: func(t *testing.T, c *caseDir) {
			cutTo(t, c.file(active, logfile.Log), last.pos+last.size/2)
		}, intact: last.first},
		corruptionCase{name: "bit flip in a sealed segment, unclean", unclean: true, damage: func(t *testing.T, c *caseDir) {
			flipBit(t, c.file(sealed, logfile.Log), mid.pos+mid.size/2)
			setCheckpoint(t, filepath.Join(c.data, checkpoint.RecoveryPointFile), 0)
		}, intact: mid.first},
		corruptionCase{name: "bit flip in a sealed segment, clean", damage: func(t *testing.T, c *caseDir) {
			flipBit(t, c.file(sealed, logfile.Log), mid.pos+mid.size/2)
		}, intact: mid.first, readErr: logfile.Filename(sealed, logfile.Log), verifyNames: logfile.Filename(sealed, logfile.Log)},
		// A clean load trusts a sealed index beyond its ends, as Kafka
		// does; lookups check the batch an entry names and scan instead
		// when it is not there, so reads stay right. verify names it.
		corruptionCase{name: "bit flip in a sealed offset index", damage: func(t *testing.T, c *caseDir) {
			flipBit(t, c.file(sealed, logfile.Index), 8+5)
		}, intact: all, verifyNames: logfile.Filename(sealed, logfile.Index)},
		corruptionCase{name: "bit flip in a sealed offset index, unclean", unclean: true, damage: func(t *testing.T, c *caseDir) {
			flipBit(t, c.file(sealed, logfile.Index), 8+5)
			setCheckpoint(t, filepath.Join(c.data, checkpoint.RecoveryPointFile), 0)
		}, intact: all},
		corruptionCase{name: "bit flip in a sealed time index", damage: func(t *testing.T, c *caseDir) {
			flipBit(t, c.file(sealed, logfile.TimeIndex), 12+6)
		}, intact: all, verifyNames: logfile.Filename(sealed, logfile.TimeIndex)},
		corruptionCase{name: "bit flip in a sealed time index, unclean", unclean: true, damage: func(t *testing.T, c *caseDir) {
			flipBit(t, c.file(sealed, logfile.TimeIndex), 12+6)
			setCheckpoint(t, filepath.Join(c.data, checkpoint.RecoveryPointFile), 0)
		}, intact: all},
		corruptionCase{name: "bit flip in a txnindex", damage: func(t *testing.T, c *caseDir) {
			flipBit(t, txnIndexOf(t, c), 20)
		}, intact: all, committedErr: filepath.Base(txnIndexOf(t, &caseDir{g: g, dir: filepath.Join(g.dir, crashTP.DirName())})),
			verifyNames: filepath.Base(txnIndexOf(t, &caseDir{g: g, dir: filepath.Join(g.dir, crashTP.DirName())}))},
		corruptionCase{name: "bit flip in a txnindex, unclean", unclean: true, damage: func(t *testing.T, c *caseDir) {
			flipBit(t, txnIndexOf(t, c), 20)
			setCheckpoint(t, filepath.Join(c.data, checkpoint.RecoveryPointFile), 0)
		}, intact: all},
		corruptionCase{name: "bit flip in the newest snapshot", damage: func(t *testing.T, c *caseDir) {
			flipBit(t, c.file(all, logfile.Snapshot), 30)
		}, intact: all},
		corruptionCase{name: "bit flip in the recovery-point checkpoint", damage: func(t *testing.T, c *caseDir) {
			flipBit(t, filepath.Join(c.data, checkpoint.RecoveryPointFile), 0)
		}, intact: all},
		corruptionCase{name: "bit flip in the log-start checkpoint", damage: func(t *testing.T, c *caseDir) {
			flipBit(t, filepath.Join(c.data, checkpoint.LogStartOffsetFile), -2)
		}, intact: all},
		corruptionCase{name: "bit flip in the leader-epoch checkpoint", damage: func(t *testing.T, c *caseDir) {
			flipBit(t, filepath.Join(c.dir, checkpoint.LeaderEpochFile), 0)
		}, intact: all},
		// Rebuilt with a new topic id (reported), not fatal: the records
		// are intact. The writer's open rewrites it, so verify passes after.
		corruptionCase{name: "bit flip in partition.metadata", damage: func(t *testing.T, c *caseDir) {
			flipBit(t, filepath.Join(c.dir, checkpoint.PartitionMetadataFile), 3)
		}, intact: all},
		corruptionCase{name: "bit flip in meta.properties", damage: func(t *testing.T, c *caseDir) {
			data, err := os.ReadFile(filepath.Join(c.data, checkpoint.MetaPropertiesFile))
			require.NoError(t, err)
			flipBit(t, filepath.Join(c.data, checkpoint.MetaPropertiesFile), int64(strings.Index(string(data), "version=")+2))
		}, refuse: checkpoint.MetaPropertiesFile, refuseAt: -2},
		corruptionCase{name: "zero tail on the active segment, clean", damage: func(t *testing.T, c *caseDir) {
			addZeros(t, c.file(active, logfile.Log), 10000)
		}, intact: all},
		corruptionCase{name: "zero tail on the active segment, unclean", unclean: true, damage: func(t *testing.T, c *caseDir) {
			addZeros(t, c.file(active, logfile.Log), 10000)
		}, intact: all},
		corruptionCase{name: "zero tail on a sealed index", damage: func(t *testing.T, c *caseDir) {
			addZeros(t, c.file(sealed, logfile.Index), 800)
		}, intact: all},
		// Its offsets are missing below the log end: damage, which a read
		// reports at the segment before the gap instead of skipping it.
		corruptionCase{name: "missing .log of a sealed segment", damage: func(t *testing.T, c *caseDir) {
			require.NoError(t, os.Remove(c.file(sealed, logfile.Log)))
		}, intact: sealed, readErr: logfile.Filename(g.bases[0], logfile.Log), verifyNames: logfile.Filename(g.bases[2], logfile.Log)},
		corruptionCase{name: "missing .index", damage: func(t *testing.T, c *caseDir) {
			require.NoError(t, os.Remove(c.file(sealed, logfile.Index)))
		}, intact: all},
		corruptionCase{name: "missing .timeindex", damage: func(t *testing.T, c *caseDir) {
			require.NoError(t, os.Remove(c.file(sealed, logfile.TimeIndex)))
		}, intact: all},
		corruptionCase{name: "missing .txnindex, unclean", unclean: true, damage: func(t *testing.T, c *caseDir) {
			require.NoError(t, os.Remove(txnIndexOf(t, c)))
			setCheckpoint(t, filepath.Join(c.data, checkpoint.RecoveryPointFile), 0)
		}, intact: all},
		// After a clean shutdown no load can tell a lost .txnindex from a
		// segment without aborts (Kafka cannot either): read-committed
		// would show the aborted records; verify names the file.
		corruptionCase{name: "missing .txnindex, clean", damage: func(t *testing.T, c *caseDir) {
			require.NoError(t, os.Remove(txnIndexOf(t, c)))
		}, intact: all, verifyNames: filepath.Base(txnIndexOf(t, &caseDir{g: g, dir: filepath.Join(g.dir, crashTP.DirName())}))},
		corruptionCase{name: "missing snapshots", damage: func(t *testing.T, c *caseDir) {
			for _, b := range append(g.bases, all) {
				_ = os.Remove(c.file(b, logfile.Snapshot))
			}
		}, intact: all},
		corruptionCase{name: "missing leader-epoch checkpoint", damage: func(t *testing.T, c *caseDir) {
			require.NoError(t, os.Remove(filepath.Join(c.dir, checkpoint.LeaderEpochFile)))
		}, intact: all},
		corruptionCase{name: "missing recovery-point checkpoint", damage: func(t *testing.T, c *caseDir) {
			require.NoError(t, os.Remove(filepath.Join(c.data, checkpoint.RecoveryPointFile)))
		}, intact: all},
		corruptionCase{name: "missing log-start checkpoint", damage: func(t *testing.T, c *caseDir) {
			require.NoError(t, os.Remove(filepath.Join(c.data, checkpoint.LogStartOffsetFile)))
		}, intact: all},
		corruptionCase{name: "missing replication-offset checkpoint", damage: func(t *testing.T, c *caseDir) {
			require.NoError(t, os.Remove(filepath.Join(c.data, checkpoint.ReplicationOffsetFile)))
		}, intact: all},
		corruptionCase{name: "missing partition.metadata", damage: func(t *testing.T, c *caseDir) {
			require.NoError(t, os.Remove(filepath.Join(c.dir, checkpoint.PartitionMetadataFile)))
		}, intact: all},
		corruptionCase{name: "missing meta.properties", damage: func(t *testing.T, c *caseDir) {
			require.NoError(t, os.Remove(filepath.Join(c.data, checkpoint.MetaPropertiesFile)))
		}, intact: all},
		corruptionCase{name: "missing seglog.properties", damage: func(t *testing.T, c *caseDir) {
			require.NoError(t, os.Remove(filepath.Join(c.dir, tablet.ConfigFile)))
		}, intact: all},
		corruptionCase{name: "orphan index", damage: func(t *testing.T, c *caseDir) {
			copyTo(t, c.file(sealed, logfile.Index), c.file(all+1000, logfile.Index))
		}, intact: all},
		corruptionCase{name: "leftover .deleted", damage: func(t *testing.T, c *caseDir) {
			copyTo(t, c.file(sealed, logfile.Log), c.file(sealed, logfile.Log)+logfile.DeletedSuffix)
		}, intact: all},
		corruptionCase{name: "leftover .cleaned", damage: func(t *testing.T, c *caseDir) {
			copyTo(t, c.file(sealed, logfile.Log), c.file(sealed, logfile.Log)+logfile.CleanedSuffix)
		}, intact: all},
		corruptionCase{name: "leftover .swap", damage: func(t *testing.T, c *caseDir) {
			copyTo(t, c.file(sealed, logfile.Index), c.file(sealed, logfile.Index)+logfile.SwapSuffix)
		}, intact: all},
		corruptionCase{name: "leftover .tmp", damage: func(t *testing.T, c *caseDir) {
			copyTo(t, filepath.Join(c.dir, checkpoint.LeaderEpochFile), filepath.Join(c.dir, checkpoint.LeaderEpochFile+".tmp"))
			copyTo(t, filepath.Join(c.data, checkpoint.RecoveryPointFile), filepath.Join(c.data, checkpoint.RecoveryPointFile+".tmp"))
		}, intact: all},
		corruptionCase{name: "a file Kafka would not write", damage: func(t *testing.T, c *caseDir) {
			require.NoError(t, os.WriteFile(filepath.Join(c.dir, "notes.txt"), []byte("hello"), 0o640))
		}, intact: all, verifyNames: "notes.txt"},
		corruptionCase{name: "a directory that is no tablet", damage: func(t *testing.T, c *caseDir) {
			require.NoError(t, os.Mkdir(filepath.Join(c.data, "lost+found"), 0o750))
		}, intact: all, verifyNames: "lost+found"},
		corruptionCase{name: "recovery point past the end", unclean: true, damage: func(t *testing.T, c *caseDir) {
			setCheckpoint(t, filepath.Join(c.data, checkpoint.RecoveryPointFile), all+500)
		}, intact: all},
		corruptionCase{name: "high watermark past the end", damage: func(t *testing.T, c *caseDir) {
			setCheckpoint(t, filepath.Join(c.data, checkpoint.ReplicationOffsetFile), all+500)
		}, intact: all},
		corruptionCase{name: "log start past the end", damage: func(t *testing.T, c *caseDir) {
			setCheckpoint(t, filepath.Join(c.data, checkpoint.LogStartOffsetFile), all+500)
		}, intact: 0},
	)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			runCorruptionCase(t, g, tc)
		})
	}
	t.Logf("%d corruption cases", len(cases))
}

// txnIndexOf returns a .txnindex of the golden tablet.
func txnIndexOf(t *testing.T, c *caseDir) string {
	for _, b := range c.g.bases {
		if _, err := os.Stat(c.file(b, logfile.TxnIndex)); err == nil {
			return c.file(b, logfile.TxnIndex)
		}
	}
	t.Fatal("the golden tablet has no aborted transaction")
	return ""
}

func runCorruptionCase(t *testing.T, g *golden, tc corruptionCase) {
	data := filepath.Join(t.TempDir(), "data")
	require.NoError(t, os.CopyFS(data, os.DirFS(g.dir)))
	c := &caseDir{g: g, data: data, dir: filepath.Join(data, crashTP.DirName())}
	if tc.unclean {
		require.NoError(t, os.Remove(filepath.Join(data, checkpoint.CleanShutdownFile)))
	}
	tc.damage(t, c)

	m, err := tablet.OpenManager(vfs.OS, data, quietManager())
	if tc.refuse != "" {
		var ce *seglog.CorruptionError
		require.ErrorAs(t, err, &ce)
		require.Equal(t, tc.refuse, filepath.Base(ce.Path), "%v", err)
		if tc.refuseAt != -2 {
			require.Equal(t, tc.refuseAt, ce.Offset, "%v", err)
		}
		return
	}
	require.NoError(t, err)
	tab, ok := m.Get(crashTP)
	require.True(t, ok)
	o := tab.Offsets()
	require.GreaterOrEqual(t, o.LogEndOffset, min(tc.intact, o.LogStartOffset+tc.intact), "the log end")
	readErr := tab.Records(o.LogStartOffset, tablet.ReadLogEnd, func(_ record.Batch, r *record.Record) bool {
		if r.Offset < tc.intact {
			require.Equal(t, g.records[r.Offset], string(r.Key)+"="+string(r.Value), "offset %d", r.Offset)
		}
		return true
	})
	if tc.readErr != "" {
		var ce *seglog.CorruptionError
		require.ErrorAs(t, readErr, &ce)
		require.Equal(t, tc.readErr, filepath.Base(ce.Path))
	} else {
		require.NoError(t, readErr)
	}
	committedErr := tab.Records(o.LogStartOffset, tablet.ReadCommitted, func(record.Batch, *record.Record) bool { return true })
	if tc.committedErr != "" {
		var ce *seglog.CorruptionError
		require.ErrorAs(t, committedErr, &ce)
		require.Equal(t, tc.committedErr, filepath.Base(ce.Path))
	} else if tc.readErr == "" {
		require.NoError(t, committedErr)
	}
	// Every offset's read starts with the batch holding it.
	for off := o.LogStartOffset; off < min(tc.intact, o.LogEndOffset); off++ {
		if _, ok := g.records[off]; !ok {
			continue
		}
		res, err := tab.Read(off, tablet.ReadOptions{MaxBytes: 1, MinOneMessage: true, Isolation: tablet.ReadLogEnd})
		require.NoError(t, err, "reading offset %d", off)
		data, err := res.Records.AppendTo(nil)
		res.Close()
		require.NoError(t, err)
		b, _, err := record.ParseBatch(data)
		require.NoError(t, err, "reading offset %d", off)
		require.True(t, b.BaseOffset() <= off && off <= b.LastOffset(), "reading offset %d gave %d to %d", off, b.BaseOffset(), b.LastOffset())
	}

	// Usable: an append reads back, and a clean close and reopen work.
	res, err := tab.AppendRecords([]record.Record{{Timestamp: time.Now().UnixMilli(), Key: []byte("after"), Value: []byte("damage")}},
		record.None, tablet.AppendOptions{Sync: true})
	require.NoError(t, err)
	var got string
	require.NoError(t, tab.Records(res.FirstOffset, tablet.ReadLogEnd, func(_ record.Batch, r *record.Record) bool {
		got = string(r.Key) + "=" + string(r.Value)
		return false
	}))
	require.Equal(t, "after=damage", got)
	require.NoError(t, m.Close())

	v, err := recovery.Verify(vfs.OS, data, recovery.VerifyOptions{})
	require.NoError(t, err)
	if tc.verifyNames == "" {
		require.True(t, v.OK(), "%s", problems(v))
	} else {
		require.False(t, v.OK())
		require.Contains(t, problems(v), tc.verifyNames)
	}
	m, err = tablet.OpenManager(vfs.OS, data, quietManager())
	require.NoError(t, err)
	require.NoError(t, m.Close())
}
