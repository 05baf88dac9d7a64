// Package vfs is the filesystem layer every seglog file goes through:
//
//	FS ──┬── OS        the real filesystem (pwrite/pwritev, fsync, fdatasync,
//	     │             fallocate, flock, mmap, madvise)
//	     ├── MemFS     an in-memory crash simulator: Crash returns the state a
//	     │             power cut would leave (fsynced bytes, plus a seeded
//	     │             random part of the rest, torn sectors and lost size
//	     │             updates included; renames durable only after SyncDir)
//	     └── Injector  wraps any FS and fails chosen operations: by kind, by
//	                   path pattern and by index
//
// Files are written only at explicit positions; there is no seek offset and
// no O_APPEND. Memory mapping is part of the interface so that the simulator
// models index files too.
package vfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/seglog/seglog"
)

// FS is a filesystem.
type FS interface {
	// Open opens name read-only.
	Open(name string) (File, error)
	// OpenFile opens name with os.O_RDONLY or os.O_RDWR, plus optionally
	// os.O_CREATE, os.O_EXCL and os.O_TRUNC. Other flags are refused.
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	// Remove removes a file or an empty directory.
	Remove(name string) error
	// Rename renames oldname to newname, replacing a file at newname.
	Rename(oldname, newname string) error
	// MkdirAll creates dir and any missing parents.
	MkdirAll(dir string, perm os.FileMode) error
	// List returns the names of dir's entries, sorted.
	List(dir string) ([]string, error)
	// Stat describes name.
	Stat(name string) (os.FileInfo, error)
	// SyncDir makes dir's entries durable: creations, removals and
	// renames in it survive a crash only after it returns.
	SyncDir(dir string) error
	// Lock takes an exclusive advisory lock on name — a file, created if
	// missing, or an existing directory — failing with ErrLocked if anyone
	// holds a lock on it. Close releases it.
	Lock(name string) (io.Closer, error)
	// RLock takes a shared advisory lock on name, an existing file or
	// directory, creating and changing nothing: shared holders run beside
	// each other, never beside an exclusive one (ErrLocked either way).
	// Close releases it.
	RLock(name string) (io.Closer, error)
}

// File is an open file. Reads and writes are positional and may run
// concurrently.
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Closer
	// Name returns the name the file was opened with.
	Name() string
	// WriteVAt writes the buffers one after another at off in one
	// operation (pwritev), returning the bytes written.
	WriteVAt(bufs [][]byte, off int64) (int, error)
	// Sync makes the contents and size durable (fsync).
	Sync() error
	// Datasync makes the contents durable, and the size when reading the
	// data needs it (fdatasync).
	Datasync() error
	// Truncate sets the size, zero-filling when it grows.
	Truncate(size int64) error
	// Preallocate reserves real blocks for [off, off+length), growing the
	// size to cover them (fallocate mode 0). Filesystems without support
	// fail with ErrNotSupported; the caller then writes zeros instead.
	Preallocate(off, length int64) error
	// Size returns the current size.
	Size() (int64, error)
	// Map maps the first length bytes, which must exist, shared with the
	// file. Stores into a writable mapping reach the file; Flush makes them
	// durable.
	Map(length int, writable bool) (Mapping, error)
}

// Mapping is a memory-mapped region of a file.
type Mapping interface {
	// Bytes returns the mapped memory. It must not be used after Unmap.
	Bytes() []byte
	// Flush makes stores into the mapping durable (msync).
	Flush() error
	// Advise passes an access-pattern hint to the kernel (madvise). It is
	// only a hint: implementations may ignore it.
	Advise(a Advice) error
	// Unmap releases the mapping.
	Unmap() error
}

// Advice is an access-pattern hint for a mapping.
type Advice int

const (
	// AdviseNormal is the default read-ahead.
	AdviseNormal Advice = iota
	// AdviseRandom disables read-ahead: lookups touch scattered pages.
	AdviseRandom
	// AdviseSequential asks for aggressive read-ahead.
	AdviseSequential
	// AdviseWillNeed asks the kernel to read the pages in now.
	AdviseWillNeed
	// AdviseDontNeed lets the kernel drop the pages (clean ones are
	// reread from the file when touched again).
	AdviseDontNeed
)

var (
	// ErrNotSupported is returned by Preallocate where the filesystem
	// cannot reserve blocks.
	ErrNotSupported = seglog.NewKafkaError("vfs: operation not supported", -1)
	// ErrLocked is returned by Lock when another holder has the lock.
	ErrLocked = seglog.NewKafkaError("vfs: locked by another holder", 56)
	// ErrInjected is the default error an Injector returns.
	ErrInjected = seglog.NewKafkaError("vfs: injected fault", 56)
	// ErrReadOnly is returned by every change through ReadOnly.
	ErrReadOnly = seglog.NewKafkaError("vfs: read-only", -1)
)

const supportedFlags = os.O_RDONLY | os.O_RDWR | os.O_CREATE | os.O_EXCL | os.O_TRUNC

// ReadFile reads the whole of name.
func ReadFile(fs FS, name string) ([]byte, error) {
	fs = OrOS(fs)
	f, err := fs.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	buf := make([]byte, size)
	n, err := f.ReadAt(buf, 0)
	if err == io.EOF && int64(n) == size {
		err = nil
	}
	return buf[:n], err
}

// WriteFile creates (or truncates) name, writes data and closes it, without
// syncing.
func WriteFile(fs FS, name string, data []byte) error {
	return writeFile(OrOS(fs), name, data, false, 0o644)
}

// WriteFileSynced is WriteFile with an fsync before the close: the bytes are
// durable when it returns, the directory entry only after SyncDir.
func WriteFileSynced(fs FS, name string, data []byte) error {
	return writeFile(OrOS(fs), name, data, true, 0o644)
}

func writeFile(fs FS, name string, data []byte, sync bool, perm os.FileMode) error {
	f, err := fs.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(data, 0)
	if err == nil && sync {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

// TempSuffix ends the temporary file of an atomic write (WriteAtomic): a
// file left with it was never renamed into place. Part of the on-disk
// format (recovery removes such files); never change.
const TempSuffix = ".tmp"

// WriteAtomic replaces name with data: it writes name+TempSuffix, fsyncs
// it, renames it over name and fsyncs the directory, so that a crash leaves
// the old file or the new one, never a mix, and the new one is durable when
// it returns.
func WriteAtomic(fs FS, name string, data []byte) error {
	return WriteAtomicPerm(fs, name, data, 0o644)
}

// WriteAtomicPerm is WriteAtomic with the new file's permissions (0o600 for
// a file only its owner may read).
func WriteAtomicPerm(fs FS, name string, data []byte, perm os.FileMode) error {
	fs = OrOS(fs)
	tmp := name + TempSuffix
	_ = fs.Remove(tmp) // a leftover keeps its own permissions otherwise
	err := writeFile(fs, tmp, data, true, perm)
	if err == nil {
		err = fs.Rename(tmp, name)
	}
	if err == nil {
		err = fs.SyncDir(filepath.Dir(name))
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	return nil
}

// OrOS returns fs, or OS when fs is nil: every seglog function that takes an
// FS treats nil as the real filesystem.
func OrOS(fs FS) FS {
	if fs == nil {
		return OS
	}
	return fs
}
