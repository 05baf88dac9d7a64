package broker

import (
	"cmp"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/coordinator/group"
)

// authorizeGroupsAndTxns checks the group and transaction APIs (authorize
// in authz.go has the rest).
func (b *Broker) authorizeGroupsAndTxns(h header, req kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	groupErr := kerr.GroupAuthorizationFailed.Code
	txnErr := kerr.TransactionalIDAuthorizationFailed.Code
	switch r := req.(type) {
	case *kmsg.FindCoordinatorRequest:
		return b.authorizeFindCoordinator(h, r)
	case *kmsg.JoinGroupRequest:
		if !b.may(h, opRead, resGroup, r.Group) {
			resp := r.ResponseKind().(*kmsg.JoinGroupResponse)
			resp.ErrorCode, resp.Generation, resp.MemberID = groupErr, -1, r.MemberID
			return resp, nil
		}
	case *kmsg.SyncGroupRequest:
		if !b.may(h, opRead, resGroup, r.Group) {
			resp := r.ResponseKind().(*kmsg.SyncGroupResponse)
			resp.ErrorCode = groupErr
			return resp, nil
		}
	case *kmsg.HeartbeatRequest:
		if !b.may(h, opRead, resGroup, r.Group) {
			resp := r.ResponseKind().(*kmsg.HeartbeatResponse)
			resp.ErrorCode = groupErr
			return resp, nil
		}
	case *kmsg.LeaveGroupRequest:
		if !b.may(h, opRead, resGroup, r.Group) {
			resp := r.ResponseKind().(*kmsg.LeaveGroupResponse)
			resp.ErrorCode = groupErr
			return resp, nil
		}
	case *kmsg.OffsetCommitRequest:
		return b.authorizeOffsetCommit(h, r)
	case *kmsg.OffsetFetchRequest:
		return b.authorizeOffsetFetch(h, r)
	case *kmsg.OffsetDeleteRequest:
		if !b.may(h, opDelete, resGroup, r.Group) {
			resp := r.ResponseKind().(*kmsg.OffsetDeleteResponse)
			resp.ErrorCode = groupErr
			return resp, nil
		}
		denied := takeOut(&r.Topics, func(t kmsg.OffsetDeleteRequestTopic) int16 {
			return b.refusal(h, opRead, resTopic, t.Topic, topicRefused)
		}, func(t kmsg.OffsetDeleteRequestTopic, code int16) kmsg.OffsetDeleteResponseTopic {
			rt := kmsg.OffsetDeleteResponseTopic{Topic: t.Topic}
			for _, p := range t.Partitions {
				rt.Partitions = append(rt.Partitions, kmsg.OffsetDeleteResponseTopicPartition{Partition: p.Partition, ErrorCode: code})
			}
			return rt
		})
		return nil, func(resp kmsg.Response) {
			o := resp.(*kmsg.OffsetDeleteResponse)
			o.Topics = append(o.Topics, denied...)
		}
	case *kmsg.DescribeGroupsRequest:
		denied := takeOut(&r.Groups, func(g string) int16 {
			return b.refusal(h, opDescribe, resGroup, g, groupErr)
		}, func(g string, code int16) kmsg.DescribeGroupsResponseGroup {
			rg := kmsg.NewDescribeGroupsResponseGroup()
			rg.Group, rg.ErrorCode = g, code
			return rg
		})
		return nil, func(resp kmsg.Response) {
			d := resp.(*kmsg.DescribeGroupsResponse)
			d.Groups = append(d.Groups, denied...)
		}
	case *kmsg.ListGroupsRequest:
		if b.mayCluster(h, opDescribe) {
			return nil, nil
		}
		return nil, func(resp kmsg.Response) {
			l := resp.(*kmsg.ListGroupsResponse)
			l.Groups = slices.DeleteFunc(l.Groups, func(g kmsg.ListGroupsResponseGroup) bool {
				return !b.may(h, opDescribe, resGroup, g.Group)
			})
		}
	case *kmsg.DeleteGroupsRequest:
		denied := takeOut(&r.Groups, func(g string) int16 {
			return b.refusal(h, opDelete, resGroup, g, groupErr)
		}, func(g string, code int16) kmsg.DeleteGroupsResponseGroup {
			return kmsg.DeleteGroupsResponseGroup{Group: g, ErrorCode: code}
		})
		return nil, func(resp kmsg.Response) {
			d := resp.(*kmsg.DeleteGroupsResponse)
			d.Groups = append(d.Groups, denied...)
		}
	case *kmsg.AddPartitionsToTxnRequest:
		return b.authorizeAddPartitions(h, r), nil
	case *kmsg.AddOffsetsToTxnRequest:
		resp := r.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
		switch {
		case !b.may(h, opWrite, resTxnID, r.TransactionalID):
			resp.ErrorCode = txnErr
			return resp, nil
		case !b.may(h, opRead, resGroup, r.Group):
			resp.ErrorCode = groupErr
			return resp, nil
		}
	case *kmsg.TxnOffsetCommitRequest:
		return b.authorizeTxnOffsetCommit(h, r)
	case *kmsg.EndTxnRequest:
		if !b.may(h, opWrite, resTxnID, r.TransactionalID) {
			resp := r.ResponseKind().(*kmsg.EndTxnResponse)
			resp.ErrorCode = txnErr
			return resp, nil
		}
	case *kmsg.DescribeTransactionsRequest:
		denied := takeOut(&r.TransactionalIDs, func(id string) int16 {
			return b.refusal(h, opDescribe, resTxnID, id, txnErr)
		}, func(id string, code int16) kmsg.DescribeTransactionsResponseTransactionState {
			st := kmsg.NewDescribeTransactionsResponseTransactionState()
			st.TransactionalID, st.ErrorCode, st.ProducerID, st.ProducerEpoch = id, code, -1, -1
			return st
		})
		return nil, func(resp kmsg.Response) {
			d := resp.(*kmsg.DescribeTransactionsResponse)
			for i := range d.TransactionStates {
				d.TransactionStates[i].Topics = slices.DeleteFunc(d.TransactionStates[i].Topics,
					func(t kmsg.DescribeTransactionsResponseTransactionStateTopic) bool {
						return !b.may(h, opDescribe, resTopic, t.Topic)
					})
			}
			d.TransactionStates = append(d.TransactionStates, denied...)
		}
	case *kmsg.ListTransactionsRequest:
		return nil, func(resp kmsg.Response) {
			l := resp.(*kmsg.ListTransactionsResponse)
			l.TransactionStates = slices.DeleteFunc(l.TransactionStates, func(s kmsg.ListTransactionsResponseTransactionState) bool {
				return !b.may(h, opDescribe, resTxnID, s.TransactionalID)
			})
		}
	case *kmsg.DescribeProducersRequest:
		denied := takeOut(&r.Topics, func(t kmsg.DescribeProducersRequestTopic) int16 {
			return b.refusal(h, opRead, resTopic, t.Topic, topicRefused)
		}, func(t kmsg.DescribeProducersRequestTopic, code int16) kmsg.DescribeProducersResponseTopic {
			rt := kmsg.DescribeProducersResponseTopic{Topic: t.Topic}
			for _, p := range t.Partitions {
				rt.Partitions = append(rt.Partitions, kmsg.DescribeProducersResponseTopicPartition{Partition: p, ErrorCode: code})
			}
			return rt
		})
		return nil, func(resp kmsg.Response) {
			d := resp.(*kmsg.DescribeProducersResponse)
			d.Topics = append(d.Topics, denied...)
		}
	}
	return nil, nil
}

// authorizeFindCoordinator: a group key needs Describe on the group, a
// transactional id Describe on it. A refused key before v4 (one key) is
// answered without the handler, which would create the coordinator's
// topic.
func (b *Broker) authorizeFindCoordinator(h header, r *kmsg.FindCoordinatorRequest) (kmsg.Response, func(kmsg.Response)) {
	code := func(key string) int16 {
		switch r.CoordinatorType {
		case 0:
			return b.refusal(h, opDescribe, resGroup, key, kerr.GroupAuthorizationFailed.Code)
		case 1:
			return b.refusal(h, opDescribe, resTxnID, key, kerr.TransactionalIDAuthorizationFailed.Code)
		}
		return 0
	}
	if r.Version < 4 {
		c := code(r.CoordinatorKey)
		if c == 0 {
			return nil, nil
		}
		resp := r.ResponseKind().(*kmsg.FindCoordinatorResponse)
		resp.ErrorCode, resp.NodeID, resp.Port = c, -1, -1
		return resp, nil
	}
	denied := takeOut(&r.CoordinatorKeys, code, func(k string, c int16) kmsg.FindCoordinatorResponseCoordinator {
		return kmsg.FindCoordinatorResponseCoordinator{Key: k, NodeID: -1, Port: -1, ErrorCode: c}
	})
	return nil, func(resp kmsg.Response) {
		f := resp.(*kmsg.FindCoordinatorResponse)
		f.Coordinators = append(f.Coordinators, denied...)
	}
}

// authorizeOffsetCommit: Read on the group (else every partition is
// GROUP_AUTHORIZATION_FAILED, without the handler), Read on each topic.
func (b *Broker) authorizeOffsetCommit(h header, r *kmsg.OffsetCommitRequest) (kmsg.Response, func(kmsg.Response)) {
	if code := b.refusal(h, opRead, resGroup, r.Group, kerr.GroupAuthorizationFailed.Code); code != 0 {
		return group.RefuseOffsetCommit(r, code), nil
	}
	denied := takeOut(&r.Topics, func(t kmsg.OffsetCommitRequestTopic) int16 {
		return b.refusal(h, opRead, resTopic, t.Topic, topicRefused)
	}, func(t kmsg.OffsetCommitRequestTopic, code int16) kmsg.OffsetCommitResponseTopic {
		rt := kmsg.OffsetCommitResponseTopic{Topic: t.Topic}
		for _, p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, kmsg.OffsetCommitResponseTopicPartition{Partition: p.Partition, ErrorCode: code})
		}
		return rt
	})
	return nil, func(resp kmsg.Response) {
		o := resp.(*kmsg.OffsetCommitResponse)
		o.Topics = append(o.Topics, denied...)
	}
}

// authorizeOffsetFetch: Describe on the group (GROUP_AUTHORIZATION_FAILED,
// per partition before v2), Describe on each topic: asked for by name,
// TOPIC_AUTHORIZATION_FAILED; every topic (nil), the ones it may not
// describe left out.
func (b *Broker) authorizeOffsetFetch(h header, r *kmsg.OffsetFetchRequest) (kmsg.Response, func(kmsg.Response)) {
	deniedTopic := func(t string, parts []int32, code int16) kmsg.OffsetFetchResponseTopic {
		rt := kmsg.OffsetFetchResponseTopic{Topic: t}
		for _, p := range parts {
			rp := kmsg.NewOffsetFetchResponseTopicPartition()
			rp.Partition, rp.Offset, rp.ErrorCode = p, -1, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		return rt
	}
	if !b.may(h, opDescribe, resGroup, r.Group) {
		resp := r.ResponseKind().(*kmsg.OffsetFetchResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		if r.Version < 2 {
			for _, t := range r.Topics {
				resp.Topics = append(resp.Topics, deniedTopic(t.Topic, t.Partitions, kerr.GroupAuthorizationFailed.Code))
			}
		}
		return resp, nil
	}
	if r.Topics == nil {
		return nil, func(resp kmsg.Response) {
			f := resp.(*kmsg.OffsetFetchResponse)
			f.Topics = slices.DeleteFunc(f.Topics, func(t kmsg.OffsetFetchResponseTopic) bool {
				return !b.may(h, opDescribe, resTopic, t.Topic)
			})
		}
	}
	denied := takeOut(&r.Topics, func(t kmsg.OffsetFetchRequestTopic) int16 {
		return b.refusal(h, opDescribe, resTopic, t.Topic, topicRefused)
	}, func(t kmsg.OffsetFetchRequestTopic, code int16) kmsg.OffsetFetchResponseTopic {
		return deniedTopic(t.Topic, t.Partitions, code)
	})
	if r.Topics == nil {
		r.Topics = []kmsg.OffsetFetchRequestTopic{} // none left, which is not "every topic"
	}
	return nil, func(resp kmsg.Response) {
		resp.(*kmsg.OffsetFetchResponse).Topics = append(resp.(*kmsg.OffsetFetchResponse).Topics, denied...)
	}
}

// authorizeAddPartitions: Write on the transactional id (else every
// partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED), Write on each topic;
// with any topic refused nothing is added: the refused are
// TOPIC_AUTHORIZATION_FAILED and the others OPERATION_NOT_ATTEMPTED, as
// Kafka answers.
func (b *Broker) authorizeAddPartitions(h header, r *kmsg.AddPartitionsToTxnRequest) kmsg.Response {
	txnOK := b.may(h, opWrite, resTxnID, r.TransactionalID)
	codes := make([]int16, len(r.Topics))
	refused := !txnOK
	for i, t := range r.Topics {
		switch {
		case !txnOK:
			codes[i] = kerr.TransactionalIDAuthorizationFailed.Code
		case !b.may(h, opWrite, resTopic, t.Topic):
			codes[i], refused = kerr.TopicAuthorizationFailed.Code, true
		default:
			codes[i] = kerr.OperationNotAttempted.Code
		}
	}
	if !refused {
		return nil
	}
	resp := r.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	for i, t := range r.Topics {
		rt := kmsg.AddPartitionsToTxnResponseTopic{Topic: t.Topic}
		for _, p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, kmsg.AddPartitionsToTxnResponseTopicPartition{Partition: p, ErrorCode: codes[i]})
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// authorizeTxnOffsetCommit: Write on the transactional id, Read on the
// group (either refused: every partition, without the handler), Read on
// each topic.
func (b *Broker) authorizeTxnOffsetCommit(h header, r *kmsg.TxnOffsetCommitRequest) (kmsg.Response, func(kmsg.Response)) {
	if code := cmp.Or(b.refusal(h, opWrite, resTxnID, r.TransactionalID, kerr.TransactionalIDAuthorizationFailed.Code),
		b.refusal(h, opRead, resGroup, r.Group, kerr.GroupAuthorizationFailed.Code)); code != 0 {
		return group.RefuseTxnOffsetCommit(r, code), nil
	}
	denied := takeOut(&r.Topics, func(t kmsg.TxnOffsetCommitRequestTopic) int16 {
		return b.refusal(h, opRead, resTopic, t.Topic, topicRefused)
	}, func(t kmsg.TxnOffsetCommitRequestTopic, code int16) kmsg.TxnOffsetCommitResponseTopic {
		rt := kmsg.TxnOffsetCommitResponseTopic{Topic: t.Topic}
		for _, p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, kmsg.TxnOffsetCommitResponseTopicPartition{Partition: p.Partition, ErrorCode: code})
		}
		return rt
	})
	return nil, func(resp kmsg.Response) {
		t := resp.(*kmsg.TxnOffsetCommitResponse)
		t.Topics = append(t.Topics, denied...)
	}
}
