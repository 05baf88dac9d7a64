package auth

import (
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/vfs"
)

// heldFS holds every SyncDir while held is set, saying so on entered,
// until release is closed: a writer's fsync that takes forever.
type heldFS struct {
	vfs.FS
	held    *atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (h *heldFS) SyncDir(dir string) error {
	if h.held.Load() {
		h.entered <- struct{}{}
		<-h.release
	}
	return h.FS.SyncDir(dir)
}

// A change to the ACLs, the quotas or the credentials is saved (its
// fsyncs) without holding back a reader: while a writer's fsync is held,
// every read answers at once, from the state before the change; once the
// change is durable, reads see it.
func TestReadersNeverWaitForAWriter(t *testing.T) {
	dir := t.TempDir()
	held := &atomic.Bool{}
	fsys := &heldFS{FS: vfs.OS, held: held, entered: make(chan struct{}, 1), release: make(chan struct{})}
	acls, err := OpenACLs(fsys, filepath.Join(dir, ACLFile))
	require.NoError(t, err)
	quotas, err := OpenQuotas(fsys, filepath.Join(dir, QuotasFile))
	require.NoError(t, err)
	creds, err := OpenCredentials(fsys, filepath.Join(dir, CredentialsFile))
	require.NoError(t, err)
	z := &Authorizer{ACLs: acls}
	alice := kmsg.StringPtr("alice")
	salted, err := saltedPassword(SHA256, "pw", []byte("salt"), MinIterations)
	require.NoError(t, err)

	for _, c := range []struct {
		name   string
		change func() error
		seen   func() bool
	}{
		{"ACLs", func() error {
			_, err := acls.Create([]ACL{allow(topic, "t", kmsg.ACLResourcePatternTypeLiteral, "User:bob", kmsg.ACLOperationRead)})
			return err
		}, func() bool { return z.Authorize("User:bob", "127.0.0.1", kmsg.ACLOperationRead, topic, "t") }},
		{"quotas", func() error {
			_, err := quotas.Alter([]Entity{{EntityUser: alice}}, [][]QuotaOp{{{Key: ProducerByteRate, Value: 1024}}}, false)
			return err
		}, func() bool { q, _ := quotas.Resolve("alice", "c", ProducerByteRate); return q == 1024 }},
		{"credentials", func() error {
			_, err := creds.Apply([]Change{{User: "alice", Mechanism: SHA256, Salt: []byte("salt"), Iterations: MinIterations, SaltedPassword: salted}})
			return err
		}, func() bool { _, ok := creds.Lookup("alice", SHA256); return ok }},
	} {
		t.Run(c.name, func(t *testing.T) {
			fsys.release = make(chan struct{})
			held.Store(true)
			done := make(chan error, 1)
			go func() { done <- c.change() }()
			<-fsys.entered // the writer is in its fsync
			read := make(chan bool, 1)
			go func() { read <- c.seen() }()
			select {
			case seen := <-read:
				require.False(t, seen, "a change is not seen before it is durable")
			case <-time.After(time.Minute):
				t.Fatal("a reader waited for the writer's fsync")
			}
			held.Store(false)
			close(fsys.release)
			require.NoError(t, <-done)
			require.True(t, c.seen(), "seen once durable")
		})
	}
}
