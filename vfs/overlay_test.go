package vfs

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/seglog/seglog/internal/testenv"

	"github.com/stretchr/testify/require"
)

// Every kind of change through an Overlay is seen through it and never
// reaches the base: every byte, mode, mtime and entry of the base is as it
// was.
func TestOverlayNeverChangesTheBase(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "d", "e"), 0o755))
	for name, data := range map[string]string{"a": "alpha", "d/b": "bravo-bravo", "d/e/c": "charlie", "big": string(make([]byte, 1<<20))} {
		require.NoError(t, os.WriteFile(filepath.Join(root, name), []byte(data), 0o644))
	}
	before := testenv.Tree(t, root)
	o := NewOverlay(OS)
	p := func(n string) string { return filepath.Join(root, n) }

	// Reads come from the base.
	got, err := ReadFile(o, p("a"))
	require.NoError(t, err)
	require.Equal(t, "alpha", string(got))

	// A writable handle reads the base, then its copy once changed; a
	// handle opened earlier sees the change too.
	early, err := o.Open(p("d/b"))
	require.NoError(t, err)
	f, err := o.OpenFile(p("d/b"), os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("BR"), 0)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(8))
	require.NoError(t, f.Sync())
	buf := make([]byte, 8)
	_, err = early.ReadAt(buf, 0)
	require.NoError(t, err)
	require.Equal(t, "BRavo-br", string(buf))
	_, err = early.WriteAt([]byte("x"), 0)
	require.Error(t, err, "a read-only handle takes no write")
	require.NoError(t, early.Close())
	require.NoError(t, f.Close())

	// A writable mapping, preallocation, creation, removal, renames.
	g, err := o.OpenFile(p("big"), os.O_RDWR, 0)
	require.NoError(t, err)
	m, err := g.Map(4096, true)
	require.NoError(t, err)
	copy(m.Bytes(), "mapped")
	require.NoError(t, m.Flush())
	require.NoError(t, m.Unmap())
	require.NoError(t, g.Close())
	h, err := o.OpenFile(p("d/e/c"), os.O_RDWR, 0)
	require.NoError(t, err)
	require.NoError(t, h.Preallocate(0, 1<<16))
	require.NoError(t, h.Close())
	require.NoError(t, WriteAtomic(o, p("d/new"), []byte("new")))
	require.NoError(t, o.Remove(p("a")))
	require.NoError(t, o.Rename(p("d/b"), p("d/e/b2")))
	require.NoError(t, o.MkdirAll(p("z/y"), 0o755))
	_, err = o.OpenFile(p("d/e/c"), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	require.ErrorIs(t, err, fs.ErrExist)
	require.Error(t, o.Remove(p("d")), "not empty")
	require.Error(t, o.Rename(p("d"), p("d2")), "a base directory is not renamed")

	// The view through the Overlay.
	names, err := o.List(root)
	require.NoError(t, err)
	require.Equal(t, []string{"big", "d", "z"}, names)
	names, err = o.List(p("d"))
	require.NoError(t, err)
	require.Equal(t, []string{"e", "new"}, names)
	names, err = o.List(p("d/e"))
	require.NoError(t, err)
	require.Equal(t, []string{"b2", "c"}, names)
	_, err = o.Stat(p("a"))
	require.ErrorIs(t, err, fs.ErrNotExist)
	got, err = ReadFile(o, p("d/e/b2"))
	require.NoError(t, err)
	require.Equal(t, "BRavo-br", string(got))
	got, err = ReadFile(o, p("big"))
	require.NoError(t, err)
	require.Equal(t, "mapped", string(got[:6]))
	info, err := o.Stat(p("d/e/c"))
	require.NoError(t, err)
	require.Equal(t, int64(1<<16), info.Size())
	require.Contains(t, o.Changed(), p("d/new"))

	// Removing a directory hides its whole tree; creating in it again works.
	require.NoError(t, o.Remove(p("d/e/b2")))
	require.NoError(t, o.Remove(p("d/e/c")))
	require.NoError(t, o.Remove(p("d/e")))
	_, err = o.List(p("d/e"))
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.NoError(t, WriteFile(o, p("a"), []byte("again")))
	got, err = ReadFile(o, p("a"))
	require.NoError(t, err)
	require.Equal(t, "again", string(got))

	require.Equal(t, before, testenv.Tree(t, root), "the base is untouched")
}

// ReadOnly refuses every change and passes reads through.
func TestReadOnly(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(p, []byte("data"), 0o644))
	ro := ReadOnly(OS)
	got, err := ReadFile(ro, p)
	require.NoError(t, err)
	require.Equal(t, "data", string(got))
	_, err = ro.OpenFile(p, os.O_RDWR, 0)
	require.ErrorIs(t, err, ErrReadOnly)
	require.ErrorIs(t, ro.Remove(p), ErrReadOnly)
	require.ErrorIs(t, ro.Rename(p, p+"2"), ErrReadOnly)
	require.ErrorIs(t, ro.MkdirAll(filepath.Join(dir, "x"), 0o755), ErrReadOnly)
	_, err = ro.Lock(p)
	require.ErrorIs(t, err, ErrReadOnly)
	require.ErrorIs(t, WriteAtomic(ro, p, []byte("x")), ErrReadOnly)
	require.NoError(t, ro.SyncDir(dir))
	l, err := ro.RLock(p)
	require.NoError(t, err)
	require.NoError(t, l.Close())
	got, _ = os.ReadFile(p)
	require.Equal(t, "data", string(got))
}

// Shared locks run beside each other and never beside an exclusive one,
// on files and on directories; RLock creates nothing.
func TestSharedLocks(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys FS, dir string) {
		_, err := fsys.RLock(filepath.Join(dir, "missing"))
		require.ErrorIs(t, err, fs.ErrNotExist, "RLock creates nothing")
		_, err = fsys.Stat(filepath.Join(dir, "missing"))
		require.ErrorIs(t, err, fs.ErrNotExist)
		for _, name := range []string{dir, filepath.Join(dir, ".lock")} {
			if name != dir {
				require.NoError(t, WriteFile(fsys, name, nil))
			}
			r1, err := fsys.RLock(name)
			require.NoError(t, err, name)
			r2, err := fsys.RLock(name)
			require.NoError(t, err, "two readers")
			_, err = fsys.Lock(name)
			require.ErrorIs(t, err, ErrLocked, "no writer beside readers")
			require.NoError(t, r1.Close())
			_, err = fsys.Lock(name)
			require.ErrorIs(t, err, ErrLocked, "still one reader")
			require.NoError(t, r2.Close())
			w, err := fsys.Lock(name)
			require.NoError(t, err, "the last reader gone")
			_, err = fsys.RLock(name)
			require.ErrorIs(t, err, ErrLocked, "no reader beside a writer")
			require.NoError(t, w.Close())
		}
	})
}

// The holders of a lock are found by process id.
func TestLockHolders(t *testing.T) {
	dir := t.TempDir()
	require.Empty(t, LockHolders(dir))
	l, err := OS.RLock(dir)
	require.NoError(t, err)
	defer l.Close()
	require.Equal(t, []int{os.Getpid()}, LockHolders(dir))
	require.Empty(t, LockHolders(filepath.Join(dir, "missing")))
}

// Relative names mean the same files in the base and in the Overlay's
// memory.
func TestOverlayRelativeNames(t *testing.T) {
	root := t.TempDir()
	t.Chdir(root)
	require.NoError(t, os.MkdirAll("d", 0o755))
	require.NoError(t, os.WriteFile("d/f", []byte("base"), 0o644))
	o := NewOverlay(OS)
	f, err := o.OpenFile("d/f", os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("BA"), 0)
	require.NoError(t, err, "the copy is read from the base by the same name")
	require.NoError(t, f.Close())
	got, err := ReadFile(o, "d/f")
	require.NoError(t, err)
	require.Equal(t, "BAse", string(got))
	got, err = ReadFile(o, filepath.Join(root, "d", "f"))
	require.NoError(t, err)
	require.Equal(t, "BAse", string(got), "the absolute name is the same file")
	names, err := o.List("d")
	require.NoError(t, err)
	require.Equal(t, []string{"f"}, names)
	onDisk, _ := os.ReadFile("d/f")
	require.Equal(t, "base", string(onDisk))
}
