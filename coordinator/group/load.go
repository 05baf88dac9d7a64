package group

import (
	"fmt"
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
	tabs := map[int32]*tablet.Tablet{}
	for p, t := range c.log.Existing() {
		if t != nil {
			tabs[int32(p)] = t
		}
	}
	return c.loadFrom(tabs)
}

// loadFrom replays the given __consumer_offsets partitions and installs
// their groups.
func (c *Coordinator) loadFrom(tabs map[int32]*tablet.Tablet) error {
	start := time.Now()
	now := c.opts.clock.Now()
	type loaded struct {
		offsets map[topicPartition]Offset
		meta    *Decoded
		pending map[int64]map[topicPartition]Offset // open transactions' commits, by producer
		cg      *consumerGroup                      // a consumer group's state
	}
	all := map[string]*loaded{}
	get := func(id string) *loaded {
		l := all[id]
		if l == nil {
			l = &loaded{offsets: map[topicPartition]Offset{}, pending: map[int64]map[topicPartition]Offset{}}
			all[id] = l
		}
		return l
	}
	var records int
	for p, t := range tabs {
		// The groups with a producer's open transactional commits in
		// this partition, for its marker.
		open := map[int64]map[string]bool{}
		data := func(b record.Batch, r *record.Record) error {
			records++
			d, err := Decode(r.Key, r.Value)
			if err != nil {
				return fmt.Errorf("group: %s-%d offset %d: %w", Topic, p, r.Offset, err)
			}
			l := get(d.Group)
			switch {
			case d.Consumer != nil:
				if l.cg != nil || d.Consumer.Value {
					l.cg = l.cg.replay(d.Consumer)
				}
			case d.IsOffset && d.Offset == nil:
				delete(l.offsets, topicPartition{d.Topic, d.Partition})
			case d.IsOffset:
				o := Offset{Offset: d.Offset.Offset, LeaderEpoch: d.Offset.LeaderEpoch, Metadata: d.Offset.Metadata,
					CommitTimestamp: d.Offset.CommitTimestamp, ExpireTimestamp: -1, at: r.Offset}
				if d.Offset.Version == 1 {
					o.ExpireTimestamp = d.Offset.ExpireTimestamp
				}
				tp := topicPartition{d.Topic, d.Partition}
				if !b.IsTransactional() {
					l.offsets[tp] = o
					break
				}
				pid := b.ProducerID()
				if l.pending[pid] == nil {
					l.pending[pid] = map[topicPartition]Offset{}
				}
				l.pending[pid][tp] = o
				if open[pid] == nil {
					open[pid] = map[string]bool{}
				}
				open[pid][d.Group] = true
			case d.Metadata == nil:
				l.meta = nil
				if len(l.offsets) == 0 && len(l.pending) == 0 && l.cg == nil {
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
						applyPending(l.offsets, l.pending[pid])
					}
					delete(l.pending, pid)
				}
			}
			delete(open, pid)
			return nil
		}
		if err := store.Replay(t, data, marker); err != nil {
			return fmt.Errorf("group: reading %s-%d: %w", Topic, p, err)
		}
	}
	loadedGroups := 0
	for id, l := range all {
		if len(l.offsets) == 0 && l.meta == nil && len(l.pending) == 0 && l.cg == nil {
			continue
		}
		loadedGroups++
		g := newGroup(id, PartitionFor(id, c.log.Partitions()), now)
		g.offsets, g.pendingTxn = l.offsets, l.pending
		for pid := range l.pending {
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
	if records > 0 {
		c.opts.Logger.Info("loaded consumer groups", "groups", loadedGroups, "records", records,
			"partitions", c.log.Partitions(), "took", time.Since(start).Round(time.Millisecond))
	}
	return nil
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
