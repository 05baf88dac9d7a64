// Command tiered moves a tablet's sealed segments to an object store (a
// file:// directory here; s3://bucket/prefix?endpoint=… the same way),
// deletes them locally, reads everything back through the store, and
// reopens the directory with its tier attached. It checks what it reads and
// exits 1 on any surprise.
//
//	go run ./tiered [DIR]
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/tablet"
	"github.com/seglog/seglog/tiering"
)

const records = 10_000

// main runs in DIR, or in a temporary directory it removes after.
func main() {
	var err error
	if len(os.Args) > 1 {
		err = run(os.Args[1])
	} else {
		var dir string
		if dir, err = os.MkdirTemp("", "seglog-tiered-"); err == nil {
			err = run(dir)
			os.RemoveAll(dir)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "tiered:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	data, store := filepath.Join(dir, "data"), "file://"+filepath.Join(dir, "store")
	ctx := context.Background()

	m, err := tablet.OpenManager(nil, data, tablet.ManagerOptions{})
	if err != nil {
		return err
	}
	defer m.Close()
	cfg := tablet.DefaultConfig()
	cfg.SegmentBytes = 16 << 10 // small segments, so that many are sealed
	cfg.LocalRetentionBytes = 0 // once tiered, nothing need stay local
	tab, err := m.GetOrCreate(tablet.TopicPartition{Topic: "events", Partition: 0}, &cfg)
	if err != nil {
		return err
	}
	for i := range records / 100 {
		batch := make([]record.Record, 100)
		for j := range batch {
			batch[j].Value = fmt.Appendf(nil, "event %d", i*100+j)
		}
		if _, err := tab.AppendRecords(batch, record.None, tablet.AppendOptions{}); err != nil {
			return err
		}
	}

	// The store, and the tablet's tier in it. The URL is kept in the
	// tablet's directory so that a later open attaches the same store.
	s, err := tiering.OpenStore(ctx, store, nil)
	if err != nil {
		return err
	}
	if err := tiering.SaveStoreURL(nil, tab.Dir(), store); err != nil {
		return err
	}
	tier, err := tiering.Open(ctx, tab, "events", 0, s, nil)
	if err != nil {
		return err
	}
	up, err := tier.Upload(ctx, nil) // every sealed segment below the high watermark
	if err != nil {
		return err
	}
	del, err := tier.DeleteLocal()
	if err != nil {
		return err
	}
	o := tab.Offsets()
	fmt.Printf("uploaded %d object(s), %d bytes; deleted %d local segment(s); log start %d, local log start %d, log end %d\n",
		len(up.Objects), up.Bytes, del.Segments, o.LogStartOffset, o.LocalLogStartOffset, o.LogEndOffset)
	if len(up.Objects) == 0 || o.LocalLogStartOffset == 0 {
		return fmt.Errorf("nothing was tiered")
	}
	if err := readAll(tab, "through the store"); err != nil {
		return err
	}
	if err := tier.Close(); err != nil {
		return err
	}
	if err := m.Close(); err != nil {
		return err
	}

	// Reopen: Attach opens the tier of every tablet that has one.
	m, err = tablet.OpenManager(nil, data, tablet.ManagerOptions{})
	if err != nil {
		return err
	}
	defer m.Close()
	attached, err := tiering.Attach(ctx, m, nil, nil, nil)
	if attached != nil {
		defer attached.Close() // the tiers it opened, whether or not all did
	}
	if err != nil {
		return err // a tier that could not attach: here, a failure
	}
	tab, _ = m.Get(tablet.TopicPartition{Topic: "events", Partition: 0})
	if err := readAll(tab, "after a reopen"); err != nil {
		return err
	}
	if err := attached.Close(); err != nil {
		return err
	}
	return m.Close()
}

// readAll reads every record from offset 0 and checks it.
func readAll(tab *tablet.Tablet, when string) error {
	next := int64(0)
	for r, err := range tab.Scan(0, tablet.ReadHighWatermark) {
		if err != nil {
			return err
		}
		if want := fmt.Sprintf("event %d", next); r.Offset != next || string(r.Value) != want {
			return fmt.Errorf("offset %d holds %q, want offset %d %q", r.Offset, r.Value, next, want)
		}
		next++
	}
	if next != records {
		return fmt.Errorf("%s: read %d records, want %d", when, next, records)
	}
	fmt.Printf("read %d records from offset 0 %s\n", next, when)
	return nil
}
