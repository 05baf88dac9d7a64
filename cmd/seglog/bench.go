package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/seglog/seglog/bench"
)

func newBenchCmd() *cobra.Command {
	var (
		o          bench.Options
		size       string
		quick      bool
		asJSON     bool
		reportDir  string
		benchmarks string
		sizes      string
		cpuProfile string
		memProfile string
	)
	var long strings.Builder
	long.WriteString(`bench runs end-to-end workloads on real files, each beside a raw-hardware
baseline measured in the same process on the same kind of files (alternating,
repetition by repetition), and prints every figure with its ratio to its
baseline and its target (docs/architecture.md §9). WORKLOAD is one of:

`)
	for _, w := range bench.Workloads {
		fmt.Fprintf(&long, "  %-12s %s\n", w.Name, w.Short)
	}
	long.WriteString(`  all          every one of them

The hardware's own figures (pwrite, CRC-32C, read, memcpy, a 4 KiB write +
fdatasync, a binary search in memory) are measured first and printed too.
Progress bars go to stderr when it is a terminal. --json prints everything
(medians, min–max over repetitions, p50/p99 of latencies, the machine, and
each ratio as <workload>.ratio); --report DIR writes report.json, report.md
and SVG plots (throughput against record size, latency CDFs).`)
	cmd := &cobra.Command{
		Use:   "bench WORKLOAD|all [flags]",
		Short: "Measure the engine against raw-hardware baselines",
		Long:  long.String(),
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if size != "" {
				n, err := parseSize(size)
				if err != nil {
					return err
				}
				o.Bytes = n
			}
			if quick {
				o.Bytes = min(orDefault(o.Bytes, 256<<20), 256<<20)
				o.Ops = orDefaultInt(o.Ops, 50_000)
				o.Repeat = orDefaultInt(o.Repeat, 3)
			}
			var sz []int
			if sizes != "" {
				for _, s := range strings.Split(sizes, ",") {
					n, err := parseSize(strings.TrimSpace(s))
					if err != nil {
						return err
					}
					sz = append(sz, int(n))
				}
			}
			if f, ok := cmd.ErrOrStderr().(*os.File); ok && term.IsTerminal(int(f.Fd())) {
				o.Progress = progress(f)
			}
			if cpuProfile != "" {
				f, err := os.Create(cpuProfile)
				if err != nil {
					return err
				}
				if err := pprof.StartCPUProfile(f); err != nil {
					return err
				}
				defer func() { pprof.StopCPUProfile(); f.Close() }()
			}
			if memProfile != "" {
				runtime.MemProfileRate = 4096
			}
			o.Serve = selfServe
			r, err := bench.Run(o, args, sz)
			if err != nil {
				return err
			}
			if memProfile != "" {
				f, err := os.Create(memProfile)
				if err != nil {
					return err
				}
				if err := errors.Join(pprof.Lookup("allocs").WriteTo(f, 0), f.Close()); err != nil {
					return err
				}
			}
			command := "seglog bench " + strings.Join(os.Args[2:], " ")
			if reportDir != "" {
				files, err := r.WriteDir(reportDir, command)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s\n", strings.Join(files, ", "))
			}
			if benchmarks != "" {
				if err := os.WriteFile(benchmarks, []byte(benchmarksMarkdown(r, "make bench")), 0o644); err != nil {
					return err
				}
			}
			if asJSON {
				return r.WriteJSON(cmd.OutOrStdout())
			}
			return r.WriteTable(cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.Dir, "dir", "", "where to write (a directory under it, removed after; default the system temp dir)")
	fl.StringVar(&o.Store, "store", "", "the object store of the tier workload (default: a file:// store under --dir; S3 credentials from the AWS chain)")
	fl.StringVar(&size, "bytes", "", "bytes per repetition of a throughput workload, e.g. 1GiB (default 256MiB)")
	fl.IntVar(&o.RecordSize, "record-size", 0, "record size in bytes (default 1024)")
	fl.IntVar(&o.BatchRecords, "batch-records", 0, "records per batch (default 100)")
	fl.IntVar(&o.Producers, "producers", 0, "concurrent producers of the append workload (default 1)")
	fl.IntVar(&o.Tablets, "tablets", 0, "tablets the producers spread over, and of the recovery workload (default 1)")
	fl.BoolVar(&o.Sync, "sync", false, "append: every append waits for its fsync")
	fl.IntVar(&o.Repeat, "repeat", 0, "repetitions of each measurement (default 3)")
	fl.IntVar(&o.Ops, "ops", 0, "lookups and random reads timed (default 200000)")
	fl.IntVar(&o.Segments, "segments", 0, "segments of the open workload (default 10000)")
	fl.IntVar(&o.MaxProducers, "max-producers", 0, "durable: up to this many producers, doubling from 1 (default 8)")
	fl.StringVar(&sizes, "sizes", "", "also run append at these record sizes, e.g. 128,1KiB,8KiB (the plot of throughput against size)")
	fl.BoolVar(&quick, "quick", false, "a short profile (make bench): 256 MiB per repetition, 3 repetitions, 50000 lookups and reads")
	fl.BoolVar(&asJSON, "json", false, "print the report as JSON")
	fl.StringVar(&reportDir, "report", "", "write report.json, report.md and SVG plots into this directory")
	fl.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the run to this file (go tool pprof)")
	fl.StringVar(&memProfile, "memprofile", "", "write an allocation profile of the run to this file")
	fl.StringVar(&benchmarks, "benchmarks-md", "", "write the Markdown summary as this file (make bench: BENCHMARKS.md)")
	fl.StringVar(&o.NATSServer, "nats-server", os.Getenv("SEGLOG_NATS_SERVER"), "cluster: a nats-server binary, to run the fixed-rate latencies against NATS JetStream at R3 too (make bench builds v2.15.3; default $SEGLOG_NATS_SERVER)")
	return cmd
}

func orDefault(v, d int64) int64 {
	if v <= 0 {
		return d
	}
	return v
}

func orDefaultInt(v, d int) int {
	if v <= 0 {
		return d
	}
	return v
}

// parseSize parses 123, 64KiB, 256MiB, 1GiB (and KB/MB/GB as powers of ten).
func parseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return n * mult, nil
}

// progress draws a bar per step on f.
func progress(f *os.File) func(step string, done, total int64) {
	var mu sync.Mutex
	var bar *progressbar.ProgressBar
	current := ""
	return func(step string, done, total int64) {
		mu.Lock()
		defer mu.Unlock()
		if step != current || bar == nil {
			if bar != nil {
				_ = bar.Finish()
				fmt.Fprintln(f)
			}
			current = step
			bar = progressbar.NewOptions64(total, progressbar.OptionSetWriter(f), progressbar.OptionSetDescription(step),
				progressbar.OptionSetWidth(30), progressbar.OptionShowCount(), progressbar.OptionClearOnFinish())
		}
		_ = bar.Set64(done)
	}
}

// benchmarksMarkdown is BENCHMARKS.md.
func benchmarksMarkdown(r *bench.Report, command string) string {
	return `# Benchmarks

Written by ` + "`" + command + "`" + ` (` + "`seglog bench all --quick --sizes 128,1KiB,8KiB`" + `), which measures every
workload beside a raw-hardware baseline in the same run; the ratios are what the targets of docs/architecture.md
§9 are stated in. Figures are medians over the repetitions (min–max in brackets); latencies
are p50 / p99. ` + "`seglog bench WORKLOAD --help`" + ` lists the knobs (record size, batch records,
producers, tablets, sync, bytes per run).

` + r.Markdown(command) + `
Plots (written by the same run into docs/bench, with report.json holding every figure):

![append throughput against record size](docs/bench/append-sizes.svg)

![durable append throughput against producers](docs/bench/durable.svg)

![random read latency CDF](docs/bench/random-read-cdf.svg)
` + includedSection("docs/bench/peers.md", "# seglog and its peers", "## Peers (`make bench-peers`, run separately)") +
		includedSection("docs/bench/hostile.md", "# Hostile clients", "## Hostile clients (`make measure-hostile`, run separately)") +
		includedSection("docs/bench/fetch-sessions.md", "# Fetch sessions", "## Fetch sessions (`make measure-sessions`, run separately)")
}

// includedSection is a table measured apart from make bench (peers.md by
// make bench-peers, hostile.md and fetch-sessions.md by hand), if one was written, its heading
// made a section of BENCHMARKS.md.
func includedSection(path, heading, section string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return "\n" + strings.Replace(string(data), heading, section, 1)
}

// selfServe runs this program with args (seglog serve, for the cluster
// workload's broker processes). The same arguments go in the environment,
// where this package's test binary, which is no seglog, finds them
// (TestMain's SEGLOG_CHILD=cli).
func selfServe(args ...string) *exec.Cmd {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	cmd := exec.Command(exe, args...)
	argJSON, _ := json.Marshal(args)
	cmd.Env = append(os.Environ(), "SEGLOG_CHILD=cli", "SEGLOG_CHILD_ARGS="+string(argJSON))
	return cmd
}
