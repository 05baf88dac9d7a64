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
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/coordinator/group"
	"github.com/seglog/seglog/record"
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
	offs, err := adm.FetchOffsets(kadm.RequireStable(ctx), "eos")
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

// Transactions v2 (KIP-890 part 2) on the wire: ApiVersions finalizes
// transaction.version 2; a Produce v12 adds its partition to the
// transaction (no AddPartitionsToTxn) while a v11 one may not; EndTxn v5
// ends the transaction at a new epoch and tells it, a retry with the old
// epoch gets the same answer, the old epoch is fenced, and the next
// transaction runs at the new one.
func TestTransactionsV2(t *testing.T) {
	_, m, addr := testBroker(t, Options{})
	for p := range int32(2) {
		_, err := m.Create(checkpoint.TopicPartition{Topic: "tv2", Partition: p}, nil)
		require.NoError(t, err)
	}
	c := dialRaw(t, addr)
	av := kmsg.NewPtrApiVersionsRequest()
	av.ClientSoftwareName, av.ClientSoftwareVersion = "seglog-test", "1"
	avResp := kmsg.NewPtrApiVersionsResponse()
	c.do(av, 3, avResp)
	require.Contains(t, avResp.FinalizedFeatures, kmsg.ApiVersionsResponseFinalizedFeature{Name: "transaction.version", MinVersionLevel: 2, MaxVersionLevel: 2})
	require.Contains(t, avResp.FinalizedFeatures, kmsg.ApiVersionsResponseFinalizedFeature{Name: "group.version", MinVersionLevel: 1, MaxVersionLevel: 1})

	pid, epoch := initTxn(t, c)

	produce := func(v int16, p int32, e int16, seq int32) int16 {
		bl := record.NewBuilder(record.None)
		bl.SetProducer(pid, e, seq)
		bl.SetTransactional(true)
		require.NoError(t, bl.Append(record.Record{Value: []byte("in a transaction")}))
		batch, err := bl.Build()
		require.NoError(t, err)
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis, req.TransactionID = -1, 5000, kmsg.StringPtr("tx")
		id, _ := m.TopicID("tv2")
		req.Topics = []kmsg.ProduceRequestTopic{{Topic: "tv2", TopicID: id, Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: p, Records: batch.Bytes()}}}}
		resp := kmsg.NewPtrProduceResponse()
		c.do(req, v, resp)
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	require.Zero(t, produce(12, 0, epoch, 0), "Produce v12 adds partition 0 to the transaction")
	require.Equal(t, kerr.InvalidTxnState.Code, produce(11, 1, epoch, 0), "a v11 producer adds its partitions first")

	end := func(e int16) *kmsg.EndTxnResponse {
		r := kmsg.NewPtrEndTxnRequest()
		r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.Commit = "tx", pid, e, true
		resp := kmsg.NewPtrEndTxnResponse()
		c.do(r, 5, resp)
		return resp
	}
	ended := end(epoch)
	require.Zero(t, ended.ErrorCode)
	require.Equal(t, pid, ended.ProducerID)
	require.Equal(t, epoch+1, ended.ProducerEpoch, "a new epoch each transaction")
	again := end(epoch)
	require.Zero(t, again.ErrorCode, "a retry of the EndTxn")
	require.Equal(t, epoch+1, again.ProducerEpoch)

	code := produce(12, 0, epoch, 1)
	require.Contains(t, []int16{kerr.ProducerFenced.Code, kerr.InvalidProducerEpoch.Code}, code, "the old epoch is fenced: %s", kerr.ErrorForCode(code))
	require.Zero(t, produce(12, 1, epoch+1, 0), "the next transaction, at the new epoch")
	ended = end(epoch + 1)
	require.Zero(t, ended.ErrorCode)
	require.Equal(t, epoch+2, ended.ProducerEpoch)
	// A transactions-v2 producer whose produces all failed aborts a
	// transaction that added nothing: it ends at a new epoch too.
	abort := kmsg.NewPtrEndTxnRequest()
	abort.TransactionalID, abort.ProducerID, abort.ProducerEpoch = "tx", pid, epoch+2
	emptyAbort := kmsg.NewPtrEndTxnResponse()
	c.do(abort, 5, emptyAbort)
	require.Zero(t, emptyAbort.ErrorCode)
	require.Equal(t, epoch+3, emptyAbort.ProducerEpoch)
	abort.ProducerEpoch, abort.Commit = epoch+3, true
	emptyCommit := kmsg.NewPtrEndTxnResponse()
	c.do(abort, 5, emptyCommit)
	require.Equal(t, kerr.InvalidTxnState.Code, emptyCommit.ErrorCode, "nothing to commit")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.Len(t, readCommitted(t, ctx, addr, "tv2", 2), 2, "both transactions' records, committed")
}

// franz-go takes transactions v2 when the broker finalizes it (from its
// second transaction: the first runs before it has read the features, and
// it re-initializes its producer id to switch): then each committed
// transaction moves the producer's epoch on.
func TestFranzGoTransactionsV2(t *testing.T) {
	_, _, addr := testBroker(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID("fg-tv2"), kgo.AllowAutoTopicCreation())
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	epochs := []int16{}
	for i := range 4 {
		txnProduce(t, ctx, cl, "fg-tv2", fmt.Sprintf("t%d-", i), 5, true)
		described, err := adm.DescribeTransactions(ctx, "fg-tv2")
		require.NoError(t, err)
		epochs = append(epochs, described["fg-tv2"].ProducerEpoch)
	}
	require.Equal(t, []int16{epochs[1], epochs[1] + 1, epochs[1] + 2}, epochs[1:], "an epoch bump per transaction")
	require.Len(t, readCommitted(t, ctx, addr, "fg-tv2", 20), 20)
}

// AddPartitionsToTxn v4 and v5, a broker's batch: partitions added, or
// only verified to be in the transaction (KIP-890).
func TestAddPartitionsToTxnBatched(t *testing.T) {
	_, m, addr := testBroker(t, Options{})
	for p := range int32(2) {
		_, err := m.Create(checkpoint.TopicPartition{Topic: "tb", Partition: p}, nil)
		require.NoError(t, err)
	}
	c := dialRaw(t, addr)
	pid, epoch := initTxn(t, c)

	batch := func(v int16, verify bool, parts ...int32) *kmsg.AddPartitionsToTxnResponse {
		r := kmsg.NewPtrAddPartitionsToTxnRequest()
		r.Transactions = []kmsg.AddPartitionsToTxnRequestTransaction{{TransactionalID: "tx", ProducerID: pid,
			ProducerEpoch: epoch, VerifyOnly: verify,
			Topics: []kmsg.AddPartitionsToTxnRequestTransactionTopic{{Topic: "tb", Partitions: parts}}}}
		resp := kmsg.NewPtrAddPartitionsToTxnResponse()
		c.do(r, v, resp)
		return resp
	}
	codes := func(resp *kmsg.AddPartitionsToTxnResponse) []int16 {
		require.Zero(t, resp.ErrorCode)
		require.Len(t, resp.Transactions, 1)
		var out []int16
		for _, p := range resp.Transactions[0].Topics[0].Partitions {
			out = append(out, p.ErrorCode)
		}
		return out
	}
	require.Equal(t, []int16{kerr.InvalidTxnState.Code}, codes(batch(5, true, 0)), "not in the transaction yet")
	require.Equal(t, []int16{0}, codes(batch(4, false, 0)))
	require.Equal(t, []int16{0, kerr.InvalidTxnState.Code}, codes(batch(5, true, 0, 1)))
	// Without ClusterAction it is refused whole: TestRegistryRefusesWithoutACLs.
}

// initTxn gives transactional id "tx" its producer id and epoch
// (InitProducerId v5), after FindCoordinator creates its coordinator.
func initTxn(t *testing.T, c *rawConn) (int64, int16) {
	t.Helper()
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey, fc.CoordinatorType = "tx", 1
	c.do(fc, 3, kmsg.NewPtrFindCoordinatorResponse())
	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.TransactionalID, ip.TransactionTimeoutMillis = kmsg.StringPtr("tx"), 60000
	ip.ProducerID, ip.ProducerEpoch = -1, -1
	ipResp := kmsg.NewPtrInitProducerIDResponse()
	c.do(ip, 5, ipResp)
	require.Zero(t, ipResp.ErrorCode)
	return ipResp.ProducerID, ipResp.ProducerEpoch
}

// WriteTxnMarkers, as kafka-transactions.sh's abort of a hanging
// transaction sends it to a partition's leader: the ABORT marker ends the
// producer's open transaction on that partition (read_committed gets past
// it, none of its records), and a marker from an older coordinator epoch
// than the last one the partition took is TRANSACTION_COORDINATOR_FENCED.
func TestWriteTxnMarkersAbortsHanging(t *testing.T) {
	_, _, addr := testBroker(t, Options{NumPartitions: 1})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID("hang"), kgo.AllowAutoTopicCreation(),
		kgo.TransactionTimeout(time.Minute))
	require.NoError(t, err)
	defer p.Close()
	require.NoError(t, p.BeginTransaction())
	for i := range 3 {
		require.NoError(t, p.ProduceSync(ctx, &kgo.Record{Topic: "hung", Value: fmt.Appendf(nil, "hanging%d", i)}).FirstErr())
	}
	dp, err := kadm.NewClient(p).DescribeProducers(ctx, kadm.TopicsSet{"hung": {0: {}}})
	require.NoError(t, err)
	var pid int64
	var epoch int16
	dp.EachProducer(func(s kadm.DescribedProducer) { pid, epoch = s.ProducerID, s.ProducerEpoch })

	c := dialRaw(t, addr)
	mark := func(commit bool, coordinatorEpoch int32) int16 {
		r := kmsg.NewPtrWriteTxnMarkersRequest()
		r.Markers = []kmsg.WriteTxnMarkersRequestMarker{{ProducerID: pid, ProducerEpoch: epoch, Committed: commit,
			CoordinatorEpoch: coordinatorEpoch, Topics: []kmsg.WriteTxnMarkersRequestMarkerTopic{{Topic: "hung", Partitions: []int32{0}}}}}
		resp := kmsg.NewPtrWriteTxnMarkersResponse()
		c.do(r, 1, resp)
		require.Len(t, resp.Markers, 1)
		return resp.Markers[0].Topics[0].Partitions[0].ErrorCode
	}
	require.Zero(t, mark(false, 5))
	require.Equal(t, kerr.TransactionCoordinatorFenced.Code, mark(true, 3))

	plain, err := kgo.NewClient(kgo.SeedBrokers(addr))
	require.NoError(t, err)
	defer plain.Close()
	require.NoError(t, plain.ProduceSync(ctx, &kgo.Record{Topic: "hung", Value: []byte("after")}).FirstErr())
	require.Equal(t, []string{"after"}, readCommitted(t, ctx, addr, "hung", 1))
}
