package broker

import (
	"cmp"
	"context"
	"log/slog"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/coordinator/group"
	"github.com/seglog/seglog/coordinator/txn"
)

// Producer ids and transactions: InitProducerId (idempotent and
// transactional producers), AddPartitionsToTxn, AddOffsetsToTxn,
// TxnOffsetCommit and EndTxn answered by coordinator/txn, and the
// transactions' descriptions.

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
		api{key: 22, min: 0, max: 5, handle: onCall(txnsOf, (*txnAPIs).initProducerID), null: nullInitProducerID,
			rule: ruleFor(ruleTxnID, opWrite, (*guard).authorizeInitProducerID)},
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
		api{key: 65, min: 0, max: 0,
			handle: handler(func(b *Broker, _ context.Context, _ header, r *kmsg.DescribeTransactionsRequest) kmsg.Response {
				return b.txns.DescribeTransactions(r)
			}),
			rule: ruleFor(ruleTxnID, opDescribe, (*guard).authorizeDescribeTransactions)},
		api{key: 66, min: 0, max: 1,
			handle: handler(func(b *Broker, _ context.Context, _ header, r *kmsg.ListTransactionsRequest) kmsg.Response {
				return b.txns.ListTransactions(r)
			}),
			rule: ruleFor(ruleTxnID, opDescribe, (*guard).authorizeListTransactions)},
		api{key: 61, min: 0, max: 0, handle: handler((*Broker).describeProducers),
			rule: ruleFor(ruleTopic, opRead, (*guard).authorizeDescribeProducers)},
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

// nullInitProducerID counts producer ids in memory.
func nullInitProducerID(b *Broker, _ header, req kmsg.Request) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	b.null.mu.Lock()
	b.null.pid++
	resp.ProducerID, resp.ProducerEpoch = b.null.pid, 0
	b.null.mu.Unlock()
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

func (a *txnAPIs) initProducerID(_ context.Context, _ header, r *kmsg.InitProducerIDRequest) *kmsg.InitProducerIDResponse {
	resp := r.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if r.TransactionalID != nil {
		return a.txns.InitProducerID(r)
	}
	id, err := a.pids.allocate()
	if err != nil {
		a.logger.Error("allocating a producer id", "err", err)
		resp.ErrorCode = kerr.KafkaStorageError.Code
		return resp
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return resp
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

// describeProducers lists each partition's active producers (their
// writer state), as Kafka does.
func (b *Broker) describeProducers(_ context.Context, _ header, r *kmsg.DescribeProducersRequest) *kmsg.DescribeProducersResponse {
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

// authorizeInitProducerID: Write on the transactional id; an idempotent
// producer needs IdempotentWrite on the cluster or Write on some topic.
func (g *guard) authorizeInitProducerID(h header, r *kmsg.InitProducerIDRequest) (kmsg.Response, func(kmsg.Response)) {
	resp := r.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	switch {
	case r.TransactionalID != nil && !g.may(h, opWrite, resTxnID, *r.TransactionalID):
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return resp, nil
	case r.TransactionalID == nil && !g.mayCluster(h, opIdempotentWrite) && !g.mayAny(h, opWrite, resTopic):
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	return nil, nil
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

// authorizeDescribeTransactions: Describe on each transactional id, and
// only the topics the principal may describe in their partitions.
func (g *guard) authorizeDescribeTransactions(h header, r *kmsg.DescribeTransactionsRequest) (kmsg.Response, func(kmsg.Response)) {
	denied := takeOut(&r.TransactionalIDs, func(id string) int16 {
		return g.refusal(h, opDescribe, resTxnID, id, txnErr)
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
					return !g.may(h, opDescribe, resTopic, t.Topic)
				})
		}
		d.TransactionStates = append(d.TransactionStates, denied...)
	}
}

// authorizeListTransactions: only the transactional ids the principal may
// describe are listed.
func (g *guard) authorizeListTransactions(h header, r *kmsg.ListTransactionsRequest) (kmsg.Response, func(kmsg.Response)) {
	return nil, func(resp kmsg.Response) {
		l := resp.(*kmsg.ListTransactionsResponse)
		l.TransactionStates = slices.DeleteFunc(l.TransactionStates, func(s kmsg.ListTransactionsResponseTransactionState) bool {
			return !g.may(h, opDescribe, resTxnID, s.TransactionalID)
		})
	}
}

// authorizeDescribeProducers: Read on each topic.
func (g *guard) authorizeDescribeProducers(h header, r *kmsg.DescribeProducersRequest) (kmsg.Response, func(kmsg.Response)) {
	denied := takeOut(&r.Topics, func(t kmsg.DescribeProducersRequestTopic) int16 {
		return g.refusal(h, opRead, resTopic, t.Topic, topicRefused)
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
