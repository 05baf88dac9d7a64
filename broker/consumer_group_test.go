package broker

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/checkpoint"
)

// franz-go under the consumer group protocol (KIP-848: its
// ServerSideBalancer): two members share a topic's partitions as the
// broker assigns them, commit, and a new member resumes after the commits;
// DescribeGroups and ListGroups show a consumer group.
func TestFranzGoConsumerGroup848(t *testing.T) {
	opts848 := groupOptions()
	opts848.Groups.ConsumerHeartbeatInterval = 200 * time.Millisecond // members learn of a new target sooner
	_, _, addr := testBroker(t, opts848)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	produceN(t, ctx, addr, "orders", 0, 300)

	opts := []kgo.Opt{kgo.SeedBrokers(addr), kgo.ConsumerGroup("g848"), kgo.ConsumeTopics("orders"),
		kgo.ServerSideBalancer(), kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.FetchMaxWait(100 * time.Millisecond)}
	c1, err := kgo.NewClient(opts...)
	require.NoError(t, err)
	defer c1.Close()
	got := consumeGroup(t, ctx, c1, 300)
	require.Len(t, got, 300)
	require.NoError(t, c1.CommitUncommittedOffsets(ctx))

	adm := kadm.NewClient(c1)
	listed, err := adm.ListGroups(ctx)
	require.NoError(t, err)
	require.Contains(t, listed, "g848")
	require.Equal(t, "consumer", listed["g848"].GroupType)

	var cgd kmsg.ConsumerGroupDescribeRequest
	cgd.Groups = []string{"g848"}
	resp, err := cgd.RequestWith(ctx, c1)
	require.NoError(t, err)
	require.Len(t, resp.Groups, 1)
	d := resp.Groups[0]
	require.Zero(t, d.ErrorCode)
	require.Equal(t, "Stable", d.State)
	require.Equal(t, "uniform", d.AssignorName)
	require.Len(t, d.Members, 1)
	require.Equal(t, d.Epoch, d.Members[0].MemberEpoch)
	require.Len(t, d.Members[0].Assignment.TopicPartitions, 1)
	require.Equal(t, "orders", d.Members[0].Assignment.TopicPartitions[0].Topic)
	require.ElementsMatch(t, []int32{0, 1, 2}, d.Members[0].Assignment.TopicPartitions[0].Partitions)

	// A second member: the partitions are split between the two, each
	// owned by one.
	c2, err := kgo.NewClient(opts...)
	require.NoError(t, err)
	defer c2.Close()
	produceN(t, ctx, addr, "orders", 300, 300)
	// Both poll (which heartbeats) until every new record is consumed
	// and the group is stable with both.
	seen := map[string]bool{}
	for {
		for _, c := range []*kgo.Client{c1, c2} {
			pctx, pcancel := context.WithTimeout(ctx, 100*time.Millisecond)
			fs := c.PollFetches(pctx)
			pcancel()
			fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
		}
		require.NoError(t, ctx.Err())
		resp, err = cgd.RequestWith(ctx, c1)
		require.NoError(t, err)
		if d = resp.Groups[0]; len(seen) == 300 && d.State == "Stable" && len(d.Members) == 2 {
			break
		}
	}
	require.NoError(t, c1.CommitUncommittedOffsets(ctx))
	require.NoError(t, c2.CommitUncommittedOffsets(ctx))
	owned := map[int32]string{}
	for _, m := range d.Members {
		for _, tp := range m.Assignment.TopicPartitions {
			for _, p := range tp.Partitions {
				require.Empty(t, owned[p], "partition %d owned twice", p)
				owned[p] = m.MemberID
			}
		}
	}
	require.Len(t, owned, 3)
}

// OffsetCommit and OffsetFetch v10 name topics by id: committed and
// fetched back by id, an unknown id UNKNOWN_TOPIC_ID; franz-go's kadm (which
// sends v10 to a broker that serves it) commits and fetches by name.
func TestOffsetsByTopicID(t *testing.T) {
	_, m, addr := testBroker(t, groupOptions())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	produceN(t, ctx, addr, "ids", 0, 3)
	id, ok := m.TopicID("ids")
	require.True(t, ok)
	c := dialRaw(t, addr)
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey = "g10"
	c.do(fc, 3, kmsg.NewPtrFindCoordinatorResponse())

	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Group, oc.Generation = "g10", -1
	oc.Topics = []kmsg.OffsetCommitRequestTopic{
		{TopicID: id, Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 1, Offset: 1, LeaderEpoch: -1}}},
		{TopicID: [16]byte{9}, Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1, LeaderEpoch: -1}}},
	}
	ocResp := kmsg.NewPtrOffsetCommitResponse()
	c.do(oc, 10, ocResp)
	require.Len(t, ocResp.Topics, 2)
	require.Equal(t, [16]byte(id), ocResp.Topics[0].TopicID)
	require.Zero(t, ocResp.Topics[0].Partitions[0].ErrorCode)
	require.Equal(t, [16]byte{9}, ocResp.Topics[1].TopicID)
	require.Equal(t, kerr.UnknownTopicID.Code, ocResp.Topics[1].Partitions[0].ErrorCode)

	of := kmsg.NewPtrOffsetFetchRequest()
	of.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g10", Topics: []kmsg.OffsetFetchRequestGroupTopic{
		{TopicID: id, Partitions: []int32{1}}, {TopicID: [16]byte{9}, Partitions: []int32{0}}}}, {Group: "g10"}}
	ofResp := kmsg.NewPtrOffsetFetchResponse()
	c.do(of, 10, ofResp)
	require.Len(t, ofResp.Groups, 2)
	byID := ofResp.Groups[0].Topics
	require.Len(t, byID, 2)
	require.Equal(t, [16]byte(id), byID[0].TopicID)
	require.Equal(t, int64(1), byID[0].Partitions[0].Offset)
	require.Equal(t, kerr.UnknownTopicID.Code, byID[1].Partitions[0].ErrorCode)
	all := ofResp.Groups[1].Topics
	require.Len(t, all, 1, "every topic of the group")
	require.Equal(t, [16]byte(id), all[0].TopicID)

	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: "ids", Partition: 2, At: 2, LeaderEpoch: -1})
	committed, err := adm.CommitOffsets(ctx, "g10", offs)
	require.NoError(t, err)
	require.NoError(t, committed.Error())
	fetched, err := adm.FetchOffsets(ctx, "g10")
	require.NoError(t, err)
	require.NoError(t, fetched.Error())
	got, ok := fetched.Lookup("ids", 2)
	require.True(t, ok)
	require.Equal(t, int64(2), got.At)
	got, ok = fetched.Lookup("ids", 1)
	require.True(t, ok)
	require.Equal(t, int64(1), got.At)
}

// Metadata v10+ by topic id (how franz-go names the topics of a response
// by id): a known id gets its topic's name, an unknown one
// UNKNOWN_TOPIC_ID.
func TestMetadataByTopicID(t *testing.T) {
	_, m, addr := testBroker(t, groupOptions())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	produceN(t, ctx, addr, "named", 0, 1)
	id, _ := m.TopicID("named")
	c := dialRaw(t, addr)
	r := kmsg.NewPtrMetadataRequest()
	r.Topics = []kmsg.MetadataRequestTopic{{TopicID: id}, {TopicID: [16]byte{7}}}
	resp := kmsg.NewPtrMetadataResponse()
	c.do(r, 12, resp)
	require.Len(t, resp.Topics, 2)
	byID := map[[16]byte]kmsg.MetadataResponseTopic{}
	for _, t := range resp.Topics {
		byID[t.TopicID] = t
	}
	require.Equal(t, "named", *byID[id].Topic)
	require.Zero(t, byID[id].ErrorCode)
	require.Len(t, byID[id].Partitions, 3)
	require.Nil(t, byID[[16]byte{7}].Topic)
	require.Equal(t, kerr.UnknownTopicID.Code, byID[[16]byte{7}].ErrorCode)
}

// A classic group migrates online (KIP-848): two franz-go consumers on the
// classic protocol (cooperative-sticky) consume; a third joins with the
// consumer protocol and the group becomes a consumer group with the
// classic members in it, every partition owned once and every record
// consumed; when the consumer protocol member leaves, the group is
// classic again and its members rebalance.
func TestGroupMigratesBetweenProtocols(t *testing.T) {
	opts := groupOptions()
	opts.NumPartitions = 6
	opts.Groups.ConsumerHeartbeatInterval = 100 * time.Millisecond
	b, _, addr := testBroker(t, opts)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	produceN(t, ctx, addr, "mig", 0, 600)

	base := []kgo.Opt{kgo.SeedBrokers(addr), kgo.ConsumerGroup("mg"), kgo.ConsumeTopics("mig"),
		kgo.FetchMaxWait(50 * time.Millisecond), kgo.HeartbeatInterval(100 * time.Millisecond),
		kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.FetchMaxPartitionBytes(1 << 10)}
	var clients []*kgo.Client
	add := func(extra ...kgo.Opt) *kgo.Client {
		c, err := kgo.NewClient(append(slices.Clone(base), extra...)...)
		require.NoError(t, err)
		clients = append(clients, c)
		return c
	}
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	seen := map[string]int{}
	poll := func() {
		for _, c := range clients {
			pctx, pcancel := context.WithTimeout(ctx, 50*time.Millisecond)
			fs := c.PollRecords(pctx, 20)
			pcancel()
			fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++ })
			// A commit racing a member's rejoin is refused, as in any
			// rebalance; its records may come again (at least once).
			if err := c.CommitUncommittedOffsets(ctx); err != nil {
				require.True(t, errors.Is(err, kerr.IllegalGeneration) || errors.Is(err, kerr.RebalanceInProgress) ||
					errors.Is(err, kerr.StaleMemberEpoch) || errors.Is(err, kerr.UnknownMemberID), "%v", err)
			}
		}
		require.NoError(t, ctx.Err())
	}
	add()
	add()
	for len(seen) < 100 {
		poll()
	}
	require.Equal(t, kerr.GroupIDNotFound.Code, describeConsumerGroup(b, "mg").ErrorCode, "classic so far")

	upgraded := add(kgo.ServerSideBalancer())
	untilShared(t, ctx, b, "mg", poll, map[int8]int{0: 2, 1: 1}, 6, func() bool { return true })
	for len(seen) < 400 {
		poll()
	}

	// The consumer protocol member leaves: the group is classic again.
	upgraded.Close()
	clients = slices.DeleteFunc(clients, func(c *kgo.Client) bool { return c == upgraded })
	for len(seen) < 600 {
		poll()
	}
	require.Equal(t, kerr.GroupIDNotFound.Code, describeConsumerGroup(b, "mg").ErrorCode, "classic again")
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups = []string{"mg"}
	for {
		poll()
		if d := b.groups.DescribeGroups(dg).Groups[0]; d.State == "Stable" && len(d.Members) == 2 {
			break
		}
	}
	again := 0
	for _, n := range seen {
		again += n - 1
	}
	t.Logf("600 records, %d consumed again after a refused commit", again)
}

// With the authorizer on, a consumer group's topics are checked as on
// Kafka 4.1: a heartbeat subscribing to a topic the member may not
// describe is TOPIC_AUTHORIZATION_FAILED (and joins nothing), and
// ConsumerGroupDescribe of a group using such a topic is
// TOPIC_AUTHORIZATION_FAILED with no members shown, while a principal
// allowed the topics sees the group.
func TestConsumerGroupTopicAuthorization(t *testing.T) {
	opts := groupOptions()
	opts.Authorizer, opts.SuperUsers = true, []string{"User:admin"}
	b, m, _ := testBroker(t, opts)
	for _, topic := range []string{"open", "secret"} {
		_, err := m.Create(checkpoint.TopicPartition{Topic: topic}, nil)
		require.NoError(t, err)
	}
	acls := kmsg.NewPtrCreateACLsRequest()
	for _, c := range []struct {
		rt   kmsg.ACLResourceType
		name string
	}{{kmsg.ACLResourceTypeGroup, "g"}, {kmsg.ACLResourceTypeTopic, "open"}} {
		acls.Creations = append(acls.Creations, kmsg.CreateACLsRequestCreation{ResourceType: c.rt, ResourceName: c.name,
			ResourcePatternType: kmsg.ACLResourcePatternTypeLiteral, Principal: "User:bob", Host: "*",
			Operation: kmsg.ACLOperationAll, PermissionType: kmsg.ACLPermissionTypeAllow})
	}
	for _, r := range handleAs(t, b, "User:admin", acls, 3).(*kmsg.CreateACLsResponse).Results {
		require.Zero(t, r.ErrorCode)
	}
	heartbeat := func(principal string, topics ...string) *kmsg.ConsumerGroupHeartbeatResponse {
		hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		hb.Group, hb.MemberID, hb.MemberEpoch, hb.RebalanceTimeoutMillis = "g", "m-"+principal, 0, 30_000
		hb.SubscribedTopicNames, hb.Topics = topics, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		return handleAs(t, b, principal, hb, 1).(*kmsg.ConsumerGroupHeartbeatResponse)
	}
	refused := heartbeat("User:bob", "open", "secret")
	require.Equal(t, kerr.TopicAuthorizationFailed.Code, refused.ErrorCode)
	require.Contains(t, *refused.ErrorMessage, "secret")
	require.Zero(t, heartbeat("User:bob", "open").ErrorCode, "bob's topics only")
	require.Zero(t, heartbeat("User:admin", "open", "secret").ErrorCode, "admin's member subscribes to both")

	describe := func(principal string) kmsg.ConsumerGroupDescribeResponseGroup {
		d := kmsg.NewPtrConsumerGroupDescribeRequest()
		d.Groups = []string{"g"}
		return handleAs(t, b, principal, d, 1).(*kmsg.ConsumerGroupDescribeResponse).Groups[0]
	}
	g := describe("User:bob")
	require.Equal(t, kerr.TopicAuthorizationFailed.Code, g.ErrorCode, "the group uses secret")
	require.Empty(t, g.Members)
	g = describe("User:admin")
	require.Zero(t, g.ErrorCode)
	require.Len(t, g.Members, 2)
}

// describeConsumerGroup is group as ConsumerGroupDescribe shows it.
func describeConsumerGroup(b *Broker, group string) kmsg.ConsumerGroupDescribeResponseGroup {
	r := kmsg.NewPtrConsumerGroupDescribeRequest()
	r.Groups = []string{group}
	return b.groups.ConsumerGroupDescribe(r).Groups[0]
}

// untilShared calls poll (which consumes for a moment) until a migrated
// group is stable with members of the types given (0 classic, 1
// consumer) that own its topic's partitions once each, and done.
func untilShared(t *testing.T, ctx context.Context, b *Broker, group string, poll func(), types map[int8]int, partitions int, done func() bool) {
	t.Helper()
	members := 0
	for _, n := range types {
		members += n
	}
	for {
		poll()
		require.NoError(t, ctx.Err())
		d := describeConsumerGroup(b, group)
		if d.ErrorCode != 0 || d.State != "Stable" || len(d.Members) != members {
			continue
		}
		owned, have := map[int32]bool{}, map[int8]int{}
		for _, m := range d.Members {
			have[m.MemberType]++
			for _, tp := range m.Assignment.TopicPartitions {
				for _, p := range tp.Partitions {
					require.False(t, owned[p], "partition %d owned twice", p)
					owned[p] = true
				}
			}
		}
		require.Equal(t, types, have, "the members' protocols")
		if len(owned) == partitions && done() {
			return
		}
	}
}
