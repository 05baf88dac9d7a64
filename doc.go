// Package seglog holds the few names every seglog package shares: the typed
// corruption error. It imports nothing from the rest of the module, so any
// package may import it.
//
// seglog itself is a local-disk segment log engine: the storage layer of a
// Kafka-style partition log, whose files are Kafka's own. Its packages are,
// from the bottom up (an arrow only ever points down):
//
//	vfs                the filesystem layer: OS (the default), a crash simulator,
//	                   an error injector; public, for embedders' own tests
//	logfile            segment file names (Kafka's LogFileUtils)
//	record             Kafka RecordBatch v2: views, records, builder, validation;
//	                   the aborted-transaction entry
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
//	tablet/tablettest  test support above tablet: the crash tests' workload
//	tiering            sealed segments to an object store (file://, S3), remote reads
//	broker             the Kafka protocol on a data directory (seglog serve)
//	bench              the benchmark harness (bench/peers: its own module)
//	cmd/seglog         the command: serve, produce, append, end-txn, consume,
//	                   offsets, dump, recover, verify, tier, bench, demo, version
//
// docs/architecture.md is the architecture; examples/ is a module of its
// own that embeds seglog as another program would.
package seglog
