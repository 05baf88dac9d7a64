package broker

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// authorizeGroupsAndTxns checks the group and transaction APIs (authorize
// in authz.go has the rest).
func (b *Broker) authorizeGroupsAndTxns(h header, req kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	groupErr := kerr.GroupAuthorizationFailed.Code
	txnErr := kerr.TransactionalIDAuthorizationFailed.Code
	switch r := req.(type) {
	case *kmsg.FindCoordinatorRequest:
		return nil, b.authorizeFindCoordinator(h, r)
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
		return nil, b.authorizeOffsetCommit(h, r)
	case *kmsg.OffsetFetchRequest:
		return b.authorizeOffsetFetch(h, r)
	case *kmsg.OffsetDeleteRequest:
		if !b.may(h, opDelete, resGroup, r.Group) {
			resp := r.ResponseKind().(*kmsg.OffsetDeleteResponse)
			resp.ErrorCode = groupErr
			return resp, nil
		}
		var denied []kmsg.OffsetDeleteResponseTopic
		r.Topics = slices.DeleteFunc(r.Topics, func(t kmsg.OffsetDeleteRequestTopic) bool {
			if b.may(h, opRead, resTopic, t.Topic) {
				return false
			}
			rt := kmsg.OffsetDeleteResponseTopic{Topic: t.Topic}
			for _, p := range t.Partitions {
				rt.Partitions = append(rt.Partitions, kmsg.OffsetDeleteResponseTopicPartition{Partition: p.Partition,
					ErrorCode: kerr.TopicAuthorizationFailed.Code})
			}
			denied = append(denied, rt)
			return true
		})
		return nil, func(resp kmsg.Response) {
			resp.(*kmsg.OffsetDeleteResponse).Topics = append(resp.(*kmsg.OffsetDeleteResponse).Topics, denied...)
		}
	case *kmsg.DescribeGroupsRequest:
		var denied []kmsg.DescribeGroupsResponseGroup
		r.Groups = slices.DeleteFunc(r.Groups, func(g string) bool {
			if b.may(h, opDescribe, resGroup, g) {
				return false
			}
			rg := kmsg.NewDescribeGroupsResponseGroup()
			rg.Group, rg.ErrorCode = g, groupErr
			denied = append(denied, rg)
			return true
		})
		return nil, func(resp kmsg.Response) {
			resp.(*kmsg.DescribeGroupsResponse).Groups = append(resp.(*kmsg.DescribeGroupsResponse).Groups, denied...)
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
		var denied []kmsg.DeleteGroupsResponseGroup
		r.Groups = slices.DeleteFunc(r.Groups, func(g string) bool {
			if b.may(h, opDelete, resGroup, g) {
				return false
			}
			denied = append(denied, kmsg.DeleteGroupsResponseGroup{Group: g, ErrorCode: groupErr})
			return true
		})
		return nil, func(resp kmsg.Response) {
			resp.(*kmsg.DeleteGroupsResponse).Groups = append(resp.(*kmsg.DeleteGroupsResponse).Groups, denied...)
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
		var denied []kmsg.DescribeTransactionsResponseTransactionState
		r.TransactionalIDs = slices.DeleteFunc(r.TransactionalIDs, func(id string) bool {
			if b.may(h, opDescribe, resTxnID, id) {
				return false
			}
			st := kmsg.NewDescribeTransactionsResponseTransactionState()
			st.TransactionalID, st.ErrorCode, st.ProducerID, st.ProducerEpoch = id, txnErr, -1, -1
			denied = append(denied, st)
			return true
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
		var denied []kmsg.DescribeProducersResponseTopic
		r.Topics = slices.DeleteFunc(r.Topics, func(t kmsg.DescribeProducersRequestTopic) bool {
			if b.may(h, opRead, resTopic, t.Topic) {
				return false
			}
			rt := kmsg.DescribeProducersResponseTopic{Topic: t.Topic}
			for _, p := range t.Partitions {
				rt.Partitions = append(rt.Partitions, kmsg.DescribeProducersResponseTopicPartition{Partition: p,
					ErrorCode: kerr.TopicAuthorizationFailed.Code})
			}
			denied = append(denied, rt)
			return true
		})
		return nil, func(resp kmsg.Response) {
			resp.(*kmsg.DescribeProducersResponse).Topics = append(resp.(*kmsg.DescribeProducersResponse).Topics, denied...)
		}
	}
	return nil, nil
}

// authorizeFindCoordinator: a group key needs Describe on the group, a
// transactional id Describe on it.
func (b *Broker) authorizeFindCoordinator(h header, r *kmsg.FindCoordinatorRequest) func(kmsg.Response) {
	code := func(key string) int16 {
		switch r.CoordinatorType {
		case 0:
			if !b.may(h, opDescribe, resGroup, key) {
				return kerr.GroupAuthorizationFailed.Code
			}
		case 1:
			if !b.may(h, opDescribe, resTxnID, key) {
				return kerr.TransactionalIDAuthorizationFailed.Code
			}
		}
		return 0
	}
	if r.Version < 4 {
		c := code(r.CoordinatorKey)
		if c == 0 {
			return nil
		}
		return func(resp kmsg.Response) {
			f := resp.(*kmsg.FindCoordinatorResponse)
			f.ErrorCode, f.NodeID, f.Host, f.Port, f.ErrorMessage = c, -1, "", -1, nil
		}
	}
	var denied []kmsg.FindCoordinatorResponseCoordinator
	r.CoordinatorKeys = slices.DeleteFunc(r.CoordinatorKeys, func(k string) bool {
		c := code(k)
		if c != 0 {
			denied = append(denied, kmsg.FindCoordinatorResponseCoordinator{Key: k, NodeID: -1, Port: -1, ErrorCode: c})
		}
		return c != 0
	})
	return func(resp kmsg.Response) {
		resp.(*kmsg.FindCoordinatorResponse).Coordinators = append(resp.(*kmsg.FindCoordinatorResponse).Coordinators, denied...)
	}
}

// authorizeOffsetCommit: Read on the group (else every partition is
// GROUP_AUTHORIZATION_FAILED: the handler still runs, with no topics, so
// that a commit of nothing answers as before), Read on each topic.
func (b *Broker) authorizeOffsetCommit(h header, r *kmsg.OffsetCommitRequest) func(kmsg.Response) {
	groupOK := b.may(h, opRead, resGroup, r.Group)
	var denied []kmsg.OffsetCommitResponseTopic
	r.Topics = slices.DeleteFunc(r.Topics, func(t kmsg.OffsetCommitRequestTopic) bool {
		code := kerr.GroupAuthorizationFailed.Code
		if groupOK {
			if b.may(h, opRead, resTopic, t.Topic) {
				return false
			}
			code = kerr.TopicAuthorizationFailed.Code
		}
		rt := kmsg.OffsetCommitResponseTopic{Topic: t.Topic}
		for _, p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, kmsg.OffsetCommitResponseTopicPartition{Partition: p.Partition, ErrorCode: code})
		}
		denied = append(denied, rt)
		return true
	})
	return func(resp kmsg.Response) {
		resp.(*kmsg.OffsetCommitResponse).Topics = append(resp.(*kmsg.OffsetCommitResponse).Topics, denied...)
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
	var denied []kmsg.OffsetFetchResponseTopic
	r.Topics = slices.DeleteFunc(r.Topics, func(t kmsg.OffsetFetchRequestTopic) bool {
		if b.may(h, opDescribe, resTopic, t.Topic) {
			return false
		}
		denied = append(denied, deniedTopic(t.Topic, t.Partitions, kerr.TopicAuthorizationFailed.Code))
		return true
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
// group (either refused: every partition), Read on each topic.
func (b *Broker) authorizeTxnOffsetCommit(h header, r *kmsg.TxnOffsetCommitRequest) (kmsg.Response, func(kmsg.Response)) {
	all := int16(0)
	switch {
	case !b.may(h, opWrite, resTxnID, r.TransactionalID):
		all = kerr.TransactionalIDAuthorizationFailed.Code
	case !b.may(h, opRead, resGroup, r.Group):
		all = kerr.GroupAuthorizationFailed.Code
	}
	var denied []kmsg.TxnOffsetCommitResponseTopic
	r.Topics = slices.DeleteFunc(r.Topics, func(t kmsg.TxnOffsetCommitRequestTopic) bool {
		code := all
		if code == 0 {
			if b.may(h, opRead, resTopic, t.Topic) {
				return false
			}
			code = kerr.TopicAuthorizationFailed.Code
		}
		rt := kmsg.TxnOffsetCommitResponseTopic{Topic: t.Topic}
		for _, p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, kmsg.TxnOffsetCommitResponseTopicPartition{Partition: p.Partition, ErrorCode: code})
		}
		denied = append(denied, rt)
		return true
	})
	if all != 0 {
		resp := r.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
		resp.Topics = denied
		return resp, nil
	}
	return nil, func(resp kmsg.Response) {
		resp.(*kmsg.TxnOffsetCommitResponse).Topics = append(resp.(*kmsg.TxnOffsetCommitResponse).Topics, denied...)
	}
}
