// Package docstore keeps a small document — the ACLs, the SCRAM
// credentials, the client quotas, the dynamic broker configs — in memory
// over where it is stored: a file in the data directory (a single node), or
// a key in etcd shared by every broker of a cluster. Readers load the
// current state without a lock; one writer at a time makes the next state,
// stores it, and only then publishes it; a store that other processes
// change too (etcd) is compared on revision, and a writer that lost the
// race reads the newer document and makes its change again.
package docstore

import (
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"sync/atomic"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/vfs"
)

// ErrConflict is a Save whose revision is no longer the document's: another
// writer changed it meanwhile (Update's, once it lost every retry).
var ErrConflict = seglog.NewKafkaError("docstore: the document changed meanwhile", 95) // INVALID_UPDATE_VERSION

// Store is where a document lives.
type Store interface {
	// Load returns the document (nil: there is none yet) and its
	// revision.
	Load() (data []byte, rev int64, err error)
	// Save replaces the document if it is still at revision rev (0: there
	// is none), durably, and returns its new revision; ErrConflict if it
	// has moved.
	Save(data []byte, rev int64) (int64, error)
	// String names the document in errors.
	String() string
}

// Watched is a Store others change too that knows its document's current
// revision cheaply (a watched copy in memory): a Doc over one loads the
// document again, at a read, once the revision moved.
type Watched interface {
	Store
	Rev() int64
}

// File is a document in a file, replaced atomically and durably with the
// permission perm. Only its own process changes it (the data directory's
// lock), so its revision is always 0.
func File(fsys vfs.FS, path string, perm fs.FileMode) Store {
	return fileStore{fsys: vfs.OrOS(fsys), path: path, perm: perm}
}

type fileStore struct {
	fsys vfs.FS
	path string
	perm fs.FileMode
}

func (f fileStore) Load() ([]byte, int64, error) {
	data, err := vfs.ReadFile(f.fsys, f.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("reading %s: %w", f.path, err)
	}
	return data, 0, nil
}

func (f fileStore) Save(data []byte, _ int64) (int64, error) {
	return 0, vfs.WriteAtomicPerm(f.fsys, f.path, data, f.perm)
}

func (f fileStore) String() string { return f.path }

// Doc is a document's state of type T over its store.
type Doc[T any] struct {
	store  Store
	decode func(data []byte) (*T, error)

	writeMu sync.Mutex   // one writer at a time; guards bad and unreported
	rev     atomic.Int64 // the revision of cur (or of a bad document after it), changed under writeMu
	cur     atomic.Pointer[T]
	// bad is why the document at rev is not cur (nil: it is); unreported
	// until Refresh has returned it once. Under writeMu.
	bad        error
	unreported bool
}

// Open loads the document from store; decode makes its state (from nil
// data: the empty state) or says why the document is bad.
func Open[T any](store Store, decode func(data []byte) (*T, error)) (*Doc[T], error) {
	d := &Doc[T]{store: store, decode: decode}
	if err := d.refreshLocked(true); err != nil {
		return nil, err
	}
	return d, nil
}

// Load returns the current state; it is never changed. Over a Watched
// store whose revision moved, it loads the document again first — unless
// a writer is at work, whose change will be newer still: a reader never
// waits for a write.
func (d *Doc[T]) Load() *T {
	if w, ok := d.store.(Watched); ok && w.Rev() != d.rev.Load() && d.writeMu.TryLock() {
		_ = d.refreshLocked(false) // (a bad document: the state is kept; Refresh reports it)
		d.writeMu.Unlock()
	}
	return d.cur.Load()
}

// maxRetries bounds the writers one update makes its change after: a
// change that loses this many races in a row is refused.
const maxRetries = 20

// Update calls next with the current state under the writer's lock; the
// state next returns is saved (with the encoding next returns) and then
// published, unless next returns an error or a nil state (nothing to
// save). When another writer changed the document meanwhile, the newer
// document is loaded and next is called again with it: next must make its
// results afresh at each call.
func (d *Doc[T]) Update(next func(cur *T) (*T, []byte, error)) error {
	d.writeMu.Lock()
	defer d.writeMu.Unlock()
	for try := 0; ; try++ {
		n, data, err := next(d.cur.Load())
		if err != nil || n == nil {
			return err
		}
		rev, err := d.store.Save(data, d.rev.Load())
		if errors.Is(err, ErrConflict) && try < maxRetries {
			if err := d.refreshLocked(false); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("saving %s: %w", d.store, err)
		}
		d.cur.Store(n)
		d.rev.Store(rev)
		return nil
	}
}

// Refresh loads the document again and publishes it if its revision moved
// (another writer changed it). A bad document is an error, once (a Load
// may have met it first), and the state before it is kept.
func (d *Doc[T]) Refresh() (changed bool, err error) {
	d.writeMu.Lock()
	defer d.writeMu.Unlock()
	before := d.cur.Load()
	_ = d.refreshLocked(false)
	if d.unreported {
		err, d.unreported = d.bad, false
	}
	return d.cur.Load() != before, err
}

func (d *Doc[T]) refreshLocked(first bool) error {
	data, rev, err := d.store.Load()
	if err != nil {
		return err
	}
	if !first && rev == d.rev.Load() {
		return nil
	}
	s, err := d.decode(data)
	if err != nil {
		err = fmt.Errorf("%s at revision %d: %w", d.store, rev, err)
		d.bad, d.unreported = err, true
		if !first {
			d.rev.Store(rev) // (not decoded again at each read)
		}
		return err
	}
	d.bad, d.unreported = nil, false
	d.cur.Store(s)
	d.rev.Store(rev)
	return nil
}
