package cluster

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/seglog/seglog/internal/docstore"
)

// The cluster's documents: what a single node keeps in files of its data
// directory and a cluster keeps once, for every broker.
const (
	DocCredentials   = "scram-credentials"
	DocACLs          = "acls"
	DocQuotas        = "client-quotas"
	DocBrokerConfigs = "broker-configs"
)

// PutDoc replaces the document name if its key is still at revision rev
// (0: it does not exist yet) and returns the new revision once this
// broker's snapshot has it; docstore.ErrConflict if the key moved, once
// this broker's snapshot has the write that moved it — a writer that
// reloads the document on a conflict (docstore) must find the new one,
// not retry its stale revision until its retries run out (two ACL
// changes through two brokers on a loaded machine did).
func (m *Member) PutDoc(ctx context.Context, name string, value []byte, rev int64) (int64, error) {
	key := m.prefix + keyDocs + name
	resp, err := m.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
		Then(clientv3.OpPut(key, string(value))).Commit()
	if err != nil {
		return 0, fmt.Errorf("cluster: writing %s: %w", key, err)
	}
	if !resp.Succeeded {
		if err := m.Await(ctx, resp.Header.Revision); err != nil {
			return 0, err
		}
		return 0, docstore.ErrConflict
	}
	if err := m.Await(ctx, resp.Header.Revision); err != nil {
		return 0, err
	}
	return resp.Header.Revision, nil
}

// DocKey is one of the cluster's documents as a store of it (a
// docstore.Watched): loads read this broker's snapshot, saves write etcd.
type DocKey struct {
	m       *Member
	name    string
	timeout time.Duration
}

// DocKey is the document name, each save of it given timeout.
func (m *Member) DocKey(name string, timeout time.Duration) DocKey {
	return DocKey{m: m, name: name, timeout: timeout}
}

// Load returns the document as this broker's snapshot has it (nil: there
// is none) and its revision.
func (d DocKey) Load() ([]byte, int64, error) {
	doc := d.m.Snapshot().Docs[d.name]
	return doc.Value, doc.Rev, nil
}

// Save is PutDoc.
func (d DocKey) Save(data []byte, rev int64) (int64, error) {
	ctx, cancel := context.WithTimeout(d.m.ctx, d.timeout)
	defer cancel()
	return d.m.PutDoc(ctx, d.name, data, rev)
}

// Rev is the document's revision in this broker's snapshot.
func (d DocKey) Rev() int64 { return d.m.Snapshot().Docs[d.name].Rev }

func (d DocKey) String() string { return "the cluster's " + d.name }

var _ docstore.Watched = DocKey{}
