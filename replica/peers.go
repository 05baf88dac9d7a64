package replica

import (
	"context"
	"errors"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// peer is a client of another broker's inter-broker endpoint.
type peer struct {
	addr string
	cl   *kgo.Client
}

// endpoint is broker node's address on the inter-broker listener.
func (m *Manager) endpoint(node int32) (string, error) {
	if m.local {
		return "", errors.New("broker " + strconv.Itoa(int(node)) + " is not this single node")
	}
	b, ok := m.opts.Member.Snapshot().Brokers[node]
	if !ok || len(b.Endpoints) == 0 {
		return "", errors.New("broker " + strconv.Itoa(int(node)) + " is not registered")
	}
	e := b.Endpoints[0]
	if m.opts.Listener != "" {
		if e, ok = b.Endpoint(m.opts.Listener); !ok {
			return "", errors.New("broker " + strconv.Itoa(int(node)) + " has no listener " + m.opts.Listener)
		}
	}
	return net.JoinHostPort(e.Host, strconv.Itoa(int(e.Port))), nil
}

// client makes a Kafka client of one broker's address, which retries
// nothing on its own (the caller decides).
func (m *Manager) client(addr, role string) (*kgo.Client, error) {
	opts := append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.ClientID("seglog-" + role + "-" + strconv.Itoa(int(m.me))),
		kgo.RequestTimeoutOverhead(10 * time.Second), kgo.RequestRetries(0)}, m.opts.ClientOpts...)
	return kgo.NewClient(opts...)
}

// send sends req to the seed broker of cl (not to any broker its
// metadata names).
func send(ctx context.Context, cl *kgo.Client, req kmsg.Request) (kmsg.Response, error) {
	seeds := cl.SeedBrokers()
	if len(seeds) == 0 {
		return nil, errors.New("no broker")
	}
	return seeds[0].Request(ctx, req)
}

// Send sends a request to broker node on its inter-broker endpoint, as
// this broker (what the transaction coordinator's WriteTxnMarkers and a
// partition leader's AddPartitionsToTxn verification use). A connection
// error is returned as it is; nothing is retried.
func (m *Manager) Send(ctx context.Context, node int32, req kmsg.Request) (kmsg.Response, error) {
	addr, err := m.endpoint(node)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	if m.ctx.Err() != nil {
		m.mu.Unlock()
		return nil, errors.New("replica: the manager is closed")
	}
	p := m.peers[node]
	if p == nil || p.addr != addr {
		if p != nil {
			p.cl.Close()
		}
		cl, err := m.client(addr, "peer")
		if err != nil {
			m.mu.Unlock()
			return nil, err
		}
		p = &peer{addr: addr, cl: cl}
		m.peers[node] = p
	}
	m.mu.Unlock()
	return send(ctx, p.cl, req)
}

// closePeers closes the peers' clients.
func (m *Manager) closePeers() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, p := range m.peers {
		p.cl.Close()
		delete(m.peers, id)
	}
}
