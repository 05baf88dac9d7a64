package server

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/seglog/seglog/broker"
	"github.com/seglog/seglog/broker/auth"
	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/cluster"
	"github.com/seglog/seglog/internal/clustertest"
	"github.com/seglog/seglog/internal/etcdtest"
	"github.com/seglog/seglog/internal/faultproxy"
	"github.com/seglog/seglog/internal/testpki"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/tablet"
	"github.com/seglog/seglog/vfs"
)

// testCluster is brokers in this process over an in-process etcd.
type testCluster struct {
	t       *testing.T
	etcd    *etcdtest.Cluster
	dir     string
	servers map[int32]*Server
	done    map[int32]chan error
	// proxies are the fault proxies some brokers reach etcd through.
	proxies map[int32]*faultproxy.Proxy
	// addrs are where each broker listened first: it comes back there, as
	// a real broker does (a client that knows only old addresses must
	// find the cluster again).
	addrs map[int32]string
	// links, if set, are fault proxies in front of each broker's
	// inter-broker listener (REPL, advertised at the proxy): what its
	// followers fetch through.
	links map[int32]*faultproxy.Proxy
	// lagTime is replica.lag.time.max.ms (0: the default).
	lagTime time.Duration
	// fss, if set, are brokers' data directory filesystems (the crash
	// simulator's, for a power cut).
	fss map[int32]*vfs.MemFS
	// shutdownTimeout bounds a controlled shutdown (0: the default).
	shutdownTimeout time.Duration
	// configure, if set, changes each broker's config before it starts.
	configure func(id int32, cfg *Config)
}

// newTestCluster starts n brokers; those in proxied reach etcd through a
// fault proxy each.
func newTestCluster(t *testing.T, n int, proxied ...int32) *testCluster {
	c := makeTestCluster(t, proxied...)
	c.boot(n)
	return c
}

// makeTestCluster is newTestCluster before its brokers start (boot).
func makeTestCluster(t *testing.T, proxied ...int32) *testCluster {
	return makeTestClusterOver(t, etcdtest.Start(t, 1), proxied...)
}

// makeTestClusterOver is makeTestCluster over etcd members e.
func makeTestClusterOver(t *testing.T, e *etcdtest.Cluster, proxied ...int32) *testCluster {
	c := &testCluster{t: t, etcd: e, dir: t.TempDir(), servers: map[int32]*Server{}, done: map[int32]chan error{},
		proxies: map[int32]*faultproxy.Proxy{}, addrs: map[int32]string{}}
	for _, id := range proxied {
		c.proxies[id] = faultproxy.Start(t, strings.TrimPrefix(c.etcd.Endpoints()[0], "http://"))
	}
	return c
}

// boot starts brokers 1 … n and waits until each sees them all.
func (c *testCluster) boot(n int) {
	t := c.t
	for id := range int32(n) {
		c.start(id + 1)
	}
	t.Cleanup(func() {
		for id := range c.servers {
			c.stop(id)
		}
	})
	for _, s := range c.servers {
		until(t, s.Member(), fmt.Sprintf("sees %d brokers", n), func(sn *cluster.Snapshot) bool { return len(sn.Brokers) == n })
	}
}

func (c *testCluster) start(id int32) *Server {
	cfg := config(filepath.Join(c.dir, fmt.Sprint(id)))
	cfg.MetricsAddr = ""
	if a, ok := c.addrs[id]; ok {
		cfg.Listeners[0].Address = a
	}
	cfg.Manager.NodeID = id
	if os.Getenv("SEGLOG_TEST_LOG") != "" { // (to see what the brokers do)
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil)).With("node", id)
	}
	cfg.Broker.Groups.NoInitialDelay = true
	cfg.Broker.Groups.ConsumerHeartbeatInterval = 100 * time.Millisecond
	endpoints := c.etcd.Endpoints()
	if p, ok := c.proxies[id]; ok {
		endpoints = []string{"http://" + p.Addr()}
	}
	cfg.Cluster = &ClusterConfig{Endpoints: endpoints, Prefix: "/seglog/test/", SessionTimeout: 2 * time.Second,
		HeartbeatInterval: 200 * time.Millisecond, DefaultReplicationFactor: 3, MinInsyncReplicas: 2, FetchWait: 100 * time.Millisecond,
		FetchBackoff: 50 * time.Millisecond}
	cfg.Cluster.LagTime, cfg.Cluster.ShutdownTimeout = c.lagTime, c.shutdownTimeout
	if fsys, ok := c.fss[id]; ok {
		cfg.FS, cfg.DataDir = fsys, fmt.Sprintf("/%d", id) // (at the root: no new parents to sync)
	}
	link := c.links[id]
	if link != nil {
		_, port, err := net.SplitHostPort(link.Addr())
		require.NoError(c.t, err)
		p, err := strconv.Atoi(port)
		require.NoError(c.t, err)
		cfg.Listeners = append(cfg.Listeners, Listener{Name: "REPL", Address: cmp.Or(c.addrs[-id], "127.0.0.1:0"),
			AdvertisedHost: "127.0.0.1", AdvertisedPort: int32(p)})
		cfg.Cluster.InterBrokerListener = "REPL"
	}
	if c.configure != nil {
		c.configure(id, &cfg)
	}
	s, err := New(context.Background(), cfg)
	require.NoError(c.t, err)
	if link != nil {
		c.addrs[-id] = s.Listeners()[1].Addr.String() // (-id: its REPL listener's)
		link.SetTarget(c.addrs[-id])
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	c.servers[id] = s
	c.addrs[id] = s.Listeners()[0].Addr.String()
	c.done[id] = make(chan error, 1)
	go func() { err := <-done; cancel(); c.done[id] <- err }()
	return s
}

// stop closes a broker (a controlled shutdown).
func (c *testCluster) stop(id int32) {
	s := c.servers[id]
	require.NoError(c.t, s.Close())
	require.NoError(c.t, <-c.done[id])
	delete(c.servers, id)
}

// coordinator asks every broker for the coordinator of key (typ 0: a
// group, 1: a transactional id) and checks that they all name the same.
func (c *testCluster) coordinator(ctx context.Context, key string, typ int8) int32 {
	t := c.t
	var coordinator int32 = -1
	for _, s := range c.servers {
		one, err := kgo.NewClient(kgo.SeedBrokers(s.Listeners()[0].Addr.String()))
		require.NoError(t, err)
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorType = typ
		req.CoordinatorKey = key
		req.CoordinatorKeys = []string{key}
		kr, err := one.SeedBrokers()[0].Request(ctx, req)
		one.Close()
		require.NoError(t, err)
		fc := kr.(*kmsg.FindCoordinatorResponse)
		id := fc.NodeID
		if len(fc.Coordinators) == 1 {
			require.Zero(t, fc.Coordinators[0].ErrorCode)
			id = fc.Coordinators[0].NodeID
		}
		if coordinator < 0 {
			coordinator = id
		}
		require.Equal(t, coordinator, id, "every broker names the same coordinator")
	}
	return coordinator
}

// admin is an admin client of the cluster, closed at the test's end.
func (c *testCluster) admin() *kadm.Client {
	adm, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.MetadataMinAge(50*time.Millisecond))
	require.NoError(c.t, err)
	c.t.Cleanup(adm.Close)
	return kadm.NewClient(adm)
}

func (c *testCluster) seeds() []string {
	var out []string
	for _, s := range c.servers {
		out = append(out, s.Listeners()[0].Addr.String())
	}
	return out
}

// until waits for cond on m's snapshot (failing after a minute).
func until(t *testing.T, m *cluster.Member, what string, cond func(*cluster.Snapshot) bool) *cluster.Snapshot {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := m.Until(ctx, cond)
	require.NoError(t, err, "node %d: never %s", m.NodeID(), what)
	return s
}

// Three brokers with replication factor 3: every acknowledged record is
// read back once at its offset; the followers hold the leader's bytes
// below the high watermark; a controlled shutdown of a leader moves its
// partitions and produce goes on, losing nothing.
func TestClusterReplicatesAndFailsOver(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 3)
	adm, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...))
	require.NoError(t, err)
	defer adm.Close()
	ctx := context.Background()
	res, err := kadm.NewClient(adm).CreateTopic(ctx, 3, -1, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}, "r")
	require.NoError(t, err)
	require.NoError(t, res.Err)

	md, err := kadm.NewClient(adm).Metadata(ctx, "r")
	require.NoError(t, err)
	require.Len(t, md.Brokers, 3)
	for _, p := range md.Topics["r"].Partitions {
		require.Len(t, p.Replicas, 3)
		require.Len(t, p.ISR, 3)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.MetadataMinAge(50*time.Millisecond))
	require.NoError(t, err)
	defer cl.Close()
	chk := clustertest.New()
	require.NoError(t, chk.Produce(ctx, cl, "r", "a", 300))
	chk.ReadBack(t, c.seeds(), "r", 3)

	// Below the high watermark every replica holds the same bytes.
	for p := range int32(3) {
		sameBytes(t, c, checkpoint.TopicPartition{Topic: "r", Partition: p})
	}

	// The leader of partition 0 shuts down: its partitions move, and
	// produce goes on with the two left (min.insync.replicas=2).
	st, _ := c.servers[1].Member().Snapshot().Partition("r", 0)
	c.stop(st.Leader)
	for _, s := range c.servers {
		until(t, s.Member(), "sees the leader gone", func(sn *cluster.Snapshot) bool { _, ok := sn.Brokers[st.Leader]; return !ok })
	}
	require.NoError(t, chk.Produce(ctx, cl, "r", "b", 300))
	chk.ReadBack(t, c.seeds(), "r", 3)

	// Every partition is under-replicated now (two of its three replicas
	// live), as the leaders' metrics say; one broker is the controller.
	sum := map[string]float64{}
	for _, s := range c.servers {
		reg := prometheus.NewRegistry()
		require.NoError(t, reg.Register(s.Replicas().Collector()))
		mfs, err := reg.Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				sum[mf.GetName()] += m.GetGauge().GetValue() + m.GetCounter().GetValue()
			}
		}
	}
	require.Equal(t, 3.0, sum["seglog_cluster_under_replicated_partitions"])
	require.Equal(t, 3.0, sum["seglog_cluster_leader_partitions"])
	require.Equal(t, 1.0, sum["seglog_cluster_active_controller"])
	require.Zero(t, sum["seglog_cluster_offline_partitions"])
	require.Equal(t, 3.0, sum["seglog_cluster_leader_elections_total"], "one each at creation, and the stopped broker's partition")
}

// sameBytes checks that the live replicas of a partition (the brokers
// running that it is assigned to) hold the same batches below the least
// high watermark among them. (A follower learns the high watermark from
// its next fetch: on a loaded machine it may not have yet, so only the
// greatest one must show records were written.)
func sameBytes(t *testing.T, c *testCluster, tp checkpoint.TopicPartition) {
	var ref []byte
	var hw, most int64 = -1, 0
	var tablets []*tablet.Tablet
	for id, s := range c.servers {
		ts, ok := s.Member().Snapshot().Topics[tp.Topic]
		require.True(t, ok)
		if !slices.Contains(ts.Replicas[tp.Partition], id) {
			continue
		}
		tb, ok := s.Manager().Get(tp)
		require.True(t, ok, "node %d holds no replica of %s", id, tp)
		tablets = append(tablets, tb)
		o := tb.Offsets()
		if hw < 0 || o.HighWatermark < hw {
			hw = o.HighWatermark
		}
		most = max(most, o.HighWatermark)
	}
	require.Positive(t, most, "%s: no replica has a record below its high watermark", tp)
	require.GreaterOrEqual(t, len(tablets), 2)
	var start int64 // (from the latest log start: records deleted below it are gone from some)
	for _, tb := range tablets {
		start = max(start, tb.Offsets().LogStartOffset)
	}
	for i, tb := range tablets {
		var got bytes.Buffer
		for off := start; off < hw; {
			res, err := tb.Read(off, tablet.ReadOptions{MaxBytes: 1 << 20, Isolation: tablet.ReadLogEnd})
			require.NoError(t, err)
			_, err = res.Records.WriteTo(&got)
			require.NoError(t, err)
			res.Close()
			next := lastOffset(t, got.Bytes()) + 1
			require.Greater(t, next, off)
			off = next
		}
		if i == 0 {
			ref = got.Bytes()
			continue
		}
		n := min(len(ref), got.Len())
		require.True(t, bytes.Equal(ref[:n], got.Bytes()[:n]), "%s: replica %d differs below the high watermark", tp, i)
	}
}

// lastOffset is the last offset of the last whole batch in b.
func lastOffset(t *testing.T, b []byte) int64 {
	last := int64(-1)
	for len(b) > 0 {
		h, n, err := record.ParseHeader(b)
		if err != nil || n > int64(len(b)) {
			break
		}
		last = h.BaseOffset + int64(h.LastOffsetDelta)
		b = b[n:]
	}
	require.GreaterOrEqual(t, last, int64(0))
	return last
}

// A broker that does not lead a partition answers produce with
// NOT_LEADER_OR_FOLLOWER and KIP-951's hint: the current leader, its
// epoch and its endpoint; so does one without a replica a consumer's
// fetch (a follower serves it: KIP-392).
func TestClusterLeaderHints(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 3)
	ctx := context.Background()
	adm, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...))
	require.NoError(t, err)
	defer adm.Close()
	_, err = kadm.NewClient(adm).CreateTopic(ctx, 1, 2, nil, "h")
	require.NoError(t, err)
	until(t, c.servers[1].Member(), "has h in sync", func(sn *cluster.Snapshot) bool {
		st, ok := sn.Partition("h", 0)
		return ok && len(st.ISR) == 2
	})
	st, _ := c.servers[1].Member().Snapshot().Partition("h", 0)
	follower := st.ISR[1]
	if follower == st.Leader {
		follower = st.ISR[0]
	}
	outsider := int32(6) - st.ISR[0] - st.ISR[1] // (the broker without a replica)
	for _, s := range c.servers {                // every broker has applied the topic
		require.NoError(t, s.Replicas().Await(ctx, c.servers[1].Member().Snapshot().Revision))
	}
	leaderAddr := c.servers[st.Leader].Listeners()[0].Addr.(*net.TCPAddr)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.servers[follower].Listeners()[0].Addr.String()))
	require.NoError(t, err)
	defer cl.Close()
	b := record.NewBuilder(record.None)
	require.NoError(t, b.Append(record.Record{Value: []byte("x"), Timestamp: time.Now().UnixMilli()}))
	batch, err := b.Build()
	require.NoError(t, err)

	produce := kmsg.NewPtrProduceRequest()
	produce.SetVersion(11)
	produce.Acks, produce.TimeoutMillis = -1, 5000
	ts := c.servers[1].Member().Snapshot().Topics["h"]
	produce.Topics = []kmsg.ProduceRequestTopic{{Topic: "h", TopicID: ts.ID, Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: batch.Bytes()}}}}
	kr, err := cl.SeedBrokers()[0].Request(ctx, produce)
	require.NoError(t, err)
	pr := kr.(*kmsg.ProduceResponse)
	pp := pr.Topics[0].Partitions[0]
	require.Equal(t, kerr.NotLeaderForPartition.Code, pp.ErrorCode)
	require.Equal(t, st.Leader, pp.CurrentLeader.LeaderID)
	require.Equal(t, st.LeaderEpoch, pp.CurrentLeader.LeaderEpoch)
	require.Len(t, pr.Brokers, 1)
	require.Equal(t, st.Leader, pr.Brokers[0].NodeID)
	require.Equal(t, int32(leaderAddr.Port), pr.Brokers[0].Port)

	fetch := kmsg.NewPtrFetchRequest()
	fetch.SetVersion(16)
	fetch.ReplicaID, fetch.MaxWaitMillis, fetch.SessionEpoch = -1, 0, -1
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = 0, 0, 1<<20
	fetch.Topics = []kmsg.FetchRequestTopic{{Topic: "h", TopicID: ts.ID, Partitions: []kmsg.FetchRequestTopicPartition{rp}}}
	kr, err = cl.SeedBrokers()[0].Request(ctx, fetch)
	require.NoError(t, err)
	require.Zero(t, kr.(*kmsg.FetchResponse).Topics[0].Partitions[0].ErrorCode, "a follower serves a consumer's fetch v11+")
	ocl, err := kgo.NewClient(kgo.SeedBrokers(c.servers[outsider].Listeners()[0].Addr.String()))
	require.NoError(t, err)
	defer ocl.Close()
	kr, err = ocl.SeedBrokers()[0].Request(ctx, fetch)
	require.NoError(t, err)
	fr := kr.(*kmsg.FetchResponse)
	fp := fr.Topics[0].Partitions[0]
	require.Equal(t, kerr.NotLeaderForPartition.Code, fp.ErrorCode)
	require.Equal(t, st.Leader, fp.CurrentLeader.LeaderID)
	require.Len(t, fr.Brokers, 1)
	require.Equal(t, int32(leaderAddr.Port), fr.Brokers[0].Port)

	// ListOffsets and DeleteRecords are the leader's too: a follower's
	// local log is neither told nor changed.
	lo := kmsg.NewPtrListOffsetsRequest()
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Partition, lp.Timestamp = 0, -1
	lo.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: "h", Partitions: []kmsg.ListOffsetsRequestTopicPartition{lp}}}
	kr, err = cl.SeedBrokers()[0].Request(ctx, lo)
	require.NoError(t, err)
	require.Equal(t, kerr.NotLeaderForPartition.Code, kr.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].ErrorCode)
	dr := kmsg.NewPtrDeleteRecordsRequest()
	dr.TimeoutMillis = 5000
	dr.Topics = []kmsg.DeleteRecordsRequestTopic{{Topic: "h", Partitions: []kmsg.DeleteRecordsRequestTopicPartition{{Partition: 0, Offset: 0}}}}
	kr, err = cl.SeedBrokers()[0].Request(ctx, dr)
	require.NoError(t, err)
	require.Equal(t, kerr.NotLeaderForPartition.Code, kr.(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0].ErrorCode)
}

// A leader cut off from etcd acknowledges nothing once its session may
// have expired (it fences itself: by the time the others see its
// registration gone, it refuses every produce), the others elect a new
// leader and go on, and when it is back it registers again, follows the
// new leader and nothing acknowledged is lost or duplicated.
func TestClusterFencedLeaderAcknowledgesNothing(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 3, 3)
	ctx := context.Background()
	_, err := c.servers[1].Member().CreateTopic(ctx, cluster.TopicSpec{Name: "z", Assignment: [][]int32{{3, 1, 2}}})
	require.NoError(t, err)
	for _, s := range c.servers {
		require.NoError(t, s.Replicas().Await(ctx, c.servers[1].Member().Snapshot().Revision))
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.MetadataMinAge(50*time.Millisecond))
	require.NoError(t, err)
	defer cl.Close()
	chk := clustertest.New()
	require.NoError(t, chk.Produce(ctx, cl, "z", "a", 50))

	zombie := c.servers[3]
	c.proxies[3].Cut()
	until(t, c.servers[1].Member(), "sees broker 3's session gone and another leader", func(s *cluster.Snapshot) bool {
		_, registered := s.Brokers[3]
		p, ok := s.Partition("z", 0)
		return ok && !registered && p.Leader != 3 && p.Leader >= 0
	})
	// Broker 3 still serves its listener, still thinks it leads (its
	// snapshot is stale), and refuses: acks=all and acks=1.
	direct, err := kgo.NewClient(kgo.SeedBrokers(zombie.Listeners()[0].Addr.String()))
	require.NoError(t, err)
	defer direct.Close()
	ts := c.servers[1].Member().Snapshot().Topics["z"]
	for _, acks := range []int16{-1, 1} {
		b := record.NewBuilder(record.None)
		require.NoError(t, b.Append(record.Record{Value: []byte("zombie"), Timestamp: time.Now().UnixMilli()}))
		batch, err := b.Build()
		require.NoError(t, err)
		produce := kmsg.NewPtrProduceRequest()
		produce.Acks, produce.TimeoutMillis = acks, 5000
		produce.Topics = []kmsg.ProduceRequestTopic{{Topic: "z", TopicID: ts.ID,
			Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: batch.Bytes()}}}}
		kr, err := direct.SeedBrokers()[0].Request(ctx, produce)
		require.NoError(t, err)
		code := kr.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
		require.Equal(t, kerr.NotLeaderForPartition.Code, code, "acks=%d: a fenced leader acknowledges nothing", acks)
	}
	require.NoError(t, chk.Produce(ctx, cl, "z", "b", 50)) // on the new leader, with the two left

	c.proxies[3].Heal()
	until(t, c.servers[1].Member(), "sees broker 3 back in the ISR", func(s *cluster.Snapshot) bool {
		p, _ := s.Partition("z", 0)
		return p.InISR(3)
	})
	require.NoError(t, chk.Produce(ctx, cl, "z", "c", 50))
	chk.ReadBack(t, c.seeds(), "z", 1)
}

// A consumer group over three brokers: every broker names the same
// coordinator (the leader of the group's __consumer_offsets partition,
// replicated three times); two members share the partitions and consume
// everything; the coordinator's broker shuts down, another loads the
// group from its replica of the partition, the committed offsets are
// all there, and the members go on with the new coordinator.
func TestClusterConsumerGroup(t *testing.T) {
	t.Parallel()
	for _, proto := range []string{"classic", "consumer"} {
		t.Run(proto, func(t *testing.T) { clusterConsumerGroup(t, proto == "consumer") })
	}
}

// clusterConsumerGroup is TestClusterConsumerGroup with the classic
// protocol or KIP-848's.
func clusterConsumerGroup(t *testing.T, kip848 bool) {
	c := newTestCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kadmin := c.admin()
	_, err := kadmin.CreateTopic(ctx, 6, 3, nil, "g")
	require.NoError(t, err)
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.MetadataMinAge(50*time.Millisecond))
	require.NoError(t, err)
	defer prod.Close()
	chk := clustertest.New()
	require.NoError(t, chk.Produce(ctx, prod, "g", "a", 300))

	coordinator := c.coordinator(ctx, "cg", 0)
	ts := c.servers[coordinator].Member().Snapshot().Topics["__consumer_offsets"]
	require.NotNil(t, ts)
	require.Len(t, ts.Replicas[0], 3, "__consumer_offsets is replicated on every broker")

	seen := map[string]bool{}
	var owning sync.Mutex // each member's partitions, as its callbacks say (told when the test fails)
	owns := map[*kgo.Client]map[int32]bool{}
	track := func(have bool) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(_ context.Context, cl *kgo.Client, ps map[string][]int32) {
			owning.Lock()
			defer owning.Unlock()
			if owns[cl] == nil {
				owns[cl] = map[int32]bool{}
			}
			for _, p := range ps["g"] {
				owns[cl][p] = have
			}
		}
	}
	// A member's metadata is at most a second old: franz-go (v1.22) sends a
	// KIP-848 heartbeat that cannot connect to its coordinator's address
	// again, without asking for the coordinator, while its metadata still
	// lists that broker — and metadata refreshed the instant leadership
	// moved may list the stopping broker still, for the 5 minutes of its
	// default max age (a classic member's heartbeat asks again at once).
	member := func() *kgo.Client {
		opts := []kgo.Opt{kgo.SeedBrokers(c.seeds()...), kgo.ConsumerGroup("cg"), kgo.ConsumeTopics("g"),
			kgo.FetchMaxWait(50 * time.Millisecond), kgo.MetadataMinAge(50 * time.Millisecond), kgo.MetadataMaxAge(time.Second), kgo.DisableAutoCommit(),
			kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.OnPartitionsAssigned(track(true)),
			kgo.OnPartitionsRevoked(track(false)), kgo.OnPartitionsLost(track(false))}
		if os.Getenv("SEGLOG_TEST_LOG") != "" {
			opts = append(opts, kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelDebug, func() string { return time.Now().Format("15:04:05.000 member ") })))
		}
		if kip848 {
			opts = append(opts, kgo.ServerSideBalancer())
		}
		cl, err := kgo.NewClient(opts...)
		require.NoError(t, err)
		return cl
	}
	m1, m2 := member(), member()
	defer m1.Close()
	defer m2.Close()
	// groupCommitted is the sum of the group's committed offsets (-1 while
	// its coordinator does not answer).
	groupCommitted := func() int64 {
		offs, err := kadmin.FetchOffsets(ctx, "cg")
		if err != nil || offs.Error() != nil {
			return -1
		}
		var n int64
		offs.Each(func(o kadm.OffsetResponse) { n += o.At })
		return n
	}
	// consume polls both members until want records were seen and the
	// group's offsets are committed up to them (a partition consumed by a
	// member it was then taken from, without a commit, is consumed again
	// by its next owner from the last commit; a commit that reached the
	// old coordinator's address is retried after the next polls, as an
	// application would).
	consume := func(want int) {
		committed := false
		for len(seen) < want || !committed {
			for _, m := range []*kgo.Client{m1, m2} {
				pctx, pcancel := context.WithTimeout(ctx, 100*time.Millisecond)
				m.PollFetches(pctx).EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
				pcancel()
			}
			if ctx.Err() != nil {
				owning.Lock()
				for i, m := range []*kgo.Client{m1, m2} {
					id, epoch := m.GroupMetadata()
					t.Logf("member %d (%s, epoch %d) owns %v", i+1, id, epoch, owns[m])
				}
				owning.Unlock()
				t.Logf("the coordinator says: %s", describeGroup848(c, "cg"))
				t.Fatalf("consumed %d of %d", len(seen), want)
			}
			if len(seen) >= want && m1.CommitUncommittedOffsets(ctx) == nil && m2.CommitUncommittedOffsets(ctx) == nil {
				committed = groupCommitted() == int64(want)
			}
		}
	}
	consume(300)

	c.stop(coordinator)
	for _, s := range c.servers {
		until(t, s.Member(), "sees the coordinator's broker gone", func(sn *cluster.Snapshot) bool { _, ok := sn.Brokers[coordinator]; return !ok })
	}
	// The new coordinator has every committed offset: the log end of
	// every partition.
	// (a new admin client: franz-go's keeps a dead coordinator's address
	// until its metadata's max age)
	kadmin = c.admin()
	committed := groupCommitted()
	for committed < 0 {
		require.NoError(t, ctx.Err(), "the new coordinator never answered")
		committed = groupCommitted()
	}
	require.Equal(t, int64(300), committed, "every commit the old coordinator acknowledged is on the new one")
	require.NoError(t, chk.Produce(ctx, prod, "g", "b", 300))
	consume(600)
}

// describeGroup848 is a consumer group as a broker's ConsumerGroupDescribe
// shows it (for a failing test's log).
func describeGroup848(c *testCluster, group string) string {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...))
	if err != nil {
		return err.Error()
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, g := range resp.Groups {
		fmt.Fprintf(&b, "%s: error %d, %s, epoch %d, assignment epoch %d;", g.Group, g.ErrorCode, g.State, g.Epoch, g.AssignmentEpoch)
		for _, m := range g.Members {
			parts := func(a kmsg.Assignment) (out []int32) {
				for _, t := range a.TopicPartitions {
					out = append(out, t.Partitions...)
				}
				return out
			}
			fmt.Fprintf(&b, " member %s epoch %d has %v target %v;", m.MemberID, m.MemberEpoch, parts(m.Assignment), parts(m.TargetAssignment))
		}
	}
	return b.String()
}

// The writer state travels with the log: a producer's retry of a batch
// its old leader acknowledged is answered by the new leader as the
// duplicate it is (the original offsets, nothing appended), and the
// sequence goes on from there.
func TestClusterIdempotenceAcrossLeaderChange(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 3)
	ctx := context.Background()
	_, err := c.servers[1].Member().CreateTopic(ctx, cluster.TopicSpec{Name: "i", Assignment: [][]int32{{1, 2, 3}}})
	require.NoError(t, err)
	for _, s := range c.servers {
		require.NoError(t, s.Replicas().Await(ctx, c.servers[1].Member().Snapshot().Revision))
	}
	id := c.servers[1].Member().Snapshot().Topics["i"].ID
	client := func(s *Server) *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(s.Listeners()[0].Addr.String()))
		require.NoError(t, err)
		t.Cleanup(cl.Close)
		return cl
	}
	kr, err := client(c.servers[2]).SeedBrokers()[0].Request(ctx, kmsg.NewPtrInitProducerIDRequest())
	require.NoError(t, err)
	ip := kr.(*kmsg.InitProducerIDResponse)
	require.Zero(t, ip.ErrorCode)
	batch := func(seq int32, n int) []byte {
		b := record.NewBuilder(record.None)
		b.SetProducer(ip.ProducerID, ip.ProducerEpoch, seq)
		for i := range n {
			require.NoError(t, b.Append(record.Record{Value: fmt.Appendf(nil, "s%d", int(seq)+i), Timestamp: time.Now().UnixMilli()}))
		}
		bb, err := b.Build()
		require.NoError(t, err)
		return bb.Bytes()
	}
	produce := func(s *Server, data []byte) kmsg.ProduceResponseTopicPartition {
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = -1, 10000
		req.Topics = []kmsg.ProduceRequestTopic{{Topic: "i", TopicID: id, Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: data}}}}
		kr, err := client(s).SeedBrokers()[0].Request(ctx, req)
		require.NoError(t, err)
		return kr.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	}
	first := batch(0, 3)
	p := produce(c.servers[1], first)
	require.Zero(t, p.ErrorCode)
	require.Zero(t, p.BaseOffset)

	c.stop(1)
	s := until(t, c.servers[2].Member(), "sees a new leader", func(sn *cluster.Snapshot) bool {
		st, _ := sn.Partition("i", 0)
		return st.Leader == 2 || st.Leader == 3
	})
	st, _ := s.Partition("i", 0)
	leader := c.servers[st.Leader]
	require.NoError(t, leader.Replicas().Await(ctx, s.Revision))
	r, ok := leader.Replicas().Get(checkpoint.TopicPartition{Topic: "i"})
	require.True(t, ok && r.Leads())
	p = produce(leader, first) // the retry of a batch acknowledged by the old leader
	require.Zero(t, p.ErrorCode)
	require.Zero(t, p.BaseOffset, "the duplicate's original offset")
	p = produce(leader, batch(3, 2))
	require.Zero(t, p.ErrorCode)
	require.Equal(t, int64(3), p.BaseOffset, "nothing was appended twice")
	p = produce(leader, batch(9, 1))
	require.Equal(t, kerr.OutOfOrderSequenceNumber.Code, p.ErrorCode)
	tb, ok := leader.Manager().Get(checkpoint.TopicPartition{Topic: "i"})
	require.True(t, ok)
	require.Equal(t, int64(5), tb.Offsets().LogEndOffset)
}

// Transactions across brokers: the coordinator of a transactional id is
// the leader of its __transaction_state partition, named alike by every
// broker; its markers reach the partitions' leaders on other brokers;
// when its broker shuts down in the middle of a transaction the next
// coordinator has it open and commits it whole; when a partition's
// leader goes away in the middle of one, the markers reach the new
// leader. Read committed, every committed transaction is there once,
// whole, at its acknowledged offsets, and nothing of an aborted one.
func TestClusterTransactions(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...))
	require.NoError(t, err)
	defer adm.Close()
	_, err = kadm.NewClient(adm).CreateTopic(ctx, 3, 3, nil, "x")
	require.NoError(t, err)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.TransactionalID("tx"), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.MetadataMinAge(50*time.Millisecond))
	require.NoError(t, err)
	defer cl.Close()
	chk := clustertest.New()
	all := []int32{0, 1, 2}
	require.NoError(t, chk.Transact(ctx, cl, "x", "c1-", 6, true, nil, all...))
	require.NoError(t, chk.Transact(ctx, cl, "x", "a1-", 6, false, nil, all...))

	coordinator := c.coordinator(ctx, "tx", 1)
	s := c.servers[coordinator].Member().Snapshot()
	others := 0
	for p := range int32(3) {
		if st, _ := s.Partition("x", p); st.Leader != coordinator {
			others++
		}
	}
	require.NotZero(t, others, "some partition's leader is not the coordinator (its markers are WriteTxnMarkers)")

	// The coordinator's broker shuts down in the middle of a transaction:
	// the next coordinator has it, and its commit is whole.
	gone := func(id int32) {
		for _, s := range c.servers {
			until(t, s.Member(), "sees the broker gone", func(sn *cluster.Snapshot) bool { _, ok := sn.Brokers[id]; return !ok })
		}
	}
	require.NoError(t, chk.Transact(ctx, cl, "x", "c2-", 6, true, func() {
		c.stop(coordinator)
		gone(coordinator)
	}, all...))
	next := c.coordinator(ctx, "tx", 1)
	require.NotEqual(t, coordinator, next)
	require.NoError(t, chk.Transact(ctx, cl, "x", "a2-", 6, false, nil, all...))

	// Back to three, then a partition's leader (not the coordinator) shuts
	// down in the middle of a transaction: the markers reach its new
	// leader.
	c.start(coordinator)
	for _, s := range c.servers {
		until(t, s.Member(), "sees every replica in sync", func(sn *cluster.Snapshot) bool {
			for p := range int32(3) {
				if st, _ := sn.Partition("x", p); len(st.ISR) != 3 {
					return false
				}
			}
			return len(sn.Brokers) == 3
		})
	}
	next = c.coordinator(ctx, "tx", 1)
	var victim int32 = -1
	for p := range int32(3) {
		if st, _ := c.servers[next].Member().Snapshot().Partition("x", p); st.Leader != next {
			victim = st.Leader
		}
	}
	if victim < 0 { // (the coordinator leads every partition: another broker then)
		victim = next%3 + 1
	}
	require.NoError(t, chk.Transact(ctx, cl, "x", "c3-", 6, true, func() {
		c.stop(victim)
		gone(victim)
	}, all...))
	require.NoError(t, chk.Transact(ctx, cl, "x", "last-", 3, true, nil, all...))
	chk.ReadCommitted(t, c.seeds(), "x", 3)

	// DescribeProducers is the leader's answer: it lists the
	// transactional producer; another replica answers
	// NOT_LEADER_OR_FOLLOWER (as Kafka, whose admin client asks the
	// leader).
	s = until(t, c.servers[next].Member(), "x-0 has a leader", func(sn *cluster.Snapshot) bool {
		st, _ := sn.Partition("x", 0)
		return st.Leader != cluster.NoLeader && st.Leader != victim
	})
	st, _ := s.Partition("x", 0)
	describe := func(id int32) kmsg.DescribeProducersResponseTopicPartition {
		req := kmsg.NewPtrDescribeProducersRequest()
		req.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: "x", Partitions: []int32{0}}}
		resp, err := adm.Broker(int(id)).Request(ctx, req)
		require.NoError(t, err)
		return resp.(*kmsg.DescribeProducersResponse).Topics[0].Partitions[0]
	}
	lead := describe(st.Leader)
	require.Zero(t, lead.ErrorCode)
	require.NotEmpty(t, lead.ActiveProducers)
	followers := 0
	for _, id := range s.Topics["x"].Replicas[0] {
		if id != st.Leader && id != victim {
			require.Equal(t, kerr.NotLeaderForPartition.Code, describe(id).ErrorCode, "broker %d", id)
			followers++
		}
	}
	require.NotZero(t, followers)
}

// Exactly once across brokers: a franz-go GroupTransactSession copies a
// topic, its group's offsets committed in each transaction (the group's
// coordinator has TxnOffsetCommit verified by the transaction's, and
// settles the offsets on the marker another broker may send), while the
// brokers of the transaction's and then the group's coordinator shut
// down. The copy, read committed, holds every record once, and the
// group's committed offsets are the input's ends.
func TestClusterExactlyOnce(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kadmin := c.admin()
	for _, topic := range []string{"in", "out"} {
		_, err := kadmin.CreateTopic(ctx, 3, 3, nil, topic)
		require.NoError(t, err)
	}
	const total = 600
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.DefaultProduceTopic("in"),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	require.NoError(t, err)
	for i := range total {
		prod.Produce(ctx, &kgo.Record{Value: fmt.Appendf(nil, "r%d", i)}, nil)
		if i%30 == 29 { // (small batches: a transaction copies a few)
			require.NoError(t, prod.Flush(ctx))
		}
	}
	prod.Close()

	s, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(c.seeds()...), kgo.TransactionalID("eos"), kgo.ConsumerGroup("eos-g"),
		kgo.ConsumeTopics("in"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(50*time.Millisecond), kgo.MetadataMinAge(50*time.Millisecond), kgo.FetchMaxPartitionBytes(256))
	require.NoError(t, err)
	defer s.Close()
	copied, commits, stops := 0, 0, 0
	for copied < total {
		fs := s.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "copied %d of %d", copied, total)
		require.NoError(t, s.Begin())
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			n++
			s.Produce(ctx, &kgo.Record{Topic: "out", Value: r.Value}, nil)
		})
		if ok, err := s.End(ctx, kgo.TryCommit); err == nil && ok && n > 0 {
			copied += n
			commits++
		}
		if commits > 2*(stops+1) && stops < 2 {
			// the transaction's coordinator's broker, then the group's
			key, typ := "eos", int8(1)
			if stops == 1 {
				key, typ = "eos-g", 0
			}
			victim := c.coordinator(ctx, key, typ)
			c.stop(victim)
			for _, sv := range c.servers {
				until(t, sv.Member(), "sees the broker gone", func(sn *cluster.Snapshot) bool { _, ok := sn.Brokers[victim]; return !ok })
			}
			c.start(victim)
			stops++
		}
	}
	require.Equal(t, 2, stops)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.ConsumeTopics("out"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(50*time.Millisecond))
	require.NoError(t, err)
	defer cl.Close()
	seen := map[string]bool{}
	for len(seen) < total {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "read %d of %d", len(seen), total)
		fs.EachRecord(func(r *kgo.Record) {
			require.False(t, seen[string(r.Value)], "%s copied twice", r.Value)
			seen[string(r.Value)] = true
		})
	}
	var committed int64
	for { // (the admin client finds the restarted brokers' addresses)
		offs, err := kadmin.FetchOffsets(kadm.RequireStable(ctx), "eos-g") // (the last transaction's markers may still be on their way)
		if err == nil && offs.Error() == nil {
			offs.Each(func(o kadm.OffsetResponse) { committed += o.At })
			break
		}
		require.NoError(t, ctx.Err(), "the group's coordinator never answered: %v, %v", err, offs.Error())
	}
	require.Equal(t, int64(total), committed, "the group's offsets are the input's ends")
}

// A leader cut off from its followers (a fault proxy on its inter-broker
// listener) but not from etcd: over a slow link acks=all still completes;
// cut off, its followers fetch nothing, it shrinks the ISR to itself once
// they lag past replica.lag.time.max.ms, and below min.insync.replicas it
// acknowledges nothing; healed, the followers catch up and rejoin the
// ISR, the produce in flight is acknowledged, and every acknowledged
// record is read back once, the replicas holding the same bytes.
func TestClusterPartitionedLeader(t *testing.T) {
	t.Parallel()
	c := makeTestCluster(t)
	c.lagTime = time.Second
	c.links = map[int32]*faultproxy.Proxy{}
	for id := range int32(3) {
		c.links[id+1] = faultproxy.StartFor(t)
	}
	c.boot(3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := c.servers[1].Member().CreateTopic(ctx, cluster.TopicSpec{Name: "cut", Assignment: [][]int32{{1, 2, 3}}})
	require.NoError(t, err)
	inSync := func(n int) func(*cluster.Snapshot) bool {
		return func(sn *cluster.Snapshot) bool { st, ok := sn.Partition("cut", 0); return ok && len(st.ISR) == n }
	}
	until(t, c.servers[1].Member(), "sees the partition in sync", inSync(3))
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.MetadataMinAge(50*time.Millisecond))
	require.NoError(t, err)
	defer cl.Close()
	chk := clustertest.New()
	require.NoError(t, chk.Produce(ctx, cl, "cut", "a", 50))

	c.links[1].Delay(20 * time.Millisecond) // a slow link: slower, nothing refused
	require.NoError(t, chk.Produce(ctx, cl, "cut", "slow", 20))
	c.links[1].Delay(0)

	c.links[1].Cut()
	done := make(chan error, 1)
	go func() { done <- chk.Produce(ctx, cl, "cut", "cut", 1) }()
	s := until(t, c.servers[1].Member(), "sees the leader alone in the ISR", inSync(1))
	st, _ := s.Partition("cut", 0)
	require.Equal(t, int32(1), st.Leader, "the leader keeps its session (etcd reaches it)")
	select {
	case err := <-done:
		t.Fatalf("a produce was answered (%v) while the leader was cut off from its followers", err)
	default:
	}
	c.links[1].Heal()
	require.NoError(t, <-done)
	until(t, c.servers[1].Member(), "sees the followers back in the ISR", inSync(3))
	require.NoError(t, chk.Produce(ctx, cl, "cut", "b", 20))
	chk.ReadBack(t, c.seeds(), "cut", 1)
	sameBytes(t, c, checkpoint.TopicPartition{Topic: "cut"})
}

// Brokers started at once on new data directories under one prefix join
// one cluster: the first to claim the prefix gives its id to the others
// (none refused as of another cluster) — with a prefix given, and with
// none (the default prefix: the same etcd is the same cluster).
func TestClusterNewBrokersAgreeOnID(t *testing.T) {
	t.Parallel()
	for _, prefix := range []string{"/seglog/same/", ""} {
		t.Run(fmt.Sprintf("prefix=%q", prefix), func(t *testing.T) {
			t.Parallel()
			newBrokersAgreeOnID(t, prefix)
		})
	}
}

func newBrokersAgreeOnID(t *testing.T, prefix string) {
	e := etcdtest.Start(t, 1)
	dir := t.TempDir()
	servers := make([]*Server, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cfg := config(filepath.Join(dir, fmt.Sprint(i)))
			cfg.MetricsAddr = ""
			cfg.Manager.NodeID = int32(i + 1)
			cfg.Cluster = &ClusterConfig{Endpoints: e.Endpoints(), Prefix: prefix}
			servers[i], errs[i] = New(context.Background(), cfg)
		}()
	}
	wg.Wait()
	for i, s := range servers {
		require.NoError(t, errs[i])
		t.Cleanup(func() { _ = s.Close() })
		require.Equal(t, servers[0].Manager().Meta().ClusterID, s.Manager().Meta().ClusterID)
	}
	until(t, servers[0].Member(), "sees the three brokers", func(sn *cluster.Snapshot) bool { return len(sn.Brokers) == 3 })
}

// A power cut of one broker, without durable acks: its unsynced writes
// are lost (the crash simulator keeps only what was synced) while it is
// cut off from etcd, so its session expires and the others lead. It
// comes back on what its disk kept, a shorter log, truncates to its
// leaders and rejoins every ISR; every record acknowledged with acks=all
// is there, because the other replicas held it (Kafka's durability
// model), and the replicas hold the same bytes.
func TestClusterPowerCut(t *testing.T) {
	t.Parallel()
	c := makeTestCluster(t, 1)
	c.fss = map[int32]*vfs.MemFS{1: vfs.NewMem()}
	c.shutdownTimeout = time.Second
	c.boot(3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	inSync, cl := c.spreadTopic(ctx, "pc", 2)
	chk := clustertest.New()
	require.NoError(t, chk.Produce(ctx, cl, "pc", "a", 150))

	// The power cut: the disk keeps what was synced; the broker is gone
	// from the network (its session expires) and ends.
	logBytes := func(fsys vfs.FS) int64 {
		var n int64
		var walk func(dir string)
		walk = func(dir string) {
			names, err := fsys.List(dir)
			require.NoError(t, err)
			for _, name := range names {
				p := filepath.Join(dir, name)
				fi, err := fsys.Stat(p)
				require.NoError(t, err)
				switch {
				case fi.IsDir():
					walk(p)
				case strings.HasPrefix(name, "0") && strings.HasSuffix(name, ".log") && strings.Contains(dir, "pc-"):
					n += fi.Size()
				}
			}
		}
		walk("/1")
		return n
	}
	disk := c.fss[1].Crash(vfs.CrashDropAll, 1)
	require.Less(t, logBytes(disk), logBytes(c.fss[1]), "the power cut drops unsynced records")
	c.proxies[1].Cut()
	until(t, c.servers[2].Member(), "sees broker 1 gone and partition 0 led by another", func(sn *cluster.Snapshot) bool {
		st, known := sn.Partition("pc", 0)
		_, ok := sn.Brokers[1]
		return known && !ok && st.Leader != 1 && st.Leader >= 0
	})
	_ = c.servers[1].Close() // (its controlled shutdown cannot reach etcd)
	<-c.done[1]
	delete(c.servers, 1)
	require.NoError(t, chk.Produce(ctx, cl, "pc", "b", 100))

	// It comes back on what its disk kept.
	c.fss[1] = disk
	delete(c.addrs, 1)
	c.proxies[1].Heal()
	c.start(1)
	until(t, c.servers[2].Member(), "sees broker 1 back in every ISR", inSync)
	require.NoError(t, chk.Produce(ctx, cl, "pc", "c", 50))
	chk.ReadBack(t, c.seeds(), "pc", 3)
	for p := range int32(3) {
		sameBytes(t, c, checkpoint.TopicPartition{Topic: "pc", Partition: p})
	}
}

// spreadTopic creates topic name of three partitions led by brokers 1, 2
// and 3 through broker via, waits until it is in sync, and returns the
// condition of that and an acks=all producer (closed at the test's end).
func (c *testCluster) spreadTopic(ctx context.Context, name string, via int32) (func(*cluster.Snapshot) bool, *kgo.Client) {
	t := c.t
	_, err := c.servers[via].Member().CreateTopic(ctx, cluster.TopicSpec{Name: name, Assignment: [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}}})
	require.NoError(t, err)
	inSync := func(sn *cluster.Snapshot) bool {
		for p := range int32(3) {
			if st, ok := sn.Partition(name, p); !ok || len(st.ISR) != 3 {
				return false
			}
		}
		return len(sn.Brokers) == 3
	}
	until(t, c.servers[via].Member(), "sees the topic in sync", inSync)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.MetadataMinAge(50*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return inSync, cl
}

// An etcd member killed under the brokers (a three-member etcd): produce
// goes on, and the metadata still changes through the two left — a
// leader's controlled shutdown moves its partitions, it comes back and
// rejoins every ISR — and the member comes back; nothing acknowledged is
// lost.
func TestClusterEtcdMemberKilled(t *testing.T) {
	t.Parallel()
	c := makeTestClusterOver(t, etcdtest.Start(t, 3))
	c.boot(3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	inSync, cl := c.spreadTopic(ctx, "e", 1)
	chk := clustertest.New()
	require.NoError(t, chk.Produce(ctx, cl, "e", "a", 60))

	c.etcd.Stop(0)
	require.NoError(t, chk.Produce(ctx, cl, "e", "b", 60))
	c.stop(1) // a leader's controlled shutdown, through the two members left
	until(t, c.servers[2].Member(), "sees broker 1's partition led by another", func(sn *cluster.Snapshot) bool {
		st, _ := sn.Partition("e", 0)
		return st.Leader == 2 || st.Leader == 3
	})
	require.NoError(t, chk.Produce(ctx, cl, "e", "c", 60))
	c.start(1)
	until(t, c.servers[2].Member(), "sees broker 1 back in every ISR", inSync)
	c.etcd.Restart(0)
	require.NoError(t, chk.Produce(ctx, cl, "e", "d", 60))
	for _, s := range c.servers {
		require.True(t, s.Member().Leased(), "broker %d keeps its session", s.Member().NodeID())
	}
	chk.ReadBack(t, c.seeds(), "e", 3)
}

// A topic's configs are the cluster's: altered through one broker
// (IncrementalAlterConfigs), every broker's replicas take them and every
// broker describes them; a bad value changes nothing; deleting a key
// through another broker returns it to the default everywhere.
func TestClusterTopicConfigs(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 3, 1, 2, 3) // (each broker's etcd link slowed below)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := c.servers[1].Member().CreateTopic(ctx, cluster.TopicSpec{Name: "cfg", Partitions: 3, ReplicationFactor: 3})
	require.NoError(t, err)
	admins := map[int32]*kadm.Client{} // one client of each broker
	admin := func(id int32) *kadm.Client {
		if admins[id] == nil {
			cl, err := kgo.NewClient(kgo.SeedBrokers(c.servers[id].Listeners()[0].Addr.String()))
			require.NoError(t, err)
			t.Cleanup(cl.Close)
			admins[id] = kadm.NewClient(cl)
		}
		return admins[id]
	}
	alter := func(id int32, op kadm.IncrementalOp, key, value string) error {
		res, err := admin(id).AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: op, Name: key, Value: kadm.StringPtr(value)}}, "cfg")
		if err != nil {
			return err
		}
		return res[0].Err
	}
	// described is the topic's configs as broker id describes them.
	described := func(id int32) map[string]string {
		rc, err := admin(id).DescribeTopicConfigs(ctx, "cfg")
		require.NoError(t, err)
		require.NoError(t, rc[0].Err)
		got := map[string]string{}
		for _, cf := range rc[0].Configs {
			if cf.Value != nil {
				got[cf.Key] = *cf.Value
			}
		}
		return got
	}
	// everywhere checks every broker's replicas and description.
	everywhere := func(retention int64, minISR string) {
		for id, s := range c.servers {
			for p := range int32(3) {
				tb, ok := s.Manager().Get(checkpoint.TopicPartition{Topic: "cfg", Partition: p})
				require.True(t, ok)
				require.Equal(t, retention, tb.Config().RetentionMs, "broker %d partition %d", id, p)
			}
			got := described(id)
			require.Equal(t, fmt.Sprint(retention), got["retention.ms"], "broker %d", id)
			require.Equal(t, minISR, got["min.insync.replicas"], "broker %d", id)
		}
	}
	require.NoError(t, alter(1, kadm.SetConfig, "retention.ms", "12345"))
	require.NoError(t, alter(1, kadm.SetConfig, "min.insync.replicas", "2"))
	rev := c.servers[1].Member().Snapshot().Revision
	for _, s := range c.servers {
		require.NoError(t, s.Replicas().Await(ctx, rev))
	}
	everywhere(12345, "2")
	require.Error(t, alter(2, kadm.SetConfig, "retention.ms", "soon"), "a bad value is refused")
	require.Error(t, alter(2, kadm.SetConfig, "min.insync.replicas", "0"))
	require.NoError(t, alter(3, kadm.DeleteConfig, "retention.ms", ""))
	rev = c.servers[3].Member().Snapshot().Revision
	for _, s := range c.servers {
		require.NoError(t, s.Replicas().Await(ctx, rev))
	}
	def := c.servers[1].Manager().DefaultConfig()
	everywhere(def.RetentionMs, "2")

	// A change through one broker is described at once by the others,
	// even one whose etcd link is slow: each catches up with etcd before
	// it answers.
	for i := range 6 {
		via, ask := int32(i%3+1), int32((i+1)%3+1)
		for id, p := range c.proxies {
			p.Delay(0)
			if id == ask {
				p.Delay(50 * time.Millisecond)
			}
		}
		want := fmt.Sprint(60000 + i)
		require.NoError(t, alter(via, kadm.SetConfig, "retention.ms", want))
		require.Equal(t, want, described(ask)["retention.ms"], "altered through broker %d, described by broker %d", via, ask)
	}
}

// DeleteRecords in a cluster is answered once every in-sync replica has
// deleted too (Kafka's delayed DeleteRecords): at the answer each
// replica's log starts at the low watermark, so a new leader cannot bring
// the deleted records back.
func TestClusterDeleteRecords(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, cl := c.spreadTopic(ctx, "dr", 1)
	chk := clustertest.New()
	require.NoError(t, chk.Produce(ctx, cl, "dr", "a", 60))
	hw := map[int32]int64{}
	for p := range int32(3) {
		s := c.servers[1].Member().Snapshot()
		st, _ := s.Partition("dr", p)
		tb, ok := c.servers[st.Leader].Manager().Get(checkpoint.TopicPartition{Topic: "dr", Partition: p})
		require.True(t, ok)
		hw[p] = tb.Offsets().HighWatermark
	}
	res, err := c.admin().DeleteRecords(ctx, kadm.Offsets{"dr": {
		0: {Topic: "dr", Partition: 0, At: hw[0] / 2}, 1: {Topic: "dr", Partition: 1, At: hw[1] / 2}, 2: {Topic: "dr", Partition: 2, At: hw[2] / 2}}})
	require.NoError(t, err)
	res.Each(func(r kadm.DeleteRecordsResponse) {
		require.NoError(t, r.Err)
		require.Equal(t, hw[r.Partition]/2, r.LowWatermark, "partition %d", r.Partition)
		for id, s := range c.servers {
			tb, ok := s.Manager().Get(checkpoint.TopicPartition{Topic: "dr", Partition: r.Partition})
			require.True(t, ok)
			require.GreaterOrEqual(t, tb.Offsets().LogStartOffset, r.LowWatermark, "broker %d partition %d, at the answer", id, r.Partition)
		}
	})
}

// singleNodeUser makes broker id's data directory before it starts, as
// a single node that has a SCRAM user (the cluster's first broker seeds
// the cluster's credentials from it).
func (c *testCluster) singleNodeUser(id int32, user, mech, password string) {
	t := c.t
	dir := filepath.Join(c.dir, fmt.Sprint(id))
	m, err := tablet.OpenManager(vfs.OS, dir, tablet.ManagerOptions{NodeID: id})
	require.NoError(t, err)
	require.NoError(t, m.Close())
	creds, err := auth.OpenCredentials(nil, filepath.Join(dir, auth.CredentialsFile))
	require.NoError(t, err)
	salt, salted, err := auth.SaltPassword(mech, password, auth.MinIterations)
	require.NoError(t, err)
	errs, err := creds.Apply([]auth.Change{{User: user, Mechanism: mech, Salt: salt, Iterations: auth.MinIterations, SaltedPassword: salted}})
	require.NoError(t, err)
	require.NoError(t, errors.Join(errs...))
}

// The SCRAM credentials, ACLs, client quotas and dynamic broker configs
// of a cluster are the cluster's, not a broker's: a change made through
// any broker holds on every broker (a user added through one logs in on
// the others; an ACL created through one is enforced by all); changes
// made at once through two brokers both hold; a broker that joins later
// has them all; and the first broker's data directory files, from its
// days as a single node, seed the cluster (its own dynamic configs become
// its node's level).
func TestClusterSharedSecurity(t *testing.T) {
	t.Parallel()
	c := makeTestCluster(t)
	c.configure = func(id int32, cfg *Config) {
		cfg.Listeners = append(cfg.Listeners, Listener{Name: "SASL_PLAINTEXT", SecurityProtocol: "SASL_PLAINTEXT", Address: "127.0.0.1:0"})
		cfg.Broker.SASLMechanisms = []string{auth.SHA256}
		cfg.Broker.Authorizer = true
		cfg.Broker.SuperUsers = []string{"User:ANONYMOUS"} // (the PLAINTEXT listener: the admin and the brokers)
	}
	// Broker 1 was a single node with a user and a dynamic config of its
	// own.
	c.singleNodeUser(1, "bob", auth.SHA256, "bob-secret")
	require.NoError(t, os.WriteFile(filepath.Join(c.dir, "1", checkpoint.DynamicBrokerConfigFile),
		[]byte(`{"version":1,"cluster":{},"broker":{"log.retention.bytes":"123456789"}}`), 0o644))
	c.boot(3)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := func(id int32) *kadm.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.servers[id].Listeners()[0].Addr.String()))
		require.NoError(t, err)
		t.Cleanup(cl.Close)
		return kadm.NewClient(cl)
	}
	_, err := admin(1).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "alice-secret"}})
	require.NoError(t, err)
	for _, topic := range []string{"open", "closed"} {
		r, err := admin(2).CreateTopic(ctx, 2, 3, nil, topic)
		require.NoError(t, err)
		require.NoError(t, r.Err)
	}
	// Two ACL changes at once, through two brokers.
	var wg sync.WaitGroup
	for id, user := range map[int32]string{2: "alice", 3: "bob"} {
		wg.Go(func() {
			b := kadm.NewACLs().Allow("User:"+user).Topics("open").Operations(kadm.OpWrite, kadm.OpDescribe).
				ResourcePatternType(kadm.ACLPatternLiteral)
			res, err := admin(id).CreateACLs(ctx, b)
			assert.NoError(t, err)
			for _, r := range res {
				assert.NoError(t, r.Err)
			}
		})
	}
	wg.Wait()
	res, err := admin(3).AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: kadm.ClientQuotaEntity{{Type: "user", Name: kadm.StringPtr("alice")}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1 << 20}},
	}})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	cfgRes, err := admin(1).AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "log.retention.ms", Value: kadm.StringPtr("4321")}})
	require.NoError(t, err)
	require.NoError(t, cfgRes[0].Err)

	own, err := admin(1).DescribeBrokerConfigs(ctx, 1)
	require.NoError(t, err)
	_, err = own.On("1", func(rc *kadm.ResourceConfig) error {
		for _, cf := range rc.Configs {
			if cf.Key == "log.retention.bytes" && cf.Value != nil && *cf.Value == "123456789" && cf.Source == kmsg.ConfigSourceDynamicBrokerConfig {
				return nil
			}
		}
		return errors.New("broker 1's own log.retention.bytes from its single-node days is not there")
	})
	require.NoError(t, err)

	// Every broker has every change, a fourth one too.
	c.start(4)
	var rev int64
	for _, s := range c.servers {
		rev = max(rev, s.Member().Snapshot().Revision)
	}
	for _, s := range c.servers {
		require.NoError(t, s.Member().Await(ctx, rev))
		require.NoError(t, s.Broker().AwaitDocs(ctx, rev))
	}
	for id, s := range c.servers {
		sasl := s.Listeners()[1].Addr.String()
		as := func(user, pass string) *kgo.Broker {
			cl, err := kgo.NewClient(kgo.SeedBrokers(sasl), kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()))
			require.NoError(t, err)
			t.Cleanup(cl.Close)
			return cl.SeedBrokers()[0]
		}
		for _, user := range []string{"alice", "bob"} {
			resp, err := as(user, user+"-secret").Request(ctx, &kmsg.MetadataRequest{Topics: []kmsg.MetadataRequestTopic{
				{Topic: kmsg.StringPtr("open")}, {Topic: kmsg.StringPtr("closed")}}})
			require.NoError(t, err, "broker %d: %s logs in", id, user)
			codes := map[string]int16{}
			for _, tp := range resp.(*kmsg.MetadataResponse).Topics {
				codes[*tp.Topic] = tp.ErrorCode
			}
			require.Equal(t, map[string]int16{"open": 0, "closed": kerr.TopicAuthorizationFailed.Code}, codes, "broker %d, %s", id, user)
		}
		_, err := as("alice", "wrong").Request(ctx, &kmsg.MetadataRequest{})
		require.ErrorIs(t, err, kerr.SaslAuthenticationFailed, "broker %d", id)

		adm := admin(id)
		quotas, err := adm.DescribeClientQuotas(ctx, false, nil)
		require.NoError(t, err)
		require.Len(t, quotas, 1, "broker %d", id)
		require.Equal(t, 1<<20, int(quotas[0].Values[0].Value))
		acls, err := adm.DescribeACLs(ctx, kadm.NewACLs().AnyResource().Allow().AllowHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny))
		require.NoError(t, err)
		require.Len(t, acls[0].Described, 4, "broker %d: both brokers' ACLs (two each)", id)
		bc, err := adm.DescribeBrokerConfigs(ctx)
		require.NoError(t, err)
		v, err := bc.On("", func(rc *kadm.ResourceConfig) error {
			for _, cf := range rc.Configs {
				if cf.Key == "log.retention.ms" {
					return nil
				}
			}
			return errors.New("no log.retention.ms")
		})
		require.NoError(t, err, "broker %d", id)
		require.Equal(t, "4321", *v.Configs[0].Value)
		for p := range int32(2) {
			if tb, ok := s.Manager().Get(checkpoint.TopicPartition{Topic: "open", Partition: p}); ok {
				require.Equal(t, int64(4321), tb.Config().RetentionMs, "broker %d: its replicas follow the cluster's default", id)
			}
		}
	}
}

// replicateWhole creates a topic of partitions at replication factor 3,
// produces n records to it at acks=all, calls produced (if set: it may
// produce more through the client and checker it is given), reads every
// one back once, and checks that every replica holds the same bytes.
func (c *testCluster) replicateWhole(topic string, partitions int32, n int, produced func(*kgo.Client, *clustertest.Checker)) {
	t := c.t
	ctx := context.Background()
	res, err := c.admin().CreateTopic(ctx, partitions, 3, nil, topic)
	require.NoError(t, err)
	require.NoError(t, res.Err)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	require.NoError(t, err)
	defer cl.Close()
	chk := clustertest.New()
	require.NoError(t, chk.Produce(ctx, cl, topic, "a", n))
	if produced != nil {
		produced(cl, chk)
	}
	chk.ReadBack(t, c.seeds(), topic, partitions)
	for p := range partitions {
		sameBytes(t, c, checkpoint.TopicPartition{Topic: topic, Partition: p})
	}
}

// num.replica.fetchers: a follower runs that many fetchers per leader,
// the partitions shared among them, each fetching in a session of its
// own, and replication is whole through them all.
func TestClusterReplicaFetchers(t *testing.T) {
	t.Parallel()
	c := makeTestCluster(t)
	// (2, not 3: a leader's partitions are every third one, which Kafka's
	// hash would give all to one of three fetchers.)
	c.configure = func(_ int32, cfg *Config) { cfg.Cluster.ReplicaFetchers = 2 }
	c.boot(3)
	c.replicateWhole("nf", 12, 240, func(cl *kgo.Client, chk *clustertest.Checker) {
		// Every broker leads its preferred partitions with every replica
		// in sync (a broker whose session lapsed on a loaded machine may
		// have lost them), and a record more to each partition at
		// acks=all: each follower has fetched from each leader since.
		ctx := context.Background()
		all := kadm.TopicsSet{}
		all.Add("nf", 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)
		_, err := c.admin().ElectLeaders(ctx, kadm.ElectPreferredReplica, all)
		require.NoError(t, err)
		until(t, c.servers[1].Member(), "sees every partition led by its preferred replica, in sync", func(s *cluster.Snapshot) bool {
			ts := s.Topics["nf"]
			for p, st := range ts.Partitions {
				if st.Leader != ts.Replicas[p][0] || len(st.ISR) != 3 {
					return false
				}
			}
			return true
		})
		require.NoError(t, chk.Produce(ctx, cl, "nf", "b", 12))
		for id, s := range c.servers {
			// The followers fetch in sessions (KIP-227): a fetch names
			// only what changed. Each leader has both others' (no
			// consumer has fetched yet).
			require.GreaterOrEqual(t, s.Broker().FetchSessions(), 2, "broker %d", id)
		}
	})
	for id, s := range c.servers {
		// Two leaders followed, eight partitions of theirs by two
		// fetchers each: more fetchers than leaders.
		require.Greater(t, s.Replicas().Fetchers(), 2, "broker %d", id)
	}
}

// A cluster secured end to end: etcd over TLS with client certificates
// and its authentication on (the brokers' user and password), and the
// brokers replicating over a SASL_SSL inter-broker listener as a user of
// their own (its credentials the cluster's, seeded by the first broker),
// with the authorizer on. Every replica joins every ISR, which it can only
// do through that listener; a broker with a wrong etcd password is
// refused at start.
func TestClusterSecured(t *testing.T) {
	t.Parallel()
	pki := testpki.New(t)
	cert, key := pki.Issue(t, "node", 10, "broker", true)
	e := etcdtest.StartSecure(t, 1, etcdtest.Secure{CertFile: cert, KeyFile: key, CAFile: pki.CAFile, User: "root", Password: "etcd-secret"})
	c := makeTestClusterOver(t, e)
	secure := func(cfg *Config) {
		cfg.Listeners = append(cfg.Listeners, Listener{Name: "INTERNAL", SecurityProtocol: "SASL_SSL", Address: "127.0.0.1:0"})
		cfg.TLS = broker.TLSOptions{CertFile: cert, KeyFile: key, CAFile: pki.CAFile}
		cfg.Broker.SASLMechanisms = []string{auth.SHA512}
		cfg.Broker.Authorizer = true
		cfg.Broker.SuperUsers = []string{"User:broker", "User:ANONYMOUS"} // (ANONYMOUS: the test's PLAINTEXT admin)
		cfg.Cluster.InterBrokerListener = "INTERNAL"
		cfg.Cluster.InterBrokerSASL = InterBrokerSASL{Username: "broker", Password: "broker-secret"}
		cfg.Cluster.EtcdTLS = broker.TLSOptions{CertFile: cert, KeyFile: key, CAFile: pki.CAFile}
		cfg.Cluster.EtcdUsername, cfg.Cluster.EtcdPassword = "root", "etcd-secret"
	}
	c.configure = func(_ int32, cfg *Config) { secure(cfg) }
	c.singleNodeUser(1, "broker", auth.SHA512, "broker-secret")
	c.boot(3)

	c.replicateWhole("sec", 3, 90, nil)
	for _, s := range c.servers {
		until(t, s.Member(), "sees every replica in its ISR", func(sn *cluster.Snapshot) bool {
			for p := range int32(3) {
				if st, ok := sn.Partition("sec", p); !ok || len(st.ISR) != 3 {
					return false
				}
			}
			return true
		})
	}
	cfg := config(filepath.Join(c.dir, "4"))
	cfg.Manager.NodeID = 4
	cfg.Cluster = &ClusterConfig{Endpoints: e.Endpoints(), Prefix: "/seglog/test/"}
	secure(&cfg)
	cfg.Cluster.EtcdPassword = "wrong"
	_, err := New(context.Background(), cfg)
	require.ErrorContains(t, err, "authentication failed", "a wrong etcd password is refused")
}

// A topic deleted while a broker was down, and one made again under its
// name with another id (on the two brokers left): when the broker comes
// back, its replicas of them are strays, set aside (renamed -stray, their
// bytes kept, as Kafka does) before it follows the cluster, which serves
// the new topic without it.
func TestClusterStrayReplicas(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 3)
	ctx := context.Background()
	c.replicateWhole("gone", 2, 20, nil) // (broker 3 holds the records)
	res, err := c.admin().CreateTopic(ctx, 2, 3, nil, "again")
	require.NoError(t, err)
	require.NoError(t, res.Err)
	c.stop(3)
	adm := c.admin()
	_, err = adm.DeleteTopics(ctx, "gone", "again")
	require.NoError(t, err)
	until(t, c.servers[1].Member(), "sees the topics gone", func(s *cluster.Snapshot) bool {
		_, g := s.Topics["gone"]
		_, a := s.Topics["again"]
		return !g && !a
	})
	res, err = adm.CreateTopic(ctx, 1, 2, nil, "again")
	require.NoError(t, err)
	require.NoError(t, res.Err)

	s := c.start(3)
	require.NoError(t, s.Replicas().Await(ctx, c.servers[1].Member().Snapshot().Revision))
	for p := range int32(2) {
		_, ok := s.Manager().Get(checkpoint.TopicPartition{Topic: "gone", Partition: p})
		require.False(t, ok, "gone-%d is not a tablet any more", p)
	}
	_, ok := s.Manager().TopicID("again")
	require.False(t, ok, "no replica of either topic named again")
	names, err := os.ReadDir(s.Manager().Dir())
	require.NoError(t, err)
	strays := map[string]int{}
	for _, n := range names {
		if tp, suffix, err := checkpoint.ParseDirName(n.Name()); err == nil && suffix == checkpoint.StrayDirSuffix {
			strays[tp.Topic]++
			logs, err := filepath.Glob(filepath.Join(s.Manager().Dir(), n.Name(), "*.log"))
			require.NoError(t, err)
			require.NotEmpty(t, logs, "%s keeps its segments", n.Name())
		}
	}
	require.Equal(t, map[string]int{"gone": 2, "again": 2}, strays)
}

// A topic with message.timestamp.type=LogAppendTime replicates: its
// followers take the leader's stamped batches as they are (they refused
// them as a producer's, the ISR shrank to the leader and acks=all failed
// for ever: librdkafka's test 0052); every record reads back with the
// leader's append time, and the replicas hold the same bytes.
func TestClusterLogAppendTimeReplicates(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := c.servers[1].Member().CreateTopic(ctx, cluster.TopicSpec{Name: "lat", Assignment: [][]int32{{1, 2, 3}},
		Configs: map[string]string{"message.timestamp.type": "LogAppendTime"}})
	require.NoError(t, err)
	until(t, c.servers[1].Member(), "sees lat in sync", func(sn *cluster.Snapshot) bool {
		st, ok := sn.Partition("lat", 0)
		return ok && len(st.ISR) == 3
	})
	cl := c.producer()
	chk := clustertest.New()
	require.NoError(t, chk.Produce(ctx, cl, "lat", "v", 30))
	chk.ReadBack(t, c.seeds(), "lat", 1)
	rc, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"lat": {0: kgo.NewOffset().AtStart()}}))
	require.NoError(t, err)
	defer rc.Close()
	for n := 0; n < 30; {
		fs := rc.PollFetches(ctx)
		require.NoError(t, ctx.Err())
		fs.EachRecord(func(r *kgo.Record) {
			require.Equal(t, int8(1), r.Attrs.TimestampType(), "record %d: LogAppendTime", r.Offset)
			n++
		})
	}
	for _, s := range c.servers {
		until(t, s.Member(), "sees lat's ISR whole", func(sn *cluster.Snapshot) bool {
			st, _ := sn.Partition("lat", 0)
			return len(st.ISR) == 3
		})
	}
	sameBytes(t, c, checkpoint.TopicPartition{Topic: "lat"})
}
