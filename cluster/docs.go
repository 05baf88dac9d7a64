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
// broker's snapshot has it; docstore.ErrConflict if the key moved.
func (m *Member) PutDoc(ctx context.Context, name string, value []byte, rev int64) (int64, error) {
	key := m.prefix + keyDocs + name
	resp, err := m.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
		Then(clientv3.OpPut(key, string(value))).Commit()
	if err != nil {
		return 0, fmt.Errorf("cluster: writing %s: %w", key, err)
	}
	if !resp.Succeeded {
		return 0, docstore.ErrConflict
	}
	if err := m.Await(ctx, resp.Header.Revision); err != nil {
		return 0, err
	}
	return resp.Header.Revision, nil
}

// DocStore is the document name as a docstore.Watched: loads read this
// broker's snapshot, saves write etcd (each one given timeout).
func (m *Member) DocStore(name string, timeout time.Duration) docstore.Watched {
	return docStore{m: m, name: name, timeout: timeout}
}

type docStore struct {
	m       *Member
	name    string
	timeout time.Duration
}

func (d docStore) Load() ([]byte, int64, error) {
	doc := d.m.Snapshot().Docs[d.name]
	return doc.Value, doc.Rev, nil
}

func (d docStore) Save(data []byte, rev int64) (int64, error) {
	ctx, cancel := context.WithTimeout(d.m.ctx, d.timeout)
	defer cancel()
	return d.m.PutDoc(ctx, d.name, data, rev)
}

func (d docStore) Rev() int64 { return d.m.Snapshot().Docs[d.name].Rev }

func (d docStore) String() string { return "the cluster's " + d.name }
