package txn

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/tablet"
	"github.com/seglog/seglog/vfs"
)

// barrierFS holds each fdatasync or fsync of a data partition's .log,
// once armed, until want of them are waiting together (or a minute
// passes, which it counts): syncs issued one after another never meet.
type barrierFS struct {
	vfs.FS
	want     int
	armed    atomic.Bool
	mu       sync.Mutex
	waiting  int
	release  chan struct{}
	timedOut atomic.Int32
}

func (b *barrierFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := b.FS.OpenFile(name, flag, perm)
	dir := filepath.Base(filepath.Dir(name))
	if err != nil || !strings.HasSuffix(name, ".log") || !(strings.HasPrefix(dir, "a-") || strings.HasPrefix(dir, "b-")) {
		return f, err
	}
	return &barrierFile{File: f, b: b}, nil
}

type barrierFile struct {
	vfs.File
	b *barrierFS
}

func (f *barrierFile) Datasync() error { f.b.meet(); return f.File.Datasync() }
func (f *barrierFile) Sync() error     { f.b.meet(); return f.File.Sync() }

func (b *barrierFS) meet() {
	if !b.armed.Load() {
		return
	}
	b.mu.Lock()
	release := b.release
	if b.waiting++; b.waiting == b.want {
		close(release)
	}
	b.mu.Unlock()
	select {
	case <-release:
	case <-time.After(time.Minute):
		b.timedOut.Add(1)
	}
}

// commitOn opens a coordinator on fsys with transaction "t" open (see
// openTxn), arms fsys's barrier and returns the EndTxn that commits it.
func commitOn(t *testing.T, fsys *barrierFS) (*tablet.Manager, *Coordinator, *kmsg.EndTxnRequest) {
	var now atomic.Int64
	now.Store(1_700_000_000_000)
	m := openManager(t, fsys)
	t.Cleanup(func() { m.Close() })
	c, err := New(m, testOptions(&now))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	pid, epoch := openTxn(t, m, c)
	fsys.armed.Store(true)
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = "t", pid, epoch, true
	return m, c, end
}

// EndTxn writes its markers to the transaction's partitions at once: the
// three partitions' fsyncs are under way together (a barrier that opens
// only when all three wait), not one after another; the transaction is
// committed in every partition.
func TestEndTxnWritesMarkersAtOnce(t *testing.T) {
	fsys := &barrierFS{FS: vfs.NewMem(), want: len(dataTPs), release: make(chan struct{})}
	m, c, end := commitOn(t, fsys)
	require.Zero(t, c.EndTxn(end).ErrorCode)
	c.finishing.Wait() // the markers are written after the answer
	fsys.armed.Store(false)
	require.Zero(t, fsys.timedOut.Load(), "the markers' fsyncs ran one after another")
	committed, open := outcome(t, m)
	require.Equal(t, len(dataTPs), committed)
	require.False(t, open)
}

// Transactions v2: EndTxn v5 ends each transaction at a new epoch; when
// no epoch is left after it, the producer gets a new id (the markers
// still carry the old id at its last epoch), and a retry of that EndTxn
// with the old id and epoch is answered with the new ones.
func TestEndTxnV2RunsOutOfEpochs(t *testing.T) {
	var now atomic.Int64
	now.Store(1_700_000_000_000)
	m := openManager(t, vfs.NewMem())
	defer m.Close()
	c, err := New(m, testOptions(&now))
	require.NoError(t, err)
	defer c.Close()
	pid, _ := openTxn(t, m, c)
	tx := c.txns["t"]
	tx.mu.Lock()
	tx.epoch = math.MaxInt16 - 2 // as if thousands of transactions had run
	tx.mu.Unlock()
	for _, tp := range dataTPs { // the partitions' writer state at that epoch
		b := record.NewBuilder(record.None)
		b.SetProducer(pid, math.MaxInt16-2, 0)
		b.SetTransactional(true)
		require.NoError(t, b.Append(record.Record{Timestamp: 1, Value: []byte("late in its epochs")}))
		batch, err := b.Build()
		require.NoError(t, err)
		tab, _ := m.Get(tp)
		_, err = tab.Append(batch.Bytes(), tablet.AppendOptions{Sync: true})
		require.NoError(t, err)
	}
	end := kmsg.NewPtrEndTxnRequest()
	end.SetVersion(5)
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = "t", pid, math.MaxInt16-2, true
	resp := c.EndTxn(end)
	require.Zero(t, resp.ErrorCode)
	require.NotEqual(t, pid, resp.ProducerID, "a new producer id")
	require.Equal(t, int16(0), resp.ProducerEpoch)
	committed, open := outcome(t, m)
	require.False(t, open)
	require.Equal(t, 2*len(dataTPs), committed, "the markers carried the old id")
	retry := c.EndTxn(end)
	require.Zero(t, retry.ErrorCode, "a retry of the EndTxn")
	require.Equal(t, resp.ProducerID, retry.ProducerID)
	require.Equal(t, int16(0), retry.ProducerEpoch)
}

// A retry of a transactions-v2 EndTxn is recognised after a restart too:
// the records of its end carry ClientTransactionVersion 2 (and
// PreviousProducerId once the producer moved to a new id), so the retry
// at the epoch before gets the answer it missed, also across a new
// producer id; once InitProducerId has fenced the producer, the same
// retry is fenced.
func TestEndTxnV2RetryAfterRestart(t *testing.T) {
	var now atomic.Int64
	now.Store(1_700_000_000_000)
	fsys := vfs.NewMem()
	m := openManager(t, fsys)
	opts := testOptions(&now) // one producer id counter across the restarts
	c, err := New(m, opts)
	require.NoError(t, err)
	restart := func() {
		c.Close()
		require.NoError(t, m.Close())
		m = openManager(t, fsys)
		c, err = New(m, opts)
		require.NoError(t, err)
	}
	defer func() { c.Close(); m.Close() }()
	pid, epoch := openTxn(t, m, c)
	end := kmsg.NewPtrEndTxnRequest()
	end.SetVersion(5)
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = "t", pid, epoch, true
	resp := c.EndTxn(end)
	require.Zero(t, resp.ErrorCode)
	require.Equal(t, epoch+1, resp.ProducerEpoch)

	restart()
	retry := c.EndTxn(end)
	require.Zero(t, retry.ErrorCode, "a retry after a restart: %s", kerr.ErrorForCode(retry.ErrorCode))
	require.Equal(t, pid, retry.ProducerID)
	require.Equal(t, epoch+1, retry.ProducerEpoch)
	end.Commit = false
	require.NotZero(t, c.EndTxn(end).ErrorCode, "an abort is no retry of a commit")
	end.Commit = true

	// The next transaction ends at the last epoch: a new producer id.
	tx := c.txns["t"]
	tx.mu.Lock()
	tx.epoch = math.MaxInt16 - 2
	tx.mu.Unlock()
	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch = "t", pid, math.MaxInt16-2
	add.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "a", Partitions: []int32{0}}}
	require.Zero(t, c.AddPartitionsToTxn(add).Topics[0].Partitions[0].ErrorCode)
	end.ProducerEpoch = math.MaxInt16 - 2
	resp = c.EndTxn(end)
	require.Zero(t, resp.ErrorCode)
	require.NotEqual(t, pid, resp.ProducerID)
	restart()
	retry = c.EndTxn(end)
	require.Zero(t, retry.ErrorCode, "a retry across the new id after a restart: %s", kerr.ErrorForCode(retry.ErrorCode))
	require.Equal(t, resp.ProducerID, retry.ProducerID)
	require.Equal(t, int16(0), retry.ProducerEpoch)

	// InitProducerId fences the producer: the retry is refused from then on.
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID, init.TransactionTimeoutMillis = kmsg.StringPtr("t"), 60_000
	require.Zero(t, c.InitProducerID(init).ErrorCode)
	restart()
	end.ProducerID, end.ProducerEpoch = pid, math.MaxInt16-2
	require.NotZero(t, c.EndTxn(end).ErrorCode, "a retry from before the fence")
}

// EndTxn answers at Kafka's commit point, once the Prepare state is
// durable: with the markers' fsyncs held, it has answered; a crash then
// leaves a prepared transaction the restart commits everywhere. The
// producer's next AddPartitionsToTxn waits for the completion instead of
// getting CONCURRENT_TRANSACTIONS (and a client's backoff).
func TestEndTxnAnswersAtTheCommitPoint(t *testing.T) {
	mem := vfs.NewMem()
	fsys := &barrierFS{FS: mem, want: len(dataTPs) + 1, release: make(chan struct{})} // never met: the test releases
	m, c, end := commitOn(t, fsys)
	pid, epoch := end.ProducerID, end.ProducerEpoch
	require.Zero(t, c.EndTxn(end).ErrorCode, "answered while the markers' fsyncs are held")
	img := mem.Crash(vfs.CrashDropAll, 1)

	added := make(chan int16, 1)
	go func() {
		add := kmsg.NewPtrAddPartitionsToTxnRequest()
		add.TransactionalID, add.ProducerID, add.ProducerEpoch = "t", pid, epoch
		add.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "a", Partitions: []int32{0}}}
		added <- c.AddPartitionsToTxn(add).Topics[0].Partitions[0].ErrorCode
	}()
	fsys.mu.Lock()
	fsys.want = 0 // (never met now: every sync passes the closed channel)
	close(fsys.release)
	fsys.mu.Unlock()
	require.Zero(t, <-added, "the next transaction starts once this one is complete")
	fsys.armed.Store(false)
	require.Zero(t, fsys.timedOut.Load())
	committed, open := outcome(t, m)
	require.Equal(t, len(dataTPs), committed)
	require.False(t, open)

	var now atomic.Int64
	now.Store(1_700_000_000_000)
	m2 := openManager(t, img)
	defer m2.Close()
	c2, err := New(m2, testOptions(&now))
	require.NoError(t, err)
	defer c2.Close()
	committed, open = outcome(t, m2)
	require.Equal(t, len(dataTPs), committed, "crashed after the answer: committed at the restart")
	require.False(t, open)
}
