package group

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/coordinator/internal/store"
)

// Kafka's online migration between the group protocols (KIP-848): a
// classic group whose first member upgrades to the consumer protocol (a
// ConsumerGroupHeartbeat join) becomes a consumer group, its classic
// members kept with their assignment; they go on with JoinGroup,
// SyncGroup and Heartbeat, and the coordinator assigns them as it does
// the others. When the last member using the consumer protocol leaves, a
// group of classic members becomes a classic group again and rebalances.

// Migration policies, group.consumer.migration.policy.
const (
	MigrationBidirectional = "bidirectional"
	MigrationUpgrade       = "upgrade"
	MigrationDowngrade     = "downgrade"
	MigrationDisabled      = "disabled"
)

func (c *Coordinator) mayUpgrade() bool {
	return c.opts.MigrationPolicy == MigrationBidirectional || c.opts.MigrationPolicy == MigrationUpgrade
}

func (c *Coordinator) mayDowngrade() bool {
	return c.opts.MigrationPolicy == MigrationBidirectional || c.opts.MigrationPolicy == MigrationDowngrade
}

// subscriptionOf parses a classic consumer's subscription (the embedded
// consumer protocol's metadata).
func subscriptionOf(metadata []byte) (kmsg.ConsumerMemberMetadata, error) {
	var sub kmsg.ConsumerMemberMetadata
	err := sub.ReadFrom(metadata)
	return sub, err
}

// owned converts partitions named by topic to a heartbeat's owned topics
// (by id), leaving out topics that do not exist.
func (c *Coordinator) owned(named map[string][]int32) []kmsg.ConsumerGroupHeartbeatRequestTopic {
	out := []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	for _, topic := range sortedKeys(named) {
		if id, _, ok := c.topics.TopicPartitions(topic); ok {
			out = append(out, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: id, Partitions: named[topic]})
		}
	}
	return out
}

// byID turns partitions named by topic into an assignment.
func (c *Coordinator) byID(named map[string][]int32) assignment {
	a := assignment{}
	for _, t := range c.owned(named) {
		_, n, _ := c.topics.TopicPartitions(c.nameOf(t.TopicID))
		for _, p := range t.Partitions {
			if p >= 0 && p < n && !a.has(t.TopicID, p) {
				a[t.TopicID] = append(a[t.TopicID], p)
			}
		}
		slices.Sort(a[t.TopicID])
	}
	return a
}

func (c *Coordinator) nameOf(id [16]byte) string {
	name, _ := c.topics.TopicByID(id)
	return name
}

func classicProtocols(ps []protocol) *ClassicMemberMetadata {
	cm := &ClassicMemberMetadata{}
	for _, p := range ps {
		cm.SupportedProtocols = append(cm.SupportedProtocols, ClassicProtocol{Name: p.name, Metadata: p.metadata})
	}
	return cm
}

// fromClassic is a classic group's state as a consumer group: its
// generation is the group and assignment epoch, each member keeps its
// assignment (its target too), at that epoch.
func (c *Coordinator) fromClassic(g *group) (*consumerGroup, error) {
	cg := newConsumerGroup(c.opts.clock.Now())
	cg.epoch, cg.assignmentEpoch = g.generation, g.generation
	for _, id := range g.order {
		m := g.members[id]
		sub, err := subscriptionOf(m.metadataFor(g.protocol))
		if err != nil {
			return nil, fmt.Errorf("member %s's subscription does not parse: %w", id, err)
		}
		named := map[string][]int32{}
		if len(m.assignment) > 0 {
			var as kmsg.ConsumerMemberAssignment
			if err := as.ReadFrom(m.assignment); err != nil {
				return nil, fmt.Errorf("member %s's assignment does not parse: %w", id, err)
			}
			for _, t := range as.Topics {
				named[t.Topic] = append(named[t.Topic], t.Partitions...)
			}
		}
		assigned := c.byID(named)
		cm := &cmember{id: id, instanceID: m.instanceID, rackID: deref(sub.Rack), clientID: m.clientID, clientHost: m.clientHost,
			rebalanceTimeout: m.rebalanceTimeout, epoch: g.generation, prevEpoch: g.generation, state: memberStable,
			assigned: assigned, revoking: assignment{}, assignedAt: map[tpKey]int32{}, classic: classicProtocols(m.protocols)}
		cm.classic.SessionTimeoutMs = int32(m.sessionTimeout.Milliseconds())
		cm.subscribed = slices.Compact(slices.Sorted(slices.Values(sub.Topics)))
		for _, k := range assigned.keys() {
			cm.assignedAt[k] = g.generation
		}
		cg.members[id] = cm
		cg.target[id] = assigned
		if cm.instanceID != "" {
			cg.static[cm.instanceID] = id
		}
	}
	cg.hash = c.metadataHash(cg.subscribedTopics())
	return cg, nil
}

// dropClassic ends a classic group's own state once it is a consumer
// group: waiting joins and syncs are told to rejoin, timers stop.
func (g *group) dropClassic() {
	g.endWaits(kerr.RebalanceInProgress.Code)
	g.stopTimers()
	g.members, g.order, g.static = map[string]*member{}, nil, map[string]string{}
	g.pending, g.pendingSync, g.leader = map[string]stopper{}, map[string]bool{}, ""
	g.joinSeq++
}

// classicJoin is a JoinGroup of a classic member of a consumer group: its
// subscription (and the partitions it says it owns) go into the group as
// a heartbeat's would, and it gets at once its member epoch as the
// generation; its partitions come in the SyncGroup.
func (c *Coordinator) classicJoin(g *group, j joining, r *kmsg.JoinGroupRequest) *kmsg.JoinGroupResponse {
	if j.protocolType != "consumer" || len(j.protocols) == 0 {
		return joinError(kerr.InconsistentGroupProtocol.Code, r.MemberID)
	}
	sub, err := subscriptionOf(j.protocols[0].metadata)
	if err != nil {
		return joinError(kerr.InconsistentGroupProtocol.Code, r.MemberID)
	}
	cur := g.cg
	next := cur.clone()
	id, unknown := r.MemberID, r.MemberID == ""
	if unknown {
		id = newMemberID(cmpOr(j.instanceID, j.clientID))
		if j.instanceID == "" && r.GetVersion() >= 4 {
			resp := joinError(kerr.MemberIDRequired.Code, id)
			return resp
		}
	}
	m := next.members[id]
	if j.instanceID != "" {
		if prev := next.static[j.instanceID]; prev != "" && prev != id {
			if !unknown {
				return joinError(kerr.FencedInstanceID.Code, r.MemberID)
			}
			// A static member back with a new id takes its old place.
			old := next.members[prev]
			nm := *old
			nm.id, nm.timer, nm.revokeTimer, nm.owedTimer = id, nil, nil, nil
			next.target[id] = next.target[prev]
			next.remove(prev)
			next.members[id] = &nm
			m = &nm
		}
	}
	bump := false
	if m == nil {
		if len(next.members) >= c.opts.ConsumerMaxSize {
			return joinError(kerr.GroupMaxSizeReached.Code, r.MemberID)
		}
		m = &cmember{id: id, state: memberStable, assigned: assignment{}, revoking: assignment{}, assignedAt: map[tpKey]int32{}}
		next.members[id] = m
		bump = true
	} else if m.classic == nil {
		return joinError(kerr.UnknownMemberID.Code, r.MemberID) // a consumer protocol member
	}
	m.clientID, m.clientHost, m.rebalanceTimeout = j.clientID, j.clientHost, j.rebalance
	if j.instanceID != "" {
		m.instanceID = j.instanceID
		next.static[j.instanceID] = id
	}
	if sub.Rack != nil {
		m.rackID = *sub.Rack
	}
	m.classic = classicProtocols(j.protocols)
	m.classic.SessionTimeoutMs = int32(j.session.Milliseconds())
	topics := slices.Compact(slices.Sorted(slices.Values(sub.Topics)))
	if !slices.Equal(topics, m.subscribed) {
		m.subscribed, bump = topics, true
	}
	c.refreshRegexes(next, Client{})
	if hash := c.metadataHash(next.subscribedTopics()); bump || hash != next.hash {
		next.epoch++
		next.hash = hash
	}
	if next.epoch > next.assignmentEpoch {
		c.assignTarget(next)
	}
	named := map[string][]int32{}
	for _, o := range sub.OwnedPartitions {
		named[o.Topic] = append(named[o.Topic], o.Partitions...)
	}
	reconcile(next, m, c.owned(named))
	if err := c.commitConsumer(g, cur, next, nil); err != nil {
		c.opts.Logger.Error("storing a consumer group", "group", g.id, "err", err)
		return joinError(storeErrorCode(err), r.MemberID)
	}
	resp := kmsg.NewPtrJoinGroupResponse()
	resp.MemberID, resp.Generation = id, m.epoch
	resp.ProtocolType, resp.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr(m.classic.SupportedProtocols[0].Name)
	c.consumerHeartbeat(g, id)
	joined := g.cg.members[id]
	joined.paid() // (a rejoin it owed)
	c.owe(g, joined, "a classic member did not sync within its rebalance timeout after joining")
	return resp
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// classicMember finds a classic member of a consumer group by id (and
// instance id), as SyncGroup, Heartbeat and OffsetCommit name it.
func (cg *consumerGroup) classicMember(id, instanceID string) (*cmember, int16) {
	if instanceID != "" && cg.static[instanceID] != id {
		if cg.static[instanceID] == "" {
			return nil, kerr.UnknownMemberID.Code
		}
		return nil, kerr.FencedInstanceID.Code
	}
	m := cg.members[id]
	if m == nil || m.classic == nil {
		return nil, kerr.UnknownMemberID.Code
	}
	return m, 0
}

// classicSync answers a classic member's SyncGroup with its assigned
// partitions, in the consumer protocol's bytes.
func (c *Coordinator) classicSync(g *group, r *kmsg.SyncGroupRequest) *kmsg.SyncGroupResponse {
	m, code := g.cg.classicMember(r.MemberID, deref(r.InstanceID))
	switch {
	case code != 0:
		return syncError(code)
	case r.Generation != m.epoch:
		return syncError(kerr.IllegalGeneration.Code)
	case r.ProtocolType != nil && *r.ProtocolType != "consumer",
		r.Protocol != nil && *r.Protocol != m.classic.SupportedProtocols[0].Name:
		return syncError(kerr.InconsistentGroupProtocol.Code)
	case g.cg.epoch > m.epoch && m.state != memberUnrevoked:
		m.paid()
		c.owe(g, m, rejoinOwed)
		return syncError(kerr.RebalanceInProgress.Code) // rejoin to catch up
	}
	m.paid()
	c.consumerHeartbeat(g, m.id)
	resp := kmsg.NewPtrSyncGroupResponse()
	resp.ProtocolType, resp.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr(m.classic.SupportedProtocols[0].Name)
	resp.MemberAssignment = c.classicAssignment(m)
	return resp
}

// classicAssignment is a member's assigned partitions in the consumer
// protocol's assignment, at the version of its subscription.
func (c *Coordinator) classicAssignment(m *cmember) []byte {
	as := kmsg.NewConsumerMemberAssignment()
	if m.classic != nil && len(m.classic.SupportedProtocols) > 0 {
		if sub, err := subscriptionOf(m.classic.SupportedProtocols[0].Metadata); err == nil {
			as.Version = min(sub.Version, 3)
		}
	}
	for _, t := range tpsOf(m.assigned, nil) {
		as.Topics = append(as.Topics, kmsg.ConsumerMemberAssignmentTopic{Topic: c.nameOf(t.TopicID), Partitions: t.Partitions})
	}
	return as.AppendTo(nil)
}

// classicHeartbeat keeps a classic member's session, and tells it to
// rejoin (REBALANCE_IN_PROGRESS) when it has something to catch up on: a
// new epoch, partitions to revoke, or partitions it waited for that are
// free now.
func (c *Coordinator) classicHeartbeat(g *group, r *kmsg.HeartbeatRequest) int16 {
	cg := g.cg
	m, code := cg.classicMember(r.MemberID, deref(r.InstanceID))
	switch {
	case code != 0:
		return code
	case r.Generation != m.epoch:
		return kerr.IllegalGeneration.Code
	}
	c.consumerHeartbeat(g, m.id)
	if m.epoch < cg.epoch || m.state == memberUnrevoked || m.state == memberUnreleased && !cg.waitingOnUnreleased(m) {
		c.owe(g, m, rejoinOwed)
		return kerr.RebalanceInProgress.Code
	}
	return 0
}

const rejoinOwed = "a classic member did not rejoin within its rebalance timeout"

// owe gives a classic member its rebalance timeout to send what it owes:
// the JoinGroup it was told to send (REBALANCE_IN_PROGRESS), or the
// SyncGroup after its join. One that does not is removed, as Kafka's join
// and sync timeouts do. A debt already running keeps its deadline.
func (c *Coordinator) owe(g *group, m *cmember, why string) {
	if m.owedTimer != nil || c.opts.ReadOnly {
		return
	}
	id := m.id
	var t stopper
	t = c.after(cmp.Or(m.rebalanceTimeout, c.opts.ConsumerSessionTimeout), func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.cg == nil || g.state == Dead {
			return
		}
		if m := g.cg.members[id]; m != nil && m.owedTimer == t {
			c.fenceConsumer(g, id, why)
		}
	})
	m.owedTimer = t
}

// paid ends what a classic member owed: it sent it.
func (m *cmember) paid() {
	if m.owedTimer != nil {
		m.owedTimer.Stop()
		m.owedTimer = nil
	}
}

// waitingOnUnreleased says some partition of the member's target is still
// held by another member.
func (cg *consumerGroup) waitingOnUnreleased(m *cmember) bool {
	owners := cg.owners()
	for _, k := range cg.target[m.id].keys() {
		if o := owners[k]; o != "" && o != m.id {
			return true
		}
	}
	return false
}

// classicLeave takes classic members out of a consumer group, which gets
// a new epoch and target. (A downgrade follows a consumer protocol
// member's leave, not a classic one's.)
func (c *Coordinator) classicLeave(g *group, r *kmsg.LeaveGroupRequest, leaving []kmsg.LeaveGroupRequestMember) *kmsg.LeaveGroupResponse {
	resp := r.ResponseKind().(*kmsg.LeaveGroupResponse)
	cur := g.cg
	next := cur.clone()
	var gone []string
	for _, l := range leaving {
		out := kmsg.LeaveGroupResponseMember{MemberID: l.MemberID, InstanceID: l.InstanceID}
		id := l.MemberID
		if id == "" && l.InstanceID != nil {
			id = next.static[*l.InstanceID]
		}
		if m, code := next.classicMember(id, deref(l.InstanceID)); code != 0 {
			out.ErrorCode = code
		} else {
			next.remove(m.id)
			gone = append(gone, m.id)
		}
		resp.Members = append(resp.Members, out)
	}
	if r.GetVersion() < 3 && len(resp.Members) == 1 {
		resp.ErrorCode, resp.Members = resp.Members[0].ErrorCode, nil
	}
	if len(gone) == 0 {
		return resp
	}
	next.hash = c.metadataHash(next.subscribedTopics())
	next.epoch++
	c.assignTarget(next)
	if err := c.commitConsumer(g, cur, next, nil); err != nil {
		c.opts.Logger.Error("removing consumer group members", "group", g.id, "err", err)
		resp.ErrorCode, resp.Members = storeErrorCode(err), nil
	}
	return resp
}

// maybeDowngrade makes a consumer group whose members all use the
// classic protocol a classic group again (KIP-848's online downgrade) and
// rebalances it: called once a consumer protocol member left. Its
// generation is the highest of its members' epochs, so that members
// heartbeating at theirs are told to rejoin, as Kafka's downgrade (which
// keeps the epoch from before the leave) tells them.
func (c *Coordinator) maybeDowngrade(g *group) {
	cg := g.cg
	if cg == nil || len(cg.members) == 0 || !c.mayDowngrade() || len(cg.members) > c.opts.MaxSize {
		return
	}
	for _, m := range cg.members {
		if m.classic == nil || len(m.classic.SupportedProtocols) == 0 {
			return
		}
	}
	ids := sortedKeys(cg.members)
	classic := newGroup(g.id, g.partition, c.opts.clock.Now())
	classic.protocolType = "consumer"
	for _, m := range cg.members {
		classic.generation = max(classic.generation, m.epoch)
	}
	classic.protocol = cg.members[ids[0]].classic.SupportedProtocols[0].Name
	for _, id := range ids {
		cm := cg.members[id]
		m := &member{id: id, instanceID: cm.instanceID, clientID: cm.clientID, clientHost: cm.clientHost,
			sessionTimeout: ms(cm.classic.SessionTimeoutMs), rebalanceTimeout: cm.rebalanceTimeout, protocolType: "consumer",
			assignment: c.classicAssignment(cm)}
		for _, p := range cm.classic.SupportedProtocols {
			m.protocols = append(m.protocols, protocol{name: p.Name, metadata: bytes.Clone(p.Metadata)})
		}
		classic.add(m)
	}
	classic.state = Stable
	recs := consumerDiff(g.id, cg, newConsumerGroup(time.Time{}))
	recs = append(recs, consumerTombstones(g.id, cg)...)
	recs = append(recs, store.KV{Key: groupKey(g.id), Value: groupValue(classic)})
	if err := c.log.Append(g.partition, c.opts.clock.Now(), recs...); err != nil {
		c.opts.Logger.Error("downgrading a consumer group to a classic one", "group", g.id, "err", err)
		return
	}
	for _, m := range cg.members {
		stopTimers(m)
	}
	g.cg = nil
	g.protocolType, g.protocol, g.generation, g.leader = classic.protocolType, classic.protocol, classic.generation, ""
	g.members, g.order, g.static = map[string]*member{}, nil, map[string]string{}
	for _, id := range classic.order {
		g.add(classic.members[id])
	}
	g.transition(Stable, c.opts.clock.Now())
	for _, m := range g.members {
		c.heartbeat(g, m)
	}
	c.prepareRebalance(g, "downgraded from a consumer group")
}
