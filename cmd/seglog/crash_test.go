package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/internal/testenv"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/tablet"
	"github.com/seglog/seglog/tablet/tablettest"
	"github.com/seglog/seglog/vfs"
)

// TestMain lets the test binary be the child a crash test kills:
// SEGLOG_CHILD=cli runs the command line in SEGLOG_CHILD_ARGS (JSON), and
// SEGLOG_CHILD=lib runs the library workload of internal/tablettest.
func TestMain(m *testing.M) {
	switch os.Getenv("SEGLOG_CHILD") {
	case "cli":
		// Limits of its own: descriptors (Go raises the soft limit to the
		// hard one at start, so both are set), and the size of a file (a
		// write past it fails with EFBIG, as on a full disk: Go ignores
		// SIGXFSZ).
		for env, res := range map[string]int{"SEGLOG_CHILD_NOFILE": syscall.RLIMIT_NOFILE, "SEGLOG_CHILD_FSIZE": syscall.RLIMIT_FSIZE} {
			n := os.Getenv(env)
			if n == "" {
				continue
			}
			lim, err := strconv.ParseUint(n, 10, 64)
			if err == nil {
				err = syscall.Setrlimit(res, &syscall.Rlimit{Cur: lim, Max: lim})
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
		}
		var args []string
		if err := json.Unmarshal([]byte(os.Getenv("SEGLOG_CHILD_ARGS")), &args); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		os.Exit(run(args, os.Stdout, os.Stderr))
	case "lib":
		if err := libChild(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

var libTP = checkpoint.TopicPartition{Topic: "mixed", Partition: 0}

// libChild runs life SEGLOG_CHILD_RUN of the tablettest workload on the data
// directory SEGLOG_CHILD_DIR: each acknowledgement is appended to
// SEGLOG_CHILD_ACKS (fsynced) and then printed, for the parent to pace its
// kill. It runs until killed, or for SEGLOG_CHILD_STEPS steps and a clean
// close.
func libChild() error {
	lifeNo, err := strconv.Atoi(os.Getenv("SEGLOG_CHILD_RUN"))
	if err != nil {
		return err
	}
	steps, _ := strconv.Atoi(os.Getenv("SEGLOG_CHILD_STEPS"))
	acks, err := os.OpenFile(os.Getenv("SEGLOG_CHILD_ACKS"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer acks.Close()
	m, err := tablet.OpenManager(vfs.OS, os.Getenv("SEGLOG_CHILD_DIR"), tablet.ManagerOptions{
		Tablet: tablet.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}})
	if err != nil {
		return err
	}
	cfg := libConfig()
	tab, err := m.GetOrCreate(libTP, &cfg)
	if err != nil {
		return err
	}
	now := func() int64 { return time.Now().UnixMilli() }
	w := tablettest.New(tab, lifeNo, 7, now, func(a tablettest.Ack) error {
		if _, err := fmt.Fprintln(acks, a); err != nil {
			return err
		}
		if err := acks.Sync(); err != nil {
			return err
		}
		_, err := fmt.Println(a)
		return err
	})
	if err := w.Begin(); err != nil {
		return err
	}
	for i := 0; steps == 0 || i < steps; i++ {
		if err := w.Step(); err != nil {
			return err
		}
	}
	return m.Close()
}

func libConfig() tablet.Config {
	cfg := tablet.DefaultConfig()
	cfg.SegmentBytes = 64 << 10
	cfg.IndexIntervalBytes = 1024
	return cfg
}

// killer runs children of the test binary and kills them.
type killer struct {
	t      *testing.T
	seed   uint64
	rng    *rand.Rand
	dir    string // the data directory the children share
	acks   string // the acknowledgements file
	kills  int
	checks int
}

func newKiller(t *testing.T) *killer {
	seed := testenv.Seed(t)
	d := t.TempDir()
	return &killer{t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, 5)), dir: filepath.Join(d, "data"),
		acks: filepath.Join(d, "acks")}
}

func (k *killer) child(mode string, env ...string) *exec.Cmd { return childCmd(mode, env...) }

// childCmd runs the test binary as a child (see TestMain), its stderr
// kept in a *bytes.Buffer.
func childCmd(mode string, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{"SEGLOG_CHILD=" + mode}, env...)...)
	cmd.Stderr = &bytes.Buffer{}
	return cmd
}

// kill kills the child with SIGKILL and reaps it.
func (k *killer) kill(cmd *exec.Cmd) {
	require.NoError(k.t, cmd.Process.Kill())
	err := cmd.Wait()
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() > 0 {
		k.t.Fatalf("seed %d: the child failed on its own before the kill: %s", k.seed, cmd.Stderr)
	}
	k.kills++
}

// fetchErrors fails the test on a fetch error, except the group-session
// errors kgo reports when a join or sync of its group failed: with a one
// second session on a loaded machine the coordinator may remove a member
// that paused (UNKNOWN_MEMBER_ID, as Kafka would), and kgo joins again on
// its own; what the tests check (no acknowledged commit lost, exactly once)
// must hold through that.
func (k *killer) fetchErrors(life int, fs kgo.Fetches) {
	fs.EachError(func(topic string, p int32, err error) {
		if _, ok := errors.AsType[*kgo.ErrGroupSession](err); ok {
			k.t.Logf("seed %d life %d: the group rebalanced: %v", k.seed, life, err)
			return
		}
		k.t.Fatalf("seed %d life %d: %s-%d: %v", k.seed, life, topic, p, err)
	})
}

// recoveredCopy copies the data directory as the kill left it and opens
// the copy (recovering it); the children go on with the original.
func (k *killer) recoveredCopy() (*tablet.Manager, string) {
	cp := filepath.Join(k.t.TempDir(), "copy")
	if _, err := os.Stat(k.dir); errors.Is(err, os.ErrNotExist) {
		require.NoError(k.t, os.Mkdir(cp, 0o750)) // killed before it made the directory
	} else {
		require.NoError(k.t, os.CopyFS(cp, os.DirFS(k.dir)))
	}
	m, err := tablet.OpenManager(vfs.OS, cp, tablet.ManagerOptions{
		Tablet: tablet.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}})
	require.NoError(k.t, err, "seed %d: opening the directory after kill %d", k.seed, k.kills)
	return m, cp
}

// closeAndVerify closes a recovered copy cleanly and requires verify to
// pass on it.
func (k *killer) closeAndVerify(m *tablet.Manager, dir string) {
	require.NoError(k.t, m.Close())
	code, out, errOut := runSeglog(k.t, "verify", "--data-dir", dir)
	require.Equal(k.t, 0, code, "seed %d after kill %d: verify: %s%s", k.seed, k.kills, out, errOut)
	k.checks++
}

func (k *killer) readAcks() []string {
	data, err := os.ReadFile(k.acks)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	require.NoError(k.t, err)
	// Only whole lines: a line the kill cut short was never acknowledged.
	var lines []string
	for text := string(data); ; {
		line, rest, ok := strings.Cut(text, "\n")
		if !ok {
			return lines
		}
		lines, text = append(lines, line), rest
	}
}

func kills(t *testing.T) int {
	// make crash sets SEGLOG_KILLS=100 (each of the two harnesses: 200
	// kills); make test runs a few.
	if v := os.Getenv("SEGLOG_KILLS"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err)
		return n
	}
	return 4
}

// produceLine is line i of life run of the produce harness: key r<run>-<i>,
// a value whose length and bytes follow from both.
func produceLine(run, i int) string {
	return fmt.Sprintf("r%d-%d:%s|", run, i, strings.Repeat(string(rune('a'+(run+i)%26)), (i*7919+run)%300))
}

// TestKillProduce runs `seglog produce --sync --acks-file` as a child
// process fed lines on stdin and kills it with SIGKILL after a random
// number of lines, again and again. After each kill a copy of the
// directory is recovered and checked: the records are exactly the lines
// each life was given, a gapless prefix per life, in order, with their
// bytes; every acknowledged batch is among them; after a clean close
// `seglog verify` passes. The next life produces on the killed directory
// itself; the last is not killed.
func TestKillProduce(t *testing.T) {
	t.Parallel()
	k := newKiller(t)
	n := kills(t)
	var acked int
	for life := 0; life <= n; life++ {
		args := []string{"produce", "--data-dir", k.dir, "--topic", "lines", "--key-separator", ":",
			"--batch-records", strconv.Itoa(1 + k.rng.IntN(40)), "--sync", "--acks-file", k.acks,
			"--compression", []string{"none", "lz4", "zstd", "snappy", "gzip"}[k.rng.IntN(5)],
			"--config", "segment.bytes=65536"}
		argJSON, err := json.Marshal(args)
		require.NoError(t, err)
		cmd := k.child("cli", "SEGLOG_CHILD_ARGS="+string(argJSON))
		stdin, err := cmd.StdinPipe()
		require.NoError(t, err)
		var stdout bytes.Buffer
		cmd.Stdout = &stdout
		require.NoError(t, cmd.Start())
		lines := 1 + k.rng.IntN(3000)
		if life == n {
			lines = 500
		}
		w := bufio.NewWriter(stdin)
		for i := range lines {
			fmt.Fprintln(w, produceLine(life, i))
		}
		if life == n { // the last life ends on its own
			require.NoError(t, w.Flush())
			require.NoError(t, stdin.Close())
			require.NoError(t, cmd.Wait(), "%s", cmd.Stderr)
			require.Contains(t, stdout.String(), `"records":500`)
		} else {
			_ = w.Flush() // the child may not read it all before it dies
			k.kill(cmd)
		}

		m, cp := k.recoveredCopy()
		tab, ok := m.Get(checkpoint.TopicPartition{Topic: "lines"})
		ackLines := k.readAcks()
		if !ok {
			require.Empty(t, ackLines, "seed %d: acknowledged, then no tablet", k.seed)
			k.closeAndVerify(m, cp)
			continue
		}
		leo := tab.Offsets().LogEndOffset
		next := map[int]int{}
		lastRun, expected := -1, int64(0)
		require.NoError(t, tab.Records(0, tablet.ReadLogEnd, func(_ record.Batch, r *record.Record) bool {
			var run, i int
			_, err := fmt.Sscanf(string(r.Key), "r%d-%d", &run, &i)
			require.NoError(t, err, "seed %d: offset %d: key %q", k.seed, r.Offset, r.Key)
			require.Equal(t, expected, r.Offset, "seed %d: offsets are contiguous", k.seed)
			require.GreaterOrEqual(t, run, lastRun, "seed %d: offset %d: lives in order", k.seed, r.Offset)
			require.Equal(t, next[run], i, "seed %d: offset %d: life %d's lines in order, none missing", k.seed, r.Offset, run)
			require.Equal(t, produceLine(run, i), string(r.Key)+":"+string(r.Value), "seed %d: offset %d", k.seed, r.Offset)
			lastRun, expected, next[run] = run, r.Offset+1, i+1
			return true
		}))
		require.Equal(t, leo, expected, "seed %d: every record up to the log end read", k.seed)
		acked = 0
		for _, l := range ackLines {
			var first, last int64
			_, err := fmt.Sscanf(l, "%d %d", &first, &last)
			require.NoError(t, err, "ack %q", l)
			require.Less(t, last, leo, "seed %d after kill %d: acknowledged %q, but the log ends at %d", k.seed, k.kills, l, leo)
			acked += int(last - first + 1)
		}
		k.closeAndVerify(m, cp)
	}
	t.Logf("%d kills, %d recoveries checked, %d acknowledged records, 0 lost", k.kills, k.checks, acked)
}

// TestKillLibraryWorkload runs the mixed idempotent and transactional
// workload of tablet/tablettest in a child process and kills it with
// SIGKILL after a random number of acknowledgements (or at once, while it
// opens and recovers), again and again. After each kill a copy of the
// directory is recovered and checked by tablettest.Check (every
// acknowledged batch and commit present with its bytes, no part of an
// aborted or unfinished transaction visible, no sequence gap), closed and
// verified. The next life, with a bumped producer epoch, aborts what the
// last one left open and produces on; the last is not killed.
func TestKillLibraryWorkload(t *testing.T) {
	k := newKiller(t)
	n := kills(t)
	var acks []tablettest.Ack
	for life := 0; life <= n; life++ {
		env := []string{"SEGLOG_CHILD_DIR=" + k.dir, "SEGLOG_CHILD_ACKS=" + k.acks, "SEGLOG_CHILD_RUN=" + strconv.Itoa(life)}
		if life == n {
			env = append(env, "SEGLOG_CHILD_STEPS=20")
		}
		cmd := k.child("lib", env...)
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		if life == n {
			_, _ = io.Copy(io.Discard, stdout)
			require.NoError(t, cmd.Wait(), "%s", cmd.Stderr)
		} else {
			sc := bufio.NewScanner(stdout)
			for want := k.rng.IntN(40); want > 0 && sc.Scan(); want-- {
			}
			k.kill(cmd)
		}

		acks = acks[:0]
		for _, l := range k.readAcks() {
			a, err := tablettest.ParseAck(l)
			require.NoError(t, err)
			acks = append(acks, a)
		}
		m, cp := k.recoveredCopy()
		tab, ok := m.Get(libTP)
		if !ok {
			require.Empty(t, acks, "seed %d: acknowledged, then no tablet", k.seed)
			k.closeAndVerify(m, cp)
			continue
		}
		require.NoError(t, tablettest.AbortPrevious(tab, life+1, time.Now().UnixMilli(), false))
		_, err = tablettest.Check(tab, acks)
		require.NoError(t, err, "seed %d after kill %d", k.seed, k.kills)
		k.closeAndVerify(m, cp)
	}
	t.Logf("%d kills, %d recoveries checked, %d acknowledged steps, 0 lost", k.kills, k.checks, len(acks))
}

// A second process opening a data directory that one has open is refused
// with a clear error; once the first closes it, the second gets in.
func TestSecondProcessRefused(t *testing.T) {
	d := filepath.Join(t.TempDir(), "data")
	m, err := tablet.OpenManager(vfs.OS, d, tablet.ManagerOptions{})
	require.NoError(t, err)
	second := func() (int, string) {
		argJSON, err := json.Marshal([]string{"offsets", "--data-dir", d})
		require.NoError(t, err)
		cmd := childCmd("cli", "SEGLOG_CHILD_ARGS="+string(argJSON))
		err = cmd.Run()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode(), fmt.Sprint(cmd.Stderr)
		}
		require.NoError(t, err)
		return 0, fmt.Sprint(cmd.Stderr)
	}
	code, stderr := second()
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "data directory is in use")
	require.Contains(t, stderr, d)
	require.NoError(t, m.Close())
	code, stderr = second()
	require.Equal(t, 0, code, stderr)
}

// TestKillServe kills `seglog serve` (durable acks) with SIGKILL under an
// idempotent franz-go producer with acks=-1, again and again, after a
// random number of acknowledgements (sometimes before any). Every life
// serves the same directory: its start recovers the last one's kill. At
// the end every acknowledged record is at the offset it was acknowledged
// with, no record is there twice, the offsets are contiguous, and the
// directory verifies.
func TestKillServe(t *testing.T) {
	k := newKiller(t)
	n := kills(t)
	type at struct {
		partition int32
		offset    int64
	}
	acked := map[string]at{}
	for life := 0; life <= n; life++ {
		cmd, lines := startServe(t, "--data-dir", k.dir, "--config", "listeners=PLAINTEXT://127.0.0.1:0",
			"--config", "seglog.durable.acks=true", "--config", "num.partitions=3")
		addr := servedAddr(t, cmd, lines)
		if life < n && k.rng.IntN(5) == 0 { // killed while it starts serving
			k.kill(cmd)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("kill"),
			kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(time.Duration(k.rng.IntN(3))*time.Millisecond))
		require.NoError(t, err)
		records := 1 + k.rng.IntN(3000)
		if life == n {
			records = 500
		}
		type ack struct {
			value string
			at    at
		}
		acks := make(chan ack, records)
		for i := range records {
			v := fmt.Sprintf("l%d-%d", life, i)
			cl.Produce(ctx, &kgo.Record{Value: []byte(v)}, func(r *kgo.Record, err error) {
				if err == nil {
					acks <- ack{v, at{r.Partition, r.Offset}}
				}
			})
		}
		want := records
		if life < n {
			want = 1 + k.rng.IntN(records)
		}
		for range want {
			select {
			case a := <-acks:
				acked[a.value] = a.at
			case <-ctx.Done():
				t.Fatalf("seed %d life %d: %d of %d acknowledgements before the deadline", k.seed, life, len(acked), want)
			}
		}
		if life < n {
			k.kill(cmd)
		} else {
			require.NoError(t, cl.Flush(ctx))
			require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
			require.NoError(t, cmd.Wait(), "%s", cmd.Stderr)
		}
		cl.Close() // what was in flight fails: the broker is gone
		cancel()
		for len(acks) > 0 { // acknowledged before the kill, read after it
			a := <-acks
			acked[a.value] = a.at
		}
	}

	m, err := tablet.OpenManager(vfs.OS, k.dir, tablet.ManagerOptions{Tablet: tablet.Options{Logger: slog.New(slog.DiscardHandler)}})
	require.NoError(t, err)
	found := map[at]string{}
	seen := map[string]bool{}
	for _, tab := range m.Tablets() {
		p := tab.TopicPartition().Partition
		expected := int64(0)
		require.NoError(t, tab.Records(0, tablet.ReadLogEnd, func(_ record.Batch, r *record.Record) bool {
			require.Equal(t, expected, r.Offset, "seed %d: partition %d: offsets are contiguous", k.seed, p)
			require.False(t, seen[string(r.Value)], "seed %d: %s is in the log twice", k.seed, r.Value)
			seen[string(r.Value)] = true
			found[at{p, r.Offset}] = string(r.Value)
			expected++
			return true
		}))
	}
	for v, a := range acked {
		require.Equal(t, v, found[a], "seed %d: %s was acknowledged at partition %d offset %d", k.seed, v, a.partition, a.offset)
	}
	k.closeAndVerify(m, k.dir)
	t.Logf("%d kills, %d lives, %d acknowledged records, 0 lost, 0 duplicated", k.kills, n+1, len(acked))
}
