package broker

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
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
