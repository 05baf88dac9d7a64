// Package segment is one segment of a tablet: a .log file and its offset,
// time and transaction indexes, named by the segment's base offset.
//
// So far it holds the file names, built and parsed in this one place:
//
//	00000000000000001872.log          the batches
//	00000000000000001872.index        offset → position
//	00000000000000001872.timeindex    timestamp → offset
//	00000000000000001872.txnindex     aborted transactions
//	00000000000000001872.snapshot     writer state at offset 1872
//	00000000000000001872.log.deleted  (and .cleaned, .swap) in transit
package segment
