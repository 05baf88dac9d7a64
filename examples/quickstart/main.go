// Command quickstart embeds seglog as a program in another module would:
// it opens a data directory, creates a tablet, appends plain records and a
// producer's batch (and its retry), reads them back by offset and by time,
// and closes the directory cleanly. It checks what it reads and exits 1 on
// any surprise.
//
//	go run ./quickstart [DIR]
package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/tablet"
)

// main runs in DIR, or in a temporary directory it removes after.
func main() {
	var err error
	if len(os.Args) > 1 {
		err = run(os.Args[1])
	} else {
		var dir string
		if dir, err = os.MkdirTemp("", "seglog-quickstart-"); err == nil {
			err = run(dir)
			os.RemoveAll(dir)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	// A nil filesystem is the OS's. OpenManager takes the directory's lock,
	// recovers it after a crash and starts the background tasks.
	m, err := tablet.OpenManager(nil, dir, tablet.ManagerOptions{})
	if err != nil {
		return err
	}
	defer m.Close()

	cfg := tablet.DefaultConfig() // Kafka's topic defaults
	cfg.SegmentBytes = 64 << 20
	tab, err := m.GetOrCreate(tablet.TopicPartition{Topic: "orders", Partition: 0}, &cfg)
	if err != nil {
		return err
	}

	// Plain records: one batch, stamped with the append time.
	first, err := tab.AppendRecords([]record.Record{
		{Key: []byte("o-1"), Value: []byte("created")},
		{Key: []byte("o-1"), Value: []byte("paid")},
	}, record.None, tablet.AppendOptions{Sync: true}) // durable when it returns
	if err != nil {
		return err
	}
	fmt.Printf("appended offsets %d..%d\n", first.FirstOffset, first.LastOffset)

	// A producer's batch, as a Kafka client sends it: an idempotent producer
	// (id 7, epoch 0) whose first sequence is 0. A retry of the same batch is
	// answered with the original offsets and writes nothing.
	b := record.NewBuilder(record.LZ4)
	b.SetProducer(7, 0, 0)
	shipped := time.Now().Add(time.Minute).UnixMilli() // after the plain records, stamped now
	if err := b.Append(record.Record{Timestamp: shipped, Key: []byte("o-1"), Value: []byte("shipped")}); err != nil {
		return err
	}
	batch, err := b.Build()
	if err != nil {
		return err
	}
	// Append stamps offsets into the bytes it is given: hand it a copy to
	// keep the batch for the retry.
	res, err := tab.Append(append([]byte(nil), batch.Bytes()...), tablet.AppendOptions{})
	if err != nil {
		return err
	}
	retry, err := tab.Append(append([]byte(nil), batch.Bytes()...), tablet.AppendOptions{})
	if err != nil {
		return err
	}
	fmt.Printf("producer batch at %d; its retry: duplicate=%v at %d\n", res.FirstOffset, retry.Duplicate, retry.FirstOffset)
	if !retry.Duplicate || retry.FirstOffset != res.FirstOffset {
		return errors.New("the retry was not answered with the original offsets")
	}

	// By offset: every record from 0, as a consumer sees them.
	var values []string
	for r, err := range tab.Scan(0, tablet.ReadHighWatermark) {
		if err != nil {
			return err
		}
		values = append(values, string(r.Value))
		fmt.Printf("  offset %d  %s = %s\n", r.Offset, r.Key, r.Value)
	}
	if fmt.Sprint(values) != "[created paid shipped]" {
		return fmt.Errorf("read back %v", values)
	}

	// By time: the first record at or after the shipping time.
	at, err := tab.OffsetForTimestamp(shipped)
	if err != nil {
		return err
	}
	fmt.Printf("first record at or after %s: offset %d\n", time.UnixMilli(shipped).UTC().Format(time.RFC3339), at.Offset)
	if at.Offset != res.FirstOffset {
		return fmt.Errorf("by time: offset %d, want %d", at.Offset, res.FirstOffset)
	}

	o := tab.Offsets()
	fmt.Printf("log end %d, high watermark %d, durable below %d\n", o.LogEndOffset, o.HighWatermark, o.DurableOffset)
	// Close flushes, snapshots the producers, writes the checkpoints and the
	// clean-shutdown marker: the next open skips recovery.
	return m.Close()
}
