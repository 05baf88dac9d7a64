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
)

// ReadOnly wraps fs so that nothing can change through it: files open only
// for reading, and every change — a write open, Remove, Rename, MkdirAll, an
// exclusive Lock — fails with ErrReadOnly. SyncDir and RLock pass through
// (neither changes anything).
func ReadOnly(fs FS) FS { return readOnlyFS{OrOS(fs)} }

type readOnlyFS struct{ fs FS }

func roErr(op, name string) error { return &fs.PathError{Op: op, Path: name, Err: ErrReadOnly} }

func (r readOnlyFS) Open(name string) (File, error) { return r.fs.Open(name) }

func (r readOnlyFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	if flag != os.O_RDONLY {
		return nil, roErr("open", name)
	}
	return r.fs.Open(name)
}

func (r readOnlyFS) Remove(name string) error                 { return roErr("remove", name) }
func (r readOnlyFS) Rename(oldname, _ string) error           { return roErr("rename", oldname) }
func (r readOnlyFS) MkdirAll(dir string, _ os.FileMode) error { return roErr("mkdir", dir) }
func (r readOnlyFS) List(dir string) ([]string, error)        { return r.fs.List(dir) }
func (r readOnlyFS) Stat(name string) (os.FileInfo, error)    { return r.fs.Stat(name) }
func (r readOnlyFS) SyncDir(dir string) error                 { _, err := r.fs.Stat(dir); return err }
func (r readOnlyFS) Lock(name string) (io.Closer, error)      { return nil, roErr("flock", name) }
func (r readOnlyFS) RLock(name string) (io.Closer, error)     { return r.fs.RLock(name) }

var _ FS = readOnlyFS{}

// Overlay is a filesystem over a base that it never changes. Reads come
// from the base until a file is changed; every change — a write, a
// truncation, a writable mapping, a creation, a removal, a rename — is kept
// in memory and is gone with the Overlay. The base is reached only through
// ReadOnly, so a change can never slip through to it.
//
// It lets a read-only command run the engine's ordinary load — recovery of
// an unclean shutdown included — and clean close without a byte changing on
// disk: the recovered state lives in memory. A file is copied into memory
// whole on its first change, so the memory used is what the engine changed
// (on a clean directory, the active segment's indexes), not the data read.
// Locks are taken in the Overlay's own memory; lock the base itself (RLock)
// to keep writers out.
type Overlay struct {
	base FS
	mem  *MemFS

	// locks are the Overlay's own locks, apart from its files.
	locks *MemFS

	mu     sync.Mutex          // guards gone and inodes
	gone   map[string]bool     // removed names (and the trees under them)
	inodes map[string]*ovInode // base files opened, by name, until copied
}

var _ FS = (*Overlay)(nil)

// NewOverlay returns an Overlay over base (nil: the OS).
func NewOverlay(base FS) *Overlay {
	return &Overlay{base: ReadOnly(base), mem: NewMem(), locks: NewMem(), gone: map[string]bool{}, inodes: map[string]*ovInode{}}
}

// Changed returns the names the Overlay holds changes for — created,
// written or renamed to — sorted; removed names are not listed.
func (o *Overlay) Changed() []string {
	var out []string
	var walk func(dir string)
	walk = func(dir string) {
		names, _ := o.mem.List(dir)
		for _, n := range names {
			p := filepath.Join(dir, n)
			if info, err := o.mem.Stat(p); err == nil && info.IsDir() {
				walk(p)
			} else {
				out = append(out, p)
			}
		}
	}
	walk("/")
	return out
}

// goneLocked reports whether name or a directory above it was removed.
func (o *Overlay) goneLocked(name string) bool {
	for p := clean(name); ; p = filepath.Dir(p) {
		if o.gone[p] {
			return true
		}
		if p == "/" {
			return false
		}
	}
}

// where reports where name lives: in memory, in the base, or nowhere.
func (o *Overlay) whereLocked(name string) (inMem, inBase bool, info os.FileInfo) {
	if i, err := o.mem.Stat(name); err == nil {
		return true, false, i
	}
	if o.goneLocked(name) {
		return false, false, nil
	}
	if i, err := o.base.Stat(name); err == nil {
		return false, true, i
	}
	return false, false, nil
}

// ensureDirLocked makes the directory dir, which must exist in the merged
// view, exist in memory too, so that names can be created in it.
func (o *Overlay) ensureDirLocked(dir string) error {
	inMem, inBase, info := o.whereLocked(dir)
	switch {
	case inMem && info.IsDir():
		return nil
	case inBase && info.IsDir():
		return o.mem.MkdirAll(dir, 0o750)
	case inMem || inBase:
		return &fs.PathError{Op: "open", Path: dir, Err: errors.New("not a directory")}
	}
	return &fs.PathError{Op: "open", Path: dir, Err: fs.ErrNotExist}
}

// Open opens name read-only.
func (o *Overlay) Open(name string) (File, error) { return o.OpenFile(name, os.O_RDONLY, 0) }

// OpenFile opens name; see FS.
func (o *Overlay) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	name = absName(name)
	if flag&^supportedFlags != 0 {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("%w: flags %#x", ErrNotSupported, flag)}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	inMem, inBase, info := o.whereLocked(name)
	if (inMem || inBase) && flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0 {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrExist}
	}
	switch {
	case inMem:
		return o.mem.OpenFile(name, flag, perm)
	case inBase && info.IsDir():
		return nil, &fs.PathError{Op: "open", Path: name, Err: errors.New("is a directory")}
	case inBase && flag&os.O_TRUNC != 0 && flag&os.O_RDWR != 0:
		if err := o.ensureDirLocked(filepath.Dir(clean(name))); err != nil {
			return nil, err
		}
		return o.mem.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, perm)
	case inBase:
		f, err := o.base.Open(name)
		if err != nil {
			return nil, err
		}
		key := clean(name)
		x := o.inodes[key]
		if x == nil {
			x = &ovInode{o: o, name: key}
			o.inodes[key] = x
		}
		return &ovFile{x: x, base: f, name: name, writable: flag&os.O_RDWR != 0}, nil
	case flag&os.O_CREATE != 0:
		if err := o.ensureDirLocked(filepath.Dir(clean(name))); err != nil {
			return nil, err
		}
		delete(o.gone, clean(name))
		return o.mem.OpenFile(name, flag, perm)
	}
	return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
}

// copyUpLocked copies the base file name into memory, whole, unless it is
// there already, and returns its inode.
func (o *Overlay) copyUpLocked(name string) (*ovInode, error) {
	key := clean(name)
	x := o.inodes[key]
	if x == nil {
		x = &ovInode{o: o, name: key}
		o.inodes[key] = x
	}
	if x.mem != nil {
		return x, nil
	}
	data, err := ReadFile(o.base, key)
	if err != nil {
		return nil, err
	}
	if err := o.ensureDirLocked(filepath.Dir(key)); err != nil {
		return nil, err
	}
	f, err := o.mem.OpenFile(key, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return nil, err
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	x.mem = f
	delete(o.inodes, key) // later opens find it in memory
	return x, nil
}

// Remove removes a file or an empty directory.
func (o *Overlay) Remove(name string) error {
	name = absName(name)
	o.mu.Lock()
	defer o.mu.Unlock()
	inMem, inBase, info := o.whereLocked(name)
	if !inMem && !inBase {
		return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	}
	if info.IsDir() {
		if names, err := o.listLocked(name); err != nil {
			return err
		} else if len(names) > 0 {
			return &fs.PathError{Op: "remove", Path: name, Err: errors.New("directory not empty")}
		}
	}
	if inMem {
		if err := o.mem.Remove(name); err != nil {
			return err
		}
	}
	if _, err := o.base.Stat(name); err == nil { // a name in memory may also hide one in the base
		o.gone[clean(name)] = true
	}
	delete(o.inodes, clean(name))
	return nil
}

// Rename renames oldname to newname, replacing a file there. A base file
// is copied into memory first; a base directory cannot be renamed.
func (o *Overlay) Rename(oldname, newname string) error {
	oldname, newname = absName(oldname), absName(newname)
	o.mu.Lock()
	defer o.mu.Unlock()
	inMem, inBase, info := o.whereLocked(oldname)
	if bi, err := o.base.Stat(oldname); err == nil && bi.IsDir() && !o.goneLocked(oldname) {
		inBase = true // a directory of the base, whatever memory holds of it too
	}
	switch {
	case !inMem && !inBase:
		return &fs.PathError{Op: "rename", Path: oldname, Err: fs.ErrNotExist}
	case inBase && info.IsDir():
		return &fs.PathError{Op: "rename", Path: oldname, Err: fmt.Errorf("%w: renaming a directory of the base", ErrNotSupported)}
	case inBase:
		if _, err := o.copyUpLocked(oldname); err != nil {
			return err
		}
	}
	if err := o.ensureDirLocked(filepath.Dir(clean(newname))); err != nil {
		return err
	}
	// The name in memory hides a base file of the same name from now on.
	if err := o.mem.Rename(oldname, newname); err != nil {
		return err
	}
	if _, err := o.base.Stat(oldname); err == nil {
		o.gone[clean(oldname)] = true
	}
	delete(o.gone, clean(newname))
	return nil
}

// MkdirAll creates dir and any missing parents.
func (o *Overlay) MkdirAll(dir string, perm os.FileMode) error {
	dir = absName(dir)
	o.mu.Lock()
	defer o.mu.Unlock()
	for p := clean(dir); ; p = filepath.Dir(p) {
		delete(o.gone, p)
		if p == "/" {
			break
		}
	}
	return o.mem.MkdirAll(dir, perm)
}

// List returns the names in dir: the base's, less those removed, with
// those created.
func (o *Overlay) List(dir string) ([]string, error) {
	dir = absName(dir)
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.listLocked(dir)
}

func (o *Overlay) listLocked(dir string) ([]string, error) {
	inMem, inBase, info := o.whereLocked(dir)
	if !inMem && !inBase {
		return nil, &fs.PathError{Op: "open", Path: dir, Err: fs.ErrNotExist}
	}
	if !info.IsDir() {
		return nil, &fs.PathError{Op: "readdir", Path: dir, Err: errors.New("not a directory")}
	}
	var out []string
	if names, err := o.mem.List(dir); err == nil {
		out = append(out, names...)
	}
	if names, err := o.base.List(dir); err == nil && !o.goneLocked(dir) {
		for _, n := range names {
			if !o.gone[filepath.Join(clean(dir), n)] {
				out = append(out, n)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// Stat describes name.
func (o *Overlay) Stat(name string) (os.FileInfo, error) {
	name = absName(name)
	o.mu.Lock()
	defer o.mu.Unlock()
	inMem, inBase, info := o.whereLocked(name)
	if !inMem && !inBase {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrNotExist}
	}
	return info, nil
}

// SyncDir does nothing to the base: the Overlay is never durable.
func (o *Overlay) SyncDir(dir string) error {
	_, err := o.Stat(dir)
	return err
}

// Lock takes an exclusive lock in the Overlay's own memory.
func (o *Overlay) Lock(name string) (io.Closer, error) { return o.lockName(name, false) }

// RLock takes a shared lock in the Overlay's own memory.
func (o *Overlay) RLock(name string) (io.Closer, error) { return o.lockName(name, true) }

func (o *Overlay) lockName(name string, shared bool) (io.Closer, error) {
	name = absName(name)
	if _, err := o.Stat(name); errors.Is(err, fs.ErrNotExist) && !shared {
		f, err := o.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o640) // as Lock creates a missing file
		if err != nil {
			return nil, err
		}
		_ = f.Close()
	} else if err != nil {
		return nil, err
	}
	key := "/" + strings.ReplaceAll(clean(name), "/", "|") // one flat namespace of lock names
	if f, err := o.locks.OpenFile(key, os.O_RDWR|os.O_CREATE, 0o640); err == nil {
		_ = f.Close()
	}
	if shared {
		return o.locks.RLock(key)
	}
	return o.locks.Lock(key)
}

// ovInode is a base file opened through the Overlay: its handles read the
// base until the first change copies it into memory (mem), and all of them
// use the copy from then on.
type ovInode struct {
	o    *Overlay
	name string
	mem  File
}

type ovFile struct {
	x        *ovInode
	base     File
	name     string
	writable bool
}

var _ File = (*ovFile)(nil)

// current returns the memory copy once there is one, else nil.
func (f *ovFile) current() File {
	f.x.o.mu.Lock()
	defer f.x.o.mu.Unlock()
	return f.x.mem
}

// changing copies the file into memory for a change and returns the copy.
func (f *ovFile) changing(op string) (File, error) {
	if !f.writable {
		return nil, &fs.PathError{Op: op, Path: f.name, Err: errors.New("file opened read-only")}
	}
	f.x.o.mu.Lock()
	defer f.x.o.mu.Unlock()
	if f.x.mem != nil {
		return f.x.mem, nil
	}
	if _, err := f.x.o.copyUpLocked(f.x.name); err != nil {
		return nil, err
	}
	return f.x.mem, nil
}

func (f *ovFile) Name() string { return f.name }

func (f *ovFile) ReadAt(p []byte, off int64) (int, error) {
	if m := f.current(); m != nil {
		return m.ReadAt(p, off)
	}
	return f.base.ReadAt(p, off)
}

func (f *ovFile) WriteAt(p []byte, off int64) (int, error) { return f.WriteVAt([][]byte{p}, off) }

func (f *ovFile) WriteVAt(bufs [][]byte, off int64) (int, error) {
	m, err := f.changing("write")
	if err != nil {
		return 0, err
	}
	return m.WriteVAt(bufs, off)
}

func (f *ovFile) Sync() error {
	if m := f.current(); m != nil {
		return m.Sync()
	}
	return nil
}

func (f *ovFile) Datasync() error { return f.Sync() }

func (f *ovFile) Truncate(size int64) error {
	m, err := f.changing("truncate")
	if err != nil {
		return err
	}
	return m.Truncate(size)
}

func (f *ovFile) Preallocate(off, length int64) error {
	m, err := f.changing("fallocate")
	if err != nil {
		return err
	}
	return m.Preallocate(off, length)
}

func (f *ovFile) Size() (int64, error) {
	if m := f.current(); m != nil {
		return m.Size()
	}
	return f.base.Size()
}

func (f *ovFile) Map(length int, writable bool) (Mapping, error) {
	if writable {
		m, err := f.changing("mmap")
		if err != nil {
			return nil, err
		}
		return m.Map(length, true)
	}
	if m := f.current(); m != nil {
		return m.Map(length, false)
	}
	return f.base.Map(length, false)
}

// Close closes the handle on the base; the memory copy stays for the
// Overlay's other handles.
func (f *ovFile) Close() error { return f.base.Close() }

// absName is name made absolute: the Overlay's memory and its base must
// mean the same file by it, whatever the working directory does later.
func absName(name string) string {
	if a, err := filepath.Abs(name); err == nil {
		return a
	}
	return name
}
