package group

import (
	"bytes"
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Client is who sent a request: its client id and address, which Kafka
// keeps with each member.
type Client struct {
	ID, Host string
	// MayDescribe says whether the client may describe a topic: a
	// consumer group's regular expressions resolve only to those (nil:
	// every topic).
	MayDescribe func(topic string) bool
}

// joining is a JoinGroup request's member fields.
type joining struct {
	instanceID           string
	clientID, clientHost string
	session, rebalance   time.Duration
	protocolType         string
	protocols            []protocol
	version              int16 // of the JoinGroup request
}

func (j joining) member(id string) *member {
	return &member{id: id, instanceID: j.instanceID, clientID: j.clientID, clientHost: j.clientHost,
		sessionTimeout: j.session, rebalanceTimeout: j.rebalance, protocolType: j.protocolType, protocols: j.protocols}
}

func ms(v int32) time.Duration { return time.Duration(v) * time.Millisecond }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// JoinGroup joins a member to a group, waiting (until ctx ends) for the
// rebalance to complete. From v4 a new dynamic member first gets
// MEMBER_ID_REQUIRED with its id, and joins again with it (KIP-394); a
// static member (group.instance.id, v5+) that rejoins takes its old place,
// without a rebalance when its protocols did not change (KIP-345).
func (c *Coordinator) JoinGroup(ctx context.Context, cl Client, r *kmsg.JoinGroupRequest) *kmsg.JoinGroupResponse {
	if code := c.Owns(r.Group); code != 0 {
		return joinError(code, r.MemberID)
	}
	resp, ch := c.join(cl, r)
	if ch != nil {
		var err error
		if resp, err = wait(ctx, ch); err != nil {
			resp = joinError(kerr.CoordinatorNotAvailable.Code, r.MemberID)
		}
	}
	resp.SetVersion(r.GetVersion())
	if resp.ErrorCode == 0 {
		c.stats.joins.Add(1)
	}
	return resp
}

func (c *Coordinator) join(cl Client, r *kmsg.JoinGroupRequest) (*kmsg.JoinGroupResponse, chan *kmsg.JoinGroupResponse) {
	j := joining{instanceID: deref(r.InstanceID), clientID: cl.ID, clientHost: cl.Host,
		session: ms(r.SessionTimeoutMillis), rebalance: ms(r.RebalanceTimeoutMillis), protocolType: r.ProtocolType,
		version: r.GetVersion()}
	if r.GetVersion() == 0 {
		j.rebalance = j.session
	}
	for _, p := range r.Protocols {
		// A copy: the request's bytes are the connection's frame buffer,
		// reused once the request is answered.
		j.protocols = append(j.protocols, protocol{name: p.Name, metadata: bytes.Clone(p.Metadata)})
	}
	switch {
	case r.Group == "":
		return joinError(kerr.InvalidGroupID.Code, r.MemberID), nil
	case j.session < c.opts.MinSessionTimeout || j.session > c.opts.MaxSessionTimeout:
		return joinError(kerr.InvalidSessionTimeout.Code, r.MemberID), nil
	}
	unknown := r.MemberID == ""
	g := c.lookup(r.Group, unknown)
	if g == nil {
		if unknown {
			return joinError(kerr.CoordinatorNotAvailable.Code, ""), nil // closed
		}
		return joinError(kerr.UnknownMemberID.Code, r.MemberID), nil
	}
	defer g.mu.Unlock()
	if g.cg != nil {
		if len(g.cg.members) > 0 {
			return c.classicJoin(g, j, r), nil
		}
		// An empty consumer group becomes a classic one.
		if err := c.log.Append(g.partition, c.opts.clock.Now(), consumerTombstones(g.id, g.cg)...); err != nil {
			return joinError(storeErrorCode(err), r.MemberID), nil
		}
		g.cg, g.protocolType, g.protocol, g.generation = nil, "", "", 0
	}
	if !g.supports(j.protocolType, j.protocols) {
		return joinError(kerr.InconsistentGroupProtocol.Code, r.MemberID), nil
	}
	if unknown {
		if len(g.members)+len(g.pending) >= c.opts.MaxSize {
			return joinError(kerr.GroupMaxSizeReached.Code, ""), nil
		}
		if j.instanceID != "" {
			return c.joinStatic(g, j)
		}
		id := newMemberID(cl.ID)
		if r.GetVersion() >= 4 {
			c.addPending(g, id, j.session)
			return joinError(kerr.MemberIDRequired.Code, id), nil
		}
		return nil, c.addMemberAndRebalance(g, j.member(id))
	}
	if t, ok := g.pending[r.MemberID]; ok {
		t.Stop()
		delete(g.pending, r.MemberID)
		return nil, c.addMemberAndRebalance(g, j.member(r.MemberID))
	}
	if j.instanceID != "" && g.static[j.instanceID] != r.MemberID {
		return joinError(kerr.FencedInstanceID.Code, r.MemberID), nil
	}
	m := g.members[r.MemberID]
	if m == nil {
		return joinError(kerr.UnknownMemberID.Code, r.MemberID), nil
	}
	switch g.state {
	case PreparingRebalance:
		return nil, c.updateAndRebalance(g, m, j)
	case CompletingRebalance:
		if m.matches(j.protocols) {
			return g.joinResponse(m), nil // the response it missed, again
		}
		return nil, c.updateAndRebalance(g, m, j)
	case Stable:
		if m.id == g.leader || !m.matches(j.protocols) {
			return nil, c.updateAndRebalance(g, m, j)
		}
		c.heartbeat(g, m)
		return g.joinResponse(m), nil
	}
	return joinError(kerr.UnknownMemberID.Code, r.MemberID), nil
}

// joinStatic joins a static member without a member id: a new one, or one
// coming back, which takes its old member's place (the old id is fenced).
func (c *Coordinator) joinStatic(g *group, j joining) (*kmsg.JoinGroupResponse, chan *kmsg.JoinGroupResponse) {
	id := newMemberID(j.instanceID)
	oldID, ok := g.static[j.instanceID]
	if !ok {
		return nil, c.addMemberAndRebalance(g, j.member(id))
	}
	old := g.members[oldID]
	if old.joinWait != nil {
		old.joinWait <- joinError(kerr.FencedInstanceID.Code, oldID)
		old.joinWait = nil
	}
	if old.syncWait != nil {
		old.syncWait <- syncError(kerr.FencedInstanceID.Code)
		old.syncWait = nil
	}
	if old.timer != nil {
		old.timer.Stop()
	}
	prevLeader := g.leader
	m := j.member(id)
	m.assignment = old.assignment
	delete(g.members, oldID)
	put(&g.members, id, m)
	for i, o := range g.order {
		if o == oldID {
			g.order[i] = id
		}
	}
	put(&g.static, j.instanceID, id)
	if g.leader == oldID {
		g.leader = id
	}
	if g.pendingSync[oldID] {
		delete(g.pendingSync, oldID)
		put(&g.pendingSync, id, true)
	}
	if g.state == Stable && g.selectProtocol() == g.protocol {
		// Kafka's answer: the member's place is stored, and it gets the
		// generation. From v9 (KIP-814) a returning leader is told it
		// leads, with the members, and to skip the assignment; before,
		// it gets the leader as it was and no members, so it only syncs
		// to get its assignment back.
		if err := c.storeGroup(g); err != nil {
			return joinError(storeErrorCode(err), ""), nil
		}
		c.heartbeat(g, m)
		resp := g.joinResponse(m)
		if j.version >= 9 {
			resp.SkipAssignment = g.leader == id
		} else {
			resp.LeaderID, resp.Members = prevLeader, nil
		}
		return resp, nil
	}
	return nil, c.updateAndRebalance(g, m, j)
}

// SyncGroup takes the leader's assignment (and stores it) or waits for
// it; a member of a stable group gets its assignment at once.
func (c *Coordinator) SyncGroup(ctx context.Context, r *kmsg.SyncGroupRequest) *kmsg.SyncGroupResponse {
	if code := c.Owns(r.Group); code != 0 {
		return syncError(code)
	}
	resp, ch := c.sync(r)
	if ch != nil {
		var err error
		if resp, err = wait(ctx, ch); err != nil {
			resp = syncError(kerr.CoordinatorNotAvailable.Code)
		}
	}
	resp.SetVersion(r.GetVersion())
	return resp
}

func (c *Coordinator) sync(r *kmsg.SyncGroupRequest) (*kmsg.SyncGroupResponse, chan *kmsg.SyncGroupResponse) {
	g := c.lookup(r.Group, false)
	if g == nil {
		return syncError(kerr.UnknownMemberID.Code), nil
	}
	defer g.mu.Unlock()
	if g.cg != nil {
		return c.classicSync(g, r), nil
	}
	if code := g.validate(r.MemberID, deref(r.InstanceID), r.Generation); code != 0 {
		return syncError(code), nil
	}
	if r.ProtocolType != nil && *r.ProtocolType != g.protocolType || r.Protocol != nil && *r.Protocol != g.protocol {
		return syncError(kerr.InconsistentGroupProtocol.Code), nil
	}
	m := g.members[r.MemberID]
	switch g.state {
	case PreparingRebalance:
		return syncError(kerr.RebalanceInProgress.Code), nil
	case Stable:
		delete(g.pendingSync, m.id)
		c.heartbeat(g, m)
		return g.syncResponse(m), nil
	case CompletingRebalance:
	default:
		return syncError(kerr.UnknownMemberID.Code), nil
	}
	ch := make(chan *kmsg.SyncGroupResponse, 1)
	m.syncWait = ch
	delete(g.pendingSync, m.id)
	c.heartbeat(g, m)
	if m.id != g.leader {
		return nil, ch
	}
	assigned := map[string][]byte{}
	for _, a := range r.GroupAssignment {
		assigned[a.MemberID] = bytes.Clone(a.MemberAssignment) // kept past the request's frame
	}
	for _, o := range g.members {
		o.assignment = assigned[o.id]
		if o.assignment == nil {
			o.assignment = []byte{}
		}
	}
	if err := c.storeGroup(g); err != nil {
		c.opts.Logger.Error("storing a group's assignment", "group", g.id, "err", err)
		for _, o := range g.members {
			o.assignment = nil
		}
		g.failSyncs(storeErrorCode(err))
		c.maybePrepareRebalance(g, "storing the assignment failed")
		return nil, ch
	}
	g.transition(Stable, c.opts.clock.Now())
	for _, o := range g.members {
		if o.syncWait != nil {
			o.syncWait <- g.syncResponse(o)
			o.syncWait = nil
		}
	}
	return nil, ch
}

func (g *group) syncResponse(m *member) *kmsg.SyncGroupResponse {
	resp := kmsg.NewPtrSyncGroupResponse()
	resp.ProtocolType = kmsg.StringPtr(g.protocolType)
	resp.Protocol = kmsg.StringPtr(g.protocol)
	resp.MemberAssignment = m.assignment
	if resp.MemberAssignment == nil {
		resp.MemberAssignment = []byte{}
	}
	return resp
}

// validate checks a member's identity and generation, as SyncGroup,
// Heartbeat and OffsetCommit do.
func (g *group) validate(memberID, instanceID string, generation int32) int16 {
	switch {
	case instanceID != "" && g.static[instanceID] != memberID:
		return kerr.FencedInstanceID.Code
	case g.members[memberID] == nil:
		return kerr.UnknownMemberID.Code
	case generation != g.generation:
		return kerr.IllegalGeneration.Code
	}
	return 0
}

// Heartbeat keeps a member's session; during a rebalance it answers
// REBALANCE_IN_PROGRESS, telling the member to rejoin.
func (c *Coordinator) Heartbeat(r *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse {
	resp := r.ResponseKind().(*kmsg.HeartbeatResponse)
	if resp.ErrorCode = c.Owns(r.Group); resp.ErrorCode != 0 {
		return resp
	}
	g := c.lookup(r.Group, false)
	if g == nil {
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return resp
	}
	defer g.mu.Unlock()
	if g.cg != nil {
		resp.ErrorCode = c.classicHeartbeat(g, r)
		return resp
	}
	if resp.ErrorCode = g.validate(r.MemberID, deref(r.InstanceID), r.Generation); resp.ErrorCode != 0 {
		return resp
	}
	m := g.members[r.MemberID]
	switch g.state {
	case Empty:
		resp.ErrorCode = kerr.UnknownMemberID.Code
	case PreparingRebalance:
		c.heartbeat(g, m)
		resp.ErrorCode = kerr.RebalanceInProgress.Code
	default:
		c.heartbeat(g, m)
	}
	return resp
}

// LeaveGroup removes members (one before v3, a batch with
// group.instance.ids from v3), which rebalances the group.
func (c *Coordinator) LeaveGroup(r *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse {
	resp := r.ResponseKind().(*kmsg.LeaveGroupResponse)
	if resp.ErrorCode = c.Owns(r.Group); resp.ErrorCode != 0 {
		return resp
	}
	leaving := r.Members
	if r.GetVersion() < 3 {
		leaving = []kmsg.LeaveGroupRequestMember{{MemberID: r.MemberID}}
	}
	g := c.lookup(r.Group, false)
	if g == nil {
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return resp
	}
	defer g.mu.Unlock()
	if g.cg != nil {
		return c.classicLeave(g, r, leaving)
	}
	for _, l := range leaving {
		out := kmsg.LeaveGroupResponseMember{MemberID: l.MemberID, InstanceID: l.InstanceID}
		id, instance := l.MemberID, deref(l.InstanceID)
		_, pending := g.pending[id]
		switch {
		case id == "" && instance != "":
			if id = g.static[instance]; id == "" {
				out.ErrorCode = kerr.UnknownMemberID.Code
			} else {
				c.removeMember(g, id, "static member "+instance+" left")
			}
		case pending:
			g.pending[id].Stop()
			delete(g.pending, id)
			c.tryCompleteJoin(g)
		case instance != "" && g.static[instance] != id:
			out.ErrorCode = kerr.FencedInstanceID.Code
		case g.members[id] == nil:
			out.ErrorCode = kerr.UnknownMemberID.Code
		default:
			c.removeMember(g, id, "member left")
		}
		resp.Members = append(resp.Members, out)
	}
	if r.GetVersion() < 3 {
		resp.ErrorCode, resp.Members = resp.Members[0].ErrorCode, nil
	}
	return resp
}
