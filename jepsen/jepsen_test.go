package jepsen

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var (
	faults = flag.Int("jepsen.faults", 0, "run TestJepsen with this many faults (make jepsen)")
	seed   = flag.Int64("jepsen.seed", 0, "TestJepsen's seed (0: the time)")
	keep   = flag.String("jepsen.dir", "", "where TestJepsen writes its run (default: a temporary directory, removed)")
	kinds  = flag.String("jepsen.kinds", "", "TestJepsen's faults, comma-separated (default: every kind, in turn)")
)

// binaries are the seglog binary (SEGLOG_BIN, else built here) and etcd's
// (SEGLOG_ETCD, else Debian's /usr/bin/etcd); the test is skipped, saying
// why, without etcd.
func binaries(t *testing.T) (seglog, etcd string) {
	t.Helper()
	etcd = os.Getenv("SEGLOG_ETCD")
	if etcd == "" {
		etcd = "/usr/bin/etcd"
	}
	if _, err := os.Stat(etcd); err != nil {
		t.Skipf("no etcd binary at %s (Debian's etcd-server; make test installs it): %v", etcd, err)
	}
	if seglog = os.Getenv("SEGLOG_BIN"); seglog != "" {
		return seglog, etcd
	}
	seglog = filepath.Join(t.TempDir(), "seglog")
	out, err := exec.Command("go", "build", "-o", seglog, "github.com/seglog/seglog/cmd/seglog").CombinedOutput()
	require.NoError(t, err, "building seglog: %s", out)
	return seglog, etcd
}

// The smoke run make test runs: a power cut of a broker followed, as soon
// as it listens again, by a crash of the controller — the combination
// that lost acknowledged records (a restarted broker resumed its old
// leaderships with its shorter log) — then a plain power cut. Any anomaly
// fails it.
func TestSmoke(t *testing.T) {
	seglog, etcd := binaries(t)
	dir := t.TempDir()
	rep, err := Run(context.Background(), Options{Seglog: seglog, Etcd: etcd, Dir: dir, Seed: 1,
		Schedule: []Step{{Fault: FaultCutThenController, Quiet: 2 * time.Second}, {Fault: FaultPowerCut, Quiet: time.Second, Pick: 1}},
		Logf:     t.Logf, TB: t})
	if rep != nil {
		t.Log("\n" + rep.String())
	}
	require.NoError(t, err)
	require.Positive(t, rep.Result.Acked, "the producers wrote nothing")
	if !rep.Result.Valid() {
		dumpLogs(t, dir)
	}
	require.True(t, rep.Result.Valid(), "anomalies found:\n%s", rep.Result.Table())
	require.Empty(t, rep.Unstable, "faults after which the cluster did not get a full ISR back")
}

// TestJepsen is make jepsen's long run: -jepsen.faults faults of every
// kind from -jepsen.seed.
func TestJepsen(t *testing.T) {
	if *faults == 0 {
		t.Skip("the long run: make jepsen (go test ./jepsen -run TestJepsen -jepsen.faults N)")
	}
	seglog, etcd := binaries(t)
	dir := *keep
	if dir == "" {
		dir = t.TempDir()
	}
	s := *seed
	if s == 0 {
		s = time.Now().UnixNano()
	}
	ks := AllFaults
	if *kinds != "" {
		ks = strings.Split(*kinds, ",")
	}
	t.Logf("seed %d, %d faults, in %s", s, *faults, dir)
	rep, err := Run(context.Background(), Options{Seglog: seglog, Etcd: etcd, Dir: dir, Seed: s, Faults: *faults, Kinds: ks,
		Cycle: true, Logf: t.Logf, TB: t})
	if rep != nil {
		t.Log("\n" + rep.String())
	}
	require.NoError(t, err)
	require.True(t, rep.Result.Valid(), "anomalies found (seed %d):\n%s", s, rep.Result.Table())
	require.Empty(t, rep.Unstable, "faults after which the cluster did not get a full ISR back (seed %d)", s)
}

// dumpLogs logs the processes' logs' last lines of a failed run.
func dumpLogs(t *testing.T, dir string) {
	names, _ := filepath.Glob(filepath.Join(dir, "broker*.log"))
	for _, n := range names {
		b, _ := os.ReadFile(n)
		lines := strings.Split(string(b), "\n")
		t.Logf("%s (last 60 lines):\n%s", n, strings.Join(lines[max(0, len(lines)-60):], "\n"))
	}
}
