package vfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// MemFS is an in-memory filesystem that remembers what is durable: the
// bytes of each file as of its last Sync, and each directory's entries as of
// its last SyncDir. Crash returns the filesystem a power cut would leave.
//
// It is strict where the real thing would fail late: mapping beyond the end
// of a file, shrinking a file under a live mapping (SIGBUS on Linux), or
// growing a mapped file beyond the memory it already has (which the
// simulator cannot do without moving the mapping) return errors.
type MemFS struct {
	mu    sync.Mutex // guards root and locks
	root  *memDir
	locks map[string]int // -1: held exclusively; n > 0: n shared holders
}

var _ FS = (*MemFS)(nil)

// sectorSize is the unit in which unsynced writes survive, vanish or tear.
const sectorSize = 512

type memDir struct {
	live    map[string]any // *memDir or *memInode
	durable map[string]any // live as of the last SyncDir
	log     []dirOp        // changes since the last SyncDir, in order
}

type dirOpKind int8

const (
	opCreate dirOpKind = iota // name → node
	opRemove                  // name
	opMove                    // from → name, within the directory
)

type dirOp struct {
	kind dirOpKind
	name string
	from string
	node any
}

type memInode struct {
	data    []byte
	synced  []byte
	dirtyLo int // [dirtyLo, dirtyHi) written since the last sync
	dirtyHi int
	maps    int // live mappings
	mapLen  int // the longest live mapping
	// mappedLen is the longest range mapped since the last sync: stores
	// through a mapping are not tracked, so sync copies this whole range.
	mappedLen int
	modTime   time.Time
}

// NewMem returns an empty in-memory filesystem whose root is "/". Relative
// names are taken from the root.
func NewMem() *MemFS {
	return &MemFS{root: newMemDir(), locks: map[string]int{}}
}

func newMemDir() *memDir {
	return &memDir{live: map[string]any{}, durable: map[string]any{}}
}

func clean(name string) string { return filepath.Clean("/" + name) }

func split(name string) (dir, base string) {
	p := clean(name)
	dir, base = filepath.Split(p)
	return clean(dir), base
}

// dirLocked finds the directory at path p.
func (m *MemFS) dirLocked(p string) (*memDir, error) {
	d := m.root
	for _, part := range strings.Split(strings.Trim(clean(p), "/"), "/") {
		if part == "" {
			continue
		}
		next, ok := d.live[part].(*memDir)
		if !ok {
			if _, isFile := d.live[part]; isFile {
				return nil, fmt.Errorf("%s is not a directory", part)
			}
			return nil, fs.ErrNotExist
		}
		d = next
	}
	return d, nil
}

// lookupLocked returns the parent directory, the base name and the node
// (nil if absent) of name.
func (m *MemFS) lookupLocked(name string) (*memDir, string, any, error) {
	dir, base := split(name)
	d, err := m.dirLocked(dir)
	if err != nil {
		return nil, "", nil, err
	}
	if base == "" { // the root
		return nil, "", m.root, nil
	}
	return d, base, d.live[base], nil
}

func (d *memDir) add(name string, node any) {
	d.live[name] = node
	d.log = append(d.log, dirOp{kind: opCreate, name: name, node: node})
}

func (d *memDir) remove(name string) {
	delete(d.live, name)
	d.log = append(d.log, dirOp{kind: opRemove, name: name})
}

func pathErr(op, name string, err error) error {
	return &fs.PathError{Op: op, Path: name, Err: err}
}

// Open opens name read-only.
func (m *MemFS) Open(name string) (File, error) { return m.OpenFile(name, os.O_RDONLY, 0) }

// OpenFile opens name; see FS.
func (m *MemFS) OpenFile(name string, flag int, _ os.FileMode) (File, error) {
	if flag&^supportedFlags != 0 {
		return nil, pathErr("open", name, fmt.Errorf("%w: flags %#x", ErrNotSupported, flag))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, node, err := m.lookupLocked(name)
	if err != nil {
		return nil, pathErr("open", name, err)
	}
	if _, isDir := node.(*memDir); isDir {
		return nil, pathErr("open", name, errors.New("is a directory"))
	}
	writable := flag&os.O_RDWR != 0
	ino, _ := node.(*memInode)
	switch {
	case ino != nil && flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		return nil, pathErr("open", name, fs.ErrExist)
	case ino == nil && flag&os.O_CREATE == 0:
		return nil, pathErr("open", name, fs.ErrNotExist)
	case ino == nil:
		ino = &memInode{modTime: time.Now()}
		d.add(base, ino)
	case flag&os.O_TRUNC != 0 && writable:
		if err := ino.truncate(0); err != nil {
			return nil, pathErr("open", name, err)
		}
	}
	return &memFile{fs: m, ino: ino, name: name, writable: writable}, nil
}

// Remove removes a file or an empty directory.
func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, node, err := m.lookupLocked(name)
	switch {
	case err != nil:
		return pathErr("remove", name, err)
	case node == nil:
		return pathErr("remove", name, fs.ErrNotExist)
	case d == nil:
		return pathErr("remove", name, errors.New("cannot remove the root"))
	}
	if sub, isDir := node.(*memDir); isDir && len(sub.live) > 0 {
		return pathErr("remove", name, errors.New("directory not empty"))
	}
	d.remove(base)
	return nil
}

// Rename renames oldname to newname, replacing a file there. Within one
// directory the rename is atomic across a crash; between two directories
// each side becomes durable with its own directory.
func (m *MemFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	od, obase, node, err := m.lookupLocked(oldname)
	if err != nil || node == nil || od == nil {
		return pathErr("rename", oldname, errors.Join(fs.ErrNotExist, err))
	}
	nd, nbase, target, err := m.lookupLocked(newname)
	if err != nil || nd == nil {
		return pathErr("rename", newname, errors.Join(fs.ErrNotExist, err))
	}
	if _, isDir := target.(*memDir); isDir && target != node {
		return pathErr("rename", newname, fs.ErrExist)
	}
	if od == nd {
		if obase == nbase {
			return nil
		}
		delete(od.live, obase)
		od.live[nbase] = node
		od.log = append(od.log, dirOp{kind: opMove, name: nbase, from: obase, node: node})
		return nil
	}
	od.remove(obase)
	nd.add(nbase, node)
	return nil
}

// MkdirAll creates dir and any missing parents.
func (m *MemFS) MkdirAll(dir string, _ os.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := m.root
	for _, part := range strings.Split(strings.Trim(clean(dir), "/"), "/") {
		if part == "" {
			continue
		}
		switch next := d.live[part].(type) {
		case *memDir:
			d = next
		case nil:
			nd := newMemDir()
			d.add(part, nd)
			d = nd
		default:
			return pathErr("mkdir", dir, fmt.Errorf("%s is a file", part))
		}
	}
	return nil
}

// List returns the sorted names in dir.
func (m *MemFS) List(dir string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, err := m.dirLocked(dir)
	if err != nil {
		return nil, pathErr("open", dir, err)
	}
	names := make([]string, 0, len(d.live))
	for name := range d.live {
		names = append(names, name)
	}
	slices.Sort(names)
	return names, nil
}

// Stat describes name.
func (m *MemFS) Stat(name string) (os.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, base, node, err := m.lookupLocked(name)
	if err == nil && node == nil {
		err = fs.ErrNotExist
	}
	if err != nil {
		return nil, pathErr("stat", name, err)
	}
	info := memInfo{name: base}
	if ino, ok := node.(*memInode); ok {
		info.size, info.modTime = int64(len(ino.data)), ino.modTime
	} else {
		info.dir = true
	}
	return info, nil
}

// SyncDir makes dir's entries durable.
func (m *MemFS) SyncDir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, err := m.dirLocked(dir)
	if err != nil {
		return pathErr("sync", dir, err)
	}
	d.durable = cloneEntries(d.live)
	d.log = nil
	return nil
}

func cloneEntries(e map[string]any) map[string]any {
	out := make(map[string]any, len(e))
	for k, v := range e {
		out[k] = v
	}
	return out
}

// Lock takes an exclusive lock on name, creating the file if needed.
func (m *MemFS) Lock(name string) (io.Closer, error) {
	if info, err := m.Stat(name); err != nil || !info.IsDir() {
		f, err := m.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, err
		}
		_ = f.Close()
	}
	return m.lock(name, -1)
}

// RLock takes a shared lock on name, an existing file or directory.
func (m *MemFS) RLock(name string) (io.Closer, error) {
	if _, err := m.Stat(name); err != nil {
		return nil, err
	}
	return m.lock(name, 1)
}

// lock adds a holder to name's lock: -1 exclusive, 1 shared.
func (m *MemFS) lock(name string, how int) (io.Closer, error) {
	key := clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if n := m.locks[key]; n < 0 || (n > 0 && how < 0) {
		return nil, pathErr("flock", name, ErrLocked)
	}
	m.locks[key] += how
	if how < 0 {
		m.locks[key] = -1
	}
	return &memLock{fs: m, key: key, how: how}, nil
}

type memLock struct {
	fs   *MemFS
	key  string
	how  int
	once sync.Once
}

func (l *memLock) Close() error {
	l.once.Do(func() {
		l.fs.mu.Lock()
		if l.how < 0 || l.fs.locks[l.key] <= 1 {
			delete(l.fs.locks, l.key)
		} else {
			l.fs.locks[l.key]--
		}
		l.fs.mu.Unlock()
	})
	return nil
}

type memInfo struct {
	name    string
	size    int64
	dir     bool
	modTime time.Time
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return i.size }
func (i memInfo) ModTime() time.Time { return i.modTime }
func (i memInfo) IsDir() bool        { return i.dir }
func (i memInfo) Sys() any           { return nil }
func (i memInfo) Mode() fs.FileMode {
	if i.dir {
		return fs.ModeDir | 0o755
	}
	return 0o644
}

// setSize grows or shrinks data, keeping it in place while mapped.
func (n *memInode) setSize(size int) error {
	old := len(n.data)
	if n.maps > 0 {
		if size < n.mapLen {
			return fmt.Errorf("shrinking a file to %d bytes under a live %d-byte mapping", size, n.mapLen)
		}
		if size > cap(n.data) {
			return fmt.Errorf("growing a mapped file to %d bytes is not simulated (capacity %d)", size, cap(n.data))
		}
	}
	if size <= cap(n.data) {
		n.data = n.data[:size]
		clear(n.data[min(old, size):])
	} else {
		grown := make([]byte, size, max(size, 2*cap(n.data)))
		copy(grown, n.data)
		n.data = grown
	}
	n.markDirty(min(old, size), max(old, size))
	n.modTime = time.Now()
	return nil
}

func (n *memInode) truncate(size int) error { return n.setSize(size) }

func (n *memInode) markDirty(lo, hi int) {
	if lo >= hi {
		return
	}
	if n.dirtyLo == n.dirtyHi {
		n.dirtyLo, n.dirtyHi = lo, hi
		return
	}
	n.dirtyLo, n.dirtyHi = min(n.dirtyLo, lo), max(n.dirtyHi, hi)
}

func (n *memInode) writeAt(p []byte, off int64) error {
	end := int(off) + len(p)
	if end > len(n.data) {
		if err := n.setSize(end); err != nil {
			return err
		}
	}
	copy(n.data[off:], p)
	n.markDirty(int(off), end)
	n.modTime = time.Now()
	return nil
}

// sync makes the current contents durable.
func (n *memInode) sync() {
	if len(n.synced) != len(n.data) {
		synced := make([]byte, len(n.data))
		copy(synced, n.synced)
		n.synced = synced
	}
	lo, hi := min(n.dirtyLo, len(n.data)), min(n.dirtyHi, len(n.data))
	copy(n.synced[lo:hi], n.data[lo:hi])
	m := min(n.mappedLen, len(n.data))
	copy(n.synced[:m], n.data[:m])
	n.dirtyLo, n.dirtyHi = 0, 0
	n.mappedLen = n.mapLen
}

type memFile struct {
	fs       *MemFS
	ino      *memInode
	name     string
	writable bool
	closed   bool
}

var _ File = (*memFile)(nil)

func (f *memFile) Name() string { return f.name }

// check returns an error if the file is closed, or read-only for a write.
func (f *memFile) check(op string, write bool) error {
	if f.closed {
		return pathErr(op, f.name, os.ErrClosed)
	}
	if write && !f.writable {
		return pathErr(op, f.name, errors.New("file opened read-only"))
	}
	return nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("read", false); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, pathErr("read", f.name, fs.ErrInvalid)
	}
	if off >= int64(len(f.ino.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.ino.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	return f.WriteVAt([][]byte{p}, off)
}

func (f *memFile) WriteVAt(bufs [][]byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("write", true); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, pathErr("write", f.name, fs.ErrInvalid)
	}
	n := 0
	for _, b := range bufs {
		if err := f.ino.writeAt(b, off+int64(n)); err != nil {
			return n, pathErr("write", f.name, err)
		}
		n += len(b)
	}
	return n, nil
}

func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("sync", false); err != nil {
		return err
	}
	f.ino.sync()
	return nil
}

func (f *memFile) Datasync() error { return f.Sync() }

func (f *memFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("truncate", true); err != nil {
		return err
	}
	if size < 0 {
		return pathErr("truncate", f.name, fs.ErrInvalid)
	}
	if err := f.ino.truncate(int(size)); err != nil {
		return pathErr("truncate", f.name, err)
	}
	return nil
}

func (f *memFile) Preallocate(off, length int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("fallocate", true); err != nil {
		return err
	}
	if off < 0 || length <= 0 {
		return pathErr("fallocate", f.name, fs.ErrInvalid)
	}
	if end := int(off + length); end > len(f.ino.data) {
		if err := f.ino.setSize(end); err != nil {
			return pathErr("fallocate", f.name, err)
		}
	}
	return nil
}

func (f *memFile) Size() (int64, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("stat", false); err != nil {
		return 0, err
	}
	return int64(len(f.ino.data)), nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("close", false); err != nil {
		return err
	}
	f.closed = true
	return nil
}

// Map maps the first length bytes. The mapping shares the file's memory:
// stores are seen by ReadAt at once and become durable on Flush or Sync.
func (f *memFile) Map(length int, writable bool) (Mapping, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("mmap", writable); err != nil {
		return nil, err
	}
	if length < 0 || length > len(f.ino.data) {
		return nil, pathErr("mmap", f.name, fmt.Errorf("mapping %d bytes of a %d-byte file", length, len(f.ino.data)))
	}
	n := f.ino
	n.maps++
	n.mapLen = max(n.mapLen, length)
	n.mappedLen = max(n.mappedLen, length)
	return &memMapping{fs: f.fs, ino: n, b: n.data[:length:length], name: f.name}, nil
}

type memMapping struct {
	fs       *MemFS
	ino      *memInode
	b        []byte
	name     string
	unmapped bool
}

func (m *memMapping) Bytes() []byte       { return m.b }
func (m *memMapping) Advise(Advice) error { return nil }

func (m *memMapping) Flush() error {
	m.fs.mu.Lock()
	defer m.fs.mu.Unlock()
	if m.unmapped {
		return pathErr("msync", m.name, errors.New("unmapped"))
	}
	n := m.ino
	if len(n.synced) < len(m.b) {
		synced := make([]byte, len(m.b))
		copy(synced, n.synced)
		n.synced = synced
	}
	copy(n.synced, m.b)
	return nil
}

func (m *memMapping) Unmap() error {
	m.fs.mu.Lock()
	defer m.fs.mu.Unlock()
	if m.unmapped {
		return pathErr("munmap", m.name, errors.New("unmapped twice"))
	}
	m.b, m.unmapped = nil, true
	n := m.ino
	if n.maps--; n.maps == 0 {
		n.mapLen = 0
	}
	return nil
}
