package txn

import (
	"io"
	"log/slog"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/internal/testenv"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/tablet"
	"github.com/seglog/seglog/vfs"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

var dataTPs = []checkpoint.TopicPartition{{Topic: "a", Partition: 0}, {Topic: "a", Partition: 1}, {Topic: "b", Partition: 0}}

// testOptions are a coordinator's in tests: ids from a counter, a clock
// the test moves.
func testOptions(now *atomic.Int64) Options {
	var next atomic.Int64
	next.Store(1000)
	return Options{Partitions: 2, Logger: quiet, AllocateProducerID: func() (int64, error) { return next.Add(1), nil },
		Now: func() time.Time { return time.UnixMilli(now.Load()) }}
}

func openManager(t *testing.T, fsys vfs.FS) *tablet.Manager {
	m, err := tablet.OpenManager(fsys, "/data", tablet.ManagerOptions{Tablet: tablet.Options{Logger: quiet}})
	require.NoError(t, err)
	return m
}

// openTxn starts transactional id "t" with a transaction holding one
// durable record in each data partition.
func openTxn(t *testing.T, m *tablet.Manager, c *Coordinator) (int64, int16) {
	for _, tp := range dataTPs {
		_, err := m.GetOrCreate(tp, nil)
		require.NoError(t, err)
	}
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID, init.TransactionTimeoutMillis = kmsg.StringPtr("t"), 60_000
	ir := c.InitProducerID(init)
	require.Zero(t, ir.ErrorCode)
	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch = "t", ir.ProducerID, ir.ProducerEpoch
	add.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "a", Partitions: []int32{0, 1}}, {Topic: "b", Partitions: []int32{0}}}
	for _, rt := range c.AddPartitionsToTxn(add).Topics {
		for _, p := range rt.Partitions {
			require.Zero(t, p.ErrorCode)
		}
	}
	for _, tp := range dataTPs {
		b := record.NewBuilder(record.None)
		b.SetProducer(ir.ProducerID, ir.ProducerEpoch, 0)
		b.SetTransactional(true)
		require.NoError(t, b.Append(record.Record{Timestamp: 1, Value: []byte("in the transaction")}))
		batch, err := b.Build()
		require.NoError(t, err)
		tab, _ := m.Get(tp)
		_, err = tab.Append(batch.Bytes(), tablet.AppendOptions{Sync: true})
		require.NoError(t, err)
	}
	return ir.ProducerID, ir.ProducerEpoch
}

// outcome reads every data partition with read_committed: how many see
// the transaction's record, and whether any is still open.
func outcome(t *testing.T, m *tablet.Manager) (committed int, open bool) {
	for _, tp := range dataTPs {
		tab, ok := m.Get(tp)
		require.True(t, ok)
		o := tab.Offsets()
		open = open || o.LastStableOffset < o.LogEndOffset
		require.NoError(t, tab.Records(0, tablet.ReadCommitted, func(_ record.Batch, _ *record.Record) bool {
			committed++
			return true
		}))
	}
	return committed, open
}

// A crash at every step of EndTxn (every filesystem operation from the
// first, the process dying there: every later one fails, and only what
// was synced survives) ends, once the coordinator restarts and its
// timeout aborts run, with the transaction committed in every partition
// or aborted in every one — never half — and no partition left with it
// open. make test crashes at every sixth step (a different sixth each
// run: the first step is drawn); make crash (SEGLOG_KILLS set) at every
// one.
func TestEndTxnCrashAtEveryStep(t *testing.T) {
	stride := 6
	if os.Getenv("SEGLOG_KILLS") != "" {
		stride = 1
	}
	steps, crashes := 0, 0
	first := int(testenv.Seed(t) % uint64(stride))
	for k := first; ; k += stride {
		var now atomic.Int64
		now.Store(1_700_000_000_000)
		mem := vfs.NewMem()
		inj := vfs.NewInjector(mem)
		m := openManager(t, inj)
		c, err := New(m, testOptions(&now))
		require.NoError(t, err)
		pid, epoch := openTxn(t, m, c)

		inj.Add(vfs.Rule{Nth: k, Sticky: true})
		end := kmsg.NewPtrEndTxnRequest()
		end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = "t", pid, epoch, true
		code := c.EndTxn(end).ErrorCode
		c.finishing.Wait() // the markers and the completion, written after the answer
		reached := inj.Injected() > 0
		img := mem.Crash(vfs.CrashRandom, uint64(k))
		c.Close()
		m.Close()

		m2 := openManager(t, img)
		c2, err := New(m2, testOptions(&now))
		require.NoError(t, err, "step %d: the coordinator restarts", k)
		now.Add(2 * 60_000) // past the timeout: an open transaction is aborted
		c2.AbortTimedOut()
		committed, open := outcome(t, m2)
		require.False(t, open, "step %d: a partition still has the transaction open", k)
		require.Contains(t, []int{0, len(dataTPs)}, committed, "step %d: committed in %d of %d partitions", k, committed, len(dataTPs))
		if !reached {
			require.Zero(t, code, "the whole EndTxn ran")
			require.Equal(t, len(dataTPs), committed, "and committed everywhere")
		} else if code == 0 {
			require.Equal(t, len(dataTPs), committed, "step %d: acknowledged, so committed everywhere", k)
		}
		require.NoError(t, c2.Close())
		require.NoError(t, m2.Close())
		if !reached {
			steps = k
			break
		}
		crashes++
	}
	require.Positive(t, crashes)
	t.Logf("EndTxn crashed at %d of its %d filesystem operations (every %d)", crashes, steps, stride)
}

// A transaction open longer than its timeout is aborted by the
// coordinator at a new epoch: its producer is fenced.
func TestTimedOutTransactionIsAbortedAndFenced(t *testing.T) {
	var now atomic.Int64
	now.Store(1_700_000_000_000)
	m := openManager(t, vfs.NewMem())
	defer m.Close()
	c, err := New(m, testOptions(&now))
	require.NoError(t, err)
	defer c.Close()
	pid, epoch := openTxn(t, m, c)
	now.Add(59_000)
	require.Zero(t, c.AbortTimedOut(), "within its 60 s")
	now.Add(2_000)
	require.Equal(t, 1, c.AbortTimedOut())
	committed, open := outcome(t, m)
	require.Zero(t, committed)
	require.False(t, open)
	end := kmsg.NewPtrEndTxnRequest()
	end.SetVersion(3)
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = "t", pid, epoch, true
	require.Equal(t, kerr.ProducerFenced.Code, c.EndTxn(end).ErrorCode, "the producer's epoch was bumped")
	require.Equal(t, int64(1), c.Stats().TimedOut)
}
