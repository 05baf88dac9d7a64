package vfs

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// Every FS must behave the same; this suite runs against each.
func filesystems(t *testing.T) map[string]func(t *testing.T) (FS, string) {
	return map[string]func(t *testing.T) (FS, string){
		"os":           func(t *testing.T) (FS, string) { return OS, t.TempDir() },
		"mem":          func(t *testing.T) (FS, string) { return NewMem(), "/data" },
		"injector/mem": func(t *testing.T) (FS, string) { return NewInjector(NewMem()), "/data" },
		"injector/os":  func(t *testing.T) (FS, string) { return NewInjector(OS), t.TempDir() },
		"overlay/os":   func(t *testing.T) (FS, string) { return NewOverlay(OS), t.TempDir() },
		"overlay/mem":  func(t *testing.T) (FS, string) { return NewOverlay(NewMem()), "/" },
	}
}

func forEachFS(t *testing.T, test func(t *testing.T, fsys FS, dir string)) {
	for name, mk := range filesystems(t) {
		t.Run(name, func(t *testing.T) {
			fsys, dir := mk(t)
			require.NoError(t, fsys.MkdirAll(dir, 0o755))
			test(t, fsys, dir)
		})
	}
}

func TestFileReadWrite(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys FS, dir string) {
		name := filepath.Join(dir, "f")
		_, err := fsys.Open(name)
		require.ErrorIs(t, err, fs.ErrNotExist)
		f, err := fsys.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		require.NoError(t, err)
		require.Equal(t, name, f.Name())
		_, err = fsys.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		require.ErrorIs(t, err, fs.ErrExist)

		n, err := f.WriteAt([]byte("hello"), 0)
		require.NoError(t, err)
		require.Equal(t, 5, n)
		n, err = f.WriteVAt([][]byte{[]byte(", "), nil, []byte("world")}, 5)
		require.NoError(t, err)
		require.Equal(t, 7, n)
		_, err = f.WriteAt([]byte("!"), 14) // leaves a zero-filled hole at 12–13
		require.NoError(t, err)
		size, err := f.Size()
		require.NoError(t, err)
		require.Equal(t, int64(15), size)

		buf := make([]byte, 20)
		n, err = f.ReadAt(buf, 0)
		require.ErrorIs(t, err, io.EOF)
		require.Equal(t, "hello, world\x00\x00!", string(buf[:n]))
		n, err = f.ReadAt(buf[:5], 7)
		require.NoError(t, err)
		require.Equal(t, "world", string(buf[:n]))
		_, err = f.ReadAt(buf, 100)
		require.ErrorIs(t, err, io.EOF)

		require.NoError(t, f.Sync())
		require.NoError(t, f.Datasync())
		require.NoError(t, f.Truncate(5))
		require.NoError(t, f.Truncate(8))
		got, err := readFile(fsys, name)
		require.NoError(t, err)
		require.Equal(t, "hello\x00\x00\x00", string(got))
		require.NoError(t, f.Close())
		_, err = f.WriteAt([]byte("x"), 0)
		require.Error(t, err, "write after close")

		ro, err := fsys.Open(name)
		require.NoError(t, err)
		_, err = ro.WriteAt([]byte("x"), 0)
		require.Error(t, err, "write to a read-only file")
		require.NoError(t, ro.Close())

		tr, err := fsys.OpenFile(name, os.O_RDWR|os.O_TRUNC, 0)
		require.NoError(t, err)
		size, err = tr.Size()
		require.NoError(t, err)
		require.Zero(t, size)
		require.NoError(t, tr.Close())

		_, err = fsys.OpenFile(name, os.O_RDWR|os.O_APPEND, 0)
		require.ErrorIs(t, err, ErrNotSupported)
	})
}

func readFile(fsys FS, name string) ([]byte, error) { return ReadFile(fsys, name) }

func TestPreallocate(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys FS, dir string) {
		f, err := fsys.OpenFile(filepath.Join(dir, "p"), os.O_RDWR|os.O_CREATE, 0o644)
		require.NoError(t, err)
		defer f.Close()
		_, err = f.WriteAt([]byte("abc"), 0)
		require.NoError(t, err)
		err = f.Preallocate(0, 4096)
		if errors.Is(err, ErrNotSupported) {
			t.Skip("this filesystem cannot fallocate; callers fall back to writing zeros")
		}
		require.NoError(t, err)
		size, err := f.Size()
		require.NoError(t, err)
		require.Equal(t, int64(4096), size)
		buf := make([]byte, 4)
		_, err = f.ReadAt(buf, 0)
		require.NoError(t, err)
		require.Equal(t, "abc\x00", string(buf), "existing data is kept")
		require.NoError(t, f.Preallocate(0, 10)) // within the size: no change
		size, _ = f.Size()
		require.Equal(t, int64(4096), size)
	})
}

func TestMapping(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys FS, dir string) {
		name := filepath.Join(dir, "m")
		f, err := fsys.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
		require.NoError(t, err)
		require.NoError(t, f.Truncate(8192))
		_, err = f.Map(8193, true)
		require.Error(t, err, "mapping past the end")

		m, err := f.Map(8192, true)
		require.NoError(t, err)
		require.Len(t, m.Bytes(), 8192)
		copy(m.Bytes()[100:], "mapped")
		require.NoError(t, m.Advise(AdviseRandom))
		require.NoError(t, m.Flush())
		buf := make([]byte, 6)
		_, err = f.ReadAt(buf, 100)
		require.NoError(t, err)
		require.Equal(t, "mapped", string(buf), "stores are seen by reads")
		_, err = f.WriteAt([]byte("WRITE"), 200)
		require.NoError(t, err)
		require.Equal(t, "WRITE", string(m.Bytes()[200:205]), "writes are seen in the mapping")
		require.NoError(t, m.Unmap())

		empty, err := f.Map(0, false)
		require.NoError(t, err)
		require.Empty(t, empty.Bytes())
		require.NoError(t, empty.Flush())
		require.NoError(t, empty.Unmap())
		require.NoError(t, f.Close())

		got, err := ReadFile(fsys, name)
		require.NoError(t, err)
		require.Equal(t, "mapped", string(got[100:106]))
	})
}

func TestNamespace(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys FS, dir string) {
		sub := filepath.Join(dir, "a", "b")
		require.NoError(t, fsys.MkdirAll(sub, 0o755))
		require.NoError(t, fsys.MkdirAll(sub, 0o755), "MkdirAll is idempotent")
		for _, n := range []string{"z", "m", "a"} {
			require.NoError(t, WriteFile(fsys, filepath.Join(sub, n), []byte(n)))
		}
		names, err := fsys.List(sub)
		require.NoError(t, err)
		require.Equal(t, []string{"a", "m", "z"}, names)
		info, err := fsys.Stat(filepath.Join(sub, "m"))
		require.NoError(t, err)
		require.Equal(t, "m", info.Name())
		require.Equal(t, int64(1), info.Size())
		require.False(t, info.IsDir())
		info, err = fsys.Stat(sub)
		require.NoError(t, err)
		require.True(t, info.IsDir())
		_, err = fsys.Stat(filepath.Join(sub, "nope"))
		require.ErrorIs(t, err, fs.ErrNotExist)

		require.NoError(t, fsys.Rename(filepath.Join(sub, "a"), filepath.Join(sub, "z")))
		got, err := ReadFile(fsys, filepath.Join(sub, "z"))
		require.NoError(t, err)
		require.Equal(t, "a", string(got), "rename replaces the target")
		require.NoError(t, fsys.Rename(filepath.Join(sub, "m"), filepath.Join(dir, "moved")))
		names, _ = fsys.List(sub)
		require.Equal(t, []string{"z"}, names)
		require.NoError(t, fsys.SyncDir(sub))
		require.NoError(t, fsys.SyncDir(dir))

		require.Error(t, fsys.Remove(sub), "a non-empty directory")
		require.NoError(t, fsys.Remove(filepath.Join(sub, "z")))
		require.NoError(t, fsys.Remove(sub))
		require.ErrorIs(t, fsys.Remove(sub), fs.ErrNotExist)
		_, err = fsys.List(sub)
		require.ErrorIs(t, err, fs.ErrNotExist)
		_, err = fsys.OpenFile(filepath.Join(sub, "x"), os.O_RDWR|os.O_CREATE, 0o644)
		require.ErrorIs(t, err, fs.ErrNotExist, "creating in a missing directory")
	})
}

func TestLock(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys FS, dir string) {
		name := filepath.Join(dir, ".lock")
		l, err := fsys.Lock(name)
		require.NoError(t, err)
		_, err = fsys.Lock(name)
		require.ErrorIs(t, err, ErrLocked)
		require.NoError(t, l.Close())
		l2, err := fsys.Lock(name)
		require.NoError(t, err)
		require.NoError(t, l2.Close())
	})
}

func TestConsumed(t *testing.T) {
	bufs := [][]byte{[]byte("ab"), nil, []byte("cde"), []byte("f")}
	require.Equal(t, [][]byte{[]byte("de"), []byte("f")}, consumed(bufs, 3))
	require.Equal(t, [][]byte{[]byte("cde"), []byte("f")}, consumed(bufs, 2))
	require.Empty(t, consumed(bufs, 6))
	require.Equal(t, "ab", string(slices.Concat(firstBytes(bufs, 2)...)))
	require.Equal(t, "abcd", string(slices.Concat(firstBytes(bufs, 4)...)))
	require.True(t, bytes.Equal([]byte("abcdef"), slices.Concat(firstBytes(bufs, 100)...)))
}

// What every FS refuses, it refuses alike: flags outside the positional
// model, writes to a read-only file, use of a closed file; and truncation
// and preallocation set the size the same way.
func TestRefusalsAndSizes(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys FS, dir string) {
		name := filepath.Join(dir, "f")
		_, err := fsys.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
		require.Error(t, err, "O_APPEND is not part of the model")
		_, err = fsys.OpenFile(name, os.O_WRONLY|os.O_CREATE, 0o644)
		require.Error(t, err, "write-only is not part of the model")
		require.NoError(t, WriteFile(fsys, name, []byte("0123456789")))

		ro, err := fsys.Open(name)
		require.NoError(t, err)
		_, err = ro.WriteAt([]byte("x"), 0)
		require.Error(t, err, "a read-only file takes no write")
		require.Error(t, ro.Truncate(0))
		require.NoError(t, ro.Close())
		_, err = ro.ReadAt(make([]byte, 1), 0)
		require.Error(t, err, "a closed file reads nothing")

		f, err := fsys.OpenFile(name, os.O_RDWR, 0)
		require.NoError(t, err)
		defer f.Close()
		require.NoError(t, f.Truncate(4))
		size, err := f.Size()
		require.NoError(t, err)
		require.Equal(t, int64(4), size)
		require.NoError(t, f.Truncate(8))
		buf := make([]byte, 8)
		_, err = f.ReadAt(buf, 0)
		require.NoError(t, err)
		require.Equal(t, []byte("0123\x00\x00\x00\x00"), buf, "growing zero-fills")
		if err := f.Preallocate(0, 4096); err != nil {
			require.ErrorIs(t, err, ErrNotSupported)
		} else {
			size, err = f.Size()
			require.NoError(t, err)
			require.Equal(t, int64(4096), size, "preallocation grows the size to cover the range")
			_, err = f.ReadAt(buf[:4], 0)
			require.NoError(t, err)
			require.Equal(t, "0123", string(buf[:4]), "and keeps what was there")
		}
		require.NoError(t, f.Datasync())
		require.NoError(t, f.Sync())
		_, err = f.ReadAt(buf, 1<<20)
		require.ErrorIs(t, err, io.EOF, "past the end")

		info, err := fsys.Stat(name)
		require.NoError(t, err)
		require.False(t, info.Mode().IsDir())
		if fsys == OS {
			require.False(t, info.ModTime().IsZero(), "the OS reports a modification time")
		}
	})
}

// The injector counts every operation by kind, and a rule on one path
// leaves the others alone.
func TestInjectorCountsAndPaths(t *testing.T) {
	mem := NewMem()
	in := NewInjector(mem)
	require.NoError(t, in.MkdirAll("/d", 0o755))
	require.NoError(t, WriteFileSynced(in, "/d/a", []byte("a")))
	require.NoError(t, in.SyncDir("/d"))
	require.Equal(t, 1, in.Count(OpSync), "the file's fsync")
	require.Equal(t, 2, in.Count(OpSync|OpSyncDir), "and the directory's")
	require.Positive(t, in.Count(OpWrite))
	in.Add(Rule{Path: "b", Ops: OpAll, From: true})
	require.NoError(t, WriteFile(in, "/d/a", []byte("again")), "another path is untouched")
	require.ErrorIs(t, WriteFile(in, "/d/b", []byte("b")), ErrInjected)
	require.ErrorIs(t, WriteFile(in, "/d/b", []byte("b")), ErrInjected, "From: every later one fails too")
	require.Equal(t, 2, in.Injected())
	in.Reset()
	require.NoError(t, WriteFile(in, "/d/b", []byte("b")))
	require.Zero(t, in.Injected())
}

// A mapping of an OS file reaches the file, and its hints are accepted.
func TestOSMappingAdvice(t *testing.T) {
	name := filepath.Join(t.TempDir(), "m")
	require.NoError(t, WriteFile(OS, name, make([]byte, 4096)))
	f, err := OS.OpenFile(name, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	m, err := f.Map(4096, true)
	require.NoError(t, err)
	for _, a := range []Advice{AdviseNormal, AdviseRandom, AdviseSequential, AdviseWillNeed} {
		require.NoError(t, m.Advise(a))
	}
	copy(m.Bytes(), "mapped")
	require.NoError(t, m.Flush())
	require.NoError(t, m.Unmap())
	got, err := ReadFile(OS, name)
	require.NoError(t, err)
	require.Equal(t, "mapped", string(got[:6]))
	of, ok := f.(interface{ OSFile() *os.File })
	require.True(t, ok, "an OS file exposes its *os.File for sendfile")
	require.Equal(t, name, of.OSFile().Name())
}
