package tiering_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/tablet"
	"github.com/seglog/seglog/tiering"
)

func ExampleOpen() {
	dir, _ := os.MkdirTemp("", "seglog-example-")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

	m, err := tablet.OpenManager(nil, filepath.Join(dir, "data"), tablet.ManagerOptions{Tablet: tablet.Options{Logger: quiet}})
	if err != nil {
		panic(err)
	}
	defer m.Close()
	cfg := tablet.DefaultConfig()
	cfg.SegmentBytes = 4096     // one batch a segment here
	cfg.LocalRetentionBytes = 0 // tiered segments need not stay local
	tab, _ := m.GetOrCreate(tablet.TopicPartition{Topic: "logs", Partition: 0}, &cfg)
	for i := range 4 {
		recs := make([]record.Record, 30)
		for j := range recs {
			recs[j].Value = fmt.Appendf(nil, "line %03d %0100d", i*30+j, 0)
		}
		_, _ = tab.AppendRecords(recs, record.None, tablet.AppendOptions{})
	}

	// A file:// store; s3://bucket/prefix?endpoint=…&path-style=true is the same.
	store := "file://" + filepath.Join(dir, "store")
	s, err := tiering.OpenStore(ctx, store, nil)
	if err != nil {
		panic(err)
	}
	_ = tiering.SaveStoreURL(nil, tab.Dir(), store) // a later open attaches the same store
	tier, err := tiering.Open(ctx, tab, "logs", 0, s, &tiering.Options{Logger: quiet})
	if err != nil {
		panic(err)
	}
	defer tier.Close()
	up, _ := tier.Upload(ctx, nil) // the sealed segments
	_, _ = tier.DeleteLocal()      // local copies of what is tiered
	o := tab.Offsets()
	fmt.Println("objects:", len(up.Objects), "local log start:", o.LocalLogStartOffset, "log end:", o.LogEndOffset)

	// Reads below the local log start go to the store.
	n := 0
	for r, err := range tab.Scan(0, tablet.ReadHighWatermark) {
		if err != nil {
			panic(err)
		}
		if n == 0 {
			fmt.Println(string(r.Value[:8]))
		}
		n++
	}
	fmt.Println("records:", n)
	// Output:
	// objects: 3 local log start: 90 log end: 120
	// line 000
	// records: 120
}
