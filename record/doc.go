// Package record reads and writes Kafka's RecordBatch v2 (magic 2), the unit
// of every .log file: a zero-copy view over a batch's bytes (Batch), an
// iterator over its records (Iter) for every codec, a Builder, COMMIT and
// ABORT markers, sequence arithmetic, the validation a broker applies to an
// append (ValidateAppend), and a Scanner over a file region with Kafka's
// iteration rules.
//
// A batch, all integers big-endian (docs/format.md §1):
//
//	 0  baseOffset            int64   ┐ not covered by the CRC;
//	 8  batchLength           int32   │ size = batchLength + 12
//	12  partitionLeaderEpoch  int32   │
//	16  magic (2)             int8    ┘
//	17  crc                   uint32  CRC-32C of bytes [21, end)
//	21  attributes            int16   codec:3 tsType:1 txn:1 control:1 deleteHorizon:1
//	23  lastOffsetDelta       int32
//	27  baseTimestamp         int64
//	35  maxTimestamp          int64
//	43  producerId            int64
//	51  producerEpoch         int16
//	53  baseSequence          int32
//	57  recordsCount          int32
//	61  records…              compressed as one stream unless codec is none
//
// A record, every integer a zig-zag varint (varlong for the timestamp):
//
//	length | attributes int8 | timestampDelta | offsetDelta |
//	keyLen (-1 null) key | valueLen (-1 null) value |
//	headerCount { hKeyLen hKey | hValLen (-1 null) hValue }…
//
// Errors are *Error values carrying a byte position and one of the
// package's sentinel kinds.
package record
