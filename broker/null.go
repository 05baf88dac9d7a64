package broker

import (
	"net"
	"sync"
	"time"

	"github.com/seglog/seglog/broker/auth"
)

// nullLog is what a null broker keeps: each partition's next offset.
type nullLog struct {
	topics map[string]int32
	mu     sync.Mutex // guards next and pid
	next   map[string][]int64
	pid    int64
}

// NewNull returns a broker that speaks the protocol and stores nothing:
// the same connections, framing, pipelining and kmsg decoding as a broker
// on a data directory, but a Produce is answered at once with offsets
// counted in memory (each batch's header is still parsed), Metadata lists
// the given topics, InitProducerId counts, and a Fetch returns no records.
// It is the protocol floor a benchmark compares the broker with (seglog
// bench serve), not a log store.
func NewNull(topics map[string]int32, opts Options) *Broker {
	opts.ensureDefaults()
	nl := &nullLog{topics: topics, next: map[string][]int64{}}
	for t, n := range topics {
		nl.next[t] = make([]int64, n)
	}
	b := &Broker{opts: opts, null: nl, guard: &guard{}, metrics: newMetrics(), conns: map[net.Conn]struct{}{}, stop: make(chan struct{}), clock: time.Now, perIP: map[string]int{},
		reqMem: &memBudget{limit: opts.QueuedMaxRequestBytes},
		quotas: &auth.Quotas{}, sessions: newFetchSessions(-1, time.Now), telemetry: newTelemetry(true, time.Now)}
	b.authn = newAuthenticator(b)
	b.limits = newLimits(b)
	b.ctx = b.stopContext()
	return b
}
