package main

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/seglog/seglog/internal/testenv"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog/logfile"
)

// damaged writes 2000 records of topic t in batches of 50 over two or more
// segments, closed cleanly, and returns the data directory and the base of
// its last segment.
func damaged(t *testing.T) (string, int64) {
	d := filepath.Join(t.TempDir(), "data")
	var sb strings.Builder
	for i := range 2000 {
		sb.WriteString("r")
		sb.WriteString(strings.Repeat("x", i%7))
		sb.WriteString("\n")
	}
	code, _, errOut := runWithStdin(t, sb.String(), "produce", "--data-dir", d, "--topic", "t", "--batch-records", "50",
		"--config", "segment.bytes=20000")
	require.Equal(t, 0, code, errOut)
	logs, err := filepath.Glob(filepath.Join(d, "t-0", "*.log"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(logs), 2)
	n, err := logfile.ParseFilename(filepath.Base(logs[len(logs)-1]))
	require.NoError(t, err)
	return d, n.Base
}

func consumeCount(t *testing.T, args ...string) (int, int, string) {
	code, out, errOut := runWithStdin(t, "", append([]string{"consume", "--format", "value"}, args...)...)
	out = strings.TrimSpace(out)
	if out == "" {
		return code, 0, errOut
	}
	return code, len(strings.Split(out, "\n")), errOut
}

// A sealed segment cut short after a clean close: consume stops at the gap
// with the file, position and offsets, instead of skipping 800 acknowledged
// records; a read from past the gap goes on; verify names it damage.
func TestConsumeStopsAtAGap(t *testing.T) {
	d, lastBase := damaged(t)
	logs, _ := filepath.Glob(filepath.Join(d, "t-0", "*.log"))
	sealed := logs[len(logs)-2] // the segment before the last
	next := lastBase
	info, err := os.Stat(sealed)
	require.NoError(t, err)
	require.NoError(t, os.Truncate(sealed, info.Size()/2))
	code, n, errOut := consumeCount(t, "--data-dir", d, "--topic", "t")
	require.Equal(t, 1, code)
	require.Less(t, int64(n), next)
	require.Contains(t, errOut, sealed)
	require.Contains(t, errOut, "are missing")
	require.Contains(t, errOut, "the next segment starts at "+strconv.FormatInt(next, 10))
	code, n, errOut = consumeCount(t, "--data-dir", d, "--topic", "t", "--from-offset", strconv.FormatInt(next, 10))
	require.Equal(t, 0, code, errOut)
	require.Equal(t, 2000-int(next), n, "past the gap the log reads on")
	code, out, _ := runWithStdin(t, "", "verify", "--data-dir", d)
	require.Equal(t, 1, code)
	require.Contains(t, out, "below the log end of a directory closed cleanly")
}

// A directory closed cleanly whose active segment's last batch is damaged:
// a reader recovers in memory and prints the records before the damage,
// says what it cut and that acknowledged records are lost, and exits 1.
func TestConsumeReportsDamageAtTheEnd(t *testing.T) {
	d, lastBase := damaged(t)
	active := filepath.Join(d, "t-0", logfile.Filename(lastBase, logfile.Log))
	data, err := os.ReadFile(active)
	require.NoError(t, err)
	last := 0
	for pos := 0; pos+12 <= len(data); pos += 12 + int(binary.BigEndian.Uint32(data[pos+8:])) {
		last = pos
	}
	binary.BigEndian.PutUint32(data[last+8:], 999999) // the last batch's length
	require.NoError(t, os.WriteFile(active, data, 0o640))
	before := testenv.Tree(t, d)
	code, n, errOut := consumeCount(t, "--data-dir", d, "--topic", "t")
	require.Equal(t, 1, code)
	require.Equal(t, 1950, n, "every record before the damaged batch")
	require.Contains(t, errOut, "damage: "+active+": truncated")
	require.Contains(t, errOut, "durable offsets lost (offsets [1950, 2000))")
	require.Contains(t, errOut, "in memory only")
	require.Equal(t, before, testenv.Tree(t, d), "a reader cuts nothing on disk")

	code, out, errOut := runSeglog(t, "recover", "--data-dir", d)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "truncated")
	require.Contains(t, out, "durable offsets lost")
}
