package main

import (
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// rssKiB is a process's resident memory, from /proc.
func rssKiB(t *testing.T, pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			require.NoError(t, err)
			return n
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// peakRSS samples a process's resident memory while fn runs and returns
// the largest.
func peakRSS(t *testing.T, pid int, fn func()) int64 {
	done := make(chan struct{})
	peak := rssKiB(t, pid)
	go func() {
		defer close(done)
		fn()
	}()
	for {
		select {
		case <-done:
			return max(peak, rssKiB(t, pid))
		case <-time.After(5 * time.Millisecond):
			peak = max(peak, rssKiB(t, pid))
		}
	}
}

// TestMeasureHostileRSS measures seglog serve's resident memory (a
// separate process, the default settings) under hostile clients: 5,000
// idle connections, ten 100 MiB frames sent at once, 1,000 slowloris
// connections (a 100 MiB frame announced, 1 KiB of it sent) — against the
// idle broker, and with queued.max.request.bytes=-1 (no bound) beside it.
// A measurement, not a test: SEGLOG_MEASURE=1 runs it; the figures are
// in BENCHMARKS.md.
func TestMeasureHostileRSS(t *testing.T) {
	if os.Getenv("SEGLOG_MEASURE") == "" {
		t.Skip("a measurement, not a test: SEGLOG_MEASURE=1 runs it (its figures are in BENCHMARKS.md)")
	}
	frame := make([]byte, 100<<20)
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	frame[4], frame[5] = 0xff, 0xff // an API key no broker serves: the connection closes once the frame is read
	for _, bound := range []string{"536870912", "-1"} {
		start := func() (int, string) {
			d := filepath.Join(t.TempDir(), "data")
			cmd, addr := startServeLimited(t, "SEGLOG_CHILD_NOFILE=20000", "--data-dir", d, "--config", "listeners=PLAINTEXT://127.0.0.1:0",
				"--config", "queued.max.request.bytes="+bound)
			t.Cleanup(func() { stopServe(t, cmd) })
			return cmd.Process.Pid, addr
		}
		pid, addr := start()
		idle := rssKiB(t, pid)
		conns, answered := hold(t, addr, 5000)
		require.Equal(t, 5000, answered)
		held := rssKiB(t, pid)
		for _, c := range conns {
			c.Close()
		}

		pid, addr = start()
		var wg sync.WaitGroup
		peak := peakRSS(t, pid, func() {
			for range 10 {
				wg.Go(func() {
					c, err := net.Dial("tcp", addr)
					if err != nil {
						return
					}
					defer c.Close()
					_ = c.SetDeadline(time.Now().Add(2 * time.Minute))
					_, _ = c.Write(frame)
					_, _ = c.Read(make([]byte, 1))
				})
			}
			wg.Wait()
		})
		after := rssKiB(t, pid)

		pid, addr = start()
		var slow []net.Conn
		slowPeak := peakRSS(t, pid, func() {
			for range 1000 {
				c, err := net.Dial("tcp", addr)
				require.NoError(t, err)
				slow = append(slow, c)
				_, err = c.Write(frame[:1024])
				require.NoError(t, err)
			}
			// The measurement window: a second of the connections held.
			time.Sleep(time.Second)
		})
		for _, c := range slow {
			c.Close()
		}
		t.Logf("queued.max.request.bytes=%s: idle %d MiB; 5,000 idle connections %d MiB (%.1f KiB each); ten 100 MiB frames peak %d MiB, after %d MiB; 1,000 slowloris peak %d MiB",
			bound, idle>>10, held>>10, float64(held-idle)/5000, peak>>10, after>>10, slowPeak>>10)
	}
}
