package etcdtest

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// FromEnv starts a one-member etcd: the binary SEGLOG_ETCD names (Debian's
// etcd-server, /usr/bin/etcd, in make crash), else in this process.
func FromEnv(t testing.TB) *Cluster {
	if bin := os.Getenv("SEGLOG_ETCD"); bin != "" {
		return StartBinary(t, bin)
	}
	return Start(t, 1)
}

// StartBinary runs an etcd binary as one member on loopback ports, its
// data in the test's temporary directory, and waits until it serves; it
// is killed when the test ends.
func StartBinary(t testing.TB, bin string) *Cluster {
	t.Helper()
	m := &member{name: "m0", dir: t.TempDir(), client: freeURL(t), peer: freeURL(t)}
	cmd := exec.Command(bin, "--name", m.name, "--data-dir", m.dir,
		"--listen-client-urls", m.client.String(), "--advertise-client-urls", m.client.String(),
		"--listen-peer-urls", m.peer.String(), "--initial-advertise-peer-urls", m.peer.String(),
		"--initial-cluster", m.name+"="+m.peer.String(), "--initial-cluster-state", "new")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("etcdtest: starting %s: %v", bin, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	// Ready when it says so in its log (etcd 3.4: "ready to serve client
	// requests"); a deadline, not a wait.
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		var last []string
		for sc.Scan() {
			if strings.Contains(sc.Text(), "ready to serve client requests") {
				ready <- nil
				_, _ = io.Copy(io.Discard, stderr)
				return
			}
			last = append(last, sc.Text())
		}
		ready <- fmt.Errorf("etcdtest: %s ended before it served: %s", bin, strings.Join(last, "\n"))
	}()
	select {
	case err := <-ready:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatalf("etcdtest: %s did not serve in a minute", bin)
	}
	return &Cluster{t: t, members: []*member{m}, external: cmd}
}
