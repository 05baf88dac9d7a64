// Package bench is seglog's benchmark harness: end-to-end workloads on real
// files (append, durable append, sequential and random reads, index
// lookups, recovery, open), each measured beside a raw-hardware baseline
// doing the least the workload must do, in the same process, on the same
// kind of files, alternating repetition by repetition. Every workload
// reports its figures and their ratios to the baselines; `seglog bench`
// prints them as a table, as JSON, or as a report with plots.
//
// Timings move from machine to machine and run to run; ratios to a
// baseline measured at the same moment move much less, so the ratios are
// what the targets (docs/architecture.md §9) are stated in.
package bench

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"
)

// Options shape a run. Zero fields take the defaults EnsureDefaults sets.
type Options struct {
	// Dir is where the workloads write (a directory under it, removed
	// afterwards). The default is os.TempDir().
	Dir string
	// Bytes is how much a throughput workload writes or reads per
	// repetition. The default is 256 MiB.
	Bytes int64
	// RecordSize and BatchRecords shape the batches: the defaults are 1 KiB
	// records, 100 to a batch.
	RecordSize, BatchRecords int
	// Producers append concurrently (append); Tablets are spread over. The
	// defaults are 1 and 1.
	Producers, Tablets int
	// Sync makes every append wait for its fsync (append).
	Sync bool
	// Repeat is how many repetitions each measurement takes; the median is
	// reported with the min–max. The default is 3.
	Repeat int
	// Ops is how many lookups or random reads are timed. The default is
	// 200,000 (20,000 for cold reads).
	Ops int
	// Segments is the segment count of the open workload. The default is
	// 10,000.
	Segments int
	// MaxProducers bounds the durable workload's 1, 2, 4, … producers. The
	// default is 8.
	MaxProducers int
	// Store is the object store URL of the tier workload; the default is
	// a file:// store in Dir.
	Store string
	// Progress, if set, is told how far a step is (done of total).
	Progress func(step string, done, total int64)
	// Serve, if set, is a command that runs `seglog serve` with args as a
	// process of its own: the cluster workload kills such brokers and
	// gives them 10,000 partitions. Without it those figures are not
	// measured.
	Serve func(args ...string) *exec.Cmd
	// NATSServer, if set, is a nats-server binary: the cluster workload
	// runs its fixed-rate schedule against NATS JetStream at R3 too
	// (nats.go), the peer of its latencies.
	NATSServer string
}

// EnsureDefaults fills zero fields.
func (o *Options) EnsureDefaults() {
	def := func(p *int, v int) {
		if *p <= 0 {
			*p = v
		}
	}
	if o.Dir == "" {
		o.Dir = os.TempDir()
	}
	if o.Bytes <= 0 {
		o.Bytes = 256 << 20
	}
	def(&o.RecordSize, 1024)
	def(&o.BatchRecords, 100)
	def(&o.Producers, 1)
	def(&o.Tablets, 1)
	def(&o.Repeat, 3)
	def(&o.Ops, 200_000)
	def(&o.Segments, 10_000)
	def(&o.MaxProducers, 8)
	if o.Progress == nil {
		o.Progress = func(string, int64, int64) {}
	}
}

// Figure is one measured quantity with its baseline and target.
type Figure struct {
	// Name is <workload>.<what>, e.g. "append.throughput".
	Name string `json:"name"`
	// Value is the median over the repetitions (for a latency, its p50).
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
	// Min and Max bound the repetitions.
	Min float64 `json:"min"`
	Max float64 `json:"max"`
	// P50 and P99 are set for latencies.
	P50 float64 `json:"p50,omitempty"`
	P99 float64 `json:"p99,omitempty"`
	// Baseline names what Value is compared with, and BaselineValue is
	// its median; Ratio is Value / BaselineValue (for throughputs higher
	// is better, for latencies and times lower is).
	Baseline      string  `json:"baseline,omitempty"`
	BaselineValue float64 `json:"baselineValue,omitempty"`
	Ratio         float64 `json:"ratio,omitempty"`
	// Target states the goal, and Met whether this run reached it (nil:
	// no target).
	Target string `json:"target,omitempty"`
	Met    *bool  `json:"met,omitempty"`
}

// Result is what one workload measured.
type Result struct {
	Workload string   `json:"workload"`
	Params   string   `json:"params"`
	Figures  []Figure `json:"figures"`
	// Samples are raw latencies (µs) for plots, by series name.
	Samples map[string][]float64 `json:"-"`
	// Series are (x, y) points for plots, by series name.
	Series map[string][][2]float64 `json:"-"`
}

// Fig returns the named figure.
func (r *Result) Fig(name string) (Figure, bool) {
	for _, f := range r.Figures {
		if f.Name == name {
			return f, true
		}
	}
	return Figure{}, false
}

// Workload runs one workload.
type Workload struct {
	Name  string
	Short string
	Run   func(o Options) (*Result, error)
}

// Workloads lists them in the order `seglog bench all` runs them.
var Workloads = []Workload{
	{"append", "producers append batches to tablets, against pwrite + CRC-32C of the same chunks", runAppend},
	{"durable", "fsync per append with 1, 2, 4, … producers (group commit), against write + fsync (one writer, 8 raw writers, 8 chunks per sync)", runDurable},
	{"read", "sequential reads through ReaderAt and WriteTo a loopback socket, against read(2)", runRead},
	{"lookup", "offset → position and timestamp → offset on full indexes, against a binary search in memory", runLookup},
	{"random-read", "one record at a random offset, hot and cold, against pread", runRandomRead},
	{"recovery", "unclean reopen: every batch CRC-checked, indexes rebuilt, against read + CRC-32C", runRecovery},
	{"open", "clean open of a tablet of many segments: time, heap, descriptors, against list + stat", runOpen},
	{"tier", "sealed segments uploaded as stream objects and read back through the tier, against raw PUT and GET", runTier},
	{"consume", "the consumer API (Tablet.Records): one record at a random offset and a whole scan, against ReadInto + CRC + Iter", runConsume},
	{"serve", "seglog serve through franz-go (and kcat) over loopback (produce, consume; 1, 4, 16, 1,000 partitions; 1, 10, 100 clients; server CPU-s/GB and RSS; durable acks; idle connections), against a null broker and kfake, each a process of its own", runServe},
	{"groups", "offset commits through the broker (kadm, 100 partitions, durable; 1 and 8 groups), against write + fdatasync; loading 100,000 groups' offsets at start, against a scan of the same tablets", runGroups},
	{"txn", "transactions through the broker (franz-go, 10 records each, committed; 1 and 8 producers) with their fsyncs, against write + fdatasync", runTxn},
	{"security", "produce and consume over SASL_SSL (TLS, SCRAM-SHA-512, ACLs on) and SCRAM logins, against PLAINTEXT without an authorizer", runSecurity},
	{"cluster", "three brokers over etcd (franz-go, acks=all): produce at replication factor 3 against 1, a leader's controlled shutdown (the longest gap between acknowledgements), the next leader's first acknowledgement after a leader's lease ends, and the move of a tiered partition against an all-local one", runCluster},
	{"compact", "one cleaning of a compacted tablet over 10,000 keys, against read + CRC-32C of its .log files; the offset map's memory per million keys", runCompact},
}

// Lookup returns the named workload.
func Lookup(name string) (Workload, bool) {
	for _, w := range Workloads {
		if w.Name == name {
			return w, true
		}
	}
	return Workload{}, false
}

// scratch makes a fresh directory under o.Dir; the caller removes it.
func scratch(o Options, name string) (string, error) {
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return "", err
	}
	return os.MkdirTemp(o.Dir, "seglog-bench-"+name+"-")
}

// median returns the median, min and max.
func median(xs []float64) (med, lo, hi float64) {
	if len(xs) == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	n := len(s)
	med = s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return med, s[0], s[n-1]
}

// percentile returns the p-th percentile (0–100) of sorted xs.
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// figure builds a Figure from repetitions of a value and of its baseline.
func figure(name, unit string, reps []float64, baseline string, baseReps []float64) Figure {
	f := Figure{Name: name, Unit: unit}
	f.Value, f.Min, f.Max = median(reps)
	if baseline != "" {
		f.Baseline = baseline
		f.BaselineValue, _, _ = median(baseReps)
		if f.BaselineValue != 0 {
			f.Ratio = f.Value / f.BaselineValue
		}
	}
	return f
}

// atLeast sets the target ratio ≥ r × the baseline.
func (f Figure) atLeast(r float64) Figure {
	return f.target(fmt.Sprintf("≥ %g × baseline", r), f.Ratio >= r)
}

// target sets a figure's target: met reports whether it was reached.
func (f Figure) target(text string, met bool) Figure {
	f.Target = text
	f.Met = &met
	return f
}

// latency builds a latency figure (µs) from samples.
func latency(name string, samples []float64, baseline string, base []float64) Figure {
	s := slices.Clone(samples)
	sort.Float64s(s)
	f := Figure{Name: name, Unit: "µs", Value: percentile(s, 50), P50: percentile(s, 50), P99: percentile(s, 99)}
	if len(s) > 0 {
		f.Min, f.Max = s[0], s[len(s)-1]
	}
	if baseline != "" {
		b := slices.Clone(base)
		sort.Float64s(b)
		f.Baseline, f.BaselineValue = baseline, percentile(b, 50)
		if f.BaselineValue != 0 {
			f.Ratio = f.Value / f.BaselineValue
		}
	}
	return f
}

// Machine describes where a run happened.
type Machine struct {
	GoVersion string `json:"goVersion"`
	OS        string `json:"os"`
	Arch      string `json:"arch"`
	CPUs      int    `json:"cpus"`
	CPU       string `json:"cpu"`
	MemoryGiB int    `json:"memoryGiB"`
	Kernel    string `json:"kernel"`
	FS        string `json:"filesystem"`
	Time      string `json:"time"`
}

// Describe returns the machine's description, with the filesystem of dir.
func Describe(dir string) Machine {
	m := Machine{GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(),
		Time: time.Now().UTC().Format(time.RFC3339)}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int
		if _, err := fmt.Sscanf(string(data), "MemTotal: %d kB", &kb); err == nil {
			m.MemoryGiB = (kb + 512<<10) >> 20
		}
	}
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(data))
	}
	m.FS = filesystemOf(dir)
	return m
}

// filesystemOf returns the type of the filesystem holding dir, from
// /proc/mounts (the longest mount point that is a prefix).
func filesystemOf(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	data, err := os.ReadFile("/proc/mounts")
	if err != nil {
		return ""
	}
	best, fs := "", ""
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		if (abs == f[1] || strings.HasPrefix(abs, strings.TrimSuffix(f[1], "/")+"/")) && len(f[1]) > len(best) {
			best, fs = f[1], f[2]
		}
	}
	return fs
}

// Run measures the raw baselines, then runs the named workloads (all of
// them for "all"), and with sizes the append workload at each record size
// (the throughput-against-record-size plot).
func Run(o Options, names []string, sizes []int) (*Report, error) {
	o.EnsureDefaults()
	if len(names) == 1 && names[0] == "all" {
		names = nil
		for _, w := range Workloads {
			names = append(names, w.Name)
		}
	}
	var run []Workload
	for _, n := range names {
		w, ok := Lookup(n)
		if !ok {
			return nil, fmt.Errorf("bench: no workload %q (there are %s)", n, workloadNames())
		}
		run = append(run, w)
	}
	o.Progress("baselines", 0, 1)
	b, err := MeasureBaselines(o)
	if err != nil {
		return nil, err
	}
	o.Progress("baselines", 1, 1)
	r := NewReport(o, Describe(o.Dir), b)
	for _, w := range run {
		res, err := w.Run(o)
		if err != nil {
			return nil, fmt.Errorf("bench: %s: %w", w.Name, err)
		}
		r.Add(res)
	}
	if len(sizes) > 0 {
		res, err := AppendSizes(o, sizes)
		if err != nil {
			return nil, err
		}
		r.Add(res)
	}
	return r, nil
}

func workloadNames() string {
	var out []string
	for _, w := range Workloads {
		out = append(out, w.Name)
	}
	return strings.Join(out, ", ") + " and all"
}
