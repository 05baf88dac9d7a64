// Package etcdbin runs an etcd binary (Debian's etcd-server, /usr/bin/etcd)
// as a one-member cluster for a test, on loopback ports: a real etcd whose
// server code is not linked into the test (internal/etcdtest links it to
// run members in process).
package etcdbin

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Default is the etcd binary make test installs (Debian's etcd-server);
// SEGLOG_ETCD names another.
const Default = "/usr/bin/etcd"

// Member is a running etcd member.
type Member struct {
	Client, Peer url.URL
	Cmd          *exec.Cmd
}

// Endpoints are its client URLs.
func (m *Member) Endpoints() []string { return []string{m.Client.String()} }

// Binary is the etcd binary to run (SEGLOG_ETCD, else Default), and
// whether it is there.
func Binary() (string, bool) {
	bin := os.Getenv("SEGLOG_ETCD")
	if bin == "" {
		bin = Default
	}
	_, err := os.Stat(bin)
	return bin, err == nil
}

// Start runs bin as one member, its data in the test's temporary
// directory, and waits until it serves (its log says so); it is killed
// when the test ends.
func Start(t testing.TB, bin string) *Member {
	t.Helper()
	m := &Member{Client: FreeURL(t), Peer: FreeURL(t)}
	m.Cmd = exec.Command(bin, "--name", "m0", "--data-dir", t.TempDir(),
		"--listen-client-urls", m.Client.String(), "--advertise-client-urls", m.Client.String(),
		"--listen-peer-urls", m.Peer.String(), "--initial-advertise-peer-urls", m.Peer.String(),
		"--initial-cluster", "m0="+m.Peer.String(), "--initial-cluster-state", "new")
	stderr, err := m.Cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Cmd.Start(); err != nil {
		t.Fatalf("etcdbin: starting %s: %v", bin, err)
	}
	t.Cleanup(func() {
		_ = m.Cmd.Process.Kill()
		_ = m.Cmd.Wait()
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
		ready <- fmt.Errorf("etcdbin: %s ended before it served: %s", bin, strings.Join(last, "\n"))
	}()
	select {
	case err := <-ready:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatalf("etcdbin: %s did not serve in a minute", bin)
	}
	return m
}

// FreeURL is an http URL on a loopback port free when it was asked for.
func FreeURL(t testing.TB) url.URL {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return url.URL{Scheme: "http", Host: ln.Addr().String()}
}
