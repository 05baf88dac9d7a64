package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/coordinator/txn"
	"github.com/seglog/seglog/tablet"
)

func newTransactionsCmd() *cobra.Command {
	var (
		dataDir               string
		list, describe, abort bool
		producers             bool
		id, topic             string
		partition             int32
		startOffset           int64
		asJSON                bool
		client                clientFlags
	)
	cmd := &cobra.Command{
		Use:   "transactions (--data-dir D | --bootstrap-server H:P) (--list | --describe --transactional-id ID | --abort --transactional-id ID | --abort --topic T --partition P --start-offset O | --describe-producers --topic T --partition P)",
		Short: "List and describe transactions, abort a hanging one, like kafka-transactions.sh",
		Long: `transactions reads the transaction state a broker keeps in the data directory's
__transaction_state (seglog serve writes it there, in Kafka's record format):

  --list                                  every transactional id: producer id, epoch, state,
                                          how long its open transaction has run
  --describe --transactional-id ID        one, with its transaction's partitions
  --abort --transactional-id ID           abort its open transaction (ABORT markers written to
                                          its partitions at a new epoch: its producer is fenced)
  --abort --topic T --partition P --start-offset O
                                          (--bootstrap-server only) abort the hanging
                                          transaction that began at offset O of the partition:
                                          its producer's ABORT marker written there
                                          (WriteTxnMarkers to the partition's leader), as
                                          kafka-transactions.sh abort does for a transaction
                                          its coordinator no longer knows
  --describe-producers --topic T --partition P
                                          the partition's active producers (writer state)

With --data-dir it opens the data directory itself, so a broker must not be
serving it (list and describe take a shared lock and change nothing; abort
takes the writer's). With --bootstrap-server (and --command-config) it asks
a running broker instead: --list and --describe (DescribeTransactions),
--describe-producers (DescribeProducers), and --abort, which does what a
new producer with the transactional id does as it starts (InitProducerId):
the open transaction is aborted at a new epoch, fencing its producer.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			n := 0
			for _, b := range []bool{list, describe, abort, producers} {
				if b {
					n++
				}
			}
			if n != 1 {
				return errors.New("give one of --list, --describe, --abort, --describe-producers")
			}
			if client.bootstrap != "" {
				if dataDir != "" {
					return errors.New("give --data-dir or --bootstrap-server, not both")
				}
				if describe && id == "" {
					return errors.New("--transactional-id is required")
				}
				c, err := client.dial()
				if err != nil {
					return err
				}
				defer c.close()
				switch {
				case producers:
					return remoteProducers(cmd, c, checkpoint.TopicPartition{Topic: topic, Partition: partition}, asJSON)
				case abort && topic != "":
					return remoteAbortPartition(cmd, c, checkpoint.TopicPartition{Topic: topic, Partition: partition}, startOffset)
				case abort:
					return remoteAbort(cmd, c, id)
				}
				infos, err := remoteTransactions(c, id)
				if err != nil {
					return err
				}
				if list {
					return printTxnList(cmd.OutOrStdout(), infos, asJSON)
				}
				return printTxnDescribe(cmd.OutOrStdout(), infos[0], asJSON)
			}
			if abort && topic != "" {
				return errors.New("--abort --topic needs --bootstrap-server (a running broker writes the marker)")
			}
			a := readOnly
			if abort {
				a = write
			}
			m, err := openManager(cmd, dataDir, a)
			if err != nil {
				return err
			}
			defer func() { err = errors.Join(err, m.Close()) }()
			if producers {
				return describeProducers(cmd, m.Get, checkpoint.TopicPartition{Topic: topic, Partition: partition}, asJSON)
			}
			opened := time.Now().UnixMilli()
			c, err := txn.New(m, txn.Options{ReadOnly: a == readOnly, Logger: quietLogger(cmd),
				AllocateProducerID: func() (int64, error) {
					return 0, errors.New("the producer's epoch is exhausted: abort through the broker")
				}})
			if err != nil {
				return err
			}
			defer func() { err = errors.Join(err, c.Close()) }()
			out := cmd.OutOrStdout()
			switch {
			case list:
				return printTxnList(out, c.Transactions(), asJSON)
			case describe:
				in, err := findTxn(c, id)
				if err != nil {
					return err
				}
				return printTxnDescribe(out, in, asJSON)
			default:
				if _, err := findTxn(c, id); err != nil {
					return err
				}
				aborted, err := c.Abort(id)
				if err != nil {
					return err
				}
				if !aborted {
					// Opening the directory may have aborted it already: a
					// transaction past its timeout is aborted by the
					// coordinator as it loads.
					if in, err := findTxn(c, id); err == nil && (in.State == "PrepareAbort" || in.State == "CompleteAbort") &&
						in.LastUpdate >= opened {
						fmt.Fprintf(out, "aborted the open transaction of %q (it had passed its timeout: aborted as the directory opened)\n", id)
						return nil
					}
					return fmt.Errorf("transactional id %q has no open transaction", id)
				}
				fmt.Fprintf(out, "aborted the open transaction of %q\n", id)
				return nil
			}
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&dataDir, "data-dir", "", "the data directory")
	client.add(cmd)
	fl.BoolVar(&list, "list", false, "list the transactional ids")
	fl.BoolVar(&describe, "describe", false, "describe one transactional id")
	fl.BoolVar(&abort, "abort", false, "abort a transactional id's open transaction")
	fl.BoolVar(&producers, "describe-producers", false, "a partition's active producers")
	fl.StringVar(&id, "transactional-id", "", "the transactional id")
	fl.StringVar(&topic, "topic", "", "with --describe-producers: the topic")
	fl.Int32Var(&partition, "partition", 0, "with --describe-producers or --abort --topic: the partition")
	fl.Int64Var(&startOffset, "start-offset", -1, "with --abort --topic: the offset where the hanging transaction began")
	fl.BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func findTxn(c *txn.Coordinator, id string) (txn.Info, error) {
	if id == "" {
		return txn.Info{}, errors.New("--transactional-id is required")
	}
	for _, in := range c.Transactions() {
		if in.TransactionalID == id {
			return in, nil
		}
	}
	return txn.Info{}, fmt.Errorf("no transactional id %q", id)
}

// duration is how long a transaction has been open, "-" if none is.
func duration(in txn.Info) string {
	if in.StartTimestamp < 0 {
		return "-"
	}
	d := time.Since(time.UnixMilli(in.StartTimestamp))
	s := d.Round(time.Millisecond).String()
	if in.State == "Ongoing" && in.TimeoutMs > 0 && d > time.Duration(in.TimeoutMs)*time.Millisecond {
		// Read-only, nothing aborts it; a broker would have.
		s += " (past its timeout: aborted when a broker or --abort opens the directory)"
	}
	return s
}

// describeProducers prints a partition's active producers, like
// kafka-transactions.sh describe-producers.
func describeProducers(cmd *cobra.Command, get func(checkpoint.TopicPartition) (*tablet.Tablet, bool), tp checkpoint.TopicPartition, asJSON bool) error {
	if tp.Topic == "" {
		return errors.New("--topic is required")
	}
	t, ok := get(tp)
	if !ok {
		return fmt.Errorf("%w: %s", tablet.ErrNotFound, tp)
	}
	var rows []producerRow
	for _, e := range t.Producers() {
		rows = append(rows, producerRow{ProducerID: e.ProducerID, ProducerEpoch: e.Epoch, CoordinatorEpoch: e.CoordinatorEpoch,
			LastSequence: e.LastSeq(), LastTimestamp: e.LastTimestamp, CurrentTxnStartOffset: e.CurrentTxnFirstOffset})
	}
	return printProducers(cmd.OutOrStdout(), rows, asJSON)
}

// producerRow is one of a partition's active producers.
type producerRow struct {
	ProducerID            int64 `json:"producerId"`
	ProducerEpoch         int16 `json:"producerEpoch"`
	CoordinatorEpoch      int32 `json:"latestCoordinatorEpoch"`
	LastSequence          int32 `json:"lastSequence"`
	LastTimestamp         int64 `json:"lastTimestamp"`
	CurrentTxnStartOffset int64 `json:"currentTransactionStartOffset"` // -1: none
}

// printProducers prints --describe-producers as kafka-transactions.sh does.
func printProducers(out io.Writer, rows []producerRow, asJSON bool) error {
	if asJSON {
		return printJSON(out, rows)
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "PRODUCER-ID\tPRODUCER-EPOCH\tLATEST-COORDINATOR-EPOCH\tLAST-SEQUENCE\tLAST-TIMESTAMP\tCURRENT-TRANSACTION-START-OFFSET")
	for _, e := range rows {
		start := "None"
		if e.CurrentTxnStartOffset >= 0 {
			start = fmt.Sprint(e.CurrentTxnStartOffset)
		}
		fmt.Fprintf(w, "%d\t%d\t%d\t%d\t%d\t%s\n", e.ProducerID, e.ProducerEpoch, e.CoordinatorEpoch, e.LastSequence, e.LastTimestamp, start)
	}
	return w.Flush()
}

// printTxnList prints --list.
func printTxnList(out io.Writer, infos []txn.Info, asJSON bool) error {
	if asJSON {
		return printJSON(out, infos)
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TRANSACTIONAL-ID\tPRODUCER-ID\tPRODUCER-EPOCH\tSTATE\tDURATION")
	for _, in := range infos {
		fmt.Fprintf(w, "%s\t%d\t%d\t%s\t%s\n", in.TransactionalID, in.ProducerID, in.ProducerEpoch, in.State, duration(in))
	}
	return w.Flush()
}

// printTxnDescribe prints --describe.
func printTxnDescribe(out io.Writer, in txn.Info, asJSON bool) error {
	if asJSON {
		return printJSON(out, in)
	}
	parts := make([]string, len(in.Partitions))
	for i, tp := range in.Partitions {
		parts[i] = tp.String()
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TRANSACTIONAL-ID\tPRODUCER-ID\tPRODUCER-EPOCH\tSTATE\tTIMEOUT-MS\tDURATION\tTOPIC-PARTITIONS")
	fmt.Fprintf(w, "%s\t%d\t%d\t%s\t%d\t%s\t%s\n", in.TransactionalID, in.ProducerID, in.ProducerEpoch, in.State, in.TimeoutMs,
		duration(in), strings.Join(parts, ","))
	return w.Flush()
}

// remoteTransactions describes one transactional id, or every one, through
// a running broker.
func remoteTransactions(c *adminConn, id string) ([]txn.Info, error) {
	var ids []string
	if id != "" {
		ids = []string{id}
	}
	described, err := c.adm.DescribeTransactions(c.ctx, ids...)
	if err != nil && len(described) == 0 {
		return nil, err
	}
	var infos []txn.Info
	for _, d := range described.Sorted() {
		if d.Err != nil {
			if id != "" {
				return nil, fmt.Errorf("transactional id %q: %w", d.TxnID, d.Err)
			}
			continue
		}
		in := txn.Info{TransactionalID: d.TxnID, ProducerID: d.ProducerID, ProducerEpoch: d.ProducerEpoch, State: d.State,
			TimeoutMs: int64(d.TimeoutMillis), StartTimestamp: d.StartTimestamp, Partitions: []checkpoint.TopicPartition{}}
		for _, tps := range d.Topics.Sorted() {
			for _, p := range tps.Partitions {
				in.Partitions = append(in.Partitions, checkpoint.TopicPartition{Topic: tps.Topic, Partition: p})
			}
		}
		infos = append(infos, in)
	}
	if id != "" && len(infos) == 0 {
		return nil, fmt.Errorf("no transactional id %q", id)
	}
	return infos, nil
}

// describedProducers asks the partition's leader for its active
// producers (DescribeProducers).
func describedProducers(c *adminConn, tp checkpoint.TopicPartition) (kadm.DescribedProducersPartition, error) {
	described, err := c.adm.DescribeProducers(c.ctx, kadm.TopicsSet{tp.Topic: {tp.Partition: {}}})
	if err != nil {
		return kadm.DescribedProducersPartition{}, err
	}
	p, ok := described[tp.Topic].Partitions[tp.Partition]
	switch {
	case !ok:
		return p, fmt.Errorf("%w: %s", tablet.ErrNotFound, tp)
	case p.Err != nil:
		return p, fmt.Errorf("%s: %w", tp, p.Err)
	}
	return p, nil
}

// remoteProducers describes a partition's active producers through a
// running broker (DescribeProducers, sent to the partition's leader).
func remoteProducers(cmd *cobra.Command, c *adminConn, tp checkpoint.TopicPartition, asJSON bool) error {
	if tp.Topic == "" {
		return errors.New("--topic is required")
	}
	p, err := describedProducers(c, tp)
	if err != nil {
		return err
	}
	var rows []producerRow
	for _, d := range p.ActiveProducers.Sorted() {
		rows = append(rows, producerRow{ProducerID: d.ProducerID, ProducerEpoch: d.ProducerEpoch, CoordinatorEpoch: d.CoordinatorEpoch,
			LastSequence: d.LastSequence, LastTimestamp: d.LastTimestamp, CurrentTxnStartOffset: d.CurrentTxnStartOffset})
	}
	return printProducers(cmd.OutOrStdout(), rows, asJSON)
}

// remoteAbortPartition aborts the hanging transaction that began at
// offset start of partition tp, as kafka-transactions.sh abort does: the
// producer whose open transaction starts there (DescribeProducers) gets
// an ABORT marker on the partition from its leader (WriteTxnMarkers, at
// the coordinator epoch the partition last took).
func remoteAbortPartition(cmd *cobra.Command, c *adminConn, tp checkpoint.TopicPartition, start int64) error {
	if start < 0 {
		return errors.New("--start-offset is required")
	}
	p, err := describedProducers(c, tp)
	if err != nil {
		return err
	}
	var found *kadm.DescribedProducer
	for _, d := range p.ActiveProducers.Sorted() {
		if d.CurrentTxnStartOffset == start {
			found = &d
		}
	}
	if found == nil {
		return fmt.Errorf("no open transaction of %s begins at offset %d (--describe-producers lists them)", tp, start)
	}
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.Markers = []kmsg.WriteTxnMarkersRequestMarker{{ProducerID: found.ProducerID, ProducerEpoch: found.ProducerEpoch,
		Committed: false, CoordinatorEpoch: max(found.CoordinatorEpoch, 0),
		Topics: []kmsg.WriteTxnMarkersRequestMarkerTopic{{Topic: tp.Topic, Partitions: []int32{tp.Partition}}}}}
	md, err := c.adm.Metadata(c.ctx, tp.Topic)
	if err != nil {
		return err
	}
	mp, ok := md.Topics[tp.Topic].Partitions[tp.Partition]
	if !ok || mp.Leader < 0 {
		return fmt.Errorf("%s has no leader now", tp)
	}
	kresp, err := c.cl.Broker(int(mp.Leader)).Request(c.ctx, req)
	if err != nil {
		return err
	}
	resp := kresp.(*kmsg.WriteTxnMarkersResponse)
	for _, m := range resp.Markers {
		for _, t := range m.Topics {
			for _, rp := range t.Partitions {
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					return fmt.Errorf("aborting the transaction of producer %d on %s: %w", found.ProducerID, tp, err)
				}
			}
		}
	}
	fmt.Fprintf(cmd.OutOrStdout(), "aborted the transaction of producer %d (epoch %d) that began at offset %d of %s\n",
		found.ProducerID, found.ProducerEpoch, start, tp)
	return nil
}

// remoteAbort aborts a transactional id's open transaction through a
// running broker the way a new producer with that id does as it starts:
// InitProducerId makes the coordinator abort the open transaction at a new
// epoch (the old producer is fenced), and answers once the markers are
// written. It keeps the transaction timeout the id had.
func remoteAbort(cmd *cobra.Command, c *adminConn, id string) error {
	if id == "" {
		return errors.New("--transactional-id is required")
	}
	infos, err := remoteTransactions(c, id)
	if err != nil {
		return err
	}
	if infos[0].State != "Ongoing" {
		return fmt.Errorf("transactional id %q has no open transaction (it is %s)", id, infos[0].State)
	}
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID = &id
	req.TransactionTimeoutMillis = int32(infos[0].TimeoutMs)
	req.ProducerID, req.ProducerEpoch = -1, -1
	for {
		resp, err := req.RequestWith(c.ctx, c.cl)
		if err != nil {
			return err
		}
		switch err := kerr.ErrorForCode(resp.ErrorCode); {
		case err == nil:
			fmt.Fprintf(cmd.OutOrStdout(), "aborted the open transaction of %q (its producer is fenced: epoch %d now)\n", id, resp.ProducerEpoch)
			return nil
		case errors.Is(err, kerr.ConcurrentTransactions):
			// The transaction is completing on its own; InitProducerId
			// answers once it has. kgo retries this for a producer too.
			select {
			case <-c.ctx.Done():
				return fmt.Errorf("transactional id %q: %w", id, err)
			case <-time.After(20 * time.Millisecond):
			}
		default:
			return fmt.Errorf("aborting the transaction of %q: %w", id, err)
		}
	}
}
