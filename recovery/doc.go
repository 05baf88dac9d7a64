// Package recovery loads a data directory after a clean or an unclean
// shutdown, as Kafka's LogManager and LogLoader do (docs/format.md §4.1), and reports
// every change it made.
//
//	Load(dataDir)
//	  1  the clean-shutdown marker: read and deleted at once
//	  2  the recovery-point and log-start checkpoints
//	  per tablet directory, in parallel (bounded):
//	  3  stray .deleted files deleted; .cleaned files and the .swap files of
//	     an unfinished split deleted
//	  4  the other .swap files completed: the segments they replace
//	     deleted, the suffix dropped
//	  5  segments opened: an orphan index is deleted, a missing .index is
//	     rebuilt, a missing .timeindex is created empty, a bad .txnindex
//	     is rebuilt
//	  6  after an unclean shutdown, every segment from the one holding the
//	     recovery point is recovered (CRC, indexes, writer state, epochs);
//	     a torn or damaged tail is cut and every later segment deleted
//	  7  the log end; a log end below the log start empties the tablet
//	  8  the recovery point; the active segment's indexes grow back
//	  9  the leader-epoch cache truncated to the log
//	  10 the log start
//	  11 stray producer snapshots deleted
//	  12 the writer state rebuilt
package recovery
