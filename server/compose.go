package server

import (
	"errors"

	"github.com/seglog/seglog/broker"
	"github.com/seglog/seglog/coordinator/group"
	"github.com/seglog/seglog/coordinator/txn"
	"github.com/seglog/seglog/replica"
	"github.com/seglog/seglog/tablet"
)

// Compose makes a broker on data directory m with its services, in the
// order they depend on each other: the broker's foundation (security
// documents, dynamic configs, producer ids), the replica manager — a
// single node's over its tablets, or opts.Cluster's, made by the caller
// with the cluster member (Server.New does) — the group coordinator, the
// transaction coordinator over it, then the broker. It is the
// composition root of seglog serve (Server.New) and of a broker embedded
// without a Server; the broker's Close closes the coordinators and the
// single node's replica manager after its connections (a cluster's
// replica manager and member are their maker's).
func Compose(m *tablet.Manager, opts broker.Options) (*broker.Broker, error) {
	f, err := broker.Open(m, opts)
	if err != nil {
		return nil, err
	}
	var closers []func() error
	closeAll := func() error {
		var errs []error
		for i := len(closers) - 1; i >= 0; i-- {
			errs = append(errs, closers[i]())
		}
		return errors.Join(errs...)
	}
	fail := func(err error) (*broker.Broker, error) { return nil, errors.Join(err, closeAll()) }
	var replicas *replica.Manager
	if c := opts.Cluster; c != nil {
		replicas = c.Replicas
	} else {
		if replicas, err = replica.New(replica.Options{Tablets: m, NodeID: m.Meta().NodeID, Logger: f.Logger()}); err != nil {
			return fail(err)
		}
		closers = append(closers, func() error { replicas.Close(); return nil })
	}
	groups, err := group.New(m, f.GroupOptions())
	if err != nil {
		return fail(err)
	}
	closers = append(closers, groups.Close)
	txns, err := txn.New(m, f.TxnOptions(groups))
	if err != nil {
		return fail(err)
	}
	closers = append(closers, txns.Close)
	b, err := broker.New(f, broker.Services{Replicas: replicas, Groups: groups, Txns: txns, Close: closeAll})
	if err != nil {
		return fail(err)
	}
	return b, nil
}
