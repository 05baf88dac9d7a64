package broker

import (
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/broker/auth"
)

// Quotas, as Kafka's ClientQuotaManager keeps them: a rate over
// quotaSamples windows of quotaWindow (quota.window.num,
// quota.window.size.seconds) for each quota entity that applies —
// producer_byte_rate on produce request bytes, consumer_byte_rate on
// fetched bytes, request_percentage on the time handling a client's
// requests takes (100 is one thread's whole time) — and, when a rate
// passes its quota, a throttle of (rate − quota) / quota × the measured
// window, capped at the whole window: the response says it
// (ThrottleMillis), and the connection's next request waits it out (the
// broker mutes the connection, as Kafka does since KIP-219). A fetch by a
// client over its byte rate is answered with no records. IP entities'
// connection_creation_rate refuses the connections past it.
// controller_mutation_rate counts the partitions CreateTopics,
// CreatePartitions, DeleteTopics and auto-creation make or remove, in a
// token bucket (rate.take).
const (
	quotaSamples = 11
	quotaWindow  = time.Second
)

// rate is a windowed rate, or (through take) a token bucket.
type rate struct {
	mu      sync.Mutex // guards the fields below
	starts  []time.Time
	samples []float64
	touched time.Time // when it was last used, by the wall clock

	// The token bucket of controller_mutation_rate (Kafka's TokenBucket,
	// KIP-599): tokens as of filled, full at quota × the quota's windows.
	tokens float64
	filled time.Time
}

// take draws n tokens from a bucket refilled at quota a second, holding
// at most quota × quotaSamples windows (a new bucket is full). A strict
// take is refused when the bucket is already below zero (Kafka's
// StrictControllerMutationQuota: one request may overdraw it, the next
// waits); a permissive one always draws. It returns whether the tokens
// were drawn and the wait until the bucket is back at zero, the
// throttle.
func (r *rate) take(now time.Time, quota, n float64, strict bool) (bool, time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.touched = time.Now()
	burst := quota * quotaSamples * quotaWindow.Seconds()
	if r.filled.IsZero() {
		r.tokens = burst
	} else if d := now.Sub(r.filled); d > 0 {
		r.tokens = min(burst, r.tokens+quota*d.Seconds())
	}
	r.filled = now
	wait := func() time.Duration {
		if r.tokens >= 0 {
			return 0
		}
		return time.Duration(-r.tokens / quota * float64(time.Second))
	}
	if strict && r.tokens < 0 {
		return false, wait()
	}
	r.tokens -= n
	return true, wait()
}

// record adds v at now and returns the rate after it, per second, and the
// window it was measured over.
func (r *rate) record(now time.Time, v float64) (float64, time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.expireLocked(now)
	if n := len(r.starts); n == 0 || now.Sub(r.starts[n-1]) >= quotaWindow {
		r.starts, r.samples = append(r.starts, now), append(r.samples, 0)
	}
	r.samples[len(r.samples)-1] += v
	return r.measureLocked(now)
}

// measure is the rate at now and the window it is measured over.
func (r *rate) measure(now time.Time) (float64, time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.expireLocked(now)
	return r.measureLocked(now)
}

func (r *rate) expireLocked(now time.Time) {
	r.touched = time.Now()
	i := 0
	for i < len(r.starts) && now.Sub(r.starts[i]) >= quotaSamples*quotaWindow {
		i++
	}
	r.starts, r.samples = r.starts[i:], r.samples[i:]
}

// measureLocked: the samples' sum over the time since the oldest began,
// at least quotaSamples-1 windows (Kafka's Rate: a burst at the start is
// not a huge rate).
func (r *rate) measureLocked(now time.Time) (float64, time.Duration) {
	var sum float64
	for _, s := range r.samples {
		sum += s
	}
	elapsed := (quotaSamples - 1) * quotaWindow
	if len(r.starts) > 0 && now.Sub(r.starts[0]) > elapsed {
		elapsed = now.Sub(r.starts[0])
	}
	return sum / elapsed.Seconds(), elapsed
}

// untilAtMost is how long until the rate falls to at most quota as its
// samples expire, nothing more being recorded (0: it is there now).
func (r *rate) untilAtMost(now time.Time, quota float64) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.expireLocked(now)
	for i := range len(r.starts) + 1 {
		at := now // with samples i and later: at once, or when i-1 expires
		if i > 0 {
			at = r.starts[i-1].Add(quotaSamples * quotaWindow)
		}
		if i == len(r.starts) {
			return max(0, at.Sub(now))
		}
		var sum float64
		for _, v := range r.samples[i:] {
			sum += v
		}
		elapsed := max((quotaSamples-1)*quotaWindow, at.Sub(r.starts[i]))
		if sum/elapsed.Seconds() <= quota {
			return max(0, at.Sub(now))
		}
	}
	return 0
}

// throttleFor is how long a client over its quota waits.
func throttleFor(observed, quota float64, window time.Duration) time.Duration {
	if quota <= 0 || observed <= quota {
		return 0
	}
	return time.Duration(min((observed-quota)/quota*float64(window), float64(quotaSamples*quotaWindow)))
}

// sensors are the rates, by quota kind and the entity whose quota applies
// (the clients one entity covers share its rate) or the address. Rates
// whose samples have all expired are dropped once there are many (an
// address's rate is kept per address: many addresses must not grow the
// map without bound).
type sensors struct {
	mu sync.Mutex // guards m
	m  map[string]*rate
}

// maxIdleSensors is how many rates are kept before idle ones are dropped.
const maxIdleSensors = 4096

func (s *sensors) get(kind, entity string) *rate {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]*rate{}
	}
	k := kind + "\x00" + entity
	r := s.m[k]
	if r == nil {
		if len(s.m) >= maxIdleSensors {
			for k, r := range s.m {
				if r.idle() {
					delete(s.m, k)
				}
			}
		}
		r = &rate{}
		s.m[k] = r
	}
	return r
}

// idle reports whether the rate has not been used for a whole window of
// the wall clock: its samples have all expired.
func (r *rate) idle() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return time.Since(r.touched) >= quotaSamples*quotaWindow
}

// quotaUser is the user a quota names: the principal's name.
func quotaUser(h header) string {
	_, name, _ := strings.Cut(principalOf(h), ":")
	return name
}

// limits are the client quotas as they are enforced (Kafka's
// ClientQuotaManager and ControllerMutationQuotaManager): the quotas set,
// the sensors that measure each client's use, the throttles of responses
// and connections, and connection_creation_rate. They hold nothing else
// of the broker.
type limits struct {
	quotas  *auth.Quotas
	sensors *sensors
	metrics *metrics
	clock   func() time.Time
	stop    <-chan struct{} // the broker's: a muted connection's wait ends with it
	logger  *slog.Logger
}

// newLimits are b's limits (its clock read through b, which a test may
// set).
func newLimits(b *Broker) *limits {
	return &limits{quotas: b.quotas, sensors: &b.sensors, metrics: b.metrics, clock: func() time.Time { return b.clock() }, stop: b.stop,
		logger: b.opts.Logger}
}

// fetchThrottled answers a fetch by a client already over its
// consumer_byte_rate: no records, the throttle.
func (l *limits) fetchThrottled(h header, r *kmsg.FetchRequest) kmsg.Response {
	q, entity := l.quotas.Resolve(quotaUser(h), h.clientID, auth.ConsumerByteRate)
	if q <= 0 {
		return nil
	}
	now := l.clock()
	observed, window := l.sensors.get(auth.ConsumerByteRate, entity).measure(now)
	if observed <= q {
		return nil
	}
	t := throttleFor(observed, q, window)
	resp := r.ResponseKind().(*kmsg.FetchResponse)
	resp.ThrottleMillis = int32(t.Milliseconds())
	l.metrics.throttled.WithLabelValues(auth.ConsumerByteRate).Inc()
	l.mute(h, now, t)
	return resp
}

// recordQuotas counts a request against its client's quotas once
// answered, and throttles the response and the connection if it went
// over: produced bytes, fetched bytes, handling time.
func (l *limits) recordQuotas(h header, class quotaClass, req kmsg.Request, resp kmsg.Response, took time.Duration) {
	user := quotaUser(h)
	now := l.clock()
	var t time.Duration
	over := func(key string, v float64) {
		q, entity := l.quotas.Resolve(user, h.clientID, key)
		if q <= 0 {
			return
		}
		observed, window := l.sensors.get(key, entity).record(now, v)
		if d := throttleFor(observed, q, window); d > 0 {
			l.metrics.throttled.WithLabelValues(key).Inc()
			t = max(t, d)
		}
	}
	switch class {
	case quotaRequest: // the time alone, below
	case quotaProduce:
		var n int
		for _, t := range req.(*kmsg.ProduceRequest).Topics {
			for _, p := range t.Partitions {
				n += len(p.Records)
			}
		}
		over(auth.ProducerByteRate, float64(n))
	case quotaFetch:
		if fr, ok := resp.(*fetchReply); ok {
			var n int64
			for _, res := range fr.results {
				n += res.Records.Size()
			}
			over(auth.ConsumerByteRate, float64(n))
		}
	}
	over(auth.RequestPercentage, took.Seconds()*100)
	l.throttle(h, resp, now, t)
}

// throttle raises the response's throttle to t and mutes the connection
// until now+t (nothing when t is not positive).
func (l *limits) throttle(h header, resp kmsg.Response, now time.Time, t time.Duration) {
	if t <= 0 {
		return
	}
	if st, ok := resp.(kmsg.SetThrottleResponse); ok {
		if cur, _ := resp.(kmsg.ThrottleResponse).Throttle(); int32(t.Milliseconds()) > cur {
			st.SetThrottle(int32(t.Milliseconds()))
		}
	}
	l.mute(h, now, t)
}

// mute makes the connection's next request wait until now+t.
func (l *limits) mute(h header, now time.Time, t time.Duration) {
	if h.sess != nil {
		h.sess.mutedUntil = now.Add(t)
	}
}

// waitMuted waits out a throttle before the connection's next request
// (the broker's own clock: a test's clock moves the deadline, a real wait
// is at most the throttle).
func (l *limits) waitMuted(s *session) {
	if s == nil || s.mutedUntil.IsZero() {
		return
	}
	d := s.mutedUntil.Sub(l.clock())
	s.mutedUntil = time.Time{}
	if d <= 0 {
		return
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-l.stop:
	}
}

// connectionAllowed counts a new connection from ip against its
// connection_creation_rate.
func (l *limits) connectionAllowed(ip string) bool {
	q := l.quotas.ConnectionRate(ip)
	if q <= 0 {
		return true
	}
	observed, _ := l.sensors.get(auth.ConnectionCreationRate, ip).record(l.clock(), 1)
	return observed <= q
}

// mutations draws a request's partition creations and deletions from its
// client's controller_mutation_rate. Strict (CreateTopics v6+,
// DeleteTopics v5+, CreatePartitions v3+, auto-creation) refuses a topic
// once the bucket is overdrawn — THROTTLING_QUOTA_EXCEEDED, or
// UNKNOWN_TOPIC_OR_PARTITION for auto-creation; older versions, which do
// not know that error, are done and throttled (Kafka's permissive quota).
type mutations struct {
	l        *limits
	h        header
	strict   bool
	quota    float64
	bucket   *rate
	now      time.Time
	throttle time.Duration
}

func (l *limits) mutations(h header, strict bool) *mutations {
	m := &mutations{l: l, h: h, strict: strict, now: l.clock()}
	q, entity := l.quotas.Resolve(quotaUser(h), h.clientID, auth.ControllerMutationRate)
	if q > 0 {
		m.quota, m.bucket = q, l.sensors.get(auth.ControllerMutationRate, entity)
	}
	return m
}

// take draws n partitions; false is a refusal, with nothing to be done.
func (m *mutations) take(n int) bool {
	if m.bucket == nil {
		return true
	}
	ok, d := m.bucket.take(m.now, m.quota, float64(n), m.strict)
	m.throttle = max(m.throttle, d)
	if !ok {
		m.l.metrics.throttled.WithLabelValues(auth.ControllerMutationRate).Inc()
	}
	return ok
}

// refusal is the message of a refused topic.
func (m *mutations) refusal() *string {
	return errText("the controller mutation quota is exceeded: retry in %d ms", m.throttle.Milliseconds())
}

// finish throttles the response and the connection by what the request
// overdrew.
func (m *mutations) finish(resp kmsg.Response) { m.l.throttle(m.h, resp, m.now, m.throttle) }
