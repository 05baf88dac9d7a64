package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// Stop says why a Scanner stopped.
type Stop int8

const (
	// Running: the scan has not stopped.
	Running Stop = iota
	// AtEnd: the region ended exactly after the last batch.
	AtEnd
	// TornTail: the region ends inside a batch, or 17 bytes or fewer
	// remain. Kafka treats such a tail as invisible; recovery cuts it.
	TornTail
	// Corrupt: a size field below 14, or a v2 batch too short to hold its
	// header. Err returns the *Error.
	Corrupt
	// Unsupported: a legacy (v0 or v1) message whose CRC matches: a format
	// seglog does not read. Err returns an *Error of kind
	// ErrUnsupportedMagic. The data is not damaged and must not be cut. (A
	// legacy message whose CRC does not match, or any other magic, is
	// Corrupt.)
	Unsupported
	// ReadFailed: reading the region failed. Err returns the error.
	ReadFailed
)

func (s Stop) String() string {
	switch s {
	case Running:
		return "running"
	case AtEnd:
		return "end"
	case TornTail:
		return "torn tail"
	case Corrupt:
		return "corrupt"
	case Unsupported:
		return "unsupported format"
	case ReadFailed:
		return "read failed"
	}
	return fmt.Sprintf("stop(%d)", int8(s))
}

const (
	scanWindowMin = 8 << 10
	scanWindowMax = 1 << 20
)

// Scanner walks the batches of a file region [start, end) with Kafka's
// iteration rules (docs/format.md §3.3): when 17 bytes or fewer remain the scan ends,
// a size field below 14 is corruption, and a batch running past the end is
// a torn tail. Each outcome is told apart by Stop. Positions are file
// positions. The Scanner reads ahead in a window that doubles, up to 1 MiB,
// while the scan goes on; its memory stays within the window and the
// largest batch loaded, which is never more than the region.
//
//	s := record.NewScanner(f, 0, size)
//	for s.Next() {
//		h := s.Header() // or s.Batch() for the whole batch
//	}
//	switch s.Stop() { ... }
type Scanner struct {
	r        io.ReaderAt
	end      int64
	pos      int64 // current entry's position
	size     int64 // current entry's size, 0 before the first Next
	stop     Stop
	err      error  // Corrupt, Unsupported, ReadFailed
	tail     *Error // TornTail description, built when asked for (Tail)
	torn     tornCause
	buf      []byte
	bufPos   int64 // file position of buf[0]
	window   int
	resident bool // buf holds valid data
}

// NewScanner returns a scanner of r over [start, end).
func NewScanner(r io.ReaderAt, start, end int64) *Scanner {
	s := &Scanner{}
	s.Reset(r, start, end)
	return s
}

// Reset restarts the scanner on a new region, keeping its buffer.
func (s *Scanner) Reset(r io.ReaderAt, start, end int64) {
	*s = Scanner{r: r, pos: start, end: end, buf: s.buf[:0], window: scanWindowMin}
}

// Next moves to the next batch and reads its header. It returns false when
// the scan stops; Stop tells why.
func (s *Scanner) Next() bool {
	if s.stop != Running {
		return false
	}
	s.pos += s.size
	s.size = 0
	remaining := s.end - s.pos
	if remaining <= 0 {
		s.stop = AtEnd
		return false
	}
	if remaining <= PrefixSize {
		s.stopTorn(tornFewBytes, remaining, 0, nil)
		return false
	}
	prefix, err := s.fill(s.pos, PrefixSize)
	if err != nil {
		return s.fail(err)
	}
	size, err := entrySize(prefix, s.pos)
	if err != nil {
		s.stop, s.err = Corrupt, err
		return false
	}
	if size > s.end-s.pos { // fill may have found the file shorter than the region
		s.stopTorn(tornPastEnd, size, s.end, nil)
		return false
	}
	switch magic := int8(prefix[magicOff]); magic {
	case Magic:
	case 0, 1:
		// A legacy message: genuine if its CRC-32 (over the magic and
		// what follows) matches, damage otherwise.
		entry, err := s.fill(s.pos, int(size))
		if err != nil {
			return s.fail(err)
		}
		if binary.BigEndian.Uint32(entry[leaderEpochOff:]) == crc32.ChecksumIEEE(entry[magicOff:]) {
			s.stop, s.err = Unsupported, errAt(ErrUnsupportedMagic, s.pos+magicOff, "magic %d", magic)
		} else {
			s.stop, s.err = Corrupt, errAt(ErrCorruptBatch, s.pos+magicOff, "magic %d with a CRC that does not match", magic)
		}
		return false
	default:
		s.stop, s.err = Corrupt, errAt(ErrCorruptBatch, s.pos+magicOff, "unknown magic %d", magic)
		return false
	}
	if size < HeaderSize {
		s.stop, s.err = Corrupt, errAt(ErrCorruptBatch, s.pos+lengthOff, "batch size %d is below the header size %d", size, HeaderSize)
		return false
	}
	if _, err := s.fill(s.pos, HeaderSize); err != nil {
		return s.fail(err)
	}
	s.size = size
	return true
}

// tornCause is why a scan stopped at a torn tail, kept as values: a torn
// tail is the normal end of a region cut inside a batch (a read's
// limit), and formatting its description on every read would allocate.
type tornCause struct {
	kind int8
	a, b int64
	err  error
}

const (
	tornFewBytes int8 = iota
	tornPastEnd
	tornShortFile
)

func (s *Scanner) stopTorn(kind int8, a, b int64, err error) {
	s.stop, s.torn, s.tail = TornTail, tornCause{kind: kind, a: a, b: b, err: err}, nil
}

func (s *Scanner) fail(err error) bool {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		// The file is shorter than the region: the tail is torn.
		s.stopTorn(tornShortFile, 0, 0, err)
		return false
	}
	s.stop, s.err = ReadFailed, fmt.Errorf("record: reading at %d: %w", s.pos, err)
	return false
}

// fill makes [pos, pos+n) resident and returns it.
func (s *Scanner) fill(pos int64, n int) ([]byte, error) {
	if s.resident && pos >= s.bufPos && pos+int64(n) <= s.bufPos+int64(len(s.buf)) {
		off := int(pos - s.bufPos)
		return s.buf[off : off+n], nil
	}
	want := int(min(int64(max(n, s.window)), s.end-pos))
	if cap(s.buf) < want {
		s.buf = make([]byte, want)
	}
	s.buf = s.buf[:want]
	s.resident = false
	got, err := s.r.ReadAt(s.buf, pos)
	if got < want && (err == nil || err == io.EOF) {
		s.end = pos + int64(got) // the file ends before the region does
	}
	if got < n {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	s.buf, s.bufPos, s.resident = s.buf[:got], pos, true
	s.window = min(s.window*2, scanWindowMax)
	return s.buf[:n], nil
}

// Pos returns the position of the current batch; once stopped, the
// position where the valid batches end.
func (s *Scanner) Pos() int64 { return s.pos }

// Size returns the size of the current batch.
func (s *Scanner) Size() int64 { return s.size }

// Header returns the current batch's header fields.
func (s *Scanner) Header() BatchHeader {
	h, _ := s.fill(s.pos, HeaderSize)
	return Batch{b: h}.Header()
}

// Batch reads the whole current batch and returns a view of it, valid
// until the next call to Next or Batch. The CRC is not checked: call
// Verify. A read failure stops the scan.
func (s *Scanner) Batch() (Batch, error) {
	b, err := s.fill(s.pos, int(s.size))
	if err != nil {
		s.fail(err)
		if s.err != nil {
			return Batch{}, s.err
		}
		return Batch{}, s.Tail()
	}
	return Batch{b: b[:len(b):len(b)]}, nil
}

// Resident returns the current batch's bytes if the read-ahead window
// already holds all of them (valid until the next call to Next or Batch),
// or nil; it never reads.
func (s *Scanner) Resident() []byte {
	if !s.resident || s.size == 0 || s.pos < s.bufPos || s.pos+s.size > s.bufPos+int64(len(s.buf)) {
		return nil
	}
	off := int(s.pos - s.bufPos)
	return s.buf[off : off+int(s.size)]
}

// Stop returns why the scan stopped, or Running.
func (s *Scanner) Stop() Stop { return s.stop }

// Err returns the error that stopped the scan: nil at the end and at a
// torn tail, the *Error for Corrupt and Unsupported, the read error for
// ReadFailed.
func (s *Scanner) Err() error { return s.err }

// Tail describes a torn tail (its position and what was found), or is nil.
func (s *Scanner) Tail() *Error {
	if s.stop != TornTail {
		return nil
	}
	if s.tail == nil {
		switch c := s.torn; c.kind {
		case tornFewBytes:
			s.tail = errAt(ErrCorruptBatch, s.pos, "%d bytes after the last batch, too few for a batch", c.a)
		case tornPastEnd:
			s.tail = errAt(ErrCorruptBatch, s.pos, "batch of %d bytes runs past the end at %d", c.a, c.b)
		default:
			s.tail = errAt(ErrCorruptBatch, s.pos, "the file ends inside the batch (%v)", c.err)
		}
	}
	return s.tail
}
