package checkpoint

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/vfs"
)

func TestOffsetsRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, RecoveryPointFile)
	got, err := ReadOffsets(vfs.OS, path)
	require.NoError(t, err)
	require.Empty(t, got, "a missing file has no entries")
	want := Offsets{{"orders", 0}: 42, {"orders", 11}: 7, {"a.b_c-d", 3}: 1 << 40}
	require.NoError(t, WriteOffsets(vfs.OS, path, want))
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "0\n3\na.b_c-d 3 1099511627776\norders 0 42\norders 11 7\n", string(data))
	got, err = ReadOffsets(vfs.OS, path)
	require.NoError(t, err)
	require.Equal(t, want, got)
	_, err = os.Stat(path + ".tmp")
	require.ErrorIs(t, err, os.ErrNotExist, "no temporary file is left")
}

func TestParseOffsets(t *testing.T) {
	ok := map[string]Offsets{
		"":                       {},
		"0\n":                    {},
		"0":                      {},
		"0\n0\n":                 {},
		"0\n1\nt 0 5\n":          {{"t", 0}: 5},
		"0\n1\nt  0\t5":          {{"t", 0}: 5},
		"0\r\n1\r\nt 1 -1\r\n":   {{"t", 1}: -1},
		"0\n2\nx 1 10\ny 2 20\n": {{"x", 1}: 10, {"y", 2}: 20},
	}
	for in, want := range ok {
		got, err := ParseOffsets("f", []byte(in))
		require.NoError(t, err, "%q", in)
		require.Equal(t, want, got, "%q", in)
	}
	bad := map[string]string{
		"1\n0\n":               "line 1: unrecognized version 1",
		"x\n0\n":               "line 1: version",
		"0\nx\n":               "line 2: count",
		"0\n2\nt 0 5\n":        "expected 2 entries, found 1",
		"0\n1\nt 0 5\nu 1 6\n": "expected 1 entries, found 2",
		"0\n1\nt 0\n":          "line 3",
		"0\n1\nt x 5\n":        "line 3",
		"0\n1\nt 0 5 6\n":      "line 3",
		"0\n1\n t 0 5\n":       "line 3",
		"0\n-1\n":              "line 2",
	}
	for in, want := range bad {
		_, err := ParseOffsets("/d/f", []byte(in))
		require.ErrorIs(t, err, ErrMalformed, "%q", in)
		require.ErrorIs(t, err, seglog.ErrCorruption, "%q", in)
		require.ErrorContains(t, err, want, "%q", in)
		require.ErrorContains(t, err, "/d/f", "%q", in)
	}
}

func TestEpochs(t *testing.T) {
	path := filepath.Join(t.TempDir(), LeaderEpochFile)
	want := []EpochEntry{{0, 0}, {3, 104}, {7, 2000}}
	require.NoError(t, WriteEpochs(vfs.OS, path, want))
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "0\n3\n0 0\n3 104\n7 2000\n", string(data))
	got, err := ReadEpochs(vfs.OS, path)
	require.NoError(t, err)
	require.Equal(t, want, got)
	_, err = ParseEpochs("f", []byte("0\n1\n1 2 3\n"))
	require.ErrorIs(t, err, ErrMalformed)
}

func TestPartitionMetadata(t *testing.T) {
	path := filepath.Join(t.TempDir(), PartitionMetadataFile)
	_, ok, err := ReadPartitionMetadata(vfs.OS, path)
	require.NoError(t, err)
	require.False(t, ok)
	id := NewTopicID()
	require.Len(t, id.String(), 22)
	require.NoError(t, WritePartitionMetadata(vfs.OS, path, id))
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "version: 0\ntopic_id: "+id.String(), string(data), "no trailing newline")
	got, ok, err := ReadPartitionMetadata(vfs.OS, path)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, id, got)

	// Kafka's own example id.
	kafka, err := ParsePartitionMetadata("p", []byte("version: 0\ntopic_id: YWxhbmNlIGtub3dzIGl0YQ"))
	require.NoError(t, err)
	require.Equal(t, "YWxhbmNlIGtub3dzIGl0YQ", kafka.String())
	for in, want := range map[string]string{
		"version: 1\ntopic_id: YWxhbmNlIGtub3dzIGl0YQ": "unrecognized version",
		"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA": "zero topic id",
		"version: 0\ntopic_id: short":                  "22 characters",
		"version: 0":                                   "missing",
		"version=0\ntopic_id: YWxhbmNlIGtub3dzIGl0YQ":  "line 1",
	} {
		_, err := ParsePartitionMetadata("p", []byte(in))
		require.ErrorIs(t, err, ErrMalformed, in)
		require.ErrorContains(t, err, want, in)
	}
	require.Error(t, WritePartitionMetadata(vfs.OS, path, TopicID{}))
}

func TestMetaProperties(t *testing.T) {
	path := filepath.Join(t.TempDir(), MetaPropertiesFile)
	m := MetaProperties{Version: 1, ClusterID: "MkU3OEVBNTcwNTJENDM2Qg", NodeID: 3, DirectoryID: "kVXH4VobT1G3oKw0CSFpkA",
		Other: map[string]string{}}
	require.NoError(t, WriteMetaProperties(vfs.OS, path, m))
	got, ok, err := ReadMetaProperties(vfs.OS, path)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, m, got)
	data := m.Format(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	require.Equal(t, "#\n#Mon Nov 30 12:00:00 UTC 2026\ncluster.id=MkU3OEVBNTcwNTJENDM2Qg\n"+
		"directory.id=kVXH4VobT1G3oKw0CSFpkA\nnode.id=3\nversion=1\n", string(data))

	// As Kafka 2.x wrote it (version 0, broker.id), with Java's separators.
	v0, err := ParseMetaProperties("m", []byte("#comment\n! another\nversion = 0\nbroker.id: 5\ncluster.id=abc\nextra=1\n"))
	require.NoError(t, err)
	require.Equal(t, MetaProperties{Version: 0, ClusterID: "abc", NodeID: 5, Other: map[string]string{"extra": "1"}}, v0)
	for in, want := range map[string]string{
		"version=2\n":                          "version",
		"version=1\ncluster.id=c\n":            "node.id is missing",
		"version=1\nnode.id=1\n":               "cluster.id is missing",
		"version=1\ncluster.id=c\nnode.id=x\n": "not a number",
	} {
		_, err := ParseMetaProperties("m", []byte(in))
		require.ErrorIs(t, err, ErrMalformed, in)
		require.ErrorContains(t, err, want, in)
	}
}

func TestCleanShutdownMarker(t *testing.T) {
	mem := vfs.NewMem()
	require.NoError(t, mem.MkdirAll("/d", 0o755))
	require.NoError(t, mem.SyncDir("/"))
	clean, _, err := TakeCleanShutdown(mem, "/d")
	require.NoError(t, err)
	require.False(t, clean)
	require.NoError(t, WriteCleanShutdown(mem, "/d", 17))
	data, err := vfs.ReadFile(mem, "/d/.kafka_cleanshutdown")
	require.NoError(t, err)
	require.JSONEq(t, `{"version":0,"brokerEpoch":17}`, string(data))

	// The marker is durable once written...
	after := mem.Crash(vfs.CrashDropAll, 0)
	clean, epoch, err := TakeCleanShutdown(after, "/d")
	require.NoError(t, err)
	require.True(t, clean)
	require.Equal(t, int64(17), epoch)
	// ... and taking it deletes it durably, so a crash while loading is an
	// unclean shutdown.
	again, _, err := TakeCleanShutdown(after.Crash(vfs.CrashDropAll, 0), "/d")
	require.NoError(t, err)
	require.False(t, again)

	require.NoError(t, vfs.WriteFile(mem, "/d/.kafka_cleanshutdown", []byte("garbage")))
	clean, epoch, err = TakeCleanShutdown(mem, "/d")
	require.NoError(t, err)
	require.True(t, clean, "presence is what counts")
	require.Equal(t, int64(-1), epoch)
}

// A crash at any step of an atomic write leaves the old checkpoint or the
// new one.
func TestAtomicWriteFaultLoop(t *testing.T) {
	old := Offsets{{"t", 0}: 1}
	next := Offsets{{"t", 0}: 2, {"t", 1}: 3}
	for i := 0; ; i++ {
		mem := vfs.NewMem()
		require.NoError(t, WriteOffsets(mem, "/"+RecoveryPointFile, old))
		in := vfs.NewInjector(mem)
		in.Add(vfs.Rule{Ops: vfs.OpAll, Nth: i, Short: true, Sticky: true})
		err := WriteOffsets(in, "/"+RecoveryPointFile, next)
		if in.Injected() == 0 {
			require.NoError(t, err)
			break
		}
		require.Error(t, err)
		for seed := range uint64(10) {
			got, err := ReadOffsets(mem.Crash(vfs.CrashRandom, seed), "/"+RecoveryPointFile)
			require.NoError(t, err, "fault %d seed %d", i, seed)
			require.Contains(t, []Offsets{old, next}, got, "fault %d seed %d", i, seed)
		}
	}
}

func TestDirNames(t *testing.T) {
	for name, want := range map[string]struct {
		tp     TopicPartition
		suffix string
	}{
		"orders-0":    {TopicPartition{"orders", 0}, ""},
		"my-topic-12": {TopicPartition{"my-topic", 12}, ""},
		"a.b_c-3.5f2a1c0e2b7a4ec1a1c3c1f0b6b1d2a9-delete": {TopicPartition{"a.b_c", 3}, DeleteDirSuffix},
		"t-1.abc-future": {TopicPartition{"t", 1}, FutureDirSuffix},
		"t-1.abc-stray":  {TopicPartition{"t", 1}, StrayDirSuffix},
	} {
		tp, suffix, err := ParseDirName(name)
		require.NoError(t, err, name)
		require.Equal(t, want.tp, tp, name)
		require.Equal(t, want.suffix, suffix, name)
	}
	for _, bad := range []string{"orders", "-1", "orders-", "orders-x", "or ders-1", "..-1", "x-delete", "tier"} {
		_, _, err := ParseDirName(bad)
		require.Error(t, err, bad)
	}
	require.Equal(t, "orders-7", TopicPartition{"orders", 7}.DirName())
	require.Error(t, ValidateTopic(string(make([]byte, 250))))
}

// The strict parse of the clean-shutdown marker, as seglog dump uses it.
func TestParseCleanShutdown(t *testing.T) {
	epoch, err := ParseCleanShutdown("/m", []byte(`{"version":0,"brokerEpoch":42}`))
	require.NoError(t, err)
	require.Equal(t, int64(42), epoch)
	for _, bad := range []string{``, `garbage`, `{"version":1,"brokerEpoch":1}`, `{"version":0,"brokerEpoch":1,"extra":true}`,
		`{"version":0,"brokerEpoch":"x"}`} {
		_, err := ParseCleanShutdown("/m", []byte(bad))
		require.ErrorIs(t, err, ErrMalformed, "%q", bad)
		var ce *seglog.CorruptionError
		require.ErrorAs(t, err, &ce, "%q", bad)
		require.Equal(t, "/m", ce.Path)
	}
}

// Topic-partitions order by topic, then partition, as Kafka's checkpoints
// list them.
func TestTopicPartitionCompare(t *testing.T) {
	tps := []TopicPartition{{"b", 0}, {"a", 10}, {"a", 2}, {"a-b", 0}}
	slices.SortFunc(tps, TopicPartition.Compare)
	require.Equal(t, []TopicPartition{{"a", 2}, {"a", 10}, {"a-b", 0}, {"b", 0}}, tps)
	require.Zero(t, TopicPartition{"x", 1}.Compare(TopicPartition{"x", 1}))
}

// A missing file reads as empty; a file that cannot be read is an error,
// not an empty checkpoint.
func TestReadMissingAndUnreadable(t *testing.T) {
	mem := vfs.NewMem()
	o, err := ReadOffsets(mem, "/none")
	require.NoError(t, err)
	require.Empty(t, o)
	e, err := ReadEpochs(mem, "/none")
	require.NoError(t, err)
	require.Empty(t, e)
	_, ok, err := ReadMetaProperties(mem, "/none")
	require.NoError(t, err)
	require.False(t, ok)
	_, ok, err = ReadPartitionMetadata(mem, "/none")
	require.NoError(t, err)
	require.False(t, ok)

	require.NoError(t, WriteOffsets(mem, "/cp", Offsets{{"t", 0}: 5}))
	in := vfs.NewInjector(mem)
	in.Add(vfs.Rule{Ops: vfs.OpRead, Path: "cp"})
	_, err = ReadOffsets(in, "/cp")
	require.ErrorIs(t, err, vfs.ErrInjected)
}

// Every writer of a checkpoint file is atomic: a fault at any step, then a
// crash, leaves the old content or the new one, never a mix; once the
// write returned, the new one survives any crash.
func TestEveryWriterIsAtomic(t *testing.T) {
	id1, id2 := NewTopicID(), NewTopicID()
	writers := map[string]struct {
		write func(fsys vfs.FS, path string, next bool) error
		read  func(fsys vfs.FS, path string) (any, error)
	}{
		"epochs": {
			func(fsys vfs.FS, p string, next bool) error {
				e := []EpochEntry{{Epoch: 0, StartOffset: 0}}
				if next {
					e = append(e, EpochEntry{Epoch: 3, StartOffset: 100})
				}
				return WriteEpochs(fsys, p, e)
			},
			func(fsys vfs.FS, p string) (any, error) { e, err := ReadEpochs(fsys, p); return fmt.Sprint(e), err },
		},
		"partition.metadata": {
			func(fsys vfs.FS, p string, next bool) error {
				if next {
					return WritePartitionMetadata(fsys, p, id2)
				}
				return WritePartitionMetadata(fsys, p, id1)
			},
			func(fsys vfs.FS, p string) (any, error) { id, _, err := ReadPartitionMetadata(fsys, p); return id, err },
		},
		"meta.properties": {
			func(fsys vfs.FS, p string, next bool) error {
				m := MetaProperties{Version: 1, ClusterID: "old", NodeID: 1}
				if next {
					m.ClusterID, m.NodeID = "new", 2
				}
				return WriteMetaProperties(fsys, p, m)
			},
			func(fsys vfs.FS, p string) (any, error) {
				m, _, err := ReadMetaProperties(fsys, p)
				return [2]any{m.ClusterID, m.NodeID}, err
			},
		},
	}
	for name, w := range writers {
		t.Run(name, func(t *testing.T) {
			base := vfs.NewMem()
			require.NoError(t, w.write(base, "/f", false))
			old, err := w.read(base, "/f")
			require.NoError(t, err)
			nextMem := base.Crash(vfs.CrashKeepAll, 0)
			require.NoError(t, w.write(nextMem, "/f", true))
			want, err := w.read(nextMem, "/f")
			require.NoError(t, err)
			require.NotEqual(t, old, want)
			for i := 0; ; i++ {
				mem := base.Crash(vfs.CrashKeepAll, 0)
				in := vfs.NewInjector(mem)
				in.Add(vfs.Rule{Ops: vfs.OpAll, Nth: i, Short: true, Sticky: true})
				err := w.write(in, "/f", true)
				if in.Injected() == 0 {
					require.NoError(t, err)
					next, err := w.read(mem.Crash(vfs.CrashDropAll, 0), "/f")
					require.NoError(t, err)
					require.Equal(t, want, next, "durable once written")
					require.Greater(t, i, 3, "the loop covered every step")
					break
				}
				require.Error(t, err)
				for seed := range uint64(8) {
					got, err := w.read(mem.Crash(vfs.CrashRandom, seed), "/f")
					require.NoError(t, err, "fault %d seed %d", i, seed)
					require.Contains(t, []any{old, want}, got, "fault %d seed %d: neither old nor new", i, seed)
				}
			}
		})
	}
}
