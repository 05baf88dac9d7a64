package tablet

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/seglog/seglog/leaderepoch"
	"github.com/seglog/seglog/logfile"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/vfs"
	"github.com/seglog/seglog/writerstate"
)

func TestAppendReadCloseReopen(t *testing.T) {
	e := newEnv(t, vfs.OS, t.TempDir())
	cfg := DefaultConfig()
	cfg.SegmentBytes = 4096
	tab := e.create(cfg)
	var last int64
	for i := range 50 {
		res, err := tab.Append(batch(t, 3, 1_700_000_000_000+int64(i), 100), AppendOptions{})
		require.NoError(t, err)
		require.Equal(t, int64(i*3), res.FirstOffset)
		require.Equal(t, int64(i*3+2), res.LastOffset)
		require.False(t, res.Duplicate)
		last = res.LastOffset
	}
	o := tab.Offsets()
	require.Equal(t, Offsets{LogEndOffset: last + 1, HighWatermark: last + 1, LastStableOffset: last + 1,
		RecoveryPoint: o.RecoveryPoint, DurableOffset: o.DurableOffset}, o)
	require.GreaterOrEqual(t, len(tab.Segments()), 4, "rolled by size")
	require.Equal(t, seq(0, last+1), offsetsOf(readAll(t, tab, 0, ReadHighWatermark)))
	require.Equal(t, seq(31, last+1), offsetsOf(readAll(t, tab, 31, ReadHighWatermark)), "from inside a batch")

	e.reopen()
	require.True(t, e.m.Loaded.CleanShutdown)
	tab = e.tablet()
	require.Equal(t, last+1, tab.Offsets().LogEndOffset)
	require.Equal(t, last+1, tab.Offsets().RecoveryPoint, "a clean close flushed everything")
	require.Equal(t, cfg, tab.Config(), "the config is kept in the tablet directory")
	require.Equal(t, seq(0, last+1), offsetsOf(readAll(t, tab, 0, ReadHighWatermark)))
	res, err := tab.Append(batch(t, 1, 1_700_000_001_000, 10), AppendOptions{})
	require.NoError(t, err)
	require.Equal(t, last+1, res.FirstOffset)
}

func TestReadBounds(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/data")
	tab := e.create(DefaultConfig())
	_, err := tab.Read(0, ReadOptions{MaxBytes: 100})
	require.NoError(t, err, "offset 0 of an empty log is the log end")
	_, err = tab.Read(1, ReadOptions{MaxBytes: 100})
	require.ErrorIs(t, err, ErrOffsetOutOfRange)
	_, err = tab.Append(batch(t, 5, 1, 10), AppendOptions{})
	require.NoError(t, err)
	res, err := tab.Read(5, ReadOptions{MaxBytes: 100})
	require.NoError(t, err)
	require.Zero(t, res.Records.Size(), "at the log end")
	res.Close()
	res, err = tab.Read(0, ReadOptions{MaxBytes: 10})
	require.NoError(t, err)
	require.True(t, res.FirstEntryIncomplete)
	require.Zero(t, res.Records.Size())
	res.Close()
	_, err = tab.Read(-1, ReadOptions{})
	require.ErrorIs(t, err, ErrOffsetOutOfRange)
}

func TestSecondManagerIsRefused(t *testing.T) {
	d := t.TempDir()
	newEnv(t, vfs.OS, d)
	_, err := OpenManager(vfs.OS, d, ManagerOptions{})
	require.ErrorIs(t, err, ErrLocked)
}

func TestCreateRefusesBadNamesAndDuplicates(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/data")
	e.create(DefaultConfig())
	_, err := e.m.Create(tp0, nil)
	require.ErrorIs(t, err, ErrExists)
	for _, bad := range []string{"", ".", "..", "a/b", "x y"} {
		_, err := e.m.Create(checkpoint.TopicPartition{Topic: bad}, nil)
		require.Error(t, err, bad)
	}
	cfg := DefaultConfig()
	cfg.SegmentBytes = 1
	_, err = e.m.Create(checkpoint.TopicPartition{Topic: "x"}, &cfg)
	require.ErrorIs(t, err, ErrConfig)
}

// A topic's partitions share one topic id, as Kafka's do; another topic
// gets its own, and a deleted topic's id goes with it.
func TestPartitionsShareTheirTopicID(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/data")
	_, ok := e.m.TopicID("x")
	require.False(t, ok)
	for p := range int32(3) {
		_, err := e.m.Create(checkpoint.TopicPartition{Topic: "x", Partition: p}, nil)
		require.NoError(t, err)
	}
	_, err := e.m.Create(checkpoint.TopicPartition{Topic: "y"}, nil)
	require.NoError(t, err)
	x, ok := e.m.TopicID("x")
	require.True(t, ok)
	for p := range int32(3) {
		id, ok, err := checkpoint.ReadPartitionMetadata(e.fsys, filepath.Join(e.dir, fmt.Sprintf("x-%d", p), checkpoint.PartitionMetadataFile))
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, x, id, "partition %d", p)
	}
	y, _ := e.m.TopicID("y")
	require.NotEqual(t, x, y)
	e.reopen()
	again, ok := e.m.TopicID("x")
	require.True(t, ok)
	require.Equal(t, x, again, "the id loaded with the tablets")
	name, ok := e.m.TopicByID(x)
	require.True(t, ok)
	require.Equal(t, "x", name)
	for p := range int32(3) {
		require.NoError(t, e.m.Delete(checkpoint.TopicPartition{Topic: "x", Partition: p}))
		_, ok = e.m.TopicByID(x)
		require.Equal(t, p < 2, ok, "the id names the topic while a partition is left")
	}
	_, ok = e.m.TopicID("x")
	require.False(t, ok)
	_, err = e.m.Create(checkpoint.TopicPartition{Topic: "x"}, nil)
	require.NoError(t, err)
	recreated, _ := e.m.TopicID("x")
	require.NotEqual(t, x, recreated, "a topic made again gets a new id")
	name, _ = e.m.TopicByID(recreated)
	require.Equal(t, "x", name)
}

func TestConfigSet(t *testing.T) {
	c := DefaultConfig()
	require.NoError(t, c.Set("segment.bytes", "1048576"))
	require.NoError(t, c.Set("message.timestamp.type", "LogAppendTime"))
	require.NoError(t, c.Set("preallocate", "true"))
	require.NoError(t, c.Set("retention.ms", "-1"))
	require.Equal(t, int64(1048576), c.SegmentBytes)
	require.Equal(t, record.LogAppendTime, c.TimestampType)
	for _, bad := range [][2]string{{"segment.bytes", "x"}, {"segment.bytes", "3"}, {"nope", "1"},
		{"preallocate", "yes"}, {"message.timestamp.type", "Now"}, {"retention.ms", "-2"}} {
		before := c
		require.ErrorIs(t, c.Set(bad[0], bad[1]), ErrConfig, "%v", bad)
		require.Equal(t, before, c, "a refused value changes nothing")
	}
	require.True(t, c.IsSet("segment.bytes"))
	require.False(t, c.IsSet("index.interval.bytes"))
	require.NoError(t, c.Set("cleanup.policy", "delete")) // the default, set explicitly
	got := formatConfig(c)
	require.Contains(t, string(got), "segment.bytes=1048576\n")
	require.Contains(t, string(got), "cleanup.policy=delete\n", "a config set to its default is the tablet's own")
	require.NotContains(t, string(got), "index.interval.bytes", "defaults are not written")
	c.Unset("cleanup.policy")
	require.NotContains(t, string(formatConfig(c)), "cleanup.policy", "unset, it is the default again")
	require.False(t, c.Defaults().IsSet("segment.bytes"))
}

// A tablet's config file keeps which configs it sets: read back, those are
// set and the ones only differing from Kafka's defaults (a broker's
// defaults at creation) are not; a file written before the list was kept
// sets none.
func TestConfigFileKeepsWhatIsSet(t *testing.T) {
	dir := t.TempDir()
	brokerDefaults := DefaultConfig()
	require.NoError(t, brokerDefaults.Set("retention.ms", "1000"))
	c := brokerDefaults.Defaults()
	require.NoError(t, c.Set("cleanup.policy", "delete"))
	require.NoError(t, writeConfig(vfs.OS, filepath.Join(dir, ConfigFile), c))
	got, err := ReadConfig(nil, dir)
	require.NoError(t, err)
	require.Equal(t, int64(1000), got.RetentionMs, "kept, so a tool without the broker's defaults keeps its retention")
	require.False(t, got.IsSet("retention.ms"))
	require.True(t, got.IsSet("cleanup.policy"))
	require.Equal(t, c, got)

	require.NoError(t, os.WriteFile(filepath.Join(dir, ConfigFile), []byte("retention.ms=1000\n"), 0o644))
	got, err = ReadConfig(nil, dir)
	require.NoError(t, err)
	require.Equal(t, int64(1000), got.RetentionMs)
	require.False(t, got.IsSet("retention.ms"), "an older file sets nothing")
}

// Scenario 75: testDuplicateAppends.
func TestDuplicateAppends(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/data")
	tab := e.create(DefaultConfig())
	const pid, epoch = 4, 0
	var offsets [][2]int64
	for i := range 10 {
		res, err := tab.Append(producerBatch(t, pid, epoch, int32(i*2), 2, false, 1), AppendOptions{})
		require.NoError(t, err)
		offsets = append(offsets, [2]int64{res.FirstOffset, res.LastOffset})
	}
	end := tab.Offsets().LogEndOffset
	// A retry of the 5th-from-last batch returns the original offsets and
	// writes nothing.
	res, err := tab.Append(producerBatch(t, pid, epoch, 10, 2, false, 1), AppendOptions{})
	require.NoError(t, err)
	require.True(t, res.Duplicate)
	require.Equal(t, offsets[5], [2]int64{res.FirstOffset, res.LastOffset})
	require.Equal(t, end, tab.Offsets().LogEndOffset)
	// An older batch, or part of one, is out of order.
	_, err = tab.Append(producerBatch(t, pid, epoch, 8, 2, false, 1), AppendOptions{})
	require.ErrorIs(t, err, writerstate.ErrOutOfOrderSequence)
	_, err = tab.Append(producerBatch(t, pid, epoch, 11, 1, false, 1), AppendOptions{})
	require.ErrorIs(t, err, writerstate.ErrOutOfOrderSequence)
	require.Equal(t, end, tab.Offsets().LogEndOffset, "rejections write nothing")
	// The next sequence goes on.
	res, err = tab.Append(producerBatch(t, pid, epoch, 20, 2, false, 1), AppendOptions{})
	require.NoError(t, err)
	require.Equal(t, end, res.FirstOffset)
	// A fenced epoch is refused.
	_, err = tab.Append(producerBatch(t, pid, epoch+1, 0, 1, false, 1), AppendOptions{})
	require.NoError(t, err)
	_, err = tab.Append(producerBatch(t, pid, epoch, 22, 1, false, 1), AppendOptions{})
	require.ErrorIs(t, err, writerstate.ErrInvalidProducerEpoch)
}

// Scenario 76: testSizeBasedLogRoll.
func TestSizeBasedRoll(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/data")
	one := batch(t, 1, 1, 100)
	cfg := DefaultConfig()
	cfg.SegmentBytes = int64(len(one)) * 3
	tab := e.create(cfg)
	for range 9 {
		_, err := tab.Append(batch(t, 1, 1, 100), AppendOptions{})
		require.NoError(t, err)
	}
	require.Len(t, tab.Segments(), 3, "three batches fill a segment exactly: no roll until the fourth")
}

// Scenario 76: testTimeBasedLogRollJitter.
func TestTimeBasedRollJitter(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/data")
	cfg := DefaultConfig()
	cfg.SegmentMs = 60 * 60 * 1000
	cfg.SegmentJitterMs = 0
	tab := e.create(cfg)
	now := e.clock.Now().UnixMilli()
	_, err := tab.Append(batch(t, 1, now, 10), AppendOptions{})
	require.NoError(t, err)
	require.Len(t, tab.Segments(), 1)
	// Time is the batches' max timestamps, not the clock.
	_, err = tab.Append(batch(t, 1, now+cfg.SegmentMs-1, 10), AppendOptions{})
	require.NoError(t, err)
	require.Len(t, tab.Segments(), 1)
	_, err = tab.Append(batch(t, 1, now+cfg.SegmentMs+1, 10), AppendOptions{})
	require.NoError(t, err)
	require.Len(t, tab.Segments(), 2)
}

// Scenario 76: testIndexResizingAtTruncation.
func TestIndexResizingAtTruncation(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/data")
	one := batch(t, 1, 1, 100)
	cfg := DefaultConfig()
	cfg.SegmentBytes = int64(len(one)) * 5
	cfg.IndexIntervalBytes = 1
	cfg.SegmentIndexBytes = 1200
	tab := e.create(cfg)
	for range 7 {
		_, err := tab.Append(batch(t, 1, 1, 100), AppendOptions{})
		require.NoError(t, err)
	}
	segs := tab.Segments()
	require.Len(t, segs, 2)
	first := floorSeg(tab.view().segs, 0)
	info, err := first.IndexInfo()
	require.NoError(t, err)
	require.Equal(t, info.OffsetEntries, info.OffsetSlots, "a sealed segment's index is trimmed to its entries")
	require.NoError(t, tab.TruncateTo(3))
	require.Len(t, tab.Segments(), 1)
	info, err = first.IndexInfo()
	require.NoError(t, err)
	require.Equal(t, 1200/8, info.OffsetSlots, "the active segment's index is back at its full size")
	require.Equal(t, int64(3), tab.Offsets().LogEndOffset)
}

// Scenario 76: testTakeSnapshotOnRollAndDeleteSnapshotOnRecoveryPointCheckpoint.
func TestSnapshotOnRoll(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/data")
	cfg := DefaultConfig()
	cfg.SegmentBytes = int64(len(producerBatch(t, 1, 0, 0, 1, false, 1)))
	tab := e.create(cfg)
	for i := range 3 {
		_, err := tab.Append(producerBatch(t, 1, 0, int32(i), 1, false, 1), AppendOptions{})
		require.NoError(t, err)
	}
	tab.mu.Lock()
	snaps := tab.mu.state.Snapshots()
	tab.mu.Unlock()
	require.Equal(t, []int64{1, 2}, snaps, "a snapshot at each roll")
	require.NoError(t, tab.Flush())
	require.Equal(t, int64(3), tab.Offsets().RecoveryPoint)
	_, err := tab.DeleteRecordsBefore(2)
	require.NoError(t, err)
	tab.mu.Lock()
	snaps = tab.mu.state.Snapshots()
	tab.mu.Unlock()
	require.Equal(t, []int64{2}, snaps, "snapshots below the log start go with their segments")
}

// Scenario 76: testAbortedTransactionSpanningMultipleSegments.
func TestAbortedTransactionSpanningSegments(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/data")
	cfg := DefaultConfig()
	cfg.SegmentBytes = 150
	tab := e.create(cfg)
	const pid = 7
	var first int64 = -1
	for i := range 6 {
		res, err := tab.Append(producerBatch(t, pid, 0, int32(i*2), 2, true, 1), AppendOptions{})
		require.NoError(t, err)
		if first < 0 {
			first = res.FirstOffset
		}
	}
	require.Greater(t, len(tab.Segments()), 2, "the transaction spans segments")
	require.Equal(t, first, tab.Offsets().LastStableOffset, "the open transaction holds the LSO")
	require.Empty(t, readAll(t, tab, 0, ReadCommitted))
	res, err := tab.Append(marker(t, pid, 0, true, 1), AppendOptions{Origin: record.OriginCoordinator})
	require.NoError(t, err)
	require.Equal(t, res.LastOffset+1, tab.Offsets().LastStableOffset)
	// Read from any segment of the transaction: its records are aborted.
	for _, s := range tab.Segments() {
		got := readAll(t, tab, s.BaseOffset, ReadCommitted)
		require.Empty(t, got, "from %d", s.BaseOffset)
		if s.BaseOffset < res.LastOffset { // not the marker's own segment
			require.NotEmpty(t, readAll(t, tab, s.BaseOffset, ReadHighWatermark))
		}
	}
	// A committed transaction after it is visible.
	_, err = tab.Append(producerBatch(t, pid, 0, 12, 2, true, 1), AppendOptions{})
	require.NoError(t, err)
	_, err = tab.Append(marker(t, pid, 0, false, 1), AppendOptions{Origin: record.OriginCoordinator})
	require.NoError(t, err)
	require.Len(t, readAll(t, tab, 0, ReadCommitted), 2)
	// Markers only from the coordinator.
	_, err = tab.Append(marker(t, pid, 0, false, 1), AppendOptions{})
	require.ErrorIs(t, err, record.ErrInvalidRecord)
}

func TestLogAppendTime(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/data")
	cfg := DefaultConfig()
	cfg.TimestampType = record.LogAppendTime
	tab := e.create(cfg)
	res, err := tab.Append(batch(t, 3, 5, 10), AppendOptions{})
	require.NoError(t, err)
	require.Equal(t, e.clock.Now().UnixMilli(), res.LogAppendTime)
	for _, r := range readAll(t, tab, 0, ReadHighWatermark) {
		require.Equal(t, res.LogAppendTime, r.Timestamp)
	}
}

// A plain record without a timestamp is stamped with the append time (as a
// Kafka producer stamps one), so the default retention keeps it; one with a
// timestamp keeps its own.
func TestAppendRecordsStampsMissingTimestamps(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/data")
	tab := e.create(DefaultConfig())
	recs := []record.Record{{Value: []byte("unset")}, {Timestamp: record.NoTimestamp, Value: []byte("none")},
		{Timestamp: 1_690_000_000_000, Value: []byte("own")}}
	_, err := tab.AppendRecords(recs, record.None, AppendOptions{})
	require.NoError(t, err)
	require.Zero(t, recs[0].Timestamp, "the caller's records are not changed")
	now := e.clock.Now().UnixMilli()
	got := readAll(t, tab, 0, ReadHighWatermark)
	require.Len(t, got, 3)
	require.Equal(t, []int64{now, now, 1_690_000_000_000}, []int64{got[0].Timestamp, got[1].Timestamp, got[2].Timestamp})

	e.clock.Advance(24 * time.Hour)
	res, err := tab.ApplyRetention()
	require.NoError(t, err)
	require.Zero(t, res.Segments, "a day later, the default 7-day retention keeps them")
	require.Zero(t, tab.Offsets().LogStartOffset)
}

func TestRetention(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/data")
	one := batch(t, 1, 1, 100)
	cfg := DefaultConfig()
	cfg.SegmentBytes = int64(len(one)) * 2
	cfg.RetentionBytes = int64(len(one)) * 5
	cfg.FileDeleteDelayMs = 0
	tab := e.create(cfg)
	now := e.clock.Now().UnixMilli()
	for i := range 10 {
		_, err := tab.Append(batch(t, 1, now+int64(i), 100), AppendOptions{})
		require.NoError(t, err)
	}
	require.Len(t, tab.Segments(), 5)
	res, err := tab.ApplyRetention()
	require.NoError(t, err)
	require.Equal(t, 2, res.Segments, "down to at most 5 batches: three segments of two")
	require.Equal(t, int64(4), tab.Offsets().LogStartOffset)
	_, err = tab.Read(3, ReadOptions{MaxBytes: 100})
	require.ErrorIs(t, err, ErrOffsetOutOfRange)
	require.Equal(t, seq(4, 10), offsetsOf(readAll(t, tab, 4, ReadHighWatermark)))

	// By time: everything older than retention.ms, the active segment too
	// (an empty one is rolled so the log end stays).
	cfg.RetentionBytes = -1
	cfg.RetentionMs = 1000
	require.NoError(t, tab.SetConfig(cfg))
	e.clock.Advance(time.Hour)
	res, err = tab.ApplyRetention()
	require.NoError(t, err)
	require.Equal(t, 3, res.Segments)
	o := tab.Offsets()
	require.Equal(t, int64(10), o.LogStartOffset)
	require.Equal(t, int64(10), o.LogEndOffset)
	require.Len(t, tab.Segments(), 1)
	out, err := tab.Append(batch(t, 1, e.clock.Now().UnixMilli(), 100), AppendOptions{})
	require.NoError(t, err)
	require.Equal(t, int64(10), out.FirstOffset)
}

func TestDeletedSegmentStaysReadableUntilReleased(t *testing.T) {
	e := newEnv(t, vfs.OS, t.TempDir())
	one := batch(t, 1, 1, 100)
	cfg := DefaultConfig()
	cfg.SegmentBytes = int64(len(one))
	cfg.FileDeleteDelayMs = 0
	tab := e.create(cfg)
	for range 3 {
		_, err := tab.Append(batch(t, 1, 1, 100), AppendOptions{})
		require.NoError(t, err)
	}
	res, err := tab.Read(0, ReadOptions{MaxBytes: 1000})
	require.NoError(t, err)
	_, err = tab.DeleteRecordsBefore(2)
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(tab.Dir(), logfile.Filename(0, logfile.Log)))
	require.ErrorIs(t, err, os.ErrNotExist, "renamed at once")
	data, err := res.Records.AppendTo(nil)
	require.NoError(t, err, "the reader still reads it")
	require.Equal(t, one[16:], data[16:], "the bytes after the offset and the leader epoch stamped")
	res.Close()
}

func TestTruncateToAndFully(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/data")
	cfg := DefaultConfig()
	cfg.SegmentBytes = 400
	tab := e.create(cfg)
	for i := range 12 {
		_, err := tab.Append(producerBatch(t, 3, 0, int32(i*2), 2, false, 1), AppendOptions{})
		require.NoError(t, err)
	}
	require.Greater(t, len(tab.Segments()), 2)
	require.NoError(t, tab.TruncateTo(7))
	o := tab.Offsets()
	require.Equal(t, int64(6), o.LogEndOffset, "the whole batch holding 7 goes")
	require.Equal(t, int64(6), o.HighWatermark)
	require.Equal(t, seq(0, 6), offsetsOf(readAll(t, tab, 0, ReadLogEnd)))
	// The writer state went back too: sequence 6 is next again.
	res, err := tab.Append(producerBatch(t, 3, 0, 6, 2, false, 1), AppendOptions{})
	require.NoError(t, err)
	require.Equal(t, int64(6), res.FirstOffset)

	require.NoError(t, tab.TruncateFullyAndStartAt(100))
	o = tab.Offsets()
	require.Equal(t, Offsets{LogStartOffset: 100, LocalLogStartOffset: 100, HighWatermark: 100, LastStableOffset: 100,
		LogEndOffset: 100, RecoveryPoint: 100, DurableOffset: 100}, o)
	res, err = tab.Append(batch(t, 1, 1, 10), AppendOptions{})
	require.NoError(t, err)
	require.Equal(t, int64(100), res.FirstOffset)
	e.reopen()
	require.Equal(t, int64(101), e.tablet().Offsets().LogEndOffset)
	require.Equal(t, int64(100), e.tablet().Offsets().LogStartOffset)
}

func TestReplicationAppend(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/data")
	tab := e.create(DefaultConfig())
	b := batch(t, 2, 1, 10)
	parsed, _, err := record.ParseBatch(b)
	require.NoError(t, err)
	parsed.SetBaseOffset(10)
	parsed.SetPartitionLeaderEpoch(3)
	res, err := tab.Append(b, AppendOptions{Origin: record.OriginReplication})
	require.NoError(t, err)
	require.Equal(t, [2]int64{10, 11}, [2]int64{res.FirstOffset, res.LastOffset})
	_, err = tab.Append(b, AppendOptions{Origin: record.OriginReplication})
	require.ErrorIs(t, err, ErrUnexpectedAppendOffset)
	tab.mu.Lock()
	latest, _ := tab.mu.epochs.LatestEpoch()
	tab.mu.Unlock()
	require.Equal(t, int32(3), latest)
}

// A replica that led at an epoch and appended nothing, then follows a
// leader that has records of an older epoch past its log end: its
// truncation (to at or past its log end) drops the empty epoch, so the
// records it fetches next are not claimed by it (the randomized model of
// replica/state found the cache saying the wrong epoch).
func TestTruncateToDropsAnEmptyEpoch(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/data")
	tab := e.create(DefaultConfig())
	replicated := func(base int64, epoch int32) {
		b := batch(t, 2, 1, 10)
		parsed, _, err := record.ParseBatch(b)
		require.NoError(t, err)
		parsed.SetBaseOffset(base)
		parsed.SetPartitionLeaderEpoch(epoch)
		_, err = tab.Append(b, AppendOptions{Origin: record.OriginReplication})
		require.NoError(t, err)
	}
	replicated(0, 0)
	require.NoError(t, tab.BecomeLeader(1))
	require.Equal(t, []leaderepoch.Entry{{Epoch: 0, StartOffset: 0}, {Epoch: 1, StartOffset: 2}}, tab.LeaderEpochs())
	require.NoError(t, tab.TruncateTo(3))
	require.Equal(t, []leaderepoch.Entry{{Epoch: 0, StartOffset: 0}}, tab.LeaderEpochs())
	require.Equal(t, int64(2), tab.Offsets().LogEndOffset, "no record went")
	replicated(2, 0)
	require.Equal(t, []leaderepoch.Entry{{Epoch: 0, StartOffset: 0}}, tab.LeaderEpochs())
	require.NoError(t, tab.BecomeLeader(2), "the epochs seen stay seen: a later one is taken")
	require.Error(t, tab.BecomeLeader(1))
}

func TestDeleteTablet(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/data")
	tab := e.create(DefaultConfig())
	_, err := tab.Append(batch(t, 1, 1, 10), AppendOptions{})
	require.NoError(t, err)
	require.NoError(t, e.m.Delete(tp0))
	_, ok := e.m.Get(tp0)
	require.False(t, ok)
	names, err := e.fsys.List("/data")
	require.NoError(t, err)
	for _, n := range names {
		require.NotContains(t, n, "events")
	}
	_, err = tab.Append(batch(t, 1, 1, 10), AppendOptions{})
	require.ErrorIs(t, err, ErrClosed)
	require.True(t, errors.Is(e.m.Delete(tp0), ErrNotFound))
}

// A tablet of many segments opens without opening them, and keeps at most
// MaxOpenSegments sealed segments open however many it reads.
func TestOpenSegmentsAreBounded(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/data")
	opts := e.options()
	opts.Tablet.MaxOpenSegments = 5
	cfg := DefaultConfig()
	cfg.SegmentBytes = int64(len(batch(t, 1, 1, 10)))
	cfg.SegmentIndexBytes = 1024
	e.m.Close()
	m, err := OpenManager(e.fsys, e.dir, opts)
	require.NoError(t, err)
	tab, err := m.Create(tp0, &cfg)
	require.NoError(t, err)
	for range 300 {
		_, err := tab.Append(batch(t, 1, 1, 10), AppendOptions{})
		require.NoError(t, err)
	}
	tab.bg.Wait() // the flushes after rolls use segments, which then cannot be parked
	tab.ParkIdle()
	open, _ := tab.OpenSegments()
	require.LessOrEqual(t, open, 5, "rolled segments are parked beyond the limit")
	require.NoError(t, m.Close())

	m, err = OpenManager(e.fsys, e.dir, opts)
	require.NoError(t, err)
	defer m.Close()
	tab, _ = m.Get(tp0)
	require.Len(t, tab.Segments(), 300)
	open, _ = tab.OpenSegments()
	require.LessOrEqual(t, open, 5, "a clean open opens no sealed segment beyond the limit")
	for o := int64(0); o < 300; o += 7 {
		got := readAll(t, tab, o, ReadHighWatermark)
		require.Len(t, got, int(300-o))
	}
	open, parked := tab.OpenSegments()
	require.LessOrEqual(t, open, 5)
	require.Positive(t, parked)
}

// A directory a crash left while a tablet was being created (empty, or
// only the temporary files of its first writes) is reused by the next
// Create; one holding anything else is in the way.
func TestCreateReusesAnUnfinishedCreation(t *testing.T) {
	mem := vfs.NewMem()
	e := newEnv(t, mem, "/data")
	require.NoError(t, mem.MkdirAll("/data/half-0", 0o755))
	require.NoError(t, vfs.WriteFileSynced(mem, "/data/half-0/"+checkpoint.PartitionMetadataFile+vfs.TempSuffix, []byte("version: 0\n")))
	tab, err := e.m.Create(checkpoint.TopicPartition{Topic: "half"}, nil)
	require.NoError(t, err)
	names, err := mem.List(tab.Dir())
	require.NoError(t, err)
	require.NotContains(t, names, checkpoint.PartitionMetadataFile+vfs.TempSuffix)
	require.Contains(t, names, checkpoint.PartitionMetadataFile)

	require.NoError(t, mem.MkdirAll("/data/other-0", 0o755))
	require.NoError(t, vfs.WriteFileSynced(mem, "/data/other-0/notes.txt", []byte("mine")))
	_, err = e.m.Create(checkpoint.TopicPartition{Topic: "other"}, nil)
	require.ErrorIs(t, err, ErrExists)
	data, err := vfs.ReadFile(mem, "/data/other-0/notes.txt")
	require.NoError(t, err)
	require.Equal(t, "mine", string(data), "a file not ours is left alone")
}

// compression.type other than producer stores every batch with the
// topic's codec (as Kafka's broker recompresses), its records those the
// producer sent; a batch already of that codec, and a transaction marker,
// is stored as it came; producer keeps each batch's own.
func TestCompressionType(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/data")
	cfg := DefaultConfig()
	require.NoError(t, cfg.Set("compression.type", "zstd"))
	require.Error(t, cfg.Set("compression.type", "brotli"))
	require.Equal(t, "zstd", cfg.CompressionType)
	tab := e.create(cfg)
	build := func(c record.Compression, n int) []byte {
		b := record.NewBuilder(c)
		b.SetProducer(9, 0, int32(tab.Offsets().LogEndOffset))
		b.SetTransactional(true)
		for i := range n {
			require.NoError(t, b.Append(record.Record{Timestamp: 1000 + int64(i), Key: fmt.Appendf(nil, "k%d", i), Value: bytes.Repeat([]byte("v"), 200)}))
		}
		out, err := b.Build()
		require.NoError(t, err)
		return out.Bytes()
	}
	for _, c := range []record.Compression{record.None, record.Gzip, record.Snappy, record.LZ4, record.Zstd} {
		_, err := tab.Append(build(c, 5), AppendOptions{})
		require.NoError(t, err, "%v", c)
	}
	_, err := tab.Append(marker(t, 9, 0, false, 2000), AppendOptions{Origin: record.OriginCoordinator})
	require.NoError(t, err)
	var codecs []record.Compression
	var control int
	f := new(FetchResult)
	require.NoError(t, tab.ReadInto(f, 0, ReadOptions{MaxBytes: 1 << 20, Isolation: ReadLogEnd}))
	data := make([]byte, f.Records.Size())
	_, err = f.Records.ReadAt(data, 0)
	require.NoError(t, err)
	f.Close()
	for len(data) > 0 {
		h, size, err := record.ParseHeader(data)
		require.NoError(t, err)
		if h.Attributes.IsControl() {
			control++
			require.Equal(t, record.None, h.Attributes.Compression(), "a marker as it came")
		} else {
			codecs = append(codecs, h.Attributes.Compression())
		}
		data = data[size:]
	}
	require.Equal(t, 1, control)
	require.Equal(t, []record.Compression{record.Zstd, record.Zstd, record.Zstd, record.Zstd, record.Zstd}, codecs)
	recs := readAll(t, tab, 0, ReadCommitted)
	require.Len(t, recs, 25)
	for i, r := range recs {
		require.Equal(t, fmt.Sprintf("k%d", i%5), string(r.Key))
		require.Equal(t, int64(1000+i%5), r.Timestamp)
	}
}

// ChangedFor wakes a reader only for what it may read: an append (not
// committed yet: the high watermark is a leader's, set by hand) wakes a
// follower's wait and not a consumer's; the high watermark's move wakes
// the consumer's and not the follower's; Changed wakes at both.
func TestChangedForWakesOnlyWhatItsReaderMayRead(t *testing.T) {
	e := newEnv(t, vfs.OS, t.TempDir())
	tab := e.create(DefaultConfig())
	require.NoError(t, tab.SetManualHighWatermark(true))
	closed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	follower, consumer, committed, every := tab.ChangedFor(ReadLogEnd), tab.ChangedFor(ReadHighWatermark), tab.ChangedFor(ReadCommitted), tab.Changed()
	_, err := tab.Append(batch(t, 3, 1_700_000_000_000, 10), AppendOptions{})
	require.NoError(t, err)
	require.True(t, closed(follower), "the log end moved")
	require.False(t, closed(consumer), "nothing committed yet")
	require.False(t, closed(committed))
	require.True(t, closed(every))

	follower, every = tab.ChangedFor(ReadLogEnd), tab.Changed()
	require.NoError(t, tab.SetHighWatermark(3))
	require.True(t, closed(consumer), "the high watermark moved")
	require.True(t, closed(committed), "so did the last stable offset")
	require.False(t, closed(follower), "the log end did not")
	require.True(t, closed(every))

	consumer = tab.ChangedFor(ReadHighWatermark)
	require.NoError(t, tab.SetHighWatermark(3))
	require.False(t, closed(consumer), "no move, no wake")
	_, err = tab.DeleteRecordsBefore(1)
	require.NoError(t, err)
	require.True(t, closed(consumer), "the log start moved")
	require.True(t, closed(follower))
}
