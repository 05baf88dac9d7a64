package broker

import (
	"context"
	"sync"
)

// memBudget is the broker's bound on request memory (Kafka's
// queued.max.request.bytes): a frame's bytes are reserved from it before
// they are read, and given back once the request is answered. At the
// bound, readers wait, first come first served (a large frame is not
// passed over by a stream of small ones): the connections' reading
// pauses, and nothing is allocated beyond it.
type memBudget struct {
	mu      sync.Mutex // guards limit, used and waiters
	limit   int64      // <= 0: no bound
	used    int64
	waiters []*memWaiter
	// observe, when set (by tests), is told every change: the bytes in
	// use and how many wait, under the lock.
	observe func(used int64, waiting int)
}

// changedLocked reports a change to observe.
func (m *memBudget) changedLocked() {
	if m.observe != nil {
		m.observe(m.used, len(m.waiters))
	}
}

type memWaiter struct {
	n     int64
	ready chan struct{}
}

// acquire reserves n bytes (at most the limit), waiting while there is no
// room or others wait before it, with onWait (if set) called as the wait
// begins, under the budget's lock (it must be quick); false if ctx ends
// first.
func (m *memBudget) acquire(ctx context.Context, n int64, onWait func()) bool {
	if m == nil || m.limit <= 0 || n <= 0 {
		return true
	}
	m.mu.Lock()
	if len(m.waiters) == 0 && m.used+n <= m.limit {
		m.used += n
		m.changedLocked()
		m.mu.Unlock()
		return true
	}
	w := &memWaiter{n: n, ready: make(chan struct{})}
	m.waiters = append(m.waiters, w)
	if onWait != nil {
		onWait() // counted before an observer hears of the wait
	}
	m.changedLocked()
	m.mu.Unlock()
	select {
	case <-w.ready:
		return true
	case <-ctx.Done():
		m.mu.Lock()
		defer m.mu.Unlock()
		select {
		case <-w.ready: // granted meanwhile: give it back
			m.used -= n
			m.grantLocked()
		default:
			for i, o := range m.waiters {
				if o == w {
					m.waiters = append(m.waiters[:i], m.waiters[i+1:]...)
					break
				}
			}
			m.grantLocked() // those behind it may fit now
		}
		return false
	}
}

// release gives n bytes back.
func (m *memBudget) release(n int64) {
	if m == nil || m.limit <= 0 || n <= 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.used -= n
	m.grantLocked()
}

// grantLocked wakes the waiters at the head of the line that fit; every
// change (a release, a wait given up) ends here.
func (m *memBudget) grantLocked() {
	for len(m.waiters) > 0 && m.used+m.waiters[0].n <= m.limit {
		w := m.waiters[0]
		m.waiters = m.waiters[1:]
		m.used += w.n
		close(w.ready)
	}
	m.changedLocked()
}

// inUse is the bytes reserved now.
func (m *memBudget) inUse() int64 {
	if m == nil {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.used
}
