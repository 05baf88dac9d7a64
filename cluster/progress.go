package cluster

import (
	"context"
	"sync"
)

// Progress is how far a follower of the snapshot (the replicas, the
// broker's documents) has got: the etcd revision it has taken, which
// waiters await. The zero Progress is at revision 0.
type Progress struct {
	mu   sync.Mutex // guards rev and next
	rev  int64
	next chan struct{} // closed at each Advance
}

// Advance records that revision rev is taken (a lower one changes
// nothing) and wakes the waiters.
func (p *Progress) Advance(rev int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rev = max(p.rev, rev)
	if p.next != nil {
		close(p.next)
		p.next = nil
	}
}

// Await returns nil once revision rev is taken; ctx.Err() when ctx ends
// first, context.Canceled when stop closes first (the follower stopped).
func (p *Progress) Await(ctx context.Context, rev int64, stop <-chan struct{}) error {
	for {
		p.mu.Lock()
		if p.rev >= rev {
			p.mu.Unlock()
			return nil
		}
		if p.next == nil {
			p.next = make(chan struct{})
		}
		next := p.next
		p.mu.Unlock()
		select {
		case <-next:
		case <-ctx.Done():
			return ctx.Err()
		case <-stop:
			return context.Canceled
		}
	}
}
