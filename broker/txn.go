package broker

import (
	"cmp"
	"context"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/coordinator/group"
	"github.com/seglog/seglog/coordinator/txn"
)

// A transaction's APIs: AddPartitionsToTxn, AddOffsetsToTxn,
// TxnOffsetCommit and EndTxn, answered by coordinator/txn (its producer id
// is InitProducerId's: init_producer_id.go; its descriptions
// txn_admin.go).

// txnAPIs are the transaction coordinator's APIs as the broker answers
// them: the coordinator (coordinator/txn), the producer ids, the group
// APIs (a transaction's offsets go to its group's coordinator), and the
// verification of a transaction's partitions (at the coordinator's broker
// in a cluster, the broker's verifyTxn). They hold nothing else of the
// broker.
type txnAPIs struct {
	txns   *txn.Coordinator
	pids   *producerIDs
	grp    *groupAPIs
	verify func(ctx context.Context, id string, pid int64, epoch int16, tps []checkpoint.TopicPartition, add bool) []int16
	logger *slog.Logger
}

func init() {
	register(
		api{key: 24, min: 0, max: 5, handle: onCall(txnsOf, (*txnAPIs).addPartitionsToTxn),
			rule: ruleFor(ruleTxnID, opWrite, (*guard).authorizeAddPartitionsToTxn)},
		api{key: 25, min: 0, max: 4, handle: onCall(txnsOf, (*txnAPIs).addOffsetsToTxn),
			rule: ruleFor(ruleTxnID, opWrite, (*guard).authorizeAddOffsetsToTxn)},
		api{key: 26, min: 0, max: 5,
			handle: handler(func(b *Broker, _ context.Context, _ header, r *kmsg.EndTxnRequest) kmsg.Response {
				return b.txns.EndTxn(r)
			}),
			rule: ruleFor(ruleTxnID, opWrite, (*guard).authorizeEndTxn)},
		api{key: 28, min: 0, max: 5, handle: onCall(txnsOf, (*txnAPIs).txnOffsetCommit),
			rule: ruleFor(ruleTxnID, opWrite, (*guard).authorizeTxnOffsetCommit)},
	)
}

// addPartitionsToTxn adds partitions to a transaction (v0–3, a
// producer's), or, from v4, to several (a broker's batch, which may only
// verify that each partition is in its transaction already: KIP-890).
func (a *txnAPIs) addPartitionsToTxn(_ context.Context, _ header, r *kmsg.AddPartitionsToTxnRequest) kmsg.Response {
	if r.GetVersion() < 4 {
		return a.txns.AddPartitionsToTxn(r)
	}
	resp := r.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	for _, t := range r.Transactions {
		rt := kmsg.AddPartitionsToTxnResponseTransaction{TransactionalID: t.TransactionalID}
		add := func(topic string, p int32, code int16) {
			if n := len(rt.Topics); n == 0 || rt.Topics[n-1].Topic != topic {
				rt.Topics = append(rt.Topics, kmsg.AddPartitionsToTxnResponseTransactionTopic{Topic: topic})
			}
			last := &rt.Topics[len(rt.Topics)-1]
			last.Partitions = append(last.Partitions, kmsg.AddPartitionsToTxnResponseTransactionTopicPartition{Partition: p, ErrorCode: code})
		}
		if t.VerifyOnly {
			for _, tt := range t.Topics {
				for _, p := range tt.Partitions {
					add(tt.Topic, p, a.txns.Verify(t.TransactionalID, t.ProducerID, t.ProducerEpoch, checkpoint.TopicPartition{Topic: tt.Topic, Partition: p}))
				}
			}
		} else {
			one := kmsg.NewPtrAddPartitionsToTxnRequest()
			one.SetVersion(3)
			one.TransactionalID, one.ProducerID, one.ProducerEpoch = t.TransactionalID, t.ProducerID, t.ProducerEpoch
			for _, tt := range t.Topics {
				one.Topics = append(one.Topics, kmsg.AddPartitionsToTxnRequestTopic{Topic: tt.Topic, Partitions: tt.Partitions})
			}
			for _, st := range a.txns.AddPartitionsToTxn(one).Topics {
				for _, p := range st.Partitions {
					add(st.Topic, p.Partition, p.ErrorCode)
				}
			}
		}
		resp.Transactions = append(resp.Transactions, rt)
	}
	return resp
}

// addOffsetsToTxn adds the group's __consumer_offsets partition to the
// transaction (its marker goes there).
func (a *txnAPIs) addOffsetsToTxn(_ context.Context, _ header, r *kmsg.AddOffsetsToTxnRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	if err := a.grp.groups.Ensure(); err != nil {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp
	}
	return a.txns.AddOffsetsToTxn(r, a.grp.offsetsPartition(r.Group))
}

// txnOffsetCommit commits a transaction's offsets, pending until it ends;
// the transaction must have added the group (AddOffsetsToTxn).
// In a cluster the group's coordinator asks the transaction's (KIP-890).
func (a *txnAPIs) txnOffsetCommit(ctx context.Context, _ header, r *kmsg.TxnOffsetCommitRequest) kmsg.Response {
	if code := a.grp.groups.Owns(r.Group); code != 0 {
		return group.RefuseTxnOffsetCommit(r, code)
	}
	// Transactions v2 (v5+): no AddOffsetsToTxn before it, the commit adds
	// the group's partition.
	tps := []checkpoint.TopicPartition{a.grp.offsetsPartition(r.Group)}
	if code := a.verify(ctx, r.TransactionalID, r.ProducerID, r.ProducerEpoch, tps, r.GetVersion() >= 5)[0]; code != 0 {
		return group.RefuseTxnOffsetCommit(r, code)
	}
	return a.grp.groups.TxnOffsetCommit(r)
}

// authorizeAddPartitionsToTxn: Write on the transactional id (else every
// partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED), Write on each topic;
// with any topic refused nothing is added: the refused are
// TOPIC_AUTHORIZATION_FAILED and the others OPERATION_NOT_ATTEMPTED, as
// Kafka answers.
// From v4 (a broker's batch) it is ClusterAction on the cluster instead.
func (g *guard) authorizeAddPartitionsToTxn(h header, r *kmsg.AddPartitionsToTxnRequest) (kmsg.Response, func(kmsg.Response)) {
	if r.GetVersion() >= 4 {
		// A broker's request: ClusterAction on the cluster, as Kafka's.
		if !g.mayCluster(h, kmsg.ACLOperationClusterAction) {
			resp := r.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
			resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
			return resp, nil
		}
		return nil, nil
	}
	txnOK := g.may(h, opWrite, resTxnID, r.TransactionalID)
	codes := make([]int16, len(r.Topics))
	refused := !txnOK
	for i, t := range r.Topics {
		switch {
		case !txnOK:
			codes[i] = kerr.TransactionalIDAuthorizationFailed.Code
		case !g.may(h, opWrite, resTopic, t.Topic):
			codes[i], refused = kerr.TopicAuthorizationFailed.Code, true
		default:
			codes[i] = kerr.OperationNotAttempted.Code
		}
	}
	if !refused {
		return nil, nil
	}
	resp := r.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	for i, t := range r.Topics {
		rt := kmsg.AddPartitionsToTxnResponseTopic{Topic: t.Topic}
		for _, p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, kmsg.AddPartitionsToTxnResponseTopicPartition{Partition: p, ErrorCode: codes[i]})
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// authorizeTxnOffsetCommit: Write on the transactional id, Read on the
// group (either refused: every partition, without the handler), Read on
// each topic.
func (g *guard) authorizeTxnOffsetCommit(h header, r *kmsg.TxnOffsetCommitRequest) (kmsg.Response, func(kmsg.Response)) {
	if code := cmp.Or(g.refusal(h, opWrite, resTxnID, r.TransactionalID, kerr.TransactionalIDAuthorizationFailed.Code),
		g.refusal(h, opRead, resGroup, r.Group, kerr.GroupAuthorizationFailed.Code)); code != 0 {
		return group.RefuseTxnOffsetCommit(r, code), nil
	}
	denied := takeOut(&r.Topics, func(t kmsg.TxnOffsetCommitRequestTopic) int16 {
		return g.refusal(h, opRead, resTopic, t.Topic, topicRefused)
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

// authorizeAddOffsetsToTxn: Write on the transactional id, Read on the
// group.
func (g *guard) authorizeAddOffsetsToTxn(h header, r *kmsg.AddOffsetsToTxnRequest) (kmsg.Response, func(kmsg.Response)) {
	resp := r.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	switch {
	case !g.may(h, opWrite, resTxnID, r.TransactionalID):
		resp.ErrorCode = txnErr
		return resp, nil
	case !g.may(h, opRead, resGroup, r.Group):
		resp.ErrorCode = groupErr
		return resp, nil
	}
	return nil, nil
}

// authorizeEndTxn: Write on the transactional id.
func (g *guard) authorizeEndTxn(h header, r *kmsg.EndTxnRequest) (kmsg.Response, func(kmsg.Response)) {
	if !g.may(h, opWrite, resTxnID, r.TransactionalID) {
		resp := r.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = txnErr
		return resp, nil
	}
	return nil, nil
}
