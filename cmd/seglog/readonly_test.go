package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/seglog/seglog/internal/testenv"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/seglog/seglog/checkpoint"
)

// produced writes n records of topic "orders" into a data directory under
// parent, over several segments, and closes it cleanly.
func produced(t *testing.T, parent string, n int) string {
	d := filepath.Join(parent, "data")
	code, _, errOut := runWithStdin(t, lines(n), "produce", "--data-dir", d, "--topic", "orders",
		"--batch-records", "10", "--key-separator", ":", "--config", "segment.bytes=2000", "--config", "segment.index.bytes=65536")
	require.Equal(t, 0, code, errOut)
	return d
}

// readOnlyCommands are every command that only reads, on data directory d.
func readOnlyCommands(t *testing.T, d string) [][]string {
	logs, err := filepath.Glob(filepath.Join(d, "orders-0", "*.log"))
	require.NoError(t, err)
	idx, err := filepath.Glob(filepath.Join(d, "orders-0", "*.index"))
	require.NoError(t, err)
	dump := append([]string{"dump", "--deep-iteration"}, logs...)
	return [][]string{
		{"consume", "--data-dir", d, "--topic", "orders"},
		{"consume", "--data-dir", d, "--topic", "orders", "--from", "latest"},
		{"offsets", "--data-dir", d},
		{"offsets", "--data-dir", d, "--topic", "orders"},
		{"verify", "--data-dir", d},
		dump,
		append([]string{"dump", "--index-sanity-check"}, idx...),
		{"dump", filepath.Join(d, checkpoint.RecoveryPointFile), filepath.Join(d, checkpoint.MetaPropertiesFile)},
		{"tier", "ls", "--store", "file://" + t.TempDir(), "--data-dir", d},
		{"groups", "--data-dir", d, "--list", "--state"},
		{"groups", "--data-dir", d, "--describe", "--all-groups"},
		{"transactions", "--data-dir", d, "--list"},
		{"transactions", "--data-dir", d, "--describe-producers", "--topic", "orders", "--partition", "0"},
	}
}

// No command that only reads changes a byte, mode, mtime or entry of a
// data directory: closed cleanly, or not (then consume and offsets recover
// in memory, and read everything acknowledged).
func TestReadOnlyCommandsChangeNothing(t *testing.T) {
	for _, clean := range []bool{true, false} {
		t.Run(fmt.Sprintf("clean=%v", clean), func(t *testing.T) {
			d := produced(t, t.TempDir(), 300)
			if !clean {
				require.NoError(t, os.Remove(filepath.Join(d, checkpoint.CleanShutdownFile)))
				logs, _ := filepath.Glob(filepath.Join(d, "orders-0", "*.log"))
				f, err := os.OpenFile(logs[len(logs)-1], os.O_WRONLY|os.O_APPEND, 0)
				require.NoError(t, err)
				_, err = f.Write([]byte("a torn tail"))
				require.NoError(t, err)
				require.NoError(t, f.Close())
			}
			before := testenv.Tree(t, d)
			for _, args := range readOnlyCommands(t, d) {
				code, out, errOut := runWithStdin(t, "", args...)
				if (args[0] == "verify" || slices.Contains(args, "--deep-iteration")) && !clean {
					require.Equal(t, 1, code, "%s reports the torn tail: %s", args[0], out)
				} else {
					require.Equal(t, 0, code, "%v: %s", args, errOut)
				}
				require.Equal(t, before, testenv.Tree(t, d), "%v changed the directory", args)
			}
			code, out, _ := runWithStdin(t, "", "consume", "--data-dir", d, "--topic", "orders", "--format", "value")
			require.Equal(t, 0, code)
			require.Len(t, strings.Split(strings.TrimSpace(out), "\n"), 300, "every record, recovered in memory if need be")
		})
	}
}

// A directory that is not a data directory is refused by every command,
// and nothing is created, changed or deleted in it; a missing one is
// created only by a command that writes.
func TestForeignAndMissingDirectories(t *testing.T) {
	foreign := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(foreign, "dbus-1"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(foreign, "app-1"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(foreign, "app-1", "draft.tmp"), []byte("a user's draft"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(foreign, "cache-2"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(foreign, "cache-2", "x.deleted"), []byte("kept"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(foreign, "hosts"), []byte("127.0.0.1 localhost\n"), 0o644))
	before := testenv.Tree(t, foreign)
	for _, args := range [][]string{
		{"consume", "--data-dir", foreign, "--topic", "t"},
		{"offsets", "--data-dir", foreign},
		{"recover", "--data-dir", foreign},
		{"verify", "--data-dir", foreign},
		{"produce", "--data-dir", foreign, "--topic", "t"},
		{"tier", "--data-dir", foreign, "--store", "file://" + t.TempDir(), "--once"},
	} {
		code, _, errOut := runWithStdin(t, "x\n", args...)
		require.Equal(t, 1, code, args)
		require.Contains(t, errOut, "not a seglog or Kafka data directory", args)
		require.Equal(t, before, testenv.Tree(t, foreign), "%v touched a foreign directory", args)
	}

	missing := filepath.Join(t.TempDir(), "nothing-here")
	for _, args := range [][]string{
		{"consume", "--data-dir", missing, "--topic", "t"},
		{"offsets", "--data-dir", missing},
		{"recover", "--data-dir", missing},
		{"verify", "--data-dir", missing},
		{"end-txn", "--data-dir", missing, "--topic", "t", "--producer-id", "1", "--producer-epoch", "0", "--commit"},
	} {
		code, _, errOut := runWithStdin(t, "", args...)
		require.Equal(t, 1, code, args)
		require.Contains(t, errOut, "no data directory "+missing, args)
		_, err := os.Stat(missing)
		require.ErrorIs(t, err, os.ErrNotExist, "%v created it", args)
	}
	code, _, errOut := runWithStdin(t, "x\n", "produce", "--data-dir", missing, "--topic", "t")
	require.Equal(t, 0, code, errOut)
	_, err := os.Stat(filepath.Join(missing, checkpoint.MetaPropertiesFile))
	require.NoError(t, err, "produce made a new data directory")
}

// mountTmpfs mounts a tmpfs of size bytes at a new directory, unmounted at
// cleanup, or skips the test where mounting is not allowed.
func mountTmpfs(t *testing.T, size int) string {
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v): the engine's read-only opens are tested on a full disk and a read-only filesystem through fault injection in package tablet", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}

// On a full disk and on a read-only filesystem — real ones, a tmpfs filled
// up and a tmpfs remounted read-only — every read-only command works and
// changes nothing, clean or after a crash.
func TestReadOnlyCommandsOnFullAndReadOnlyFilesystems(t *testing.T) {
	for _, kind := range []string{"full", "read-only"} {
		t.Run(kind, func(t *testing.T) {
			mnt := mountTmpfs(t, 8<<20)
			d := produced(t, mnt, 300)
			require.NoError(t, os.Remove(filepath.Join(d, checkpoint.CleanShutdownFile))) // recovery must run, in memory
			logs, _ := filepath.Glob(filepath.Join(d, "orders-0", "*.log"))
			f, err := os.OpenFile(logs[len(logs)-1], os.O_WRONLY|os.O_APPEND, 0)
			require.NoError(t, err)
			_, err = f.Write([]byte("a torn tail"))
			require.NoError(t, err)
			require.NoError(t, f.Close())
			switch kind {
			case "full":
				f, err := os.Create(filepath.Join(mnt, "filler"))
				require.NoError(t, err)
				chunk := make([]byte, 1<<16)
				for {
					if _, err := f.Write(chunk); err != nil {
						require.ErrorIs(t, err, unix.ENOSPC)
						break
					}
				}
				require.NoError(t, f.Close())
			case "read-only":
				require.NoError(t, unix.Mount("", mnt, "", unix.MS_REMOUNT|unix.MS_RDONLY, ""))
			}
			before := testenv.Tree(t, d)
			for _, args := range readOnlyCommands(t, d) {
				if args[0] == "verify" || slices.Contains(args, "--deep-iteration") {
					continue // they report the torn tail (exit 1), checked above
				}
				code, _, errOut := runWithStdin(t, "", args...)
				require.Equal(t, 0, code, "%v on a %s filesystem: %s", args, kind, errOut)
				require.Equal(t, before, testenv.Tree(t, d))
			}
			code, out, _ := runWithStdin(t, "", "consume", "--data-dir", d, "--topic", "orders", "--format", "value")
			require.Equal(t, 0, code)
			require.Len(t, strings.Split(strings.TrimSpace(out), "\n"), 300)

			// A writer is refused there, saying why — not "in use".
			code, _, errOut := runWithStdin(t, "x\n", "produce", "--data-dir", d, "--topic", "orders")
			require.Equal(t, 1, code)
			require.Contains(t, errOut, map[string]string{"full": "no space left on device", "read-only": "read-only file system"}[kind])
			require.NotContains(t, errOut, "in use")
		})
	}
}
