package broker

import (
	"context"
	"net"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/coordinator/group"
	"github.com/seglog/seglog/coordinator/txn"
)

// The group coordinator's APIs: this broker is every group's coordinator,
// and coordinator/group answers the requests.

// stopContext ends when the broker closes: JoinGroup and SyncGroup stop
// waiting for a rebalance.
func (b *Broker) stopContext() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-b.stop
		cancel()
	}()
	return ctx
}

// handleGroup answers a group request; ok is false for another API.
func (b *Broker) handleGroup(h header, req kmsg.Request) (kmsg.Response, bool) {
	c := b.groups
	ctx := b.ctx
	if b.groupWait > 0 { // the fuzz test's bound on a wait for a rebalance
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, b.groupWait)
		defer cancel()
	}
	switch r := req.(type) {
	case *kmsg.FindCoordinatorRequest:
		return b.findCoordinator(h, r), true
	case *kmsg.JoinGroupRequest:
		return c.JoinGroup(ctx, group.Client{ID: h.clientID, Host: h.host}, r), true
	case *kmsg.SyncGroupRequest:
		return c.SyncGroup(ctx, r), true
	case *kmsg.HeartbeatRequest:
		return c.Heartbeat(r), true
	case *kmsg.LeaveGroupRequest:
		return c.LeaveGroup(r), true
	case *kmsg.OffsetCommitRequest:
		return c.OffsetCommit(r), true
	case *kmsg.OffsetFetchRequest:
		return c.OffsetFetch(r), true
	case *kmsg.OffsetDeleteRequest:
		return c.OffsetDelete(r), true
	case *kmsg.DescribeGroupsRequest:
		return c.DescribeGroups(r), true
	case *kmsg.ListGroupsRequest:
		return c.ListGroups(r), true
	case *kmsg.DeleteGroupsRequest:
		return c.DeleteGroups(r), true
	case *kmsg.AddPartitionsToTxnRequest:
		return b.txns.AddPartitionsToTxn(r), true
	case *kmsg.EndTxnRequest:
		return b.txns.EndTxn(r), true
	case *kmsg.AddOffsetsToTxnRequest:
		resp := r.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
		if err := b.groups.Ensure(); err != nil { // its marker goes there
			resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
			return resp, true
		}
		return b.txns.AddOffsetsToTxn(r, b.offsetsPartition(r.Group)), true
	case *kmsg.DescribeTransactionsRequest:
		return b.txns.DescribeTransactions(r), true
	case *kmsg.ListTransactionsRequest:
		return b.txns.ListTransactions(r), true
	case *kmsg.DescribeProducersRequest:
		return b.describeProducers(r), true
	case *kmsg.TxnOffsetCommitRequest:
		if code := b.txns.Verify(r.ProducerID, r.ProducerEpoch, b.offsetsPartition(r.Group)); code != 0 {
			// The transaction must have added the group (AddOffsetsToTxn).
			return group.RefuseTxnOffsetCommit(r, code), true
		}
		return c.TxnOffsetCommit(r), true
	}
	return nil, false
}

// findCoordinator answers that this broker coordinates every group and
// transactional id (one key before v4, a batch from v4), creating the
// coordinator's internal topic on first use.
func (b *Broker) findCoordinator(h header, r *kmsg.FindCoordinatorRequest) *kmsg.FindCoordinatorResponse {
	resp := r.ResponseKind().(*kmsg.FindCoordinatorResponse)
	keys := r.CoordinatorKeys
	if r.GetVersion() < 4 {
		keys = []string{r.CoordinatorKey}
	}
	for _, key := range keys {
		co := kmsg.FindCoordinatorResponseCoordinator{Key: key, NodeID: -1, Port: -1}
		ensure, topic := b.groups.Ensure, group.Topic
		if r.CoordinatorType == 1 {
			ensure, topic = b.txns.Ensure, txn.Topic
		}
		switch {
		case r.CoordinatorType != 0 && r.CoordinatorType != 1:
			co.ErrorCode = kerr.InvalidRequest.Code
		case key == "":
			co.ErrorCode = kerr.InvalidRequest.Code
		default:
			if err := ensure(); err != nil {
				b.opts.Logger.Error("creating "+topic, "err", err)
				co.ErrorCode = kerr.CoordinatorNotAvailable.Code
				break
			}
			host, port := b.advertised(h)
			co.NodeID, co.Host, co.Port = b.opts.NodeID, host, port
		}
		if co.ErrorCode != 0 {
			co.ErrorMessage = kmsg.StringPtr(kerr.ErrorForCode(co.ErrorCode).Error())
		}
		resp.Coordinators = append(resp.Coordinators, co)
	}
	if r.GetVersion() < 4 && len(resp.Coordinators) == 1 {
		co := resp.Coordinators[0]
		resp.ErrorCode, resp.ErrorMessage, resp.NodeID, resp.Host, resp.Port = co.ErrorCode, co.ErrorMessage, co.NodeID, co.Host, co.Port
		resp.Coordinators = nil
	}
	return resp
}

// describeProducers lists each partition's active producers (their
// writer state), as Kafka does.
func (b *Broker) describeProducers(r *kmsg.DescribeProducersRequest) *kmsg.DescribeProducersResponse {
	resp := r.ResponseKind().(*kmsg.DescribeProducersResponse)
	for _, rt := range r.Topics {
		st := kmsg.DescribeProducersResponseTopic{Topic: rt.Topic}
		for _, p := range rt.Partitions {
			sp := kmsg.NewDescribeProducersResponseTopicPartition()
			sp.Partition = p
			t, ok := b.m.Get(checkpoint.TopicPartition{Topic: rt.Topic, Partition: p})
			if !ok {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			for _, e := range t.Producers() {
				ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
				ap.ProducerID, ap.ProducerEpoch, ap.LastSequence = e.ProducerID, int32(e.Epoch), e.LastSeq()
				ap.LastTimestamp, ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = e.LastTimestamp, e.CoordinatorEpoch, e.CurrentTxnFirstOffset
				sp.ActiveProducers = append(sp.ActiveProducers, ap)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// offsetsPartition is the __consumer_offsets partition of a group.
func (b *Broker) offsetsPartition(groupID string) checkpoint.TopicPartition {
	return checkpoint.TopicPartition{Topic: group.Topic, Partition: group.PartitionFor(groupID, b.groups.Partitions())}
}

// clientIP is the peer's IP address, as ACL hosts and IP quotas name it.
func clientIP(a net.Addr) string {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.IP.String()
	}
	return a.String()
}

// clientHost is a connection's peer as Kafka shows a member's host.
func clientHost(a net.Addr) string {
	if _, ok := a.(*net.TCPAddr); ok {
		return "/" + clientIP(a)
	}
	return a.String()
}
