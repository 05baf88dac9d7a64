// Package txn is the transaction coordinator: a transactional id's
// producer id and epoch (InitProducerId, fencing the previous instance),
// the partitions of its transaction (AddPartitionsToTxn, AddOffsetsToTxn),
// and its end (EndTxn: PrepareCommit or PrepareAbort logged, COMMIT or
// ABORT markers written to every partition, then CompleteCommit or
// CompleteAbort), with its state in the compacted internal topic
// __transaction_state in Kafka's record format (TransactionLogKey and
// TransactionLogValue v0). Every state change is appended with Sync
// before it is answered; at start the log is replayed, a transaction
// caught in a Prepare state is completed (its markers written again), and
// one open past its timeout is aborted.
package txn

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/coordinator/internal/store"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/tablet"
)

// Options configure the coordinator under Kafka's broker config names.
type Options struct {
	// Partitions is transaction.state.log.num.partitions, for a topic not
	// created yet. The default is 50.
	Partitions int32
	// SegmentBytes is transaction.state.log.segment.bytes. The default is
	// 104857600.
	SegmentBytes int64
	// MaxTimeout is transaction.max.timeout.ms: a longer
	// transaction.timeout.ms is INVALID_TRANSACTION_TIMEOUT. The default
	// is 15 minutes.
	MaxTimeout time.Duration
	// AbortInterval is
	// transaction.abort.timed.out.transaction.cleanup.interval.ms. The
	// default is 10 s.
	AbortInterval time.Duration
	// AllocateProducerID hands out a new producer id (the broker's durable
	// allocator). Required.
	AllocateProducerID func() (int64, error)
	// OnMarker, if set, is told of every marker written, after it is
	// durable (the group coordinator applies or drops transactional
	// offsets).
	OnMarker func(tp checkpoint.TopicPartition, producerID int64, commit bool)
	// TopicExists says whether a partition exists, for AddPartitionsToTxn.
	// The default is the manager's tablets.
	TopicExists func(topic string, partition int32) bool
	// Logger receives what the coordinator does on its own (completions at
	// start, aborts by timeout). The default is slog.Default().
	Logger *slog.Logger
	// Now is the clock. The default is time.Now.
	Now func() time.Time
	// Cluster, if set, makes the coordinator a cluster's: it coordinates
	// the transactional ids of the __transaction_state partitions this
	// broker leads (Load, Unload).
	Cluster *ClusterHooks
	// ReadOnly loads the state for inspection only (a read-only data
	// directory): prepared transactions are not completed, none is
	// aborted, nothing is written.
	ReadOnly bool
}

func (o *Options) ensureDefaults(m *tablet.Manager) {
	if o.Partitions <= 0 {
		o.Partitions = 50
	}
	if o.SegmentBytes <= 0 {
		o.SegmentBytes = 100 << 20
	}
	if o.MaxTimeout <= 0 {
		o.MaxTimeout = 15 * time.Minute
	}
	if o.AbortInterval <= 0 {
		o.AbortInterval = 10 * time.Second
	}
	if o.TopicExists == nil {
		o.TopicExists = store.TopicExists(m)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// txnMeta is one transactional id's state; mu is held while its records
// and markers are written.
type txnMeta struct {
	mu        sync.Mutex // guards the fields below
	id        string
	partition int32 // of __transaction_state
	pid       int64
	epoch     int16
	timeout   time.Duration
	state     kmsg.TransactionState
	parts     map[checkpoint.TopicPartition]bool
	start     int64 // ms: the open transaction's first partition
	updated   int64
	// prevPID and prevEpoch are what a transactions-v2 EndTxn moved the
	// producer from (prevEpoch -1: none): a retry of that EndTxn with them
	// is answered with the new ones.
	prevPID   int64
	prevEpoch int16
	// coordEpoch is the coordinator epoch t was loaded or created at (0
	// on a single node).
	coordEpoch int32
}

// Coordinator is every transactional id's coordinator on one data
// directory.
type Coordinator struct {
	m    *tablet.Manager
	opts Options
	log  *store.Log

	mu     sync.Mutex // guards the fields below
	txns   map[string]*txnMeta
	byPID  map[int64]*txnMeta
	closed bool
	timer  *time.Timer
	stats  Stats
	// finishing counts the completions running after their EndTxn.
	finishing sync.WaitGroup
	// ownedParts, in a cluster, are the __transaction_state partitions
	// coordinated here (loading or owned), and epochs their coordinator
	// epochs; nil on a single node, which owns every partition.
	ownedParts store.Ownership
	epochs     map[int32]int32
}

// Stats count what the coordinator did.
type Stats struct {
	Commits, Aborts, TimedOut int64
}

// New returns the coordinator, with every transactional id loaded from
// __transaction_state if it exists: a transaction in PrepareCommit or
// PrepareAbort is completed now (its markers written again).
func New(m *tablet.Manager, opts Options) (*Coordinator, error) {
	if opts.AllocateProducerID == nil && !opts.ReadOnly {
		return nil, errors.New("txn: Options.AllocateProducerID is required")
	}
	opts.ensureDefaults(m)
	c := &Coordinator{m: m, opts: opts, log: store.Open(m, Topic, opts.Partitions, opts.SegmentBytes),
		txns: map[string]*txnMeta{}, byPID: map[int64]*txnMeta{}}
	if opts.Cluster != nil {
		c.clustered(opts.Cluster)
	} else if err := c.load(); err != nil {
		return nil, err
	}
	if !opts.ReadOnly {
		c.AbortTimedOut() // those that ran out while the broker was down
		c.timer = time.AfterFunc(opts.AbortInterval, c.abortLoop)
	}
	return c, nil
}

// Close stops the timeout aborts.
func (c *Coordinator) Close() error {
	c.mu.Lock()
	c.closed = true
	if c.timer != nil {
		c.timer.Stop()
	}
	c.mu.Unlock()
	c.finishing.Wait() // the completions EndTxn answered before
	return nil
}

// Ensure creates __transaction_state if it does not exist yet.
func (c *Coordinator) Ensure() error {
	return c.log.Ensure()
}

// Stats returns the coordinator's counts.
func (c *Coordinator) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

func (c *Coordinator) load() error {
	for p, t := range c.log.Existing() {
		if t == nil {
			continue
		}
		txns, err := c.loadPartition(int32(p), t)
		if err != nil {
			return err
		}
		maps.Copy(c.txns, txns)
	}
	for _, t := range c.txns {
		c.byPID[t.pid] = t
		if c.opts.ReadOnly {
			continue
		}
		switch t.state {
		case kmsg.TransactionStatePrepareCommit, kmsg.TransactionStatePrepareAbort:
			commit := t.state == kmsg.TransactionStatePrepareCommit
			c.opts.Logger.Info("completing a transaction left prepared", "transactional_id", t.id, "commit", commit)
			if err := c.complete(t, commit); err != nil {
				return err
			}
		}
	}
	return nil
}

// loadPartition replays __transaction_state partition p to its log end
// (what a new leader has is what the partition holds from now on, as
// Kafka's coordinator loads it).
func (c *Coordinator) loadPartition(p int32, tab *tablet.Tablet) (map[string]*txnMeta, error) {
	txns := map[string]*txnMeta{}
	var derr error
	err := tab.Records(tab.Offsets().LogStartOffset, tablet.ReadLogEnd, func(_ record.Batch, r *record.Record) bool {
		d, err := Decode(r.Key, r.Value)
		if err != nil {
			derr = fmt.Errorf("txn: %s-%d offset %d: %w", Topic, p, r.Offset, err)
			return false
		}
		if d.Value == nil {
			delete(txns, d.TransactionalID)
			return true
		}
		v := d.Value
		t := &txnMeta{id: d.TransactionalID, partition: p, pid: v.ProducerID, epoch: v.ProducerEpoch,
			timeout: time.Duration(v.TimeoutMillis) * time.Millisecond, state: v.State, parts: partitionsOf(v),
			start: v.StartTimestamp, updated: v.LastUpdateTimestamp, prevEpoch: -1}
		t.prevPID, t.prevEpoch = previous(v)
		txns[d.TransactionalID] = t
		return true
	})
	if derr != nil {
		return nil, derr
	}
	if err != nil {
		return nil, fmt.Errorf("txn: reading %s-%d: %w", Topic, p, err)
	}
	return txns, nil
}

// errNotCoordinator is a write for a transactional id this broker no
// longer coordinates (its partition unloaded, or loaded again since).
var errNotCoordinator = seglog.NewKafkaError("txn: not the coordinator of the transactional id any more", kerr.NotCoordinator.Code)

// persist appends t's state durably.
func (c *Coordinator) persist(t *txnMeta) error { return c.persistWith(t, c.log.Append) }

// persistLazy is persist without waiting for the fsync.
func (c *Coordinator) persistLazy(t *txnMeta) error { return c.persistWith(t, c.log.AppendLazy) }

func (c *Coordinator) persistWith(t *txnMeta, write func(p int32, now time.Time, recs ...store.KV) error) error {
	if !c.current(t) {
		return fmt.Errorf("%w: %q", errNotCoordinator, t.id)
	}
	t.updated = c.opts.Now().UnixMilli()
	return write(t.partition, c.opts.Now(), store.KV{Key: key(t.id), Value: t.value()})
}

// fenced is the error for a producer epoch below the current one:
// PRODUCER_FENCED from the versions that know it (KIP-588),
// INVALID_PRODUCER_EPOCH before.
func fenced(newer bool) int16 {
	if newer {
		return kerr.ProducerFenced.Code
	}
	return kerr.InvalidProducerEpoch.Code
}

// InitProducerID gives a transactional id its producer id and a new epoch
// (a new id when the epoch would run out), fencing the producer at the
// previous epoch: a transaction it left open is aborted first, its
// markers at the new epoch.
func (c *Coordinator) InitProducerID(r *kmsg.InitProducerIDRequest) *kmsg.InitProducerIDResponse {
	resp := r.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	id := *r.TransactionalID
	timeout := time.Duration(r.TransactionTimeoutMillis) * time.Millisecond
	switch {
	case id == "":
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp
	case timeout <= 0 || timeout > c.opts.MaxTimeout:
		resp.ErrorCode = kerr.InvalidTransactionTimeout.Code
		return resp
	}
	c.mu.Lock()
	p := c.PartitionFor(id)
	if resp.ErrorCode = c.log.Code(c.ownedParts, p); resp.ErrorCode != 0 {
		c.mu.Unlock()
		return resp
	}
	t := c.txns[id]
	if t == nil {
		t = &txnMeta{id: id, partition: p, pid: -1, epoch: -1, prevEpoch: -1, coordEpoch: c.epochs[p],
			state: kmsg.TransactionStateEmpty, parts: map[checkpoint.TopicPartition]bool{}}
		c.txns[id] = t
	}
	c.mu.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	if r.GetVersion() >= 3 && r.ProducerID >= 0 && t.pid >= 0 && (r.ProducerID != t.pid || r.ProducerEpoch != t.epoch) {
		// KIP-360: a producer recovering with its id and epoch must be the
		// current one.
		resp.ErrorCode = fenced(r.GetVersion() >= 4)
		return resp
	}
	switch t.state {
	case kmsg.TransactionStatePrepareCommit, kmsg.TransactionStatePrepareAbort:
		resp.ErrorCode = kerr.ConcurrentTransactions.Code // completes on its own; the client retries
		return resp
	case kmsg.TransactionStateOngoing:
		// Fence the old producer: abort its transaction at a new epoch.
		if err := c.bumpEpoch(t); err != nil {
			resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
			return resp
		}
		if err := c.end(t, false, false); err != nil {
			c.opts.Logger.Error("aborting a fenced producer's transaction", "transactional_id", id, "err", err)
			resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
			return resp
		}
		if t.state == kmsg.TransactionStatePrepareAbort {
			// Its markers are still on their way (a cluster's, retried):
			// the producer retries until the abort is complete, as Kafka's.
			resp.ErrorCode = kerr.ConcurrentTransactions.Code
			return resp
		}
	default:
		if err := c.bumpEpoch(t); err != nil {
			resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
			return resp
		}
	}
	t.timeout = timeout
	t.state, t.parts, t.start = kmsg.TransactionStateEmpty, map[checkpoint.TopicPartition]bool{}, -1
	if err := c.persist(t); err != nil {
		c.opts.Logger.Error("storing a transactional id", "transactional_id", id, "err", err)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp
	}
	resp.ProducerID, resp.ProducerEpoch = t.pid, t.epoch
	return resp
}

// bumpEpoch moves t to its next epoch, or to a new producer id at epoch 0
// when the epoch would run out (or it has none yet).
func (c *Coordinator) bumpEpoch(t *txnMeta) error {
	t.prevEpoch = -1 // no EndTxn retry crosses a fence
	if t.pid >= 0 && t.epoch < math.MaxInt16-1 {
		t.epoch++
		return nil
	}
	return c.newProducerID(t)
}

// newProducerID gives t a new producer id at epoch 0.
func (c *Coordinator) newProducerID(t *txnMeta) error {
	pid, err := c.opts.AllocateProducerID()
	if err != nil {
		return err
	}
	c.mu.Lock()
	delete(c.byPID, t.pid)
	c.byPID[pid] = t
	c.mu.Unlock()
	t.pid, t.epoch = pid, 0
	return nil
}

// lookup returns a transactional id's state, locked, after checking the
// producer's id and epoch; code is the error otherwise.
func (c *Coordinator) lookup(id string, pid int64, epoch int16, newer bool) (*txnMeta, int16) {
	c.mu.Lock()
	if code := c.log.Code(c.ownedParts, c.PartitionFor(id)); code != 0 {
		c.mu.Unlock()
		return nil, code
	}
	t := c.txns[id]
	c.mu.Unlock()
	if t == nil {
		return nil, kerr.InvalidProducerIDMapping.Code
	}
	t.mu.Lock()
	switch {
	case t.pid != pid:
		t.mu.Unlock()
		return nil, kerr.InvalidProducerIDMapping.Code
	case epoch < t.epoch:
		t.mu.Unlock()
		return nil, fenced(newer)
	case epoch > t.epoch:
		t.mu.Unlock()
		return nil, kerr.InvalidProducerEpoch.Code
	}
	return t, 0
}

// addPartitions adds partitions to t's transaction, which opens it.
func (c *Coordinator) addPartitions(t *txnMeta, tps []checkpoint.TopicPartition) int16 {
	switch t.state {
	case kmsg.TransactionStatePrepareCommit, kmsg.TransactionStatePrepareAbort:
		return kerr.ConcurrentTransactions.Code
	case kmsg.TransactionStateEmpty, kmsg.TransactionStateCompleteCommit, kmsg.TransactionStateCompleteAbort:
		t.parts, t.start = map[checkpoint.TopicPartition]bool{}, c.opts.Now().UnixMilli()
	}
	added := false
	for _, tp := range tps {
		if !t.parts[tp] {
			t.parts[tp], added = true, true
		}
	}
	if !added && t.state == kmsg.TransactionStateOngoing {
		return 0
	}
	t.state = kmsg.TransactionStateOngoing
	if err := c.persist(t); err != nil {
		c.opts.Logger.Error("storing a transaction's partitions", "transactional_id", t.id, "err", err)
		for _, tp := range tps {
			delete(t.parts, tp)
		}
		return kerr.CoordinatorNotAvailable.Code
	}
	return 0
}

// AddPartitionsToTxn adds partitions to a transaction (v0–3).
func (c *Coordinator) AddPartitionsToTxn(r *kmsg.AddPartitionsToTxnRequest) *kmsg.AddPartitionsToTxnResponse {
	resp := r.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	answer := func(code func(topic string, p int32) int16) *kmsg.AddPartitionsToTxnResponse {
		for _, rt := range r.Topics {
			st := kmsg.AddPartitionsToTxnResponseTopic{Topic: rt.Topic}
			for _, p := range rt.Partitions {
				st.Partitions = append(st.Partitions, kmsg.AddPartitionsToTxnResponseTopicPartition{Partition: p, ErrorCode: code(rt.Topic, p)})
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	}
	var tps []checkpoint.TopicPartition
	unknown := false
	for _, rt := range r.Topics {
		for _, p := range rt.Partitions {
			tps = append(tps, checkpoint.TopicPartition{Topic: rt.Topic, Partition: p})
			unknown = unknown || !c.opts.TopicExists(rt.Topic, p)
		}
	}
	if unknown {
		return answer(func(topic string, p int32) int16 {
			if !c.opts.TopicExists(topic, p) {
				return kerr.UnknownTopicOrPartition.Code
			}
			return kerr.OperationNotAttempted.Code
		})
	}
	t, code := c.lookup(r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.GetVersion() >= 2)
	if code == 0 {
		code = c.addPartitions(t, tps)
		t.mu.Unlock()
	}
	return answer(func(string, int32) int16 { return code })
}

// AddOffsetsToTxn adds a group's __consumer_offsets partition to a
// transaction (the partition offsetsPartition gives).
func (c *Coordinator) AddOffsetsToTxn(r *kmsg.AddOffsetsToTxnRequest, offsetsPartition checkpoint.TopicPartition) *kmsg.AddOffsetsToTxnResponse {
	resp := r.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	t, code := c.lookup(r.TransactionalID, r.ProducerID, r.ProducerEpoch, r.GetVersion() >= 2)
	if code == 0 {
		code = c.addPartitions(t, []checkpoint.TopicPartition{offsetsPartition})
		t.mu.Unlock()
	}
	resp.ErrorCode = code
	return resp
}

// EndTxn commits or aborts a transaction: PrepareCommit (PrepareAbort)
// logged, a COMMIT (ABORT) marker written durably to every partition, then
// CompleteCommit (CompleteAbort) logged. A retry of an ended transaction's
// same outcome succeeds. From v5 (transactions v2, KIP-890 part 2) every
// transaction ends at a new epoch: the markers carry it, the answer tells
// it (a new producer id when the epoch runs out), and a retry with the
// epoch before it is answered with it.
func (c *Coordinator) EndTxn(r *kmsg.EndTxnRequest) *kmsg.EndTxnResponse {
	resp := r.ResponseKind().(*kmsg.EndTxnResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	v2 := r.GetVersion() >= 5
	pid, epoch := r.ProducerID, r.ProducerEpoch
	retry := false
	if v2 {
		pid, epoch, retry = c.retried(r) // a retry of the EndTxn that bumped the epoch: checked at the new one
	}
	t, code := c.lookup(r.TransactionalID, pid, epoch, r.GetVersion() >= 2)
	if code != 0 {
		resp.ErrorCode = code
		return resp
	}
	prepared := false // answered at the commit point: t's lock goes to the completion
	defer func() {
		if prepared {
			c.finishing.Add(1)
			go c.finish(t)
			return
		}
		t.mu.Unlock()
	}()
	if v2 {
		defer func() {
			if resp.ErrorCode == 0 {
				resp.ProducerID, resp.ProducerEpoch = t.pid, t.epoch
			}
		}()
	}
	switch t.state {
	case kmsg.TransactionStateOngoing:
		var err error
		if v2 {
			err = c.endV2(t, r.Commit, true)
		} else {
			err = c.end(t, r.Commit, true)
		}
		if err != nil {
			c.opts.Logger.Error("ending a transaction", "transactional_id", t.id, "commit", r.Commit, "err", err)
			resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		}
		prepared = err == nil && (t.state == kmsg.TransactionStatePrepareCommit || t.state == kmsg.TransactionStatePrepareAbort)
	case kmsg.TransactionStateEmpty, kmsg.TransactionStateCompleteCommit, kmsg.TransactionStateCompleteAbort:
		switch {
		case v2 && !r.Commit && !retry:
			// Transactions v2: a producer whose produces all failed aborts
			// a transaction that added nothing. It ends at a new epoch like
			// any other (no partition to write a marker to), as Kafka's.
			if err := c.endV2(t, false, false); err != nil {
				c.opts.Logger.Error("ending a transaction", "transactional_id", t.id, "commit", false, "err", err)
				resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
			}
		case !t.ended(r.Commit):
			resp.ErrorCode = kerr.InvalidTxnState.Code
		} // (else a retry of the same outcome: it succeeds)
	case kmsg.TransactionStatePrepareCommit, kmsg.TransactionStatePrepareAbort:
		resp.ErrorCode = kerr.ConcurrentTransactions.Code
	default:
		resp.ErrorCode = kerr.InvalidTxnState.Code
	}
	return resp
}

// retried reports whether a v5 EndTxn repeats the one that ended its
// transaction at a new epoch (it carries the producer id and epoch from
// before), and returns the id and epoch to check it at: the current ones
// for a retry, its own otherwise.
func (c *Coordinator) retried(r *kmsg.EndTxnRequest) (int64, int16, bool) {
	c.mu.Lock()
	t := c.txns[r.TransactionalID]
	c.mu.Unlock()
	if t != nil {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.ended(r.Commit) && t.prevEpoch >= 0 && r.ProducerID == t.prevPID && r.ProducerEpoch == t.prevEpoch {
			return t.pid, t.epoch, true
		}
	}
	return r.ProducerID, r.ProducerEpoch, false
}

// previous returns the producer id and epoch a transactions-v2 EndTxn
// moved a producer from, as value stored them (epoch -1: none).
func previous(v *kmsg.TxnMetadataValue) (int64, int16) {
	switch {
	case v.ClientTransactionVersion < 2:
		return -1, -1
	case v.PreviousProducerID >= 0 && v.PreviousProducerID != v.ProducerID:
		return v.PreviousProducerID, math.MaxInt16 - 2 // endV2 moves to a new id after that epoch
	case v.ProducerEpoch > 0:
		return v.ProducerID, v.ProducerEpoch - 1
	}
	return -1, -1
}

// ended reports that t's last transaction ended with that outcome.
func (t *txnMeta) ended(commit bool) bool {
	return t.state == kmsg.TransactionStateCompleteCommit && commit || t.state == kmsg.TransactionStateCompleteAbort && !commit
}

// endV2 ends a transaction at a new epoch (transactions v2): the epoch is
// bumped with the Prepare state, the markers carry the new one, and when
// no epoch is left after it the producer gets a new id once the
// transaction is complete.
func (c *Coordinator) endV2(t *txnMeta, commit, prepareOnly bool) error {
	epoch, prevPID, prevEpoch, state := t.epoch, t.prevPID, t.prevEpoch, t.state
	t.prevPID, t.prevEpoch = t.pid, t.epoch // logged with the new state: a retry is known after a restart
	t.epoch++                               // below MaxInt16: InitProducerId and endV2 move to a new id before it
	// The last epoch's completion moves to a new producer id, which the
	// answer carries: it completes before answering.
	prepareOnly = prepareOnly && t.epoch < math.MaxInt16-1
	if err := c.end(t, commit, prepareOnly); err != nil {
		if t.state == state { // nothing logged: as it was
			t.epoch, t.prevPID, t.prevEpoch = epoch, prevPID, prevEpoch
		}
		return err
	}
	return nil
}

// end logs the Prepare state, then completes the transaction — unless
// prepareOnly: EndTxn answers once the Prepare state is durable, Kafka's
// commit point (a restart completes a prepared transaction), and finish
// completes it after.
func (c *Coordinator) end(t *txnMeta, commit, prepareOnly bool) error {
	prev := t.state
	t.state = kmsg.TransactionStatePrepareAbort
	if commit {
		t.state = kmsg.TransactionStatePrepareCommit
	}
	if err := c.persist(t); err != nil {
		t.state = prev
		return err
	}
	if prepareOnly {
		return nil
	}
	return c.complete(t, commit)
}

// finish completes t, which EndTxn prepared and answered, holding t's
// lock EndTxn handed over: the producer's next request for t (its next
// transaction's AddPartitionsToTxn, InitProducerId) waits for the markers
// instead of getting CONCURRENT_TRANSACTIONS and backing off. A failure
// is retried in the background, as in a cluster.
func (c *Coordinator) finish(t *txnMeta) {
	defer c.finishing.Done()
	defer t.mu.Unlock()
	err := c.completeNow(t, t.state == kmsg.TransactionStatePrepareCommit)
	if err != nil && !errors.Is(err, errNotCoordinator) {
		c.opts.Logger.Warn("a transaction's markers are not all written yet: retrying", "transactional_id", t.id, "err", err)
		c.retryLater(t, minMarkerRetry)
	}
}

// writeLocal writes a transaction's markers to the partitions' tablets in
// the data directory, and tells OnMarker of each one written.
func (c *Coordinator) writeLocal(t *txnMeta, commit bool, tps []checkpoint.TopicPartition) ([]error, error) {
	marker, err := record.EndTxnMarker{Type: record.MarkerType(commit), ProducerID: t.pid, ProducerEpoch: t.epoch, CoordinatorEpoch: t.coordEpoch,
		Timestamp: c.opts.Now().UnixMilli()}.AppendTo(nil)
	if err != nil {
		return nil, err
	}
	// The markers go to every partition at once: each partition's append
	// waits for its own fsync, and the fsyncs of different partitions run
	// together (the filesystem commits them in one journal flush where it
	// can) instead of one after another.
	errs := make([]error, len(tps))
	written := make([]bool, len(tps))
	sem := make(chan struct{}, markerWriters)
	var wg sync.WaitGroup
	for i, tp := range tps {
		tab, ok := c.m.Get(tp)
		if !ok {
			continue // the topic was deleted: no marker, as Kafka drops it
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			// A copy each: an append stamps its batch's offsets in place.
			if _, err := tab.Append(slices.Clone(marker), tablet.AppendOptions{Origin: record.OriginCoordinator, Sync: true}); err != nil {
				errs[i] = fmt.Errorf("txn: the marker of %q on %s: %w", t.id, tp, err)
				return
			}
			written[i] = true
		}()
	}
	wg.Wait()
	if c.opts.OnMarker != nil {
		for i, tp := range tps {
			if written[i] {
				c.opts.OnMarker(tp, t.pid, commit)
			}
		}
	}
	return errs, nil
}

// markerWriters bounds the markers of one transaction written at once.
const markerWriters = 16

// complete writes the markers of a prepared transaction, durably, then
// logs its completion. A failure leaves it prepared: completed at the next
// start (or the next attempt). In a cluster, where the outcome is decided
// once logged (as Kafka's coordinator answers EndTxn then), a failure to
// write the markers is retried in the background and complete returns
// nil; the producer meanwhile gets CONCURRENT_TRANSACTIONS.
func (c *Coordinator) complete(t *txnMeta, commit bool) error {
	err := c.completeNow(t, commit)
	if err != nil && c.opts.Cluster != nil && !errors.Is(err, errNotCoordinator) {
		c.opts.Logger.Warn("a transaction's markers are not all written yet: retrying", "transactional_id", t.id, "err", err)
		c.retryLater(t, minMarkerRetry)
		return nil
	}
	return err
}

// completeNow writes the markers of a prepared transaction, then logs its
// completion.
func (c *Coordinator) completeNow(t *txnMeta, commit bool) error {
	tps := make([]checkpoint.TopicPartition, 0, len(t.parts))
	for tp := range t.parts {
		tps = append(tps, tp)
	}
	sort.Slice(tps, func(i, j int) bool {
		return tps[i].Topic < tps[j].Topic || tps[i].Topic == tps[j].Topic && tps[i].Partition < tps[j].Partition
	})
	var errs []error
	if h := c.opts.Cluster; h != nil {
		errs = h.WriteMarkers(Markers{ProducerID: t.pid, ProducerEpoch: t.epoch, CoordinatorEpoch: t.coordEpoch,
			Commit: commit, Partitions: tps})
	} else {
		var err error
		if errs, err = c.writeLocal(t, commit, tps); err != nil {
			return err
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	t.state = kmsg.TransactionStateCompleteAbort
	if commit {
		t.state = kmsg.TransactionStateCompleteCommit
	}
	t.parts = map[checkpoint.TopicPartition]bool{}
	// The completion need not be durable before the next step: lost, a
	// restart finds the transaction prepared and writes its markers again
	// (to partitions where the producer has nothing newer — its next
	// transaction starts with a durable record of this same partition,
	// which covers this one).
	if err := c.persistLazy(t); err != nil {
		return err
	}
	if t.prevEpoch >= 0 && t.epoch == math.MaxInt16-1 {
		// Transactions v2: no epoch is left after this one's; the
		// producer goes on with a new id.
		if err := c.newProducerID(t); err != nil {
			return err
		}
		if err := c.persist(t); err != nil {
			return err
		}
	}
	c.mu.Lock()
	if commit {
		c.stats.Commits++
	} else {
		c.stats.Aborts++
	}
	c.mu.Unlock()
	return nil
}

// Verify says whether transactional id id's producer pid at epoch has
// partition tp in its open transaction: the broker refuses a
// transactional produce that has not (KIP-890's server-side defence: a
// late or stray batch cannot join a transaction that did not add its
// partition). An id coordinated elsewhere is NOT_COORDINATOR (an empty
// id: the producer id's, on a single node).
func (c *Coordinator) Verify(id string, pid int64, epoch int16, tp checkpoint.TopicPartition) int16 {
	return c.verify(id, pid, epoch, tp, false)
}

// VerifyOrAdd is Verify for a transactions-v2 producer (Produce v12+,
// TxnOffsetCommit v5+, KIP-890 part 2), which sends no AddPartitionsToTxn:
// a partition its transaction lacks is added (opening the transaction),
// at the producer's current epoch only.
func (c *Coordinator) VerifyOrAdd(id string, pid int64, epoch int16, tp checkpoint.TopicPartition) int16 {
	return c.verify(id, pid, epoch, tp, true)
}

func (c *Coordinator) verify(id string, pid int64, epoch int16, tp checkpoint.TopicPartition, add bool) int16 {
	c.mu.Lock()
	if id != "" {
		if code := c.log.Code(c.ownedParts, c.PartitionFor(id)); code != 0 {
			c.mu.Unlock()
			return code
		}
	}
	t := c.byPID[pid]
	c.mu.Unlock()
	if t == nil || id != "" && t.id != id {
		return kerr.InvalidProducerIDMapping.Code
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case epoch < t.epoch:
		if add {
			return kerr.ProducerFenced.Code
		}
		return kerr.InvalidProducerEpoch.Code
	case t.state == kmsg.TransactionStateOngoing && t.parts[tp]:
		return 0
	case !add:
		return kerr.InvalidTxnState.Code
	case epoch > t.epoch:
		return kerr.InvalidProducerEpoch.Code
	}
	return c.addPartitions(t, []checkpoint.TopicPartition{tp})
}

// abortLoop aborts the transactions open longer than their timeout, at a
// new epoch (the producer is fenced, as Kafka does), then runs again.
func (c *Coordinator) abortLoop() {
	c.AbortTimedOut()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.timer = time.AfterFunc(c.opts.AbortInterval, c.abortLoop)
	}
}

// AbortTimedOut aborts every transaction open past its timeout, and
// returns how many.
func (c *Coordinator) AbortTimedOut() int {
	c.mu.Lock()
	all := make([]*txnMeta, 0, len(c.txns))
	for _, t := range c.txns {
		all = append(all, t)
	}
	c.mu.Unlock()
	now := c.opts.Now().UnixMilli()
	n := 0
	for _, t := range all {
		t.mu.Lock()
		if t.state == kmsg.TransactionStateOngoing && t.start >= 0 && now-t.start > t.timeout.Milliseconds() {
			err := c.bumpEpoch(t)
			if err == nil {
				err = c.end(t, false, false)
			}
			if err != nil {
				c.opts.Logger.Error("aborting a timed-out transaction", "transactional_id", t.id, "err", err)
			} else {
				n++
				c.opts.Logger.Info("aborted a timed-out transaction", "transactional_id", t.id, "producer_id", t.pid)
			}
		}
		t.mu.Unlock()
	}
	if n > 0 {
		c.mu.Lock()
		c.stats.TimedOut += int64(n)
		c.mu.Unlock()
	}
	return n
}
