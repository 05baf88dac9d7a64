package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// InitProducerId: a producer id and epoch for an idempotent producer
// (the broker's allocator) or a transactional one (its transactional id's
// coordinator, coordinator/txn, which fences its earlier epochs; KIP-360's
// bump of an epoch of a producer that knows its id).

func init() {
	register(api{key: 22, min: 0, max: 5, handle: onCall(txnsOf, (*txnAPIs).initProducerID), null: nullInitProducerID,
		rule: ruleFor(ruleTxnID, opWrite, (*guard).authorizeInitProducerID)})
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

// nullInitProducerID counts producer ids in memory.
func nullInitProducerID(b *Broker, _ header, req kmsg.Request) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	b.null.mu.Lock()
	b.null.pid++
	resp.ProducerID, resp.ProducerEpoch = b.null.pid, 0
	b.null.mu.Unlock()
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
