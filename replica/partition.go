package replica

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/cluster"
	"github.com/seglog/seglog/tablet"
)

// Partition is one partition this broker holds a replica of: its tablet
// and, while it leads it, its followers' progress.
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
	mu       sync.Mutex
	st       cluster.PartitionState
	replicas []int32
	minISR   int
	leading  bool
	// followers are the other replicas' progress while leading.
	followers map[int32]*follower
	// changed is closed when the high watermark moves or the leadership
	// or the ISR changes (and made again).
	changed chan struct{}
	// altering: an ISR change is on its way to etcd.
	altering bool
	// following is the leader this replica fetches from (-1: none).
	following int32
	// leaderThrottled and followThrottled: the topic's throttled
	// replicas name this broker's replica of the partition, as leader or
	// as follower (throttle.go).
	leaderThrottled, followThrottled bool
}

// follower is a follower's progress as its leader sees it (Kafka's
// replica state): its log end (what it fetches next), when it was last
// caught up with the leader's log end.
type follower struct {
	leo          int64
	lastCaughtUp time.Time
	// lastFetch and lastFetchLEO: when it last fetched, and the leader's
	// log end then (a fetch reaching that later means it was caught up at
	// that time).
	lastFetch    time.Time
	lastFetchLEO int64
	// logStart is the log start offset its last fetch carried (-1: none
	// yet).
	logStart int64
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
	return p.replicas
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
	if !p.leading {
		return nil
	}
	var out []FollowerProgress
	for r, f := range p.followers {
		out = append(out, FollowerProgress{Replica: r, LogEnd: f.leo, LastCaughtUp: f.lastCaughtUp})
	}
	slices.SortFunc(out, func(a, b FollowerProgress) int { return int(a.Replica) - int(b.Replica) })
	return out
}

// notifyLocked wakes whoever waits on the partition.
func (p *Partition) notifyLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// Leads reports whether this broker leads the partition and may act as
// its leader now (its session lease certainly alive).
func (p *Partition) Leads() bool {
	_, leads := p.LeaderEpoch()
	return leads
}

// LeaderEpoch reports the partition's leader epoch as this broker applied
// it, and whether this broker leads at it now (Leads).
func (p *Partition) LeaderEpoch() (int32, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.st.LeaderEpoch, p.leading && p.m.opts.Member.Leased()
}

// CheckLeader answers a client request for the partition at
// currentEpoch (-1: unknown): 0 when this broker leads it at that epoch,
// else Kafka's error: NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH (the
// client's epoch is older), UNKNOWN_LEADER_EPOCH (newer).
func (p *Partition) CheckLeader(currentEpoch int32) int16 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.checkLeaderLocked(currentEpoch)
}

func (p *Partition) checkLeaderLocked(currentEpoch int32) int16 {
	switch {
	case currentEpoch >= 0 && currentEpoch < p.st.LeaderEpoch:
		return kerr.FencedLeaderEpoch.Code
	case currentEpoch > p.st.LeaderEpoch:
		return kerr.UnknownLeaderEpoch.Code
	case !p.leading || !p.m.opts.Member.Leased():
		return kerr.NotLeaderForPartition.Code
	}
	return 0
}

// CheckHighWatermark answers OFFSET_NOT_AVAILABLE while a new leader's
// high watermark is not known to be its own: below the start of its
// leader epoch, it may be below the one the old leader had told, and a
// consumer would see it go back (Kafka answers ListOffsets so, KIP-392;
// seglog answers consumers' fetches so too). Once the ISR has the epoch's
// start it is at least the old one. 0 otherwise.
func (p *Partition) CheckHighWatermark() int16 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.leading && p.t.Offsets().HighWatermark < p.epochStartLocked() {
		return kerr.OffsetNotAvailable.Code
	}
	return 0
}

// CheckAppend answers whether a produce with acks may append: this broker
// leads, and for acks=all the ISR has min.insync.replicas members.
func (p *Partition) CheckAppend(acks int16) int16 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.checkLeaderLocked(-1); c != 0 {
		return c
	}
	if acks == -1 && len(p.st.ISR) < p.minISR {
		return kerr.NotEnoughReplicas.Code
	}
	return 0
}

// Appended is called after an append as leader: the high watermark may
// move (an ISR of the leader alone).
func (p *Partition) Appended() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.advanceLocked()
}

// AwaitAcks waits until the high watermark covers end (the offset after
// the batch), for acks=all: 0 then, or NOT_LEADER_OR_FOLLOWER when the
// leadership is lost, NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR fell
// below min.insync.replicas, REQUEST_TIMED_OUT when ctx ends. A broker
// that is not certainly leased acknowledges nothing.
func (p *Partition) AwaitAcks(ctx context.Context, end int64) int16 {
	return p.await(ctx, func() (int16, bool) {
		hw := p.t.Offsets().HighWatermark
		switch {
		case hw >= end && len(p.st.ISR) < p.minISR: // (Kafka's answer once the high watermark covers it)
			return kerr.NotEnoughReplicasAfterAppend.Code, true
		case hw >= end:
			return 0, true
		}
		return 0, false
	})
}

// await calls check with p.mu held, at once and at each change of the
// partition, until it decides (its code, done) while this broker leads
// the partition; else Kafka's error: NOT_LEADER_OR_FOLLOWER when the
// leadership is lost, REQUEST_TIMED_OUT when ctx ends.
func (p *Partition) await(ctx context.Context, check func() (code int16, done bool)) int16 {
	for {
		p.mu.Lock()
		ch := p.changed
		code, done := p.checkLeaderLocked(-1), true
		if code == 0 {
			code, done = check()
		}
		p.mu.Unlock()
		if done {
			return code
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return kerr.RequestTimedOut.Code
		}
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
// (it holds everything below) with its log starting at logStart: its
// progress, whether it is caught up, the ISR's expansion, the high
// watermark and the low one. It answers Kafka's error for a fetch this
// broker cannot serve as leader, and whether the bytes sent count against
// the leader's replication throttle (the topic throttles this replica,
// the follower is not in the ISR: throttle.go).
func (p *Partition) FollowerFetch(replica int32, currentEpoch int32, fetchOffset, logStart int64) (code int16, throttled bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.checkLeaderLocked(currentEpoch); c != 0 {
		return c, false
	}
	f, ok := p.followers[replica]
	if !ok {
		return kerr.NotLeaderForPartition.Code, false // (not a replica of it: Kafka's answer to an unknown follower)
	}
	throttled = p.leaderThrottled && !p.st.InISR(replica)
	now := p.m.opts.Now()
	leo := p.t.Offsets().LogEndOffset
	switch {
	case fetchOffset >= leo:
		f.lastCaughtUp = now
	case fetchOffset >= f.lastFetchLEO && !f.lastFetch.IsZero():
		f.lastCaughtUp = f.lastFetch
	}
	f.lastFetch, f.lastFetchLEO, f.leo = now, leo, fetchOffset
	if logStart > f.logStart {
		f.logStart = logStart
		p.notifyLocked() // (DeleteRecords waits on the low watermark)
	}
	p.advanceLocked()
	if !p.st.InISR(replica) && fetchOffset >= p.t.Offsets().HighWatermark && fetchOffset >= p.epochStartLocked() {
		isr := append(slices.Clone(p.st.ISR), replica)
		p.alterLocked(isr, "expand")
	}
	return 0, throttled
}

// AwaitLowWatermark waits until every replica in the ISR has its log
// start at offset or later (Kafka's DeleteRecords answer: the records
// below are gone from every in-sync replica, so no new leader brings them
// back) and returns the low watermark, the least of their log starts; or
// Kafka's error: NOT_LEADER_OR_FOLLOWER when the leadership is lost,
// REQUEST_TIMED_OUT when ctx ends.
func (p *Partition) AwaitLowWatermark(ctx context.Context, offset int64) (int64, int16) {
	var low int64
	code := p.await(ctx, func() (int16, bool) {
		low = p.t.Offsets().LogStartOffset
		for _, r := range p.st.ISR {
			if f, ok := p.followers[r]; ok {
				low = min(low, f.logStart)
			}
		}
		return 0, low >= offset
	})
	if code != 0 {
		return -1, code
	}
	return low, 0
}

// epochStartLocked is where the leader's current epoch starts in its
// log: a follower joins the ISR only once it has the leader's epoch.
func (p *Partition) epochStartLocked() int64 {
	es := p.t.LeaderEpochs()
	for i := len(es) - 1; i >= 0; i-- {
		if es[i].Epoch == p.st.LeaderEpoch {
			return es[i].StartOffset
		}
	}
	return 0
}

// trackFollowersLocked makes the leader's followers the partition's other
// replicas: one new to it (a leadership begun, a reassignment adding it)
// starts unknown, one no longer a replica is forgotten.
func (p *Partition) trackFollowersLocked(now time.Time) {
	for _, r := range p.replicas {
		if _, ok := p.followers[r]; !ok && r != p.m.me {
			p.followers[r] = &follower{leo: -1, lastCaughtUp: now, logStart: -1}
		}
	}
	for r := range p.followers {
		if !slices.Contains(p.replicas, r) {
			delete(p.followers, r)
		}
	}
}

// advanceLocked moves the high watermark to the least log end over the
// ISR (the leader's own included), if that is higher — never while the
// ISR is below min.insync.replicas (KIP-966: so every replica that left
// the ISR since, an Eligible Leader Replica, holds every record below
// it).
func (p *Partition) advanceLocked() {
	if !p.leading || len(p.st.ISR) < p.minISR {
		return
	}
	o := p.t.Offsets()
	hw := o.LogEndOffset
	for _, r := range p.st.ISR {
		if r == p.m.me {
			continue
		}
		f, ok := p.followers[r]
		if !ok || f.leo < 0 {
			return // (a follower not heard from since the leadership began)
		}
		hw = min(hw, f.leo)
	}
	if hw > o.HighWatermark {
		if err := p.t.SetHighWatermark(hw); err != nil {
			p.m.log.Warn("replica: moving the high watermark failed", "partition", p.tp.String(), "err", err)
			return
		}
		p.notifyLocked()
	}
}

// shrinkLocked takes out of the ISR the followers not caught up within
// lag (replica.lag.time.max.ms).
func (p *Partition) shrinkLocked(now time.Time, lag time.Duration) {
	if !p.leading {
		return
	}
	isr := slices.DeleteFunc(slices.Clone(p.st.ISR), func(r int32) bool {
		f, ok := p.followers[r]
		return r != p.m.me && (!ok || now.Sub(f.lastCaughtUp) > lag)
	})
	if len(isr) < len(p.st.ISR) {
		p.alterLocked(isr, "shrink")
	}
}

// alterLocked writes a new ISR to etcd, one change at a time, in the
// background; the partition takes the new state when it is written (or
// from the snapshot when another change won).
func (p *Partition) alterLocked(isr []int32, why string) {
	if p.altering || !p.m.opts.Member.Leased() {
		return
	}
	p.altering = true
	from, minISR := p.st, p.minISR
	go func() {
		ctx, cancel := context.WithTimeout(p.m.ctx, 10*time.Second)
		defer cancel()
		to, err := p.m.opts.Member.AlterPartition(ctx, p.tp.Topic, p.tp.Partition, from, isr, minISR)
		p.mu.Lock()
		defer p.mu.Unlock()
		p.altering = false
		if err != nil {
			if !errors.Is(err, cluster.ErrStaleState) && p.m.ctx.Err() == nil {
				p.m.log.Warn("replica: changing the ISR failed", "partition", p.tp.String(), "err", err)
			}
			return
		}
		p.m.metrics.isrChange(why)
		p.m.log.Info("replica: ISR "+why, "partition", p.tp.String(), "isr", to.ISR, "partition_epoch", to.PartitionEpoch)
		if to.PartitionEpoch > p.st.PartitionEpoch {
			// A follower that joins is caught up now: the time it was
			// caught up before (before a crash, say) is not its lag.
			now := p.m.opts.Now()
			for _, r := range to.ISR {
				if f, ok := p.followers[r]; ok && !from.InISR(r) {
					f.lastCaughtUp = now
				}
			}
			p.st = to
			p.advanceLocked()
			p.notifyLocked()
		}
	}()
}

// PreferredReadReplica is KIP-392's choice, for a consumer in rack
// fetching at fetchOffset, of the replica to read from, as Kafka's
// RackAwareReplicaSelector chooses: the leader if it is in the rack (or
// no replica is), else, of the followers in the ISR and the rack holding
// fetchOffset, the one with the most records (the one caught up most
// lately on a tie). -1 is the leader.
func (p *Partition) PreferredReadReplica(rack string, fetchOffset int64, rackOf func(int32) string) int32 {
	if rack == "" || rackOf(p.m.me) == rack {
		return -1
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.leading {
		return -1
	}
	best := int32(-1)
	var bestLEO int64
	var bestCaught time.Time
	for _, r := range p.st.ISR {
		f, ok := p.followers[r]
		if r == p.m.me || !ok || f.leo < fetchOffset || f.logStart > fetchOffset || rackOf(r) != rack {
			continue
		}
		if best < 0 || f.leo > bestLEO || f.leo == bestLEO && f.lastCaughtUp.After(bestCaught) {
			best, bestLEO, bestCaught = r, f.leo, f.lastCaughtUp
		}
	}
	return best
}

// CheckFollowerRead answers a consumer's fetch from this follower
// (KIP-392, Fetch v11+) at currentEpoch (-1: unknown): 0 when it may read
// its replica (up to its high watermark), else Kafka's error.
func (p *Partition) CheckFollowerRead(currentEpoch int32) int16 {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case currentEpoch >= 0 && currentEpoch < p.st.LeaderEpoch:
		return kerr.FencedLeaderEpoch.Code
	case currentEpoch > p.st.LeaderEpoch:
		return kerr.UnknownLeaderEpoch.Code
	case p.leading || p.following == cluster.NoLeader:
		return kerr.NotLeaderForPartition.Code // (a leader reads as a leader; a replica following no one serves nothing)
	}
	return 0
}
