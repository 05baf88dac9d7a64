package server

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/cluster"
)

// rawExchange sends req at version v on a new connection to addr and
// decodes the answer at v with kmsg, failing the test if it does not
// decode.
func rawExchange(t *testing.T, addr string, req kmsg.Request, v int16) kmsg.Response {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	req.SetVersion(v)
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("versions")).AppendRequest(nil, req, 9)
	_, err = c.Write(frame)
	require.NoError(t, err)
	var size [4]byte
	_, err = io.ReadFull(c, size[:])
	require.NoError(t, err, "%s v%d: no answer", kmsg.NameForKey(req.Key()), v)
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err = io.ReadFull(c, body)
	require.NoError(t, err)
	resp := req.ResponseKind()
	resp.SetVersion(v)
	body = body[4:]
	if resp.IsFlexible() && resp.Key() != 18 {
		body = body[1:]
	}
	require.NoError(t, resp.ReadFrom(body), "%s v%d: the answer does not decode at its version", kmsg.NameForKey(req.Key()), v)
	return resp
}

// The group and transaction APIs sent, at every version the broker
// serves, to a broker that is not the coordinator are answered at that
// version with NOT_COORDINATOR, and Produce and ListOffsets to a broker
// that does not lead the partition with NOT_LEADER_OR_FOLLOWER, which
// franz-go decodes (JoinGroup and
// SyncGroup were answered with version 0 bodies: franz-go read "response
// did not contain enough data", librdkafka "read buffer underflow").
func TestClusterErrorAnswersAtTheirVersion(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	group, txnID := "versions-g", "versions-t"
	other := func(coordinator int32) string {
		for id, s := range c.servers {
			if id != coordinator {
				return s.Listeners()[0].Addr.String()
			}
		}
		return ""
	}
	groupAt, txnAt := other(c.coordinator(ctx, group, 0)), other(c.coordinator(ctx, txnID, 1))
	vers := rawExchange(t, groupAt, kmsg.NewPtrApiVersionsRequest(), 0).(*kmsg.ApiVersionsResponse)
	served := map[int16][2]int16{}
	for _, k := range vers.ApiKeys {
		served[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	// A partition led by broker 1 only, asked of broker 2.
	ts, err := c.servers[1].Member().CreateTopic(ctx, cluster.TopicSpec{Name: "versions", Assignment: [][]int32{{1}}})
	require.NoError(t, err)
	for _, s := range c.servers {
		until(t, s.Member(), "sees the topic", func(sn *cluster.Snapshot) bool { _, ok := sn.Partition("versions", 0); return ok })
	}
	notLeader := c.servers[2].Listeners()[0].Addr.String()
	for _, c := range []struct {
		addr string
		req  func() kmsg.Request
		code func(kmsg.Response) int16
		want int16
	}{
		{groupAt, func() kmsg.Request {
			r := kmsg.NewPtrJoinGroupRequest()
			r.Group, r.ProtocolType, r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = group, "consumer", 10000, 10000
			r.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.JoinGroupResponse).ErrorCode }, kerr.NotCoordinator.Code},
		{groupAt, func() kmsg.Request {
			r := kmsg.NewPtrSyncGroupRequest()
			r.Group, r.Generation, r.MemberID = group, 1, "m"
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.SyncGroupResponse).ErrorCode }, kerr.NotCoordinator.Code},
		{groupAt, func() kmsg.Request {
			r := kmsg.NewPtrHeartbeatRequest()
			r.Group, r.Generation, r.MemberID = group, 1, "m"
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.HeartbeatResponse).ErrorCode }, kerr.NotCoordinator.Code},
		{groupAt, func() kmsg.Request {
			r := kmsg.NewPtrLeaveGroupRequest()
			r.Group, r.MemberID = group, "m"
			r.Members = []kmsg.LeaveGroupRequestMember{{MemberID: "m"}}
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.LeaveGroupResponse).ErrorCode }, kerr.NotCoordinator.Code},
		{groupAt, func() kmsg.Request {
			r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			r.Group, r.MemberID, r.MemberEpoch, r.RebalanceTimeoutMillis = group, "m-versions-0000000000", 0, 10000
			r.SubscribedTopicNames, r.Topics = []string{"x"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode }, kerr.NotCoordinator.Code},
		{txnAt, func() kmsg.Request {
			r := kmsg.NewPtrInitProducerIDRequest()
			r.TransactionalID, r.TransactionTimeoutMillis = kmsg.StringPtr(txnID), 10000
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.InitProducerIDResponse).ErrorCode }, kerr.NotCoordinator.Code},
		{txnAt, func() kmsg.Request {
			r := kmsg.NewPtrAddOffsetsToTxnRequest()
			r.TransactionalID, r.ProducerID, r.Group = txnID, 1, group
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.AddOffsetsToTxnResponse).ErrorCode }, kerr.NotCoordinator.Code},
		{txnAt, func() kmsg.Request {
			r := kmsg.NewPtrEndTxnRequest()
			r.TransactionalID, r.ProducerID, r.Commit = txnID, 1, true
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.EndTxnResponse).ErrorCode }, kerr.NotCoordinator.Code},
		{notLeader, func() kmsg.Request {
			r := kmsg.NewPtrProduceRequest()
			r.Acks, r.TimeoutMillis = -1, 1000
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic, rt.TopicID = "versions", ts.ID
			rp := kmsg.NewProduceRequestTopicPartition()
			rt.Partitions = append(rt.Partitions, rp)
			r.Topics = append(r.Topics, rt)
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode }, kerr.NotLeaderForPartition.Code},
		{notLeader, func() kmsg.Request {
			r := kmsg.NewPtrListOffsetsRequest()
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = "versions"
			rt.Partitions = append(rt.Partitions, kmsg.NewListOffsetsRequestTopicPartition())
			r.Topics = append(r.Topics, rt)
			return r
		}, func(r kmsg.Response) int16 { return r.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].ErrorCode }, kerr.NotLeaderForPartition.Code},
	} {
		key := c.req().Key()
		span, ok := served[key]
		require.True(t, ok, "%s is served", kmsg.NameForKey(key))
		if key == 0 {
			span[0] = max(span[0], 3) // (Produce is listed from v0, as Kafka 4 lists it, and served from v3)
		}
		for v := span[0]; v <= span[1]; v++ {
			resp := rawExchange(t, c.addr, c.req(), v)
			require.Equal(t, c.want, c.code(resp), "%s v%d", kmsg.NameForKey(key), v)
		}
	}
}

// The Eligible Leader Replicas (KIP-966): of a partition at
// min.insync.replicas 2 whose followers shut down one after the other, the
// one that left the ISR below its minimum stays eligible (the first left
// while the ISR kept it: the high watermark could move without it) —
// DescribeTopicPartitions shows it as the ELR beside an ISR of the leader
// alone; a follower back in the ISR empties the ELR.
func TestClusterEligibleLeaderReplicas(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := c.servers[1].Member().CreateTopic(ctx, cluster.TopicSpec{Name: "elr", Assignment: [][]int32{{1, 2, 3}}})
	require.NoError(t, err)
	until(t, c.servers[1].Member(), "sees elr in sync", func(sn *cluster.Snapshot) bool {
		st, ok := sn.Partition("elr", 0)
		return ok && len(st.ISR) == 3
	})
	c.stop(2)
	c.stop(3)
	until(t, c.servers[1].Member(), "sees 3 eligible", func(sn *cluster.Snapshot) bool {
		st, _ := sn.Partition("elr", 0)
		return len(st.ISR) == 1 && len(st.ELR) == 1
	})
	describe := func() kmsg.DescribeTopicPartitionsResponseTopicPartition {
		req := kmsg.NewPtrDescribeTopicPartitionsRequest()
		req.Topics = []kmsg.DescribeTopicPartitionsRequestTopic{{Topic: "elr"}}
		req.ResponsePartitionLimit = 10
		resp := rawExchange(t, c.servers[1].Listeners()[0].Addr.String(), req, 0).(*kmsg.DescribeTopicPartitionsResponse)
		require.Len(t, resp.Topics, 1)
		require.Len(t, resp.Topics[0].Partitions, 1)
		return resp.Topics[0].Partitions[0]
	}
	p := describe()
	require.Equal(t, int32(1), p.LeaderID)
	require.Equal(t, []int32{1}, p.ISR)
	require.Equal(t, []int32{3}, p.EligibleLeaderReplicas)

	c.start(2)
	until(t, c.servers[1].Member(), "sees 2 back in the ISR and no ELR", func(sn *cluster.Snapshot) bool {
		st, _ := sn.Partition("elr", 0)
		return len(st.ISR) == 2 && len(st.ELR) == 0
	})
	p = describe()
	require.ElementsMatch(t, []int32{1, 2}, p.ISR)
	require.Empty(t, p.EligibleLeaderReplicas)
}
