// Package seglog holds the few names every seglog package shares: the typed
// corruption error. It imports nothing from the rest of the module, so any
// package may import it.
//
// seglog itself is a local-disk segment log engine: the storage layer of a
// Kafka-style partition log. Its packages are, from the bottom up:
//
//	internal/vfs       the filesystem layer (OS, crash simulator, error injector)
//	record             Kafka RecordBatch v2: views, records, builder, validation
//	internal/mmapfile  preallocated, memory-mapped files of fixed-width entries
//	offsetindex        .index: offset → position
//	timeindex          .timeindex: timestamp → offset
//	txnindex           .txnindex: aborted transactions
//	segment            a .log with its indexes: append, read, recover, truncate
//	writerstate        producer state and its .snapshot files
//	checkpoint         checkpoint files, partition.metadata, meta.properties
//	leaderepoch        the leader-epoch cache
//	recovery           loading a data directory after a clean or unclean shutdown;
//	                   verifying one without changing it
//	tablet             a partition log (Tablet) and a data directory (Manager)
//	cmd/seglog         the command: produce, append, end-txn, consume, offsets,
//	                   dump, recover, verify, bench, demo, version
//	bench              the benchmark harness (bench/peers: its own module)
//	tablet/tablettest the producer workload the crash tests kill, and its check
//
// See README.md for the whole map and DESIGN.md for the architecture.
package seglog
