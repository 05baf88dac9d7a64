package console

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
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
	var ids []string
	missed, err := c.everyBroker(ctx, r, func() kmsg.Request { return kmsg.NewPtrListTransactionsRequest() }, func(resp kmsg.Response) error {
		lt := resp.(*kmsg.ListTransactionsResponse)
		for _, s := range lt.TransactionStates {
			ids = append(ids, s.TransactionalID)
		}
		return kerr.ErrorForCode(lt.ErrorCode)
	})
	if err != nil {
		return "", view{}, err
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	var rows []txnRow
	failed := func(id string, err error) { rows = append(rows, txnRow{ID: id, Error: err.Error()}) }
	nodes, split, err := c.byCoordinator(ctx, r, txnKey, ids, failed)
	if err != nil {
		return "", view{}, err
	}
	now := time.Now()
	for _, node := range nodes {
		req := kmsg.NewPtrDescribeTransactionsRequest()
		req.TransactionalIDs = split[node]
		resp, err := c.requestTo(ctx, r, node, req)
		if err != nil {
			for _, id := range split[node] {
				failed(id, err)
			}
			continue
		}
		for _, d := range resp.(*kmsg.DescribeTransactionsResponse).TransactionStates {
			rows = append(rows, txnRowOf(d, now))
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
	open, err := c.openTxns(ctx, r, rows)
	if err != nil {
		return "", view{}, err
	}
	return "txns", view{Title: "Transactions", Nav: "txns", Data: txnsView{Txns: rows, Open: open}, Warning: missedWarning(missed, "transactions")}, nil
}

// txnRowOf is a coordinator's description of a transaction at now.
func txnRowOf(d kmsg.DescribeTransactionsResponseTransactionState, now time.Time) txnRow {
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
	return row
}

// hangingAfter is how long a partition's open transaction must have been
// quiet before it is called hanging when its coordinator has no such
// transaction open: transaction.max.timeout.ms's default, the bound Kafka's
// kafka-transactions.sh find-hanging uses.
const hangingAfter = 15 * time.Minute

// openTxnRow is a partition's open transaction as the partition has it
// (DescribeProducers): a producer whose transaction started at StartOffset
// and has had no marker yet.
type openTxnRow struct {
	Topic            string
	Partition        int32
	ProducerID       int64
	ProducerEpoch    int32
	CoordinatorEpoch int32
	StartOffset      int64
	LastWrite        time.Time
	Quiet            time.Duration
	// Hanging: quiet for hangingAfter and its coordinator has no open
	// transaction of this producer on this partition: no marker will
	// come, and the partition's last stable offset is held back.
	Hanging bool
}

// txnsView is the transactions page: the coordinators' transactions and
// the partitions' open ones.
type txnsView struct {
	Txns []txnRow
	Open []openTxnRow
}

// openTxns asks every partition's leader (one DescribeProducers a leader)
// for its producers with an open transaction, and marks the hanging ones
// against the coordinators' transactions (none when a coordinator could
// not describe its own: what it has open is unknown).
func (c *Console) openTxns(ctx context.Context, r *http.Request, txns []txnRow) ([]openTxnRow, error) {
	md, err := c.metadata(ctx, r)
	if err != nil {
		return nil, err
	}
	var answers []kmsg.DescribeProducersResponseTopic
	c.toLeaders(ctx, r, described(topicRows(md)), func(part []topicRow) kmsg.Request {
		req := kmsg.NewPtrDescribeProducersRequest()
		for _, t := range part {
			rt := kmsg.NewDescribeProducersRequestTopic()
			rt.Topic, rt.Partitions = t.Name, t.numbers()
			req.Topics = append(req.Topics, rt)
		}
		return req
	}, func(resp kmsg.Response) {
		answers = append(answers, resp.(*kmsg.DescribeProducersResponse).Topics...)
	}, func(string, int32, error) {}) // (a leader that cannot be asked shows none)
	complete := !slices.ContainsFunc(txns, func(x txnRow) bool { return x.Error != "" })
	now := time.Now()
	var rows []openTxnRow
	for _, t := range answers {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				continue
			}
			for _, ap := range p.ActiveProducers {
				if ap.CurrentTxnStartOffset < 0 {
					continue
				}
				row := openTxnRow{Topic: t.Topic, Partition: p.Partition, ProducerID: ap.ProducerID, ProducerEpoch: ap.ProducerEpoch,
					CoordinatorEpoch: ap.CoordinatorEpoch, StartOffset: ap.CurrentTxnStartOffset}
				if ap.LastTimestamp > 0 {
					row.LastWrite = time.UnixMilli(ap.LastTimestamp).UTC()
					row.Quiet = now.Sub(row.LastWrite).Truncate(time.Second)
				}
				known := slices.ContainsFunc(txns, func(x txnRow) bool {
					return x.ProducerID == ap.ProducerID && x.Open() &&
						slices.Contains(x.Partitions, fmt.Sprintf("%s-%d", t.Topic, p.Partition))
				})
				row.Hanging = complete && !known && row.Quiet >= hangingAfter
				rows = append(rows, row)
			}
		}
	}
	slices.SortFunc(rows, func(a, b openTxnRow) int {
		return cmp.Or(cmp.Compare(b.Quiet, a.Quiet), strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return rows, nil
}

func (c *Console) planAbort(r *http.Request) (string, error) {
	for _, f := range []string{"partition", "producer", "epoch", "coordinator_epoch"} {
		if _, err := formInt(r, f, 0, 64); err != nil {
			return "", err
		}
	}
	return fmt.Sprintf("Abort producer %s's open transaction on %s-%s (epoch %s): its records there are left out of "+
		"read-committed reads, and the partition's last stable offset moves past them.",
		r.PostForm.Get("producer"), r.PostForm.Get("topic"), r.PostForm.Get("partition"), r.PostForm.Get("epoch")), nil
}

// abort writes an abort marker for a partition's open transaction
// (WriteTxnMarkers, as kafka-transactions.sh abort does): the cluster
// action ACL is needed.
func (c *Console) abort(ctx context.Context, r *http.Request) (string, string, error) {
	topic := r.PostForm.Get("topic")
	p, _ := formInt(r, "partition", 0, 32)
	pid, _ := formInt(r, "producer", 0, 64)
	epoch, _ := formInt(r, "epoch", 0, 16)
	cepoch, _ := formInt(r, "coordinator_epoch", 0, 32)
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch = pid, int16(epoch), false, int32(cepoch)
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = topic, []int32{int32(p)}
	m.Topics = append(m.Topics, mt)
	req.Markers = append(req.Markers, m)
	leader, err := c.leaderOf(ctx, r, topic, int32(p))
	if err != nil {
		return "", "", err
	}
	resp, err := c.requestTo(ctx, r, leader, req)
	if err != nil {
		return "", "", err
	}
	for _, rm := range resp.(*kmsg.WriteTxnMarkersResponse).Markers {
		for _, t := range rm.Topics {
			for _, rp := range t.Partitions {
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					return "", "", fmt.Errorf("aborting producer %d's transaction on %s-%d: %w", pid, topic, p, err)
				}
			}
		}
	}
	return fmt.Sprintf("Aborted producer %d's transaction on %s-%d.", pid, topic, p), "", nil
}
