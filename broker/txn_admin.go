package broker

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The transactions' and producers' descriptions: DescribeTransactions
// and ListTransactions (coordinator/txn's state), DescribeProducers (a
// partition leader's producer state: kafka-transactions.sh finds hanging
// transactions with it).

func init() {
	register(
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

// describeProducers lists each partition's active producers (their
// writer state) as its leader knows them: another broker answers
// NOT_LEADER_OR_FOLLOWER (Kafka's; the admin client asks the leader).
func (b *Broker) describeProducers(_ context.Context, _ header, r *kmsg.DescribeProducersRequest) *kmsg.DescribeProducersResponse {
	resp := r.ResponseKind().(*kmsg.DescribeProducersResponse)
	for _, rt := range r.Topics {
		st := kmsg.DescribeProducersResponseTopic{Topic: rt.Topic}
		for _, p := range rt.Partitions {
			sp := kmsg.NewDescribeProducersResponseTopicPartition()
			sp.Partition = p
			r, code := b.leaderReplica(rt.Topic, p, -1, false)
			if code != 0 {
				sp.ErrorCode = code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			for _, e := range r.Tablet().Producers() {
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
