package broker

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/seglog/seglog/coordinator/group"
)

// txnProduce runs one transaction of n records on a transactional client
// and ends it.
func txnProduce(t *testing.T, ctx context.Context, cl *kgo.Client, topic, prefix string, n int, commit bool) {
	t.Helper()
	require.NoError(t, cl.BeginTransaction())
	for i := range n {
		cl.Produce(ctx, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "%s%d", prefix, i)}, func(_ *kgo.Record, err error) {
			require.NoError(t, err)
		})
	}
	require.NoError(t, cl.Flush(ctx))
	require.NoError(t, cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)))
}

// readCommitted reads a topic from the start with read_committed until n
// records, failing on any aborted one.
func readCommitted(t *testing.T, ctx context.Context, addr, topic string, n int) []string {
	t.Helper()
	c, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(100*time.Millisecond))
	require.NoError(t, err)
	defer c.Close()
	var got []string
	for len(got) < n {
		fs := c.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "read %d of %d", len(got), n)
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("%s-%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}

// A franz-go transactional producer: committed transactions are read by
// read_committed consumers, aborted ones never; a second producer with the
// same transactional id fences the first, whose transaction is aborted.
func TestFranzGoTransactions(t *testing.T) {
	b, _, addr := testBroker(t, Options{NumPartitions: 2})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID("tx-1"), kgo.AllowAutoTopicCreation(),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	require.NoError(t, err)
	defer p.Close()
	txnProduce(t, ctx, p, "txn", "a", 100, true)
	txnProduce(t, ctx, p, "txn", "x", 50, false)
	txnProduce(t, ctx, p, "txn", "b", 100, true)
	got := readCommitted(t, ctx, addr, "txn", 200)
	require.Len(t, got, 200)
	for _, v := range got {
		require.NotEqual(t, byte('x'), v[0], "an aborted record was read: %s", v)
	}

	// A zombie: the first instance has a transaction open when a second
	// one starts with the same transactional id.
	require.NoError(t, p.BeginTransaction())
	require.NoError(t, p.ProduceSync(ctx, &kgo.Record{Topic: "txn", Value: []byte("zombie")}).FirstErr())
	p2, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID("tx-1"))
	require.NoError(t, err)
	defer p2.Close()
	txnProduce(t, ctx, p2, "txn", "c", 10, true)
	err = p.EndTransaction(ctx, kgo.TryCommit)
	require.Error(t, err, "the zombie is fenced")
	require.True(t, errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch), "%v", err)
	got = readCommitted(t, ctx, addr, "txn", 210)
	require.Len(t, got, 210)
	for _, v := range got {
		require.NotEqual(t, "zombie", v, "the fenced producer's open transaction was aborted")
	}
	st := b.txns.Stats()
	require.Equal(t, int64(3), st.Commits, "a, b and c committed")
	require.Equal(t, int64(2), st.Aborts, "x, and the zombie's open transaction")
}

// Exactly once with franz-go's GroupTransactSession: a consumer group
// copies a topic to another inside transactions, its offsets committed in
// each; the copy read with read_committed holds every input record once,
// and the group's committed offsets are the input's end.
func TestFranzGoExactlyOnceCopy(t *testing.T) {
	_, _, addr := testBroker(t, Options{NumPartitions: 3, Groups: group.Options{NoInitialDelay: true}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const n = 3000
	produceN(t, ctx, addr, "eos-in", 0, n)
	s, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(addr), kgo.TransactionalID("eos-copy"), kgo.ConsumerGroup("eos"),
		kgo.ConsumeTopics("eos-in"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.AllowAutoTopicCreation(), kgo.FetchMaxWait(100*time.Millisecond))
	require.NoError(t, err)
	defer s.Close()
	copied := 0
	for copied < n {
		fs := s.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "copied %d of %d", copied, n)
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("%s-%d: %v", topic, p, err) })
		require.NoError(t, s.Begin())
		var batch int
		fs.EachRecord(func(r *kgo.Record) {
			batch++
			s.Produce(ctx, &kgo.Record{Topic: "eos-out", Value: r.Value}, nil)
		})
		committed, err := s.End(ctx, kgo.TryCommit)
		require.NoError(t, err)
		if committed {
			copied += batch
		}
	}
	got := readCommitted(t, ctx, addr, "eos-out", n)
	seen := map[string]bool{}
	for _, v := range got {
		require.False(t, seen[v], "%s copied twice", v)
		seen[v] = true
	}
	require.Len(t, seen, n)
	adm, _, _ := adminClient(t, addr)
	offs, err := adm.FetchOffsets(ctx, "eos")
	require.NoError(t, err)
	var sum int64
	offs.Each(func(o kadm.OffsetResponse) { sum += o.At })
	require.Equal(t, int64(n), sum, "the offsets committed in the transactions cover the input")
}

// DescribeTransactions, ListTransactions and DescribeProducers (through
// kadm) show an open transaction, its partitions and its producer.
func TestDescribeTransactions(t *testing.T) {
	_, _, addr := testBroker(t, Options{NumPartitions: 1})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID("open-tx"), kgo.AllowAutoTopicCreation())
	require.NoError(t, err)
	defer p.Close()
	require.NoError(t, p.BeginTransaction())
	require.NoError(t, p.ProduceSync(ctx, &kgo.Record{Topic: "dt", Value: []byte("pending")}).FirstErr())
	adm, _, _ := adminClient(t, addr)
	listed, err := adm.ListTransactions(ctx, nil, []string{"Ongoing"})
	require.NoError(t, err)
	require.Contains(t, listed.TransactionalIDs(), "open-tx")
	described, err := adm.DescribeTransactions(ctx, "open-tx")
	require.NoError(t, err)
	d := described["open-tx"]
	require.NoError(t, d.Err)
	require.Equal(t, "Ongoing", d.State)
	require.Contains(t, d.Topics, "dt")
	producers, err := adm.DescribeProducers(ctx, kadm.TopicsSet{"dt": {0: {}}})
	require.NoError(t, err)
	var found bool
	producers["dt"].Partitions.EachProducer(func(ps kadm.DescribedProducer) {
		if ps.ProducerID == d.ProducerID {
			found = true
			require.Equal(t, int64(0), ps.CurrentTxnStartOffset, "its transaction starts at offset 0")
		}
	})
	require.True(t, found, "the transactional producer is active on dt-0")
	require.NoError(t, p.EndTransaction(ctx, kgo.TryAbort))
	described, err = adm.DescribeTransactions(ctx, "open-tx", "nobody")
	require.NoError(t, err)
	require.Equal(t, "CompleteAbort", described["open-tx"].State)
	require.Error(t, described["nobody"].Err)
}
