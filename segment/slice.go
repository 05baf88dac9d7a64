package segment

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/seglog/seglog/vfs"
)

// Slice is a region of a .log file: whole batches, read in place. It is an
// io.ReaderAt over the region and an io.WriterTo that sends it with
// sendfile or copy_file_range where the destination allows, and through a
// pooled buffer otherwise.
//
// A slice may hold its bytes in memory instead: batches read from
// elsewhere (the object store, see BytesSlice; Position is -1), or a batch
// the offset lookup already read whole (Position is still its place in the
// .log).
type Slice struct {
	f         vfs.File
	mem       []byte
	pos, size int64
}

// BytesSlice is a slice over batches held in memory (fetched from a tier).
// Its Position is -1.
func BytesSlice(b []byte) Slice { return Slice{mem: b, pos: -1, size: int64(len(b))} }

var (
	_ io.ReaderAt = Slice{}
	_ io.WriterTo = Slice{}
)

// InMemory reports whether the slice's bytes are held in memory.
func (s Slice) InMemory() bool { return s.mem != nil }

// Position returns where the slice starts in the .log.
func (s Slice) Position() int64 { return s.pos }

// Size returns the slice's length in bytes.
func (s Slice) Size() int64 { return s.size }

// ReadAt reads from the slice at off (relative to its start).
func (s Slice) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("segment: negative slice offset")
	}
	if off >= s.size {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), s.size-off))
	if s.mem != nil {
		got := copy(p[:n], s.mem[off:])
		if got < len(p) {
			return got, io.EOF
		}
		return got, nil
	}
	got, err := s.f.ReadAt(p[:n], s.pos+off)
	if err == nil && got < len(p) {
		err = io.EOF
	}
	return got, err
}

// AppendTo appends the slice's bytes to dst.
func (s Slice) AppendTo(dst []byte) ([]byte, error) {
	start := len(dst)
	// Grown, not zeroed: ReadAt fills every byte it returns.
	dst = slices.Grow(dst, int(s.size))[:start+int(s.size)]
	n, err := s.ReadAt(dst[start:], 0)
	if err == io.EOF && int64(n) == s.size {
		err = nil
	}
	return dst[:start+n], err
}

// osFiler is implemented by the files of vfs.OS.
type osFiler interface{ OSFile() *os.File }

// WriteTo writes the slice to w: with copy_file_range or sendfile when both
// ends are real descriptors (an *os.File or a socket), with a pooled buffer
// otherwise.
func (s Slice) WriteTo(w io.Writer) (int64, error) {
	if s.size == 0 {
		return 0, nil
	}
	if s.mem != nil {
		n, err := w.Write(s.mem)
		return int64(n), err
	}
	if of, ok := s.f.(osFiler); ok {
		if n, handled, err := zeroCopy(of.OSFile(), s.pos, s.size, w); handled {
			return n, err
		}
	}
	return s.copyTo(w)
}

var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 128<<10); return &b }}

func (s Slice) copyTo(w io.Writer) (int64, error) {
	bp := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(bp)
	buf := *bp
	var written int64
	for written < s.size {
		n, err := s.ReadAt(buf[:min(int64(len(buf)), s.size-written)], written)
		if n > 0 {
			m, werr := w.Write(buf[:n])
			written += int64(m)
			if werr != nil {
				return written, werr
			}
		}
		if err != nil && !(err == io.EOF && written == s.size) {
			return written, err
		}
	}
	return written, nil
}

// zeroCopy sends [off, off+n) of src to w without copying through user
// space. handled is false when w offers no descriptor or the kernel refused
// before any byte moved; the caller then copies.
func zeroCopy(src *os.File, off, n int64, w io.Writer) (written int64, handled bool, err error) {
	dstConn, ok := w.(syscall.Conn)
	if !ok {
		return 0, false, nil
	}
	_, isFile := w.(*os.File)
	dst, err := dstConn.SyscallConn()
	if err != nil {
		return 0, false, nil
	}
	srcConn, err := src.SyscallConn()
	if err != nil {
		return 0, false, nil
	}
	var opErr error
	useCopyRange := isFile
	cerr := srcConn.Control(func(sfd uintptr) {
		werr := dst.Write(func(dfd uintptr) bool {
			for n > 0 {
				chunk := int(min(n, 1<<30))
				var k int
				var e error
				if useCopyRange {
					k, e = unix.CopyFileRange(int(sfd), &off, int(dfd), nil, chunk, 0)
					if k == 0 && unsupported(e) {
						useCopyRange = false
						continue
					}
				} else {
					k, e = unix.Sendfile(int(dfd), int(sfd), &off, chunk)
				}
				written += int64(max(k, 0))
				n -= int64(max(k, 0))
				switch {
				case e == unix.EAGAIN:
					return false // a socket's buffer is full: wait until it drains
				case e == unix.EINTR:
				case e != nil:
					opErr = e
					return true
				case k == 0:
					opErr = io.ErrUnexpectedEOF // the file is shorter than the slice
					return true
				}
			}
			return true
		})
		if opErr == nil {
			opErr = werr
		}
	})
	if opErr == nil {
		opErr = cerr
	}
	if written == 0 && unsupported(opErr) {
		return 0, false, nil
	}
	if opErr != nil {
		return written, true, fmt.Errorf("segment: sending %s: %w", src.Name(), opErr)
	}
	return written, true, nil
}

// unsupported reports errors meaning "this pair of descriptors cannot do
// that", after which a plain copy is the answer.
func unsupported(err error) bool {
	return errors.Is(err, unix.EXDEV) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) ||
		errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EBADF)
}

func errInvalidMaxSize(n int) error {
	return fmt.Errorf("segment: invalid maximum read size %d", n)
}

// LogSlice returns the whole log (its logical size: whole batches) as a
// slice, for copying a sealed segment elsewhere (tiering). The segment
// must stay open while it is used.
func (s *Segment) LogSlice() (Slice, error) {
	size, err := s.end()
	if err != nil {
		return Slice{}, err
	}
	f, err := s.file()
	if err != nil {
		return Slice{}, err
	}
	return Slice{f: f, size: size}, nil
}
