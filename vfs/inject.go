package vfs

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// Op is a kind of filesystem operation, as a bit so that a Rule can name
// several.
type Op uint32

// Operation kinds.
const (
	OpOpen Op = 1 << iota
	OpRead
	OpWrite // WriteAt and WriteVAt
	OpSync  // Sync and Datasync
	OpTruncate
	OpPreallocate
	OpClose
	OpMap
	OpFlush // Mapping.Flush (msync)
	OpUnmap
	OpRemove
	OpRename
	OpMkdir
	OpList
	OpStat
	OpSyncDir
	OpLock

	// OpAll matches every kind.
	OpAll Op = 1<<iota - 1
	// OpMutating matches the kinds that change what is stored.
	OpMutating = OpWrite | OpSync | OpTruncate | OpPreallocate | OpFlush | OpRemove |
		OpRename | OpMkdir | OpSyncDir
)

var opNames = []string{"open", "read", "write", "sync", "truncate", "preallocate", "close",
	"map", "flush", "unmap", "remove", "rename", "mkdir", "list", "stat", "syncdir", "lock"}

func (o Op) String() string {
	var parts []string
	for i, name := range opNames {
		if o&(1<<i) != 0 {
			parts = append(parts, name)
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "|")
}

// Rule says which operation an Injector fails.
type Rule struct {
	// Ops are the kinds that count. Zero means OpAll.
	Ops Op
	// Path is a filepath.Match pattern tried against the whole path and
	// against its base name; "" matches every path.
	Path string
	// Nth is the index, from 0, of the matching operation to fail.
	Nth int
	// Err is the error returned, wrapped in a *fs.PathError. The default is
	// ErrInjected.
	Err error
	// Short makes a failed write store the first half of its bytes before
	// failing, like a short write.
	Short bool
	// Sticky makes every later operation, of every kind and path, fail too:
	// the device is gone, or the process died at that point.
	Sticky bool
	// From makes every matching operation from the Nth on fail, not just
	// the Nth: a disk that stays full.
	From bool
}

// Injector wraps an FS and fails the operations its rules choose.
type Injector struct {
	fs FS

	mu       sync.Mutex // guards rules, ops, byKind, injected and dead
	rules    []*ruleState
	ops      int // operations seen
	byKind   map[Op]int
	injected int // operations failed
	dead     error
}

type ruleState struct {
	Rule
	seen int
}

var _ FS = (*Injector)(nil)

// NewInjector wraps fs. With no rules it passes everything through and
// counts.
func NewInjector(fs FS) *Injector { return &Injector{fs: OrOS(fs)} }

// Add adds a rule.
func (in *Injector) Add(r Rule) {
	if r.Ops == 0 {
		r.Ops = OpAll
	}
	if r.Err == nil {
		r.Err = ErrInjected
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	in.rules = append(in.rules, &ruleState{Rule: r})
}

// Reset removes every rule and clears the counters, reviving a dead
// injector.
func (in *Injector) Reset() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.rules, in.ops, in.injected, in.dead, in.byKind = nil, 0, 0, nil, nil
}

// Count returns how many operations of the given kinds went through the
// injector (OpSync, for fsyncs).
func (in *Injector) Count(kinds Op) int {
	in.mu.Lock()
	defer in.mu.Unlock()
	n := 0
	for k, c := range in.byKind {
		if k&kinds != 0 {
			n += c
		}
	}
	return n
}

// Ops returns how many operations went through the injector.
func (in *Injector) Ops() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.ops
}

// Injected returns how many operations were failed. A fault loop that
// fails operation i for i = 0, 1, 2, … ends when a run injects nothing.
func (in *Injector) Injected() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.injected
}

// check counts one operation and returns the error to fail it with, and
// whether a write should first store part of its bytes.
func (in *Injector) check(op Op, path string) (short bool, err error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.ops++
	if in.byKind == nil {
		in.byKind = map[Op]int{}
	}
	in.byKind[op]++
	if in.dead != nil {
		in.injected++
		return false, &fs.PathError{Op: op.String(), Path: path, Err: in.dead}
	}
	for _, r := range in.rules {
		if r.Ops&op == 0 || !matchPath(r.Path, path) {
			continue
		}
		r.seen++
		if r.seen-1 != r.Nth && !(r.From && r.seen-1 > r.Nth) {
			continue
		}
		in.injected++
		if r.Sticky {
			in.dead = r.Err
		}
		return r.Short, &fs.PathError{Op: op.String(), Path: path, Err: fmt.Errorf("%w (rule: %v #%d)", r.Err, r.Ops, r.Nth)}
	}
	return false, nil
}

// fail is check for operations that cannot be short.
func (in *Injector) fail(op Op, path string) error {
	_, err := in.check(op, path)
	return err
}

func matchPath(pattern, path string) bool {
	if pattern == "" {
		return true
	}
	if ok, _ := filepath.Match(pattern, path); ok {
		return true
	}
	ok, _ := filepath.Match(pattern, filepath.Base(path))
	return ok
}

func (in *Injector) Open(name string) (File, error) { return in.OpenFile(name, os.O_RDONLY, 0) }

func (in *Injector) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	if err := in.fail(OpOpen, name); err != nil {
		return nil, err
	}
	f, err := in.fs.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &injFile{File: f, in: in}, nil
}

func (in *Injector) Remove(name string) error {
	if err := in.fail(OpRemove, name); err != nil {
		return err
	}
	return in.fs.Remove(name)
}

func (in *Injector) Rename(oldname, newname string) error {
	if err := in.fail(OpRename, oldname); err != nil {
		return err
	}
	return in.fs.Rename(oldname, newname)
}

func (in *Injector) MkdirAll(dir string, perm os.FileMode) error {
	if err := in.fail(OpMkdir, dir); err != nil {
		return err
	}
	return in.fs.MkdirAll(dir, perm)
}

func (in *Injector) List(dir string) ([]string, error) {
	if err := in.fail(OpList, dir); err != nil {
		return nil, err
	}
	return in.fs.List(dir)
}

func (in *Injector) Stat(name string) (os.FileInfo, error) {
	if err := in.fail(OpStat, name); err != nil {
		return nil, err
	}
	return in.fs.Stat(name)
}

func (in *Injector) SyncDir(dir string) error {
	if err := in.fail(OpSyncDir, dir); err != nil {
		return err
	}
	return in.fs.SyncDir(dir)
}

func (in *Injector) Lock(name string) (io.Closer, error) {
	if err := in.fail(OpLock, name); err != nil {
		return nil, err
	}
	return in.fs.Lock(name)
}

func (in *Injector) RLock(name string) (io.Closer, error) {
	if err := in.fail(OpLock, name); err != nil {
		return nil, err
	}
	return in.fs.RLock(name)
}

type injFile struct {
	File
	in *Injector
}

func (f *injFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.in.fail(OpRead, f.Name()); err != nil {
		return 0, err
	}
	return f.File.ReadAt(p, off)
}

func (f *injFile) WriteAt(p []byte, off int64) (int, error) {
	return f.WriteVAt([][]byte{p}, off)
}

func (f *injFile) WriteVAt(bufs [][]byte, off int64) (int, error) {
	short, err := f.in.check(OpWrite, f.Name())
	if err == nil {
		return f.File.WriteVAt(bufs, off)
	}
	if !short {
		return 0, err
	}
	total := 0
	for _, b := range bufs {
		total += len(b)
	}
	n, werr := f.File.WriteVAt(firstBytes(bufs, total/2), off)
	if werr != nil {
		return n, werr
	}
	return n, err
}

// firstBytes returns the buffers cut to their first n bytes.
func firstBytes(bufs [][]byte, n int) [][]byte {
	var out [][]byte
	for _, b := range bufs {
		if n <= 0 {
			break
		}
		b = b[:min(len(b), n)]
		out = append(out, b)
		n -= len(b)
	}
	return out
}

func (f *injFile) Sync() error {
	if err := f.in.fail(OpSync, f.Name()); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *injFile) Datasync() error {
	if err := f.in.fail(OpSync, f.Name()); err != nil {
		return err
	}
	return f.File.Datasync()
}

func (f *injFile) Truncate(size int64) error {
	if err := f.in.fail(OpTruncate, f.Name()); err != nil {
		return err
	}
	return f.File.Truncate(size)
}

func (f *injFile) Preallocate(off, length int64) error {
	if err := f.in.fail(OpPreallocate, f.Name()); err != nil {
		return err
	}
	return f.File.Preallocate(off, length)
}

func (f *injFile) Size() (int64, error) {
	if err := f.in.fail(OpStat, f.Name()); err != nil {
		return 0, err
	}
	return f.File.Size()
}

// Close closes the file even when it reports an injected failure, as
// close(2) does.
func (f *injFile) Close() error {
	err := f.in.fail(OpClose, f.Name())
	if cerr := f.File.Close(); err == nil {
		err = cerr
	}
	return err
}

func (f *injFile) Map(length int, writable bool) (Mapping, error) {
	if err := f.in.fail(OpMap, f.Name()); err != nil {
		return nil, err
	}
	m, err := f.File.Map(length, writable)
	if err != nil {
		return nil, err
	}
	return &injMapping{Mapping: m, in: f.in, name: f.Name()}, nil
}

type injMapping struct {
	Mapping
	in   *Injector
	name string
}

func (m *injMapping) Flush() error {
	if err := m.in.fail(OpFlush, m.name); err != nil {
		return err
	}
	return m.Mapping.Flush()
}

// Unmap releases the mapping even when it reports an injected failure.
func (m *injMapping) Unmap() error {
	err := m.in.fail(OpUnmap, m.name)
	if uerr := m.Mapping.Unmap(); err == nil {
		err = uerr
	}
	return err
}
