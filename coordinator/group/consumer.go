package group

import (
	"cmp"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"hash/fnv"
	"maps"
	"regexp"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/coordinator/internal/store"
)

// Consumer groups (KIP-848): members heartbeat with ConsumerGroupHeartbeat
// and the coordinator assigns. Every change of the group raises its epoch;
// the coordinator then computes a target assignment at that epoch, and
// each member reconciles towards it on its heartbeats: it first gives up
// (revokes) the partitions it must lose, staying at its epoch, and only
// then moves to the target's epoch and gets the partitions it gains, each
// once its previous owner has released it. So no partition is ever owned
// by two members.

// memberState is a consumer group member's reconciliation state, as
// Kafka's MemberState.
type memberState int8

const (
	memberStable     memberState = 0 // at the target epoch, holding all of its target
	memberUnrevoked  memberState = 1 // must revoke partitions before going on
	memberUnreleased memberState = 2 // at the target epoch, waiting for partitions others still hold
)

// Member epochs a heartbeat sends to join and to leave.
const (
	joinEpoch        = 0
	leaveEpoch       = -1
	staticLeaveEpoch = -2
)

// cmember is a consumer group member.
type cmember struct {
	id, instanceID, rackID, clientID, clientHost string
	subscribed                                   []string // topic names, sorted
	regex                                        string   // "" for none
	assignor                                     string   // the server assignor it asks for, "" for any
	rebalanceTimeout                             time.Duration

	epoch, prevEpoch   int32
	state              memberState
	assigned, revoking assignment
	assignedAt         map[tpKey]int32 // the epoch each assigned partition came at (KIP-1251)

	deadline, revokeDeadline time.Time // the session's end; the revocation's
	timer, revokeTimer       stopper
	owedTimer                stopper // a classic member owes a JoinGroup (told to rejoin) or a SyncGroup (after its join), within its rebalance timeout

	// classic is set for a member using the classic protocol (JoinGroup,
	// SyncGroup) in a consumer group: a group migrating between the two.
	// Never changed in place: replaced.
	classic *ClassicMemberMetadata
}

// regexTopics is a regular expression's topics, as resolved when the
// manager's topics were at version.
type regexTopics struct {
	topics    []string
	version   int64
	timestamp int64
}

// consumerGroup is a group's state under the consumer protocol. A
// heartbeat that changes it works on a clone and the clone replaces it
// once its records are written.
type consumerGroup struct {
	epoch, assignmentEpoch int32
	hash                   int64 // of the subscribed topics' metadata: a change means a new epoch
	created                int64
	members                map[string]*cmember
	static                 map[string]string // instance id → member id
	target                 map[string]assignment
	regexes                map[string]regexTopics
}

func newConsumerGroup(now time.Time) *consumerGroup {
	return &consumerGroup{created: now.UnixMilli(), members: map[string]*cmember{}, static: map[string]string{},
		target: map[string]assignment{}, regexes: map[string]regexTopics{}}
}

func (cg *consumerGroup) clone() *consumerGroup {
	n := *cg
	n.members = make(map[string]*cmember, len(cg.members))
	for id, m := range cg.members {
		mm := *m
		mm.assignedAt = maps.Clone(m.assignedAt)
		n.members[id] = &mm
	}
	n.static, n.target, n.regexes = maps.Clone(cg.static), maps.Clone(cg.target), maps.Clone(cg.regexes)
	return &n
}

// stateName is the group's state as Kafka's ConsumerGroupState names it.
func (cg *consumerGroup) stateName() string {
	switch {
	case len(cg.members) == 0:
		return "Empty"
	case cg.assignmentEpoch < cg.epoch:
		return "Assigning"
	}
	for _, m := range cg.members {
		if m.epoch != cg.assignmentEpoch || m.state != memberStable {
			return "Reconciling"
		}
	}
	return "Stable"
}

// owners returns who holds each partition: assigned or still revoking.
func (cg *consumerGroup) owners() map[tpKey]string {
	out := map[tpKey]string{}
	for _, m := range cg.members {
		for _, a := range []assignment{m.assigned, m.revoking} {
			for id, ps := range a {
				for _, p := range ps {
					out[tpKey{id, p}] = m.id
				}
			}
		}
	}
	return out
}

// subscribedTopics is the union of the members' topics: names, and what
// their regular expressions resolved to.
func (cg *consumerGroup) subscribedTopics() map[string]bool {
	out := map[string]bool{}
	for _, m := range cg.members {
		for t := range cg.memberTopics(m) {
			out[t] = true
		}
	}
	return out
}

func (cg *consumerGroup) memberTopics(m *cmember) map[string]bool {
	out := map[string]bool{}
	for _, t := range m.subscribed {
		out[t] = true
	}
	if m.regex != "" {
		for _, t := range cg.regexes[m.regex].topics {
			out[t] = true
		}
	}
	return out
}

// compileRegex compiles a subscription's regular expression (RE2, as
// Kafka's RE2/J) to match whole topic names.
func compileRegex(s string) (*regexp.Regexp, error) {
	return regexp.Compile("^(?:" + s + ")$")
}

// validateHeartbeat is Kafka's check of a ConsumerGroupHeartbeat's fields:
// the message of the INVALID_REQUEST, or "".
func validateHeartbeat(r *kmsg.ConsumerGroupHeartbeatRequest) string {
	switch {
	case r.Group == "":
		return "GroupId can't be empty."
	case r.InstanceID != nil && *r.InstanceID == "":
		return "InstanceId can't be empty."
	case r.RackID != nil && *r.RackID == "":
		return "RackId can't be empty."
	case r.GetVersion() >= 1 && r.MemberID == "":
		return "MemberId can't be empty."
	case r.MemberEpoch < staticLeaveEpoch:
		return "MemberEpoch is invalid."
	case r.MemberEpoch != joinEpoch && r.MemberID == "":
		return "MemberId can't be empty."
	case r.MemberEpoch == staticLeaveEpoch && r.InstanceID == nil:
		return "InstanceId can't be null."
	case r.MemberEpoch == joinEpoch && r.RebalanceTimeoutMillis == -1:
		return "RebalanceTimeoutMs must be provided in first request."
	case r.MemberEpoch == joinEpoch && (r.Topics == nil || len(r.Topics) > 0):
		return "TopicPartitions must be empty when (re-)joining."
	case r.MemberEpoch == joinEpoch && r.SubscribedTopicNames == nil && r.SubscribedTopicRegex == nil:
		return "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
	}
	return ""
}

// ConsumerGroupHeartbeat is a consumer group member's heartbeat: it
// joins (epoch 0), leaves (-1, or -2 for a static member that will come
// back), or reports its subscription and owned partitions, and gets its
// epoch and the partitions it may own now.
func (c *Coordinator) ConsumerGroupHeartbeat(cl Client, r *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
	resp := r.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	resp.HeartbeatIntervalMillis = int32(c.opts.ConsumerHeartbeatInterval.Milliseconds())
	fail := func(e *kerr.Error, msg string) *kmsg.ConsumerGroupHeartbeatResponse {
		resp.ErrorCode = e.Code
		if msg != "" {
			resp.ErrorMessage = kmsg.StringPtr(msg)
		}
		return resp
	}
	if msg := validateHeartbeat(r); msg != "" {
		return fail(kerr.InvalidRequest, msg)
	}
	if code := c.Owns(r.Group); code != 0 {
		return fail(kerr.ErrorForCode(code).(*kerr.Error), "")
	}
	if a := r.ServerAssignor; a != nil && !slices.Contains(c.opts.ConsumerAssignors, *a) {
		return fail(kerr.UnsupportedAssignor, fmt.Sprintf("ServerAssignor %s is not supported. Supported assignors: %v.", *a, c.opts.ConsumerAssignors))
	}
	if re := r.SubscribedTopicRegex; re != nil && *re != "" {
		if _, err := compileRegex(*re); err != nil {
			if r.GetVersion() < 1 {
				return fail(kerr.InvalidRequest, "SubscribedTopicRegex is not supported before version 1.")
			}
			return fail(kerr.InvalidRegularExpression, fmt.Sprintf("SubscribedTopicRegex %s is not a valid regular expression: %v", *re, err))
		}
	}
	g := c.lookup(r.Group, r.MemberEpoch == joinEpoch)
	if g == nil {
		return fail(kerr.GroupIDNotFound, fmt.Sprintf("Consumer group %s not found.", r.Group))
	}
	defer g.mu.Unlock()
	var extra []store.KV
	cg, base, upgraded := g.cg, g.cg, false
	if cg == nil {
		switch {
		case len(g.members) == 0 && g.state == Empty:
			// An empty classic group (offsets only) becomes a consumer group.
			cg = newConsumerGroup(c.opts.clock.Now())
		case r.MemberEpoch == joinEpoch && g.protocolType == "consumer" && c.mayUpgrade() && len(g.members) < c.opts.ConsumerMaxSize:
			// Its first member to upgrade makes a classic group a
			// consumer group, its classic members in it.
			var err error
			if cg, err = c.fromClassic(g); err != nil {
				return fail(kerr.GroupIDNotFound, fmt.Sprintf("Cannot upgrade the classic group %s: %v.", r.Group, err))
			}
			upgraded = true
		default:
			return fail(kerr.GroupIDNotFound, fmt.Sprintf("Group %s is not a consumer group.", r.Group))
		}
		base = newConsumerGroup(c.opts.clock.Now()) // everything is written
		if g.generation > 0 || g.protocolType != "" {
			extra = append(extra, store.KV{Key: groupKey(g.id)})
		}
	}
	next := cg.clone()
	h := &heartbeat{c: c, g: g, cg: next, cl: cl, r: r}
	if code, msg := h.run(); code != nil {
		return fail(code, msg)
	}
	if upgraded {
		g.dropClassic() // before the commit sets Stable, so the classic state is gone
	}
	if err := c.commitConsumer(g, base, next, extra); err != nil {
		c.opts.Logger.Error("storing a consumer group", "group", g.id, "err", err)
		resp.ErrorCode = storeErrorCode(err)
		return resp
	}
	if r.MemberEpoch == leaveEpoch || r.MemberEpoch == staticLeaveEpoch && h.m == nil {
		c.maybeDowngrade(g)
	}
	m := h.m
	resp.MemberID = kmsg.StringPtr(h.memberID)
	resp.MemberEpoch = r.MemberEpoch
	if m != nil && r.MemberEpoch >= joinEpoch {
		resp.MemberEpoch = m.epoch
		full := r.RebalanceTimeoutMillis != -1 && (r.SubscribedTopicNames != nil || r.SubscribedTopicRegex != nil) && r.Topics != nil
		if r.MemberEpoch == joinEpoch || full || !h.before.equal(m.assigned) {
			resp.Assignment = c.wireAssignment(m.assigned)
		}
	}
	if m != nil && r.MemberEpoch >= joinEpoch {
		c.consumerHeartbeat(g, m.id)
	}
	return resp
}

// heartbeat is one ConsumerGroupHeartbeat applied to a clone of its group.
type heartbeat struct {
	c        *Coordinator
	g        *group
	cg       *consumerGroup
	cl       Client
	r        *kmsg.ConsumerGroupHeartbeatRequest
	memberID string
	m        *cmember   // the member after the heartbeat; nil once it left
	before   assignment // its assigned partitions before
}

func (h *heartbeat) run() (*kerr.Error, string) {
	r, cg := h.r, h.cg
	h.memberID = r.MemberID
	bump := false
	switch r.MemberEpoch {
	case joinEpoch:
		if h.memberID == "" { // v0: the coordinator names the member
			h.memberID = newUUID()
		}
		e, msg, isNew := h.join()
		if e != nil {
			return e, msg
		}
		bump = isNew
	case leaveEpoch, staticLeaveEpoch:
		m := cg.members[r.MemberID]
		if m == nil {
			return kerr.UnknownMemberID, fmt.Sprintf("Member %s is not a member of group %s.", r.MemberID, h.g.id)
		}
		if r.MemberEpoch == staticLeaveEpoch && m.instanceID != "" {
			// A static member leaving for a while keeps its partitions
			// (nobody else gets them) until its session ends.
			m.epoch = staticLeaveEpoch
			h.m = nil
			return nil, ""
		}
		cg.remove(m.id)
		h.m = nil
		bump = true
	default:
		m := cg.members[r.MemberID]
		if m == nil {
			if r.InstanceID != nil && cg.static[*r.InstanceID] != "" {
				return kerr.FencedInstanceID, fmt.Sprintf("Static member %s was replaced.", *r.InstanceID)
			}
			return kerr.UnknownMemberID, fmt.Sprintf("Member %s is not a member of group %s.", r.MemberID, h.g.id)
		}
		if r.MemberEpoch != m.epoch {
			// A member whose last response was lost retries at its
			// previous epoch, owning no more than it was given.
			if r.MemberEpoch != m.prevEpoch || r.Topics == nil || !ownedSubset(r.Topics, m.assigned) {
				return kerr.FencedMemberEpoch, fmt.Sprintf("The consumer group member has a smaller member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.", r.MemberEpoch, m.epoch)
			}
		}
		h.m, h.before = m, m.assigned
		changed, e, msg := h.update(m)
		if e != nil {
			return e, msg
		}
		bump = changed
	}
	h.c.refreshRegexes(cg, h.cl)
	hash := h.c.metadataHash(cg.subscribedTopics())
	if bump || hash != cg.hash {
		cg.epoch++
		cg.hash = hash
	}
	if cg.epoch > cg.assignmentEpoch {
		h.c.assignTarget(cg)
	}
	if h.m != nil {
		reconcile(cg, h.m, h.r.Topics)
	}
	return nil, ""
}

// join handles epoch 0: a new member, a member rejoining, or a static
// member replacing its previous incarnation.
func (h *heartbeat) join() (e *kerr.Error, msg string, isNew bool) {
	r, cg := h.r, h.cg
	m := cg.members[h.memberID]
	if inst := deref(r.InstanceID); inst != "" {
		if prev := cg.static[inst]; prev != "" && prev != h.memberID {
			old := cg.members[prev]
			if old != nil && old.epoch != staticLeaveEpoch {
				return kerr.UnreleasedInstanceID, fmt.Sprintf("Static member %s with instance id %s cannot join the group because the instance id is owned by member %s.", h.memberID, inst, prev), false
			}
			if old != nil {
				// The new incarnation takes the old one's partitions.
				nm := *old
				nm.assignedAt = maps.Clone(old.assignedAt)
				nm.id, nm.epoch, nm.prevEpoch, nm.state, nm.timer, nm.revokeTimer = h.memberID, 0, 0, memberStable, nil, nil
				cg.target[h.memberID] = cg.target[prev]
				cg.remove(prev)
				cg.members[h.memberID] = &nm
				m = &nm
			}
		}
	}
	if m == nil {
		if len(cg.members) >= h.c.opts.ConsumerMaxSize {
			return kerr.GroupMaxSizeReached, fmt.Sprintf("The consumer group has reached its maximum capacity of %d members.", h.c.opts.ConsumerMaxSize), false
		}
		m = &cmember{id: h.memberID, state: memberStable, assigned: assignment{}, revoking: assignment{}, assignedAt: map[tpKey]int32{}}
		cg.members[m.id] = m
		isNew = true
	}
	if m.classic != nil {
		m.classic, isNew = nil, true // a classic member upgrading in place
	}
	h.m, h.before = m, m.assigned
	changed, e, msg := h.update(m)
	return e, msg, isNew || changed
}

// update takes the heartbeat's member fields; it says whether the
// subscription changed (which needs a new epoch).
func (h *heartbeat) update(m *cmember) (bool, *kerr.Error, string) {
	r := h.r
	m.clientID, m.clientHost = h.cl.ID, h.cl.Host
	if r.RackID != nil {
		m.rackID = *r.RackID
	}
	if r.InstanceID != nil {
		m.instanceID = *r.InstanceID
		h.cg.static[m.instanceID] = m.id
	}
	if r.RebalanceTimeoutMillis > 0 {
		m.rebalanceTimeout = ms(r.RebalanceTimeoutMillis)
	}
	changed := false
	if r.SubscribedTopicNames != nil {
		names := slices.Clone(r.SubscribedTopicNames)
		slices.Sort(names)
		names = slices.Compact(names)
		changed = changed || !slices.Equal(names, m.subscribed)
		m.subscribed = names
	}
	if r.SubscribedTopicRegex != nil && *r.SubscribedTopicRegex != m.regex {
		m.regex, changed = *r.SubscribedTopicRegex, true
	}
	if r.ServerAssignor != nil && *r.ServerAssignor != m.assignor {
		m.assignor, changed = *r.ServerAssignor, true
	}
	return changed, nil, ""
}

// remove takes a member out, with its target and static id.
func (cg *consumerGroup) remove(id string) {
	m := cg.members[id]
	if m == nil {
		return
	}
	delete(cg.members, id)
	delete(cg.target, id)
	if m.instanceID != "" && cg.static[m.instanceID] == id {
		delete(cg.static, m.instanceID)
	}
}

// ownedSubset says the partitions a heartbeat reports owning are all in a.
func ownedSubset(owned []kmsg.ConsumerGroupHeartbeatRequestTopic, a assignment) bool {
	for _, t := range owned {
		for _, p := range t.Partitions {
			if !a.has(checkpoint.TopicID(t.TopicID), p) {
				return false
			}
		}
	}
	return true
}

// ownsAny says the heartbeat reports owning one of a's partitions (or
// reports nothing, so it may).
func ownsAny(owned []kmsg.ConsumerGroupHeartbeatRequestTopic, a assignment) bool {
	if owned == nil {
		return true
	}
	for _, t := range owned {
		for _, p := range t.Partitions {
			if a.has(checkpoint.TopicID(t.TopicID), p) {
				return true
			}
		}
	}
	return false
}

// reconcile moves a member towards the group's target assignment, as
// Kafka's CurrentAssignmentBuilder: a member holding partitions the target
// takes away first revokes them (staying at its epoch); then it moves to
// the target epoch with what it kept and every target partition nobody
// else holds (waiting, UNRELEASED, for the rest).
func reconcile(cg *consumerGroup, m *cmember, owned []kmsg.ConsumerGroupHeartbeatRequestTopic) {
	if m.epoch == staticLeaveEpoch {
		return
	}
	switch m.state {
	case memberStable:
		if m.epoch == cg.assignmentEpoch {
			return
		}
		nextAssignment(cg, m, m.epoch, owned)
	case memberUnrevoked:
		if ownsAny(owned, m.revoking) {
			return
		}
		m.revoking = assignment{}
		nextAssignment(cg, m, m.epoch+1, owned)
	case memberUnreleased:
		nextAssignment(cg, m, m.epoch, owned)
	default: // a state this version does not know: start again from the target
		nextAssignment(cg, m, cg.assignmentEpoch, owned)
	}
}

func nextAssignment(cg *consumerGroup, m *cmember, epoch int32, owned []kmsg.ConsumerGroupHeartbeatRequestTopic) {
	target := cg.target[m.id]
	keep := m.assigned.filter(target.has)
	revoke := m.assigned.filter(func(id checkpoint.TopicID, p int32) bool { return !target.has(id, p) })
	owners := cg.owners()
	unreleased := false
	gain := target.filter(func(id checkpoint.TopicID, p int32) bool {
		if keep.has(id, p) {
			return false
		}
		if o := owners[tpKey{id, p}]; o != "" && o != m.id {
			unreleased = true
			return false
		}
		return true
	})
	setEpoch := func(e int32) {
		if e != m.epoch {
			m.prevEpoch, m.epoch = m.epoch, e
		}
	}
	switch {
	case revoke.count() > 0 && ownsAny(owned, revoke):
		setEpoch(epoch)
		m.state, m.assigned, m.revoking = memberUnrevoked, keep, revoke
	default:
		setEpoch(cg.assignmentEpoch)
		m.state = memberStable
		if unreleased {
			m.state = memberUnreleased
		}
		for _, k := range gain.keys() {
			m.assignedAt[k] = cg.assignmentEpoch
		}
		m.assigned, m.revoking = keep.union(gain), assignment{}
	}
	for k := range m.assignedAt {
		if !m.assigned.has(k.id, k.p) {
			delete(m.assignedAt, k)
		}
	}
}

// assignTarget computes the target assignment at the group's epoch with
// the assignor most members ask for (the first configured one if none
// asks).
func (c *Coordinator) assignTarget(cg *consumerGroup) {
	name := c.assignorOf(cg)
	in := assignInput{subscribed: map[string]map[string]bool{}, previous: cg.target}
	for id, m := range cg.members {
		in.members = append(in.members, id)
		in.subscribed[id] = cg.memberTopics(m)
	}
	slices.Sort(in.members)
	for _, name := range sortedKeys(cg.subscribedTopics()) {
		if id, n, ok := c.topics.TopicPartitions(name); ok {
			in.topics = append(in.topics, assignTopic{name: name, id: id, partitions: n})
		}
	}
	cg.target = assignors[name](in)
	cg.assignmentEpoch = cg.epoch
}

// metadataHash is a hash of the subscribed topics' ids and partition
// counts: when it changes (a topic created, deleted, recreated or given
// partitions), the group gets a new epoch and a new target.
func (c *Coordinator) metadataHash(topics map[string]bool) int64 {
	h := fnv.New64a()
	for _, name := range sortedKeys(topics) {
		id, n, ok := c.topics.TopicPartitions(name)
		if !ok {
			continue
		}
		fmt.Fprintf(h, "%s\x00%x\x00%d\x00", name, id[:], n)
	}
	return int64(h.Sum64())
}

// refreshRegexes resolves the members' regular expressions against the
// topics (only those cl may describe; internal ones too, as Kafka's do)
// when the topics changed since they were last resolved, and forgets the
// ones no member uses.
func (c *Coordinator) refreshRegexes(cg *consumerGroup, cl Client) {
	used := map[string]bool{}
	for _, m := range cg.members {
		if m.regex != "" {
			used[m.regex] = true
		}
	}
	for re := range cg.regexes {
		if !used[re] {
			delete(cg.regexes, re)
		}
	}
	version := int64(c.topics.TopicsVersion())
	for re := range used {
		if r, ok := cg.regexes[re]; ok && r.version == version {
			continue
		}
		rx, err := compileRegex(re)
		if err != nil {
			continue
		}
		var topics []string
		for _, t := range c.topics.TopicNames() {
			if rx.MatchString(t) && (cl.MayDescribe == nil || cl.MayDescribe(t)) {
				topics = append(topics, t)
			}
		}
		old := cg.regexes[re]
		if !slices.Equal(old.topics, topics) || old.timestamp == 0 {
			old.timestamp = c.opts.clock.Now().UnixMilli()
		}
		cg.regexes[re] = regexTopics{topics: topics, version: version, timestamp: old.timestamp}
	}
}

// wireAssignment is an assignment as a heartbeat response carries it.
func (c *Coordinator) wireAssignment(a assignment) *kmsg.ConsumerGroupHeartbeatResponseAssignment {
	out := &kmsg.ConsumerGroupHeartbeatResponseAssignment{Topics: []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{}}
	ids := slices.Collect(maps.Keys(a))
	slices.SortFunc(ids, func(x, y checkpoint.TopicID) int { return slices.Compare(x[:], y[:]) })
	for _, id := range ids {
		out.Topics = append(out.Topics, kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{TopicID: id, Partitions: slices.Clone(a[id])})
	}
	return out
}

func newUUID() string {
	var u [16]byte
	_, _ = rand.Read(u[:])
	return base64.RawURLEncoding.EncodeToString(u[:])
}

// commitConsumer writes what changed from cur to next (and extra) durably,
// then makes next the group's state and sets the members' timers.
func (c *Coordinator) commitConsumer(g *group, cur, next *consumerGroup, extra []store.KV) error {
	recs := append(extra, consumerDiff(g.id, cur, next)...)
	if len(recs) > 0 {
		if err := c.log.Append(g.partition, c.opts.clock.Now(), recs...); err != nil {
			return err
		}
	}
	for id, m := range cur.members {
		if next.members[id] == nil {
			stopTimers(m)
		}
	}
	g.cg = next
	g.protocolType, g.protocol = "consumer", c.assignorOf(next)
	state := Stable
	if len(next.members) == 0 {
		state = Empty
	}
	if state != g.state {
		g.transition(state, c.opts.clock.Now())
	}
	if !c.opts.ReadOnly {
		for _, m := range next.members {
			c.armRevocation(g, m)
		}
	}
	return nil
}

func stopTimers(m *cmember) {
	for _, t := range []stopper{m.timer, m.revokeTimer, m.owedTimer} {
		if t != nil {
			t.Stop()
		}
	}
}

// consumerHeartbeat restarts a member's session.
func (c *Coordinator) consumerHeartbeat(g *group, id string) {
	m := g.cg.members[id]
	if m == nil || c.opts.ReadOnly {
		return
	}
	if m.timer != nil {
		m.timer.Stop()
	}
	session := c.opts.ConsumerSessionTimeout
	if m.classic != nil {
		session = ms(m.classic.SessionTimeoutMs) // a classic member's own
	}
	deadline := c.opts.clock.Now().Add(session)
	m.deadline = deadline
	m.timer = c.after(session, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.cg == nil || g.state == Dead {
			return
		}
		if m := g.cg.members[id]; m != nil && m.deadline.Equal(deadline) {
			c.stats.expired.Add(1)
			c.fenceConsumer(g, id, "session timeout")
		}
	})
}

// armRevocation gives a member that must revoke partitions its rebalance
// timeout to do so, and stops the clock once it has.
func (c *Coordinator) armRevocation(g *group, m *cmember) {
	if m.state != memberUnrevoked {
		if m.revokeTimer != nil {
			m.revokeTimer.Stop()
			m.revokeTimer, m.revokeDeadline = nil, time.Time{}
		}
		return
	}
	if m.revokeTimer != nil {
		return // already running for this revocation
	}
	d := cmp.Or(m.rebalanceTimeout, c.opts.ConsumerSessionTimeout)
	deadline := c.opts.clock.Now().Add(d)
	id, epoch := m.id, m.epoch
	m.revokeDeadline = deadline
	m.revokeTimer = c.after(d, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.cg == nil || g.state == Dead {
			return
		}
		if m := g.cg.members[id]; m != nil && m.state == memberUnrevoked && m.epoch == epoch && m.revokeDeadline.Equal(deadline) {
			c.fenceConsumer(g, id, "rebalance timeout: partitions not revoked")
		}
	})
}

// fenceConsumer takes a member out of its group (its session or rebalance
// timed out): the group gets a new epoch and target.
func (c *Coordinator) fenceConsumer(g *group, id, reason string) {
	cur := g.cg
	next := cur.clone()
	next.remove(id)
	next.hash = c.metadataHash(next.subscribedTopics())
	next.epoch++
	c.assignTarget(next)
	if err := c.commitConsumer(g, cur, next, nil); err != nil {
		c.opts.Logger.Error("removing a consumer group member", "group", g.id, "member", id, "reason", reason, "err", err)
		return
	}
	c.opts.Logger.Debug("removed a consumer group member", "group", g.id, "member", id, "reason", reason)
	if cur.members[id].classic == nil {
		c.maybeDowngrade(g)
	}
}

// validateConsumerCommit checks an offset commit to a consumer group, as
// Kafka's: without a member id and epoch only while the group is empty
// (an admin's or a standalone consumer's commit); otherwise by a member,
// through OffsetCommit v9+ (a transaction's commit through any version),
// at its epoch — or, as KIP-1251 allows, at an older epoch for partitions
// it was assigned at or before that epoch (the others are
// STALE_MEMBER_EPOCH one by one).
func (c *Coordinator) validateConsumerCommit(cg *consumerGroup, memberID string, epoch int32, oldAPI bool, tps []topicPartition) (int16, map[topicPartition]bool) {
	if epoch < 0 && memberID == "" && len(cg.members) == 0 {
		return 0, nil
	}
	m := cg.members[memberID]
	switch {
	case m == nil:
		return kerr.UnknownMemberID.Code, nil
	case m.classic != nil && epoch != m.epoch: // a classic member: its generation
		return kerr.IllegalGeneration.Code, nil
	case oldAPI && m.classic == nil:
		return kerr.UnsupportedVersion.Code, nil
	case epoch == m.epoch:
		return 0, nil
	case epoch > m.epoch || epoch < 0:
		return kerr.StaleMemberEpoch.Code, nil
	}
	stale := map[topicPartition]bool{}
	for _, tp := range tps {
		id, _, ok := c.topics.TopicPartitions(tp.topic)
		k := tpKey{id, tp.partition}
		if at, held := m.assignedAt[k]; !ok || !m.assigned.has(k.id, k.p) || !held || at > epoch {
			stale[tp] = true
		}
	}
	return 0, stale
}

// validateFetch checks an OffsetFetch v9+ that names a member of a
// consumer group: it must be one, at its epoch.
func (cg *consumerGroup) validateFetch(memberID string, epoch int32) int16 {
	m := cg.members[memberID]
	switch {
	case m == nil:
		return kerr.UnknownMemberID.Code
	case epoch != m.epoch:
		return kerr.StaleMemberEpoch.Code
	}
	return 0
}

// ValidateFetchMember checks the member an OffsetFetch v9+ names (a
// consumer group member fetching its offsets): 0 when it may, and for a
// classic group or no member named.
func (c *Coordinator) ValidateFetchMember(group string, memberID *string, epoch int32) int16 {
	if memberID == nil {
		return 0
	}
	g := c.lookup(group, false)
	if g == nil {
		return 0
	}
	defer g.mu.Unlock()
	if g.cg == nil {
		return 0
	}
	return g.cg.validateFetch(*memberID, epoch)
}
