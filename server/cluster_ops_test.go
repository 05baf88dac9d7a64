package server

import (
	"context"
	crand "crypto/rand"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/cluster"
	"github.com/seglog/seglog/internal/clustertest"
	"github.com/seglog/seglog/internal/faultproxy"
	"github.com/seglog/seglog/tablet"
)

// createAssigned creates a topic with an explicit replica assignment
// (CreateTopics' ReplicaAssignment, as kafka-topics.sh
// --replica-assignment).
func (c *testCluster) createAssigned(ctx context.Context, name string, assignment ...[]int32) {
	t := c.t
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...))
	require.NoError(t, err)
	defer cl.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, -1, -1
	for p, rs := range assignment {
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, kmsg.CreateTopicsRequestTopicReplicaAssignment{Partition: int32(p), Replicas: rs})
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.NoError(t, kerr.ErrorForCode(resp.Topics[0].ErrorCode))
	for _, s := range c.servers {
		until(t, s.Member(), "has every replica in the ISR", func(sn *cluster.Snapshot) bool {
			ts, ok := sn.Topics[name]
			if !ok {
				return false
			}
			for p, st := range ts.Partitions {
				if len(st.ISR) != len(ts.Replicas[p]) || st.Leader != ts.Replicas[p][0] {
					return false
				}
			}
			return true
		})
	}
}

// producer is an acks=all client of the cluster that learns leader
// changes quickly, closed at the test's end; opts add to it. It retries a
// connection cut before its first response (kgo.AlwaysRetryEOF): the
// tests stop brokers under it, and franz-go otherwise takes such a cut —
// a broker closing its listener with a connection in its backlog — for a
// TLS or SASL mistake and fails the record.
func (c *testCluster) producer(opts ...kgo.Opt) *kgo.Client {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.seeds()...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.MetadataMinAge(50 * time.Millisecond), kgo.AlwaysRetryEOF()}, opts...)...)
	require.NoError(c.t, err)
	c.t.Cleanup(cl.Close)
	return cl
}

// add starts broker id and waits until every broker sees it.
func (c *testCluster) add(id int32) {
	c.start(id)
	n := len(c.servers)
	for _, s := range c.servers {
		until(c.t, s.Member(), fmt.Sprintf("sees %d brokers", n), func(sn *cluster.Snapshot) bool { return len(sn.Brokers) == n })
	}
}

// tieredCluster is a cluster whose brokers tier to one file:// store
// (its directory returned), stepped by the test (tierStep).
func tieredCluster(t *testing.T) (*testCluster, string) {
	storeDir := t.TempDir()
	c := makeTestCluster(t)
	c.configure = func(_ int32, cfg *Config) {
		cfg.Store, cfg.TierInterval = "file://"+storeDir, time.Hour
		cfg.MetricsAddr, cfg.ConsoleSampleInterval = "127.0.0.1:0", -1 // (the console's partition page)
	}
	return c, storeDir
}

// tierTopic makes a topic tiered, with small segments and local.retention.bytes
// localBytes.
func (c *testCluster) tierTopic(ctx context.Context, topic, localBytes string) {
	set := func(v string) *string { return &v }
	rs, err := c.admin().AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "remote.storage.enable", Value: set("true")},
		{Name: "segment.bytes", Value: set("4096")}, {Name: "local.retention.bytes", Value: set(localBytes)}}, topic)
	require.NoError(c.t, err)
	require.NoError(c.t, rs[0].Err)
}

// leaderOf is a partition's leader and epoch as broker via sees them.
func (c *testCluster) leaderOf(via int32, topic string, p int32) (int32, int32) {
	st, ok := c.servers[via].Member().Snapshot().Partition(topic, p)
	require.True(c.t, ok)
	return st.Leader, st.LeaderEpoch
}

// restart stops a broker (a controlled shutdown) and starts it again,
// then waits until it is back in the ISR of topic's partitions.
func (c *testCluster) restart(id int32, topic string) {
	c.stop(id)
	for _, s := range c.servers {
		until(c.t, s.Member(), "sees the broker gone", func(sn *cluster.Snapshot) bool { _, ok := sn.Brokers[id]; return !ok })
	}
	c.start(id)
	until(c.t, c.servers[id].Member(), "is back in every ISR", func(sn *cluster.Snapshot) bool {
		ts, ok := sn.Topics[topic]
		if !ok {
			return false
		}
		for _, st := range ts.Partitions {
			if !st.InISR(id) {
				return false
			}
		}
		return true
	})
}

// Preferred and unclean elections asked for through ElectLeaders (kadm,
// as kafka-leader-election.sh asks): a restarted broker gets its
// preferred leadership back at a new epoch, and nothing acknowledged is
// lost; asked again it needs none; a leaderless partition gets a leader
// from outside its ISR only by an unclean election.
func TestClusterLeaderElections(t *testing.T) {
	t.Parallel()
	c := makeTestCluster(t)
	c.configure = func(_ int32, cfg *Config) { cfg.Cluster.NoAutoLeaderRebalance = true }
	c.boot(3)
	ctx := context.Background()
	c.createAssigned(ctx, "e", []int32{1, 2, 3}, []int32{2, 3, 1})
	c.createAssigned(ctx, "u", []int32{2, 3})
	adm := c.admin()

	cl := c.producer(kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	chk := clustertest.New()
	require.NoError(t, chk.Produce(ctx, cl, "e", "a", 200))

	// Broker 1 restarts: e-0 is led by 2 meanwhile, and stays so.
	c.restart(1, "e")
	leader, epoch := c.leaderOf(1, "e", 0)
	require.Equal(t, int32(2), leader)
	require.NoError(t, chk.Produce(ctx, cl, "e", "b", 200))

	rs, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{"e": {0: {}, 1: {}, 7: {}}, "nope": {0: {}}})
	require.NoError(t, err)
	require.NoError(t, rs["e"][0].Err, "e-0 gets its preferred leader")
	require.ErrorIs(t, rs["e"][1].Err, kerr.ElectionNotNeeded, "e-1 is led by its preferred replica")
	require.ErrorIs(t, rs["e"][7].Err, kerr.UnknownTopicOrPartition)
	require.ErrorIs(t, rs["nope"][0].Err, kerr.UnknownTopicOrPartition)
	for _, s := range c.servers {
		until(t, s.Member(), "sees broker 1 lead e-0", func(sn *cluster.Snapshot) bool {
			st, _ := sn.Partition("e", 0)
			return st.Leader == 1 && st.LeaderEpoch == epoch+1
		})
	}
	rs, err = adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, nil)
	require.NoError(t, err)
	require.Empty(t, rs, "asked for every partition, those that need no election are left out")
	require.NoError(t, chk.Produce(ctx, cl, "e", "c", 200))
	chk.ReadBack(t, c.seeds(), "e", 2)
	for p := range int32(2) {
		sameBytes(t, c, checkpoint.TopicPartition{Topic: "e", Partition: p})
	}

	// u-0 (replicas 2, 3, min.insync.replicas 1) loses broker 3, then its
	// leader 2: no leader, and broker 3 coming back does not get it (it
	// left the ISR while the ISR kept its minimum, so it is not an eligible
	// leader replica either: KIP-966).
	ar, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "min.insync.replicas", Value: kadm.StringPtr("1")}}, "u")
	require.NoError(t, err)
	require.NoError(t, ar[0].Err)
	uchk := clustertest.New()
	require.NoError(t, uchk.Produce(ctx, cl, "u", "a", 100))
	c.stop(3)
	until(t, c.servers[2].Member(), "sees u-0's ISR shrink to 2", func(sn *cluster.Snapshot) bool {
		st, _ := sn.Partition("u", 0)
		return len(st.ISR) == 1
	})
	c.stop(2)
	c.start(3)
	until(t, c.servers[3].Member(), "sees u-0 leaderless with broker 3 live", func(sn *cluster.Snapshot) bool {
		st, _ := sn.Partition("u", 0)
		return sn.Live(3) && st.Leader == cluster.NoLeader && !st.InISR(3)
	})
	rs, err = adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{"u": {0: {}}})
	require.NoError(t, err)
	require.ErrorIs(t, rs["u"][0].Err, kerr.PreferredLeaderNotAvailable)
	rs, err = adm.ElectLeaders(ctx, kadm.ElectLiveReplica, kadm.TopicsSet{"u": {0: {}}})
	require.NoError(t, err)
	require.NoError(t, rs["u"][0].Err, "an unclean election gives u-0 broker 3")
	st := until(t, c.servers[3].Member(), "sees broker 3 lead u-0", func(sn *cluster.Snapshot) bool {
		st, _ := sn.Partition("u", 0)
		return st.Leader == 3
	})
	require.Equal(t, []int32{3}, mustPartition(t, st, "u", 0).ISR)
	rs, err = adm.ElectLeaders(ctx, kadm.ElectLiveReplica, kadm.TopicsSet{"u": {0: {}}})
	require.NoError(t, err)
	require.ErrorIs(t, rs["u"][0].Err, kerr.ElectionNotNeeded)
	// Broker 3 had every record (acknowledged with both in the ISR).
	uchk.ReadBack(t, c.seeds(), "u", 1)
}

// With auto.leader.rebalance.enable the controller gives a restarted
// broker its preferred leaderships back by itself.
func TestClusterAutoLeaderRebalance(t *testing.T) {
	t.Parallel()
	c := makeTestCluster(t)
	c.configure = func(_ int32, cfg *Config) { cfg.Cluster.LeaderImbalanceCheckInterval = 100 * time.Millisecond }
	c.boot(3)
	ctx := context.Background()
	c.createAssigned(ctx, "r", []int32{1, 2, 3}, []int32{1, 3, 2}, []int32{2, 3, 1})
	c.restart(1, "r")
	for _, s := range c.servers {
		until(t, s.Member(), "sees broker 1 lead its preferred partitions again", func(sn *cluster.Snapshot) bool {
			a, _ := sn.Partition("r", 0)
			b, _ := sn.Partition("r", 1)
			return a.Leader == 1 && b.Leader == 1
		})
	}
}

func mustPartition(t *testing.T, s *cluster.Snapshot, topic string, p int32) cluster.PartitionState {
	st, ok := s.Partition(topic, p)
	require.True(t, ok)
	return st
}

// A rolling restart of the three brokers (each a controlled shutdown,
// then back into every ISR before the next) under an idempotent acks=all
// producer: no record fails, none is lost or duplicated, and the
// stopped broker is out of every ISR before it stops (its leaving fails
// no produce). The longest produce stall is logged.
func TestClusterRollingRestart(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 3)
	ctx := context.Background()
	c.createAssigned(ctx, "r", []int32{1, 2, 3}, []int32{2, 3, 1}, []int32{3, 1, 2})
	cl := c.producer(kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	chk := clustertest.New()

	stop := make(chan struct{})
	done := make(chan error, 1)
	acked := make(chan struct{}, 1)
	var stall time.Duration
	go func() {
		var last time.Time // (from the first acknowledgement on: not the client's start)
		for i := 0; ; i++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if err := chk.Produce(ctx, cl, "r", fmt.Sprintf("%d-", i), 1); err != nil {
				done <- err
				return
			}
			now := time.Now()
			if !last.IsZero() {
				stall = max(stall, now.Sub(last))
			}
			last = now
			select {
			case acked <- struct{}{}:
			default:
			}
		}
	}()
	// The producer's first record answered before the first restart (its
	// producer id and connections made): the restarts' stalls are measured
	// from a producing client.
	select {
	case <-acked:
	case err := <-done:
		require.NoError(t, err, "no record failed")
	case <-time.After(time.Minute):
		t.Fatal("no acknowledgement for a minute")
	}
	for id := int32(1); id <= 3; id++ {
		before := chk.Acked()
		require.NoError(t, c.servers[id].Member().ShutDown(ctx), "broker %d's controlled shutdown", id)
		s := c.servers[id].Member().Snapshot()
		for p, st := range s.Topics["r"].Partitions {
			require.False(t, st.InISR(id) || st.Leader == id, "broker %d still in r-%d's ISR %v or leading after its controlled shutdown", id, p, st.ISR)
		}
		c.restart(id, "r")
		for chk.Acked() <= before+10 { // (produce goes on after the restart)
			select {
			case <-acked:
			case err := <-done:
				require.NoError(t, err, "no record failed")
			case <-time.After(time.Minute):
				t.Fatalf("no acknowledgement for a minute after broker %d's restart", id)
			}
		}
	}
	close(stop)
	require.NoError(t, <-done, "no record failed")
	chk.ReadBack(t, c.seeds(), "r", 3)
	for p := range int32(3) {
		sameBytes(t, c, checkpoint.TopicPartition{Topic: "r", Partition: p})
	}
	t.Logf("rolling restart of 3 brokers: %d records acknowledged, none failed or lost; longest produce stall %v", chk.Acked(), stall)
}

// move asks for partition p of topic to move to replicas, and requires
// the request accepted.
func (c *testCluster) move(ctx context.Context, adm *kadm.Client, topic string, p int32, replicas ...int32) {
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(topic, p, replicas)
	rs, err := adm.AlterPartitionAssignments(ctx, req)
	require.NoError(c.t, err)
	require.NoError(c.t, rs[topic][p].Err)
}

// reassigned waits until every running broker sees tp's replicas be
// replicas, with no reassignment in progress, and its replicas reflect
// that (a removed broker has dropped its replica).
func (c *testCluster) reassigned(tp checkpoint.TopicPartition, replicas []int32) {
	t := c.t
	for id, s := range c.servers {
		sn := until(t, s.Member(), fmt.Sprintf("sees %s on %v", tp, replicas), func(sn *cluster.Snapshot) bool {
			ts, ok := sn.Topics[tp.Topic]
			return ok && slices.Equal(ts.Replicas[tp.Partition], replicas) && !ts.Partitions[tp.Partition].Reassigning()
		})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		require.NoError(t, s.Replicas().Await(ctx, sn.Revision))
		cancel()
		_, held := s.Manager().Get(tp)
		require.Equal(t, slices.Contains(replicas, id), held, "node %d holds a replica of %s: %v", id, tp, held)
	}
}

// A partition moves from brokers 1, 2, 3 to 4, 2, 3 under an acks=all
// producer (KIP-455's AlterPartitionReassignments, through kadm as
// kafka-reassign-partitions.sh): broker 4 copies the log and joins the
// ISR, the reassignment completes, the removed leader hands over and
// drops its replica; nothing acknowledged is lost and the replicas hold
// the same bytes. A reassignment that cannot complete (its new replica
// cut off from the leader) is listed, then cancelled: the replicas are
// the old ones again and the new one drops what it had. Bad targets are
// refused with Kafka's errors.
func TestClusterReassignment(t *testing.T) {
	t.Parallel()
	c := makeTestCluster(t)
	c.links = map[int32]*faultproxy.Proxy{}
	for id := range int32(4) {
		c.links[id+1] = faultproxy.StartFor(t)
	}
	c.boot(3)
	c.add(4)
	ctx := context.Background()
	c.createAssigned(ctx, "m", []int32{1, 2, 3}, []int32{1, 2, 3})
	adm := c.admin()
	cl := c.producer(kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	chk := clustertest.New()
	require.NoError(t, chk.Produce(ctx, cl, "m", "a", 300))

	m0 := checkpoint.TopicPartition{Topic: "m", Partition: 0}
	_, epoch := c.leaderOf(1, "m", 0)
	done := make(chan error, 1)
	go func() { done <- chk.Produce(ctx, cl, "m", "during", 200) }()
	c.move(ctx, adm, "m", 0, 4, 2, 3)
	c.reassigned(m0, []int32{4, 2, 3})
	require.NoError(t, <-done)
	leader, after := c.leaderOf(2, "m", 0)
	require.NotEqual(t, int32(1), leader, "the removed leader handed over")
	require.Greater(t, after, epoch)
	listed, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{"m": {0: {}, 1: {}}})
	require.NoError(t, err)
	require.Empty(t, listed["m"])
	require.NoError(t, chk.Produce(ctx, cl, "m", "b", 100))
	chk.ReadBack(t, c.seeds(), "m", 2)
	sameBytes(t, c, m0)

	// m-1's leader (1) is cut off from its followers: broker 4 cannot
	// copy the log, so the reassignment stays in progress until cancelled.
	c.links[1].Cut()
	c.move(ctx, adm, "m", 1, 1, 2, 4)
	listed, err = adm.ListPartitionReassignments(ctx, kadm.TopicsSet{"m": {1: {}}})
	require.NoError(t, err)
	require.Equal(t, kadm.ListPartitionReassignmentsResponse{Topic: "m", Partition: 1, Replicas: []int32{1, 2, 4, 3},
		AddingReplicas: []int32{4}, RemovingReplicas: []int32{3}}, listed["m"][1])
	kcl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...))
	require.NoError(t, err)
	defer kcl.Close()
	all, err := kmsg.NewPtrListPartitionReassignmentsRequest().RequestWith(ctx, kcl) // (topics null: every one)
	require.NoError(t, err)
	require.Len(t, all.Topics, 1)
	require.Equal(t, "m", all.Topics[0].Topic)
	require.Len(t, all.Topics[0].Partitions, 1)
	require.Equal(t, int32(1), all.Topics[0].Partitions[0].Partition)
	var req kadm.AlterPartitionAssignmentsReq
	req.CancelAssign("m", 1)
	rs, err := adm.AlterPartitionAssignments(ctx, req)
	require.NoError(t, err)
	require.NoError(t, rs["m"][1].Err)
	c.reassigned(checkpoint.TopicPartition{Topic: "m", Partition: 1}, []int32{1, 2, 3})
	c.links[1].Heal()

	req = nil
	req.CancelAssign("m", 1)
	req.Assign("m", 0, []int32{4, 9})
	req.Assign("m", 5, []int32{1})
	rs, err = adm.AlterPartitionAssignments(ctx, req)
	require.NoError(t, err)
	require.ErrorIs(t, rs["m"][1].Err, kerr.NoReassignmentInProgress)
	require.ErrorIs(t, rs["m"][0].Err, kerr.InvalidReplicaAssignment, "broker 9 is not registered")
	require.ErrorIs(t, rs["m"][5].Err, kerr.UnknownTopicOrPartition)

	// KIP-860: a request that does not allow a change of the replication
	// factor is refused one.
	raw := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	raw.AllowReplicationFactorChange = false
	raw.Topics = []kmsg.AlterPartitionAssignmentsRequestTopic{{Topic: "m", Partitions: []kmsg.AlterPartitionAssignmentsRequestTopicPartition{{Partition: 0, Replicas: []int32{4, 2}}}}}
	resp, err := raw.RequestWith(ctx, kcl)
	require.NoError(t, err)
	require.Equal(t, kerr.InvalidReplicationFactor.Code, resp.Topics[0].Partitions[0].ErrorCode)
	require.False(t, resp.AllowReplicationFactorChange)
	chk.ReadBack(t, c.seeds(), "m", 2)
}

// The replication throttles (KIP-73) hold back a reassignment's copy: at
// 1 byte a second on the brokers, with the moving replicas named in the
// topic's throttled replicas, the new replica gets its first fetch (a
// throttle's first second) and then nothing — the leader's throttle is
// over its rate for that follower, the follower's own too, and the
// reassignment stays in progress; once the rates are removed it
// completes.
func TestClusterReplicationThrottle(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 3)
	c.add(4)
	ctx := context.Background()
	c.createAssigned(ctx, "th", []int32{1, 2, 3})
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchMaxBytes(1<<20))
	require.NoError(t, err)
	defer cl.Close()
	for range 5 { // 5 MiB that do not compress: five times what one follower fetch takes of a partition
		var recs []*kgo.Record
		for range 10 {
			value := make([]byte, 100<<10)
			_, _ = crand.Read(value)
			recs = append(recs, &kgo.Record{Topic: "th", Value: value})
		}
		require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())
	}

	adm := c.admin()
	one := "1"
	rates := []kadm.AlterConfig{{Name: "leader.replication.throttled.rate", Value: &one}, {Name: "follower.replication.throttled.rate", Value: &one}}
	for id := range int32(4) {
		rs, err := adm.AlterBrokerConfigs(ctx, rates, id+1)
		require.NoError(t, err)
		require.NoError(t, rs[0].Err)
	}
	leaders, followers := "0:1,0:2,0:3", "0:4"
	rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "leader.replication.throttled.replicas", Value: &leaders},
		{Name: "follower.replication.throttled.replicas", Value: &followers}}, "th")
	require.NoError(t, err)
	require.NoError(t, rs[0].Err)
	rev := c.servers[1].Member().Snapshot().Revision
	for _, s := range c.servers { // (every broker has taken the throttles)
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		require.NoError(t, s.Broker().AwaitDocs(cctx, rev))
		require.NoError(t, s.Replicas().Await(cctx, rev))
		cancel()
	}

	c.move(ctx, adm, "th", 0, 4, 2, 3)
	tp := checkpoint.TopicPartition{Topic: "th"}
	sn := until(t, c.servers[4].Member(), "sees the reassignment", func(sn *cluster.Snapshot) bool {
		st, _ := sn.Partition("th", 0)
		return st.Reassigning()
	})
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	require.NoError(t, c.servers[4].Replicas().Await(cctx, sn.Revision))
	copyTablet, ok := c.servers[4].Manager().Get(tp)
	require.True(t, ok)
	for copyTablet.Offsets().LogEndOffset == 0 { // its first fetch
		select {
		case <-copyTablet.Changed():
		case <-cctx.Done():
			t.Fatal("the new replica never fetched")
		}
	}
	st, _ := c.servers[1].Member().Snapshot().Partition("th", 0)
	require.False(t, st.InISR(4), "broker 4, out of the ISR, is what the leader's throttle counts")
	require.True(t, c.servers[1].Replicas().LeaderThrottleHeld(), "the leader's throttle holds back what it sends broker 4")
	src, _ := c.servers[1].Manager().Get(tp)
	require.Less(t, copyTablet.Offsets().LogEndOffset, src.Offsets().LogEndOffset)
	listed, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{"th": {0: {}}})
	require.NoError(t, err)
	require.Contains(t, listed["th"], int32(0), "still in progress")

	del := []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "leader.replication.throttled.rate"}, {Op: kadm.DeleteConfig, Name: "follower.replication.throttled.rate"}}
	for id := range int32(4) {
		rs, err := adm.AlterBrokerConfigs(ctx, del, id+1)
		require.NoError(t, err)
		require.NoError(t, rs[0].Err)
	}
	c.reassigned(tp, []int32{4, 2, 3})
	sameBytes(t, c, tp)
}

// fetchedFrom records which broker each fetched batch came from.
type fetchedFrom struct {
	mu    sync.Mutex
	nodes map[int32]int
}

func (f *fetchedFrom) OnFetchBatchRead(meta kgo.BrokerMetadata, _ string, _ int32, _ kgo.FetchBatchMetrics) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nodes[meta.NodeID]++
}

// Racks: broker.rack spreads each partition's replicas over the racks
// (two racks of two brokers: every partition of replication factor 2 has
// one in each), and with replica.selector.class RackAwareReplicaSelector
// a consumer naming its rack (franz-go's Rack, client.rack) is sent by
// the leader to the follower in its rack (KIP-392) and reads every record
// from it; one without a rack reads from the leader.
func TestClusterRacks(t *testing.T) {
	t.Parallel()
	c := makeTestCluster(t)
	c.configure = func(id int32, cfg *Config) {
		cfg.Cluster.Rack = map[int32]string{1: "a", 2: "a", 3: "b", 4: "b"}[id]
		cfg.Cluster.RackAwareReplicaSelector = true
	}
	c.boot(4)
	ctx := context.Background()
	adm := c.admin()
	res, err := adm.CreateTopic(ctx, 8, 2, nil, "spread")
	require.NoError(t, err)
	require.NoError(t, res.Err)
	sn := until(t, c.servers[1].Member(), "has the topic", func(sn *cluster.Snapshot) bool { _, ok := sn.Topics["spread"]; return ok })
	for p, rs := range sn.Topics["spread"].Replicas {
		require.NotEqual(t, sn.Brokers[rs[0]].Rack, sn.Brokers[rs[1]].Rack, "partition %d's replicas %v in one rack", p, rs)
	}

	c.createAssigned(ctx, "near", []int32{1, 3})
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.RequiredAcks(kgo.AllISRAcks()))
	require.NoError(t, err)
	defer cl.Close()
	chk := clustertest.New()
	require.NoError(t, chk.Produce(ctx, cl, "near", "r", 100))
	for _, rack := range []string{"b", ""} {
		from := &fetchedFrom{nodes: map[int32]int{}}
		opts := []kgo.Opt{kgo.SeedBrokers(c.seeds()...), kgo.ConsumeTopics("near"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.WithHooks(from)}
		if rack != "" {
			opts = append(opts, kgo.Rack(rack))
		}
		consumer, err := kgo.NewClient(opts...)
		require.NoError(t, err)
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		read := 0
		for read < 100 {
			fs := consumer.PollFetches(cctx)
			require.NoError(t, cctx.Err())
			fs.EachError(func(_ string, _ int32, err error) { require.NoError(t, err) })
			read += fs.NumRecords()
		}
		cancel()
		consumer.Close()
		require.Equal(t, 100, read)
		from.mu.Lock()
		if rack == "b" {
			require.Equal(t, map[int32]int{3: from.nodes[3]}, from.nodes, "every batch from the follower in rack b")
		} else {
			require.Equal(t, map[int32]int{1: from.nodes[1]}, from.nodes, "every batch from the leader")
		}
		from.mu.Unlock()
	}
}

// A broker whose data directory is lost comes back empty (the same node
// id, a new directory): it takes the cluster's id from etcd, makes its
// replicas again, copies them from the leaders and rejoins every ISR —
// no operator touches a file — and its copies hold the leaders' bytes,
// the log start the leader's too (records deleted before are not copied).
func TestClusterWipedBroker(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 3)
	ctx := context.Background()
	c.createAssigned(ctx, "w", []int32{1, 2, 3}, []int32{3, 1, 2})
	cl := c.producer(kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	chk := clustertest.New()
	require.NoError(t, chk.Produce(ctx, cl, "w", "a", 200))
	adm := c.admin()
	// Records of w-0 below offset 10 are deleted: the new copy starts at 10.
	del, err := adm.DeleteRecords(ctx, kadm.Offsets{"w": {0: kadm.Offset{At: 10}}})
	require.NoError(t, err)
	require.NoError(t, del.Error())
	chk.Forget(func(at clustertest.At) bool { return at.Partition == 0 && at.Offset < 10 })

	c.stop(3)
	require.NoError(t, os.RemoveAll(filepath.Join(c.dir, "3")))
	require.NoError(t, chk.Produce(ctx, cl, "w", "b", 100))
	c.start(3)
	until(t, c.servers[3].Member(), "has broker 3 back in every ISR", func(sn *cluster.Snapshot) bool {
		for _, ts := range sn.Topics {
			for _, st := range ts.Partitions {
				if len(st.ISR) != 3 {
					return false
				}
			}
		}
		return len(sn.Topics) > 0
	})
	w0, ok := c.servers[3].Manager().Get(checkpoint.TopicPartition{Topic: "w"})
	require.True(t, ok)
	require.Equal(t, int64(10), w0.Offsets().LogStartOffset)
	require.NoError(t, chk.Produce(ctx, cl, "w", "c", 100))
	chk.ReadBack(t, c.seeds(), "w", 2)
	for p := range int32(2) {
		sameBytes(t, c, checkpoint.TopicPartition{Topic: "w", Partition: p})
	}
}

// tierStep runs every broker's tiering once (the leaders' first: they
// upload and publish; the followers then follow), with garbage collection
// when gc.
func (c *testCluster) tierStep(gc bool, ids ...int32) {
	for _, id := range ids {
		_, err := c.servers[id].Tiering().RunOnce(context.Background(), gc)
		require.NoError(c.t, err, "node %d's tiering", id)
	}
}

// The tier in a cluster, over one store: only the partition's leader
// uploads and publishes its manifest (etcd's tiers/ key, at its leader
// epoch); the followers take the published manifest and delete local
// segments only below its tiered end; after the leader's controlled
// shutdown the next leader continues the same manifest at its own epoch
// (from inside one of its own segments, which rolled elsewhere), and
// every acknowledged record is read back through it, the oldest from the
// store; the old leader, back as a follower, takes the new manifest; a
// publication at the old epoch is refused; garbage collection on every
// broker leaves every key the published manifest names.
func TestClusterTiering(t *testing.T) {
	t.Parallel()
	c, storeDir := tieredCluster(t)
	c.boot(3)
	ctx := context.Background()
	c.createAssigned(ctx, "tt", []int32{1, 2, 3})
	c.tierTopic(ctx, "tt", "0")
	cl := c.producer(kgo.ProducerLinger(0))
	chk := clustertest.New()
	require.NoError(t, chk.Produce(ctx, cl, "tt", "a", 300))

	tp := checkpoint.TopicPartition{Topic: "tt"}
	c.tierStep(false, 1, 2, 3)
	ptr, ok := c.servers[1].Member().Snapshot().Tier("tt", 0)
	require.True(t, ok, "the leader published its manifest")
	_, epoch := c.leaderOf(1, "tt", 0)
	require.Equal(t, epoch, ptr.LeaderEpoch)
	require.Positive(t, ptr.TieredEnd)
	for _, id := range []int32{2, 3} {
		until(t, c.servers[id].Member(), "has the pointer", func(sn *cluster.Snapshot) bool { _, ok := sn.Tier("tt", 0); return ok })
		c.tierStep(false, id)
		tb, _ := c.servers[id].Manager().Get(tp)
		o := tb.Offsets()
		require.Positive(t, o.LocalLogStartOffset, "follower %d deleted tiered segments", id)
		require.LessOrEqual(t, o.LocalLogStartOffset, ptr.TieredEnd, "follower %d deleted only below the published tiered end", id)
		require.Zero(t, o.LogStartOffset, "the log starts in the tier")
	}
	// The console's partition page on the leader: its followers, its
	// local segments, the tier's objects; on a follower, its role.
	status, body := get(t, c.servers[1], "/topics/tt/partitions/0")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `<dd id="role">leader</dd>`)
	require.Regexp(t, `<tr><td>2</td>\s*<td>\d+</td><td>\d+</td><td>[^<]+ ago</td>\s*<td>yes</td></tr>`, body)
	require.Regexp(t, `<tr><td>3</td>\s*<td>\d+</td><td>\d+</td><td>[^<]+ ago</td>\s*<td>yes</td></tr>`, body)
	require.Regexp(t, `<p id="tier">[1-9]\d* object\(s\), [0-9.]+ (B|KiB|MiB), up to offset `+fmt.Sprint(ptr.TieredEnd)+`\.</p>`, body)
	require.Contains(t, body, `<table id="tier-objects">`)
	status, body = get(t, c.servers[2], "/topics/tt/partitions/0")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `<dd id="role">follower</dd>`)
	require.NotContains(t, body, `id="followers"`)

	// The leader shuts down; the next continues the manifest.
	c.stop(1)
	sn := until(t, c.servers[2].Member(), "has a new leader", func(sn *cluster.Snapshot) bool {
		st, _ := sn.Partition("tt", 0)
		return st.Leader == 2 || st.Leader == 3
	})
	st, _ := sn.Partition("tt", 0)
	newLeader, others := st.Leader, map[int32]int32{2: 3, 3: 2}
	require.NoError(t, chk.Produce(ctx, cl, "tt", "b", 300))
	c.tierStep(false, newLeader, others[newLeader])
	next, _ := c.servers[newLeader].Member().Snapshot().Tier("tt", 0)
	require.Equal(t, st.LeaderEpoch, next.LeaderEpoch, "published at the new leader's epoch")
	require.Greater(t, next.TieredEnd, ptr.TieredEnd)
	require.Greater(t, next.Seq, ptr.Seq)
	err := c.servers[newLeader].Member().PublishTier(ctx, "tt", 0, epoch, ptr)
	require.ErrorIs(t, err, cluster.ErrStaleState, "a publication at the old epoch is refused")

	c.start(1)
	until(t, c.servers[1].Member(), "has broker 1 back in the ISR", func(sn *cluster.Snapshot) bool {
		st, _ := sn.Partition("tt", 0)
		return st.InISR(1)
	})
	c.tierStep(false, 1)
	x, err := c.servers[1].Tiering().Tier(ctx, mustTablet(t, c.servers[1], tp))
	require.NoError(t, err)
	require.Equal(t, next.Seq, x.Manifest().State().Seq, "the old leader took the new manifest")

	c.tierStep(true, newLeader, others[newLeader], 1)
	chk.ReadBack(t, c.seeds(), "tt", 1)
	final, _ := c.servers[newLeader].Member().Snapshot().Tier("tt", 0)
	lx, err := c.servers[newLeader].Tiering().Tier(ctx, mustTablet(t, c.servers[newLeader], tp))
	require.NoError(t, err)
	require.Equal(t, final.Seq, lx.Manifest().State().Seq)
	for _, e := range lx.Manifest().Visible() {
		if e.Key != "" {
			_, err := os.Stat(filepath.Join(storeDir, e.Key))
			require.NoError(t, err, "a key the published manifest names is in the store")
		}
	}
}

func mustTablet(t *testing.T, s *Server, tp checkpoint.TopicPartition) *tablet.Tablet {
	tb, ok := s.Manager().Get(tp)
	require.True(t, ok)
	return tb
}

// localBytes is the size of a tablet's local segments.
func localBytes(tb *tablet.Tablet) int64 {
	var n int64
	for _, s := range tb.Segments() {
		n += s.Size
	}
	return n
}

// A tiered partition moves onto a fourth broker copying only the local
// tail: its leader answers the new replica's fetch below the local log
// with OFFSET_MOVED_TO_TIERED_STORAGE (KIP-405), the replica starts from
// the tier at the end of the object holding the leader's local log start
// (its producer state and leader epochs from there) and copies the rest;
// it holds at most twice the leader's local bytes, none of the tiered
// history, and every acknowledged record reads back after the move.
func TestClusterTieredReassignment(t *testing.T) {
	t.Parallel()
	c, _ := tieredCluster(t)
	c.boot(3)
	c.add(4)
	ctx := context.Background()
	c.createAssigned(ctx, "mv", []int32{1, 2, 3})
	adm := c.admin()
	c.tierTopic(ctx, "mv", "8192")
	cl := c.producer(kgo.ProducerLinger(0))
	chk := clustertest.New()
	require.NoError(t, chk.Produce(ctx, cl, "mv", "a", 1500))
	c.tierStep(false, 1, 2, 3)
	tp := checkpoint.TopicPartition{Topic: "mv"}
	src := mustTablet(t, c.servers[1], tp)
	require.Positive(t, src.Offsets().LocalLogStartOffset, "the leader keeps only its local tail")
	tail := localBytes(src) // (before the move: the removed replica goes)
	ptr, _ := c.servers[1].Member().Snapshot().Tier("mv", 0)

	c.move(ctx, adm, "mv", 0, 4, 2, 3)
	c.reassigned(tp, []int32{4, 2, 3})
	moved := mustTablet(t, c.servers[4], tp)
	o := moved.Offsets()
	require.Positive(t, o.LocalLogStartOffset, "the new replica started from the tier")
	require.LessOrEqual(t, o.LocalLogStartOffset, ptr.TieredEnd)
	require.LessOrEqual(t, localBytes(moved), 2*tail, "it copied at most twice the leader's local tail")
	t.Logf("moved a partition of %d records: the leader held %d bytes locally, the new replica copied %d (tiered end %d)",
		o.LogEndOffset, tail, localBytes(moved), ptr.TieredEnd)
	// The new replica reads its whole log, the history from the tier.
	for off := int64(0); off < o.LogEndOffset; {
		res, err := moved.Read(off, tablet.ReadOptions{MaxBytes: 1 << 20, Isolation: tablet.ReadLogEnd, MinOneMessage: true})
		require.NoError(t, err, "read at %d (log start %d, local %d)", off, o.LogStartOffset, o.LocalLogStartOffset)
		b, err := res.Records.AppendTo(nil)
		res.Close()
		require.NoError(t, err)
		require.NotEmpty(t, b, "nothing read at %d", off)
		off = lastOffset(t, b) + 1
	}
	require.NoError(t, chk.Produce(ctx, cl, "mv", "b", 100))
	chk.ReadBack(t, c.seeds(), "mv", 1)
}
