package tiering

// The stream object (docs/tiering.md §1): part of the format;
// never change.
const (
	blockMagic      = 0x5A
	blockHeaderSize = 16
	indexEntrySize  = 40
	footerSize      = 64
	auxHeaderSize   = 10
	objectVersion   = 1
	objectMagic     = 0x7365676c6f677331 // "seglogs1"
	epochEntrySize  = 12
)

// Aux section types.
const (
	auxAborted  uint16 = 1 // the segment's .txnindex bytes
	auxSnapshot uint16 = 2 // the producer snapshot at the segment's end
	auxEpochs   uint16 = 3 // leader epochs covering the segment
	auxMeta     uint16 = 4 // ObjectMeta as JSON
)

// Offsets of the footer's fields.
const (
	ftIndexPos = 0
	ftIndexLen = 8
	ftAuxPos   = 12
	ftAuxLen   = 20
	ftVersion  = 24
	ftBase     = 28
	ftEnd      = 36
	ftCRC      = 44
	ftMagic    = 56
)

// DefaultBlockSize is the default size at which a data block is closed.
const DefaultBlockSize = 512 << 10

// maxTail bounds the first ranged GET of an object's tail.
const (
	tailBase = 8 << 10
	maxTail  = 64 << 20
)

// TailSize is the size of the first ranged GET of an object of size
// bytes: 8 KiB plus 40 bytes per MiB, clamped to the object.
func TailSize(size int64) int64 {
	return min(size, min(tailBase+size/(1<<20)*indexEntrySize, maxTail))
}
