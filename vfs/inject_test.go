package vfs

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestInjectorNth(t *testing.T) {
	in := NewInjector(NewMem())
	in.Add(Rule{Ops: OpWrite, Path: "*.log", Nth: 1})
	f := create(t, in, "/00.log")
	g := create(t, in, "/00.index")
	write(t, f, 0, []byte("a"))
	write(t, g, 0, []byte("x")) // not a .log: not counted
	_, err := f.WriteAt([]byte("b"), 1)
	require.ErrorIs(t, err, ErrInjected)
	require.Contains(t, err.Error(), "00.log")
	write(t, f, 1, []byte("c")) // only the Nth fails
	require.Equal(t, 1, in.Injected())
	got, _ := contents(t, in, "/00.log")
	require.Equal(t, "ac", string(got))
}

func TestInjectorShortWrite(t *testing.T) {
	in := NewInjector(NewMem())
	custom := errors.New("no space left on device")
	in.Add(Rule{Ops: OpWrite, Short: true, Err: custom})
	f := create(t, in, "/f")
	n, err := f.WriteVAt([][]byte{[]byte("abcd"), []byte("efgh")}, 0)
	require.ErrorIs(t, err, custom)
	require.Equal(t, 4, n)
	got, _ := contents(t, in, "/f")
	require.Equal(t, "abcd", string(got))
}

func TestInjectorFrom(t *testing.T) {
	in := NewInjector(NewMem())
	in.Add(Rule{Ops: OpWrite, Nth: 1, From: true, Err: errors.New("disk full")})
	f := create(t, in, "/f")
	write(t, f, 0, []byte("a"))
	for i := range 3 {
		_, err := f.WriteAt([]byte("b"), int64(1+i))
		require.Error(t, err, "every write from the second on fails")
	}
	require.NoError(t, f.Sync(), "other kinds pass")
	require.Equal(t, 3, in.Injected())
}

func TestInjectorSticky(t *testing.T) {
	in := NewInjector(NewMem())
	in.Add(Rule{Ops: OpSync, Sticky: true})
	f := create(t, in, "/f")
	write(t, f, 0, []byte("a"))
	require.ErrorIs(t, f.Sync(), ErrInjected)
	_, err := f.WriteAt([]byte("b"), 1)
	require.ErrorIs(t, err, ErrInjected, "everything fails after a sticky fault")
	_, err = in.List("/")
	require.ErrorIs(t, err, ErrInjected)
	require.Error(t, f.Close())
	require.Equal(t, 4, in.Injected())
	in.Reset()
	_, err = in.List("/")
	require.NoError(t, err)
	require.Equal(t, 1, in.Ops())
}

func TestInjectorEveryKind(t *testing.T) {
	steps := []struct {
		op  Op
		run func(fsys FS, f File, m Mapping) error
	}{
		{OpMkdir, func(fsys FS, _ File, _ Mapping) error { return fsys.MkdirAll("/d", 0o755) }},
		{OpList, func(fsys FS, _ File, _ Mapping) error { _, err := fsys.List("/"); return err }},
		{OpStat, func(fsys FS, _ File, _ Mapping) error { _, err := fsys.Stat("/f"); return err }},
		{OpSyncDir, func(fsys FS, _ File, _ Mapping) error { return fsys.SyncDir("/") }},
		{OpLock, func(fsys FS, _ File, _ Mapping) error { _, err := fsys.Lock("/lk"); return err }},
		{OpRead, func(_ FS, f File, _ Mapping) error { _, err := f.ReadAt(make([]byte, 1), 0); return err }},
		{OpTruncate, func(_ FS, f File, _ Mapping) error { return f.Truncate(4096) }},
		{OpPreallocate, func(_ FS, f File, _ Mapping) error { return f.Preallocate(0, 4096) }},
		{OpSync, func(_ FS, f File, _ Mapping) error { return f.Datasync() }},
		{OpMap, func(_ FS, f File, _ Mapping) error { _, err := f.Map(10, false); return err }},
		{OpFlush, func(_ FS, _ File, m Mapping) error { return m.Flush() }},
		{OpRename, func(fsys FS, _ File, _ Mapping) error { return fsys.Rename("/g", "/h") }},
		{OpRemove, func(fsys FS, _ File, _ Mapping) error { return fsys.Remove("/h") }},
		{OpOpen, func(fsys FS, _ File, _ Mapping) error { _, err := fsys.Open("/f"); return err }},
		{OpUnmap, func(_ FS, _ File, m Mapping) error { return m.Unmap() }},
		{OpClose, func(_ FS, f File, _ Mapping) error { return f.Close() }},
	}
	for _, s := range steps {
		t.Run(s.op.String(), func(t *testing.T) {
			mem := NewMem()
			in := NewInjector(mem)
			f := create(t, in, "/f")
			write(t, f, 0, make([]byte, 64))
			require.NoError(t, create(t, in, "/g").Close())
			m, err := f.Map(64, true)
			require.NoError(t, err)
			in.Add(Rule{Ops: s.op})
			require.ErrorIs(t, s.run(in, f, m), ErrInjected)
			require.Equal(t, 1, in.Injected())
		})
	}
}

// The fault loop the engine's tests use: fail operation i of a workload for
// i = 0, 1, 2, … until a run injects nothing. Here the workload is the
// atomic file replacement of a checkpoint, and after every failure the old
// or the new contents survive a crash, never a mix.
// WriteAtomic under a fault at every step, then a crash: the file is the
// old one or the new one, never a mix; once it returned, the new one
// survives any crash.
func TestFaultLoopWriteAtomic(t *testing.T) {
	for i := 0; ; i++ {
		mem := NewMem()
		require.NoError(t, WriteAtomic(mem, "/cp", []byte("old")))
		in := NewInjector(mem)
		in.Add(Rule{Ops: OpMutating | OpOpen | OpClose, Nth: i, Short: true, Sticky: true})
		err := WriteAtomic(in, "/cp", []byte("new"))
		if in.Injected() == 0 {
			require.NoError(t, err)
			require.Greater(t, i, 4, "the loop covered every step")
			require.Equal(t, "new", string(mustContents(t, mem.Crash(CrashDropAll, 0), "/cp")))
			break
		}
		require.Error(t, err)
		require.ErrorIs(t, err, ErrInjected)
		for seed := range crashSeeds(t, 20) {
			got := mustContents(t, mem.Crash(CrashRandom, seed), "/cp")
			require.Contains(t, []string{"old", "new"}, string(got), "fault %d seed %d", i, seed)
		}
	}
}

// WriteFileSynced's bytes survive a power cut once its directory entry is
// durable; WriteFile's may not.
func TestWriteFileSynced(t *testing.T) {
	mem := NewMem()
	require.NoError(t, WriteFileSynced(mem, "/a", []byte("synced")))
	require.NoError(t, WriteFile(mem, "/b", []byte("unsynced")))
	require.NoError(t, mem.SyncDir("/"))
	after := mem.Crash(CrashDropAll, 0)
	require.Equal(t, "synced", string(mustContents(t, after, "/a")))
	require.Empty(t, mustContents(t, after, "/b"))
}

// Every function that takes an FS treats nil as the OS.
func TestNilIsOS(t *testing.T) {
	require.Equal(t, OS, OrOS(nil))
	mem := NewMem()
	require.Equal(t, FS(mem), OrOS(mem))
	p := filepath.Join(t.TempDir(), "f")
	require.NoError(t, WriteAtomic(nil, p, []byte("x")))
	got, err := ReadFile(nil, p)
	require.NoError(t, err)
	require.Equal(t, "x", string(got))
	in := NewInjector(nil)
	_, err = in.Stat(p)
	require.NoError(t, err)
	require.Equal(t, 1, in.Ops())
	modes := WithModes(nil, 0, 0)
	_, err = modes.Stat(p)
	require.NoError(t, err)
}

func TestOpString(t *testing.T) {
	require.Equal(t, "write|sync", (OpWrite | OpSync).String())
	require.Equal(t, "none", Op(0).String())
	require.Contains(t, OpAll.String(), "lock")
}

func TestWithModes(t *testing.T) {
	old := unixUmask(0o022)
	defer unixUmask(old)
	d := t.TempDir()
	fsys := WithModes(OS, 0, 0)
	require.NoError(t, fsys.MkdirAll(filepath.Join(d, "a", "b"), 0o777))
	f, err := fsys.OpenFile(filepath.Join(d, "a", "b", "f"), os.O_RDWR|os.O_CREATE, 0o666)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	l, err := fsys.Lock(filepath.Join(d, "a", ".lock"))
	require.NoError(t, err)
	require.NoError(t, l.Close())
	for path, want := range map[string]os.FileMode{"a": 0o750, "a/b": 0o750, "a/b/f": 0o640, "a/.lock": 0o640} {
		info, err := os.Stat(filepath.Join(d, path))
		require.NoError(t, err)
		require.Equal(t, want, info.Mode().Perm(), path)
	}
	custom := WithModes(OS, 0o600, 0o700)
	require.NoError(t, custom.MkdirAll(filepath.Join(d, "c"), 0o777))
	info, err := os.Stat(filepath.Join(d, "c"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), info.Mode().Perm())
}
