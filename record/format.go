package record

// Byte layout of a RecordBatch v2 header: part of the on-disk format; never
// change. All integers are big-endian.
const (
	baseOffsetOff      = 0  // int64, not covered by the CRC
	lengthOff          = 8  // int32, bytes after this field
	leaderEpochOff     = 12 // int32, not covered by the CRC
	magicOff           = 16 // int8
	crcOff             = 17 // uint32, CRC-32C of [attributesOff, end)
	attributesOff      = 21 // int16
	lastOffsetDeltaOff = 23 // int32
	baseTimestampOff   = 27 // int64
	maxTimestampOff    = 35 // int64
	producerIDOff      = 43 // int64
	producerEpochOff   = 51 // int16
	baseSequenceOff    = 53 // int32
	recordsCountOff    = 57 // int32
	recordsOff         = 61 // first record
)

// Sizes and markers of the format: part of the on-disk format; never change.
const (
	// HeaderSize is the size of a RecordBatch v2 header (Kafka's
	// RECORD_BATCH_OVERHEAD): the smallest valid batch.
	HeaderSize = recordsOff
	// LogOverhead is the size of the base offset and length fields (Kafka's
	// LOG_OVERHEAD); a batch occupies length + LogOverhead bytes.
	LogOverhead = 12
	// PrefixSize is the part of the header every message format shares
	// (offset, length, leader epoch or CRC, magic). A scan stops when fewer
	// bytes than this remain.
	PrefixSize = 17
	// MinEntrySize is the smallest size a log entry of any format may
	// declare (Kafka's LegacyRecord.RECORD_OVERHEAD_V0); a smaller size field
	// is corruption.
	MinEntrySize = 14
	// Magic is the only message format version seglog reads and writes.
	Magic = 2
	// ControlBatchSize is the size of a COMMIT or ABORT marker batch.
	ControlBatchSize = 78
)

// "None" values of header fields.
const (
	NoOffset               int64 = -1
	NoTimestamp            int64 = -1
	NoProducerID           int64 = -1
	NoProducerEpoch        int16 = -1
	NoSequence             int32 = -1
	NoPartitionLeaderEpoch int32 = -1
)

// Attribute bits (only the low byte is read; bits 7–15 are written as 0).
const (
	compressionMask      = 0x07
	timestampTypeBit     = 0x08
	transactionalBit     = 0x10
	controlBit           = 0x20
	deleteHorizonBit     = 0x40
	knownAttributesMask  = compressionMask | timestampTypeBit | transactionalBit | controlBit | deleteHorizonBit
	maxVarintLen32       = 5
	maxVarintLen64       = 10
	controlKeySize       = 4 // int16 version, int16 type
	endTxnMarkerSize     = 6 // int16 version, int32 coordinator epoch
	controlRecordVersion = 0
)
