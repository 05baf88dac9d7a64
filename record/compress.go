package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Compression is the codec of a batch's records (attribute bits 0–2).
type Compression int8

// Codecs: part of the on-disk format; never change.
const (
	None   Compression = 0
	Gzip   Compression = 1
	Snappy Compression = 2
	LZ4    Compression = 3
	Zstd   Compression = 4
)

var compressionNames = [...]string{"none", "gzip", "snappy", "lz4", "zstd"}

// String returns Kafka's name for the codec (none, gzip, snappy, lz4, zstd).
func (c Compression) String() string {
	if c >= 0 && int(c) < len(compressionNames) {
		return compressionNames[c]
	}
	return fmt.Sprintf("unknown(%d)", int8(c))
}

// ParseCompression maps a codec name (as String prints it) to its codec.
func ParseCompression(name string) (Compression, error) {
	for i, n := range compressionNames {
		if n == name {
			return Compression(i), nil
		}
	}
	return 0, fmt.Errorf("%w: %q", ErrUnknownCompression, name)
}

// Valid reports whether c is one of the five codecs Kafka defines.
func (c Compression) Valid() bool { return c >= None && c <= Zstd }

// DefaultMaxUncompressed is the default limit on the decompressed size of
// one batch's records: 64 MiB, sixty-four times Kafka's default maximum
// message size.
const DefaultMaxUncompressed = 64 << 20

// xerial is the framing Kafka's Java client writes around snappy: a magic
// header, a version and a minimum compatible version (both 1), then blocks,
// each a big-endian int32 length and a raw snappy block. Part of the
// on-disk format; never change.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const (
	xerialHeaderSize = 16
	xerialBlockSize  = 32 << 10 // the Java writer's block size
	lz4BlockSize     = lz4.Block64Kb
	zstdMaxWindowLog = 27 // the largest window any standard zstd level uses
)

// Decompress appends to dst src decompressed with c (framed as Kafka's
// clients frame it: gzip, xerial or raw snappy, lz4 frames, zstd), failing
// with ErrDecompressLimit past limit bytes; None copies src. It is for
// payloads other than a batch's records (KIP-714's pushed metrics).
func Decompress(dst []byte, c Compression, src []byte, limit int) ([]byte, error) {
	if c == None {
		if len(src) > limit {
			return dst, fmt.Errorf("%w (%d bytes)", ErrDecompressLimit, limit)
		}
		return append(dst, src...), nil
	}
	return decompress(dst, c, src, limit)
}

// decompress appends the decompressed form of src to dst, failing with
// ErrDecompressLimit if more than limit bytes would be produced. Memory use
// stays within about twice the bytes actually produced.
func decompress(dst []byte, c Compression, src []byte, limit int) ([]byte, error) {
	switch c {
	case Gzip:
		r := gzipReaders.Get().(*gzip.Reader)
		defer gzipReaders.Put(r)
		if err := r.Reset(bytes.NewReader(src)); err != nil {
			return dst, err
		}
		return readAllLimit(dst, r, limit)
	case Snappy:
		return decompressSnappy(dst, src, limit)
	case LZ4:
		r := lz4Readers.Get().(*lz4.Reader)
		defer lz4Readers.Put(r)
		r.Reset(bytes.NewReader(src))
		return readAllLimit(dst, r, limit)
	case Zstd:
		pool := zstdPool(limit)
		d, _ := pool.Get().(*zstd.Decoder)
		if d == nil {
			return dst, errors.New("zstd decoder unavailable")
		}
		defer pool.Put(d)
		err := d.Reset(bytes.NewReader(src))
		if err == nil {
			dst, err = readAllLimit(dst, d, limit)
		}
		if errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded) {
			err = fmt.Errorf("%w (%d bytes): %w", ErrDecompressLimit, limit, err)
		}
		return dst, err
	}
	return dst, fmt.Errorf("%w: id %d", ErrUnknownCompression, c)
}

// readAllLimit reads r to its end, appending to dst, and fails once more
// than limit bytes have been appended. The buffer grows only as data
// arrives, never on a length the input claims.
func readAllLimit(dst []byte, r io.Reader, limit int) ([]byte, error) {
	start, idle := len(dst), 0
	for {
		if len(dst) == cap(dst) {
			grow := max(len(dst)-start, 4<<10)
			grow = min(grow, limit+1-(len(dst)-start))
			dst = append(dst[:cap(dst)], make([]byte, grow)...)[:len(dst)]
		}
		n, err := r.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if len(dst)-start > limit {
			return dst, fmt.Errorf("%w (%d bytes)", ErrDecompressLimit, limit)
		}
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
		if idle = idle + 1; n > 0 {
			idle = 0
		} else if idle == 100 {
			return dst, io.ErrNoProgress
		}
	}
}

func decompressSnappy(dst, src []byte, limit int) ([]byte, error) {
	if !bytes.HasPrefix(src, xerialMagic) {
		return appendSnappyBlock(dst, src, limit)
	}
	if len(src) < xerialHeaderSize {
		return dst, errors.New("snappy: truncated xerial header")
	}
	start := len(dst)
	for rest := src[xerialHeaderSize:]; len(rest) > 0; {
		if len(rest) < 4 {
			return dst, errors.New("snappy: truncated xerial block length")
		}
		n := binary.BigEndian.Uint32(rest)
		rest = rest[4:]
		if uint64(n) > uint64(len(rest)) {
			return dst, fmt.Errorf("snappy: xerial block of %d bytes, only %d left", n, len(rest))
		}
		var err error
		if dst, err = appendSnappyBlock(dst, rest[:n], limit-(len(dst)-start)); err != nil {
			return dst, err
		}
		rest = rest[n:]
	}
	return dst, nil
}

// appendSnappyBlock decodes one raw snappy block, checking the length its
// header claims against limit before allocating.
func appendSnappyBlock(dst, block []byte, limit int) ([]byte, error) {
	n, err := snappy.DecodedLen(block)
	if err != nil {
		return dst, err
	}
	if n > limit {
		return dst, fmt.Errorf("%w (%d bytes)", ErrDecompressLimit, limit)
	}
	if cap(dst)-len(dst) < n {
		dst = append(dst[:cap(dst)], make([]byte, n-(cap(dst)-len(dst)))...)[:len(dst)]
	}
	out, err := snappy.Decode(dst[len(dst):len(dst)+n], block)
	if err != nil {
		return dst, err
	}
	return dst[:len(dst)+len(out)], nil
}

// compress appends the compressed form of src to dst.
func compress(dst []byte, c Compression, src []byte) ([]byte, error) {
	switch c {
	case Gzip:
		return compressStream(&gzipWriters, dst, src)
	case Snappy:
		return appendXerial(dst, src), nil
	case LZ4:
		return compressStream(&lz4Writers, dst, src)
	case Zstd:
		return zstdEncoder.EncodeAll(src, dst), nil
	}
	return dst, fmt.Errorf("%w: id %d", ErrUnknownCompression, c)
}

// streamWriter is a pooled compressing writer (gzip, lz4).
type streamWriter interface {
	io.WriteCloser
	Reset(io.Writer)
}

func compressStream(pool *sync.Pool, dst, src []byte) ([]byte, error) {
	w := pool.Get().(streamWriter)
	defer pool.Put(w)
	buf := bytes.NewBuffer(dst)
	w.Reset(buf)
	if _, err := w.Write(src); err != nil {
		return dst, err
	}
	if err := w.Close(); err != nil {
		return dst, err
	}
	return buf.Bytes(), nil
}

func appendXerial(dst, src []byte) []byte {
	dst = append(dst, xerialMagic...)
	dst = binary.BigEndian.AppendUint32(dst, 1) // version
	dst = binary.BigEndian.AppendUint32(dst, 1) // minimum compatible version
	for len(src) > 0 {
		n := min(len(src), xerialBlockSize)
		at := len(dst)
		dst = append(dst, make([]byte, 4+snappy.MaxEncodedLen(n))...)
		block := snappy.Encode(dst[at+4:], src[:n])
		binary.BigEndian.PutUint32(dst[at:], uint32(len(block)))
		dst = dst[:at+4+len(block)]
		src = src[n:]
	}
	return dst
}

var (
	gzipReaders = sync.Pool{New: func() any { return new(gzip.Reader) }}
	gzipWriters = sync.Pool{New: func() any { return gzip.NewWriter(nil) }}
	lz4Readers  = sync.Pool{New: func() any { return lz4.NewReader(nil) }}
	lz4Writers  = sync.Pool{New: func() any {
		w := lz4.NewWriter(nil)
		// The framing Kafka's Java client writes: 64 KiB blocks, no
		// checksums besides the header's.
		_ = w.Apply(lz4.BlockSizeOption(lz4BlockSize), lz4.ChecksumOption(false),
			lz4.BlockChecksumOption(false), lz4.ConcurrencyOption(1))
		return w
	}}
	zstdEncoder, _ = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1),
		zstd.WithEncoderLevel(zstd.SpeedDefault))
	// zstdPools holds one decoder pool per window limit, indexed by the
	// window's log2, so a small decompression limit also bounds the window
	// a hostile frame header can make the decoder allocate.
	zstdPools [zstdMaxWindowLog + 1]sync.Pool
)

func init() {
	for wlog := range zstdPools {
		window := uint64(1) << wlog
		zstdPools[wlog].New = func() any {
			d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1),
				zstd.WithDecoderMaxWindow(window), zstd.WithDecoderMaxMemory(window))
			if err != nil {
				return nil
			}
			return d
		}
	}
}

// zstdPool returns the pool of decoders whose window limit is the smallest
// power of two at or above limit (between 1 KiB and 128 MiB).
func zstdPool(limit int) *sync.Pool {
	wlog := bits.Len(uint(max(limit, 1) - 1))
	return &zstdPools[min(max(wlog, 10), zstdMaxWindowLog)]
}
