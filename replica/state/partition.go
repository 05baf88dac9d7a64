package state

import (
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Role is what a replica does with its partition.
type Role uint8

const (
	// Offline: it neither leads nor follows (the partition has no
	// leader, or names this broker leader by a state this incarnation
	// may not act on).
	Offline Role = iota
	// Becoming: named leader, waiting for the log to record the leader
	// epoch's start (Actions.BecomeLeader; then Led or LeadFailed).
	Becoming
	// Leader: it leads, at Meta().LeaderEpoch.
	Leader
	// Follower: it fetches from Meta().Leader.
	Follower
)

func (r Role) String() string {
	return [...]string{"offline", "becoming", "leader", "follower"}[r]
}

// Meta is a partition's state as the controller (or its leader's ISR
// change) last wrote it, and whether this broker may act as the leader
// it names.
type Meta struct {
	Leader         int32
	LeaderEpoch    int32
	PartitionEpoch int32
	ISR            []int32
	// Replicas are the partition's assigned replicas; MinISR its
	// min.insync.replicas.
	Replicas []int32
	MinISR   int
	// MayLead: Leader is this broker and its incarnation Session may act
	// on the state — registered under that session, unfenced, and the
	// state written after it registered (a restarted broker never acts
	// on a leadership of its previous incarnation, whose acknowledged
	// records its log may have lost).
	MayLead bool
	Session int64
}

// Local is what the caller read just before an event: the local log's
// offsets, the time (Appended, AwaitAck and CheckAck do not read it: a
// caller may leave it out of those, the ones on every produce), and this
// broker's session (its incarnation) while it
// is certainly alive, 0 otherwise: a broker acts as the leader only in
// the session it took the leadership in — not once the session may have
// lapsed, nor in a new session (registered again after losing one)
// before the controller elects it again.
type Local struct {
	LogStart, LogEnd, HW int64
	Now                  time.Time
	Session              int64
}

// FollowerState is a follower's progress as its leader sees it (Kafka's
// replica state).
type FollowerState struct {
	Replica int32
	// LogEnd is the offset it fetches next (-1: it has not fetched since
	// this leadership began); LogStart its log start (-1: not told yet).
	LogEnd, LogStart int64
	// LastCaughtUp is when it last had the leader's log end.
	LastCaughtUp time.Time
	// lastFetch and lastFetchLeaderEnd: when it last fetched, and the
	// leader's log end then (a fetch reaching that later means it was
	// caught up at that time).
	lastFetch          time.Time
	lastFetchLeaderEnd int64
}

// Tell is what the coordinators of the partition (group, transaction)
// are told.
type Tell uint8

const (
	TellNothing Tell = iota
	// TellLeading: this broker leads the partition now.
	TellLeading
	// TellLost: it no longer does.
	TellLost
	// TellReload: it leads at a new leader epoch (another may have led
	// between: what was loaded is stale).
	TellReload
)

// Proposal is an ISR change for the controller to write (Kafka's
// AlterPartition) over the state at PartitionEpoch; ISRWritten or
// ISRFailed answers it.
type Proposal struct {
	ISR            []int32
	Why            string // "shrink" or "expand"
	PartitionEpoch int32
}

// Completion is an acks=all produce's answer: 0, or Kafka's error.
type Completion struct {
	ID   uint64
	Code int16
}

// Actions are what an event calls for, in this order: stop fetching;
// record the leader epoch; start fetching; set the high watermark;
// propose the ISR change; answer the completed acks; tell the
// coordinators; wake whoever waits on the partition.
type Actions struct {
	// Ignored: the state given is older than the one held (SetMeta).
	Ignored bool
	// StopFetching: stop fetching the partition (and finish the append
	// in flight) — before BecomeLeader.
	StopFetching bool
	// BecomeLeader: record Meta().LeaderEpoch as starting at the log end,
	// then call Led (or LeadFailed).
	BecomeLeader bool
	// Fetch: fetch from FetchLeader at FetchEpoch, truncating first.
	Fetch       bool
	FetchLeader int32
	FetchEpoch  int32
	// SetHW: move the high watermark to HW.
	SetHW bool
	HW    int64
	// Propose, if set, is an ISR change to write.
	Propose *Proposal
	// Completed are the acks=all produces answered.
	Completed []Completion
	Tell      Tell
	// Changed: the high watermark, the ISR, the leadership or a
	// follower's log start moved (waiters look again).
	Changed bool
}

// Partition is one replica's replication rules. It is not safe for
// concurrent use: the caller serializes the events (and carries out each
// one's actions before the next).
type Partition struct {
	me  int32
	lag time.Duration

	meta Meta
	role Role
	// wasLeader: while Becoming, whether it led before (what to tell).
	wasLeader bool
	// session is the incarnation the leadership was taken in.
	session int64
	// following is the leader fetched from (NoLeader: none).
	following int32
	// epochStart is where the leader's epoch starts in its log: a
	// follower joins the ISR only once it has the epoch.
	epochStart int64
	followers  map[int32]*FollowerState
	// pending is the ISR change on its way to the controller (one at a
	// time; nil: none).
	pending *Proposal
	// acks are the acks=all produces waiting for the high watermark, by
	// the offset after their batch (Kafka's delayed produce).
	acks []pendingAck
}

type pendingAck struct {
	id  uint64
	end int64
}

// New is the rules of broker me's replica of a partition, with lag as
// replica.lag.time.max.ms: offline, at no state yet.
func New(me int32, lag time.Duration) *Partition {
	return &Partition{me: me, lag: lag, following: NoLeader,
		meta: Meta{Leader: NoLeader, LeaderEpoch: -1, PartitionEpoch: -1}}
}

// Role is what the replica does now.
func (p *Partition) Role() Role { return p.role }

// Meta is the state last applied (its slices are the partition's: not to
// be changed).
func (p *Partition) Meta() Meta { return p.meta }

// Following is the leader the replica fetches from (NoLeader: none).
func (p *Partition) Following() int32 { return p.following }

// EpochStart is where the leader's epoch starts in its log (while it
// leads).
func (p *Partition) EpochStart() int64 { return p.epochStart }

// InISR reports whether replica r is in the ISR.
func (p *Partition) InISR(r int32) bool { return slices.Contains(p.meta.ISR, r) }

// Leads reports whether the replica leads and may act as leader now, in
// session (0: the session is not certainly alive).
func (p *Partition) Leads(session int64) bool {
	return p.role == Leader && session != 0 && session == p.session
}

// Follows reports whether an answer of leader at epoch may change the log
// (an append or a truncation from a fetch): the replica still follows
// that leader at that epoch. An answer of a leader it no longer follows —
// it may lead now — changes nothing.
func (p *Partition) Follows(leader, epoch int32) bool {
	return p.role == Follower && p.following == leader && p.meta.LeaderEpoch == epoch
}

// CheckLeader answers a request for the partition at currentEpoch (-1:
// unknown) that only its leader serves: 0 when this replica leads it at
// that epoch, else Kafka's error: FENCED_LEADER_EPOCH (the request's
// epoch is older), UNKNOWN_LEADER_EPOCH (newer), NOT_LEADER_OR_FOLLOWER.
func (p *Partition) CheckLeader(currentEpoch int32, session int64) int16 {
	if c := p.checkEpoch(currentEpoch); c != 0 {
		return c
	}
	if !p.Leads(session) {
		return kerr.NotLeaderForPartition.Code
	}
	return 0
}

// checkEpoch answers a request at currentEpoch (-1: unknown):
// FENCED_LEADER_EPOCH when it is older than the replica's, UNKNOWN_LEADER_EPOCH
// when newer, else 0.
func (p *Partition) checkEpoch(currentEpoch int32) int16 {
	switch {
	case currentEpoch >= 0 && currentEpoch < p.meta.LeaderEpoch:
		return kerr.FencedLeaderEpoch.Code
	case currentEpoch > p.meta.LeaderEpoch:
		return kerr.UnknownLeaderEpoch.Code
	}
	return 0
}

// CheckAppend answers whether a produce with acks may append: this
// replica leads, and for acks=all the ISR has min.insync.replicas
// members (NOT_ENOUGH_REPLICAS otherwise).
func (p *Partition) CheckAppend(acks int16, session int64) int16 {
	if c := p.CheckLeader(-1, session); c != 0 {
		return c
	}
	if acks == -1 && len(p.meta.ISR) < p.meta.MinISR {
		return kerr.NotEnoughReplicas.Code
	}
	return 0
}

// CheckHighWatermark answers OFFSET_NOT_AVAILABLE while a new leader's
// high watermark hw is below the start of its leader epoch: it may be
// below the one the old leader had told, and a consumer would see it go
// back (KIP-392's ListOffsets answer). Once the ISR has the epoch's start
// it is at least the old one. 0 otherwise.
func (p *Partition) CheckHighWatermark(hw int64) int16 {
	if p.role == Leader && hw < p.epochStart {
		return kerr.OffsetNotAvailable.Code
	}
	return 0
}

// CheckFollowerRead answers a consumer's fetch from this follower
// (KIP-392) at currentEpoch (-1: unknown): 0 when it may read its replica
// (up to its high watermark), else Kafka's error.
func (p *Partition) CheckFollowerRead(currentEpoch int32) int16 {
	if c := p.checkEpoch(currentEpoch); c != 0 {
		return c
	}
	if p.role != Follower {
		return kerr.NotLeaderForPartition.Code // (a leader reads as a leader; a replica following no one serves nothing)
	}
	return 0
}

// Followers are the other replicas' progress while the replica leads
// (nil otherwise), by replica id.
func (p *Partition) Followers() []FollowerState {
	if p.role != Leader {
		return nil
	}
	out := make([]FollowerState, 0, len(p.followers))
	for _, f := range p.followers {
		out = append(out, *f)
	}
	slices.SortFunc(out, func(a, b FollowerState) int { return int(a.Replica) - int(b.Replica) })
	return out
}

// LowWatermark is the least log start over the ISR, the leader's
// logStart among them: DeleteRecords is answered once it passes the
// offset asked (the records below are gone from every in-sync replica, so
// no new leader brings them back).
func (p *Partition) LowWatermark(logStart int64) int64 {
	low := logStart
	for _, r := range p.meta.ISR {
		if f, ok := p.followers[r]; ok {
			low = min(low, f.LogStart)
		}
	}
	return low
}

// PreferredReadReplica is KIP-392's choice, for a consumer fetching at
// fetchOffset in a rack other than the leader's, of the replica to read
// from, as Kafka's RackAwareReplicaSelector chooses: of the followers in
// the ISR and the consumer's rack (inRack) holding fetchOffset, the one
// with the most records (the one caught up most lately on a tie); -1 (the
// leader) when none is.
func (p *Partition) PreferredReadReplica(fetchOffset int64, inRack func(int32) bool) int32 {
	if p.role != Leader {
		return -1
	}
	best := int32(-1)
	var bestEnd int64
	var bestCaught time.Time
	for _, r := range p.meta.ISR {
		f, ok := p.followers[r]
		if r == p.me || !ok || f.LogEnd < fetchOffset || f.LogStart > fetchOffset || !inRack(r) {
			continue
		}
		if best < 0 || f.LogEnd > bestEnd || f.LogEnd == bestEnd && f.LastCaughtUp.After(bestCaught) {
			best, bestEnd, bestCaught = r, f.LogEnd, f.LastCaughtUp
		}
	}
	return best
}

// Becoming reports whether applying m makes the replica take a
// leadership (Actions.BecomeLeader): the caller stops its fetcher and
// holds its appends before SetMeta, so no fetched batch lands after the
// epoch's start is recorded.
func (p *Partition) Becoming(m Meta) bool {
	return m.PartitionEpoch >= p.meta.PartitionEpoch && m.MayLead &&
		(p.role != Leader || m.LeaderEpoch != p.meta.LeaderEpoch || m.Session != p.session)
}

// SetMeta applies the partition's state as the controller (or the
// leader's ISR change) wrote it: leadership taken (BecomeLeader, then Led)
// when the state names this incarnation leader at a new epoch; kept at
// the same epoch (its followers as the replicas now are); dropped when
// the state names another leader, none, or this broker by a state it may
// not act on; following the leader it names (truncating first) when that
// leader or its epoch changed. A state older than the one held (an ISR
// change of this leader wrote a newer) is Ignored.
func (p *Partition) SetMeta(m Meta, l Local) Actions {
	var a Actions
	if m.PartitionEpoch < p.meta.PartitionEpoch {
		a.Ignored = true
		return a
	}
	becoming := p.Becoming(m)
	wasLeader := p.role == Leader
	epochChanged := m.LeaderEpoch != p.meta.LeaderEpoch
	p.meta = m
	if becoming {
		p.stopFetching(&a)
		p.role, p.wasLeader, p.session = Becoming, wasLeader, m.Session
		a.BecomeLeader = true
		return a
	}
	follow := NoLeader
	switch {
	case m.MayLead: // (leading at this epoch already)
		p.trackFollowers(l.Now)
	case m.Leader == p.me || m.Leader == NoLeader:
		p.role, p.followers = Offline, nil
	default:
		p.role, p.followers = Follower, nil
		follow = m.Leader
	}
	switch {
	case follow == NoLeader:
		p.stopFetching(&a)
	case follow != p.following || epochChanged:
		p.stopFetching(&a)
		a.Fetch, a.FetchLeader, a.FetchEpoch = true, follow, m.LeaderEpoch
		p.following = follow
	}
	if wasLeader && p.role != Leader {
		a.Tell = TellLost
	}
	p.advance(&a, l)
	a.Changed = true
	p.settle(&a, l)
	return a
}

func (p *Partition) stopFetching(a *Actions) {
	if p.following != NoLeader {
		a.StopFetching = true
		p.following = NoLeader
	}
}

// Led is BecomeLeader done: the log records the epoch as starting at
// epochStart. The followers start unknown (each counts in the high
// watermark once it has fetched in this leadership).
func (p *Partition) Led(epochStart int64, l Local) Actions {
	var a Actions
	if p.role != Becoming {
		return a
	}
	p.role, p.epochStart = Leader, epochStart
	p.followers = map[int32]*FollowerState{}
	p.trackFollowers(l.Now)
	a.Tell = TellLeading
	if p.wasLeader {
		a.Tell = TellReload
	}
	p.advance(&a, l)
	a.Changed = true
	p.settle(&a, l)
	return a
}

// LeadFailed is BecomeLeader failed: the replica serves nothing until
// the next state.
func (p *Partition) LeadFailed(l Local) Actions {
	var a Actions
	if p.role != Becoming {
		return a
	}
	p.role = Offline
	if p.wasLeader {
		a.Tell = TellLost
	}
	a.Changed = true
	p.settle(&a, l)
	return a
}

// Close drops the replica (its partition deleted or moved, the broker
// closing): it stops fetching and leading, and its waiting acks are
// answered NOT_LEADER_OR_FOLLOWER.
func (p *Partition) Close(l Local) Actions {
	var a Actions
	p.stopFetching(&a)
	if p.role == Leader {
		a.Tell = TellLost
	}
	p.role, p.followers = Offline, nil
	a.Changed = true
	p.settle(&a, l)
	return a
}

// Appended is a local append as leader: the high watermark may move (an
// ISR of the leader alone).
func (p *Partition) Appended(l Local) Actions {
	var a Actions
	p.advance(&a, l)
	p.settle(&a, l)
	return a
}

// AwaitAck waits, as acks=all, for the high watermark to cover end (the
// offset after the produce's batch): the Completion comes in these
// Actions or a later event's — 0 then, or NOT_ENOUGH_REPLICAS_AFTER_APPEND
// when the ISR fell below min.insync.replicas, or NOT_LEADER_OR_FOLLOWER
// when the leadership is lost (or the session not certainly alive: a
// deposed leader acknowledges nothing). CancelAck forgets it.
func (p *Partition) AwaitAck(id uint64, end int64, l Local) Actions {
	var a Actions
	p.acks = append(p.acks, pendingAck{id: id, end: end})
	p.settle(&a, l)
	return a
}

// CheckAck is AwaitAck's answer when it needs no wait: the code, and
// done; not done, the produce must wait (AwaitAck).
func (p *Partition) CheckAck(end int64, l Local) (code int16, done bool) {
	if p.role == Becoming {
		return 0, false
	}
	return p.ackCode(end, l.HW, l)
}

// ackCode decides an ack for a batch ending at end with the high
// watermark at hw: NOT_LEADER_OR_FOLLOWER when the replica does not lead
// (or its session is not certainly alive); once hw covers it, 0, or
// NOT_ENOUGH_REPLICAS_AFTER_APPEND with the ISR below min.insync.replicas
// (Kafka's answer then); else not done.
func (p *Partition) ackCode(end, hw int64, l Local) (int16, bool) {
	switch {
	case !p.Leads(l.Session):
		return kerr.NotLeaderForPartition.Code, true
	case end > hw:
		return 0, false
	case len(p.meta.ISR) < p.meta.MinISR:
		return kerr.NotEnoughReplicasAfterAppend.Code, true
	}
	return 0, true
}

// CancelAck forgets a waiting ack (its request timed out or went).
func (p *Partition) CancelAck(id uint64) {
	p.acks = slices.DeleteFunc(p.acks, func(k pendingAck) bool { return k.id == id })
}

// Pending is how many acks wait.
func (p *Partition) Pending() int { return len(p.acks) }

// FollowerFetch is a follower's fetch from fetchOffset (it holds
// everything below) at currentEpoch, with its log starting at logStart:
// its progress, whether it is caught up (it fetched the leader's log end,
// or reached the end the leader had at its previous fetch), the high
// watermark, and the ISR's expansion once it has the high watermark and
// the leader's epoch. It answers Kafka's error for a fetch this replica
// cannot serve as leader (NOT_LEADER_OR_FOLLOWER for a broker that is not
// a replica of the partition), and OFFSET_OUT_OF_RANGE, counting
// nothing, for a fetch past the leader's log end (the follower must
// truncate).
func (p *Partition) FollowerFetch(replica, currentEpoch int32, fetchOffset, logStart int64, l Local) (int16, Actions) {
	var a Actions
	if c := p.CheckLeader(currentEpoch, l.Session); c != 0 {
		return c, a
	}
	f, ok := p.followers[replica]
	if !ok {
		return kerr.NotLeaderForPartition.Code, a
	}
	if fetchOffset > l.LogEnd {
		// (A log longer than the leader's, not truncated yet: its
		// progress is not its fetch offset.)
		return kerr.OffsetOutOfRange.Code, a
	}
	switch {
	case fetchOffset >= l.LogEnd:
		f.LastCaughtUp = l.Now
	case fetchOffset >= f.lastFetchLeaderEnd && !f.lastFetch.IsZero():
		f.LastCaughtUp = f.lastFetch
	}
	f.lastFetch, f.lastFetchLeaderEnd, f.LogEnd = l.Now, l.LogEnd, fetchOffset
	if logStart > f.LogStart {
		f.LogStart = logStart
		a.Changed = true // (DeleteRecords waits on the low watermark)
	}
	p.advance(&a, l)
	hw := l.HW
	if a.SetHW {
		hw = a.HW
	}
	if !p.InISR(replica) && fetchOffset >= hw && fetchOffset >= p.epochStart {
		p.propose(&a, append(slices.Clone(p.meta.ISR), replica), "expand", l)
	}
	p.settle(&a, l)
	return 0, a
}

// Tick is the leader's periodic check (every half of
// replica.lag.time.max.ms, as Kafka): the followers not caught up within
// it leave the ISR.
func (p *Partition) Tick(l Local) Actions {
	var a Actions
	if p.role != Leader {
		return a
	}
	isr := slices.DeleteFunc(slices.Clone(p.meta.ISR), func(r int32) bool {
		f, ok := p.followers[r]
		return r != p.me && (!ok || l.Now.Sub(f.LastCaughtUp) > p.lag)
	})
	if len(isr) < len(p.meta.ISR) {
		p.propose(&a, isr, "shrink", l)
	}
	p.settle(&a, l)
	return a
}

// propose asks for an ISR change, one at a time and only while the
// replica may act as leader.
func (p *Partition) propose(a *Actions, isr []int32, why string, l Local) {
	if p.pending != nil || !p.Leads(l.Session) {
		return
	}
	p.pending = &Proposal{ISR: isr, Why: why, PartitionEpoch: p.meta.PartitionEpoch}
	a.Propose = p.pending
}

// ISRWritten is a proposal written, as the state at partitionEpoch with
// isr: a follower that joins is caught up now (the time it was caught up
// before — before a crash, say — is not its lag). Waiters are woken even
// when the state had it already (the metadata came first): the next
// change may be proposed now.
func (p *Partition) ISRWritten(isr []int32, partitionEpoch int32, l Local) Actions {
	a := Actions{Changed: true}
	p.pending = nil
	if partitionEpoch <= p.meta.PartitionEpoch {
		return a
	}
	for _, r := range isr {
		if f, ok := p.followers[r]; ok && !p.InISR(r) {
			f.LastCaughtUp = l.Now
		}
	}
	p.meta.ISR, p.meta.PartitionEpoch = isr, partitionEpoch
	p.advance(&a, l)
	a.Changed = true
	p.settle(&a, l)
	return a
}

// ISRFailed is a proposal not written (another change won, or the
// session was lost): the next event may propose again (waiters are
// woken), and the high watermark no longer waits for a follower it would
// have added.
func (p *Partition) ISRFailed(l Local) Actions {
	a := Actions{Changed: true}
	p.pending = nil
	p.advance(&a, l)
	p.settle(&a, l)
	return a
}

// trackFollowers makes the leader's followers the partition's other
// replicas: one new to it (a leadership begun, a reassignment adding it)
// starts unknown, one no longer a replica is forgotten.
func (p *Partition) trackFollowers(now time.Time) {
	if p.followers == nil {
		p.followers = map[int32]*FollowerState{}
	}
	for _, r := range p.meta.Replicas {
		if _, ok := p.followers[r]; !ok && r != p.me {
			p.followers[r] = &FollowerState{Replica: r, LogEnd: -1, LogStart: -1, LastCaughtUp: now}
		}
	}
	for r := range p.followers {
		if !slices.Contains(p.meta.Replicas, r) {
			delete(p.followers, r)
		}
	}
}

// advance moves the high watermark to the least log end over the
// maximal ISR (the leader's own included), if that is higher — never
// while the ISR is below min.insync.replicas (KIP-966: so every replica
// that left the ISR since, an Eligible Leader Replica, holds every record
// below it), nor while a member has not fetched in this leadership.
//
// The maximal ISR is the ISR with the members a change on its way adds
// (and those it removes, until it is written), as Kafka's: a follower
// proposed for the ISR may be in it before the leader hears so, and the
// records the high watermark covers must be on it by then — else a
// record acknowledged while the expansion was on its way is missing from
// an ISR member, which may be elected (the randomized model found this).
func (p *Partition) advance(a *Actions, l Local) {
	if p.role != Leader || len(p.meta.ISR) < p.meta.MinISR {
		return
	}
	hw := l.LogEnd
	for _, r := range p.maximalISR() {
		if r == p.me {
			continue
		}
		f, ok := p.followers[r]
		if !ok || f.LogEnd < 0 {
			return
		}
		hw = min(hw, f.LogEnd)
	}
	if hw > l.HW {
		a.SetHW, a.HW, a.Changed = true, hw, true
	}
}

// maximalISR is the ISR and the members of the change on its way.
func (p *Partition) maximalISR() []int32 {
	if p.pending == nil {
		return p.meta.ISR
	}
	isr := slices.Clone(p.meta.ISR)
	for _, r := range p.pending.ISR {
		if !slices.Contains(isr, r) {
			isr = append(isr, r)
		}
	}
	return isr
}

// settle answers the waiting acks the state decides: all of them
// NOT_LEADER_OR_FOLLOWER when the replica does not lead (or its session
// is not certainly alive); those the high watermark covers 0, or
// NOT_ENOUGH_REPLICAS_AFTER_APPEND with the ISR below
// min.insync.replicas (Kafka's answer once the high watermark covers
// the batch).
func (p *Partition) settle(a *Actions, l Local) {
	if len(p.acks) == 0 || p.role == Becoming {
		return
	}
	hw := l.HW
	if a.SetHW {
		hw = a.HW
	}
	p.acks = slices.DeleteFunc(p.acks, func(k pendingAck) bool {
		code, done := p.ackCode(k.end, hw, l)
		if done {
			a.Completed = append(a.Completed, Completion{ID: k.id, Code: code})
		}
		return done
	})
}
