package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestVerifyCommand(t *testing.T) {
	d := t.TempDir()
	code, _, errOut := runWithStdin(t, lines(3000), "produce", "--data-dir", d, "--topic", "orders",
		"--batch-records", "50", "--config", "segment.bytes=20000")
	require.Equal(t, 0, code, errOut)
	code, _, errOut = runWithStdin(t, lines(10), "produce", "--data-dir", d, "--topic", "clicks", "--partition", "2")
	require.Equal(t, 0, code, errOut)

	code, out, errOut := runSeglog(t, "verify", "--data-dir", d)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "orders-0: offsets 0..3000, ")
	require.Contains(t, out, "3000 record(s): ok")
	require.Contains(t, out, "clicks-2: offsets 0..10, ")
	require.Contains(t, out, ": 2 tablet(s), ")
	require.True(t, strings.HasSuffix(out, ": OK\n"), out)

	// A flipped bit in a sealed segment: exit 1, the file and position named.
	logPath := filepath.Join(d, "orders-0", "00000000000000000000.log")
	data, err := os.ReadFile(logPath)
	require.NoError(t, err)
	data[len(data)/2] ^= 1
	require.NoError(t, os.WriteFile(logPath, data, 0o644))
	code, out, _ = runSeglog(t, "verify", "--data-dir", d)
	require.Equal(t, 1, code)
	require.Contains(t, out, "  PROBLEM "+logPath+" at byte ")
	require.Contains(t, out, "crc mismatch")
	require.Contains(t, out, "clicks-2: offsets 0..10, 1 segment(s), 1 batch(es), 10 record(s): ok")

	// The other tablet alone is fine.
	code, out, errOut = runSeglog(t, "verify", "--data-dir", d, "--topic", "clicks", "--partition", "2")
	require.Equal(t, 0, code, errOut)
	require.NotContains(t, out, "orders-0")

	code, out, _ = runSeglog(t, "verify", "--data-dir", d, "--json")
	require.Equal(t, 1, code)
	var report struct {
		OK      bool `json:"ok"`
		Tablets []struct {
			Tablet   string `json:"tablet"`
			Problems []struct {
				File   string `json:"file"`
				Offset int64  `json:"offset"`
				Reason string `json:"reason"`
			} `json:"problems"`
		} `json:"tablets"`
		BytesRead int64 `json:"bytesRead"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &report))
	require.False(t, report.OK)
	require.Len(t, report.Tablets, 2)
	require.Equal(t, "clicks-2", report.Tablets[0].Tablet)
	require.Empty(t, report.Tablets[0].Problems)
	require.NotEmpty(t, report.Tablets[1].Problems)
	require.Equal(t, logPath, report.Tablets[1].Problems[0].File)
	require.Positive(t, report.BytesRead)
}

func TestVerifyCommandRefuses(t *testing.T) {
	code, _, errOut := runSeglog(t, "verify")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "--data-dir is required")
	absent := filepath.Join(t.TempDir(), "absent")
	code, _, errOut = runSeglog(t, "verify", "--data-dir", absent)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "no data directory "+absent, "a missing directory is no healthy one")
	_, err := os.Stat(absent)
	require.ErrorIs(t, err, os.ErrNotExist, "and verify does not create it")
	code, _, errOut = runSeglog(t, "verify", "--data-dir", t.TempDir(), "--topic", "x")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "has no tablet x-0")
}

func TestCommandsRefuseHostileTopics(t *testing.T) {
	d := filepath.Join(t.TempDir(), "data")
	for _, topic := range []string{"../escape", "a/b", "a\x00b", strings.Repeat("x", 250), ".."} {
		code, _, errOut := runWithStdin(t, "line\n", "produce", "--data-dir", d, "--topic", topic)
		require.Equal(t, 1, code, topic)
		require.Contains(t, errOut, "invalid topic name", topic)
	}
	entries, err := os.ReadDir(filepath.Dir(d))
	require.NoError(t, err)
	for _, e := range entries {
		require.Equal(t, "data", e.Name(), "nothing outside the data directory")
	}
	entries, err = os.ReadDir(d)
	require.NoError(t, err)
	for _, e := range entries {
		require.False(t, e.IsDir(), "no tablet directory: %s", e.Name())
	}
}
