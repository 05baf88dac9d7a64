package vfs

import (
	"bytes"
	"io/fs"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog/internal/testenv"
)

func crashSeeds(t *testing.T, def uint64) uint64 { return testenv.CrashSeeds(t, def, 1) }

func create(t *testing.T, m FS, name string) File {
	t.Helper()
	f, err := m.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err)
	return f
}

func write(t *testing.T, f File, off int64, data []byte) {
	t.Helper()
	_, err := f.WriteAt(data, off)
	require.NoError(t, err)
}

func contents(t *testing.T, m FS, name string) ([]byte, bool) {
	t.Helper()
	data, err := ReadFile(m, name)
	if err != nil {
		require.ErrorIs(t, err, fs.ErrNotExist)
		return nil, false
	}
	return data, true
}

// A synced file in a synced directory survives every crash; what was
// written after the sync is kept, dropped or torn according to the mode.
func TestCrashModes(t *testing.T) {
	m := NewMem()
	require.NoError(t, m.MkdirAll("/d", 0o755))
	require.NoError(t, m.SyncDir("/"))
	f := create(t, m, "/d/log")
	synced := bytes.Repeat([]byte("S"), 1000)
	write(t, f, 0, synced)
	require.NoError(t, f.Sync())
	require.NoError(t, m.SyncDir("/d"))
	unsynced := bytes.Repeat([]byte("U"), 3000)
	write(t, f, 1000, unsynced)
	all := append(bytes.Clone(synced), unsynced...)

	got, ok := contents(t, m.Crash(CrashDropAll, 1), "/d/log")
	require.True(t, ok)
	require.Equal(t, synced, got)
	got, _ = contents(t, m.Crash(CrashKeepAll, 1), "/d/log")
	require.Equal(t, all, got)

	var sawDrop, sawKeep, sawTorn, sawZeros bool
	for seed := range crashSeeds(t, 300) {
		got, ok := contents(t, m.Crash(CrashRandom, seed), "/d/log")
		require.True(t, ok)
		require.GreaterOrEqual(t, len(got), len(synced), "seed %d: a synced byte was lost", seed)
		require.LessOrEqual(t, len(got), len(all))
		require.Equal(t, synced, got[:len(synced)], "seed %d", seed)
		for i, c := range got[len(synced):] {
			require.True(t, c == 'U' || c == 0, "seed %d byte %d: %q", seed, i, c)
		}
		tail := got[len(synced):]
		switch {
		case len(tail) == 0:
			sawDrop = true
		case bytes.Equal(got, all):
			sawKeep = true
		case bytes.IndexByte(tail, 0) >= 0 && bytes.IndexByte(tail, 'U') >= 0:
			sawTorn = true
		}
		if len(tail) > 0 && bytes.Count(tail, []byte{0}) == len(tail) {
			sawZeros = true // size updated, data not written
		}
		require.Equal(t, got, mustContents(t, m.Crash(CrashRandom, seed), "/d/log"), "the same seed, the same crash")
	}
	require.True(t, sawDrop && sawKeep && sawTorn && sawZeros, "drop %v keep %v torn %v zeros %v",
		sawDrop, sawKeep, sawTorn, sawZeros)

	// The crash left m alone; the open handle still works on it.
	write(t, f, 0, []byte("X"))
	got, _ = contents(t, m, "/d/log")
	require.Equal(t, byte('X'), got[0])
}

func mustContents(t *testing.T, m FS, name string) []byte {
	got, ok := contents(t, m, name)
	require.True(t, ok)
	return got
}

// An overwrite of synced bytes that was not synced may land in part, but
// never outside the sectors it touched.
func TestCrashOverwrite(t *testing.T) {
	m := NewMem()
	f := create(t, m, "/f")
	old := bytes.Repeat([]byte("o"), 2048)
	write(t, f, 0, old)
	require.NoError(t, f.Sync())
	require.NoError(t, m.SyncDir("/"))
	write(t, f, 600, bytes.Repeat([]byte("n"), 100)) // within sector 1
	for seed := range crashSeeds(t, 100) {
		got := mustContents(t, m.Crash(CrashRandom, seed), "/f")
		require.Len(t, got, 2048)
		require.Equal(t, old[:600], got[:600])
		require.Equal(t, old[700:], got[700:])
	}
}

func TestCrashNamespace(t *testing.T) {
	m := NewMem()
	f := create(t, m, "/new")
	write(t, f, 0, []byte("data"))
	require.NoError(t, f.Sync())
	_, ok := contents(t, m.Crash(CrashDropAll, 0), "/new")
	require.False(t, ok, "a created file needs its directory synced")
	require.NoError(t, m.SyncDir("/"))
	got, ok := contents(t, m.Crash(CrashDropAll, 0), "/new")
	require.True(t, ok)
	require.Equal(t, "data", string(got))

	require.NoError(t, m.Rename("/new", "/renamed"))
	c := m.Crash(CrashDropAll, 0)
	_, oldOK := contents(t, c, "/new")
	_, newOK := contents(t, c, "/renamed")
	require.True(t, oldOK && !newOK, "an unsynced rename is undone")
	for seed := range crashSeeds(t, 50) {
		c := m.Crash(CrashRandom, seed)
		_, oldOK := contents(t, c, "/new")
		_, newOK := contents(t, c, "/renamed")
		require.True(t, oldOK != newOK, "seed %d: a rename is atomic (old %v new %v)", seed, oldOK, newOK)
	}
	require.NoError(t, m.SyncDir("/"))
	_, newOK = contents(t, m.Crash(CrashDropAll, 0), "/renamed")
	require.True(t, newOK)

	require.NoError(t, m.Remove("/renamed"))
	_, ok = contents(t, m.Crash(CrashDropAll, 0), "/renamed")
	require.True(t, ok, "an unsynced remove is undone")
	require.NoError(t, m.SyncDir("/"))
	_, ok = contents(t, m.Crash(CrashDropAll, 0), "/renamed")
	require.False(t, ok)

	// A new directory needs its parent synced.
	require.NoError(t, m.MkdirAll("/topic-0", 0o755))
	_, err := m.Crash(CrashDropAll, 0).List("/topic-0")
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.NoError(t, m.SyncDir("/"))
	_, err = m.Crash(CrashDropAll, 0).List("/topic-0")
	require.NoError(t, err)
}

// A random crash keeps a prefix of a directory's changes, in order.
func TestCrashKeepsDirectoryChangesInOrder(t *testing.T) {
	m := NewMem()
	for _, n := range []string{"/a", "/b", "/c", "/d"} {
		require.NoError(t, create(t, m, n).Close())
	}
	seen := map[int]bool{}
	for seed := range crashSeeds(t, 200) {
		names, err := m.Crash(CrashRandom, seed).List("/")
		require.NoError(t, err)
		require.Equal(t, []string{"a", "b", "c", "d"}[:len(names)], names)
		seen[len(names)] = true
	}
	require.Len(t, seen, 5, "every prefix length occurs")
}

func TestCrashMappedStores(t *testing.T) {
	m := NewMem()
	f := create(t, m, "/idx")
	require.NoError(t, f.Preallocate(0, 4096))
	require.NoError(t, f.Sync())
	require.NoError(t, m.SyncDir("/"))
	mp, err := f.Map(4096, true)
	require.NoError(t, err)
	copy(mp.Bytes(), "entry-1")
	require.Equal(t, make([]byte, 7), mustContents(t, m.Crash(CrashDropAll, 0), "/idx")[:7])
	require.Equal(t, "entry-1", string(mustContents(t, m.Crash(CrashKeepAll, 0), "/idx")[:7]))
	require.NoError(t, mp.Flush())
	require.Equal(t, "entry-1", string(mustContents(t, m.Crash(CrashDropAll, 0), "/idx")[:7]))

	// Stores after an unmap are still unsynced until a Sync.
	copy(mp.Bytes()[10:], "entry-2")
	require.NoError(t, mp.Unmap())
	require.Equal(t, make([]byte, 7), mustContents(t, m.Crash(CrashDropAll, 0), "/idx")[10:17])
	require.NoError(t, f.Sync())
	require.Equal(t, "entry-2", string(mustContents(t, m.Crash(CrashDropAll, 0), "/idx")[10:17]))
	require.Error(t, mp.Unmap(), "unmapped twice")
}

func TestMemStrictMapping(t *testing.T) {
	m := NewMem()
	f := create(t, m, "/idx")
	require.NoError(t, f.Truncate(1024))
	mp, err := f.Map(1024, true)
	require.NoError(t, err)
	require.Error(t, f.Truncate(512), "shrinking under a live mapping")
	require.Error(t, f.Truncate(1<<20), "growing a mapped file beyond its memory")
	require.NoError(t, mp.Unmap())
	require.NoError(t, f.Truncate(512))
	require.NoError(t, f.Truncate(1<<20))
	ro, err := m.Open("/idx")
	require.NoError(t, err)
	_, err = ro.Map(10, true)
	require.Error(t, err, "a writable mapping of a read-only file")
}

func TestCrashSharesHardLinkedInode(t *testing.T) {
	// Two names for one inode (a cross-directory rename kept on both sides)
	// stay one file in the image.
	m := NewMem()
	require.NoError(t, m.MkdirAll("/a", 0o755))
	require.NoError(t, m.MkdirAll("/b", 0o755))
	require.NoError(t, m.SyncDir("/"))
	require.NoError(t, create(t, m, "/a/f").Close())
	require.NoError(t, m.SyncDir("/a"))
	require.NoError(t, m.Rename("/a/f", "/b/f"))
	require.NoError(t, m.SyncDir("/b")) // /a not synced: the old name survives too
	c := m.Crash(CrashDropAll, 0)
	_, inA := contents(t, c, "/a/f")
	_, inB := contents(t, c, "/b/f")
	require.True(t, inA && inB)
	require.Equal(t, "random", CrashRandom.String())
}
