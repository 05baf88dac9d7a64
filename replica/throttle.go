package replica

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Replication throttles, as Kafka's (KIP-73): a broker's
// leader.replication.throttled.rate bounds the bytes it sends to
// followers not in the ISR of the partitions its topic's
// leader.replication.throttled.replicas names on it, and
// follower.replication.throttled.rate the bytes it fetches, not being in
// the ISR, of those follower.replication.throttled.replicas names on it.
// A reassignment sets them so that copying a partition does not starve
// the brokers' clients. When a throttle's rate is exceeded, the leader
// answers those partitions with no records and the follower leaves them
// out of its fetches until the rate is back under it.

// throttleCheck is how often a follower over its throttle looks again.
const throttleCheck = 100 * time.Millisecond

// Unthrottled is a rate that throttles nothing (Kafka's default,
// Long.MAX_VALUE).
const Unthrottled int64 = math.MaxInt64

// ThrottledReplicas is a topic's leader.replication.throttled.replicas or
// follower.replication.throttled.replicas: "*" (every replica), or a list
// of partition:broker.
type ThrottledReplicas struct {
	all   bool
	pairs map[[2]int32]bool
}

// ParseThrottledReplicas reads a throttled replicas config ("" is none).
func ParseThrottledReplicas(v string) (ThrottledReplicas, error) {
	var t ThrottledReplicas
	v = strings.TrimSpace(v)
	switch v {
	case "":
		return t, nil
	case "*":
		t.all = true
		return t, nil
	}
	t.pairs = map[[2]int32]bool{}
	for _, item := range strings.Split(v, ",") {
		p, b, ok := strings.Cut(strings.TrimSpace(item), ":")
		pn, err1 := strconv.ParseInt(p, 10, 32)
		bn, err2 := strconv.ParseInt(b, 10, 32)
		if !ok || err1 != nil || err2 != nil || pn < 0 || bn < 0 {
			return t, fmt.Errorf("%q is not * or a list of partition:broker", v)
		}
		t.pairs[[2]int32{int32(pn), int32(bn)}] = true
	}
	return t, nil
}

// Has reports whether the replica of partition on broker is throttled.
func (t ThrottledReplicas) Has(partition, broker int32) bool {
	return t.all || t.pairs[[2]int32{partition, broker}]
}

// quota is a throttle's rate, a token bucket of one second's bytes: bytes
// moved take tokens (going below zero), time gives them back at the rate.
// An unthrottled quota (the usual case) costs its callers no lock.
type quota struct {
	rate   atomic.Int64 // bytes a second; Unthrottled: none
	mu     sync.Mutex   // guards tokens and at
	tokens float64
	at     time.Time
}

// set changes the rate (the bucket starts full).
func (q *quota) set(rate int64, now time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if rate < 0 {
		rate = Unthrottled
	}
	if rate != q.rate.Load() {
		q.rate.Store(rate)
		q.tokens, q.at = float64(rate), now
	}
}

// limited reports whether the quota throttles anything.
func (q *quota) limited() bool { return q.rate.Load() != Unthrottled }

func (q *quota) refillLocked(now time.Time) {
	rate := q.rate.Load()
	if rate == Unthrottled || q.at.IsZero() {
		return
	}
	q.tokens = min(q.tokens+now.Sub(q.at).Seconds()*float64(rate), float64(rate))
	q.at = now
}

// exceeded reports whether more bytes were moved than the rate allows.
func (q *quota) exceeded(now time.Time) bool {
	if !q.limited() {
		return false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.refillLocked(now)
	return q.tokens < 0
}

// record counts n bytes moved.
func (q *quota) record(n int64, now time.Time) {
	if !q.limited() {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.refillLocked(now)
	q.tokens -= float64(n)
}

// SetThrottleRates sets this broker's leader.replication.throttled.rate
// and follower.replication.throttled.rate (Unthrottled: none).
func (m *Manager) SetThrottleRates(leader, follower int64) {
	now := m.opts.Now()
	m.leaderQuota.set(leader, now)
	m.followerQuota.set(follower, now)
}

// LeaderThrottleHeld reports whether the leader's throttle holds back
// the bytes it counts now (FollowerFetch says which fetches it counts).
func (m *Manager) LeaderThrottleHeld() bool { return m.leaderQuota.exceeded(m.opts.Now()) }

// LeaderThrottled counts bytes a throttled fetch sent.
func (m *Manager) LeaderThrottled(n int64) { m.leaderQuota.record(n, m.opts.Now()) }

// followerThrottled reports whether this replica's fetches count against
// the follower throttle (one is set, the topic throttles this replica,
// it is not in the ISR).
func (p *Partition) followerThrottled() bool {
	if !p.m.followerQuota.limited() {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.followThrottled && !p.s.InISR(p.m.me)
}
