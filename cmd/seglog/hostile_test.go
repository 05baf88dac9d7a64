package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// startServeLimited is startServe in a child whose descriptor limit is
// nofile.
func startServeLimited(t *testing.T, nofile string, args ...string) (*exec.Cmd, string) {
	t.Helper()
	js, err := json.Marshal(append([]string{"serve"}, args...))
	require.NoError(t, err)
	cmd := childCmd("cli", "SEGLOG_CHILD_ARGS="+string(js), "SEGLOG_CHILD_NOFILE="+nofile)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	reapAtCleanup(t, cmd)
	lines := bufio.NewScanner(out)
	return cmd, servedAddr(t, cmd, lines)
}

// stopServe ends serve with SIGTERM, which it must still be running to
// answer cleanly, and returns its log.
func stopServe(t *testing.T, cmd *exec.Cmd) string {
	t.Helper()
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait(), "a clean exit on SIGTERM: %s", cmd.Stderr)
	return cmd.Stderr.(*bytes.Buffer).String()
}

// hold opens n connections to addr, each sending ApiVersions, and returns
// them with how many were answered (the others were refused, or are
// waiting to be accepted).
func hold(t *testing.T, addr string, n int) ([]net.Conn, int) {
	t.Helper()
	var conns []net.Conn
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for range n {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		conns = append(conns, c)
		_, err = c.Write([]byte{0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 1, 0xff, 0xff})
		require.NoError(t, err)
	}
	answered := 0
	deadline := time.Now().Add(3 * time.Second) // a connection never accepted stays silent
	for _, c := range conns {
		_ = c.SetReadDeadline(deadline)
		var size [4]byte
		if _, err := io.ReadFull(c, size[:]); err == nil {
			answered++
		}
	}
	return conns, answered
}

// produceOne produces one record through a new client.
func produceOne(t *testing.T, addr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.AllowAutoTopicCreation())
	require.NoError(t, err)
	defer cl.Close()
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "still-serving", Value: []byte("v")}).FirstErr())
}

// Out of descriptors, the broker keeps running: with a limit of 128 and
// max.connections far above it, 300 connections make accept fail (EMFILE);
// the broker backs off and retries, and once clients go it serves new
// ones.
func TestServeOutOfDescriptors(t *testing.T) {
	d := filepath.Join(t.TempDir(), "data")
	cmd, addr := startServeLimited(t, "128", "--data-dir", d, "--config", "listeners=PLAINTEXT://127.0.0.1:0",
		"--config", "max.connections=100000")
	conns, answered := hold(t, addr, 300)
	require.Less(t, answered, 300, "the limit was reached")
	for _, c := range conns {
		c.Close()
	}
	produceOne(t, addr)
	log := stopServe(t, cmd)
	require.Contains(t, log, "accepting a connection failed; retrying")
	require.Contains(t, log, "too many open files")
}

// With max.connections' default (half of a 128 limit), connections beyond
// 64 are refused at once and accept never runs out: the broker serves the
// clients it has and new ones once some go.
func TestServeDefaultMaxConnections(t *testing.T) {
	d := filepath.Join(t.TempDir(), "data")
	cmd, addr := startServeLimited(t, "128", "--data-dir", d, "--config", "listeners=PLAINTEXT://127.0.0.1:0")
	conns, answered := hold(t, addr, 100)
	require.Equal(t, 64, answered)
	for _, c := range conns[:50] {
		c.Close()
	}
	produceOne(t, addr)
	log := stopServe(t, cmd)
	require.NotContains(t, log, "accepting a connection failed")
	require.Contains(t, log, "max.connections reached")
}
