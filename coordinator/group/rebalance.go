package group

import (
	"crypto/rand"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The group state machine, as Kafka's classic one. Every function here is
// called with g.mu held.

// maybePrepareRebalance starts a rebalance unless one is under way.
func (c *Coordinator) maybePrepareRebalance(g *group, reason string) {
	switch g.state {
	case Empty, Stable, CompletingRebalance:
		c.prepareRebalance(g, reason)
	}
}

// prepareRebalance moves the group to PreparingRebalance: members rejoin
// until all have (or the longest rebalance timeout passes). An empty
// group's first rebalance waits group.initial.rebalance.delay.ms first,
// longer while members keep coming.
func (c *Coordinator) prepareRebalance(g *group, reason string) {
	if g.state == CompletingRebalance {
		for _, m := range g.members {
			m.assignment = nil
		}
		g.failSyncs(kerr.RebalanceInProgress.Code)
	}
	if g.syncTimer != nil {
		g.syncTimer.Stop()
		g.syncTimer = nil
	}
	delayed := g.state == Empty && c.opts.InitialRebalanceDelay > 0
	now := c.opts.clock.Now()
	g.transition(PreparingRebalance, now)
	c.stats.rebalances.Add(1)
	c.opts.Logger.Debug("preparing a rebalance", "group", g.id, "reason", reason, "generation", g.generation)
	timeout := g.rebalanceTimeout()
	if delayed {
		delay := min(c.opts.InitialRebalanceDelay, timeout)
		g.newMemberAdded = false
		c.armJoin(g, delay, max(timeout-delay, 0), true)
		return
	}
	c.armJoin(g, timeout, 0, false)
	c.tryCompleteJoin(g)
}

// armJoin ends the rebalance after d: at once (the rebalance timeout), or,
// for the initial delay, after another delay while new members came, for
// at most remaining more.
func (c *Coordinator) armJoin(g *group, d, remaining time.Duration, initial bool) {
	if g.joinTimer != nil {
		g.joinTimer.Stop()
	}
	g.joinSeq++
	seq := g.joinSeq
	g.initialDelay = initial
	g.joinTimer = c.after(d, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.joinSeq != seq || g.state != PreparingRebalance {
			return
		}
		if initial && g.newMemberAdded && remaining > 0 {
			g.newMemberAdded = false
			delay := min(c.opts.InitialRebalanceDelay, remaining)
			c.armJoin(g, delay, max(remaining-delay, 0), true)
			return
		}
		c.completeJoin(g)
	})
}

// tryCompleteJoin completes the rebalance once every member has rejoined
// (never during the initial delay, which runs its course).
func (c *Coordinator) tryCompleteJoin(g *group) {
	if g.state == PreparingRebalance && !g.initialDelay && g.allJoined() {
		c.completeJoin(g)
	}
}

// completeJoin ends the join phase: members that did not rejoin are
// removed, the generation moves on, and every member gets its JoinGroup
// response (the leader with everyone's metadata). An empty group's new
// generation is stored at once; a non-empty one is stored with the
// leader's assignment (SyncGroup).
func (c *Coordinator) completeJoin(g *group) {
	if g.joinTimer != nil {
		g.joinTimer.Stop()
		g.joinTimer = nil
	}
	g.joinSeq++
	g.initialDelay = false
	for _, id := range append([]string(nil), g.order...) {
		if m := g.members[id]; m.joinWait == nil {
			g.remove(id)
			c.opts.Logger.Debug("removing a member that did not rejoin", "group", g.id, "member", id)
		}
	}
	for id, t := range g.pending {
		t.Stop()
		delete(g.pending, id)
	}
	now := c.opts.clock.Now()
	g.generation++
	if len(g.members) == 0 {
		g.protocol, g.leader = "", ""
		g.transition(Empty, now)
		if err := c.storeGroup(g); err != nil {
			c.opts.Logger.Error("storing an empty group", "group", g.id, "err", err)
		}
		return
	}
	g.protocol = g.selectProtocol()
	g.transition(CompletingRebalance, now)
	clear(g.pendingSync)
	for _, id := range g.order {
		m := g.members[id]
		m.joinWait <- g.joinResponse(m)
		m.joinWait, m.isNew = nil, false
		put(&g.pendingSync, id, true)
		c.heartbeat(g, m)
	}
	gen := g.generation
	g.syncTimer = c.after(g.rebalanceTimeout(), func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.generation != gen || (g.state != CompletingRebalance && g.state != Stable) || len(g.pendingSync) == 0 {
			return
		}
		for id := range g.pendingSync {
			c.removeMember(g, id, "no SyncGroup within the rebalance timeout")
		}
	})
}

// heartbeat restarts a member's session.
func (c *Coordinator) heartbeat(g *group, m *member) {
	if c.opts.ReadOnly {
		return
	}
	if m.timer != nil {
		m.timer.Stop()
	}
	deadline := c.opts.clock.Now().Add(m.sessionTimeout)
	m.deadline = deadline
	id := m.id
	m.timer = c.after(m.sessionTimeout, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		m := g.members[id]
		if m == nil || !m.deadline.Equal(deadline) || g.state == Dead {
			return
		}
		if m.joinWait != nil || m.syncWait != nil {
			c.heartbeat(g, m) // waiting for the coordinator: not expired
			return
		}
		c.stats.expired.Add(1)
		c.removeMember(g, id, "session timeout")
	})
}

// removeMember takes a member out (a leave, an expiry) and rebalances.
func (c *Coordinator) removeMember(g *group, id, reason string) {
	m := g.remove(id)
	if m == nil {
		return
	}
	if m.joinWait != nil {
		m.joinWait <- joinError(kerr.UnknownMemberID.Code, id)
	}
	if m.syncWait != nil {
		m.syncWait <- syncError(kerr.UnknownMemberID.Code)
	}
	c.opts.Logger.Debug("removing a member", "group", g.id, "member", id, "reason", reason)
	switch g.state {
	case Stable, CompletingRebalance:
		c.maybePrepareRebalance(g, reason)
	case PreparingRebalance:
		c.tryCompleteJoin(g)
	}
}

// addPending hands out a member id (MEMBER_ID_REQUIRED): the member must
// join with it within its session timeout.
func (c *Coordinator) addPending(g *group, id string, session time.Duration) {
	put(&g.pending, id, c.after(session, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if _, ok := g.pending[id]; !ok {
			return
		}
		delete(g.pending, id)
		c.tryCompleteJoin(g)
	}))
}

// addMemberAndRebalance adds a joining member, which waits for the
// rebalance this starts (or joins).
func (c *Coordinator) addMemberAndRebalance(g *group, m *member) chan *kmsg.JoinGroupResponse {
	ch := make(chan *kmsg.JoinGroupResponse, 1)
	m.joinWait, m.isNew = ch, true
	g.add(m)
	if g.state == PreparingRebalance && g.generation == 0 {
		g.newMemberAdded = true
	}
	c.maybePrepareRebalance(g, "adding member "+m.id)
	c.tryCompleteJoin(g)
	return ch
}

// updateAndRebalance takes a known member's new join: its protocols and
// timeouts change, and it waits for the rebalance.
func (c *Coordinator) updateAndRebalance(g *group, m *member, j joining) chan *kmsg.JoinGroupResponse {
	m.protocols, m.sessionTimeout, m.rebalanceTimeout = j.protocols, j.session, j.rebalance
	m.clientID, m.clientHost = j.clientID, j.clientHost
	if m.joinWait != nil {
		m.joinWait <- joinError(kerr.RebalanceInProgress.Code, m.id) // superseded by this join
	}
	ch := make(chan *kmsg.JoinGroupResponse, 1)
	m.joinWait = ch
	c.maybePrepareRebalance(g, "member "+m.id+" rejoining")
	c.tryCompleteJoin(g)
	return ch
}

// newMemberID is Kafka's: the client id (or group.instance.id) and a UUID.
func newMemberID(prefix string) string {
	var u [16]byte
	_, _ = rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%s-%x-%x-%x-%x-%x", prefix, u[0:4], u[4:6], u[6:8], u[8:10], u[10:])
}
