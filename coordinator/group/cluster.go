package group

import (
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/coordinator/internal/store"
	"github.com/seglog/seglog/tablet"
)

// ClusterHooks make the coordinator a cluster's (docs/cluster.md): the
// groups of a __consumer_offsets partition are coordinated by the
// partition's leader, which loads them when it becomes leader (Load) and
// drops them when it is not any more (Unload); its writes wait for the
// partition's in-sync replicas.
type ClusterHooks struct {
	// Hooks reach the cluster's __consumer_offsets: a partition's tablet
	// where this broker leads it, the wait for its ISR, its creation and
	// its partition count.
	Hooks
	// Topics are the cluster's topics (a consumer group's subscriptions
	// resolve to them, not to this broker's replicas).
	Topics Topics
}

// Hooks make a coordinator's internal topic a cluster's.
type Hooks = store.Hooks

// Topics is where the coordinator learns the topics a consumer group
// subscribes to: the data directory's (a tablet.Manager), or a cluster's.
type Topics interface {
	TopicPartitions(name string) (checkpoint.TopicID, int32, bool)
	// TopicsVersion changes whenever a topic comes, goes or grows.
	TopicsVersion() uint64
	TopicNames() []string
	TopicByID(id checkpoint.TopicID) (string, bool)
}

// clustered sets up the coordinator of a cluster: no partition is owned
// until Load.
func (c *Coordinator) clustered(h *ClusterHooks) {
	if h.Topics != nil {
		c.topics = h.Topics
	}
	c.log.Clustered(&h.Hooks)
	c.ownedParts = store.Ownership{}
}

// Owns answers whether this coordinator coordinates the group: 0, or
// NOT_COORDINATOR, or COORDINATOR_LOAD_IN_PROGRESS while its partition
// loads. A coordinator of a single node owns every group.
func (c *Coordinator) Owns(id string) int16 {
	return c.OwnsPartition(PartitionFor(id, c.log.Partitions()))
}

// OwnsPartition is Owns for the groups of __consumer_offsets partition p:
// a transaction's marker there is refused until they are loaded, since
// the marker settles their pending transactional offsets.
func (c *Coordinator) OwnsPartition(p int32) int16 {
	c.mu.Lock()
	code := c.log.Code(c.ownedParts, p)
	c.mu.Unlock()
	return store.LoadingIfElected(code, func() bool { return c.log.Elected(p) })
}

// Load starts loading the groups of __consumer_offsets partition p from
// its tablet, as the partition's new leader: requests for them are
// COORDINATOR_LOAD_IN_PROGRESS from now until the returned function,
// which replays the partition, has run (nil: nothing to load). An Unload
// meanwhile wins.
func (c *Coordinator) Load(p int32, t *tablet.Tablet) func() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ownedParts == nil || c.ownedParts[p] != store.Unowned {
		return nil
	}
	c.ownedParts[p] = store.Loading
	return func() error { return c.finishLoad(p, t) }
}

func (c *Coordinator) finishLoad(p int32, t *tablet.Tablet) error {
	err := c.loadFrom(map[int32]*tablet.Tablet{p: t})
	c.mu.Lock()
	if err != nil || c.ownedParts[p] != store.Loading { // (unloaded meanwhile)
		delete(c.ownedParts, p)
		c.mu.Unlock()
		c.Unload(p)
		return err
	}
	c.ownedParts[p] = store.Owned
	c.mu.Unlock()
	return nil
}

// Unload drops the groups of partition p (this broker no longer leads
// it): their members' timers stop, and requests for them are
// NOT_COORDINATOR.
func (c *Coordinator) Unload(p int32) {
	c.mu.Lock()
	if c.ownedParts != nil {
		delete(c.ownedParts, p)
	}
	var gone []*group
	for id, g := range c.groups {
		if g.partition == p {
			gone = append(gone, g)
			delete(c.groups, id)
		}
	}
	for pid, gs := range c.txnGroups {
		for g := range gs {
			if g.partition == p {
				delete(gs, g)
			}
		}
		if len(gs) == 0 {
			delete(c.txnGroups, pid)
		}
	}
	c.mu.Unlock()
	for _, g := range gone {
		g.mu.Lock()
		g.stopTimers()
		g.endWaits(kerr.NotCoordinator.Code) // (waiting members go to the new coordinator)
		g.state = Dead
		g.mu.Unlock()
	}
}
