package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A record larger than max.message.bytes fails alone, with its line, its
// size, the limit and what to do; the lines before it are produced and the
// summary says so.
func TestProduceRecordTooLarge(t *testing.T) {
	d := filepath.Join(t.TempDir(), "data")
	in := lines(150) + strings.Repeat("x", 5_000_073) + "\n" + "after\n"
	code, out, errOut := runWithStdin(t, in, "produce", "--data-dir", d, "--topic", "t", "--batch-records", "100")
	require.Equal(t, 1, code)
	require.JSONEq(t, `{"records":150,"batches":2,"firstOffset":0,"lastOffset":149}`, out)
	require.Contains(t, errOut, "record too large: line 151 is 5000073 bytes, the limit is max.message.bytes=1048588; raise it with --config max.message.bytes=N")
	code, out, _ = runWithStdin(t, "", "consume", "--data-dir", d, "--topic", "t", "--format", "value")
	require.Equal(t, 0, code)
	require.Len(t, strings.Split(strings.TrimSpace(out), "\n"), 150)

	// Batches are cut before they would pass the limit: many large lines
	// that fit one by one all go in.
	big := strings.Repeat(strings.Repeat("y", 300_000)+"\n", 10)
	code, out, errOut = runWithStdin(t, big, "produce", "--data-dir", d, "--topic", "big")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, `"records":10`)
}

func TestArgumentsRefused(t *testing.T) {
	d := filepath.Join(t.TempDir(), "data")
	code, _, errOut := runWithStdin(t, "a\n", "produce", "--data-dir", d, "--topic", "t")
	require.Equal(t, 0, code, errOut)
	empty := filepath.Join(t.TempDir(), "empty")
	require.NoError(t, os.WriteFile(empty, nil, 0o644))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"append", "--data-dir", d, "--topic", "t", "--batches", empty}, "no batch to append: " + empty + " is empty"},
		{[]string{"append", "--data-dir", d, "--topic", "t", "--batches", "-"}, "no batch to append: stdin is empty"},
		{[]string{"consume", "--data-dir", d, "--topic", "t", "--from-offset", "-5"}, "--from-offset -5 is negative"},
		{[]string{"consume", "--data-dir", d, "--topic", "t", "--from-time", "-1"}, "--from-time -1 is negative"},
		{[]string{"consume", "--data-dir", d, "--topic", "t", "--max-records", "-2"}, "--max-records -2 is negative"},
	} {
		code, _, errOut := runWithStdin(t, "", c.args...)
		require.Equal(t, 1, code, c.args)
		require.Contains(t, errOut, c.want, c.args)
	}
}

// Messages are for people: no Go package prefixes, whatever failed.
func TestMessagesHaveNoPackagePrefixes(t *testing.T) {
	foreign := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(foreign, "f"), nil, 0o644))
	d := filepath.Join(t.TempDir(), "data")
	code, _, _ := runWithStdin(t, "a\n", "produce", "--data-dir", d, "--topic", "t")
	require.Equal(t, 0, code)
	require.NoError(t, os.WriteFile(filepath.Join(d, "t-0", "partition.metadata"), []byte("garbage"), 0o644))
	prefix := regexp.MustCompile(`(^|: |\(|\n)(seglog: )?(tablet|checkpoint|vfs|recovery|segment|tiering|record|mmapfile|offsetindex|timeindex|txnindex|writerstate|leaderepoch|logfile|group|txn|store|broker|auth|seglog|flock): `)
	for _, args := range [][]string{
		{"consume", "--data-dir", foreign, "--topic", "t"},
		{"consume", "--data-dir", d, "--topic", "nope"},
		{"consume", "--data-dir", d, "--topic", "t", "--from-offset", "99"},
		{"produce", "--data-dir", d, "--topic", "t", "--config", "segment.bytes=x"},
		{"produce", "--data-dir", d, "--topic", "t", "--config", "segment.byte=1"},
		{"tier", "--data-dir", d, "--store", "ftp://x"},
		{"dump", filepath.Join(foreign, "f")},
		{"groups", "--data-dir", d, "--describe", "--group", "nobody"},
	} {
		_, _, errOut := runWithStdin(t, "", args...)
		require.NotEmpty(t, errOut, "%v", args)
		for _, line := range strings.Split(strings.TrimSpace(errOut), "\n") {
			line = strings.TrimPrefix(line, "seglog: ")
			require.NotRegexp(t, prefix, line, "%v", args)
			require.NotContains(t, line, "flock", "%v", args)
		}
	}
	_, _, errOut := runWithStdin(t, "", "produce", "--data-dir", d, "--topic", "t", "--config", "segment.byte=1")
	require.Contains(t, errOut, `unknown key "segment.byte": did you mean "segment.bytes"?`)

	// A directory in use says by whom, not which system call failed.
	cmd, lines := startServe(t, "--data-dir", d, "--config", "listeners=PLAINTEXT://127.0.0.1:0")
	servedAddr(t, cmd, lines)
	code, _, errOut = runSeglog(t, "groups", "--data-dir", d, "--list")
	require.Equal(t, 1, code)
	require.Regexp(t, `^seglog: data directory is in use: \S+ is open in process \d+ \(a reader cannot open it beside a writer\)\n$`, errOut)
	stopServe(t, cmd)
}

// --help says which flags are optional, as the README does.
func TestHelpMarksOptionalTopic(t *testing.T) {
	for _, cmd := range []string{"offsets", "tier"} {
		code, out, _ := runWithStdin(t, "", cmd, "--help")
		require.Equal(t, 0, code)
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, "--topic") {
				require.NotContains(t, line, "required", "%s --help: %s", cmd, line)
			}
		}
	}
}
