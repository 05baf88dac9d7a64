// The cluster's kill loop is not built under -race: its child processes
// would be race binaries with an etcd server linked in, the slowest
// package of make test made slower still; make test runs it without the
// race detector beside the benchmark harness's tests, and its packages
// (cluster, replica, broker, server) are raced by their own tests.

//go:build !race

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
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
	c := &serveCluster{t: t, etcd: etcdtest.FromEnv(t), dir: t.TempDir(), cmds: map[int32]*exec.Cmd{}, addrs: map[int32]string{}}
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
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := c.watch.Until(ctx, cond)
	require.NoError(c.t, err, "never %s", what)
	return s
}

// Three `seglog serve` processes, replication factor 3, acks=all, and a
// loop of faults while a producer writes, in turn: a SIGKILL of a
// partition's leader, a SIGKILL of the controller, a SIGSTOP of a leader
// past its session (a zombie that wakes up). After each, the controller (a
// new one after the controller's kill, at a higher epoch) elects others
// from the ISR and the producer goes on; the killed broker comes back, the
// stopped one wakes up, finds its session gone and registers again; both
// truncate to their leaders and rejoin every ISR. At the end every
// acknowledged record is read back exactly once at the offset it was
// acknowledged at (a zombie acknowledges nothing it could lose). make
// test runs the three; make crash (SEGLOG_KILLS) a hundred.
func TestClusterKillLoop(t *testing.T) {
	t.Parallel() // (mostly waiting for sessions to expire)
	n := 3
	if v := os.Getenv("SEGLOG_KILLS"); v != "" {
		n = kills(t)
	}
	c := newServeCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(2+n)*time.Minute)
	defer cancel()
	adm, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...))
	require.NoError(t, err)
	_, err = kadm.NewClient(adm).CreateTopic(ctx, 3, -1, nil, "k")
	adm.Close()
	require.NoError(t, err)
	inSync := func(s *cluster.Snapshot) bool {
		t, ok := s.Topics["k"]
		if !ok || len(t.Partitions) != 3 {
			return false
		}
		for _, p := range t.Partitions {
			if len(p.ISR) != 3 {
				return false
			}
		}
		return true
	}
	c.until("the topic fully in sync", inSync)

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.RecordDeliveryTimeout(time.Minute),
		kgo.MetadataMinAge(50*time.Millisecond),
		// (a request to a stopped broker is given up in seconds, not tens)
		kgo.ProduceRequestTimeout(time.Second), kgo.RequestTimeoutOverhead(time.Second))
	require.NoError(t, err)
	defer cl.Close()
	chk := clustertest.New()
	for kill := range n {
		require.NoError(t, chk.Produce(ctx, cl, "k", fmt.Sprintf("a%d-", kill), 50))
		before := c.watch.Snapshot()
		fault := kill % 3
		victim := before.Topics["k"].Partitions[kill%3].Leader
		if fault == 1 {
			victim = before.Controller
		}
		done := make(chan error, 1)
		go func() { done <- chk.Produce(ctx, cl, "k", fmt.Sprintf("b%d-", kill), 100) }() // through the fault
		if fault == 2 {
			require.NoError(t, c.cmds[victim].Process.Signal(syscall.SIGSTOP))
		} else {
			c.kill(victim)
		}
		after := c.until("the victim's session, leaderships and controllership gone", func(s *cluster.Snapshot) bool {
			for _, p := range s.Topics["k"].Partitions {
				if p.Leader == victim || p.Leader < 0 {
					return false
				}
			}
			_, registered := s.Brokers[victim]
			return !registered && s.Controller >= 0 && s.Controller != victim
		})
		if victim == before.Controller {
			require.Greater(t, after.ControllerEpoch, before.ControllerEpoch, "kill %d", kill)
		}
		require.NoError(t, <-done, "kill %d", kill)
		if kill == 0 {
			code, out, errOut := runSeglog(t, "cluster", "--bootstrap-server", c.seeds()[0], "--under-replicated-partitions")
			require.Equal(t, 0, code, errOut)
			require.Equal(t, 3, strings.Count(out, "Topic: k\t"), "every partition is under-replicated: %s", out)
		}
		if fault == 2 {
			require.NoError(t, c.cmds[victim].Process.Signal(syscall.SIGCONT)) // the zombie wakes up
		} else {
			c.start(victim)
		}
		c.until("the victim back in every ISR", inSync)
	}
	code, out, errOut := runSeglog(t, "cluster", "--bootstrap-server", c.seeds()[0])
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "Brokers: 3")
	require.Equal(t, 1, strings.Count(out, "(controller)"), out)
	require.Contains(t, out, "Every partition is fully replicated.")
	require.NoError(t, chk.Produce(ctx, cl, "k", "c", 50))
	chk.ReadBack(t, c.seeds(), "k", 3)
	t.Logf("%d faults, %d acknowledged records, none lost or duplicated", n, chk.Acked())
}
