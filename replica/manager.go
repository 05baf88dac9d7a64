// Package replica is partition leadership on this broker, with Kafka's
// replication protocol (docs/cluster.md): the Manager follows the
// cluster's metadata (cluster.Member's snapshot) and, for each partition
// this broker holds a replica of, keeps its tablet and its role. As
// leader it tracks each follower's log end from their fetches, moves the
// high watermark to the least log end over the ISR, shrinks and expands
// the ISR, and completes acks=all produces when the high watermark covers
// them. As follower it truncates to the leader (OffsetForLeaderEpoch)
// and fetches from it, one fetcher per leader.
package replica

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sync"
	"time"
	"unicode/utf16"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/cluster"
	"github.com/seglog/seglog/replica/state"
	"github.com/seglog/seglog/tablet"
)

// Options configure a Manager, under Kafka's config names.
type Options struct {
	// Member is this broker's membership in a cluster; Tablets its data
	// directory (required). Without a Member the broker is a single
	// node, a cluster of one: every tablet of the data directory is a
	// partition it leads, alone in its ISR, at the tablet's leader epoch
	// (NodeID is its id); an append is committed at once.
	Member  *cluster.Member
	NodeID  int32
	Tablets *tablet.Manager
	// Config makes a topic's tablet config from the configs set on it in
	// the cluster (nil: the data directory's defaults).
	Config func(configs map[string]string) (*tablet.Config, error)
	// Listener is the listener followers fetch on
	// (inter.broker.listener.name). The default is the first of a
	// broker's endpoints.
	Listener string
	// ClientOpts are added to the followers' Kafka clients (TLS, SASL).
	ClientOpts []kgo.Opt
	// LagTime is replica.lag.time.max.ms (default 30 s): a follower not
	// caught up for longer leaves the ISR.
	LagTime time.Duration
	// FetchMaxBytes is replica.fetch.max.bytes (default 1 MiB), a
	// partition's bound in a follower's fetch; FetchResponseMaxBytes
	// replica.fetch.response.max.bytes (default 10 MiB).
	FetchMaxBytes         int32
	FetchResponseMaxBytes int32
	// FetchWait is replica.fetch.wait.max.ms (default 500 ms).
	FetchWait time.Duration
	// FetchBackoff is replica.fetch.backoff.ms (default 1 s): the longest
	// a partition the leader refused waits before it is fetched again
	// (the first wait is 25 ms, doubling at each refusal in a row).
	FetchBackoff time.Duration
	// MinInsyncReplicas is min.insync.replicas for topics that do not set
	// it (default 1).
	MinInsyncReplicas int
	// Fetchers is num.replica.fetchers (default 1): the fetchers, each
	// with its own connection, that share the partitions followed on one
	// leader (by Kafka's hash of the partition).
	Fetchers int
	// StartFromTier, if set, starts a replica whose leader answers
	// OFFSET_MOVED_TO_TIERED_STORAGE (KIP-405: the offset is below the
	// leader's local log, in the tier) from the tier at the leader's
	// local log start, so that it copies only the local tail; without it
	// such a replica waits, logging why.
	StartFromTier func(ctx context.Context, t *tablet.Tablet, leaderLocalStart int64) error
	// Logger receives the manager's logs. The default is slog.Default().
	Logger *slog.Logger
	// Now is the clock. The default is time.Now.
	Now func() time.Time
}

func (o *Options) defaults() error {
	if o.Tablets == nil {
		return errors.New("replica: a data directory is required")
	}
	if o.LagTime <= 0 {
		o.LagTime = 30 * time.Second
	}
	if o.FetchMaxBytes <= 0 {
		o.FetchMaxBytes = 1 << 20
	}
	if o.FetchResponseMaxBytes <= 0 {
		o.FetchResponseMaxBytes = 10 << 20
	}
	if o.FetchWait <= 0 {
		o.FetchWait = 500 * time.Millisecond
	}
	if o.FetchBackoff <= 0 {
		o.FetchBackoff = time.Second
	}
	if o.MinInsyncReplicas <= 0 {
		o.MinInsyncReplicas = 1
	}
	o.Fetchers = max(o.Fetchers, 1)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return nil
}

// Manager holds this broker's replicas.
type Manager struct {
	opts    Options
	me      int32
	log     *slog.Logger
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	metrics Metrics

	mu       sync.Mutex // guards the fields below
	parts    map[checkpoint.TopicPartition]*Partition
	fetchers map[fetcherKey]*fetcher
	// watch are told of each leadership taken or lost.
	watch []func(tp checkpoint.TopicPartition, t *tablet.Tablet, leading bool)
	// peers are the clients of other brokers' inter-broker endpoints
	// (Send).
	peers map[int32]*peer
	// applied is the snapshot revision the replicas reflect.
	applied cluster.Progress
	// leaderQuota and followerQuota are the replication throttles
	// (throttle.go).
	leaderQuota, followerQuota quota
	// local: a single node (Options.Member nil).
	local bool
}

// localSession is a single node's session: always alive.
const localSession = 1

// New starts following the cluster's metadata: it returns once the
// replicas reflect the member's current snapshot (the strays among the
// data directory's tablets set aside first).
func New(opts Options) (*Manager, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	m := &Manager{opts: opts, me: opts.NodeID, log: opts.Logger, parts: map[checkpoint.TopicPartition]*Partition{},
		fetchers: map[fetcherKey]*fetcher{}, peers: map[int32]*peer{}}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.SetThrottleRates(Unthrottled, Unthrottled)
	if opts.Member == nil {
		m.local = true
		return m, nil // (its partitions are made as they are asked for: Get)
	}
	m.me = opts.Member.NodeID()
	m.setAsideStrays(opts.Member.Snapshot())
	m.reconcile(opts.Member.Snapshot())
	m.wg.Add(2)
	go func() { defer m.wg.Done(); m.follow() }()
	go func() { defer m.wg.Done(); m.shrinkLoop() }()
	return m, nil
}

// Close stops the fetchers and the loops; the tablets stay open (they
// are the data directory's).
func (m *Manager) Close() {
	m.cancel()
	m.wg.Wait()
	m.closePeers()
	m.mu.Lock()
	parts := slices.Collect(maps.Values(m.parts))
	m.mu.Unlock()
	for _, p := range parts {
		var out outside
		p.mu.Lock()
		p.do(p.s.Close(p.local()), &out)
		p.mu.Unlock()
		// (The fetchers are stopped and the coordinators close on their
		// own: nothing is left to tell.)
	}
}

// session is this broker's session while it is certainly alive, else 0:
// a leader acts only in the session it took its leadership in.
func (m *Manager) session() int64 {
	if m.local {
		return localSession
	}
	if !m.opts.Member.Leased() {
		return 0
	}
	return m.opts.Member.Epoch()
}

// Watch tells fn of every leadership this broker takes (leading) or
// loses from now on, and at once of those it holds: what a coordinator
// of an internal topic's partitions follows. fn runs on the manager's
// goroutine: it must not block. Several may watch.
func (m *Manager) Watch(fn func(tp checkpoint.TopicPartition, t *tablet.Tablet, leading bool)) {
	m.mu.Lock()
	m.watch = append(m.watch, fn)
	var led []*Partition
	for _, p := range m.parts {
		led = append(led, p)
	}
	m.mu.Unlock()
	for _, p := range led {
		p.mu.Lock()
		leading := p.s.Role() == state.Leader
		p.mu.Unlock()
		if leading {
			fn(p.tp, p.t, true)
		}
	}
}

// told tells the watcher of a leadership change.
func (m *Manager) told(p *Partition, leading bool) {
	m.mu.Lock()
	fns := m.watch
	m.mu.Unlock()
	for _, fn := range fns {
		fn(p.tp, p.t, leading)
	}
}

// Get returns the partition's replica on this broker. On a single node
// it is the tablet's, made at its first use (and made again for a tablet
// made again: a topic deleted and created).
func (m *Manager) Get(tp checkpoint.TopicPartition) (*Partition, bool) {
	m.mu.Lock()
	p, ok := m.parts[tp]
	m.mu.Unlock()
	if !m.local {
		return p, ok
	}
	t, exists := m.opts.Tablets.Get(tp)
	if ok && exists && p.t == t {
		return p, true
	}
	if ok {
		m.forget(p) // (its tablet went, or was made again)
	}
	if !exists {
		return nil, false
	}
	return m.lead(tp, t), true
}

// Forget drops a single node's replica of a partition whose tablet went
// (its topic deleted): its waiters are answered, and it is no longer
// counted.
func (m *Manager) Forget(tp checkpoint.TopicPartition) {
	if !m.local {
		return
	}
	m.mu.Lock()
	p, ok := m.parts[tp]
	m.mu.Unlock()
	if ok {
		m.forget(p)
	}
}

// forget drops a single node's replica p (if it is still the one held)
// and closes it.
func (m *Manager) forget(p *Partition) {
	m.mu.Lock()
	if m.parts[p.tp] == p {
		delete(m.parts, p.tp)
	}
	m.mu.Unlock()
	p.event(p.s.Close)
}

// lead makes a single node's replica of tablet t: led at the tablet's
// leader epoch (nothing written: the epoch cache takes it at the first
// append at it, as it does on a single node), this
// broker alone in its ISR, its high watermark the tablet's own (the log
// end after each append).
func (m *Manager) lead(tp checkpoint.TopicPartition, t *tablet.Tablet) *Partition {
	p := &Partition{tp: tp, t: t, m: m, changed: make(chan struct{}), fetchingFrom: cluster.NoLeader,
		s: state.New(m.me, m.opts.LagTime), acks: map[uint64]chan int16{}}
	epoch, epochs := t.LeaderEpoch(), t.LeaderEpochs()
	me := []int32{m.me}
	md := state.Meta{Leader: m.me, LeaderEpoch: epoch, ISR: me, Replicas: me, MinISR: 1, MayLead: true, Session: localSession}
	p.st = cluster.PartitionState{Leader: m.me, LeaderEpoch: epoch, ISR: me}
	var out outside
	p.mu.Lock()
	p.do(p.s.SetMeta(md, p.local()), &out)
	p.do(p.s.Led(epochStart(epochs, epoch, t.Offsets().LogEndOffset), p.local()), &out)
	p.mu.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur, ok := m.parts[tp]; ok && cur.t == t {
		return cur // (made meanwhile by another caller)
	}
	m.parts[tp] = p
	return p
}

// Await returns once the replicas reflect etcd revision rev (a topic
// just created has its tablets here); at once on a single node.
func (m *Manager) Await(ctx context.Context, rev int64) error {
	if m.local {
		return nil
	}
	return m.applied.Await(ctx, rev, m.ctx.Done())
}

// follow applies each new snapshot.
func (m *Manager) follow() {
	for {
		ch := m.opts.Member.Changed()
		m.reconcile(m.opts.Member.Snapshot())
		select {
		case <-ch:
		case <-m.ctx.Done():
			return
		}
	}
}

// setAsideStrays moves aside (SetAside: renamed -stray, kept) every local
// tablet the cluster does not assign to this broker — its topic deleted,
// or made again with another id, while the broker was down, or never in
// the cluster — as Kafka does with stray logs at start; not when the
// cluster has no topic at all. Only at start: afterwards the broker sees
// each deletion happen.
func (m *Manager) setAsideStrays(s *cluster.Snapshot) {
	tablets := m.opts.Tablets.Tablets()
	if len(s.Topics) == 0 && len(tablets) > 0 {
		// A cluster of no topic at all is likelier a wrong
		// seglog.etcd.prefix (or a single node's directory joining a new
		// cluster) than one whose every topic went: nothing is moved.
		m.log.Warn("replica: the cluster has no topic, and the data directory has tablets; they are left as they are, and not served",
			"tablets", len(tablets))
		return
	}
	for _, tb := range tablets {
		tp := tb.TopicPartition()
		t, ok := s.Topics[tp.Topic]
		why := ""
		id, hasID := m.opts.Tablets.TopicID(tp.Topic)
		switch {
		case !ok:
			why = "its topic is not in the cluster"
		case hasID && id != checkpoint.TopicID(t.ID):
			why = "its topic is now another (another topic id)"
		case int(tp.Partition) >= len(t.Replicas) || !slices.Contains(t.Replicas[tp.Partition], m.me):
			why = "the partition is not assigned to this broker"
		default:
			continue
		}
		path, err := m.opts.Tablets.SetAside(tp)
		if err != nil {
			m.log.Error("replica: setting aside a stray replica failed", "partition", tp.String(), "err", err)
			continue
		}
		m.log.Warn("replica: a stray replica is set aside, not deleted", "partition", tp.String(), "why", why, "dir", path)
	}
}

// shrinkLoop takes lagging followers out of the ISRs this broker leads,
// checking every half of replica.lag.time.max.ms (as Kafka).
func (m *Manager) shrinkLoop() {
	t := time.NewTicker(m.opts.LagTime / 2)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-m.ctx.Done():
			return
		}
		now := m.opts.Now()
		m.mu.Lock()
		parts := make([]*Partition, 0, len(m.parts))
		for _, p := range m.parts {
			parts = append(parts, p)
		}
		m.mu.Unlock()
		for _, p := range parts {
			p.event(func(l state.Local) state.Actions {
				l.Now = now
				return p.s.Tick(l)
			})
		}
	}
}

// reconcile makes the replicas what the snapshot says: a tablet for each
// partition assigned here (created with the topic's id), each one's role
// and leader; a partition no longer here (its topic deleted, or moved)
// is dropped and its tablet deleted.
func (m *Manager) reconcile(s *cluster.Snapshot) {
	seen := map[checkpoint.TopicPartition]bool{}
	for name, t := range s.Topics {
		for i, reps := range t.Replicas {
			if !slices.Contains(reps, m.me) || i >= len(t.Partitions) {
				continue
			}
			tp := checkpoint.TopicPartition{Topic: name, Partition: int32(i)}
			seen[tp] = true
			m.mu.Lock()
			p := m.parts[tp]
			m.mu.Unlock()
			if p != nil && p.id != t.ID {
				m.drop(p) // (the topic was recreated)
				p = nil
			}
			if p == nil {
				var err error
				if p, err = m.open(tp, t); err != nil {
					m.log.Error("replica: opening a replica failed", "partition", tp.String(), "err", err)
					continue
				}
			}
			m.configure(p, t.Configs)
			m.apply(s, p, t.Partitions[i], reps, cluster.EffectiveMinISR(t.Configs, m.opts.MinInsyncReplicas, len(reps)))
		}
	}
	m.mu.Lock()
	var gone []*Partition
	for tp, p := range m.parts {
		if !seen[tp] {
			gone = append(gone, p)
		}
	}
	m.mu.Unlock()
	for _, p := range gone {
		m.drop(p)
	}
	m.applied.Advance(s.Revision)
}

// configure gives the replica's tablet the topic's configs in the
// cluster when they changed (AlterConfigs through any broker).
func (m *Manager) configure(p *Partition, configs map[string]string) {
	if p.configs != nil && maps.Equal(p.configs, configs) {
		return
	}
	leader, _ := ParseThrottledReplicas(configs["leader.replication.throttled.replicas"]) // (checked when set)
	follower, _ := ParseThrottledReplicas(configs["follower.replication.throttled.replicas"])
	p.mu.Lock()
	p.leaderThrottled, p.followThrottled = leader.Has(p.tp.Partition, m.me), follower.Has(p.tp.Partition, m.me)
	p.mu.Unlock()
	if m.opts.Config == nil {
		p.configs = maps.Clone(configs)
		return
	}
	cfg, err := m.opts.Config(configs)
	if err == nil {
		err = p.t.SetConfig(*cfg)
	}
	if err != nil {
		m.log.Error("replica: applying the topic's configs failed", "partition", p.tp.String(), "err", err)
		return
	}
	p.configs = maps.Clone(configs)
	if p.configs == nil {
		p.configs = map[string]string{}
	}
}

// open gets or creates the partition's tablet, with the topic's id: a
// tablet here of the topic under another id (deleted and recreated while
// this broker was away) is deleted first.
func (m *Manager) open(tp checkpoint.TopicPartition, t *cluster.TopicState) (*Partition, error) {
	id := checkpoint.TopicID(t.ID)
	if have, ok := m.opts.Tablets.TopicID(tp.Topic); ok && have != id {
		for _, old := range m.opts.Tablets.Tablets() {
			if old.TopicPartition().Topic == tp.Topic {
				m.log.Warn("replica: deleting a replica of an older topic of the name", "partition", old.TopicPartition().String(), "topic_id", have.String())
				if err := m.opts.Tablets.Delete(old.TopicPartition()); err != nil {
					return nil, err
				}
			}
		}
	}
	tb, ok := m.opts.Tablets.Get(tp)
	if !ok {
		var cfg *tablet.Config
		if m.opts.Config != nil {
			var err error
			if cfg, err = m.opts.Config(t.Configs); err != nil {
				return nil, err
			}
		}
		var err error
		if tb, err = m.opts.Tablets.CreateWithID(tp, cfg, id); err != nil {
			return nil, err
		}
	}
	if err := tb.SetManualHighWatermark(true); err != nil {
		return nil, err
	}
	p := &Partition{tp: tp, id: t.ID, t: tb, m: m, changed: make(chan struct{}), fetchingFrom: cluster.NoLeader,
		s: state.New(m.me, m.opts.LagTime), acks: map[uint64]chan int16{},
		st: cluster.PartitionState{Leader: cluster.NoLeader, LeaderEpoch: -1, PartitionEpoch: -1}}
	m.mu.Lock()
	m.parts[tp] = p
	m.mu.Unlock()
	return p, nil
}

// drop stops a replica and deletes its tablet.
func (m *Manager) drop(p *Partition) {
	m.unfollow(p)
	m.mu.Lock()
	delete(m.parts, p.tp)
	m.mu.Unlock()
	p.event(p.s.Close)
	// (The files go in the background: a large replica's removal must not
	// hold up the metadata the other replicas follow.)
	if err := m.opts.Tablets.DeleteInBackground(p.tp); err != nil && !errors.Is(err, tablet.ErrNotFound) {
		m.log.Error("replica: deleting a replica failed", "partition", p.tp.String(), "err", err)
	}
}

// apply takes a partition's new state, by the rules of
// state.Partition.SetMeta: leader (at a new epoch: its followers start
// unknown), follower of its leader, or neither. A state naming this
// broker leader is acted on only by the incarnation it was written for
// (docs/cluster.md §2): this broker live (registered under its current
// lease, and unfenced) and the state written after that registration
// (cluster.Snapshot.MayLead). A fetcher of the partition is stopped, and
// its append in flight finished, before the tablet becomes leader.
func (m *Manager) apply(s *cluster.Snapshot, p *Partition, st cluster.PartitionState, replicas []int32, minISR int) {
	epoch := m.opts.Member.Epoch()
	md := state.Meta{Leader: st.Leader, LeaderEpoch: st.LeaderEpoch, PartitionEpoch: st.PartitionEpoch, ISR: st.ISR,
		Replicas: replicas, MinISR: minISR, MayLead: s.MayLead(m.me, epoch, st), Session: epoch}
	p.mu.Lock()
	becoming := p.s.Becoming(md)
	p.mu.Unlock()
	if becoming {
		// The fetcher first: no fetched batch may land after the epoch's
		// start is recorded.
		m.unfollow(p)
		p.appendMu.Lock()
		defer p.appendMu.Unlock()
	}
	var out outside
	p.mu.Lock()
	a := p.s.SetMeta(md, p.local())
	if a.Ignored {
		p.mu.Unlock()
		return // (older than what an ISR change of ours wrote)
	}
	p.st = st
	p.do(a, &out)
	if a.BecomeLeader {
		if err := p.t.BecomeLeader(st.LeaderEpoch); err != nil {
			m.log.Error("replica: becoming leader failed", "partition", p.tp.String(), "err", err)
			p.do(p.s.LeadFailed(p.local()), &out)
		} else {
			m.metrics.LeaderElections.Add(1)
			m.log.Info("replica: leading", "partition", p.tp.String(), "leader_epoch", st.LeaderEpoch, "isr", st.ISR)
			p.do(p.s.Led(epochStart(p.t.LeaderEpochs(), st.LeaderEpoch, p.t.Offsets().LogEndOffset), p.local()), &out)
		}
	}
	p.mu.Unlock()
	p.finish(out)
}

// epochStart is where epoch starts in a log of epochs (its log end if
// the log has no entry for it).
func epochStart(epochs []leaderEpoch, epoch int32, logEnd int64) int64 {
	for i := len(epochs) - 1; i >= 0; i-- {
		if epochs[i].Epoch == epoch {
			return epochs[i].StartOffset
		}
	}
	return logEnd
}

// startFollowing moves the partition to the fetcher of its leader, to be
// truncated first.
func (m *Manager) startFollowing(p *Partition, leader, epoch int32) {
	m.unfollow(p)
	key := fetcherKey{leader, fetcherID(p.tp, m.opts.Fetchers)}
	m.mu.Lock()
	f := m.fetchers[key]
	if f == nil {
		f = newFetcher(m, leader)
		m.fetchers[key] = f
		m.wg.Add(1)
		go func() { defer m.wg.Done(); f.run() }()
	}
	m.mu.Unlock()
	p.mu.Lock()
	p.fetchingFrom = leader
	p.mu.Unlock()
	f.add(p, epoch)
}

// unfollow takes the partition out of its fetcher (its answer in flight
// changes the log only if the rules still follow that leader at that
// epoch: fetcher.hold).
func (m *Manager) unfollow(p *Partition) {
	p.mu.Lock()
	leader := p.fetchingFrom
	p.fetchingFrom = cluster.NoLeader
	p.mu.Unlock()
	if leader == cluster.NoLeader {
		return
	}
	m.mu.Lock()
	f := m.fetchers[fetcherKey{leader, fetcherID(p.tp, m.opts.Fetchers)}]
	m.mu.Unlock()
	if f != nil {
		f.remove(p.tp)
	}
}

// fetcherKey names a fetcher: its leader, and its number among the
// leader's fetchers.
type fetcherKey struct {
	leader int32
	id     int
}

// fetcherID is the fetcher of n that fetches tp, as Kafka picks it: the
// absolute value of 31 × the topic name's Java hash code + the partition,
// modulo n.
func fetcherID(tp checkpoint.TopicPartition, n int) int {
	if n <= 1 {
		return 0
	}
	var h int32
	for _, c := range utf16.Encode([]rune(tp.Topic)) {
		h = 31*h + int32(c)
	}
	v := 31*h + tp.Partition
	switch { // (Kafka's Utils.abs)
	case v == math.MinInt32:
		v = 0
	case v < 0:
		v = -v
	}
	return int(v) % n
}

// Fetchers is how many fetchers this broker runs (one per leader and
// fetcher number that it follows partitions of).
func (m *Manager) Fetchers() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.fetchers)
}
