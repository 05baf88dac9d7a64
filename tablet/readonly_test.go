package tablet_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/seglog/seglog/internal/testenv"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/tablet"
	"github.com/seglog/seglog/vfs"
)

// writeDir writes a data directory of one tablet, "events-0", with n
// one-record batches over several segments, closed cleanly.
func writeDir(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	m, err := tablet.OpenManager(nil, dir, quietManager())
	require.NoError(t, err)
	cfg := tablet.DefaultConfig()
	cfg.SegmentBytes = 2048
	tab, err := m.Create(tablet.TopicPartition{Topic: "events"}, &cfg)
	require.NoError(t, err)
	for i := range n {
		_, err := tab.AppendRecords([]record.Record{{Value: fmt.Appendf(nil, "v%d", i)}}, record.None, tablet.AppendOptions{})
		require.NoError(t, err)
	}
	require.NoError(t, m.Close())
	return dir
}

func readOnly() tablet.ManagerOptions {
	o := quietManager()
	o.ReadOnly = true
	return o
}

// readValues reads every value of events-0 through a read-only manager.
func readValues(t *testing.T, m *tablet.Manager) []string {
	t.Helper()
	tab, ok := m.Get(tablet.TopicPartition{Topic: "events"})
	require.True(t, ok)
	var out []string
	for r, err := range tab.Scan(0, tablet.ReadHighWatermark) {
		require.NoError(t, err)
		out = append(out, string(r.Value))
	}
	return out
}

func values(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "v" + strconv.Itoa(i)
	}
	return out
}

// A read-only open of a clean directory reads everything and changes no
// byte, mode, mtime or entry; every change it is asked for is refused.
func TestReadOnlyChangesNothing(t *testing.T) {
	dir := writeDir(t, 100)
	before := testenv.Tree(t, dir)
	m, err := tablet.OpenManager(nil, dir, readOnly())
	require.NoError(t, err)
	require.True(t, m.Loaded.CleanShutdown)
	require.Equal(t, values(100), readValues(t, m))
	tab, _ := m.Get(tablet.TopicPartition{Topic: "events"})
	_, err = tab.AppendRecords([]record.Record{{Value: []byte("no")}}, record.None, tablet.AppendOptions{})
	require.ErrorIs(t, err, tablet.ErrReadOnly)
	require.ErrorIs(t, tab.TruncateTo(5), tablet.ErrReadOnly)
	_, err = tab.ApplyRetention()
	require.ErrorIs(t, err, tablet.ErrReadOnly)
	require.ErrorIs(t, tab.SetConfig(tablet.DefaultConfig()), tablet.ErrReadOnly)
	_, err = tab.DeleteRecordsBefore(3)
	require.ErrorIs(t, err, tablet.ErrReadOnly)
	_, err = m.Create(tablet.TopicPartition{Topic: "new"}, nil)
	require.ErrorIs(t, err, tablet.ErrReadOnly)
	require.ErrorIs(t, m.Delete(tablet.TopicPartition{Topic: "events"}), tablet.ErrReadOnly)
	require.NoError(t, m.Close())
	require.Equal(t, before, testenv.Tree(t, dir), "not a byte, mode, mtime or entry changed")

	// And the directory is still clean for the next writer.
	w, err := tablet.OpenManager(nil, dir, quietManager())
	require.NoError(t, err)
	require.True(t, w.Loaded.CleanShutdown)
	require.NoError(t, w.Close())
}

// After an unclean shutdown with a torn tail, a read-only open recovers in
// memory: the acknowledged records are read, the torn bytes are not, and
// the directory still holds the torn tail for a writer's recovery to cut.
func TestReadOnlyRecoversInMemory(t *testing.T) {
	dir := writeDir(t, 60)
	require.NoError(t, os.Remove(filepath.Join(dir, checkpoint.CleanShutdownFile)))
	segs, err := filepath.Glob(filepath.Join(dir, "events-0", "*.log"))
	require.NoError(t, err)
	active := segs[len(segs)-1]
	f, err := os.OpenFile(active, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.Write([]byte("torn tail: half a batch"))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	before := testenv.Tree(t, dir)

	m, err := tablet.OpenManager(nil, dir, readOnly())
	require.NoError(t, err)
	require.False(t, m.Loaded.CleanShutdown)
	require.NotEmpty(t, m.Loaded.Tablets[0].Report, "recovery reports what it did (in memory)")
	require.Equal(t, values(60), readValues(t, m))
	require.NoError(t, m.Close())
	require.Equal(t, before, testenv.Tree(t, dir), "recovery ran in memory only")

	// A writer recovers it for real.
	w, err := tablet.OpenManager(nil, dir, quietManager())
	require.NoError(t, err)
	require.False(t, w.Loaded.CleanShutdown)
	require.NoError(t, w.Close())
	require.NotEqual(t, before, testenv.Tree(t, dir))
}

// Readers share the directory; a writer has it to itself; the refusal
// names the holder.
func TestReadersAndWritersExcludeEachOther(t *testing.T) {
	dir := writeDir(t, 3)
	r1, err := tablet.OpenManager(nil, dir, readOnly())
	require.NoError(t, err)
	r2, err := tablet.OpenManager(nil, dir, readOnly())
	require.NoError(t, err, "two readers at once")
	_, err = tablet.OpenManager(nil, dir, quietManager())
	require.ErrorIs(t, err, tablet.ErrLocked)
	require.ErrorContains(t, err, "process "+strconv.Itoa(os.Getpid()))
	require.NoError(t, r1.Close())
	require.NoError(t, r2.Close())

	w, err := tablet.OpenManager(nil, dir, quietManager())
	require.NoError(t, err)
	_, err = tablet.OpenManager(nil, dir, readOnly())
	require.ErrorIs(t, err, tablet.ErrLocked, "no reader beside a writer")
	require.ErrorContains(t, err, "a reader cannot open it beside a writer")
	require.NoError(t, w.Close())
}

// A directory that is not a data directory is refused by readers and
// writers alike, and nothing is created in it; a missing one is created
// only by a writer.
func TestOnlyDataDirectories(t *testing.T) {
	foreign := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(foreign, "notes.txt"), []byte("mine"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(foreign, "app-1"), 0o755))
	before := testenv.Tree(t, foreign)
	for _, o := range []tablet.ManagerOptions{quietManager(), readOnly()} {
		_, err := tablet.OpenManager(nil, foreign, o)
		require.ErrorIs(t, err, tablet.ErrNotDataDir)
		require.ErrorContains(t, err, "nothing was written")
	}
	require.Equal(t, before, testenv.Tree(t, foreign))

	missing := filepath.Join(t.TempDir(), "new")
	_, err := tablet.OpenManager(nil, missing, readOnly())
	require.ErrorIs(t, err, tablet.ErrNotDataDir)
	_, err = os.Stat(missing)
	require.ErrorIs(t, err, fs.ErrNotExist, "a reader creates nothing")
	m, err := tablet.OpenManager(nil, missing, quietManager())
	require.NoError(t, err, "a writer creates a new data directory")
	require.NoError(t, m.Close())
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	_, err = tablet.OpenManager(nil, file, quietManager())
	require.ErrorIs(t, err, tablet.ErrNotDataDir)
}

// A read-only open works where nothing can be written: a full disk and a
// read-only filesystem (every change failing with ENOSPC or EROFS), clean
// or not.
func TestReadOnlyOnFullDiskAndReadOnlyFS(t *testing.T) {
	for _, errno := range []syscall.Errno{syscall.ENOSPC, syscall.EROFS} {
		for _, clean := range []bool{true, false} {
			t.Run(fmt.Sprintf("%v/clean=%v", errno, clean), func(t *testing.T) {
				dir := writeDir(t, 40)
				if !clean {
					require.NoError(t, os.Remove(filepath.Join(dir, checkpoint.CleanShutdownFile)))
				}
				before := testenv.Tree(t, dir)
				in := vfs.NewInjector(vfs.OS)
				in.Add(vfs.Rule{Ops: vfs.OpMutating, From: true, Err: errno})
				m, err := tablet.OpenManager(in, dir, readOnly())
				require.NoError(t, err)
				require.Equal(t, values(40), readValues(t, m))
				require.NoError(t, m.Close())
				require.Zero(t, in.Injected(), "nothing even tried to change the directory")
				require.Equal(t, before, testenv.Tree(t, dir))
				_, err = tablet.OpenManager(in, dir, quietManager())
				require.True(t, errors.Is(err, errno), "a writer does fail there: %v", err)
			})
		}
	}
}

// A damaged partition.metadata does not make the tablet unreadable: it gets
// a new topic id, reported with what was wrong — in memory for a reader,
// on disk for a writer.
func TestDamagedPartitionMetadataIsRebuilt(t *testing.T) {
	dir := writeDir(t, 5)
	pm := filepath.Join(dir, "events-0", checkpoint.PartitionMetadataFile)
	require.NoError(t, os.WriteFile(pm, []byte("version: 9\ntopic_id: x\n"), 0o644))
	report := func(m *tablet.Manager) string {
		for _, c := range m.Loaded.Tablets[0].Report {
			if c.File == pm {
				return c.String()
			}
		}
		return ""
	}
	r, err := tablet.OpenManager(nil, dir, readOnly())
	require.NoError(t, err)
	require.Contains(t, report(r), "damaged (line 1: unrecognized version 9 at byte 0): a new topic id assigned")
	require.Equal(t, values(5), readValues(t, r))
	require.NoError(t, r.Close())
	data, _ := os.ReadFile(pm)
	require.Equal(t, "version: 9\ntopic_id: x\n", string(data), "a reader changes nothing")

	w, err := tablet.OpenManager(nil, dir, quietManager())
	require.NoError(t, err)
	require.Contains(t, report(w), "damaged")
	require.NoError(t, w.Close())
	_, found, err := checkpoint.ReadPartitionMetadata(nil, pm)
	require.NoError(t, err)
	require.True(t, found, "a writer rewrote it")
}
