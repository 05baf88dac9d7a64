package group

import (
	"bytes"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// State is a classic group's state, as Kafka names it.
type State int8

const (
	// Empty: no members (offsets may remain).
	Empty State = iota
	// PreparingRebalance: members are (re)joining.
	PreparingRebalance
	// CompletingRebalance: joined, waiting for the leader's assignment.
	CompletingRebalance
	// Stable: assigned; members heartbeat.
	Stable
	// Dead: deleted, or expired with no offsets left.
	Dead
)

var stateNames = [...]string{"Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"}

func (s State) String() string { return stateNames[s] }

// protocol is one of a member's supported protocols (a consumer's
// assignor) with its metadata (the subscription).
type protocol struct {
	name     string
	metadata []byte
}

// member is one member of a group.
type member struct {
	id, instanceID       string // instanceID is group.instance.id, "" for a dynamic member
	clientID, clientHost string
	sessionTimeout       time.Duration
	rebalanceTimeout     time.Duration
	protocolType         string
	protocols            []protocol
	assignment           []byte

	// joinWait and syncWait are set while the member waits for its
	// JoinGroup or SyncGroup response; joinVersion is that request's.
	joinWait chan *kmsg.JoinGroupResponse
	syncWait chan *kmsg.SyncGroupResponse
	isNew    bool // joined in the rebalance under way

	// The session: expired when no heartbeat (or join, sync, commit) came
	// for sessionTimeout, unless the member waits for a join or sync.
	deadline time.Time
	timer    stopper
}

func (m *member) metadataFor(name string) []byte {
	for _, p := range m.protocols {
		if p.name == name {
			return p.metadata
		}
	}
	return nil
}

// matches says the member's protocols are the same as ps, in order.
func (m *member) matches(ps []protocol) bool {
	return slices.EqualFunc(m.protocols, ps, func(a, b protocol) bool {
		return a.name == b.name && bytes.Equal(a.metadata, b.metadata)
	})
}

// Offset is a committed offset.
type Offset struct {
	Offset          int64
	LeaderEpoch     int32
	Metadata        string
	CommitTimestamp int64
	// ExpireTimestamp is the commit's own expiry (OffsetCommit v2–v4 with
	// a retention time), -1 for none.
	ExpireTimestamp int64

	at int64 // the record's offset in __consumer_offsets: the later one wins
}

type topicPartition struct {
	topic     string
	partition int32
}

// group is one consumer group: its members and state, and its committed
// offsets. mu guards everything; it is held while the group's records are
// appended (durably) to __consumer_offsets, so the log's order is the
// group's.
type group struct {
	mu        sync.Mutex // guards the fields below but id and partition (fixed)
	id        string
	partition int32 // of __consumer_offsets

	state        State
	stateTime    int64 // ms, when the state last changed
	protocolType string
	protocol     string
	generation   int32
	leader       string
	members      map[string]*member
	order        []string           // member ids, in join order: the first is leader
	static       map[string]string  // group.instance.id → member id
	pending      map[string]stopper // member ids handed out with MEMBER_ID_REQUIRED, waiting for their join
	pendingSync  map[string]bool    // members of this generation that have not synced yet

	newMemberAdded bool    // a member joined during the initial delay
	initialDelay   bool    // the initial delay runs: the join does not complete early
	joinTimer      stopper // the rebalance's end: timeout, or the initial delay
	joinSeq        int     // invalidates a stale join timer
	syncTimer      stopper

	// cg is the group's state under the consumer protocol (KIP-848); nil
	// for a classic group. A consumer group's state above is Empty or
	// Stable (it has members), its protocolType "consumer" and its
	// protocol the server assignor.
	cg *consumerGroup

	offsets map[topicPartition]Offset
	// pendingTxn are transactional commits (TxnOffsetCommit) by producer
	// id, applied when their transaction commits.
	pendingTxn map[int64]map[topicPartition]Offset
}

// Its maps of members and their state are made as the first entry comes
// (a loaded group of offsets alone, most of a large load, has none).
func newGroup(id string, partition int32, now time.Time) *group {
	return &group{id: id, partition: partition, stateTime: now.UnixMilli(), offsets: map[topicPartition]Offset{}}
}

// put sets m[k] = v, making m first if it is nil.
func put[K comparable, V any](m *map[K]V, k K, v V) {
	if *m == nil {
		*m = map[K]V{}
	}
	(*m)[k] = v
}

func (g *group) transition(s State, now time.Time) {
	g.state = s
	g.stateTime = now.UnixMilli()
}

// rebalanceTimeout is the longest of the members' rebalance timeouts.
func (g *group) rebalanceTimeout() time.Duration {
	var d time.Duration
	for _, m := range g.members {
		d = max(d, m.rebalanceTimeout)
	}
	return d
}

// supports says a joining member's protocols fit the group: any protocol
// of a non-empty type when the group is empty, otherwise the group's type
// and one protocol every member (and this one) supports.
func (g *group) supports(protocolType string, ps []protocol) bool {
	if len(g.members) == 0 {
		return protocolType != "" && len(ps) > 0
	}
	if protocolType != g.protocolType {
		return false
	}
	for _, p := range ps {
		if g.allSupport(p.name) {
			return true
		}
	}
	return false
}

func (g *group) allSupport(name string) bool {
	for _, m := range g.members {
		if !slices.ContainsFunc(m.protocols, func(p protocol) bool { return p.name == name }) {
			return false
		}
	}
	return true
}

// selectProtocol picks the protocol every member supports that most
// members prefer (each votes for its first such protocol); ties go to
// the leader's preference.
func (g *group) selectProtocol() string {
	var candidates []string
	if len(g.order) == 0 {
		return ""
	}
	for _, p := range g.members[g.order[0]].protocols {
		if g.allSupport(p.name) {
			candidates = append(candidates, p.name)
		}
	}
	votes := map[string]int{}
	for _, m := range g.members {
		for _, p := range m.protocols {
			if slices.Contains(candidates, p.name) {
				votes[p.name]++
				break
			}
		}
	}
	best := ""
	for _, c := range candidates {
		if best == "" || votes[c] > votes[best] {
			best = c
		}
	}
	return best
}

// add makes m a member; the first member leads.
func (g *group) add(m *member) {
	if len(g.members) == 0 {
		g.protocolType = m.protocolType
	}
	put(&g.members, m.id, m)
	g.order = append(g.order, m.id)
	if m.instanceID != "" {
		put(&g.static, m.instanceID, m.id)
	}
	if g.leader == "" {
		g.leader = m.id
	}
}

// remove takes m out of the group; the next member in join order leads.
func (g *group) remove(id string) *member {
	m := g.members[id]
	if m == nil {
		return nil
	}
	if m.timer != nil {
		m.timer.Stop()
	}
	delete(g.members, id)
	delete(g.pendingSync, id)
	g.order = slices.DeleteFunc(g.order, func(s string) bool { return s == id })
	if m.instanceID != "" && g.static[m.instanceID] == id {
		delete(g.static, m.instanceID)
	}
	if g.leader == id {
		g.leader = ""
		if len(g.order) > 0 {
			g.leader = g.order[0]
		}
	}
	return m
}

// allJoined says every member (and every member id handed out) is waiting
// for its join: the rebalance may complete.
func (g *group) allJoined() bool {
	if len(g.pending) > 0 {
		return false
	}
	for _, m := range g.members {
		if m.joinWait == nil {
			return false
		}
	}
	return true
}

// joinResponse is what member m gets when the join completes: the leader
// gets every member's metadata for the chosen protocol.
func (g *group) joinResponse(m *member) *kmsg.JoinGroupResponse {
	resp := kmsg.NewPtrJoinGroupResponse()
	resp.Generation = g.generation
	resp.ProtocolType = kmsg.StringPtr(g.protocolType)
	resp.Protocol = kmsg.StringPtr(g.protocol)
	resp.LeaderID = g.leader
	resp.MemberID = m.id
	if m.id == g.leader {
		for _, id := range g.order {
			o := g.members[id]
			jm := kmsg.JoinGroupResponseMember{MemberID: o.id, ProtocolMetadata: o.metadataFor(g.protocol)}
			if o.instanceID != "" {
				jm.InstanceID = kmsg.StringPtr(o.instanceID)
			}
			resp.Members = append(resp.Members, jm)
		}
	}
	return resp
}

// joinError answers a join with an error.
func joinError(code int16, memberID string) *kmsg.JoinGroupResponse {
	resp := kmsg.NewPtrJoinGroupResponse()
	resp.ErrorCode, resp.MemberID, resp.Generation = code, memberID, -1
	return resp
}

func syncError(code int16) *kmsg.SyncGroupResponse {
	resp := kmsg.NewPtrSyncGroupResponse()
	resp.ErrorCode = code
	return resp
}

// failSyncs answers every member waiting for a sync with code (a
// rebalance started, the group was deleted).
func (g *group) failSyncs(code int16) {
	for _, m := range g.members {
		if m.syncWait != nil {
			m.syncWait <- syncError(code)
			m.syncWait = nil
		}
	}
}
