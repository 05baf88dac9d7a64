package tablet_test

import (
	"fmt"
	"os"

	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/tablet"
)

// exampleDir is a scratch data directory for an example; remove it after.
func exampleDir() string {
	d, err := os.MkdirTemp("", "seglog-example-")
	if err != nil {
		panic(err)
	}
	return d
}

func ExampleOpenManager() {
	dir := exampleDir()
	defer os.RemoveAll(dir)

	// nil is the OS filesystem; the zero options are Kafka's defaults.
	m, err := tablet.OpenManager(nil, dir, tablet.ManagerOptions{})
	if err != nil {
		panic(err)
	}
	tab, err := m.GetOrCreate(tablet.TopicPartition{Topic: "orders", Partition: 0}, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(tab.TopicPartition().DirName(), tab.Offsets().LogEndOffset)
	if err := m.Close(); err != nil { // checkpoints, then the clean-shutdown marker
		panic(err)
	}

	// A second open of a cleanly closed directory skips recovery.
	m, err = tablet.OpenManager(nil, dir, tablet.ManagerOptions{})
	if err != nil {
		panic(err)
	}
	defer m.Close()
	fmt.Println("clean:", m.Loaded.CleanShutdown, "tablets:", len(m.Tablets()))
	// Output:
	// orders-0 0
	// clean: true tablets: 1
}

func ExampleTablet_Append() {
	dir := exampleDir()
	defer os.RemoveAll(dir)
	m, _ := tablet.OpenManager(nil, dir, tablet.ManagerOptions{})
	defer m.Close()
	tab, _ := m.GetOrCreate(tablet.TopicPartition{Topic: "payments", Partition: 0}, nil)

	// A batch as an idempotent Kafka producer sends it: producer 42, epoch
	// 0, first sequence 0.
	b := record.NewBuilder(record.Zstd)
	b.SetProducer(42, 0, 0)
	for i := range 3 {
		_ = b.Append(record.Record{Timestamp: 1_764_583_200_000, Value: fmt.Appendf(nil, "payment %d", i)})
	}
	batch, err := b.Build()
	if err != nil {
		panic(err)
	}
	// Append stamps the offsets in place: keep a copy for the retry.
	res, err := tab.Append(append([]byte(nil), batch.Bytes()...), tablet.AppendOptions{Sync: true})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.FirstOffset, res.LastOffset, res.Duplicate)
	// The producer's retry is answered with the original offsets.
	res, err = tab.Append(append([]byte(nil), batch.Bytes()...), tablet.AppendOptions{Sync: true})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.FirstOffset, res.LastOffset, res.Duplicate)
	// A gap in the sequence is refused with Kafka's error.
	b.Reset()
	b.SetProducer(42, 0, 10)
	_ = b.Append(record.Record{Timestamp: 1_764_583_200_000, Value: []byte("out of order")})
	gap, _ := b.Build()
	_, err = tab.Append(gap.Bytes(), tablet.AppendOptions{})
	fmt.Println(tablet.ErrorName(err))
	// Output:
	// 0 2 false
	// 0 2 true
	// OUT_OF_ORDER_SEQUENCE_NUMBER
}

func ExampleTablet_Records() {
	dir := exampleDir()
	defer os.RemoveAll(dir)
	m, _ := tablet.OpenManager(nil, dir, tablet.ManagerOptions{})
	defer m.Close()
	tab, _ := m.GetOrCreate(tablet.TopicPartition{Topic: "events", Partition: 0}, nil)
	for _, v := range []string{"a", "b", "c", "d"} {
		_, _ = tab.AppendRecords([]record.Record{{Key: []byte("k"), Value: []byte(v)}}, record.None, tablet.AppendOptions{})
	}

	// From offset 1 until fn says stop.
	err := tab.Records(1, tablet.ReadHighWatermark, func(_ record.Batch, r *record.Record) bool {
		fmt.Println(r.Offset, string(r.Value))
		return r.Offset < 2
	})
	if err != nil {
		panic(err)
	}
	// Output:
	// 1 b
	// 2 c
}

func ExampleTablet_Scan() {
	dir := exampleDir()
	defer os.RemoveAll(dir)
	m, _ := tablet.OpenManager(nil, dir, tablet.ManagerOptions{})
	defer m.Close()
	tab, _ := m.GetOrCreate(tablet.TopicPartition{Topic: "events", Partition: 0}, nil)
	_, _ = tab.AppendRecords([]record.Record{{Value: []byte("x")}, {Value: []byte("y")}}, record.LZ4, tablet.AppendOptions{})

	for r, err := range tab.Scan(0, tablet.ReadCommitted) {
		if err != nil {
			panic(err)
		}
		fmt.Println(r.Offset, string(r.Value))
	}
	// Output:
	// 0 x
	// 1 y
}

func ExampleTablet_OffsetForTimestamp() {
	dir := exampleDir()
	defer os.RemoveAll(dir)
	m, _ := tablet.OpenManager(nil, dir, tablet.ManagerOptions{})
	defer m.Close()
	tab, _ := m.GetOrCreate(tablet.TopicPartition{Topic: "clicks", Partition: 0}, nil)
	const noon = 1_764_590_400_000 // 2025-12-01T12:00:00Z
	for i := range int64(5) {
		_, _ = tab.AppendRecords([]record.Record{{Timestamp: noon + i*60_000, Value: []byte("click")}}, record.None, tablet.AppendOptions{})
	}

	at, err := tab.OffsetForTimestamp(noon + 150_000) // 12:02:30
	if err != nil {
		panic(err)
	}
	fmt.Println(at.Offset, at.Timestamp-noon)
	end, _ := tab.OffsetForTimestamp(tablet.LatestTimestamp)
	fmt.Println(end.Offset)
	// Output:
	// 3 180000
	// 5
}
