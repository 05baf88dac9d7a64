// Package seglog holds the few names every seglog package shares: the typed
// corruption error. It imports nothing from the rest of the module, so any
// package may import it.
//
// seglog itself is a local-disk segment log engine: the storage layer of a
// Kafka-style partition log. Its packages are, from the bottom up:
//
//	internal/vfs   the filesystem layer (OS, crash simulator, error injector)
//	record         Kafka RecordBatch v2: views, records, builder, validation
//	cmd/seglog     the command: dump, demo, version
//
// See README.md for the whole map and DESIGN.md for the architecture.
package seglog
