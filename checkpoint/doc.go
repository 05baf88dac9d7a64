// Package checkpoint reads and writes Kafka's small text files (docs/format.md §4.2):
//
//	recovery-point-offset-checkpoint   ┐ in the data directory:
//	log-start-offset-checkpoint        │   0          version
//	replication-offset-checkpoint      │   2          count
//	cleaner-offset-checkpoint          ┘   topic 0 42 one line per partition
//	<topic>-<partition>/leader-epoch-checkpoint   0 / count / "epoch startOffset"
//	<topic>-<partition>/partition.metadata         "version: 0\ntopic_id: <22-char base64url>"
//	meta.properties                                Java properties: version, cluster.id, node.id, directory.id
//	.kafka_cleanshutdown                           {"version":0,"brokerEpoch":N}
//
// Every write but the clean-shutdown marker is atomic: a temporary file,
// fsync, rename, and fsync of the directory. Reading is strict: a wrong
// version, a malformed line or a count that does not match is an error
// naming the file and line.
package checkpoint
