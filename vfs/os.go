package vfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/edsrzf/mmap-go"
	"golang.org/x/sys/unix"
)

// OS is the real filesystem.
var OS FS = osFS{}

type osFS struct{}

var _ FS = osFS{}

func (osFS) Open(name string) (File, error) { return osFS{}.OpenFile(name, os.O_RDONLY, 0) }

func (osFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	if flag&^supportedFlags != 0 {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("%w: flags %#x", ErrNotSupported, flag)}
	}
	f, err := os.OpenFile(name, flag|unix.O_CLOEXEC, perm)
	if err != nil {
		return nil, err
	}
	return &osFile{f: f}, nil
}

func (osFS) Remove(name string) error                    { return os.Remove(name) }
func (osFS) Rename(oldname, newname string) error        { return os.Rename(oldname, newname) }
func (osFS) MkdirAll(dir string, perm os.FileMode) error { return os.MkdirAll(dir, perm) }
func (osFS) Stat(name string) (os.FileInfo, error)       { return os.Stat(name) }

func (osFS) List(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	return names, nil
}

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

func (osFS) Lock(name string) (io.Closer, error) {
	flag := os.O_RDWR | os.O_CREATE
	if info, err := os.Stat(name); err == nil && info.IsDir() {
		flag = os.O_RDONLY // a directory is locked through a read-only descriptor
	}
	return osLock(name, flag, unix.LOCK_EX)
}

func (osFS) RLock(name string) (io.Closer, error) { return osLock(name, os.O_RDONLY, unix.LOCK_SH) }

// osLock opens name with flag and flocks it (how: LOCK_EX or LOCK_SH),
// without waiting. Closing the descriptor releases the lock.
func osLock(name string, flag, how int) (io.Closer, error) {
	f, err := os.OpenFile(name, flag|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), how|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			err = ErrLocked
		}
		return nil, &fs.PathError{Op: "flock", Path: name, Err: err}
	}
	return f, nil
}

// osFile is a File on the real filesystem. It also offers the *os.File, for
// sendfile and copy_file_range.
type osFile struct {
	f *os.File
}

var _ File = (*osFile)(nil)

// OSFile returns the underlying *os.File. Use it only for positional system
// calls (sendfile with an offset, copy_file_range): its seek offset is not
// meaningful.
func (f *osFile) OSFile() *os.File { return f.f }

func (f *osFile) Name() string                             { return f.f.Name() }
func (f *osFile) ReadAt(p []byte, off int64) (int, error)  { return f.f.ReadAt(p, off) }
func (f *osFile) WriteAt(p []byte, off int64) (int, error) { return f.f.WriteAt(p, off) }
func (f *osFile) Sync() error                              { return f.f.Sync() }
func (f *osFile) Truncate(size int64) error                { return f.f.Truncate(size) }
func (f *osFile) Close() error                             { return f.f.Close() }

func (f *osFile) WriteVAt(bufs [][]byte, off int64) (int, error) {
	total := 0
	bufs = consumed(bufs, 0) // empty buffers write nothing (and would read as a short write)
	for len(bufs) > 0 {
		n, err := unix.Pwritev(int(f.f.Fd()), bufs, off)
		if n > 0 {
			total += n
			off += int64(n)
			bufs = consumed(bufs, n)
		}
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return total, &fs.PathError{Op: "pwritev", Path: f.Name(), Err: err}
		}
		if n == 0 && len(bufs) > 0 {
			return total, &fs.PathError{Op: "pwritev", Path: f.Name(), Err: io.ErrShortWrite}
		}
	}
	return total, nil
}

// consumed drops the first n bytes from bufs, skipping empty buffers.
func consumed(bufs [][]byte, n int) [][]byte {
	for len(bufs) > 0 && n >= len(bufs[0]) {
		n -= len(bufs[0])
		bufs = bufs[1:]
	}
	if len(bufs) > 0 && n > 0 {
		bufs = append([][]byte{bufs[0][n:]}, bufs[1:]...)
	}
	for len(bufs) > 0 && len(bufs[0]) == 0 {
		bufs = bufs[1:]
	}
	return bufs
}

func (f *osFile) Datasync() error {
	for {
		err := unix.Fdatasync(int(f.f.Fd()))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return &fs.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
		}
		return nil
	}
}

func (f *osFile) Preallocate(off, length int64) error {
	for {
		err := unix.Fallocate(int(f.f.Fd()), 0, off, length)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EOPNOTSUPP || err == unix.ENOSYS:
			return &fs.PathError{Op: "fallocate", Path: f.Name(), Err: ErrNotSupported}
		case err != nil:
			return &fs.PathError{Op: "fallocate", Path: f.Name(), Err: err}
		}
		return nil
	}
}

func (f *osFile) Size() (int64, error) {
	st, err := f.f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

func (f *osFile) Map(length int, writable bool) (Mapping, error) {
	if length < 0 {
		return nil, &fs.PathError{Op: "mmap", Path: f.Name(), Err: fs.ErrInvalid}
	}
	if length == 0 {
		return &osMapping{}, nil // mmap refuses empty regions
	}
	if size, err := f.Size(); err != nil {
		return nil, err
	} else if int64(length) > size {
		return nil, &fs.PathError{Op: "mmap", Path: f.Name(),
			Err: fmt.Errorf("mapping %d bytes of a %d-byte file", length, size)}
	}
	prot := mmap.RDONLY
	if writable {
		prot = mmap.RDWR
	}
	m, err := mmap.MapRegion(f.f, length, prot, 0, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "mmap", Path: f.Name(), Err: err}
	}
	return &osMapping{m: m, name: f.Name()}, nil
}

type osMapping struct {
	m    mmap.MMap
	name string
}

func (m *osMapping) Bytes() []byte { return m.m }

func (m *osMapping) Flush() error {
	if len(m.m) == 0 {
		return nil
	}
	if err := m.m.Flush(); err != nil {
		return &fs.PathError{Op: "msync", Path: m.name, Err: err}
	}
	return nil
}

var advice = [...]int{
	AdviseNormal:     unix.MADV_NORMAL,
	AdviseRandom:     unix.MADV_RANDOM,
	AdviseSequential: unix.MADV_SEQUENTIAL,
	AdviseWillNeed:   unix.MADV_WILLNEED,
	AdviseDontNeed:   unix.MADV_DONTNEED,
}

func (m *osMapping) Advise(a Advice) error {
	if len(m.m) == 0 || a < 0 || int(a) >= len(advice) {
		return nil
	}
	if err := unix.Madvise(m.m, advice[a]); err != nil {
		return &fs.PathError{Op: "madvise", Path: m.name, Err: err}
	}
	return nil
}

func (m *osMapping) Unmap() error {
	if len(m.m) == 0 {
		return nil
	}
	err := m.m.Unmap()
	m.m = nil
	if err != nil {
		return &fs.PathError{Op: "munmap", Path: m.name, Err: err}
	}
	return nil
}

// LockHolders returns the ids of the processes holding a flock on name, as
// /proc/locks lists them (Linux), or nil when none or unknown: what lets a
// refusal name who has a data directory open.
func LockHolders(name string) []int {
	var st unix.Stat_t
	if unix.Stat(name, &st) != nil {
		return nil
	}
	want := fmt.Sprintf("%02x:%02x:%d", unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino)
	data, err := os.ReadFile("/proc/locks")
	if err != nil {
		return nil
	}
	var pids []int
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		// "1: FLOCK  ADVISORY  WRITE 4321 fd:01:123456 0 EOF"; waiters ("->") hold nothing.
		if len(f) < 6 || f[1] != "FLOCK" || f[5] != want {
			continue
		}
		if pid, err := strconv.Atoi(f[4]); err == nil && !slices.Contains(pids, pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}
