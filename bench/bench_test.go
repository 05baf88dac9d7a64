package bench

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// tiny runs every workload at a size that checks the harness, not the
// engine's speed: every figure is there, positive where it must be, with
// its baseline and ratio.
func tiny(t *testing.T) Options {
	return Options{Dir: t.TempDir(), Bytes: 2 << 20, Repeat: 1, Ops: 300, Segments: 50, MaxProducers: 2, RecordSize: 512, BatchRecords: 10}
}

func TestEveryWorkloadReports(t *testing.T) {
	o := tiny(t)
	r, err := Run(o, []string{"all"}, []int{256, 2048})
	require.NoError(t, err)
	require.Len(t, r.Results, len(Workloads)+1)
	for _, res := range r.Results {
		require.NotEmpty(t, res.Figures, res.Workload)
		for _, f := range res.Figures {
			require.True(t, strings.HasPrefix(f.Name, res.Workload+"."), f.Name)
			if f.Baseline != "" {
				require.Positive(t, f.Value, f.Name)
				require.Positive(t, f.BaselineValue, f.Name)
				require.InDelta(t, f.Value/f.BaselineValue, f.Ratio, 1e-9, f.Name)
			}
		}
	}
	for _, w := range Workloads {
		_, ok := r.Ratios[w.Name+".ratio"]
		require.True(t, ok, "%s.ratio", w.Name)
	}
	hot, ok := r.Results[4].Fig("random-read.hot")
	require.True(t, ok)
	require.LessOrEqual(t, hot.P50, hot.P99)
	fds, ok := r.Results[6].Fig("open.descriptors")
	require.True(t, ok)
	require.Less(t, fds.Max, float64(50), "a 50-segment tablet opens without a descriptor per segment")
	up, ok := r.Results[7].Fig("tier.upload")
	require.True(t, ok)
	require.Positive(t, up.Ratio)
	fb, ok := r.Results[7].Fig("tier.first-byte")
	require.True(t, ok)
	require.LessOrEqual(t, fb.P50, fb.P99)
	rr, ok := r.Results[8].Fig("consume.random")
	require.True(t, ok)
	require.LessOrEqual(t, rr.P50, rr.P99)
	require.Positive(t, rr.Ratio)
	allocs, ok := r.Results[8].Fig("consume.allocs-per-batch")
	require.True(t, ok)
	require.NotNil(t, allocs.Met)
	for _, res := range r.Results {
		if res.Workload != "cluster" {
			continue
		}
		mv, ok := res.Fig("cluster.move.tiered-copied")
		require.True(t, ok)
		require.NotNil(t, mv.Met)
		require.True(t, *mv.Met, "a tiered partition's move copies at most twice its local tail: %+v", mv)
		require.Less(t, mv.Ratio, 0.5, "far less than the whole log")
	}
	require.Positive(t, r.Baselines.WriteMBps)
	require.Positive(t, r.Baselines.Fsync4KiBMicros)

	out := t.TempDir()
	files, err := r.WriteDir(out, "seglog bench all")
	require.NoError(t, err)
	for _, name := range []string{"report.json", "report.md", "durable.svg", "random-read-cdf.svg", "append-sizes.svg"} {
		require.Contains(t, files, filepath.Join(out, name))
		info, err := os.Stat(filepath.Join(out, name))
		require.NoError(t, err)
		require.Positive(t, info.Size(), name)
	}
	data, err := os.ReadFile(filepath.Join(out, "report.json"))
	require.NoError(t, err)
	var back struct {
		Ratios  map[string]float64 `json:"ratios"`
		Machine Machine            `json:"machine"`
	}
	require.NoError(t, json.Unmarshal(data, &back))
	require.Contains(t, back.Ratios, "append.ratio")
	require.Equal(t, r.Machine.CPUs, back.Machine.CPUs)
	md := r.Markdown("seglog bench all")
	require.Contains(t, md, "| append.throughput |")
	entries, err := os.ReadDir(o.Dir)
	require.NoError(t, err)
	require.Empty(t, entries, "the workloads remove what they wrote")
}

func TestUnknownWorkload(t *testing.T) {
	_, err := Run(tiny(t), []string{"nope"}, nil)
	require.ErrorContains(t, err, `no workload "nope"`)
}

func TestMedianAndPercentile(t *testing.T) {
	m, lo, hi := median([]float64{5, 1, 3})
	require.Equal(t, []float64{3, 1, 5}, []float64{m, lo, hi})
	m, _, _ = median([]float64{4, 1, 3, 2})
	require.Equal(t, 2.5, m)
	s := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	require.Equal(t, 5.0, percentile(s, 50))
	require.Equal(t, 10.0, percentile(s, 99))
	require.Equal(t, 1.0, percentile(s, 0))
}
