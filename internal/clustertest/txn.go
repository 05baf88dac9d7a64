package clustertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Txn is one transaction the checker followed.
type Txn struct {
	Values []string
	// Outcome: "commit" and "abort" were acknowledged so; "unknown" ended
	// in an error (a fault in the middle): it must be whole or absent.
	Outcome string
}

// Transact runs one transaction through transactional client cl: n
// records prefix0 … prefix(n-1) to topic (to partitions, in turn, when
// given), ended by a commit or an abort after beforeEnd (if set) has run.
// The outcome the client was told is recorded (unknown when the end
// failed); the error is returned.
func (c *Checker) Transact(ctx context.Context, cl *kgo.Client, topic, prefix string, n int, commit bool, beforeEnd func(), partitions ...int32) error {
	if err := cl.BeginTransaction(); err != nil {
		return err
	}
	tx := &Txn{Outcome: "unknown"}
	acked := map[string]At{}
	var perr error
	for i := range n {
		r := &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "%s%d", prefix, i)}
		if len(partitions) > 0 {
			r.Partition = partitions[i%len(partitions)]
		}
		tx.Values = append(tx.Values, string(r.Value))
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			perr = fmt.Errorf("record %s: %w", r.Value, err)
			break
		}
		acked[string(r.Value)] = At{r.Partition, r.Offset}
	}
	if beforeEnd != nil {
		beforeEnd()
	}
	end := kgo.TryAbort
	if commit && perr == nil {
		end = kgo.TryCommit
	}
	err := cl.EndTransaction(ctx, end)
	switch {
	case err == nil && end == kgo.TryCommit:
		tx.Outcome = "commit"
		c.mu.Lock()
		for v, at := range acked {
			c.acked[v] = at
		}
		c.mu.Unlock()
	case err == nil:
		tx.Outcome = "abort"
	}
	c.mu.Lock()
	c.txns = append(c.txns, tx)
	c.mu.Unlock()
	if perr != nil {
		return perr
	}
	return err
}

// ReadCommitted reads topic's partitions from the start with
// read_committed until it has read the last committed transaction's
// records (which must be written to every partition, after every other
// transaction, so that each partition's earlier transactions are
// settled), and checks: each record of a committed transaction once, at
// the offset it was acknowledged at; no record of an aborted one; an
// unknown one whole or not at all; nothing else.
func (c *Checker) ReadCommitted(t *testing.T, seeds []string, topic string, partitions int32) {
	t.Helper()
	c.mu.Lock()
	txns := append([]*Txn(nil), c.txns...)
	c.mu.Unlock()
	require.NotEmpty(t, txns)
	last := txns[len(txns)-1]
	require.Equal(t, "commit", last.Outcome, "the last transaction, which settles the others, committed")
	of := map[string]*Txn{}
	for _, tx := range txns {
		for _, v := range tx.Values {
			of[v] = tx
		}
	}
	offsets := map[int32]kgo.Offset{}
	for p := range partitions {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchMaxWait(100*time.Millisecond), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	seen := map[string]bool{}
	lastSeen := 0
	for lastSeen < len(last.Values) {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "read %d of the last transaction's %d records", lastSeen, len(last.Values))
		fs.EachRecord(func(r *kgo.Record) {
			v := string(r.Value)
			tx, ok := of[v]
			require.True(t, ok, "a record of no transaction: %s at %d/%d", v, r.Partition, r.Offset)
			require.NotEqual(t, "abort", tx.Outcome, "record %s of an aborted transaction read committed", v)
			require.False(t, seen[v], "record %s read twice", v)
			if tx.Outcome == "commit" {
				require.Equal(t, c.acked[v], At{r.Partition, r.Offset}, "record %s", v)
			}
			seen[v] = true
			if tx == last {
				lastSeen++
			}
		})
	}
	for i, tx := range txns {
		n := 0
		for _, v := range tx.Values {
			if seen[v] {
				n++
			}
		}
		switch tx.Outcome {
		case "commit":
			require.Equal(t, len(tx.Values), n, "transaction %d committed: every record", i)
		case "unknown":
			require.Contains(t, []int{0, len(tx.Values)}, n, "transaction %d (its end failed): whole or nothing", i)
		}
	}
}
