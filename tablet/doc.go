// Package tablet is seglog's partition log and its data directory.
//
// A Tablet (Kafka: a partition's log) is one directory of segments named by
// their base offset, with its producer (writer) state, leader epochs and
// topic config. A Manager is a data directory of tablets: it takes the
// directory's lock, loads every tablet (recovering after a crash), creates
// and deletes tablets, runs the background work (flush by time,
// checkpoints, retention, producer expiry, delayed file deletion) and closes
// them cleanly.
//
//	m, err := tablet.OpenManager(nil, "data", tablet.ManagerOptions{}) // nil: the OS filesystem
//	tab, err := m.GetOrCreate(tablet.TopicPartition{Topic: "events", Partition: 0}, nil)
//	res, err := tab.AppendRecords([]record.Record{{Value: []byte("hello")}}, record.None, tablet.AppendOptions{Sync: true})
//	for r, err := range tab.Scan(0, tablet.ReadHighWatermark) { … }
//	err = m.Close()
//
// Writes: Append takes a RecordBatch v2 as a Kafka producer sends it
// (validated, deduplicated per producer, one positional write);
// AppendRecords builds one from plain records. AppendOptions.Sync waits for
// the group-commit fsync that covers the append.
//
// Reads: Read and ReadInto return whole batches in place (a
// segment.Slice, sent with sendfile by WriteTo) with the offsets and, for
// ReadCommitted, the aborted transactions; Records and Scan hand out
// records one by one with control batches and aborted transactions
// skipped. OffsetForTimestamp finds an offset by time.
//
// The tablet never imports the packages above it: a tier (package tiering)
// attaches through the Remote interface and SetRemote.
package tablet

import (
	"github.com/seglog/seglog/checkpoint"
)

// TopicPartition names a tablet: its directory is "<topic>-<partition>".
// It is checkpoint's type, named here so that a caller of the tablet needs
// no other package.
type TopicPartition = checkpoint.TopicPartition
