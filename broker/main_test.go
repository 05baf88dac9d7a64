package broker

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/seglog/seglog/coordinator/group"
	"github.com/seglog/seglog/coordinator/txn"
	"github.com/seglog/seglog/replica"
	"github.com/seglog/seglog/tablet"
)

// TestMain fails the package if any test made the broker answer an error
// code Kafka does not define (knownCodes sent UNKNOWN_SERVER_ERROR in its
// place): every code the broker sends across its tests is one of Kafka's;
// and if any request's handler panicked (the broker recovers, closing the
// connection).
func TestMain(m *testing.M) {
	code := m.Run()
	if n := unknownCodes.Load(); n > 0 && code == 0 {
		fmt.Fprintf(os.Stderr, "FAIL: the broker set %d error codes Kafka does not define\n", n)
		code = 1
	}
	if n := recoveredPanics.Load(); n > 0 && code == 0 {
		fmt.Fprintf(os.Stderr, "FAIL: %d requests' handlers panicked\n", n)
		code = 1
	}
	os.Exit(code)
}

// partitionsOf returns a topic's tablets on b's data directory.
func partitionsOf(b *Broker, topic string) []*tablet.Tablet {
	var out []*tablet.Tablet
	for _, t := range b.m.Tablets() {
		if t.TopicPartition().Topic == topic {
			out = append(out, t)
		}
	}
	return out
}

// compose is a single node's broker on m as package server's Compose
// makes it (which the broker's tests cannot import): foundation, replica
// manager, coordinators, broker — the services closed by the broker's
// Close.
func compose(m *tablet.Manager, opts Options) (*Broker, error) {
	f, err := Open(m, opts)
	if err != nil {
		return nil, err
	}
	r, err := replica.New(replica.Options{Tablets: m, NodeID: m.Meta().NodeID, Logger: f.Logger()})
	if err != nil {
		return nil, err
	}
	g, err := group.New(m, f.GroupOptions())
	if err != nil {
		r.Close()
		return nil, err
	}
	x, err := txn.New(m, f.TxnOptions(g))
	if err != nil {
		r.Close()
		return nil, errors.Join(err, g.Close())
	}
	return New(f, Services{Replicas: r, Groups: g, Txns: x, Close: func() error {
		defer r.Close()
		return errors.Join(x.Close(), g.Close())
	}})
}
