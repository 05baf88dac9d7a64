// Package logfile names the files of a tablet directory, as Kafka's
// LogFileUtils does: a segment's files are its base offset as 20 zero-padded
// digits and an extension, with a temporary suffix while they are being
// deleted or replaced.
//
//	00000000000000001872.log         the batches
//	00000000000000001872.index       offset → position
//	00000000000000001872.timeindex   timestamp → offset
//	00000000000000001872.txnindex    aborted transactions
//	00000000000000001872.snapshot    producer state at offset 1872
//	00000000000000001872.log.deleted waiting to be unlinked
//	00000000000000001872.log.cleaned being written by a replacement
//	00000000000000001872.log.swap    a finished replacement, not yet renamed in
//
// Names are built (Filename) and parsed (ParseFilename) only here; every
// package that touches these files (segment, writerstate, recovery, tablet,
// the command) goes through it. It imports nothing of seglog.
package logfile
