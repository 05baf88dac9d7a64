package group

import (
	"bytes"
	"maps"
	"slices"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/coordinator/internal/store"
)

// A consumer group's records: each change of the group writes the records
// whose content changed, and a restart replays them.

func tpsOf(a assignment, at map[tpKey]int32) []TopicPartitions {
	ids := slices.Collect(maps.Keys(a))
	slices.SortFunc(ids, func(x, y checkpoint.TopicID) int { return slices.Compare(x[:], y[:]) })
	out := []TopicPartitions{}
	for _, id := range ids {
		t := TopicPartitions{TopicID: id, Partitions: slices.Clone(a[id])}
		if at != nil {
			for _, p := range a[id] {
				t.AssignmentEpochs = append(t.AssignmentEpochs, at[tpKey{id, p}])
			}
		}
		out = append(out, t)
	}
	return out
}

func assignmentOf(ts []TopicPartitions) (assignment, map[tpKey]int32) {
	a, at := assignment{}, map[tpKey]int32{}
	for _, t := range ts {
		ps := slices.Clone(t.Partitions)
		slices.Sort(ps)
		a[t.TopicID] = append(a[t.TopicID], ps...)
		for i, p := range t.Partitions {
			if i < len(t.AssignmentEpochs) {
				at[tpKey{t.TopicID, p}] = t.AssignmentEpochs[i]
			}
		}
	}
	return a, at
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func memberRecord(m *cmember) *ConsumerRecord {
	return &ConsumerRecord{Type: keyConsumerMember, MemberID: m.id, Value: true, InstanceID: optional(m.instanceID),
		RackID: optional(m.rackID), ClientID: m.clientID, ClientHost: m.clientHost, SubscribedTopicNames: m.subscribed,
		SubscribedTopicRegex: optional(m.regex), RebalanceTimeoutMs: int32(m.rebalanceTimeout.Milliseconds()),
		ServerAssignor: optional(m.assignor), Classic: m.classic}
}

func sameMetadata(a, b *cmember) bool {
	return a.instanceID == b.instanceID && a.rackID == b.rackID && a.clientID == b.clientID && a.clientHost == b.clientHost &&
		slices.Equal(a.subscribed, b.subscribed) && a.regex == b.regex && a.rebalanceTimeout == b.rebalanceTimeout &&
		a.assignor == b.assignor && sameClassic(a.classic, b.classic)
}

func sameClassic(a, b *ClassicMemberMetadata) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.SessionTimeoutMs == b.SessionTimeoutMs && slices.EqualFunc(a.SupportedProtocols, b.SupportedProtocols,
		func(x, y ClassicProtocol) bool { return x.Name == y.Name && bytes.Equal(x.Metadata, y.Metadata) })
}

func sameCurrent(a, b *cmember) bool {
	return a.epoch == b.epoch && a.prevEpoch == b.prevEpoch && a.state == b.state && a.assigned.equal(b.assigned) &&
		a.revoking.equal(b.revoking) && maps.Equal(a.assignedAt, b.assignedAt)
}

// consumerDiff returns the records that take a group from cur to next: a
// departed member's tombstones, then every changed member's metadata, the
// group epoch, targets, the target's epoch, current assignments and
// regular expressions.
func consumerDiff(group string, cur, next *consumerGroup) []store.KV {
	var out []store.KV
	put := func(rec *ConsumerRecord) {
		k, v := rec.record(group)
		out = append(out, store.KV{Key: k, Value: v})
	}
	for _, id := range sortedKeys(cur.members) {
		if next.members[id] == nil {
			for _, typ := range []int16{keyConsumerCurrentAssigment, keyConsumerTargetMember, keyConsumerMember} {
				put(&ConsumerRecord{Type: typ, MemberID: id})
			}
		}
	}
	for _, id := range sortedKeys(next.members) {
		if old := cur.members[id]; old == nil || !sameMetadata(old, next.members[id]) {
			put(memberRecord(next.members[id]))
		}
	}
	if cur.epoch != next.epoch || cur.hash != next.hash {
		put(&ConsumerRecord{Type: keyConsumerGroup, Value: true, Epoch: next.epoch, MetadataHash: next.hash, CreationTimeMs: next.created})
	}
	for _, id := range sortedKeys(next.target) {
		old, ok := cur.target[id]
		if ok && old.equal(next.target[id]) || next.members[id] == nil {
			continue
		}
		put(&ConsumerRecord{Type: keyConsumerTargetMember, MemberID: id, Value: true, TopicPartitions: tpsOf(next.target[id], nil)})
	}
	if cur.assignmentEpoch != next.assignmentEpoch {
		put(&ConsumerRecord{Type: keyConsumerTargetEpoch, Value: true, AssignmentEpoch: next.assignmentEpoch})
	}
	for _, id := range sortedKeys(next.members) {
		m := next.members[id]
		if old := cur.members[id]; old == nil || !sameCurrent(old, m) {
			put(&ConsumerRecord{Type: keyConsumerCurrentAssigment, MemberID: id, Value: true, MemberEpoch: m.epoch,
				PreviousMemberEpoch: m.prevEpoch, State: int8(m.state), AssignedPartitions: tpsOf(m.assigned, m.assignedAt),
				PartitionsPendingRevocation: tpsOf(m.revoking, nil)})
		}
	}
	for _, re := range sortedKeys(cur.regexes) {
		if _, ok := next.regexes[re]; !ok {
			put(&ConsumerRecord{Type: keyConsumerRegex, Regex: re})
		}
	}
	for _, re := range sortedKeys(next.regexes) {
		n := next.regexes[re]
		if old, ok := cur.regexes[re]; !ok || !slices.Equal(old.topics, n.topics) || old.timestamp != n.timestamp {
			put(&ConsumerRecord{Type: keyConsumerRegex, Regex: re, Value: true, Topics: n.topics, Version: n.version, Timestamp: n.timestamp})
		}
	}
	return out
}

// consumerTombstones are the records that delete an empty consumer
// group's state (its offsets are deleted apart).
func consumerTombstones(group string, cg *consumerGroup) []store.KV {
	var out []store.KV
	for _, re := range sortedKeys(cg.regexes) {
		k, _ := (&ConsumerRecord{Type: keyConsumerRegex, Regex: re}).record(group)
		out = append(out, store.KV{Key: k})
	}
	for _, typ := range []int16{keyConsumerTargetEpoch, keyConsumerPartitions, keyConsumerGroup} {
		k, _ := (&ConsumerRecord{Type: typ}).record(group)
		out = append(out, store.KV{Key: k})
	}
	return out
}

// replay applies one record to a loading group; a group's metadata
// tombstone makes it nil.
func (cg *consumerGroup) replay(rec *ConsumerRecord) *consumerGroup {
	if cg == nil {
		cg = &consumerGroup{members: map[string]*cmember{}, static: map[string]string{}, target: map[string]assignment{},
			regexes: map[string]regexTopics{}}
	}
	member := func() *cmember {
		m := cg.members[rec.MemberID]
		if m == nil {
			m = &cmember{id: rec.MemberID, assigned: assignment{}, revoking: assignment{}, assignedAt: map[tpKey]int32{}}
			cg.members[m.id] = m
		}
		return m
	}
	switch rec.Type {
	case keyConsumerGroup:
		if !rec.Value {
			return nil
		}
		cg.epoch, cg.hash, cg.created = rec.Epoch, rec.MetadataHash, rec.CreationTimeMs
	case keyConsumerMember:
		if !rec.Value {
			cg.remove(rec.MemberID)
			break
		}
		m := member()
		m.instanceID, m.rackID, m.clientID, m.clientHost = deref(rec.InstanceID), deref(rec.RackID), rec.ClientID, rec.ClientHost
		m.subscribed, m.regex = rec.SubscribedTopicNames, deref(rec.SubscribedTopicRegex)
		m.rebalanceTimeout, m.assignor, m.classic = ms(rec.RebalanceTimeoutMs), deref(rec.ServerAssignor), rec.Classic
		if m.instanceID != "" {
			cg.static[m.instanceID] = m.id
		}
	case keyConsumerTargetEpoch:
		if rec.Value {
			cg.assignmentEpoch = rec.AssignmentEpoch
		}
	case keyConsumerTargetMember:
		if !rec.Value {
			delete(cg.target, rec.MemberID)
			break
		}
		cg.target[rec.MemberID], _ = assignmentOf(rec.TopicPartitions)
	case keyConsumerCurrentAssigment:
		if !rec.Value {
			break
		}
		m := member()
		m.epoch, m.prevEpoch, m.state = rec.MemberEpoch, rec.PreviousMemberEpoch, memberState(rec.State)
		m.assigned, m.assignedAt = assignmentOf(rec.AssignedPartitions)
		m.revoking, _ = assignmentOf(rec.PartitionsPendingRevocation)
		for _, k := range m.assigned.keys() {
			if _, ok := m.assignedAt[k]; !ok {
				m.assignedAt[k] = m.epoch
			}
		}
	case keyConsumerRegex:
		if !rec.Value {
			delete(cg.regexes, rec.Regex)
			break
		}
		// version -1: resolved again at the next heartbeat.
		cg.regexes[rec.Regex] = regexTopics{topics: rec.Topics, version: -1, timestamp: rec.Timestamp}
	}
	return cg
}

// loadConsumer makes a replayed consumer group the group's state: its
// members' sessions start now, and a member that was revoking has its
// rebalance timeout again.
func (c *Coordinator) loadConsumer(g *group, cg *consumerGroup) {
	for id, m := range cg.members {
		if m.epoch == 0 && m.clientID == "" && len(cg.target[id]) == 0 && m.assigned.count() == 0 && m.subscribed == nil && m.regex == "" {
			delete(cg.members, id) // left only an empty current assignment behind
		}
	}
	g.cg, g.protocolType, g.protocol = cg, "consumer", c.assignorOf(cg)
	g.state = Empty
	if len(cg.members) > 0 {
		g.state = Stable
	}
	if c.opts.ReadOnly {
		return
	}
	for id, m := range cg.members {
		c.consumerHeartbeat(g, id)
		c.armRevocation(g, m)
	}
}
