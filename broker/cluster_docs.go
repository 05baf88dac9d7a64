package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"time"

	"github.com/seglog/seglog/broker/auth"
	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/cluster"
	"github.com/seglog/seglog/internal/docstore"
	"github.com/seglog/seglog/tablet"
)

// The SCRAM credentials, ACLs, client quotas and dynamic broker configs
// live in the data directory of a single node; a cluster keeps them once,
// in etcd (the documents of cluster.Doc*), so that a change through any
// broker holds on every broker: each broker keeps the documents in memory
// and loads one again when its watch sees it change. A change writes etcd
// comparing the revision it read, and is made again over the newer
// document when another broker's change came first.

// docSaveTimeout bounds one write of a document to etcd.
const docSaveTimeout = 10 * time.Second

// stateDocs are the broker's documents.
type stateDocs struct {
	creds  *auth.Credentials
	acls   *auth.ACLs
	quotas *auth.Quotas
	dyn    *dynamicConfigs
}

// openStateDocs opens the documents: the data directory's files, or, in a
// cluster, etcd's. A cluster that has no document yet takes the data
// directory's file, if it has one and it is good (a single node that
// becomes a cluster's first broker keeps its users, ACLs and quotas, and
// its dynamic configs: its own level becomes its node's).
func openStateDocs(m *tablet.Manager, opts Options) (*stateDocs, error) {
	file := func(name string) docstore.Store { return auth.FileStore(m.FS(), filepath.Join(m.Dir(), name)) }
	var d stateDocs
	var err error
	if d.creds, err = openDoc(opts, file(auth.CredentialsFile), cluster.DocCredentials, auth.NewCredentials, nil); err != nil {
		return nil, err
	}
	if d.acls, err = openDoc(opts, file(auth.ACLFile), cluster.DocACLs, auth.NewACLs, nil); err != nil {
		return nil, err
	}
	if d.quotas, err = openDoc(opts, file(auth.QuotasFile), cluster.DocQuotas, auth.NewQuotas, nil); err != nil {
		return nil, err
	}
	node := ""
	if c := opts.Cluster; c != nil {
		node = strconv.Itoa(int(c.Member.NodeID()))
	}
	// A single node's file names its own level "broker"; the cluster's
	// document keeps each broker's under its node id.
	asCluster := func(local *dynamicConfigs) ([]byte, error) {
		f := *local.doc.Load()
		f.Brokers = map[string]map[string]string{}
		if len(f.Broker) > 0 {
			f.Brokers[node] = f.Broker
		}
		f.Broker = nil
		return f.encode()
	}
	dynFile := docstore.File(m.FS(), filepath.Join(m.Dir(), checkpoint.DynamicBrokerConfigFile), 0o644)
	d.dyn, err = openDoc(opts, dynFile, cluster.DocBrokerConfigs,
		func(s docstore.Store) (*dynamicConfigs, error) {
			n := node
			if _, watched := s.(docstore.Watched); !watched {
				n = "" // (the data directory's file: a single node's shape)
			}
			return openDynamicConfigs(m, s, n, opts.Configs)
		}, asCluster)
	if err != nil {
		return nil, err
	}
	return &d, nil
}

// openDoc opens a document with open: the data directory's file local on
// a single node; in a cluster, the cluster's document name, seeded first
// from the file when the cluster has none and the file has one — which
// must open (a bad one stops the broker, before etcd has it); convert, if
// set, makes the cluster's bytes of the opened file.
func openDoc[T any](opts Options, local docstore.Store, name string, open func(docstore.Store) (T, error),
	convert func(T) ([]byte, error)) (T, error) {
	c := opts.Cluster
	if c == nil {
		return open(local)
	}
	if _, ok := c.Member.Snapshot().Docs[name]; !ok {
		if data, _, err := local.Load(); err != nil || data != nil {
			v, err := open(local)
			if err != nil {
				var zero T
				return zero, fmt.Errorf("broker: the data directory's %s would seed the cluster's %s: %w", local, name, err)
			}
			if convert != nil {
				if data, err = convert(v); err != nil {
					var zero T
					return zero, err
				}
			}
			if err := seedDoc(c.Member, name, data, local.String(), opts.Logger); err != nil {
				opts.Logger.Warn("the cluster has no "+name+" yet, and the data directory's file could not be copied to it", "err", err)
			}
		}
	}
	return open(c.Member.DocKey(name, docSaveTimeout))
}

// seedDoc writes data as the cluster's document name if the cluster has
// none (a race with another broker's seeding or change is lost quietly:
// the cluster's document stands).
func seedDoc(mem *cluster.Member, name string, data []byte, from string, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(context.Background(), docSaveTimeout)
	defer cancel()
	switch _, err := mem.PutDoc(ctx, name, data, 0); {
	case errors.Is(err, docstore.ErrConflict):
		return nil
	case err != nil:
		return err
	}
	log.Info("the cluster had no "+name+": it has the data directory's now", "file", from)
	return nil
}

// followDocs loads the documents again whenever the cluster's metadata
// changes (a revision compare each when they did not), until the broker
// closes; new dynamic configs move the topic defaults.
func (b *Broker) followDocs(mem *cluster.Member) {
	// applied is the dynamic configs' document last applied: a read
	// (DescribeConfigs) may have taken a new one before this loop's
	// Refresh, which then reports no change — it is applied all the same.
	applied := b.dyn.doc.Load()
	for {
		changed := mem.Changed()
		rev := mem.Snapshot().Revision
		for _, refresh := range []func() (bool, error){b.creds.Refresh, b.acls.Refresh, b.quotas.Refresh} {
			if _, err := refresh(); err != nil {
				b.opts.Logger.Error("a cluster document is not understood; the last one is kept", "err", err)
			}
		}
		if _, err := b.dyn.doc.Refresh(); err != nil {
			b.opts.Logger.Error("the cluster's dynamic broker configs are not understood; the last ones are kept", "err", err)
		}
		if cur := b.dyn.doc.Load(); cur != applied {
			applied = cur
			b.dyn.apply(b.m, b.opts.Logger)
		}
		b.docsFollowed.Advance(rev)
		select {
		case <-changed:
		case <-b.stop:
			return
		}
	}
}

// AwaitDocs returns once the broker has taken the cluster's documents as
// of etcd revision rev (the topics follow dynamic configs up to it).
func (b *Broker) AwaitDocs(ctx context.Context, rev int64) error {
	err := b.docsFollowed.Await(ctx, rev, b.stop)
	if err != nil && ctx.Err() == nil {
		return ErrClosed
	}
	return err
}
