package txn

import (
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/checkpoint"
)

// Info describes a transactional id, for commands and tools.
type Info struct {
	TransactionalID string                      `json:"transactionalId"`
	ProducerID      int64                       `json:"producerId"`
	ProducerEpoch   int16                       `json:"producerEpoch"`
	State           string                      `json:"state"`
	TimeoutMs       int64                       `json:"timeoutMs"`
	StartTimestamp  int64                       `json:"startTimestamp"` // ms, -1 without an open transaction
	LastUpdate      int64                       `json:"lastUpdateTimestamp"`
	Partitions      []checkpoint.TopicPartition `json:"partitions"`
}

func (t *txnMeta) info() Info {
	in := Info{TransactionalID: t.id, ProducerID: t.pid, ProducerEpoch: t.epoch, State: t.state.String(),
		TimeoutMs: t.timeout.Milliseconds(), StartTimestamp: t.start, LastUpdate: t.updated, Partitions: []checkpoint.TopicPartition{}}
	if t.state != kmsg.TransactionStateOngoing && t.state != kmsg.TransactionStatePrepareCommit && t.state != kmsg.TransactionStatePrepareAbort {
		in.StartTimestamp = -1
	}
	for tp := range t.parts {
		in.Partitions = append(in.Partitions, tp)
	}
	slices.SortFunc(in.Partitions, func(a, b checkpoint.TopicPartition) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition - b.Partition)
	})
	return in
}

// Transactions describes every transactional id, by id.
func (c *Coordinator) Transactions() []Info {
	c.mu.Lock()
	all := make([]*txnMeta, 0, len(c.txns))
	for _, t := range c.txns {
		all = append(all, t)
	}
	c.mu.Unlock()
	out := make([]Info, 0, len(all))
	for _, t := range all {
		t.mu.Lock()
		if t.pid >= 0 {
			out = append(out, t.info())
		}
		t.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b Info) int { return strings.Compare(a.TransactionalID, b.TransactionalID) })
	return out
}

// DescribeTransactions describes transactional ids (an unknown one is
// TRANSACTIONAL_ID_NOT_FOUND).
func (c *Coordinator) DescribeTransactions(r *kmsg.DescribeTransactionsRequest) *kmsg.DescribeTransactionsResponse {
	resp := r.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	byID := map[string]Info{}
	for _, in := range c.Transactions() {
		byID[in.TransactionalID] = in
	}
	for _, id := range r.TransactionalIDs {
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID = id
		if st.ErrorCode = c.Owns(id); st.ErrorCode != 0 {
			resp.TransactionStates = append(resp.TransactionStates, st)
			continue
		}
		in, ok := byID[id]
		if !ok {
			st.ErrorCode = kerr.TransactionalIDNotFound.Code
			resp.TransactionStates = append(resp.TransactionStates, st)
			continue
		}
		st.State, st.TimeoutMillis, st.StartTimestamp = in.State, int32(in.TimeoutMs), in.StartTimestamp
		st.ProducerID, st.ProducerEpoch = in.ProducerID, in.ProducerEpoch
		byTopic := map[string][]int32{}
		var topics []string
		for _, tp := range in.Partitions {
			if byTopic[tp.Topic] == nil {
				topics = append(topics, tp.Topic)
			}
			byTopic[tp.Topic] = append(byTopic[tp.Topic], tp.Partition)
		}
		for _, topic := range topics {
			st.Topics = append(st.Topics, kmsg.DescribeTransactionsResponseTransactionStateTopic{Topic: topic, Partitions: byTopic[topic]})
		}
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return resp
}

// ListTransactions lists transactional ids, filtered by state, producer
// id and (v1) how long their transaction has run.
func (c *Coordinator) ListTransactions(r *kmsg.ListTransactionsRequest) *kmsg.ListTransactionsResponse {
	resp := r.ResponseKind().(*kmsg.ListTransactionsResponse)
	known := kmsg.TransactionStateStrings()
	for _, s := range r.StateFilters {
		if !slices.Contains(known, s) {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, s)
		}
	}
	now := c.opts.Now().UnixMilli()
	for _, in := range c.Transactions() {
		switch {
		case len(r.StateFilters) > 0 && !slices.Contains(r.StateFilters, in.State):
		case len(r.ProducerIDFilters) > 0 && !slices.Contains(r.ProducerIDFilters, in.ProducerID):
		case r.GetVersion() >= 1 && r.DurationFilterMillis >= 0 && (in.StartTimestamp < 0 || now-in.StartTimestamp < r.DurationFilterMillis):
		default:
			resp.TransactionStates = append(resp.TransactionStates, kmsg.ListTransactionsResponseTransactionState{
				TransactionalID: in.TransactionalID, ProducerID: in.ProducerID, TransactionState: in.State})
		}
	}
	return resp
}

// Abort aborts a transactional id's open transaction at a new epoch
// (fencing its producer), as kafka-transactions.sh abort does for a
// hanging one. It returns false when none is open.
func (c *Coordinator) Abort(id string) (bool, error) {
	c.mu.Lock()
	t := c.txns[id]
	c.mu.Unlock()
	if t == nil {
		return false, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.state != kmsg.TransactionStateOngoing {
		return false, nil
	}
	if err := c.bumpEpoch(t); err != nil {
		return false, err
	}
	return true, c.end(t, false, false)
}
