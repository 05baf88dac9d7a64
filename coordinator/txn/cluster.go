package txn

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/coordinator/internal/store"
	"github.com/seglog/seglog/tablet"
)

// ClusterHooks make the coordinator a cluster's (docs/cluster.md): the
// transactional ids of a __transaction_state partition are coordinated by
// the partition's leader, which loads them when it becomes leader (Load)
// and drops them when it is not any more (Unload); its writes wait for the
// partition's in-sync replicas, and its markers go to the leaders of the
// transactions' partitions.
type ClusterHooks struct {
	// Hooks reach the cluster's __transaction_state: a partition's tablet
	// where this broker leads it, the wait for its ISR, its creation and
	// its partition count.
	Hooks
	// WriteMarkers writes one transaction's markers to the leaders of its
	// partitions (WriteTxnMarkers) and returns each partition's error, in
	// the order of m.Partitions: nil when it is written with acks=all, or
	// when the partition does not exist any more (its marker is dropped, as
	// Kafka drops it).
	WriteMarkers func(m Markers) []error
}

// Hooks make a coordinator's internal topic a cluster's.
type Hooks = store.Hooks

// Markers are the markers of one transaction's end.
type Markers struct {
	ProducerID    int64
	ProducerEpoch int16
	// CoordinatorEpoch is the coordinator's: the leader epoch of its
	// __transaction_state partition. A partition refuses markers of a
	// coordinator older than the last one it took
	// (TRANSACTION_COORDINATOR_FENCED).
	CoordinatorEpoch int32
	Commit           bool
	Partitions       []checkpoint.TopicPartition
}

// clustered sets up the coordinator of a cluster: no partition is owned
// until Load.
func (c *Coordinator) clustered(h *ClusterHooks) {
	c.log.Clustered(&h.Hooks)
	c.ownedParts = store.Ownership{}
	c.epochs = map[int32]int32{}
}

// PartitionFor is the __transaction_state partition of a transactional
// id.
func (c *Coordinator) PartitionFor(id string) int32 {
	return store.PartitionFor(id, c.log.Partitions())
}

// Owns answers whether this coordinator coordinates the transactional id:
// 0, or NOT_COORDINATOR, or COORDINATOR_LOAD_IN_PROGRESS while its
// partition loads. A coordinator of a single node owns every id.
func (c *Coordinator) Owns(id string) int16 {
	p := c.PartitionFor(id)
	c.mu.Lock()
	code := c.log.Code(c.ownedParts, p)
	c.mu.Unlock()
	return store.LoadingIfElected(code, func() bool { return c.log.Elected(p) })
}

// current reports whether t is still coordinated here as it was loaded
// (its partition owned at the coordinator epoch t was loaded or created
// at); a t unloaded meanwhile must not be written.
func (c *Coordinator) current(t *txnMeta) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ownedParts == nil || c.ownedParts[t.partition] == store.Owned && c.epochs[t.partition] == t.coordEpoch
}

// Load starts loading the transactional ids of __transaction_state
// partition p from its tablet, as the partition's new leader at leader
// epoch epoch (the coordinator epoch its markers carry): requests for them
// are COORDINATOR_LOAD_IN_PROGRESS until the returned function, which
// replays the partition, has run (nil: nothing to load). The function then
// completes the transactions the partition has prepared (their markers
// written again), as Kafka's new coordinator does. An Unload meanwhile
// wins.
func (c *Coordinator) Load(p int32, t *tablet.Tablet, epoch int32) func() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ownedParts == nil || c.ownedParts[p] != store.Unowned {
		return nil
	}
	c.ownedParts[p], c.epochs[p] = store.Loading, epoch
	return func() error { return c.finishLoad(p, t, epoch) }
}

func (c *Coordinator) finishLoad(p int32, tab *tablet.Tablet, epoch int32) error {
	txns, err := c.loadPartition(p, tab)
	c.mu.Lock()
	if err != nil || c.ownedParts[p] != store.Loading || c.epochs[p] != epoch { // (unloaded meanwhile)
		if c.ownedParts[p] == store.Loading && c.epochs[p] == epoch {
			delete(c.ownedParts, p)
		}
		c.mu.Unlock()
		return err
	}
	for id, t := range txns {
		t.coordEpoch = epoch
		c.txns[id] = t
		c.byPID[t.pid] = t
	}
	c.ownedParts[p] = store.Owned
	c.mu.Unlock()
	if len(txns) > 0 {
		c.opts.Logger.Info("loaded the transactional ids of a partition", "partition", p, "coordinator_epoch", epoch, "ids", len(txns))
	}
	for _, t := range txns {
		c.completePrepared(t)
	}
	return nil
}

// Unload drops the transactional ids of partition p (this broker no
// longer leads it): requests for them are NOT_COORDINATOR.
func (c *Coordinator) Unload(p int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ownedParts == nil {
		return
	}
	delete(c.ownedParts, p)
	for id, t := range c.txns {
		if t.partition == p {
			delete(c.txns, id)
			if c.byPID[t.pid] == t {
				delete(c.byPID, t.pid)
			}
		}
	}
}

// completePrepared completes t if it is prepared (its markers written
// again).
func (c *Coordinator) completePrepared(t *txnMeta) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch t.state {
	case kmsg.TransactionStatePrepareCommit, kmsg.TransactionStatePrepareAbort:
		commit := t.state == kmsg.TransactionStatePrepareCommit
		c.opts.Logger.Info("completing a transaction left prepared", "transactional_id", t.id, "commit", commit)
		if err := c.complete(t, commit); err != nil {
			c.opts.Logger.Error("completing a transaction left prepared", "transactional_id", t.id, "err", err)
		}
	}
}

// Backoffs of a cluster's retried marker writes.
const (
	minMarkerRetry = 100 * time.Millisecond
	maxMarkerRetry = 5 * time.Second
)

// retryLater completes prepared t again after wait (doubled each time,
// up to maxMarkerRetry), while it is still prepared and coordinated
// here: the markers of a transaction whose outcome is logged are written
// in the end, as Kafka's marker channel retries them.
func (c *Coordinator) retryLater(t *txnMeta, wait time.Duration) {
	time.AfterFunc(wait, func() {
		c.mu.Lock()
		closed := c.closed
		c.mu.Unlock()
		if closed || !c.current(t) {
			return
		}
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.state != kmsg.TransactionStatePrepareCommit && t.state != kmsg.TransactionStatePrepareAbort {
			return
		}
		if err := c.completeNow(t, t.state == kmsg.TransactionStatePrepareCommit); err != nil {
			c.opts.Logger.Warn("writing a transaction's markers again", "transactional_id", t.id, "err", err)
			c.retryLater(t, min(2*wait, maxMarkerRetry))
		}
	})
}
