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
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/record"
)

// startServeLimited is startServe in a child with limits: limit is
// SEGLOG_CHILD_NOFILE=n (descriptors) or SEGLOG_CHILD_FSIZE=n (bytes a
// file may hold).
func startServeLimited(t *testing.T, limit string, args ...string) (*exec.Cmd, string) {
	t.Helper()
	js, err := json.Marshal(append([]string{"serve"}, args...))
	require.NoError(t, err)
	cmd := childCmd("cli", "SEGLOG_CHILD_ARGS="+string(js), limit)
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
	t.Parallel()
	d := filepath.Join(t.TempDir(), "data")
	cmd, addr := startServeLimited(t, "SEGLOG_CHILD_NOFILE=128", "--data-dir", d, "--config", "listeners=PLAINTEXT://127.0.0.1:0",
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
	cmd, addr := startServeLimited(t, "SEGLOG_CHILD_NOFILE=128", "--data-dir", d, "--config", "listeners=PLAINTEXT://127.0.0.1:0")
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

// produceBatch produces one batch of n records of size bytes to a
// topic's partition 0, unretried, and returns its error code.
func produceBatch(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, n, size int) int16 {
	t.Helper()
	bl := record.NewBuilder(record.None)
	for range n {
		require.NoError(t, bl.Append(record.Record{Timestamp: time.Now().UnixMilli(), Value: bytes.Repeat([]byte("v"), size)}))
	}
	batch, err := bl.Build()
	require.NoError(t, err)
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 30000
	rt := kmsg.NewProduceRequestTopic()
	listed, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	require.NoError(t, err)
	rt.Topic, rt.TopicID = topic, listed[topic].ID // by id from Produce v13
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batch.Bytes()
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	require.NoError(t, err)
	return resp.Topics[0].Partitions[0].ErrorCode
}

// A partition that fails for lack of space (the child's files may not
// pass 256 KiB: writes past it fail with EFBIG) answers
// KAFKA_STORAGE_ERROR while the others go on; SIGTERM then shuts the
// broker down cleanly (exit 0, the failed partition named), and the next
// start recovers it with every acknowledged record.
func TestServeFailedPartitionShutsDownCleanly(t *testing.T) {
	d := filepath.Join(t.TempDir(), "data")
	cmd, addr := startServeLimited(t, "SEGLOG_CHILD_FSIZE=262144", "--data-dir", d, "--config", "listeners=PLAINTEXT://127.0.0.1:0")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	_, err = adm.CreateTopic(ctx, 1, 1, nil, "filling")
	require.NoError(t, err)
	_, err = adm.CreateTopic(ctx, 1, 1, nil, "other")
	require.NoError(t, err)
	acked := 0
	code := int16(0)
	for range 100 {
		if code = produceBatch(t, ctx, cl, "filling", 10, 1000); code != 0 {
			break
		}
		acked += 10
	}
	require.Equal(t, kerr.KafkaStorageError.Code, code, "the file limit was reached")
	require.Positive(t, acked)
	require.Equal(t, kerr.KafkaStorageError.Code, produceBatch(t, ctx, cl, "filling", 1, 10), "failed")
	require.Zero(t, produceBatch(t, ctx, cl, "other", 1, 10), "the other partition goes on")
	cl.Close()

	log := stopServe(t, cmd)
	require.Contains(t, log, "shut down with failed tablets")
	require.Contains(t, log, "filling-0")

	cmd, addr = startServeLimited(t, "SEGLOG_CHILD_FSIZE=1073741824", "--data-dir", d, "--config", "listeners=PLAINTEXT://127.0.0.1:0")
	cl, err = kgo.NewClient(kgo.SeedBrokers(addr))
	require.NoError(t, err)
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, "filling", "other")
	require.NoError(t, err)
	end, _ := ends.Lookup("filling", 0)
	require.Equal(t, int64(acked), end.Offset, "every acknowledged record, and no other")
	end, _ = ends.Lookup("other", 0)
	require.Equal(t, int64(1), end.Offset)
	require.Zero(t, produceBatch(t, ctx, cl, "filling", 1, 10), "recovered")
	cl.Close()
	stopServe(t, cmd)
}
