package tablet_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/recovery"
	"github.com/seglog/seglog/tablet"
	"github.com/seglog/seglog/vfs"
)

// fillUntilFull appends Sync batches until one fails; it returns what was
// acknowledged and the failure.
func fillUntilFull(t *testing.T, tab *tablet.Tablet, limit int) (map[int64]string, error) {
	acked := map[int64]string{}
	for i := range limit {
		v := fmt.Sprintf("record %d %0900d", i, i)
		res, err := tab.AppendRecords([]record.Record{{Timestamp: 1_700_000_000_000 + int64(i), Value: []byte(v)}},
			record.None, tablet.AppendOptions{Sync: true})
		if err != nil {
			return acked, err
		}
		acked[res.FirstOffset] = v
	}
	t.Fatalf("the disk never filled in %d appends", limit)
	return nil, nil
}

// requireAcked reopens the data directory and requires every acknowledged
// record, a passing verify after a clean close, and appends that work.
func requireAcked(t *testing.T, fsys vfs.FS, dir string, acked map[int64]string, msg string) {
	m, err := tablet.OpenManager(fsys, dir, quietManager())
	require.NoError(t, err, msg)
	tab, ok := m.Get(crashTP)
	require.True(t, ok, msg)
	seen := map[int64]string{}
	require.NoError(t, tab.Records(0, tablet.ReadLogEnd, func(_ record.Batch, r *record.Record) bool {
		seen[r.Offset] = string(r.Value)
		return true
	}), msg)
	for off, v := range acked {
		require.Equal(t, v, seen[off], "%s: acknowledged offset %d", msg, off)
	}
	_, err = tab.AppendRecords([]record.Record{{Value: []byte("space again")}}, record.None, tablet.AppendOptions{Sync: true})
	require.NoError(t, err, msg)
	require.NoError(t, m.Close(), msg)
	r, err := recovery.Verify(fsys, dir, recovery.VerifyOptions{})
	require.NoError(t, err)
	require.True(t, r.OK(), "%s: %s", msg, problems(r))
}

func smallConfig() tablet.Config {
	cfg := tablet.DefaultConfig()
	cfg.SegmentBytes = 8192
	cfg.SegmentIndexBytes = 4096
	cfg.IndexIntervalBytes = 1024
	cfg.FileDeleteDelayMs = 0
	return cfg
}

// TestDiskFullInjected runs out of space at each of the first write or
// preallocation operations in turn (ENOSPC from then on, as a full disk
// answers): the append fails with ENOSPC and leaves the tablet failed,
// and once space is back a reopen has every acknowledged record and
// passes verify.
func TestDiskFullInjected(t *testing.T) {
	for n := range 60 {
		mem := vfs.NewMem()
		inj := vfs.NewInjector(mem)
		m, err := tablet.OpenManager(inj, "/data", quietManager())
		require.NoError(t, err)
		cfg := smallConfig()
		tab, err := m.Create(crashTP, &cfg)
		require.NoError(t, err)
		inj.Add(vfs.Rule{Ops: vfs.OpWrite | vfs.OpPreallocate, Nth: n, From: true, Err: syscall.ENOSPC})
		acked, err := fillUntilFull(t, tab, 1000)
		msg := fmt.Sprintf("full from write %d", n)
		require.ErrorIs(t, err, syscall.ENOSPC, msg)
		_, err = tab.AppendRecords([]record.Record{{Value: []byte("x")}}, record.None, tablet.AppendOptions{})
		require.ErrorIs(t, err, tablet.ErrFailed, msg)
		require.Error(t, m.Close(), msg) // its checkpoints cannot be written either
		requireAcked(t, mem, "/data", acked, msg)
	}
}

// TestDiskFullTmpfs fills a real 1 MiB tmpfs (it needs root, to mount;
// otherwise TestDiskFullInjected stands in): appends end with ENOSPC,
// and after the filesystem grows every acknowledged record is there.
func TestDiskFullTmpfs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root; TestDiskFullInjected covers running out of space through the injector")
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v: %s); TestDiskFullInjected covers running out of space", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", mnt).Run() })
	dir := filepath.Join(mnt, "data")
	m, err := tablet.OpenManager(vfs.OS, dir, quietManager())
	require.NoError(t, err)
	cfg := smallConfig()
	tab, err := m.Create(crashTP, &cfg)
	require.NoError(t, err)
	acked, err := fillUntilFull(t, tab, 10000)
	require.ErrorIs(t, err, syscall.ENOSPC)
	require.NotEmpty(t, acked)
	_, err = tab.AppendRecords([]record.Record{{Value: []byte("x")}}, record.None, tablet.AppendOptions{})
	require.ErrorIs(t, err, tablet.ErrFailed)
	if err := m.Close(); err != nil {
		require.True(t, errors.Is(err, syscall.ENOSPC) || errors.Is(err, tablet.ErrFailed), "%v", err)
	}
	out, err := exec.Command("mount", "-o", "remount,size=8m", mnt).CombinedOutput()
	require.NoError(t, err, "%s", out)
	requireAcked(t, vfs.OS, dir, acked, "after the tmpfs grew")
	t.Logf("%d records acknowledged before the 1 MiB tmpfs filled", len(acked))
}

// fullDisk makes every operation that needs new space fail with ENOSPC.
func fullDisk(inj *vfs.Injector) {
	inj.Add(vfs.Rule{Ops: vfs.OpWrite | vfs.OpPreallocate | vfs.OpMkdir, Err: syscall.ENOSPC, From: true})
}

// A creation that runs out of space at any step leaves no directory
// behind, and the same partition is created once there is room.
func TestFailedCreateLeavesNoDirectory(t *testing.T) {
	tp := crashTP
	for n := 0; ; n++ {
		mem := vfs.NewMem()
		inj := vfs.NewInjector(mem)
		m, err := tablet.OpenManager(inj, "/data", quietManager())
		require.NoError(t, err)
		inj.Add(vfs.Rule{Ops: vfs.OpWrite | vfs.OpPreallocate | vfs.OpMkdir | vfs.OpSync, Nth: n, Err: syscall.ENOSPC, From: true})
		_, err = m.Create(tp, nil)
		if err == nil {
			inj.Reset()
			require.NoError(t, m.Close())
			require.Greater(t, n, 2, "a creation writes something")
			return
		}
		require.ErrorIs(t, err, syscall.ENOSPC, "failure %d", n)
		_, statErr := mem.Stat(filepath.Join("/data", tp.DirName()))
		require.ErrorIs(t, statErr, os.ErrNotExist, "failure %d left %s", n, tp.DirName())
		inj.Reset()
		tab, err := m.Create(tp, nil)
		require.NoError(t, err, "failure %d: the partition is created once there is room", n)
		_, err = tab.AppendRecords([]record.Record{{Value: []byte("v")}}, record.None, tablet.AppendOptions{Sync: true})
		require.NoError(t, err)
		require.NoError(t, m.Close())
	}
}

// A data directory whose disk is full opens (loading writes nothing new)
// and serves its records; appends fail with ENOSPC.
func TestFullDiskStillOpens(t *testing.T) {
	mem := vfs.NewMem()
	m, err := tablet.OpenManager(mem, "/data", quietManager())
	require.NoError(t, err)
	tab, err := m.Create(crashTP, nil)
	require.NoError(t, err)
	for i := range 100 {
		_, err = tab.AppendRecords([]record.Record{{Value: fmt.Appendf(nil, "v%d", i)}}, record.None, tablet.AppendOptions{})
		require.NoError(t, err)
	}
	require.NoError(t, m.Close())

	for _, clean := range []bool{true, false} {
		inj := vfs.NewInjector(mem)
		fullDisk(inj)
		if !clean { // the full disk's close may have left none already
			if err := mem.Remove(filepath.Join("/data", checkpoint.CleanShutdownFile)); !errors.Is(err, os.ErrNotExist) {
				require.NoError(t, err)
			}
		}
		m, err = tablet.OpenManager(inj, "/data", quietManager())
		require.NoError(t, err, "clean %v", clean)
		tab, ok := m.Get(crashTP)
		require.True(t, ok)
		n := 0
		require.NoError(t, tab.Records(0, tablet.ReadLogEnd, func(_ record.Batch, r *record.Record) bool {
			require.Equal(t, fmt.Sprintf("v%d", n), string(r.Value))
			n++
			return true
		}))
		require.Equal(t, 100, n)
		_, err = tab.AppendRecords([]record.Record{{Value: []byte("no room")}}, record.None, tablet.AppendOptions{Sync: true})
		require.ErrorIs(t, err, syscall.ENOSPC)
		m.Close()
	}
}
