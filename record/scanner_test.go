package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/stretchr/testify/require"
)

// logOf builds n batches at consecutive offsets, concatenated like a .log
// file, and returns the bytes and each batch's position.
func logOf(t testing.TB, n int, c Compression, valueSize int) ([]byte, []int64) {
	t.Helper()
	var data []byte
	var pos []int64
	b := NewBuilder(c)
	for i := range n {
		b.Reset()
		b.SetBaseOffset(int64(i * 3))
		for j := range 3 {
			require.NoError(t, b.Append(Record{Timestamp: int64(100*i + j), Key: []byte(fmt.Sprint(i)),
				Value: bytes.Repeat([]byte{byte(j)}, valueSize)}))
		}
		pos = append(pos, int64(len(data)))
		var err error
		data, err = b.AppendTo(data)
		require.NoError(t, err)
	}
	return data, pos
}

type scanResult struct {
	positions []int64
	stop      Stop
	end       int64
	err       error
	tail      *Error
}

func scanAll(t testing.TB, data []byte, start, end int64) scanResult {
	t.Helper()
	s := NewScanner(bytes.NewReader(data), start, end)
	var r scanResult
	for s.Next() {
		h := s.Header()
		require.Equal(t, s.Size(), int64(binary.BigEndian.Uint32(data[s.Pos()+8:]))+LogOverhead)
		b, err := s.Batch()
		require.NoError(t, err)
		require.NoError(t, b.Verify())
		require.Equal(t, h, b.Header())
		r.positions = append(r.positions, s.Pos())
	}
	r.stop, r.end, r.err, r.tail = s.Stop(), s.Pos(), s.Err(), s.Tail()
	return r
}

func TestScannerWholeFile(t *testing.T) {
	data, pos := logOf(t, 20, None, 50)
	r := scanAll(t, data, 0, int64(len(data)))
	require.Equal(t, pos, r.positions)
	require.Equal(t, AtEnd, r.stop)
	require.Equal(t, int64(len(data)), r.end)
	require.NoError(t, r.err)
	require.Nil(t, r.tail)

	// A region that starts at a later batch and ends at a batch boundary.
	r = scanAll(t, data, pos[5], pos[9])
	require.Equal(t, pos[5:9], r.positions)
	require.Equal(t, AtEnd, r.stop)
}

// Scenario 74 (FileRecordsTest.testIterationOverPartialAndTruncation):
// up to 6 trailing zero bytes — indeed up to 17 — are invisible.
func TestScannerTrailingBytesAreInvisible(t *testing.T) {
	data, pos := logOf(t, 3, None, 10)
	for extra := 1; extra <= PrefixSize; extra++ {
		padded := append(bytes.Clone(data), make([]byte, extra)...)
		r := scanAll(t, padded, 0, int64(len(padded)))
		require.Equal(t, pos, r.positions, "extra=%d", extra)
		require.Equal(t, TornTail, r.stop)
		require.NoError(t, r.err)
		require.Equal(t, int64(len(data)), r.end)
		require.NotNil(t, r.tail)
		require.Equal(t, int64(len(data)), r.tail.Pos)
	}
}

func TestScannerZeroTailIsCorrupt(t *testing.T) {
	data, pos := logOf(t, 3, None, 10)
	padded := append(bytes.Clone(data), make([]byte, 4096)...)
	r := scanAll(t, padded, 0, int64(len(padded)))
	require.Equal(t, pos, r.positions)
	require.Equal(t, Corrupt, r.stop)
	require.ErrorIs(t, r.err, ErrCorruptBatch)
	var e *Error
	require.ErrorAs(t, r.err, &e)
	require.Equal(t, int64(len(data))+lengthOff, e.Pos)
	require.Equal(t, int64(len(data)), r.end)
}

func TestScannerTornAtEveryByte(t *testing.T) {
	data, pos := logOf(t, 4, Gzip, 30)
	last := pos[len(pos)-1]
	for cut := last + 1; cut < int64(len(data)); cut++ {
		r := scanAll(t, data[:cut], 0, cut)
		require.Equal(t, pos[:len(pos)-1], r.positions, "cut=%d", cut)
		require.Equal(t, TornTail, r.stop, "cut=%d", cut)
		require.NoError(t, r.err)
		require.Equal(t, last, r.end)
	}
}

func TestScannerFileShorterThanRegion(t *testing.T) {
	data, pos := logOf(t, 3, None, 10)
	short := data[:len(data)-5]
	r := scanAll(t, short, 0, int64(len(data)))
	require.Equal(t, pos[:2], r.positions)
	require.Equal(t, TornTail, r.stop)
	require.Equal(t, pos[2], r.end)
	require.Contains(t, r.tail.Reason, "runs past the end")

	// A batch larger than the read-ahead window, cut by the file's end,
	// is found torn when it is loaded.
	big, _ := logOf(t, 1, None, 1<<20)
	s := NewScanner(bytes.NewReader(big[:len(big)-1]), 0, int64(len(big)))
	require.True(t, s.Next())
	_, err := s.Batch()
	require.ErrorIs(t, err, ErrCorruptBatch)
	require.Equal(t, TornTail, s.Stop())
	require.False(t, s.Next())
}

func TestScannerStops(t *testing.T) {
	data, pos := logOf(t, 3, None, 10)
	// A legacy (v1) message with a valid CRC-32 is a format seglog does
	// not read; with a bad one, or with an unknown magic, it is damage.
	legacy := bytes.Clone(data)
	legacy[pos[1]+magicOff] = 1
	r := scanAll(t, legacy, 0, int64(len(legacy)))
	require.Equal(t, pos[:1], r.positions)
	require.Equal(t, Corrupt, r.stop)
	require.ErrorContains(t, r.err, "magic 1 with a CRC that does not match")
	end := pos[1] + int64(binary.BigEndian.Uint32(legacy[pos[1]+lengthOff:])) + LogOverhead
	binary.BigEndian.PutUint32(legacy[pos[1]+leaderEpochOff:], crc32.ChecksumIEEE(legacy[pos[1]+magicOff:end]))
	r = scanAll(t, legacy, 0, int64(len(legacy)))
	require.Equal(t, Unsupported, r.stop)
	require.ErrorIs(t, r.err, ErrUnsupportedMagic)
	require.Equal(t, pos[1], r.end)
	unknown := bytes.Clone(data)
	unknown[pos[1]+magicOff] = 7
	r = scanAll(t, unknown, 0, int64(len(unknown)))
	require.Equal(t, Corrupt, r.stop)
	require.ErrorContains(t, r.err, "unknown magic 7")

	short := bytes.Clone(data)
	binary.BigEndian.PutUint32(short[pos[2]+lengthOff:], 40) // ≥ 14 but no room for a v2 header
	r = scanAll(t, short, 0, int64(len(short)))
	require.Equal(t, pos[:2], r.positions)
	require.Equal(t, Corrupt, r.stop)
	require.ErrorIs(t, r.err, ErrCorruptBatch)
}

type failingReader struct {
	data   []byte
	failAt int64
}

var errDisk = errors.New("disk on fire")

func (f failingReader) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > f.failAt {
		return 0, errDisk
	}
	return copy(p, f.data[off:]), nil
}

func TestScannerReadFailure(t *testing.T) {
	data, pos := logOf(t, 3, None, 10)
	s := NewScanner(failingReader{data, pos[1] + 5}, 0, int64(len(data)))
	n := 0
	for s.Next() {
		n++
	}
	require.Equal(t, ReadFailed, s.Stop())
	require.ErrorIs(t, s.Err(), errDisk)
	require.LessOrEqual(t, n, 1)
	require.Equal(t, "read failed", s.Stop().String())
}

func TestScannerLargeBatches(t *testing.T) {
	data, pos := logOf(t, 3, None, 1<<20) // 3 MiB batches, beyond the window
	r := scanAll(t, data, 0, int64(len(data)))
	require.Equal(t, pos, r.positions)
	require.Equal(t, AtEnd, r.stop)
}

func TestScannerReset(t *testing.T) {
	data, pos := logOf(t, 5, None, 10)
	var s Scanner
	for i := range pos {
		s.Reset(bytes.NewReader(data), pos[i], int64(len(data)))
		require.True(t, s.Next())
		require.Equal(t, int64(i*3), s.Header().BaseOffset)
	}
	s.Reset(bytes.NewReader(data), int64(len(data)), int64(len(data)))
	require.False(t, s.Next())
	require.Equal(t, AtEnd, s.Stop())
	require.False(t, s.Next(), "a stopped scanner stays stopped")
}
