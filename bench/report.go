package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Report is a whole run: the machine, the raw baselines, every workload's
// result, and every ratio by name (<workload>.ratio for a workload's first
// figure, <figure>.ratio for the others).
type Report struct {
	Machine   Machine            `json:"machine"`
	Options   ReportOptions      `json:"options"`
	Baselines Baselines          `json:"baselines"`
	Results   []*Result          `json:"results"`
	Ratios    map[string]float64 `json:"ratios"`
}

// ReportOptions are the options a report was run with, as printed.
type ReportOptions struct {
	Bytes        int64 `json:"bytes"`
	RecordSize   int   `json:"recordSize"`
	BatchRecords int   `json:"batchRecords"`
	Producers    int   `json:"producers"`
	Tablets      int   `json:"tablets"`
	Repeat       int   `json:"repeat"`
}

// NewReport starts a report of a run with o.
func NewReport(o Options, m Machine, b Baselines) *Report {
	return &Report{Machine: m, Baselines: b, Ratios: map[string]float64{}, Options: ReportOptions{Bytes: o.Bytes,
		RecordSize: o.RecordSize, BatchRecords: o.BatchRecords, Producers: o.Producers, Tablets: o.Tablets, Repeat: o.Repeat}}
}

// Add adds a result and its ratios.
func (r *Report) Add(res *Result) {
	r.Results = append(r.Results, res)
	for i, f := range res.Figures {
		if f.Baseline == "" {
			continue
		}
		if i == 0 {
			r.Ratios[res.Workload+".ratio"] = f.Ratio
		}
		r.Ratios[f.Name+".ratio"] = f.Ratio
	}
}

func formatValue(v float64) string {
	switch {
	case v == 0:
		return "0"
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

func met(f Figure) string {
	switch {
	case f.Met == nil:
		return ""
	case *f.Met:
		return "yes"
	default:
		return "NO"
	}
}

func valueText(f Figure) string {
	s := formatValue(f.Value) + " " + f.Unit
	if f.P99 != 0 {
		s = fmt.Sprintf("p50 %s / p99 %s %s", formatValue(f.P50), formatValue(f.P99), f.Unit)
	} else if f.Min != f.Max {
		s += fmt.Sprintf(" (%s–%s)", formatValue(f.Min), formatValue(f.Max))
	}
	return s
}

func baselineText(f Figure) string {
	if f.Baseline == "" {
		return ""
	}
	return fmt.Sprintf("%s %s (%s)", formatValue(f.BaselineValue), f.Unit, f.Baseline)
}

func ratioText(f Figure) string {
	if f.Baseline == "" {
		return ""
	}
	return fmt.Sprintf("%.2f×", f.Ratio)
}

// WriteTable prints the results as a table.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tseglog\tbaseline\tratio\ttarget\tmet")
	for _, res := range r.Results {
		for _, f := range res.Figures {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", f.Name, valueText(f), baselineText(f), ratioText(f), f.Target, met(f))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	b := r.Baselines
	_, err := fmt.Fprintf(w, "\nhardware: pwrite %.0f MB/s, CRC-32C %.0f MB/s, read %.0f MB/s, memcpy %.0f MB/s, "+
		"4 KiB write + fdatasync p50 %.0f µs, binary search %.0f ns; %d CPUs, %s, %s\n",
		b.WriteMBps, b.CRCMBps, b.ReadMBps, b.MemcpyMBps, b.Fsync4KiBMicros, b.SearchNs, r.Machine.CPUs, r.Machine.CPU, r.Machine.FS)
	return err
}

// WriteJSON writes the report as one JSON object.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// Markdown renders the report as a Markdown summary.
func (r *Report) Markdown(command string) string {
	var sb strings.Builder
	m := r.Machine
	fmt.Fprintf(&sb, "Machine: %d × %s, %d GiB, Linux %s, %s; %s; %s.\n\n", m.CPUs, m.CPU, m.MemoryGiB, m.Kernel, m.FS, m.GoVersion, m.Time)
	fmt.Fprintf(&sb, "Reproduce: `%s`\n\n", command)
	sb.WriteString("| figure | seglog | baseline | ratio | target | met |\n|---|---|---|---|---|---|\n")
	for _, res := range r.Results {
		for _, f := range res.Figures {
			fmt.Fprintf(&sb, "| %s | %s | %s | %s | %s | %s |\n", f.Name, valueText(f), baselineText(f), ratioText(f), f.Target, met(f))
		}
	}
	b := r.Baselines
	fmt.Fprintf(&sb, "\nRaw hardware in the same run: pwrite of 100 KiB chunks %.0f MB/s, CRC-32C %.0f MB/s, read(2) "+
		"of a cached file %.0f MB/s, memcpy %.0f MB/s, 4 KiB write + fdatasync p50 %.0f µs, "+
		"`slices.BinarySearch` over 1.31 M int64 %.0f ns.\n\nWorkloads:\n\n", b.WriteMBps, b.CRCMBps, b.ReadMBps, b.MemcpyMBps,
		b.Fsync4KiBMicros, b.SearchNs)
	for _, res := range r.Results {
		fmt.Fprintf(&sb, "- `%s`: %s\n", res.Workload, res.Params)
	}
	return sb.String()
}

// WriteDir writes report.json, report.md and the plots into dir.
func (r *Report) WriteDir(dir, command string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(filepath.Join(dir, "report.json"))
	if err != nil {
		return nil, err
	}
	if err := r.WriteJSON(f); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	written := []string{filepath.Join(dir, "report.json"), filepath.Join(dir, "report.md")}
	if err := os.WriteFile(written[1], []byte("# seglog bench\n\n"+r.Markdown(command)), 0o644); err != nil {
		return nil, err
	}
	plots, err := r.plots(dir)
	return append(written, plots...), err
}

// plots draws throughput against record size and latency CDFs, as SVG.
func (r *Report) plots(dir string) ([]string, error) {
	var out []string
	for _, res := range r.Results {
		switch {
		case len(res.Series) > 0:
			p := plot.New()
			p.Title.Text = "seglog " + res.Workload
			p.Y.Label.Text = "MB/s"
			p.X.Label.Text = "record size (bytes)"
			if res.Workload == "durable" {
				p.X.Label.Text = "producers"
			} else {
				p.X.Scale = plot.LogScale{}
				p.X.Tick.Marker = plot.LogTicks{Prec: -1}
			}
			var args []any
			for _, name := range sortedKeys(res.Series) {
				pts := make(plotter.XYs, len(res.Series[name]))
				for i, xy := range res.Series[name] {
					pts[i].X, pts[i].Y = xy[0], xy[1]
				}
				args = append(args, name, pts)
			}
			if err := plotutil.AddLinePoints(p, args...); err != nil {
				return nil, err
			}
			path := filepath.Join(dir, res.Workload+".svg")
			if err := p.Save(7*vg.Inch, 4*vg.Inch, path); err != nil {
				return nil, err
			}
			out = append(out, path)
		case len(res.Samples) > 0:
			p := plot.New()
			p.Title.Text = "seglog " + res.Workload + ": latency CDF"
			p.X.Label.Text = "µs"
			p.Y.Label.Text = "fraction of reads"
			p.X.Scale = plot.LogScale{}
			p.X.Tick.Marker = plot.LogTicks{Prec: -1}
			var args []any
			for _, name := range sortedKeys(res.Samples) {
				s := slices.Clone(res.Samples[name])
				slices.Sort(s)
				step := max(1, len(s)/500)
				var pts plotter.XYs
				for i := 0; i < len(s); i += step {
					pts = append(pts, plotter.XY{X: max(s[i], 0.01), Y: float64(i+1) / float64(len(s))})
				}
				args = append(args, name, pts)
			}
			if err := plotutil.AddLines(p, args...); err != nil {
				return nil, err
			}
			path := filepath.Join(dir, res.Workload+"-cdf.svg")
			if err := p.Save(7*vg.Inch, 4*vg.Inch, path); err != nil {
				return nil, err
			}
			out = append(out, path)
		}
	}
	return out, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
