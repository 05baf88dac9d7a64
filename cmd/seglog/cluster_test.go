package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/seglog/seglog/cluster"
	"github.com/seglog/seglog/internal/clustertest"
	"github.com/seglog/seglog/internal/etcdtest"
)

// serveCluster is `seglog serve` child processes forming one cluster
// over an etcd in the test's process.
type serveCluster struct {
	t     *testing.T
	etcd  *etcdtest.Cluster
	dir   string
	cmds  map[int32]*exec.Cmd
	addrs map[int32]string
	// watch is an observer of the cluster's metadata (no registration).
	watch *cluster.Member
}

func newServeCluster(t *testing.T, n int) *serveCluster {
	c := &serveCluster{t: t, etcd: etcdtest.Start(t, 1), dir: t.TempDir(), cmds: map[int32]*exec.Cmd{}, addrs: map[int32]string{}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w, err := cluster.Join(ctx, cluster.Options{Endpoints: c.etcd.Endpoints(), Prefix: "/seglog/kill/", Observe: true})
	require.NoError(t, err)
	c.watch = w
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	for id := range int32(n) {
		c.start(id + 1)
	}
	c.until(fmt.Sprintf("%d brokers registered", n), func(s *cluster.Snapshot) bool { return len(s.Brokers) == n })
	return c
}

// start runs broker id on its data directory (again after a kill).
func (c *serveCluster) start(id int32) {
	cmd, lines := startServe(c.t, "--data-dir", filepath.Join(c.dir, fmt.Sprint(id)),
		"--config", "listeners=PLAINTEXT://127.0.0.1:0", "--config", fmt.Sprintf("node.id=%d", id),
		"--config", "seglog.etcd.endpoints="+c.etcd.Endpoints()[0], "--config", "seglog.etcd.prefix=/seglog/kill/",
		"--config", "broker.session.timeout.ms=2000", "--config", "broker.heartbeat.interval.ms=200",
		"--config", "default.replication.factor=3", "--config", "min.insync.replicas=2",
		"--config", "replica.fetch.wait.max.ms=100", "--config", "replica.fetch.backoff.ms=50",
		"--config", "replica.lag.time.max.ms=3000")
	c.cmds[id], c.addrs[id] = cmd, servedAddr(c.t, cmd, lines)
	go func() {
		for lines.Scan() { // (its later lines, if any)
		}
	}()
}

// kill ends broker id with SIGKILL.
func (c *serveCluster) kill(id int32) {
	cmd := c.cmds[id]
	require.NoError(c.t, cmd.Process.Kill())
	_ = cmd.Wait()
	delete(c.cmds, id)
	delete(c.addrs, id)
}

func (c *serveCluster) seeds() []string {
	var out []string
	for _, a := range c.addrs {
		out = append(out, a)
	}
	return out
}

// until waits on the observer's snapshot changes for cond (failing after
// a minute).
func (c *serveCluster) until(what string, cond func(*cluster.Snapshot) bool) *cluster.Snapshot {
	c.t.Helper()
	deadline := time.NewTimer(time.Minute)
	defer deadline.Stop()
	for {
		ch := c.watch.Changed()
		if s := c.watch.Snapshot(); cond(s) {
			return s
		}
		select {
		case <-ch:
		case <-deadline.C:
			c.t.Fatalf("never %s", what)
		}
	}
}

// Three `seglog serve` processes, replication factor 3, acks=all: the
// leader of a partition is SIGKILLed while a producer writes; the
// controller elects another from the ISR, the producer goes on, the
// killed broker comes back, truncates to its leader and rejoins every
// ISR; every acknowledged record is read back exactly once at the offset
// it was acknowledged at.
func TestClusterSurvivesSIGKILLOfALeader(t *testing.T) {
	c := newServeCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...))
	require.NoError(t, err)
	_, err = kadm.NewClient(adm).CreateTopic(ctx, 3, -1, nil, "k")
	adm.Close()
	require.NoError(t, err)
	c.until("the topic fully in sync", func(s *cluster.Snapshot) bool {
		t, ok := s.Topics["k"]
		return ok && len(t.Partitions) == 3 && len(t.Partitions[0].ISR) == 3
	})

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.RecordDeliveryTimeout(time.Minute),
		kgo.MetadataMinAge(50*time.Millisecond))
	require.NoError(t, err)
	defer cl.Close()
	chk := clustertest.New()
	require.NoError(t, chk.Produce(ctx, cl, "k", "a", 150))
	before := c.watch.Snapshot()
	victim := before.Topics["k"].Partitions[0].Leader
	epoch := before.Topics["k"].Partitions[0].LeaderEpoch
	done := make(chan error, 1)
	go func() { done <- chk.Produce(ctx, cl, "k", "b", 300) }() // through the kill
	c.kill(victim)
	s := c.until("partition 0 led by another broker", func(s *cluster.Snapshot) bool {
		p := s.Topics["k"].Partitions[0]
		return p.Leader != victim && p.Leader >= 0
	})
	require.Greater(t, s.Topics["k"].Partitions[0].LeaderEpoch, epoch)
	require.NoError(t, <-done)
	c.until("the killed broker out of every ISR", func(s *cluster.Snapshot) bool {
		for _, p := range s.Topics["k"].Partitions {
			if p.InISR(victim) {
				return false
			}
		}
		return true
	})
	code, out, errOut := runSeglog(t, "cluster", "--bootstrap-server", c.seeds()[0], "--under-replicated-partitions")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, 3, strings.Count(out, "Topic: k\t"), "every partition is under-replicated: %s", out)
	require.NotContains(t, out, fmt.Sprintf("Isr: %d,", victim))

	c.start(victim)
	c.until("the killed broker back in every ISR", func(s *cluster.Snapshot) bool {
		for _, p := range s.Topics["k"].Partitions {
			if !p.InISR(victim) {
				return false
			}
		}
		return true
	})
	code, out, errOut = runSeglog(t, "cluster", "--bootstrap-server", c.seeds()[0])
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "Brokers: 3")
	require.Equal(t, 1, strings.Count(out, "(controller)"), out)
	require.Contains(t, out, "Every partition is fully replicated.")
	require.NoError(t, chk.Produce(ctx, cl, "k", "c", 50))
	chk.ReadBack(t, c.seeds(), "k", 3)
}
