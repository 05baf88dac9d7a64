package tiering

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/leaderepoch"
	"github.com/seglog/seglog/record"
)

// logOf builds a log of n batches of recs records of valueSize bytes from
// base, and returns it with each batch's base offset.
func logOf(t testing.TB, base int64, n, recs, valueSize int) ([]byte, []int64) {
	var log []byte
	var bases []int64
	b := record.NewBuilder(record.None)
	off := base
	for i := range n {
		b.Reset()
		b.SetBaseOffset(off)
		for j := range recs {
			v := bytes.Repeat([]byte{byte(i + j)}, valueSize)
			require.NoError(t, b.Append(record.Record{Timestamp: 1_000 + int64(i), Key: []byte(fmt.Sprint(off + int64(j))), Value: v}))
		}
		var err error
		log, err = b.AppendTo(log)
		require.NoError(t, err)
		bases = append(bases, off)
		off += int64(recs)
	}
	return log, bases
}

func sourceOf(log []byte, base, end int64) SegmentSource {
	return SegmentSource{Log: bytes.NewReader(log), LogSize: int64(len(log)), Path: "00000000000000000100.log",
		BaseOffset: base, EndOffset: end,
		TxnIndex: record.AbortedTxn{ProducerID: 7, FirstOffset: base, LastOffset: base + 3, LastStableOffset: base}.AppendTo(nil),
		Snapshot: []byte("snapshot bytes"), Epochs: []leaderepoch.Entry{{Epoch: 3, StartOffset: base}},
		Topic: "orders", Partition: 2, CreatedMs: 1234, BlockSize: 4096}
}

func build(t testing.TB, src SegmentSource) (*Plan, []byte) {
	p, err := PlanObject(src)
	require.NoError(t, err)
	var buf bytes.Buffer
	n, err := p.WriteTo(&buf)
	require.NoError(t, err)
	require.Equal(t, p.Size, n)
	require.Equal(t, p.Size, int64(buf.Len()))
	return p, buf.Bytes()
}

// independentCheck decodes an object straight from docs/tiering.md
// section 1, sharing no code with the writer or reader, and returns the
// batches' bytes concatenated (which must be the segment's log).
func independentCheck(t testing.TB, obj []byte) (data []byte, base, end int64) {
	be := binary.BigEndian
	crc := func(b []byte) uint32 { return crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)) }
	require.GreaterOrEqual(t, len(obj), 64)
	f := obj[len(obj)-64:]
	require.Equal(t, uint64(0x7365676c6f677331), be.Uint64(f[56:]), "footer magic")
	require.Equal(t, uint16(1), be.Uint16(f[24:]), "version")
	require.Zero(t, be.Uint16(f[26:]), "reserved")
	require.Equal(t, make([]byte, 8), f[48:56], "reserved")
	indexPos, indexLen := be.Uint64(f[0:]), be.Uint32(f[8:])
	auxPos, auxLen := be.Uint64(f[12:]), be.Uint32(f[20:])
	base, end = int64(be.Uint64(f[28:])), int64(be.Uint64(f[36:]))
	require.Equal(t, indexPos+uint64(indexLen), auxPos)
	require.Equal(t, uint64(len(obj)-64), auxPos+uint64(auxLen))
	require.Equal(t, be.Uint32(f[44:]), crc(obj[indexPos:auxPos+uint64(auxLen)]), "index‖aux CRC")
	idx := obj[indexPos:auxPos]
	require.Zero(t, len(idx)%40)
	pos := uint64(0)
	for i := 0; i < len(idx); i += 40 {
		e := idx[i : i+40]
		require.Equal(t, pos, be.Uint64(e[16:]), "block position")
		size := be.Uint32(e[24:])
		blk := obj[pos : pos+uint64(size)]
		require.Equal(t, byte(0x5A), blk[0])
		require.Equal(t, []byte{0, 0, 0}, blk[1:4])
		count := be.Uint32(blk[4:])
		require.Equal(t, be.Uint32(e[12:]), count)
		dataLen := be.Uint32(blk[8:])
		require.Equal(t, size-16, dataLen)
		require.Equal(t, be.Uint32(blk[12:]), crc(blk[16:]))
		// Walk the Kafka batches by their length fields.
		d := blk[16:]
		var first, last int64
		var maxTs int64 = -1
		for j := uint32(0); j < count; j++ {
			l := be.Uint32(d[8:]) + 12
			if j == 0 {
				first = int64(be.Uint64(d[0:]))
			}
			last = int64(be.Uint64(d[0:])) + int64(be.Uint32(d[23:]))
			maxTs = max(maxTs, int64(be.Uint64(d[35:])))
			d = d[l:]
		}
		require.Empty(t, d, "the block holds exactly its batches")
		require.Equal(t, first, int64(be.Uint64(e[0:])))
		require.Equal(t, last-first, int64(be.Uint32(e[8:])))
		require.Equal(t, maxTs, int64(be.Uint64(e[28:])))
		require.Zero(t, be.Uint32(e[36:]))
		data = append(data, blk[16:]...)
		pos += uint64(size)
	}
	require.Equal(t, indexPos, pos)
	aux := obj[auxPos : auxPos+uint64(auxLen)]
	types := []uint16{}
	for len(aux) > 0 {
		typ, n, sum := be.Uint16(aux), be.Uint32(aux[2:]), be.Uint32(aux[6:])
		require.Equal(t, sum, crc(aux[10:10+n]))
		if typ == 4 {
			var m map[string]any
			require.NoError(t, json.Unmarshal(aux[10:10+n], &m))
			require.EqualValues(t, base, m["baseOffset"])
		}
		types = append(types, typ)
		aux = aux[10+n:]
	}
	require.Equal(t, []uint16{1, 2, 3, 4}, types)
	return data, base, end
}

func TestObjectRoundTrip(t *testing.T) {
	log, bases := logOf(t, 100, 50, 4, 300) // ~1.3 KiB batches, ~3 per block
	src := sourceOf(log, 100, 300)
	p, obj := build(t, src)
	require.Greater(t, len(p.Blocks()), 10)

	data, base, end := independentCheck(t, obj)
	require.Equal(t, log, data, "the blocks hold the log byte for byte")
	require.Equal(t, int64(100), base)
	require.Equal(t, int64(300), end)

	o, err := Verify("k", obj)
	require.NoError(t, err)
	require.Equal(t, p.Blocks(), o.Blocks)
	require.Equal(t, []record.AbortedTxn{{ProducerID: 7, FirstOffset: 100, LastOffset: 103, LastStableOffset: 100}}, o.Aborted)
	require.Equal(t, []byte("snapshot bytes"), o.Snapshot)
	require.Equal(t, src.Epochs, o.Epochs)
	require.Equal(t, ObjectMeta{Topic: "orders", Partition: 2, BaseOffset: 100, EndOffset: 300, MaxTimestamp: 1049,
		Size: int64(len(log)), CreatedMs: 1234}, o.Meta)

	// A short tail asks for the size it needs, then parses.
	_, need, err := ParseTail("k", obj[len(obj)-100:], int64(len(obj)))
	require.NoError(t, err)
	o2, need2, err := ParseTail("k", obj[int64(len(obj))-need:], int64(len(obj)))
	require.NoError(t, err)
	require.Zero(t, need2)
	require.Equal(t, o.Blocks, o2.Blocks)

	// Every offset finds the block holding its batch.
	for _, b := range bases {
		for off := b; off < b+4; off++ {
			k, ok := o.FindBlock(off)
			require.True(t, ok)
			e := o.Blocks[k]
			require.True(t, e.BaseOffset <= off && off <= e.LastOffset(), "offset %d in block %d", off, k)
		}
	}
	_, ok := o.FindBlock(300)
	require.False(t, ok)
	k, ok := o.FindBlock(0)
	require.True(t, ok)
	require.Zero(t, k)
	k, ok = o.FindTimestamp(1_020)
	require.True(t, ok)
	require.LessOrEqual(t, o.Blocks[k].BaseOffset, int64(100+20*4))
	require.GreaterOrEqual(t, o.Blocks[k].LastOffset(), int64(100+20*4))
	_, ok = o.FindTimestamp(5_000)
	require.False(t, ok)
}

func TestObjectLargeBatchFormsItsOwnBlock(t *testing.T) {
	log, _ := logOf(t, 0, 3, 1, 10_000) // each batch beyond the 4 KiB block size
	_, obj := build(t, sourceOf(log, 0, 3))
	o, err := Verify("k", obj)
	require.NoError(t, err)
	require.Len(t, o.Blocks, 3)
	for _, e := range o.Blocks {
		require.Equal(t, int32(1), e.BatchCount)
	}
}

func TestPlanRefusesBadSegments(t *testing.T) {
	log, _ := logOf(t, 100, 5, 2, 100)
	_, err := PlanObject(sourceOf(nil, 100, 100))
	require.ErrorIs(t, err, ErrEmptySegment)
	for name, src := range map[string]SegmentSource{
		"torn tail":         sourceOf(log[:len(log)-5], 100, 110),
		"offset past end":   sourceOf(log, 100, 105),
		"offset below base": sourceOf(log, 101, 110),
		"garbage":           sourceOf(bytes.Repeat([]byte{0xff}, 200), 100, 110),
	} {
		_, err := PlanObject(src)
		require.ErrorIs(t, err, seglog.ErrCorruption, name)
	}
	// A batch that rots between the plan and the write is not uploaded.
	rot := bytes.Clone(log)
	src := sourceOf(rot, 100, 110)
	p, err := PlanObject(src)
	require.NoError(t, err)
	rot[len(rot)-3] ^= 1
	_, err = p.WriteTo(&bytes.Buffer{})
	var ce *seglog.CorruptionError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, src.Path, ce.Path)
}

func TestObjectCorruptionIsLocated(t *testing.T) {
	log, _ := logOf(t, 100, 20, 2, 500)
	_, obj := build(t, sourceOf(log, 100, 140))
	o, err := Verify("k", obj)
	require.NoError(t, err)
	// Flip one bit in every byte position in turn (strided): every flip is
	// found, by the tail parse or a block check.
	for pos := 0; pos < len(obj); pos += 7 {
		bad := bytes.Clone(obj)
		bad[pos] ^= 0x10
		_, err := Verify("k", bad)
		var ce *seglog.CorruptionError
		require.ErrorAs(t, err, &ce, "flip at %d", pos)
		require.Equal(t, "k", ce.Path)
	}
	// A block fetched short is refused.
	_, err = o.ParseBlock(0, obj[:o.Blocks[0].Size-1])
	require.ErrorIs(t, err, seglog.ErrCorruption)
	// A truncated object has no footer.
	_, _, err = ParseTail("k", obj[:len(obj)-1], int64(len(obj)-1))
	require.ErrorIs(t, err, seglog.ErrCorruption)
}

func FuzzStreamObject(f *testing.F) {
	log, _ := logOf(f, 100, 6, 2, 200)
	_, obj := build(f, sourceOf(log, 100, 112))
	f.Add(obj)
	f.Add(obj[len(obj)-64:])
	if seeds, _ := filepath.Glob("testdata/*.seg"); len(seeds) > 0 {
		for _, s := range seeds {
			b, err := os.ReadFile(s)
			if err == nil {
				f.Add(b)
			}
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		o, err := Verify("fuzz", b)
		if err != nil {
			return
		}
		// What the reader accepts, the independent decoder accepts too, and
		// the blocks it finds are within the object.
		for _, e := range o.Blocks {
			if e.Position+int64(e.Size) > int64(len(b)) {
				t.Fatalf("block past the end")
			}
		}
		tail := b[int64(len(b))-TailSize(int64(len(b))):]
		if _, _, err := ParseTail("fuzz", tail, int64(len(b))); err != nil {
			t.Fatalf("a valid object's tail does not parse: %v", err)
		}
	})
}
