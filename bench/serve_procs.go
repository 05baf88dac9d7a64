package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The serve workload measures seglog serve, the null broker and kfake the
// same way: with Options.Serve (the command line), each is a process of
// its own — seglog serve, and `seglog bench-peer` for the two baselines —
// driven by the same client in this process, one after another in every
// repetition; each one's CPU time over a run and its resident memory at
// the end come from /proc. Without it (this package's tests) they run in
// this process, and the CPU and memory figures are left out.

// startTarget starts kind (seglog, null or kfake) serving serveTopic with
// parts partitions; seglog on a fresh data directory dir.
func startTarget(o Options, kind, dir string, parts int32) (*serveTarget, error) {
	if o.Serve == nil {
		switch kind {
		case "seglog":
			return startSeglog(dir, parts, false)
		case "null":
			return startNull(parts)
		}
		return startKfake(parts)
	}
	var cmd *exec.Cmd
	if kind == "seglog" {
		cmd = o.Serve("serve", "--data-dir", dir, "--config", "listeners=PLAINTEXT://127.0.0.1:0", "--config", "log.level=warn")
	} else {
		cmd = o.Serve("bench-peer", "--kind", kind, "--topic", serveTopic, "--partitions", strconv.Itoa(int(parts)))
	}
	p, err := startServing(cmd)
	if err != nil {
		return nil, fmt.Errorf("bench: %s: %w", kind, err)
	}
	t := &serveTarget{addr: p.addr, proc: p, close: func() error { p.stop(); return nil }} // (the caller removes dir)
	if kind == "seglog" {
		if err := createServeTopic(p.addr, parts); err != nil {
			return nil, errors.Join(err, t.close())
		}
	}
	return t, nil
}

// createServeTopic creates serveTopic with parts partitions through the
// admin API.
func createServeTopic(addr string, parts int32) error {
	cl, ctx, done, err := connected(addr)
	if err != nil {
		return err
	}
	defer done()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, parts, 1, nil, serveTopic)
	if err == nil {
		err = resp.Err
	}
	return err
}

// cpuSeconds returns the CPU time (user and system) the target's process
// has used, 0 for a target in this process.
func (t *serveTarget) cpuSeconds() (float64, error) {
	if t.proc == nil {
		return 0, nil
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", t.proc.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	// The fields after the command's name (in parentheses, which may hold
	// spaces): utime and stime are the 14th and 15th, in clock ticks.
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0, fmt.Errorf("bench: /proc/%d/stat: %d fields", t.proc.cmd.Process.Pid, len(fields))
	}
	utime, err1 := strconv.ParseFloat(fields[11], 64)
	stime, err2 := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / clockTicks, errors.Join(err1, err2)
}

// clockTicks is USER_HZ, 100 on every Linux this runs on.
const clockTicks = 100

// rssBytes returns the resident memory of the target's process.
func (t *serveTarget) rssBytes() (float64, error) {
	if t.proc == nil {
		return 0, nil
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", t.proc.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		if rest, ok := strings.CutPrefix(lines.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("bench: no VmRSS in /proc/%d/status", t.proc.cmd.Process.Pid)
}

// run measures fn against t: the MB/s it returns, and the target's CPU
// seconds per GB of the bytes it moved.
func (t *serveTarget) run(bytes int64, fn func() (float64, error)) (mbps, cpuPerGB float64, err error) {
	before, err := t.cpuSeconds()
	if err != nil {
		return 0, 0, err
	}
	if mbps, err = fn(); err != nil {
		return 0, 0, err
	}
	after, err := t.cpuSeconds()
	return mbps, (after - before) / (float64(bytes) / 1e9), err
}

// produceClients produces n records over clients franz-go clients at once
// (each its share) and returns the throughput of them all in MB/s.
func produceClients(addr string, values [][]byte, n, clients int, opts ...kgo.Opt) (float64, error) {
	start := time.Now()
	errs := make([]error, clients)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[c] = produceAll(addr, values, n/clients, opts...)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	return float64((n/clients)*clients*len(values[0])) / time.Since(start).Seconds() / 1e6, nil
}

// kcatProduce produces the records of file (one a line) with kcat —
// librdkafka, the C client — idempotent, acks=all, no compression, and
// returns MB/s of record values (size each).
func kcatProduce(kcat, addr, file string, n, size int) (float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcat, "-P", "-b", addr, "-t", serveTopic, "-l",
		"-X", "enable.idempotence=true", "-X", "acks=all", "-X", "compression.codec=none", "-X", "linger.ms=5",
		"-X", "queue.buffering.max.messages=1000000", file)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("bench: kcat: %w: %s", err, stderr.String())
	}
	if strings.Contains(stderr.String(), "ERROR") || strings.Contains(stderr.String(), "% Failed") {
		return 0, fmt.Errorf("bench: kcat: %s", stderr.String())
	}
	return float64(n*size) / time.Since(start).Seconds() / 1e6, nil
}

// kcatRecords writes n records of size bytes, one a line (hex digits: no
// newline inside), for kcatProduce.
func kcatRecords(dir string, n, size int) (string, error) {
	path := filepath.Join(dir, "kcat-records")
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	values := randomValues(size / 2)
	line := make([]byte, 0, size+1)
	for i := range n {
		line = line[:0]
		for _, b := range values[i%len(values)] {
			line = append(line, "0123456789abcdef"[b>>4], "0123456789abcdef"[b&15])
		}
		for len(line) < size {
			line = append(line, '0')
		}
		if _, err := w.Write(append(line, '\n')); err != nil {
			f.Close()
			return "", err
		}
	}
	return path, errors.Join(w.Flush(), f.Close())
}
