package group

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/tablet"

	"github.com/seglog/seglog/coordinator/internal/store"
)

// load replays every __consumer_offsets partition: the last record of
// each key wins, a tombstone deletes. A group with members in its last
// metadata comes back Stable with them (their sessions start now), so
// consumers that keep heartbeating with their generation go on without a
// rebalance; one without members comes back Empty.
func (c *Coordinator) load() error {
	return c.loadFrom(c.existing())
}

// existing returns the __consumer_offsets partitions that have a tablet.
func (c *Coordinator) existing() map[int32]*tablet.Tablet {
	tabs := map[int32]*tablet.Tablet{}
	for p, t := range c.log.Existing() {
		if t != nil {
			tabs[int32(p)] = t
		}
	}
	return tabs
}

// loadInBackground loads every partition after New returns: until a
// partition is loaded its groups are COORDINATOR_LOAD_IN_PROGRESS (the
// ownership a cluster's coordinator keeps, every partition this node's);
// once all are, the node owns every group again.
func (c *Coordinator) loadInBackground() {
	tabs := c.existing()
	c.ownedParts = store.Ownership{}
	for p := range int32(c.log.Partitions()) {
		c.ownedParts[p] = store.Owned
		if tabs[p] != nil {
			c.ownedParts[p] = store.Loading
		}
	}
	c.loaded = make(chan struct{})
	c.loading.Add(1)
	go func() {
		defer c.loading.Done()
		var failed atomic.Bool
		err := c.eachPartition(tabs, func(p int32, err error) {
			if err != nil {
				failed.Store(true)
				c.opts.Logger.Error("loading consumer groups: the partition's groups stay COORDINATOR_LOAD_IN_PROGRESS",
					"partition", fmt.Sprintf("%s-%d", Topic, p), "err", err)
				return
			}
			c.ownLoaded(p)
		})
		if err != nil || failed.Load() {
			return
		}
		c.mu.Lock()
		c.ownedParts = nil // a single node owns every group
		c.mu.Unlock()
		close(c.loaded)
	}()
}

// Loaded is closed once every group is loaded (at once unless
// LoadInBackground; never in a cluster, whose partitions load as their
// leadership comes).
func (c *Coordinator) Loaded() <-chan struct{} { return c.loaded }

var closedChan = func() chan struct{} { ch := make(chan struct{}); close(ch); return ch }()

// loadFrom replays the given __consumer_offsets partitions and installs
// their groups, a partition per CPU at once (a group's records are all in
// its partition).
func (c *Coordinator) loadFrom(tabs map[int32]*tablet.Tablet) error {
	var mu sync.Mutex
	var errs []error
	err := c.eachPartition(tabs, func(_ int32, err error) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, err)
	})
	return errors.Join(append(errs, err)...)
}

// eachPartition loads the partitions, a partition per CPU at once, and
// calls done after each; it stops early, with ErrClosed, when the
// coordinator closes.
func (c *Coordinator) eachPartition(tabs map[int32]*tablet.Tablet, done func(p int32, err error)) error {
	start := time.Now()
	parts := slices.Sorted(maps.Keys(tabs))
	var next, groups, records atomic.Int64
	var wg sync.WaitGroup
	for range min(len(parts), runtime.GOMAXPROCS(0)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(len(parts)) && !c.shut.Load(); i = next.Add(1) - 1 {
				p := parts[i]
				if c.opts.loadHook != nil {
					c.opts.loadHook(p)
				}
				g, r, err := c.loadPartition(p, tabs[p])
				groups.Add(int64(g))
				records.Add(int64(r))
				done(p, err)
			}
		}()
	}
	wg.Wait()
	if c.shut.Load() {
		return ErrClosed
	}
	if records.Load() > 0 {
		c.opts.Logger.Info("loaded consumer groups", "groups", groups.Load(), "records", records.Load(),
			"partitions", len(parts), "took", time.Since(start).Round(time.Millisecond))
	}
	return nil
}

// loading is a group as its partition's records rebuild it.
type loading struct {
	g    *group
	meta *Decoded
	cg   *consumerGroup // a consumer group's state
}

// loadPartition replays __consumer_offsets partition p and installs its
// groups; it returns how many groups and records it read. Offset commits,
// most of the records, take a path that allocates nothing but their
// group (once) and their map entry: the key is read in place, the group
// and topic names interned.
func (c *Coordinator) loadPartition(p int32, t *tablet.Tablet) (int, int, error) {
	now := c.opts.clock.Now()
	all := map[string]*loading{}
	topics := map[string]string{}
	get := func(id []byte) *loading {
		l := all[string(id)]
		if l == nil {
			g := newGroup(string(id), PartitionFor(string(id), c.log.Partitions()), now)
			l = &loading{g: g}
			all[g.id] = l
		}
		return l
	}
	topic := func(name []byte) string {
		s, ok := topics[string(name)]
		if !ok {
			s = string(name)
			topics[s] = s
		}
		return s
	}
	var records int
	// The groups with a producer's open transactional commits in this
	// partition, for its marker.
	open := map[int64]map[string]bool{}
	commit := func(b record.Batch, l *loading, tp topicPartition, o *Offset) {
		g := l.g
		switch {
		case o == nil:
			delete(g.offsets, tp)
		case !b.IsTransactional():
			g.offsets[tp] = *o
		default:
			pid := b.ProducerID()
			if g.pendingTxn[pid] == nil {
				put(&g.pendingTxn, pid, map[topicPartition]Offset{})
			}
			g.pendingTxn[pid][tp] = *o
			if open[pid] == nil {
				open[pid] = map[string]bool{}
			}
			open[pid][g.id] = true
		}
	}
	data := func(b record.Batch, r *record.Record) error {
		records++
		if k, ok := parseOffsetKey(r.Key); ok {
			l := get(k.group)
			tp := topicPartition{topic(k.topic), k.partition}
			if r.Value == nil {
				commit(b, l, tp, nil)
				return nil
			}
			o, err := decodeOffsetValue(r.Value, r.Offset)
			if err != nil {
				return fmt.Errorf("group: %s-%d offset %d: offset commit value of %s %s-%d: %w", Topic, p, r.Offset,
					k.group, k.topic, k.partition, err)
			}
			commit(b, l, tp, &o)
			return nil
		}
		d, err := Decode(r.Key, r.Value)
		if err != nil {
			return fmt.Errorf("group: %s-%d offset %d: %w", Topic, p, r.Offset, err)
		}
		l := get([]byte(d.Group))
		switch {
		case d.Consumer != nil:
			if l.cg != nil || d.Consumer.Value {
				l.cg = l.cg.replay(d.Consumer)
			}
		case d.Metadata == nil:
			l.meta = nil
			if len(l.g.offsets) == 0 && len(l.g.pendingTxn) == 0 && l.cg == nil {
				delete(all, d.Group)
			}
		default:
			dd := d
			l.meta = &dd
		}
		return nil
	}
	marker := func(b record.Batch, commit bool) error {
		pid := b.ProducerID()
		for id := range open[pid] {
			if l := all[id]; l != nil {
				if commit {
					applyPending(l.g.offsets, l.g.pendingTxn[pid])
				}
				delete(l.g.pendingTxn, pid)
			}
		}
		delete(open, pid)
		return nil
	}
	if err := store.Replay(t, data, marker); err != nil {
		return 0, records, fmt.Errorf("group: reading %s-%d: %w", Topic, p, err)
	}
	loaded := 0
	for id, l := range all {
		g := l.g
		if len(g.offsets) == 0 && l.meta == nil && len(g.pendingTxn) == 0 && l.cg == nil {
			continue
		}
		loaded++
		for pid := range g.pendingTxn {
			c.notePending(pid, g)
		}
		if l.meta != nil {
			v := l.meta.Metadata
			g.protocolType, g.generation = v.ProtocolType, v.Generation
			g.protocol, g.leader = deref(v.Protocol), deref(v.Leader)
			if v.CurrentStateTimestamp > 0 {
				g.stateTime = v.CurrentStateTimestamp
			}
			for _, vm := range v.Members {
				m := &member{id: vm.MemberID, instanceID: deref(vm.InstanceID), clientID: vm.ClientID, clientHost: vm.ClientHost,
					sessionTimeout: ms(vm.SessionTimeoutMillis), rebalanceTimeout: ms(vm.RebalanceTimeoutMillis),
					protocolType: v.ProtocolType, protocols: []protocol{{name: g.protocol, metadata: vm.Subscription}},
					assignment: vm.Assignment}
				if m.rebalanceTimeout <= 0 {
					m.rebalanceTimeout = m.sessionTimeout
				}
				g.add(m)
				g.leader = deref(v.Leader)
			}
		}
		if len(g.members) > 0 {
			g.state = Stable
			for _, m := range g.members {
				c.heartbeat(g, m)
			}
		}
		if l.cg != nil {
			c.loadConsumer(g, l.cg)
		}
		c.mu.Lock()
		c.groups[id] = g
		c.mu.Unlock()
	}
	return loaded, records, nil
}

// offsetKeyView is an offset commit's key read in place.
type offsetKeyView struct {
	group, topic []byte
	partition    int32
}

// parseOffsetKey reads an offset commit's key (versions 0 and 1: group,
// topic, partition) in place; false for any other key, or a malformed
// one (Decode then says what is wrong).
func parseOffsetKey(key []byte) (offsetKeyView, bool) {
	if len(key) < 2 {
		return offsetKeyView{}, false
	}
	if v := int16(binary.BigEndian.Uint16(key)); v != keyOffsetV0 && v != keyOffsetV1 {
		return offsetKeyView{}, false
	}
	str := func(b []byte) ([]byte, []byte, bool) {
		if len(b) < 2 {
			return nil, nil, false
		}
		n := int(int16(binary.BigEndian.Uint16(b)))
		if n < 0 || len(b) < 2+n {
			return nil, nil, false
		}
		return b[2 : 2+n], b[2+n:], true
	}
	group, rest, ok := str(key[2:])
	if !ok {
		return offsetKeyView{}, false
	}
	topic, rest, ok := str(rest)
	if !ok || len(rest) != 4 {
		return offsetKeyView{}, false
	}
	return offsetKeyView{group: group, topic: topic, partition: int32(binary.BigEndian.Uint32(rest))}, true
}

// decodeOffsetValue reads an offset commit's value (any version) as the
// record at offset at of __consumer_offsets holds it.
func decodeOffsetValue(value []byte, at int64) (Offset, error) {
	v, err := readOffsetValue(value)
	if err != nil {
		return Offset{}, err
	}
	o := Offset{Offset: v.Offset, LeaderEpoch: v.LeaderEpoch, Metadata: v.Metadata,
		CommitTimestamp: v.CommitTimestamp, ExpireTimestamp: -1, at: at}
	if v.Version == 1 {
		o.ExpireTimestamp = v.ExpireTimestamp
	}
	return o, nil
}

// scheduleExpiry runs the offset expiry every
// offsets.retention.check.interval.ms.
func (c *Coordinator) scheduleExpiry() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.expiry = c.after(c.opts.RetentionCheckInterval, func() {
		c.ExpireOffsets()
		c.scheduleExpiry()
	})
}

// ExpireOffsets deletes expired offsets (tombstones), as Kafka does: an
// empty group's once offsets.retention.minutes passed since it became
// empty, a standalone consumer's (a group without a protocol) that long
// after each commit, a consumer group's offsets of topics no member
// subscribes to that long after their commit, and any commit past its own
// expiry. An empty group left with no offsets is deleted. It returns the
// number of offsets deleted.
func (c *Coordinator) ExpireOffsets() int {
	now := c.opts.clock.Now()
	nowMs := now.UnixMilli()
	retention := c.opts.Retention.Milliseconds()
	deleted := 0
	for _, g := range c.sortedGroups() {
		g.mu.Lock()
		if g.state == Dead {
			g.mu.Unlock()
			continue
		}
		var subscribed map[string]bool
		if g.state != Empty && g.protocolType == "consumer" {
			subscribed = g.subscribedTopics()
		}
		var recs []store.KV
		var gone []topicPartition
		for tp, o := range g.offsets {
			var expired bool
			switch {
			case o.ExpireTimestamp >= 0:
				expired = nowMs >= o.ExpireTimestamp
			case g.state == Empty && g.protocolType != "":
				expired = nowMs-g.stateTime >= retention
			case g.state == Empty || subscribed != nil && !subscribed[tp.topic]:
				expired = nowMs-o.CommitTimestamp >= retention
			}
			if expired {
				recs = append(recs, store.KV{Key: offsetKey(g.id, tp.topic, tp.partition), Value: nil})
				gone = append(gone, tp)
			}
		}
		if err := c.log.Append(g.partition, now, recs...); err != nil {
			c.opts.Logger.Error("expiring committed offsets", "group", g.id, "err", err)
			g.mu.Unlock()
			continue
		}
		for _, tp := range gone {
			delete(g.offsets, tp)
		}
		deleted += len(gone)
		if g.state == Empty && len(g.offsets) == 0 {
			if err := c.removeGroup(g); err != nil {
				c.opts.Logger.Error("deleting an expired group", "group", g.id, "err", err)
			}
		}
		g.mu.Unlock()
	}
	if deleted > 0 {
		c.opts.Logger.Info("expired committed offsets", "offsets", deleted)
	}
	return deleted
}
