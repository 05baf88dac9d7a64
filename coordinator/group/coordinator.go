// Package group is the consumer group coordinator: Kafka's classic group
// protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup), committed
// offsets (OffsetCommit, OffsetFetch, OffsetDelete) and group
// administration (DescribeGroups, ListGroups, DeleteGroups), with its state
// in the compacted internal topic __consumer_offsets in Kafka's own record
// formats, so that a seglog data directory holds what Kafka would have
// written. Requests and responses are franz-go's kmsg types; the broker
// decodes and encodes them.
//
// A group lives in the __consumer_offsets partition PartitionFor gives.
// Every change a group makes to its log — an offset commit, the group's
// metadata after a rebalance, deletions — is appended with Sync before it
// is answered or applied, and New replays the partitions at start, so a
// restart resumes every group: its members, generation and assignments,
// and its offsets.
package group

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/coordinator/internal/store"
	"github.com/seglog/seglog/tablet"
)

// Options configure a coordinator under Kafka's broker config names.
type Options struct {
	// Cluster, if set, makes the coordinator a cluster's: it coordinates
	// the groups of the __consumer_offsets partitions it Loads. The
	// default is nil: every group of the data directory.
	Cluster *ClusterHooks
	// Partitions is offsets.topic.num.partitions, for a topic not created
	// yet (an existing one keeps its count). The default is 50.
	Partitions int32
	// SegmentBytes is offsets.topic.segment.bytes. The default is
	// 104857600.
	SegmentBytes int64
	// InitialRebalanceDelay is group.initial.rebalance.delay.ms: an empty
	// group's first rebalance waits this long for more members. The
	// default is 3 s; NoInitialDelay makes it 0.
	InitialRebalanceDelay time.Duration
	NoInitialDelay        bool
	// MinSessionTimeout and MaxSessionTimeout are
	// group.min.session.timeout.ms and group.max.session.timeout.ms. The
	// defaults are 6 s and 30 min.
	MinSessionTimeout, MaxSessionTimeout time.Duration
	// MaxSize is group.max.size. The default is MaxInt32.
	MaxSize int
	// Retention is offsets.retention.minutes: how long an empty group's
	// offsets (or a standalone consumer's) stay. The default is 7 days.
	Retention time.Duration
	// RetentionCheckInterval is offsets.retention.check.interval.ms. The
	// default is 10 minutes.
	RetentionCheckInterval time.Duration
	// MaxMetadataBytes is offset.metadata.max.bytes. The default is 4096.
	MaxMetadataBytes int
	// TopicExists says whether a partition exists, for OffsetCommit (an
	// unknown one is UNKNOWN_TOPIC_OR_PARTITION). The default is the
	// manager's tablets.
	TopicExists func(topic string, partition int32) bool
	// ReadOnly loads the groups for inspection only (a read-only data
	// directory): no session timers, no expiry, nothing written.
	ReadOnly bool
	// LoadInBackground returns from New at once and loads the groups
	// after, partition by partition, as Kafka's coordinator does: a
	// request for a group of a partition not loaded yet is
	// COORDINATOR_LOAD_IN_PROGRESS (clients retry), ListGroups says so
	// too, and Loaded is closed when every partition is loaded. A
	// partition that fails to load is logged and stays loading: its
	// groups are refused, never served without their commits.
	LoadInBackground bool
	// ConsumerSessionTimeout is group.consumer.session.timeout.ms: a
	// consumer group member without a heartbeat for this long is removed.
	// The default is 45 s.
	ConsumerSessionTimeout time.Duration
	// ConsumerHeartbeatInterval is group.consumer.heartbeat.interval.ms,
	// which consumer group members are told to heartbeat at. The default
	// is 5 s.
	ConsumerHeartbeatInterval time.Duration
	// ConsumerAssignors is group.consumer.assignors: the server-side
	// assignors, the first the default. The default is uniform, range.
	ConsumerAssignors []string
	// ConsumerMaxSize is group.consumer.max.size. The default is
	// MaxInt32.
	ConsumerMaxSize int
	// MigrationPolicy is group.consumer.migration.policy: whether a
	// classic group may become a consumer group when a member upgrades
	// (upgrade), a consumer group of classic members a classic group again
	// (downgrade), both (bidirectional, the default) or neither
	// (disabled).
	MigrationPolicy string
	// Logger receives load and expiry reports. The default is
	// slog.Default().
	Logger *slog.Logger

	clock    clock         // tests' time; the default is the real one
	loadHook func(p int32) // tests: called before partition p loads
}

func (o *Options) ensureDefaults(m *tablet.Manager) {
	if o.Partitions <= 0 {
		o.Partitions = 50
	}
	if o.SegmentBytes <= 0 {
		o.SegmentBytes = 100 << 20
	}
	if o.InitialRebalanceDelay <= 0 {
		o.InitialRebalanceDelay = 3 * time.Second
	}
	if o.NoInitialDelay {
		o.InitialRebalanceDelay = 0
	}
	if o.MinSessionTimeout <= 0 {
		o.MinSessionTimeout = 6 * time.Second
	}
	if o.MaxSessionTimeout <= 0 {
		o.MaxSessionTimeout = 30 * time.Minute
	}
	if o.MaxSize <= 0 {
		o.MaxSize = math.MaxInt32
	}
	if o.Retention <= 0 {
		o.Retention = 7 * 24 * time.Hour
	}
	if o.RetentionCheckInterval <= 0 {
		o.RetentionCheckInterval = 10 * time.Minute
	}
	if o.MaxMetadataBytes <= 0 {
		o.MaxMetadataBytes = 4096
	}
	if o.TopicExists == nil {
		o.TopicExists = store.TopicExists(m)
	}
	if o.ConsumerSessionTimeout <= 0 {
		o.ConsumerSessionTimeout = 45 * time.Second
	}
	if o.ConsumerHeartbeatInterval <= 0 {
		o.ConsumerHeartbeatInterval = 5 * time.Second
	}
	if len(o.ConsumerAssignors) == 0 {
		o.ConsumerAssignors = []string{"uniform", "range"}
	}
	if o.MigrationPolicy == "" {
		o.MigrationPolicy = MigrationBidirectional
	}
	if o.ConsumerMaxSize <= 0 {
		o.ConsumerMaxSize = math.MaxInt32
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.clock == nil {
		o.clock = realClock{}
	}
}

// Coordinator is every group's coordinator on one data directory.
type Coordinator struct {
	m *tablet.Manager
	// topics are the topics subscriptions resolve to (m, or a cluster's).
	topics Topics
	opts   Options
	log    *store.Log

	mu     sync.Mutex // guards the fields below
	groups map[string]*group
	// txnGroups are, by producer id, the groups where it has transactional
	// offsets pending: what its markers apply or drop.
	txnGroups map[int64]map[*group]bool
	// owned are, in a cluster, the partitions this coordinator loads or
	// has loaded (nil: a single node's, which owns every one).
	ownedParts store.Ownership
	// loaded is closed once the groups are loaded (a single node; in a
	// cluster, nil: partitions load as their leadership comes); loading
	// counts a background load.
	loaded  chan struct{}
	loading sync.WaitGroup
	// deferred holds, by partition, the transaction markers written while
	// the partition's groups were loading.
	deferred map[int32][]deferredMarker
	closed   bool
	shut     atomic.Bool // closed, for the timers
	expiry   stopper
	stats    stats
}

// ErrClosed is returned once the coordinator is closed.
var ErrClosed = seglog.NewKafkaError("group: coordinator closed", 15)

// New returns the coordinator of the manager's data directory, with every
// group loaded from __consumer_offsets if the topic exists (it is created
// by the first request that needs it, as Kafka does).
func New(m *tablet.Manager, opts Options) (*Coordinator, error) {
	opts.ensureDefaults(m)
	for _, a := range opts.ConsumerAssignors {
		if _, ok := assignors[a]; !ok {
			return nil, fmt.Errorf("group: %q is not an assignor (uniform, range)", a)
		}
	}
	c := &Coordinator{m: m, topics: m, opts: opts, groups: map[string]*group{}, txnGroups: map[int64]map[*group]bool{}}
	c.log = store.Open(m, Topic, opts.Partitions, opts.SegmentBytes)
	switch {
	case opts.Cluster != nil:
		c.clustered(opts.Cluster)
	case opts.LoadInBackground && !opts.ReadOnly:
		c.loadInBackground()
	default:
		if err := c.load(); err != nil {
			return nil, err
		}
		c.loaded = closedChan
	}
	if !opts.ReadOnly {
		c.scheduleExpiry()
	}
	return c, nil
}

// Close stops the coordinator's timers. Members waiting for a join or a
// sync stay waiting until their request's context ends.
func (c *Coordinator) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.shut.Store(true)
	if c.expiry != nil {
		c.expiry.Stop()
	}
	c.mu.Unlock()
	c.loading.Wait() // a background load stops at its next partition
	for _, g := range c.sortedGroups() {
		g.mu.Lock()
		g.stopTimers()
		g.mu.Unlock()
	}
	return nil
}

// endWaits answers every member waiting for a join or a sync with code.
func (g *group) endWaits(code int16) {
	for _, m := range g.members {
		if m.joinWait != nil {
			m.joinWait <- joinError(code, m.id)
			m.joinWait = nil
		}
	}
	g.failSyncs(code)
}

// stopTimers stops the group's timers: its members' sessions, its
// pending timers, its join and sync timers.
func (g *group) stopTimers() {
	for _, m := range g.members {
		if m.timer != nil {
			m.timer.Stop()
		}
	}
	for _, t := range g.pending {
		t.Stop()
	}
	for _, t := range []stopper{g.joinTimer, g.syncTimer} {
		if t != nil {
			t.Stop()
		}
	}
}

// Partitions is the number of __consumer_offsets partitions.
func (c *Coordinator) Partitions() int32 { return c.log.Partitions() }

// lookup returns a group, locked, creating it when create; nil if it
// does not exist (or is dead).
func (c *Coordinator) lookup(id string, create bool) *group {
	c.mu.Lock()
	g := c.groups[id]
	if g == nil && create && !c.closed {
		g = newGroup(id, PartitionFor(id, c.log.Partitions()), c.opts.clock.Now())
		c.groups[id] = g
	}
	c.mu.Unlock()
	if g == nil {
		return nil
	}
	g.mu.Lock()
	if g.state == Dead {
		g.mu.Unlock()
		return nil
	}
	return g
}

// forget drops a dead group, unless it came back meanwhile.
func (c *Coordinator) forget(g *group) {
	c.mu.Lock()
	if c.groups[g.id] == g {
		delete(c.groups, g.id)
	}
	c.mu.Unlock()
}

// sortedGroups returns the groups, by id.
func (c *Coordinator) sortedGroups() []*group {
	c.mu.Lock()
	out := make([]*group, 0, len(c.groups))
	for _, g := range c.groups {
		out = append(out, g)
	}
	c.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// wait blocks for a join or sync response, or the request's end.
func wait[T any](ctx context.Context, ch <-chan T) (T, error) {
	select {
	case v := <-ch:
		return v, nil
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// Ensure creates __consumer_offsets if it does not exist yet.
func (c *Coordinator) Ensure() error {
	return c.log.Ensure()
}
