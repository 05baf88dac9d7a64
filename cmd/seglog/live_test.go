package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog/logfile"
)

// liveWriter is `seglog produce --sync` running in a child process,
// acknowledging each line (one record a batch) on its stdout.
type liveWriter struct {
	t     *testing.T
	cmd   *exec.Cmd
	in    io.WriteCloser
	acks  *bufio.Scanner
	acked int
}

func startWriter(t *testing.T, dir string) *liveWriter {
	args, err := json.Marshal([]string{"produce", "--data-dir", dir, "--topic", "live", "--batch-records", "1", "--sync",
		"--acks-file", "/dev/stdout", "--config", "segment.bytes=4096"})
	require.NoError(t, err)
	cmd := childCmd("cli", "SEGLOG_CHILD_ARGS="+string(args))
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	w := &liveWriter{t: t, cmd: cmd, in: in, acks: bufio.NewScanner(out)}
	t.Cleanup(func() {
		if w.cmd.ProcessState == nil {
			_ = w.cmd.Process.Kill()
			_ = w.cmd.Wait()
		}
	})
	return w
}

// write produces n more lines and waits for each acknowledgement.
func (w *liveWriter) write(n int) {
	for range n {
		_, err := fmt.Fprintf(w.in, "line %d\n", w.acked)
		require.NoError(w.t, err)
		require.True(w.t, w.acks.Scan(), "the writer died: %s", w.cmd.Stderr)
		require.Equal(w.t, fmt.Sprintf("%d %d", w.acked, w.acked), w.acks.Text())
		w.acked++
	}
}

// finish closes stdin and waits for a clean exit.
func (w *liveWriter) finish() {
	require.NoError(w.t, w.in.Close())
	for w.acks.Scan() { // the summary
	}
	require.NoError(w.t, w.cmd.Wait(), "%s", w.cmd.Stderr)
}

// runChild runs a seglog command line in a child process.
func runChild(t *testing.T, args ...string) (int, string, string) {
	argJSON, err := json.Marshal(args)
	require.NoError(t, err)
	cmd := childCmd("cli", "SEGLOG_CHILD_ARGS="+string(argJSON))
	var out strings.Builder
	cmd.Stdout = &out
	err = cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), out.String(), fmt.Sprint(cmd.Stderr)
	}
	require.NoError(t, err)
	return 0, out.String(), fmt.Sprint(cmd.Stderr)
}

// Every command run against a live writer in another process is refused
// with a message naming the writer, and nothing the writer acknowledged is
// lost; once it is gone every command works and finds every record.
func TestCommandsBesideALiveWriter(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	w := startWriter(t, dir)
	w.write(300) // several segments
	pid := strconv.Itoa(w.cmd.Process.Pid)
	seg := filepath.Join(dir, "live-0", logfile.Filename(0, logfile.Log))
	for _, args := range [][]string{
		{"recover", "--data-dir", dir},
		{"consume", "--data-dir", dir, "--topic", "live"},
		{"offsets", "--data-dir", dir},
		{"verify", "--data-dir", dir},
		{"dump", seg},
		{"tier", "ls", "--store", "file://" + t.TempDir(), "--data-dir", dir},
		{"produce", "--data-dir", dir, "--topic", "live"},
		{"end-txn", "--data-dir", dir, "--topic", "live", "--producer-id", "1", "--producer-epoch", "0", "--commit"},
	} {
		code, _, stderr := runChild(t, args...)
		require.Equal(t, 1, code, "%v: %s", args, stderr)
		require.Contains(t, stderr, "in use", args)
		require.Contains(t, stderr, "process "+pid, "%v names the writer: %s", args, stderr)
		w.write(5) // the writer goes on, unharmed
	}
	w.finish()

	code, out, stderr := runChild(t, "consume", "--data-dir", dir, "--topic", "live", "--format", "value")
	require.Equal(t, 0, code, stderr)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, w.acked, "every acknowledged record is there")
	for i, l := range lines {
		require.Equal(t, fmt.Sprintf("line %d", i), l)
	}
	code, out, stderr = runChild(t, "verify", "--data-dir", dir)
	require.Equal(t, 0, code, "%s%s", out, stderr)
	_, err := os.Stat(dir)
	require.NoError(t, err)
}
