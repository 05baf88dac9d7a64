package broker

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/coordinator/group"
	"github.com/seglog/seglog/tablet"
)

// groupOptions are a test broker's: no initial rebalance delay.
func groupOptions() Options {
	return Options{NumPartitions: 3, Groups: group.Options{NoInitialDelay: true}}
}

// produceN produces n records to topic, round robin over its partitions
// (with opts added to the producer's).
func produceN(t *testing.T, ctx context.Context, addr, topic string, from, n int, opts ...kgo.Opt) {
	t.Helper()
	p, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.AllowAutoTopicCreation(), kgo.RecordPartitioner(kgo.RoundRobinPartitioner())}, opts...)...)
	require.NoError(t, err)
	defer p.Close()
	var recs []*kgo.Record
	for i := from; i < from+n; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "v%d", i)})
	}
	require.NoError(t, p.ProduceSync(ctx, recs...).FirstErr())
}

// consumeGroup polls a group consumer until it has n records, and returns
// their values.
func consumeGroup(t *testing.T, ctx context.Context, c *kgo.Client, n int) map[string]bool {
	t.Helper()
	got := map[string]bool{}
	for len(got) < n {
		fs := c.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "consumed %d of %d", len(got), n)
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("%s-%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			require.False(t, got[string(r.Value)], "record %s twice", r.Value)
			got[string(r.Value)] = true
		})
	}
	return got
}

// A franz-go group consumer, with each balancer, consumes a topic, commits,
// and a new consumer of the group resumes after the committed offsets.
func TestFranzGoConsumerGroup(t *testing.T) {
	for name, bal := range map[string]kgo.GroupBalancer{"range": kgo.RangeBalancer(), "round-robin": kgo.RoundRobinBalancer(),
		"cooperative-sticky": kgo.CooperativeStickyBalancer(), "sticky": kgo.StickyBalancer()} {
		t.Run(name, func(t *testing.T) {
			b, _, addr := testBroker(t, groupOptions())
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			produceN(t, ctx, addr, "orders", 0, 3000)
			opts := []kgo.Opt{kgo.SeedBrokers(addr), kgo.ConsumerGroup("g"), kgo.ConsumeTopics("orders"),
				kgo.Balancers(bal), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100 * time.Millisecond),
				kgo.DisableAutoCommit()}
			c, err := kgo.NewClient(opts...)
			require.NoError(t, err)
			require.Equal(t, 3000, len(consumeGroup(t, ctx, c, 3000)))
			require.NoError(t, c.CommitUncommittedOffsets(ctx))
			c.Close()

			adm, _, _ := adminClient(t, addr)
			offs, err := adm.FetchOffsets(ctx, "g")
			require.NoError(t, err)
			var sum int64
			offs.Each(func(o kadm.OffsetResponse) {
				require.NoError(t, o.Err)
				sum += o.At
			})
			require.Equal(t, int64(3000), sum, "the committed offsets cover every record")

			produceN(t, ctx, addr, "orders", 3000, 300)
			reg := prometheus.NewRegistry()
			require.NoError(t, reg.Register(b.Collector()))
			require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP seglog_group_lag Records between each group's committed offsets and the log end (high watermark), summed over its partitions.
# TYPE seglog_group_lag gauge
seglog_group_lag{group="g"} 300
`), "seglog_group_lag"), "the lag is what came after the commits")
			c2, err := kgo.NewClient(opts...)
			require.NoError(t, err)
			defer c2.Close()
			got := consumeGroup(t, ctx, c2, 300)
			for i := 3000; i < 3300; i++ {
				require.True(t, got[fmt.Sprintf("v%d", i)], "v%d after the committed offsets", i)
			}
		})
	}
}

// assignments collects a consumer's assigned partitions as its rebalances
// end (an eager balancer: each assignment is the whole new set).
func assignments(ch chan<- []int32) kgo.Opt {
	return kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
		ch <- a["orders"]
	})
}

// Two members share the topic's partitions; when one leaves, the other
// gets them all. A static member that comes back takes its place without
// a rebalance.
func TestConsumerGroupRebalances(t *testing.T) {
	b, _, addr := testBroker(t, groupOptions())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	produceN(t, ctx, addr, "orders", 0, 30)
	opts := []kgo.Opt{kgo.SeedBrokers(addr), kgo.ConsumerGroup("g"), kgo.ConsumeTopics("orders"),
		kgo.Balancers(kgo.RangeBalancer()), kgo.FetchMaxWait(100 * time.Millisecond), kgo.HeartbeatInterval(100 * time.Millisecond)}
	a1, a2 := make(chan []int32, 16), make(chan []int32, 16)
	c1, err := kgo.NewClient(append(opts, assignments(a1))...)
	require.NoError(t, err)
	defer c1.Close()
	require.ElementsMatch(t, []int32{0, 1, 2}, <-a1, "alone, the first member has every partition")

	c2, err := kgo.NewClient(append(opts, assignments(a2))...)
	require.NoError(t, err)
	got1, got2 := <-a1, <-a2
	require.Len(t, append(got1, got2...), 3, "two members share three partitions: %v %v", got1, got2)
	require.ElementsMatch(t, []int32{0, 1, 2}, append(got1, got2...))
	require.NotEmpty(t, got1)
	require.NotEmpty(t, got2)

	adm, _, _ := adminClient(t, addr)
	described, err := adm.DescribeGroups(ctx, "g")
	require.NoError(t, err)
	require.Equal(t, "Stable", described["g"].State)
	require.Len(t, described["g"].Members, 2)

	c2.Close() // leaves the group
	require.ElementsMatch(t, []int32{0, 1, 2}, <-a1, "after the other left, every partition")

	// A static member: closing does not leave; a new client with the same
	// group.instance.id takes its place, with no rebalance.
	s1, err := kgo.NewClient(append(opts, kgo.InstanceID("static-1"), kgo.ConsumerGroup("s"), assignments(a2))...)
	require.NoError(t, err)
	require.ElementsMatch(t, []int32{0, 1, 2}, <-a2)
	s1.Close()
	before := b.groups.Stats().Rebalances
	s2, err := kgo.NewClient(append(opts, kgo.InstanceID("static-1"), kgo.ConsumerGroup("s"), assignments(a2))...)
	require.NoError(t, err)
	defer s2.Close()
	require.ElementsMatch(t, []int32{0, 1, 2}, <-a2)
	require.Equal(t, before, b.groups.Stats().Rebalances, "the static member came back without a rebalance")
	described, err = adm.DescribeGroups(ctx, "s")
	require.NoError(t, err)
	require.Len(t, described["s"].Members, 1)
	require.Equal(t, "static-1", *described["s"].Members[0].InstanceID)
}

// serveDir serves a data directory on addr ("127.0.0.1:0" for any port)
// until the returned stop, which closes the broker and the directory.
func serveDir(t *testing.T, dir, addr string, opts Options) (*Broker, string, func()) {
	t.Helper()
	m, err := tablet.OpenManager(nil, dir, tablet.ManagerOptions{Tablet: tablet.Options{Logger: quiet}})
	require.NoError(t, err)
	opts.Logger = quiet
	b, err := compose(m, opts)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- b.Serve(ln) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		require.NoError(t, b.Close())
		require.ErrorIs(t, <-served, ErrClosed)
		require.NoError(t, m.Close())
	}
	t.Cleanup(stop)
	return b, ln.Addr().String(), stop
}

// A broker restart loads the groups: a member that stays through the
// restart is still the group's, in the same generation (no rebalance), and
// a new consumer resumes exactly after the committed offsets.
func TestConsumerGroupSurvivesRestart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	_, addr, stop := serveDir(t, dir, "127.0.0.1:0", groupOptions())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	produceN(t, ctx, addr, "orders", 0, 900)
	opts := []kgo.Opt{kgo.SeedBrokers(addr), kgo.ConsumerGroup("g"), kgo.ConsumeTopics("orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100 * time.Millisecond), kgo.DisableAutoCommit(),
		kgo.HeartbeatInterval(100 * time.Millisecond)}
	c, err := kgo.NewClient(opts...)
	require.NoError(t, err)
	defer c.Close()
	require.Equal(t, 900, len(consumeGroup(t, ctx, c, 900)))
	require.NoError(t, c.CommitUncommittedOffsets(ctx))
	adm, _, _ := adminClient(t, addr)
	before, err := adm.FetchOffsets(ctx, "g")
	require.NoError(t, err)
	described, err := adm.DescribeGroups(ctx, "g")
	require.NoError(t, err)
	member := described["g"].Members[0].MemberID
	stop() // c stays, retrying

	b, addr, _ := serveDir(t, dir, addr, groupOptions())
	adm, _, _ = adminClient(t, addr)
	described, err = adm.DescribeGroups(ctx, "g")
	require.NoError(t, err)
	require.Equal(t, "Stable", described["g"].State, "loaded as it was stored")
	require.Len(t, described["g"].Members, 1)
	require.Equal(t, member, described["g"].Members[0].MemberID)
	after, err := adm.FetchOffsets(ctx, "g")
	require.NoError(t, err)
	require.Equal(t, before.Offsets(), after.Offsets(), "every committed offset loaded")

	produceN(t, ctx, addr, "orders", 900, 300)
	require.Equal(t, 300, len(consumeGroup(t, ctx, c, 300)), "the member goes on")
	require.Zero(t, b.groups.Stats().Rebalances, "the member kept its generation through the restart")
	c.Close() // leaves, without committing the 300

	c2, err := kgo.NewClient(opts...)
	require.NoError(t, err)
	defer c2.Close()
	got := consumeGroup(t, ctx, c2, 300)
	for i := 900; i < 1200; i++ {
		require.True(t, got[fmt.Sprintf("v%d", i)], "v%d after the committed offsets", i)
	}
}

// Deleting a topic deletes the groups' committed offsets of it (a group
// left without offsets goes too); __consumer_offsets itself cannot be
// deleted, nor produced to.
func TestDeletedTopicTakesItsOffsets(t *testing.T) {
	_, _, addr := testBroker(t, groupOptions())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	produceN(t, ctx, addr, "a", 0, 10)
	produceN(t, ctx, addr, "b", 0, 10)
	adm, cl, _ := adminClient(t, addr)
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "a", Partition: 0, At: 5, LeaderEpoch: -1})
	offs.Add(kadm.Offset{Topic: "b", Partition: 0, At: 6, LeaderEpoch: -1})
	_, err := adm.CommitOffsets(ctx, "both", offs)
	require.NoError(t, err)
	only := kadm.Offsets{}
	only.Add(kadm.Offset{Topic: "a", Partition: 1, At: 1, LeaderEpoch: -1})
	_, err = adm.CommitOffsets(ctx, "only-a", only)
	require.NoError(t, err)

	_, err = adm.DeleteTopics(ctx, "a")
	require.NoError(t, err)
	got, err := adm.FetchOffsets(ctx, "both")
	require.NoError(t, err)
	_, ok := got.Lookup("a", 0)
	require.False(t, ok, "a's offset went with the topic")
	o, ok := got.Lookup("b", 0)
	require.True(t, ok)
	require.Equal(t, int64(6), o.At)
	listed, err := adm.ListGroups(ctx)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"both"}, listed.Groups(), "only-a had nothing left")

	// ListGroups v5 filters by type (every group here is classic), and
	// DescribeGroups v6 answers GROUP_ID_NOT_FOUND for a group that does
	// not exist (KIP-1043), v5 a Dead group.
	lg := kmsg.NewPtrListGroupsRequest()
	lg.TypesFilter = []string{"consumer"}
	lgResp, err := lg.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Empty(t, lgResp.Groups, "no consumer (KIP-848) group")
	lg.TypesFilter = []string{"Classic"}
	lgResp, err = lg.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Len(t, lgResp.Groups, 1)
	require.Equal(t, "classic", lgResp.Groups[0].GroupType)
	conn := dialRaw(t, addr)
	// OffsetFetch v8+ asks for several groups at once (KIP-709).
	for _, v := range []int16{8, 9} {
		of := kmsg.NewPtrOffsetFetchRequest()
		of.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "both"},
			{Group: "only-a", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "b", Partitions: []int32{0}}}}}
		ofResp := kmsg.NewPtrOffsetFetchResponse()
		conn.do(of, v, ofResp)
		require.Len(t, ofResp.Groups, 2, "v%d", v)
		both, onlyA := ofResp.Groups[0], ofResp.Groups[1]
		require.Equal(t, "both", both.Group)
		require.Len(t, both.Topics, 1, "every topic it has offsets for: b")
		require.Equal(t, "b", both.Topics[0].Topic)
		require.Equal(t, int64(6), both.Topics[0].Partitions[0].Offset)
		require.Equal(t, "only-a", onlyA.Group)
		require.Equal(t, int64(-1), onlyA.Topics[0].Partitions[0].Offset, "none committed")
	}
	for _, v := range []int16{5, 6} {
		dg := kmsg.NewPtrDescribeGroupsRequest()
		dg.Groups = []string{"only-a", "both"}
		dgResp := kmsg.NewPtrDescribeGroupsResponse()
		conn.do(dg, v, dgResp)
		gone, both := dgResp.Groups[0], dgResp.Groups[1]
		require.Zero(t, both.ErrorCode)
		require.Equal(t, "Empty", both.State)
		if v < 6 {
			require.Zero(t, gone.ErrorCode)
			require.Equal(t, "Dead", gone.State)
		} else {
			require.Equal(t, kerr.GroupIDNotFound.Code, gone.ErrorCode)
			require.Equal(t, "Group only-a not found.", *gone.ErrorMessage)
		}
	}

	resp, err := adm.DeleteTopics(ctx, group.Topic)
	require.NoError(t, err)
	require.Error(t, resp[group.Topic].Err, "the internal topic stays")
	err = cl.ProduceSync(ctx, &kgo.Record{Topic: group.Topic, Key: []byte("k"), Value: []byte("v")}).FirstErr()
	require.Error(t, err, "no client appends to __consumer_offsets")
}

// Eight consumers joining one group at once all get their share, and the
// coordinator never answers a join with UNKNOWN_MEMBER_ID (a bug other
// brokers shipped: concurrent joins losing the member ids handed out).
func TestConcurrentJoins(t *testing.T) {
	b, _, addr := testBroker(t, groupOptions())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	adm, _, _ := adminClient(t, addr)
	_, err := adm.CreateTopic(ctx, 16, 1, nil, "wide")
	require.NoError(t, err)
	const n = 8
	type change struct {
		client int
		parts  []int32
		add    bool
	}
	changes := make(chan change, 256)
	var clients []*kgo.Client
	for i := range n {
		c, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup("crowd"), kgo.ConsumeTopics("wide"),
			kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.HeartbeatInterval(100*time.Millisecond),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) { changes <- change{i, a["wide"], true} }),
			kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, r map[string][]int32) { changes <- change{i, r["wide"], false} }),
			kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, r map[string][]int32) { changes <- change{i, r["wide"], false} }))
		require.NoError(t, err)
		clients = append(clients, c)
	}
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	owned := make([]map[int32]bool, n)
	for i := range owned {
		owned[i] = map[int32]bool{}
	}
	balanced := func() bool {
		all := map[int32]bool{}
		for _, o := range owned {
			if len(o) != 16/n {
				return false
			}
			for p := range o {
				all[p] = true
			}
		}
		return len(all) == 16
	}
	for !balanced() {
		select {
		case ch := <-changes:
			for _, p := range ch.parts {
				if ch.add {
					owned[ch.client][p] = true
				} else {
					delete(owned[ch.client], p)
				}
			}
		case <-ctx.Done():
			t.Fatalf("not balanced: %v", owned)
		}
	}
	described, err := adm.DescribeGroups(ctx, "crowd")
	require.NoError(t, err)
	require.Equal(t, "Stable", described["crowd"].State)
	require.Len(t, described["crowd"].Members, n)
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(b.Collector()))
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != "seglog_broker_request_errors_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			require.False(t, labels["api"] == "JoinGroup" && labels["error"] == "UNKNOWN_MEMBER_ID", "a join answered UNKNOWN_MEMBER_ID")
		}
	}
}
