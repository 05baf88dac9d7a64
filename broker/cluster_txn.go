package broker

import (
	"cmp"
	"context"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/cluster"
	"github.com/seglog/seglog/coordinator/txn"
)

// Transactions in a cluster: a transactional id's coordinator is the
// leader of its __transaction_state partition; it writes its markers to
// the leaders of the transaction's partitions (WriteTxnMarkers), and a
// partition's leader has a transactional produce verified (or, for
// transactions v2, added) by the coordinator (AddPartitionsToTxn v4+,
// KIP-890).

// clusterTxnHooks make the transaction coordinator a cluster's:
// __transaction_state is a cluster topic
// (transaction.state.log.num.partitions, replicated
// transaction.state.log.replication.factor times, or once per broker when
// there are fewer), whose partitions' leaders coordinate their
// transactional ids.
func clusterTxnHooks(c *ClusterOptions, topts txn.Options, markers *clusterMarkers) *txn.ClusterHooks {
	partitions := cmp.Or(topts.Partitions, 50)
	segmentBytes := cmp.Or(topts.SegmentBytes, 104857600)
	it := internalTopic{c: c, topic: txn.Topic}
	return &txn.ClusterHooks{WriteMarkers: markers.write, Hooks: txn.Hooks{Tablet: it.tablet, Replicated: it.replicated, Partitions: it.partitions, Elected: it.elected,
		Leased: c.Member.Leased,
		Ensure: func() error {
			return ensureInternalTopic(c, txn.Topic, partitions, c.TransactionsReplicationFactor, cmp.Or(c.TransactionsMinISR, 2),
				map[string]string{"cleanup.policy": "compact", "segment.bytes": strconv.FormatInt(segmentBytes, 10),
					"retention.ms": "-1", "retention.bytes": "-1"})
		},
	}}
}

// verifyTxn has partitions tps checked (add: added, for a transactions-v2
// producer) in the open transaction of transactional id id's producer pid
// at epoch, by the id's coordinator: this broker's, or in a cluster the
// coordinator's broker through AddPartitionsToTxn v5 (KIP-890, as
// Kafka's partition leader asks it). It returns each partition's code,
// as the coordinator answered it (PRODUCER_FENCED from another broker
// INVALID_PRODUCER_EPOCH, as Kafka's AddPartitionsToTxnManager).
func (b *Broker) verifyTxn(ctx context.Context, id string, pid int64, epoch int16, tps []checkpoint.TopicPartition, add bool) []int16 {
	codes := make([]int16, len(tps))
	verify := b.txns.Verify
	if add {
		verify = b.txns.VerifyOrAdd
	}
	remote := false
	for i, tp := range tps {
		codes[i] = verify(id, pid, epoch, tp)
		remote = remote || codes[i] == kerr.NotCoordinator.Code
	}
	if !remote || id == "" {
		return codes
	}
	fill := func(code int16) []int16 {
		for i := range codes {
			codes[i] = code
		}
		return codes
	}
	st, ok := b.cat.partition(txn.Topic, b.txns.PartitionFor(id))
	if !ok || st.Leader == cluster.NoLeader || st.Leader == b.opts.NodeID {
		return fill(kerr.CoordinatorNotAvailable.Code) // (here: not loaded yet, or moving)
	}
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.SetVersion(5)
	tr := kmsg.AddPartitionsToTxnRequestTransaction{TransactionalID: id, ProducerID: pid, ProducerEpoch: epoch, VerifyOnly: !add}
	for _, tp := range tps {
		if n := len(tr.Topics); n == 0 || tr.Topics[n-1].Topic != tp.Topic {
			tr.Topics = append(tr.Topics, kmsg.AddPartitionsToTxnRequestTransactionTopic{Topic: tp.Topic})
		}
		last := &tr.Topics[len(tr.Topics)-1]
		last.Partitions = append(last.Partitions, tp.Partition)
	}
	req.Transactions = []kmsg.AddPartitionsToTxnRequestTransaction{tr}
	kresp, err := b.replicas.Send(ctx, st.Leader, req)
	if err != nil {
		b.opts.Logger.Warn("verifying a transaction at its coordinator", "transactional_id", id, "coordinator", st.Leader, "err", err)
		return fill(kerr.NetworkException.Code)
	}
	resp := kresp.(*kmsg.AddPartitionsToTxnResponse)
	if resp.ErrorCode != 0 {
		if resp.ErrorCode == kerr.ClusterAuthorizationFailed.Code {
			return fill(kerr.InvalidTxnState.Code) // (not the client's to see, as Kafka)
		}
		return fill(resp.ErrorCode)
	}
	got := map[checkpoint.TopicPartition]int16{}
	for _, rt := range resp.Transactions {
		for _, t := range rt.Topics {
			for _, p := range t.Partitions {
				got[checkpoint.TopicPartition{Topic: t.Topic, Partition: p.Partition}] = p.ErrorCode
			}
		}
	}
	for i, tp := range tps {
		code, ok := got[tp]
		switch {
		case !ok:
			code = kerr.UnknownServerError.Code
		case code == kerr.ProducerFenced.Code:
			code = kerr.InvalidProducerEpoch.Code
		}
		codes[i] = code
	}
	return codes
}

// produceVerifyCode is the code a produce gets for a verification that
// failed: a retriable failure to verify is NOT_ENOUGH_REPLICAS, which
// every client retries without a metadata refresh (Kafka's choice).
func produceVerifyCode(code int16) int16 {
	switch code {
	case kerr.ConcurrentTransactions.Code, kerr.NetworkException.Code, kerr.CoordinatorLoadInProgress.Code,
		kerr.CoordinatorNotAvailable.Code, kerr.NotCoordinator.Code:
		return kerr.NotEnoughReplicas.Code
	}
	return code
}
