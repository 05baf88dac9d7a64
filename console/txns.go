package console

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// txnRow is a transactional id's transaction as its coordinator has it.
type txnRow struct {
	ID            string
	State         string
	ProducerID    int64
	ProducerEpoch int16
	Timeout       time.Duration
	Age           time.Duration // since the transaction started; 0 when none runs
	Partitions    []string
	Error         string
}

// Open reports a transaction in progress (its markers not all written).
func (t txnRow) Open() bool {
	return t.State == "Ongoing" || t.State == "PrepareCommit" || t.State == "PrepareAbort"
}

// Hanging reports an open transaction past its timeout: its coordinator
// should have aborted it.
func (t txnRow) Hanging() bool { return t.Open() && t.Timeout > 0 && t.Age > t.Timeout }

func (c *Console) txns(ctx context.Context, r *http.Request) (string, view, error) {
	resp, err := c.b.Request(ctx, c.caller(r), kmsg.NewPtrListTransactionsRequest())
	if err != nil {
		return "", view{}, err
	}
	lt := resp.(*kmsg.ListTransactionsResponse)
	if err := kerr.ErrorForCode(lt.ErrorCode); err != nil {
		return "", view{}, err
	}
	req := kmsg.NewPtrDescribeTransactionsRequest()
	for _, s := range lt.TransactionStates {
		req.TransactionalIDs = append(req.TransactionalIDs, s.TransactionalID)
	}
	var rows []txnRow
	if len(req.TransactionalIDs) > 0 {
		resp, err := c.b.Request(ctx, c.caller(r), req)
		if err != nil {
			return "", view{}, err
		}
		now := time.Now()
		for _, d := range resp.(*kmsg.DescribeTransactionsResponse).TransactionStates {
			row := txnRow{ID: d.TransactionalID, State: d.State, ProducerID: d.ProducerID, ProducerEpoch: d.ProducerEpoch,
				Timeout: time.Duration(d.TimeoutMillis) * time.Millisecond}
			if err := kerr.ErrorForCode(d.ErrorCode); err != nil {
				row.Error = err.Error()
			}
			if d.StartTimestamp > 0 && row.Open() {
				row.Age = now.Sub(time.UnixMilli(d.StartTimestamp)).Truncate(time.Second)
			}
			for _, t := range d.Topics {
				for _, p := range t.Partitions {
					row.Partitions = append(row.Partitions, fmt.Sprintf("%s-%d", t.Topic, p))
				}
			}
			rows = append(rows, row)
		}
	}
	// Open ones first, the oldest first; then the rest by id.
	slices.SortFunc(rows, func(a, b txnRow) int {
		if a.Open() != b.Open() {
			if a.Open() {
				return -1
			}
			return 1
		}
		return cmp.Or(cmp.Compare(b.Age, a.Age), cmp.Compare(a.ID, b.ID))
	})
	return "txns", view{Title: "Transactions", Nav: "txns", Data: rows}, nil
}
