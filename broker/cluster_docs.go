package broker

import (
	"context"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strconv"
	"sync"
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
// directory's file, if it has one (a single node that becomes a cluster's
// first broker keeps its users, ACLs and quotas).
func openStateDocs(m *tablet.Manager, opts Options) (*stateDocs, error) {
	file := func(name string, perm fs.FileMode) docstore.Store {
		return docstore.File(m.FS(), filepath.Join(m.Dir(), name), perm)
	}
	store, node := file, ""
	if c := opts.Cluster; c != nil {
		node = strconv.Itoa(int(c.Member.NodeID()))
		store = func(name string, perm fs.FileMode) docstore.Store {
			doc := clusterDocName(name)
			if err := seedDoc(c.Member, doc, file(name, perm), opts.Logger); err != nil {
				opts.Logger.Warn("the cluster has no "+doc+" yet, and the data directory's file could not be copied to it", "err", err)
			}
			return c.Member.DocKey(doc, docSaveTimeout)
		}
	}
	var d stateDocs
	var err error
	if d.creds, err = auth.NewCredentials(store(auth.CredentialsFile, 0o600)); err != nil {
		return nil, err
	}
	if d.acls, err = auth.NewACLs(store(auth.ACLFile, 0o600)); err != nil {
		return nil, err
	}
	if d.quotas, err = auth.NewQuotas(store(auth.QuotasFile, 0o600)); err != nil {
		return nil, err
	}
	if d.dyn, err = openDynamicConfigs(m, store(checkpoint.DynamicBrokerConfigFile, 0o644), node, opts.Configs); err != nil {
		return nil, err
	}
	return &d, nil
}

// clusterDocName is the cluster's document of a data directory's file.
func clusterDocName(file string) string {
	switch file {
	case auth.CredentialsFile:
		return cluster.DocCredentials
	case auth.ACLFile:
		return cluster.DocACLs
	case auth.QuotasFile:
		return cluster.DocQuotas
	}
	return cluster.DocBrokerConfigs
}

// seedDoc writes the file's document as the cluster's doc if the cluster
// has none and the file exists (a race with another broker's seeding or
// change is lost quietly: the cluster's document stands).
func seedDoc(mem *cluster.Member, doc string, file docstore.Store, log *slog.Logger) error {
	if _, ok := mem.Snapshot().Docs[doc]; ok {
		return nil
	}
	data, _, err := file.Load()
	if err != nil || data == nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), docSaveTimeout)
	defer cancel()
	switch _, err := mem.PutDoc(ctx, doc, data, 0); {
	case err == docstore.ErrConflict:
		return nil
	case err != nil:
		return err
	}
	log.Info("the cluster had no "+doc+": it has the data directory's now", "file", file.String())
	return nil
}

// followDocs loads the documents again whenever the cluster's metadata
// changes (a revision compare each when they did not), until the broker
// closes; new dynamic configs move the topic defaults.
func (b *Broker) followDocs(mem *cluster.Member) {
	for {
		changed := mem.Changed()
		rev := mem.Snapshot().Revision
		for _, refresh := range []func() (bool, error){b.creds.Refresh, b.acls.Refresh, b.quotas.Refresh} {
			if _, err := refresh(); err != nil {
				b.opts.Logger.Error("a cluster document is not understood; the last one is kept", "err", err)
			}
		}
		if moved, err := b.dyn.doc.Refresh(); err != nil {
			b.opts.Logger.Error("the cluster's dynamic broker configs are not understood; the last ones are kept", "err", err)
		} else if moved {
			b.dyn.apply(b.m, b.opts.Logger)
		}
		b.docsFollowed.advance(rev)
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
	return b.docsFollowed.await(ctx, rev, b.stop)
}

// progress is a revision reached, and its waiters.
type progress struct {
	mu   sync.Mutex
	rev  int64
	next chan struct{} // closed at each advance
}

func (p *progress) advance(rev int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.next == nil {
		p.next = make(chan struct{})
	}
	p.rev = max(p.rev, rev)
	close(p.next)
	p.next = make(chan struct{})
}

func (p *progress) await(ctx context.Context, rev int64, stop <-chan struct{}) error {
	for {
		p.mu.Lock()
		if p.next == nil {
			p.next = make(chan struct{})
		}
		reached, next := p.rev >= rev, p.next
		p.mu.Unlock()
		if reached {
			return nil
		}
		select {
		case <-next:
		case <-ctx.Done():
			return ctx.Err()
		case <-stop:
			return ErrClosed
		}
	}
}
