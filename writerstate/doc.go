// Package writerstate is a tablet's producer (writer) state, as Kafka's
// ProducerStateManager keeps it (docs/format.md §5): per producer id the epoch, the
// coordinator epoch, the last timestamp, the metadata of its last five
// batches and its open transaction; the ongoing and the completed but
// unreplicated transactions; and the .snapshot files that persist it.
//
// An append is checked and applied in two steps, so that nothing changes
// unless the batches reach the log:
//
//	a := state.NewAppend(record.OriginClient)
//	completed, err := a.AddBatch(batch) // epoch, sequence, transaction checks
//	... write the batch ...
//	state.Apply(a)                       // the producers' new entries
//	for _, c := range completed { lso := state.LastStableOffsetOf(c); …; state.CompleteTxn(c) }
//	state.UpdateMapEndOffset(batch.NextOffset())
//
// A snapshot file, <20-digit offset>.snapshot (docs/format.md §5.5), big-endian:
//
//	0   version            int16   1
//	2   crc                uint32  CRC-32C of [6, end)
//	6   count              int32
//	10  entries, 46 bytes each:
//	      producerId int64 | epoch int16 | lastSequence int32 |
//	      lastOffset int64 (-1: no batch) | offsetDelta int32 |
//	      timestamp int64 | coordinatorEpoch int32 |
//	      currentTxnFirstOffset int64 (-1: none)
//
// The offset in the name is the end offset (exclusive) the state covers.
// Only each producer's last batch is kept, so after a reload duplicates are
// recognised for that batch only, until more are appended.
package writerstate
