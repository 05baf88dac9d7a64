// The cluster's kill loop and the reassign command's test are not built
// under -race: their child processes would be race binaries with an etcd
// server linked in, the slowest package of make test made slower still;
// make test runs them without the race detector beside the benchmark
// harness's tests, and their packages (cluster, replica, broker, server)
// are raced by their own tests.

//go:build !race

package main

import (
	"context"
	crand "crypto/rand"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

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
	// ports are where each broker listened first: it comes back there
	// after a kill, as a real broker does (a client that knows only the
	// old addresses must find the cluster again).
	ports map[int32]string
	// watch is an observer of the cluster's metadata (no registration).
	watch *cluster.Member
}

func newServeCluster(t *testing.T, n int) *serveCluster {
	c := &serveCluster{t: t, etcd: etcdtest.FromEnv(t), dir: t.TempDir(), cmds: map[int32]*exec.Cmd{}, addrs: map[int32]string{},
		ports: map[int32]string{}}
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

// start runs broker id on its data directory (again after a kill, on the
// same port).
func (c *serveCluster) start(id int32) {
	port := c.ports[id]
	if port == "" {
		port = "0"
	}
	cmd, lines := startServe(c.t, "--data-dir", filepath.Join(c.dir, fmt.Sprint(id)),
		"--config", "listeners=PLAINTEXT://127.0.0.1:"+port, "--config", fmt.Sprintf("node.id=%d", id),
		"--config", "seglog.etcd.endpoints="+c.etcd.Endpoints()[0], "--config", "seglog.etcd.prefix=/seglog/kill/",
		"--config", "broker.session.timeout.ms=2000", "--config", "broker.heartbeat.interval.ms=200",
		"--config", "default.replication.factor=3", "--config", "min.insync.replicas=2",
		"--config", "replica.fetch.wait.max.ms=100", "--config", "replica.fetch.backoff.ms=50",
		"--config", "replica.lag.time.max.ms=10000") // (a loaded machine (make test runs the race tests beside) can stall a follower for seconds)
	c.cmds[id], c.addrs[id] = cmd, servedAddr(c.t, cmd, lines)
	_, c.ports[id], _ = net.SplitHostPort(c.addrs[id])
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

// txnCoordinator asks a broker for the coordinator of a transactional id.
func (c *serveCluster) txnCoordinator(ctx context.Context, id string) int32 {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...))
	require.NoError(c.t, err)
	defer cl.Close()
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorType, req.CoordinatorKeys = 1, []string{id}
	resp, err := req.RequestWith(ctx, cl)
	require.NoError(c.t, err)
	require.Len(c.t, resp.Coordinators, 1)
	require.Zero(c.t, resp.Coordinators[0].ErrorCode)
	return resp.Coordinators[0].NodeID
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
// past its session (a zombie that wakes up), a SIGKILL of a transaction's
// coordinator's broker in the middle of the transaction (the next
// coordinator has it, and its commit is whole). After each, the controller (a
// new one after the controller's kill, at a higher epoch) elects others
// from the ISR and the producer goes on; the killed broker comes back, the
// stopped one wakes up, finds its session gone and registers again; both
// truncate to their leaders and rejoin every ISR. At the end every
// acknowledged record is read back exactly once at the offset it was
// acknowledged at (a zombie acknowledges nothing it could lose), and,
// read committed, every committed transaction once and whole, nothing of
// an aborted one. make test runs the four; make crash (SEGLOG_KILLS) a
// hundred.
func TestClusterKillLoop(t *testing.T) {
	t.Parallel() // (mostly waiting for sessions to expire)
	n := 4
	if v := os.Getenv("SEGLOG_KILLS"); v != "" {
		n = kills(t)
	}
	c := newServeCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(2+n)*time.Minute)
	defer cancel()
	adm, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...))
	require.NoError(t, err)
	for _, topic := range []string{"k", "t"} {
		_, err = kadm.NewClient(adm).CreateTopic(ctx, 3, -1, nil, topic)
		require.NoError(t, err)
	}
	// e, idle, needs all three replicas in sync: a broker's death leaves
	// it in e's Eligible Leader Replicas.
	_, err = kadm.NewClient(adm).CreateTopic(ctx, 1, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("3")}, "e")
	require.NoError(t, err)
	adm.Close()
	// inSync: k and t exist, and every replica of every topic (the
	// internal ones too) is in its ISR.
	inSync := func(s *cluster.Snapshot) bool {
		for _, topic := range []string{"k", "t"} {
			if t, ok := s.Topics[topic]; !ok || len(t.Partitions) != 3 {
				return false
			}
		}
		for _, t := range s.Topics {
			for i, p := range t.Partitions {
				if len(p.ISR) != len(t.Replicas[i]) {
					return false
				}
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
	// A transactional producer to topic t, whose transactions one fault
	// interrupts.
	tcl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.TransactionalID("kill-tx"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MetadataMinAge(50*time.Millisecond),
		kgo.ProduceRequestTimeout(time.Second), kgo.RequestTimeoutOverhead(time.Second))
	require.NoError(t, err)
	defer tcl.Close()
	tchk := clustertest.New()
	require.NoError(t, tchk.Transact(ctx, tcl, "t", "committed-", 6, true, nil, 0, 1, 2))
	require.NoError(t, tchk.Transact(ctx, tcl, "t", "aborted-", 6, false, nil, 0, 1, 2))
	for kill := range n {
		require.NoError(t, chk.Produce(ctx, cl, "k", fmt.Sprintf("a%d-", kill), 50))
		before := c.watch.Snapshot()
		fault := kill % 4
		victim := before.Topics["k"].Partitions[kill%3].Leader
		var txnDone chan error
		proceed := make(chan struct{})
		switch fault {
		case 1:
			victim = before.Controller
		case 3: // the transaction's records are written; its coordinator dies
			produced := make(chan struct{})
			txnDone = make(chan error, 1)
			go func() {
				txnDone <- tchk.Transact(ctx, tcl, "t", fmt.Sprintf("t%d-", kill), 6, true, func() { close(produced); <-proceed }, 0, 1, 2)
			}()
			<-produced
			victim = c.txnCoordinator(ctx, "kill-tx")
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
		close(proceed)
		if txnDone != nil {
			require.NoError(t, <-txnDone, "kill %d: the commit after the coordinator's kill", kill)
		}
		if kill == 0 {
			code, out, errOut := runSeglog(t, "cluster", "--bootstrap-server", c.seeds()[0], "--under-replicated-partitions")
			require.Equal(t, 0, code, errOut)
			require.Equal(t, 3, strings.Count(out, "Topic: k\t"), "every partition is under-replicated: %s", out)
			c.until("the victim in e's ELR", func(s *cluster.Snapshot) bool {
				st, ok := s.Partition("e", 0)
				return ok && len(st.ISR) == 2 && slices.Equal(st.ELR, []int32{victim})
			})
			code, out, errOut = runSeglog(t, "cluster", "--bootstrap-server", c.seeds()[0], "--under-min-isr-partitions")
			require.Equal(t, 0, code, errOut)
			require.Regexp(t, fmt.Sprintf(`(?m)^\tTopic: e\tPartition: 0\tLeader: \d\tReplicas: [\d,]+\tIsr: \d,\d\tOffline: %d\tElr: %d\tLastKnownElr: $`, victim, victim), out)
		}
		if fault == 2 {
			require.NoError(t, c.cmds[victim].Process.Signal(syscall.SIGCONT)) // the zombie wakes up
		} else {
			c.start(victim)
		}
		c.until("the victim back in every ISR", inSync)
	}
	// seglog cluster says every partition is fully replicated — unless
	// an ISR shrank again since (a follower stalled on a loaded machine):
	// then it names the partition, and is asked again once every replica
	// is back.
	for {
		code, out, errOut := runSeglog(t, "cluster", "--bootstrap-server", c.seeds()[0])
		require.Equal(t, 0, code, errOut)
		require.Contains(t, out, "Brokers: 3")
		require.Equal(t, 1, strings.Count(out, "(controller)"), out)
		if strings.Contains(out, "Every partition is fully replicated.") {
			break
		}
		require.Contains(t, out, "(under-replicated)", out)
		c.until("every replica back in its ISR", inSync)
	}
	// seglog leaders gives every partition its preferred leader back
	// (asked again if a preferred replica had left its ISR meanwhile).
	for {
		code, out, errOut := runSeglog(t, "leaders", "--bootstrap-server", c.seeds()[0], "--election-type", "preferred", "--all-topic-partitions")
		if code == 0 {
			break
		}
		require.Contains(t, out, "Error completing leader election (PREFERRED) for partition: ", errOut)
		c.until("every replica back in its ISR", inSync)
	}
	c.until("every partition led by its preferred replica", func(s *cluster.Snapshot) bool {
		for _, ts := range s.Topics {
			for p, st := range ts.Partitions {
				if st.Leader != ts.Replicas[p][0] {
					return false
				}
			}
		}
		return true
	})
	asked := filepath.Join(t.TempDir(), "partitions.json")
	require.NoError(t, os.WriteFile(asked, []byte(`{"partitions": [{"topic": "k", "partition": 0}, {"topic": "k", "partition": 9}]}`), 0o600))
	code, out, _ := runSeglog(t, "leaders", "--bootstrap-server", c.seeds()[0], "--election-type", "PREFERRED", "--path-to-json-file", asked)
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "Valid replica already elected for partitions k-0\n")
	require.Contains(t, out, "Error completing leader election (PREFERRED) for partition: k-9: UNKNOWN_TOPIC_OR_PARTITION")
	require.NoError(t, chk.Produce(ctx, cl, "k", "c", 50))
	chk.ReadBack(t, c.seeds(), "k", 3)
	require.NoError(t, tchk.Transact(ctx, tcl, "t", "last-", 3, true, nil, 0, 1, 2))
	tchk.ReadCommitted(t, c.seeds(), "t", 3)
	t.Logf("%d faults, %d acknowledged records, none lost or duplicated; transactions whole", n, chk.Acked())
}

// seglog reassign against four `seglog serve` processes, as
// kafka-reassign-partitions.sh: --generate proposes a balanced assignment
// over three of the brokers (from the current one, printed too), --execute
// starts it with a throttle (the rollback JSON printed first), the
// partitions move, --verify says each is completed and clears the
// throttles; a move throttled to a byte a second stays in progress
// (seglog cluster lists it, another --execute is refused without
// --additional) until --cancel; nothing acknowledged is lost.
func TestReassignCommand(t *testing.T) {
	c := newServeCluster(t, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.MetadataMinAge(50*time.Millisecond))
	require.NoError(t, err)
	defer cl.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "mv", -1, -1
	rt.ReplicaAssignment = []kmsg.CreateTopicsRequestTopicReplicaAssignment{{Partition: 0, Replicas: []int32{1, 2, 3}}, {Partition: 1, Replicas: []int32{2, 3, 1}}}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Zero(t, resp.Topics[0].ErrorCode)
	replicasAre := func(want map[int32][]int32) func(*cluster.Snapshot) bool {
		return func(s *cluster.Snapshot) bool {
			ts, ok := s.Topics["mv"]
			if !ok {
				return false
			}
			for p, rs := range want {
				if st := ts.Partitions[p]; !slices.Equal(ts.Replicas[p], rs) || st.Reassigning() || len(st.ISR) != len(rs) {
					return false
				}
			}
			return true
		}
	}
	c.until("mv in sync", replicasAre(map[int32][]int32{0: {1, 2, 3}, 1: {2, 3, 1}}))
	chk := clustertest.New()
	require.NoError(t, chk.Produce(ctx, cl, "mv", "a", 200))

	// The partitions go to three brokers; the fourth (not the
	// controller, which admin requests go to) is stopped later.
	ctrl := c.watch.Snapshot().Controller
	var spare int32 = 4
	if ctrl == spare {
		spare = 3
	}
	var list []string
	for id := int32(1); id <= 4; id++ {
		if id != spare {
			list = append(list, fmt.Sprint(id))
		}
	}
	dir := t.TempDir()
	topics := filepath.Join(dir, "topics.json")
	require.NoError(t, os.WriteFile(topics, []byte(`{"version":1,"topics":[{"topic":"mv"}]}`), 0o600))
	code, out, errOut := runSeglog(t, "reassign", "--bootstrap-server", c.seeds()[0], "--generate", "--topics-to-move-json-file", topics, "--broker-list", strings.Join(list, ","))
	require.Equal(t, 0, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 5, out)
	require.Equal(t, "Current partition replica assignment", lines[0])
	require.Equal(t, `{"version":1,"partitions":[{"topic":"mv","partition":0,"replicas":[1,2,3],"log_dirs":["any","any","any"]},{"topic":"mv","partition":1,"replicas":[2,3,1],"log_dirs":["any","any","any"]}]}`, lines[1])
	require.Equal(t, "Proposed partition reassignment configuration", lines[3])
	var proposed reassignment
	require.NoError(t, json.Unmarshal([]byte(lines[4]), &proposed))
	want := map[int32][]int32{}
	for _, p := range proposed.Partitions {
		require.Len(t, p.Replicas, 3)
		require.NotContains(t, p.Replicas, spare, "only the listed brokers")
		want[p.Partition] = p.Replicas
	}
	require.Len(t, want, 2)
	plan := filepath.Join(dir, "plan.json")
	require.NoError(t, os.WriteFile(plan, []byte(lines[4]), 0o600))

	code, out, errOut = runSeglog(t, "reassign", "--bootstrap-server", c.seeds()[0], "--execute", "--reassignment-json-file", plan, "--throttle", "100000000")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "Current partition replica assignment\n\n"+lines[1]+"\n\nSave this to use as the --reassignment-json-file option during rollback\n")
	require.Contains(t, out, "The inter-broker throttle limit was set to 100000000 B/s\n")
	require.Contains(t, out, "Successfully started partition reassignments for mv-0,mv-1\n")
	require.NoError(t, chk.Produce(ctx, cl, "mv", "b", 100))
	c.until("mv moved", replicasAre(want))
	code, out, errOut = runSeglog(t, "reassign", "--bootstrap-server", c.seeds()[0], "--verify", "--reassignment-json-file", plan)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "Status of partition reassignment:\nReassignment of partition mv-0 is completed.\nReassignment of partition mv-1 is completed.\n\n"+
		"Clearing broker-level throttles on brokers 1,2,3,4\nClearing topic-level throttles on topic mv\n", out)
	adm := kadm.NewClient(cl)
	rcs, err := adm.DescribeTopicConfigs(ctx, "mv")
	require.NoError(t, err)
	for _, cfg := range rcs[0].Configs {
		if strings.HasSuffix(cfg.Key, ".replication.throttled.replicas") {
			require.Equal(t, "", cfg.MaybeValue(), "%s cleared", cfg.Key)
		}
	}

	// A move of 16 MiB onto the spare broker, throttled to a byte a
	// second (set first, with seglog configs, on every broker): the
	// spare's first fetch takes 1 MiB at most and then nothing, so the
	// move stays in progress until cancelled.
	seed := c.addrs[ctrl]
	slow := kmsg.NewCreateTopicsRequestTopic()
	slow.Topic, slow.NumPartitions, slow.ReplicationFactor = "slow", -1, -1
	slow.ReplicaAssignment = []kmsg.CreateTopicsRequestTopicReplicaAssignment{{Partition: 0, Replicas: want[0]}}
	req.Topics = []kmsg.CreateTopicsRequestTopic{slow}
	resp, err = req.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Zero(t, resp.Topics[0].ErrorCode)
	for range 32 {
		value := make([]byte, 512<<10)
		_, _ = crand.Read(value)
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "slow", Value: value}).FirstErr())
	}
	code, _, errOut = runSeglog(t, "configs", "--bootstrap-server", seed, "--entity-type", "brokers", "--entity-default", "--alter",
		"--add-config", "leader.replication.throttled.rate=1,follower.replication.throttled.rate=1")
	require.Equal(t, 0, code, errOut)
	code, _, errOut = runSeglog(t, "configs", "--bootstrap-server", seed, "--entity-type", "topics", "--entity-name", "slow", "--alter",
		"--add-config", "leader.replication.throttled.replicas=*,follower.replication.throttled.replicas=*")
	require.Equal(t, 0, code, errOut)
	back := filepath.Join(dir, "back.json")
	target := []int32{spare, want[0][1], want[0][2]}
	require.NoError(t, os.WriteFile(back, []byte(fmt.Sprintf(`{"version":1,"partitions":[{"topic":"slow","partition":0,"replicas":[%s]}]}`, ids(target))), 0o600))
	code, out, errOut = runSeglog(t, "reassign", "--bootstrap-server", seed, "--execute", "--reassignment-json-file", back)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "Successfully started partition reassignments for slow-0\n")
	code, out, errOut = runSeglog(t, "cluster", "--bootstrap-server", seed)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, fmt.Sprintf("Reassignments in progress:\n\tTopic: slow\tPartition: 0\tReplicas: %s,%d\tAdding: %d\tRemoving: %d\n",
		ids(target), want[0][0], spare, want[0][0]))
	code, _, errOut = runSeglog(t, "reassign", "--bootstrap-server", seed, "--execute", "--reassignment-json-file", plan)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "existing partition assignment; use --additional")
	code, out, errOut = runSeglog(t, "reassign", "--bootstrap-server", seed, "--verify", "--reassignment-json-file", back)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "Status of partition reassignment:\nReassignment of partition slow-0 is still in progress.\n", out)
	code, out, errOut = runSeglog(t, "reassign", "--bootstrap-server", seed, "--cancel", "--reassignment-json-file", back)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "Successfully cancelled partition reassignments for: slow-0\n", out)
	// (Kafka's revert: the replicas less those being added, in the
	// reassignment's order — the removed one last.)
	c.until("slow-0 back on its replicas", func(s *cluster.Snapshot) bool {
		ts, ok := s.Topics["slow"]
		return ok && slices.Equal(ts.Replicas[0], []int32{want[0][1], want[0][2], want[0][0]}) && !ts.Partitions[0].Reassigning()
	})
	code, out, _ = runSeglog(t, "reassign", "--bootstrap-server", seed, "--cancel", "--reassignment-json-file", back)
	require.Equal(t, 0, code)
	require.Equal(t, "None of the specified partition moves are active.\n", out)
	chk.ReadBack(t, c.seeds(), "mv", 2)
}
