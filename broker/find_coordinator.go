package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/cluster"
	"github.com/seglog/seglog/coordinator/group"
	"github.com/seglog/seglog/coordinator/txn"
)

// FindCoordinator: a group's or a transactional id's coordinator is the
// leader of the key's partition of the coordinator's internal topic
// (__consumer_offsets, __transaction_state), which is created at the first
// request. Versions as Kafka 4.1's: v4+ asks for a batch of keys; v6's
// share groups (key type 2) are INVALID_REQUEST.

func init() {
	register(api{key: 10, min: 0, max: 6, handle: handler((*Broker).findCoordinator),
		rule: ruleFor(ruleGroup, opDescribe, (*guard).authorizeFindCoordinator)})
}

// findCoordinator names the coordinator of each key (one before v4, a
// batch from v4) — the leader of its partition of the coordinator's
// internal topic — creating that topic on first use.
func (b *Broker) findCoordinator(_ context.Context, h header, r *kmsg.FindCoordinatorRequest) *kmsg.FindCoordinatorResponse {
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
			p := group.PartitionFor(key, b.groups.Partitions())
			if r.CoordinatorType == 1 {
				p = b.txns.PartitionFor(key)
			}
			b.coordinatorOf(h, topic, p, &co)
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

// coordinatorOf names the coordinator of a key in a cluster: the leader
// of partition p of the coordinator's internal topic
// (COORDINATOR_NOT_AVAILABLE while it has none, or its leader has no
// endpoint on the client's listener).
func (b *Broker) coordinatorOf(h header, topic string, p int32, co *kmsg.FindCoordinatorResponseCoordinator) {
	st, ok := b.cat.partition(topic, p)
	if !ok || st.Leader == cluster.NoLeader || st.Leader == b.opts.NodeID && !b.cat.leased() {
		co.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return
	}
	for _, mb := range b.cat.brokers(h, nil) {
		if mb.NodeID == st.Leader {
			co.NodeID, co.Host, co.Port = mb.NodeID, mb.Host, mb.Port
			return
		}
	}
	co.ErrorCode = kerr.CoordinatorNotAvailable.Code
}

// authorizeFindCoordinator: a group key needs Describe on the group, a
// transactional id Describe on it. A refused key before v4 (one key) is
// answered without the handler, which would create the coordinator's
// topic.
func (g *guard) authorizeFindCoordinator(h header, r *kmsg.FindCoordinatorRequest) (kmsg.Response, func(kmsg.Response)) {
	code := func(key string) int16 {
		switch r.CoordinatorType {
		case 0:
			return g.refusal(h, opDescribe, resGroup, key, kerr.GroupAuthorizationFailed.Code)
		case 1:
			return g.refusal(h, opDescribe, resTxnID, key, kerr.TransactionalIDAuthorizationFailed.Code)
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
