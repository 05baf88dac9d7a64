package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBenchCommand(t *testing.T) {
	t.Parallel()
	d := t.TempDir()
	md := filepath.Join(d, "BENCHMARKS.md")
	code, out, errOut := runSeglog(t, "bench", "lookup", "open", "--ops", "200", "--segments", "20", "--repeat", "1",
		"--bytes", "4MiB", "--dir", d, "--json", "--benchmarks-md", md)
	require.Equal(t, 0, code, errOut)
	var r struct {
		Ratios  map[string]float64 `json:"ratios"`
		Results []struct {
			Workload string `json:"workload"`
		} `json:"results"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &r))
	require.Len(t, r.Results, 2)
	require.Contains(t, r.Ratios, "lookup.ratio")
	require.Contains(t, r.Ratios, "open.ratio")
	data, err := os.ReadFile(md)
	require.NoError(t, err)
	require.Contains(t, string(data), "| lookup.offset.warm-tail |")

	code, out, _ = runSeglog(t, "bench", "lookup", "--ops", "200", "--repeat", "1", "--bytes", "4MiB", "--dir", d)
	require.Equal(t, 0, code)
	require.Contains(t, out, "lookup.offset.random")
	require.Contains(t, out, "hardware: pwrite")

	code, _, errOut = runSeglog(t, "bench", "nope", "--dir", d)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, `no workload "nope"`)
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"123": 123, "64KiB": 64 << 10, "256MiB": 256 << 20, "1GiB": 1 << 30, "2MB": 2e6, "100B": 100} {
		got, err := parseSize(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", "x", "-1", "0", "1TiB"} {
		_, err := parseSize(bad)
		require.Error(t, err, bad)
	}
}
