package replica

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/cluster"
	"github.com/seglog/seglog/replica/state"
	"github.com/seglog/seglog/tablet"
)

// Partition is one partition this broker holds a replica of: its tablet
// and its replication rules (replica/state), whose actions it carries
// out — the I/O, the goroutines, the clock.
type Partition struct {
	tp checkpoint.TopicPartition
	id cluster.TopicID
	t  *tablet.Tablet
	m  *Manager
	// configs are the topic's configs in the cluster as the tablet took
	// them (reconcile's goroutine only).
	configs map[string]string

	// appendMu is held by a fetcher's append and by the change to leader,
	// so no fetched batch lands after the leader epoch's start is
	// recorded (taken before mu).
	appendMu sync.Mutex
	// mu guards the fields below.
	mu sync.Mutex
	// s is the replication rules' state: every change of role, ISR, high
	// watermark and waiting ack goes through it.
	s *state.Partition
	// st is the partition's state as this broker last applied it (with
	// what the rules do not read: ELR, reassignment, its etcd revision).
	st cluster.PartitionState
	// changed is closed when the high watermark moves or the leadership
	// or the ISR changes (and made again).
	changed chan struct{}
	// acks are the acks=all produces waiting (AwaitAcks), by the id
	// given to the rules; nextAck the next id.
	acks    map[uint64]chan int16
	nextAck uint64
	// fetchingFrom is the leader whose fetcher holds the partition
	// (NoLeader: none).
	fetchingFrom int32
	// leaderThrottled and followThrottled: the topic's throttled
	// replicas name this broker's replica of the partition, as leader or
	// as follower (throttle.go).
	leaderThrottled, followThrottled bool
}

// TopicPartition is the partition's name.
func (p *Partition) TopicPartition() checkpoint.TopicPartition { return p.tp }

// Tablet is the partition's local log.
func (p *Partition) Tablet() *tablet.Tablet { return p.t }

// State is the partition's state as this broker last applied it.
func (p *Partition) State() cluster.PartitionState {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.st
}

// Replicas are the partition's assigned replicas.
func (p *Partition) Replicas() []int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.s.Meta().Replicas
}

// FollowerProgress is a follower's progress as its leader sees it.
type FollowerProgress struct {
	Replica int32
	// LogEnd is the offset it fetches next (-1: it has not fetched since
	// this leadership began).
	LogEnd int64
	// LastCaughtUp is when it last had the leader's log end.
	LastCaughtUp time.Time
}

// Followers are the other replicas' progress while this broker leads the
// partition (nil when it does not), by replica id.
func (p *Partition) Followers() []FollowerProgress {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []FollowerProgress
	for _, f := range p.s.Followers() {
		out = append(out, FollowerProgress{Replica: f.Replica, LogEnd: f.LogEnd, LastCaughtUp: f.LastCaughtUp})
	}
	return out
}

// local is what the rules read of the log, the clock and the session
// (p.mu held).
func (p *Partition) local() state.Local {
	l := p.offsets()
	l.Now = p.m.opts.Now()
	return l
}

// offsets is local without the clock, for the events on every produce
// that do not read it (Appended, AwaitAck, CheckAck).
func (p *Partition) offsets() state.Local {
	l := localOf(p.t.Offsets())
	l.Session = p.m.session()
	return l
}

// outside is what an event's actions leave to do once p.mu is released:
// the fetchers and the coordinators take their own locks.
type outside struct {
	stop  bool
	fetch bool
	// leader and epoch to fetch at.
	leader, epoch int32
	tells         []state.Tell
}

// do carries out the actions the rules return, those that need p.mu
// (held): the high watermark, the ISR proposal, the acks, the waiters;
// the rest are added to out.
func (p *Partition) do(a state.Actions, out *outside) {
	if a.StopFetching {
		out.stop, out.fetch = true, false
	}
	if a.Fetch {
		out.fetch, out.leader, out.epoch = true, a.FetchLeader, a.FetchEpoch
	}
	if a.SetHW {
		if err := p.t.SetHighWatermark(a.HW); err != nil {
			p.m.log.Warn("replica: moving the high watermark failed", "partition", p.tp.String(), "err", err)
		}
	}
	if a.Propose != nil {
		p.alter(*a.Propose)
	}
	for _, c := range a.Completed {
		if ch, ok := p.acks[c.ID]; ok {
			delete(p.acks, c.ID)
			ch <- c.Code
		}
	}
	if a.Tell != state.TellNothing {
		out.tells = append(out.tells, a.Tell)
	}
	if a.Changed {
		p.notifyLocked()
	}
}

// finish does what do left for after p.mu.
func (p *Partition) finish(out outside) {
	switch {
	case out.fetch:
		p.m.startFollowing(p, out.leader, out.epoch)
	case out.stop:
		p.m.unfollow(p)
	}
	for _, t := range out.tells {
		switch t {
		case state.TellLeading:
			p.m.told(p, true)
		case state.TellLost:
			p.m.told(p, false)
		case state.TellReload:
			p.m.told(p, false)
			p.m.told(p, true)
		}
	}
}

// event runs one event of the rules under p.mu and carries out its
// actions.
func (p *Partition) event(ev func(l state.Local) state.Actions) {
	var out outside
	p.mu.Lock()
	p.do(ev(p.local()), &out)
	p.mu.Unlock()
	p.finish(out)
}

// notifyLocked wakes whoever waits on the partition.
func (p *Partition) notifyLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// Leads reports whether this broker leads the partition and may act as
// its leader now (in the session it took the leadership in, certainly
// alive).
func (p *Partition) Leads() bool {
	_, leads := p.LeaderEpoch()
	return leads
}

// LeaderEpoch reports the partition's leader epoch as this broker applied
// it, and whether this broker leads at it now (Leads).
func (p *Partition) LeaderEpoch() (int32, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.st.LeaderEpoch, p.s.Leads(p.m.session())
}

// CheckLeader answers a client request for the partition at
// currentEpoch (-1: unknown): 0 when this broker leads it at that epoch,
// else Kafka's error: NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH (the
// client's epoch is older), UNKNOWN_LEADER_EPOCH (newer).
func (p *Partition) CheckLeader(currentEpoch int32) int16 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.s.CheckLeader(currentEpoch, p.m.session())
}

// CheckHighWatermark answers OFFSET_NOT_AVAILABLE while a new leader's
// high watermark is not known to be its own (state.CheckHighWatermark:
// Kafka answers ListOffsets so, KIP-392; seglog answers consumers'
// fetches so too); 0 otherwise.
func (p *Partition) CheckHighWatermark() int16 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.s.CheckHighWatermark(p.t.Offsets().HighWatermark)
}

// CheckAppend answers whether a produce with acks may append: this broker
// leads, and for acks=all the ISR has min.insync.replicas members.
func (p *Partition) CheckAppend(acks int16) int16 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.s.CheckAppend(acks, p.m.session())
}

// AppendAsLeader appends a batch (a producer's or a coordinator's) to
// the partition's log as its leader, then tells the leadership (Appended:
// the high watermark may move, at once for an ISR of the leader alone) —
// Kafka's Partition.appendRecordsToLeader. That this broker leads is the
// caller's check first (CheckAppend, CheckLeader); the acknowledgement is
// AwaitAcks'.
func (p *Partition) AppendAsLeader(batch []byte, opts tablet.AppendOptions) (tablet.AppendResult, error) {
	res, err := p.t.Append(batch, opts)
	if err == nil {
		p.Appended()
	}
	return res, err
}

// Appended is called after an append as leader: the high watermark may
// move (an ISR of the leader alone).
func (p *Partition) Appended() {
	var out outside
	p.mu.Lock()
	p.do(p.s.Appended(p.offsets()), &out)
	p.mu.Unlock()
	p.finish(out)
}

// AwaitAcks waits until the high watermark covers end (the offset after
// the batch), for acks=all: 0 then, or NOT_LEADER_OR_FOLLOWER when the
// leadership is lost, NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR fell
// below min.insync.replicas, REQUEST_TIMED_OUT when ctx ends
// (state.Partition.AwaitAck: Kafka's delayed produce). A broker that is
// not certainly leased acknowledges nothing.
func (p *Partition) AwaitAcks(ctx context.Context, end int64) int16 {
	p.mu.Lock()
	if code, done := p.s.CheckAck(end, p.offsets()); done {
		p.mu.Unlock()
		return code // (a single node's, or a batch already covered: no wait)
	}
	ch := make(chan int16, 1)
	var out outside
	p.nextAck++
	id := p.nextAck
	p.acks[id] = ch
	p.do(p.s.AwaitAck(id, end, p.offsets()), &out)
	p.mu.Unlock()
	p.finish(out)
	select {
	case code := <-ch:
		return code
	case <-ctx.Done():
	}
	p.mu.Lock()
	p.s.CancelAck(id)
	delete(p.acks, id)
	p.mu.Unlock()
	select {
	case code := <-ch: // (answered meanwhile)
		return code
	default:
		return kerr.RequestTimedOut.Code
	}
}

// Changed returns a channel closed at the next change of the high
// watermark, the ISR or the leadership.
func (p *Partition) Changed() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.changed
}

// FollowerFetch records that follower replica fetches from fetchOffset
// (it holds everything below) with its log starting at logStart
// (state.Partition.FollowerFetch: its progress, the ISR's expansion, the
// high watermark and the low one). It answers Kafka's error for a fetch
// this broker cannot serve as leader, and whether the bytes sent count
// against the leader's replication throttle (the topic throttles this
// replica, the follower is not in the ISR: throttle.go).
func (p *Partition) FollowerFetch(replica int32, currentEpoch int32, fetchOffset, logStart int64) (code int16, throttled bool) {
	var out outside
	p.mu.Lock()
	throttled = p.leaderThrottled && !p.s.InISR(replica)
	code, a := p.s.FollowerFetch(replica, currentEpoch, fetchOffset, logStart, p.local())
	p.do(a, &out)
	p.mu.Unlock()
	p.finish(out)
	return code, throttled && code == 0
}

// AwaitLowWatermark waits until every replica in the ISR has its log
// start at offset or later (Kafka's DeleteRecords answer: the records
// below are gone from every in-sync replica, so no new leader brings them
// back) and returns the low watermark, the least of their log starts; or
// Kafka's error: NOT_LEADER_OR_FOLLOWER when the leadership is lost,
// REQUEST_TIMED_OUT when ctx ends.
func (p *Partition) AwaitLowWatermark(ctx context.Context, offset int64) (int64, int16) {
	for {
		p.mu.Lock()
		ch := p.changed
		code := p.s.CheckLeader(-1, p.m.session())
		low := p.s.LowWatermark(p.t.Offsets().LogStartOffset)
		p.mu.Unlock()
		switch {
		case code != 0:
			return -1, code
		case low >= offset:
			return low, 0
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return -1, kerr.RequestTimedOut.Code
		}
	}
}

// alter writes an ISR change to etcd in the background (p.mu held); the
// partition takes the new state when it is written (or from the snapshot
// when another change won).
func (p *Partition) alter(pr state.Proposal) {
	from, minISR := p.st, p.s.Meta().MinISR
	go func() {
		ctx, cancel := context.WithTimeout(p.m.ctx, 10*time.Second)
		defer cancel()
		to, err := p.m.opts.Member.AlterPartition(ctx, p.tp.Topic, p.tp.Partition, from, pr.ISR, minISR)
		if err != nil {
			if !errors.Is(err, cluster.ErrStaleState) && p.m.ctx.Err() == nil {
				p.m.log.Warn("replica: changing the ISR failed", "partition", p.tp.String(), "err", err)
			}
			p.event(p.s.ISRFailed)
			return
		}
		p.m.metrics.isrChange(pr.Why)
		p.m.log.Info("replica: ISR "+pr.Why, "partition", p.tp.String(), "isr", to.ISR, "partition_epoch", to.PartitionEpoch)
		p.event(func(l state.Local) state.Actions {
			if to.PartitionEpoch > p.st.PartitionEpoch {
				p.st = to
			}
			return p.s.ISRWritten(to.ISR, to.PartitionEpoch, l)
		})
	}()
}

// PreferredReadReplica is KIP-392's choice, for a consumer in rack
// fetching at fetchOffset, of the replica to read from, as Kafka's
// RackAwareReplicaSelector chooses: the leader if it is in the rack (or
// no replica is), else state.Partition.PreferredReadReplica's. -1 is the
// leader.
func (p *Partition) PreferredReadReplica(rack string, fetchOffset int64, rackOf func(int32) string) int32 {
	if rack == "" || rackOf(p.m.me) == rack {
		return -1
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.s.PreferredReadReplica(fetchOffset, func(r int32) bool { return rackOf(r) == rack })
}

// CheckFollowerRead answers a consumer's fetch from this follower
// (KIP-392, Fetch v11+) at currentEpoch (-1: unknown): 0 when it may read
// its replica (up to its high watermark), else Kafka's error.
func (p *Partition) CheckFollowerRead(currentEpoch int32) int16 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.s.CheckFollowerRead(currentEpoch)
}
