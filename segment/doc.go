// Package segment is one segment of a tablet: a .log file of whole
// RecordBatch v2 batches and its offset, time and transaction indexes,
// named by the segment's base offset (package logfile builds the names).
//
//	00000000000000001872.log        batches, appended with one positional write each
//	00000000000000001872.index      offset → position, a sparse, mapped index, preallocated a chunk at a time
//	00000000000000001872.timeindex  timestamp → offset, the same
//	00000000000000001872.txnindex   aborted transactions, created by the first
//
// A Segment does its whole job, so that nobody above it reaches an index:
//
//	write    Append (indexing every index.interval.bytes), Seal (trim the
//	         indexes, final time entry), TruncateTo, Flush / FlushLog
//	read     Read / ReadWith (whole batches as a Slice: io.ReaderAt and an
//	         io.WriterTo that uses sendfile), TranslateOffset,
//	         FindOffsetByTimestamp, Batches / BatchesBelow
//	txns     AppendAbortedTxn, AbortedTxns, CollectAbortedTxns,
//	         UpperBoundOffset (a read's bound for read-committed)
//	recover  Recover (rebuild the indexes and replay into a Replayer, the
//	         torn tail reported), CheckIndexes / QuickCheckIndexes at load,
//	         PrepareForAppends, Check and VerifyIndex for seglog verify
//	files    ChangeSuffix (.deleted, .cleaned, .swap), Delete, Park (close
//	         an idle sealed segment, reopened on its next read)
//
// Sealed segments open lazily: a Segment that is not read holds no
// descriptor and no mapping.
package segment
