package tiering

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"slices"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/leaderepoch"
	"github.com/seglog/seglog/record"
)

// ObjectMeta is the metadata aux section of a stream object.
type ObjectMeta struct {
	Topic        string `json:"topic"`
	Partition    int32  `json:"partition"`
	BaseOffset   int64  `json:"baseOffset"`
	EndOffset    int64  `json:"endOffset"`
	MaxTimestamp int64  `json:"maxTimestamp"`
	Size         int64  `json:"size"`
	CreatedMs    int64  `json:"createdMs"`
}

// BlockEntry is an index entry: one data block.
type BlockEntry struct {
	BaseOffset      int64
	LastOffsetDelta int32
	BatchCount      int32
	Position        int64 // of the block header in the object
	Size            int32 // header + data
	MaxTimestamp    int64
}

// LastOffset is the last offset of the block's last batch.
func (e BlockEntry) LastOffset() int64 { return e.BaseOffset + int64(e.LastOffsetDelta) }

// SegmentSource is what a stream object is built from: a sealed segment's
// log (whole batches up to LogSize) and its aux data.
type SegmentSource struct {
	Log     io.ReaderAt
	LogSize int64
	// Path names the log in errors.
	Path string
	// BaseOffset and EndOffset bound the segment: EndOffset is the offset
	// after its last batch (the next segment's base).
	BaseOffset, EndOffset int64
	TxnIndex              []byte
	Snapshot              []byte
	Epochs                []leaderepoch.Entry
	Topic                 string
	Partition             int32
	CreatedMs             int64
	// BlockSize closes a block once it holds this many bytes. The default
	// is DefaultBlockSize.
	BlockSize int
}

// ErrEmptySegment: a segment without batches makes no object.
var ErrEmptySegment = seglog.NewKafkaError("tiering: segment holds no batch", -1)

// Plan is a stream object laid out from a segment before it is written:
// its size is known, so it can be uploaded in one PUT or in parts.
type Plan struct {
	src     SegmentSource
	blocks  []planBlock
	maxData int
	tail    []byte // index ‖ aux ‖ footer
	// Size is the object's size in bytes.
	Size int64
	// Meta is the object's metadata section.
	Meta ObjectMeta
}

type planBlock struct {
	logPos int64
	entry  BlockEntry
}

// PlanObject reads the segment's batch headers and lays out its object.
// Framing damage in the log is a *seglog.CorruptionError.
func PlanObject(src SegmentSource) (*Plan, error) {
	if src.BlockSize <= 0 {
		src.BlockSize = DefaultBlockSize
	}
	p := &Plan{src: src}
	r := headerReader{r: src.Log, size: src.LogSize}
	corrupt := func(pos int64, why string, err error) error {
		return &seglog.CorruptionError{Path: src.Path, Offset: pos, Reason: why, Err: err}
	}
	var cur *planBlock
	var dataLen int64
	next := src.BaseOffset
	maxTs := int64(-1)
	for pos := int64(0); pos < src.LogSize; {
		hb, err := r.header(pos)
		if err != nil {
			return nil, corrupt(pos, "a batch header runs past the end", err)
		}
		h, size, err := record.ParseHeader(hb)
		if err != nil {
			return nil, corrupt(pos, "bad batch header", err)
		}
		last := h.BaseOffset + int64(h.LastOffsetDelta)
		switch {
		case pos+size > src.LogSize:
			return nil, corrupt(pos, fmt.Sprintf("batch of %d bytes runs past the end %d", size, src.LogSize), nil)
		case h.BaseOffset < next || last < h.BaseOffset:
			return nil, corrupt(pos, fmt.Sprintf("batch [%d, %d] is not above offset %d", h.BaseOffset, last, next-1), nil)
		case last >= src.EndOffset:
			return nil, corrupt(pos, fmt.Sprintf("batch ends at %d, past the segment end %d", last, src.EndOffset), nil)
		case size > 1<<31-1-blockHeaderSize:
			return nil, corrupt(pos, fmt.Sprintf("batch of %d bytes", size), nil)
		}
		if cur == nil || dataLen+size > int64(src.BlockSize) {
			p.blocks = append(p.blocks, planBlock{logPos: pos, entry: BlockEntry{BaseOffset: h.BaseOffset, MaxTimestamp: -1}})
			cur, dataLen = &p.blocks[len(p.blocks)-1], 0
		}
		dataLen += size
		cur.entry.LastOffsetDelta = int32(last - cur.entry.BaseOffset)
		cur.entry.BatchCount++
		cur.entry.Size = int32(blockHeaderSize + dataLen)
		cur.entry.MaxTimestamp = max(cur.entry.MaxTimestamp, h.MaxTimestamp)
		p.maxData = max(p.maxData, int(dataLen))
		maxTs = max(maxTs, h.MaxTimestamp)
		next = last + 1
		pos += size
	}
	if len(p.blocks) == 0 {
		return nil, ErrEmptySegment
	}
	if len(src.TxnIndex)%record.AbortedTxnSize != 0 {
		return nil, corrupt(-1, fmt.Sprintf("transaction index of %d bytes", len(src.TxnIndex)), nil)
	}
	var at int64
	for i := range p.blocks {
		p.blocks[i].entry.Position = at
		at += int64(p.blocks[i].entry.Size)
	}
	p.Meta = ObjectMeta{Topic: src.Topic, Partition: src.Partition, BaseOffset: src.BaseOffset, EndOffset: src.EndOffset,
		MaxTimestamp: maxTs, Size: src.LogSize, CreatedMs: src.CreatedMs}
	p.tail = p.buildTail(at)
	p.Size = at + int64(len(p.tail))
	return p, nil
}

func (p *Plan) buildTail(indexPos int64) []byte {
	var b []byte
	for _, blk := range p.blocks {
		e := blk.entry
		b = binary.BigEndian.AppendUint64(b, uint64(e.BaseOffset))
		b = binary.BigEndian.AppendUint32(b, uint32(e.LastOffsetDelta))
		b = binary.BigEndian.AppendUint32(b, uint32(e.BatchCount))
		b = binary.BigEndian.AppendUint64(b, uint64(e.Position))
		b = binary.BigEndian.AppendUint32(b, uint32(e.Size))
		b = binary.BigEndian.AppendUint64(b, uint64(e.MaxTimestamp))
		b = binary.BigEndian.AppendUint32(b, 0)
	}
	indexLen := len(b)
	var epochs []byte
	for _, e := range p.src.Epochs {
		epochs = binary.BigEndian.AppendUint32(epochs, uint32(e.Epoch))
		epochs = binary.BigEndian.AppendUint64(epochs, uint64(e.StartOffset))
	}
	meta, _ := json.Marshal(p.Meta)
	for _, s := range []struct {
		typ     uint16
		payload []byte
	}{{auxAborted, p.src.TxnIndex}, {auxSnapshot, p.src.Snapshot}, {auxEpochs, epochs}, {auxMeta, meta}} {
		b = binary.BigEndian.AppendUint16(b, s.typ)
		b = binary.BigEndian.AppendUint32(b, uint32(len(s.payload)))
		b = binary.BigEndian.AppendUint32(b, crc32.Checksum(s.payload, castagnoli))
		b = append(b, s.payload...)
	}
	auxLen := len(b) - indexLen
	sum := crc32.Checksum(b, castagnoli)
	var f [footerSize]byte
	binary.BigEndian.PutUint64(f[ftIndexPos:], uint64(indexPos))
	binary.BigEndian.PutUint32(f[ftIndexLen:], uint32(indexLen))
	binary.BigEndian.PutUint64(f[ftAuxPos:], uint64(indexPos+int64(indexLen)))
	binary.BigEndian.PutUint32(f[ftAuxLen:], uint32(auxLen))
	binary.BigEndian.PutUint16(f[ftVersion:], objectVersion)
	binary.BigEndian.PutUint64(f[ftBase:], uint64(p.src.BaseOffset))
	binary.BigEndian.PutUint64(f[ftEnd:], uint64(p.src.EndOffset))
	binary.BigEndian.PutUint32(f[ftCRC:], sum)
	binary.BigEndian.PutUint64(f[ftMagic:], objectMagic)
	return append(b, f[:]...)
}

// CRC returns the footer's CRC-32C of the index and aux sections.
func (p *Plan) CRC() uint32 {
	return binary.BigEndian.Uint32(p.tail[len(p.tail)-footerSize+ftCRC:])
}

// headerReader reads batch headers at increasing positions through a
// small window: one pread covers the headers of several small batches, and
// a large batch's body is never read.
type headerReader struct {
	r     io.ReaderAt
	size  int64
	buf   [16 << 10]byte
	start int64
	n     int
}

func (h *headerReader) header(pos int64) ([]byte, error) {
	if pos < h.start || pos+record.HeaderSize > h.start+int64(h.n) {
		if pos+record.HeaderSize > h.size {
			return nil, io.ErrUnexpectedEOF
		}
		n, err := h.r.ReadAt(h.buf[:min(int64(len(h.buf)), h.size-pos)], pos)
		if n < record.HeaderSize {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		h.start, h.n = pos, n
	}
	at := pos - h.start
	return h.buf[at : at+record.HeaderSize], nil
}

// Blocks returns the object's index entries.
func (p *Plan) Blocks() []BlockEntry {
	out := make([]BlockEntry, len(p.blocks))
	for i, b := range p.blocks {
		out[i] = b.entry
	}
	return out
}

// WriteTo streams the object: each block's batches read from the log, each
// batch's CRC checked (a batch that changed or rotted since it was
// written is never uploaded), then index, aux and footer. It returns the
// bytes written.
func (p *Plan) WriteTo(w io.Writer) (int64, error) {
	buf := make([]byte, blockHeaderSize+p.maxData)
	var n int64
	for _, blk := range p.blocks {
		e := blk.entry
		b := buf[:e.Size]
		data := b[blockHeaderSize:]
		if _, err := p.src.Log.ReadAt(data, blk.logPos); err != nil {
			return n, fmt.Errorf("tiering: reading %s at %d: %w", p.src.Path, blk.logPos, err)
		}
		if err := checkBatches(data, e, p.src.Path, blk.logPos); err != nil {
			return n, err
		}
		b[0], b[1], b[2], b[3] = blockMagic, 0, 0, 0
		binary.BigEndian.PutUint32(b[4:], uint32(e.BatchCount))
		binary.BigEndian.PutUint32(b[8:], uint32(len(data)))
		binary.BigEndian.PutUint32(b[12:], crc32.Checksum(data, castagnoli))
		m, err := w.Write(b)
		n += int64(m)
		if err != nil {
			return n, err
		}
	}
	m, err := w.Write(p.tail)
	return n + int64(m), err
}

// checkBatches checks that data holds exactly the batches the entry says,
// each with a good CRC. pos is where data starts in file, for errors.
func checkBatches(data []byte, e BlockEntry, file string, pos int64) error {
	next, count := e.BaseOffset, int32(0)
	for at := 0; at < len(data); {
		b, rest, err := record.ParseBatch(data[at:])
		if err == nil {
			err = b.Verify()
		}
		if err == nil && (b.BaseOffset() < next || (count == 0 && b.BaseOffset() != e.BaseOffset)) {
			err = fmt.Errorf("batch at offset %d is out of order", b.BaseOffset())
		}
		if err != nil {
			return &seglog.CorruptionError{Path: file, Offset: pos + int64(at), Reason: "bad batch", Err: err}
		}
		next = b.NextOffset()
		count++
		at = len(data) - len(rest)
	}
	if count != e.BatchCount || next-1 != e.LastOffset() {
		return &seglog.CorruptionError{Path: file, Offset: pos, Reason: fmt.Sprintf(
			"block holds %d batches ending at %d, its index entry says %d ending at %d", count, next-1, e.BatchCount, e.LastOffset())}
	}
	return nil
}

// Object is a stream object's footer, index and aux sections, as a reader
// needs them.
type Object struct {
	Key                   string
	Size                  int64
	BaseOffset, EndOffset int64
	Blocks                []BlockEntry
	Aborted               []record.AbortedTxn
	Snapshot              []byte
	Epochs                []leaderepoch.Entry
	Meta                  ObjectMeta
	indexPos              int64
}

func (o *Object) corrupt(pos int64, format string, args ...any) error {
	return &seglog.CorruptionError{Path: o.Key, Offset: pos, Reason: fmt.Sprintf(format, args...)}
}

// ParseTail decodes an object of size bytes from its last len(tail)
// bytes. If the index and aux sections do not fit in tail, it returns the
// tail size needed (and no error) so the caller fetches that much and
// calls again. Anything malformed is a *seglog.CorruptionError naming key.
func ParseTail(key string, tail []byte, size int64) (*Object, int64, error) {
	o := &Object{Key: key, Size: size}
	start := size - int64(len(tail)) // of tail in the object
	if int64(len(tail)) > size {
		return nil, 0, fmt.Errorf("tiering: a tail of %d bytes of an object of %d", len(tail), size)
	}
	if len(tail) < footerSize {
		return nil, 0, o.corrupt(-1, "%d bytes, shorter than a footer", size)
	}
	f := tail[len(tail)-footerSize:]
	fpos := size - footerSize
	if binary.BigEndian.Uint64(f[ftMagic:]) != objectMagic {
		return nil, 0, o.corrupt(fpos+ftMagic, "footer magic %#x", binary.BigEndian.Uint64(f[ftMagic:]))
	}
	if v := binary.BigEndian.Uint16(f[ftVersion:]); v != objectVersion {
		return nil, 0, o.corrupt(fpos+ftVersion, "format version %d", v)
	}
	indexPos := int64(binary.BigEndian.Uint64(f[ftIndexPos:]))
	indexLen := int64(binary.BigEndian.Uint32(f[ftIndexLen:]))
	auxPos := int64(binary.BigEndian.Uint64(f[ftAuxPos:]))
	auxLen := int64(binary.BigEndian.Uint32(f[ftAuxLen:]))
	o.BaseOffset = int64(binary.BigEndian.Uint64(f[ftBase:]))
	o.EndOffset = int64(binary.BigEndian.Uint64(f[ftEnd:]))
	switch {
	case indexPos < 0 || indexLen%indexEntrySize != 0 || indexLen == 0 || auxPos != indexPos+indexLen || auxPos+auxLen != fpos:
		return nil, 0, o.corrupt(fpos, "footer sections index [%d, +%d) aux [%d, +%d) do not end at the footer %d",
			indexPos, indexLen, auxPos, auxLen, fpos)
	case binary.BigEndian.Uint16(f[ftVersion+2:]) != 0 || binary.BigEndian.Uint64(f[ftCRC+4:]) != 0:
		return nil, 0, o.corrupt(fpos+ftVersion+2, "reserved footer bytes are not zero")
	case o.BaseOffset < 0 || o.EndOffset <= o.BaseOffset:
		return nil, 0, o.corrupt(fpos+ftBase, "offsets [%d, %d)", o.BaseOffset, o.EndOffset)
	}
	if indexPos < start {
		return nil, size - indexPos, nil
	}
	sections := tail[indexPos-start : auxPos+auxLen-start]
	if got, want := crc32.Checksum(sections, castagnoli), binary.BigEndian.Uint32(f[ftCRC:]); got != want {
		return nil, 0, o.corrupt(indexPos, "index and aux CRC-32C %#x, footer says %#x", got, want)
	}
	o.indexPos = indexPos
	if err := o.parseIndex(sections[:indexLen], indexPos); err != nil {
		return nil, 0, err
	}
	if err := o.parseAux(sections[indexLen:], auxPos); err != nil {
		return nil, 0, err
	}
	return o, 0, nil
}

func (o *Object) parseIndex(b []byte, pos int64) error {
	o.Blocks = make([]BlockEntry, 0, len(b)/indexEntrySize)
	var at int64
	next := o.BaseOffset
	for i := 0; i < len(b); i += indexEntrySize {
		e := BlockEntry{
			BaseOffset:      int64(binary.BigEndian.Uint64(b[i:])),
			LastOffsetDelta: int32(binary.BigEndian.Uint32(b[i+8:])),
			BatchCount:      int32(binary.BigEndian.Uint32(b[i+12:])),
			Position:        int64(binary.BigEndian.Uint64(b[i+16:])),
			Size:            int32(binary.BigEndian.Uint32(b[i+24:])),
			MaxTimestamp:    int64(binary.BigEndian.Uint64(b[i+28:])),
		}
		switch {
		case e.Position != at || e.Size <= blockHeaderSize || e.Position+int64(e.Size) > o.indexPos:
			return o.corrupt(pos+int64(i), "block %d at [%d, +%d) does not follow the previous one at %d", i/indexEntrySize, e.Position, e.Size, at)
		case e.BaseOffset < next || e.LastOffsetDelta < 0 || e.LastOffset() >= o.EndOffset || e.BatchCount <= 0:
			return o.corrupt(pos+int64(i), "block %d offsets [%d, %d] (%d batches) out of order in [%d, %d)",
				i/indexEntrySize, e.BaseOffset, e.LastOffset(), e.BatchCount, next, o.EndOffset)
		}
		at += int64(e.Size)
		next = e.LastOffset() + 1
		o.Blocks = append(o.Blocks, e)
	}
	if at != o.indexPos {
		return o.corrupt(pos, "blocks end at %d, the index starts at %d", at, o.indexPos)
	}
	return nil
}

func (o *Object) parseAux(b []byte, pos int64) error {
	seen := map[uint16]bool{}
	for at := 0; at < len(b); {
		if len(b)-at < auxHeaderSize {
			return o.corrupt(pos+int64(at), "aux section header cut short")
		}
		typ := binary.BigEndian.Uint16(b[at:])
		n := int(binary.BigEndian.Uint32(b[at+2:]))
		sum := binary.BigEndian.Uint32(b[at+6:])
		if n > len(b)-at-auxHeaderSize {
			return o.corrupt(pos+int64(at), "aux section %d of %d bytes runs past the aux area", typ, n)
		}
		payload := b[at+auxHeaderSize : at+auxHeaderSize+n]
		if crc32.Checksum(payload, castagnoli) != sum {
			return o.corrupt(pos+int64(at), "aux section %d CRC mismatch", typ)
		}
		if seen[typ] {
			return o.corrupt(pos+int64(at), "aux section %d twice", typ)
		}
		seen[typ] = true
		if err := o.aux(typ, payload); err != nil {
			return o.corrupt(pos+int64(at), "aux section %d: %v", typ, err)
		}
		at += auxHeaderSize + n
	}
	if !seen[auxMeta] {
		return o.corrupt(pos, "no metadata section")
	}
	return nil
}

func (o *Object) aux(typ uint16, payload []byte) error {
	switch typ {
	case auxAborted:
		t, err := record.ParseAbortedTxns(payload)
		o.Aborted = t
		return err
	case auxSnapshot:
		o.Snapshot = slices.Clone(payload)
	case auxEpochs:
		if len(payload)%epochEntrySize != 0 {
			return fmt.Errorf("%d bytes are not whole epoch entries", len(payload))
		}
		for i := 0; i < len(payload); i += epochEntrySize {
			o.Epochs = append(o.Epochs, leaderepoch.Entry{Epoch: int32(binary.BigEndian.Uint32(payload[i:])),
				StartOffset: int64(binary.BigEndian.Uint64(payload[i+4:]))})
		}
	case auxMeta:
		if err := json.Unmarshal(payload, &o.Meta); err != nil {
			return err
		}
		if o.Meta.BaseOffset != o.BaseOffset || o.Meta.EndOffset != o.EndOffset {
			return fmt.Errorf("metadata offsets [%d, %d) differ from the footer's [%d, %d)",
				o.Meta.BaseOffset, o.Meta.EndOffset, o.BaseOffset, o.EndOffset)
		}
	}
	return nil // an unknown section is skipped: a later version may add some
}

// FindBlock returns the index of the first block holding an offset at or
// above offset, or false if none does.
func (o *Object) FindBlock(offset int64) (int, bool) {
	i, _ := slices.BinarySearchFunc(o.Blocks, offset, func(e BlockEntry, t int64) int {
		if e.LastOffset() < t {
			return -1
		}
		return 1
	})
	return i, i < len(o.Blocks)
}

// FindTimestamp returns the index of the first block whose max timestamp
// is at or above ts, or false.
func (o *Object) FindTimestamp(ts int64) (int, bool) {
	i := slices.IndexFunc(o.Blocks, func(e BlockEntry) bool { return e.MaxTimestamp >= ts })
	return i, i >= 0
}

// ParseBlock checks block i's bytes (header and data, as fetched) and
// returns its batches. The CRC is checked before a byte is served.
func (o *Object) ParseBlock(i int, b []byte) ([]byte, error) {
	e := o.Blocks[i]
	if len(b) != int(e.Size) {
		return nil, o.corrupt(e.Position, "block %d: %d bytes, the index says %d", i, len(b), e.Size)
	}
	data := b[blockHeaderSize:]
	switch {
	case b[0] != blockMagic || b[1] != 0 || b[2] != 0 || b[3] != 0:
		return nil, o.corrupt(e.Position, "block %d header % x", i, b[:4])
	case int32(binary.BigEndian.Uint32(b[4:])) != e.BatchCount:
		return nil, o.corrupt(e.Position+4, "block %d holds %d batches, the index says %d", i, binary.BigEndian.Uint32(b[4:]), e.BatchCount)
	case int(binary.BigEndian.Uint32(b[8:])) != len(data):
		return nil, o.corrupt(e.Position+8, "block %d data length %d, expected %d", i, binary.BigEndian.Uint32(b[8:]), len(data))
	case crc32.Checksum(data, castagnoli) != binary.BigEndian.Uint32(b[12:]):
		return nil, o.corrupt(e.Position+12, "block %d CRC-32C mismatch", i)
	}
	return data, nil
}

// Verify reads a whole object (as bytes) and checks everything: the tail,
// every block's CRC, and that each block holds exactly the batches its
// index entry says, each with a good batch CRC.
func Verify(key string, obj []byte) (*Object, error) {
	o, need, err := ParseTail(key, obj, int64(len(obj)))
	if err != nil {
		return nil, err
	}
	if need != 0 {
		return nil, fmt.Errorf("tiering: whole object but tail needs %d", need)
	}
	for i, e := range o.Blocks {
		data, err := o.ParseBlock(i, obj[e.Position:e.Position+int64(e.Size)])
		if err != nil {
			return nil, err
		}
		if err := checkBatches(data, e, key, e.Position+blockHeaderSize); err != nil {
			return nil, err
		}
	}
	return o, nil
}
