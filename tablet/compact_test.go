package tablet

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/cleaner"
	"github.com/seglog/seglog/internal/testenv"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/recovery"
	"github.com/seglog/seglog/segment"
	"github.com/seglog/seglog/vfs"
)

// kv is one record of a compaction test: a nil value is a tombstone.
type kv struct {
	key, value string
	tombstone  bool
}

// kvBatch builds a batch of the records, timestamped ts.
func kvBatch(t *testing.T, ts int64, recs ...kv) []byte {
	b := record.NewBuilder(record.None)
	for _, r := range recs {
		rec := record.Record{Timestamp: ts, Key: []byte(r.key), Value: []byte(r.value)}
		if r.tombstone {
			rec.Value = nil
		}
		require.NoError(t, b.Append(rec))
	}
	out, err := b.Build()
	require.NoError(t, err)
	return out.Bytes()
}

func compactConfig() Config {
	cfg := DefaultConfig()
	cfg.CleanupPolicy = PolicyCompact
	cfg.SegmentBytes = 4096
	return cfg
}

// rollAndFlush seals the active segment and makes everything durable, so
// that all of the log but the (empty) active segment is cleanable.
func rollAndFlush(t *testing.T, tab *Tablet) {
	t.Helper()
	tab.mu.Lock()
	err := tab.rollLocked(tab.view().leo.offset, segment.RollNone)
	tab.mu.Unlock()
	require.NoError(t, err)
	require.NoError(t, tab.Flush())
}

// lastValues reads the tablet and returns each key's last record.
func lastValues(t *testing.T, tab *Tablet) map[string]record.Record {
	out := map[string]record.Record{}
	for _, r := range readAll(t, tab, 0, ReadHighWatermark) {
		out[string(r.Key)] = r
	}
	return out
}

// The latest record per key survives, at its own offset; everything else
// goes (Kafka's LogCleanerTest.testCleanSegments, with 20 keys).
func TestCleanKeepsTheLastRecordOfEachKey(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/data")
	tab := e.create(compactConfig())
	want := map[string]int64{}
	for i := range 200 {
		var recs []kv
		for j := range 10 {
			recs = append(recs, kv{key: fmt.Sprintf("k%d", (i*10+j)%20), value: fmt.Sprintf("v%d", i*10+j)})
		}
		res, err := tab.Append(kvBatch(t, int64(1000+i), recs...), AppendOptions{})
		require.NoError(t, err)
		for j, r := range recs {
			want[r.key] = res.FirstOffset + int64(j)
		}
	}
	rollAndFlush(t, tab)
	before := len(tab.Segments())
	require.Greater(t, before, 10)

	c, err := tab.Cleanable()
	require.NoError(t, err)
	require.Equal(t, int64(0), c.FirstDirty)
	require.Equal(t, int64(2000), c.FirstUncleanable)
	require.InDelta(t, 1.0, c.Ratio, 1e-9, "never cleaned: all dirty")

	res, err := tab.Clean(CleanOptions{})
	require.NoError(t, err)
	require.Equal(t, int64(2000), res.RecordsRead)
	require.Equal(t, int64(1980), res.RecordsRemoved)
	require.Equal(t, int64(198), res.BatchesSkipped, "only the last two batches hold a key's last record: the recopy reads no other")
	require.Equal(t, 20, res.Keys)
	require.Equal(t, int64(2000), res.CleanedTo)
	require.Equal(t, int64(2000), tab.CleanerCheckpoint())
	require.Len(t, tab.Segments(), before, "groups are of whole segments up to segment.bytes, by their sizes before")

	got := readAll(t, tab, 0, ReadHighWatermark)
	require.Len(t, got, 20)
	for _, r := range got {
		require.Equal(t, want[string(r.Key)], r.Offset, "key %s keeps its last offset", r.Key)
		require.Equal(t, fmt.Sprintf("v%d", r.Offset), string(r.Value))
	}
	// Offsets are never rewritten: a read from a removed offset gets the
	// next surviving record; the log end is where it was.
	from := readAll(t, tab, 5, ReadHighWatermark)
	require.Equal(t, int64(1980), from[0].Offset)
	require.Equal(t, int64(2000), tab.Offsets().LogEndOffset)
	ts, err := tab.OffsetForTimestamp(1001)
	require.NoError(t, err)
	require.Equal(t, int64(1980), ts.Offset, "the first surviving record at or after the time")

	// The cleaned log is dirty no more, and survives a reopen (verified).
	c, err = tab.Cleanable()
	require.NoError(t, err)
	require.Equal(t, int64(2000), c.FirstDirty)
	require.Zero(t, c.DirtyBytes)
	e.reopen()
	tab = e.tablet()
	require.Equal(t, int64(2000), tab.CleanerCheckpoint(), "the cleaner-offset-checkpoint keeps it")
	require.Len(t, readAll(t, tab, 0, ReadHighWatermark), 20)

	// The next cleaning groups the small cleaned segments into one.
	_, err = tab.Append(kvBatch(t, 3000, kv{key: "k0", value: "v2000"}), AppendOptions{})
	require.NoError(t, err)
	rollAndFlush(t, tab)
	res, err = tab.Clean(CleanOptions{})
	require.NoError(t, err)
	require.Equal(t, int64(1), res.RecordsRemoved)
	require.Equal(t, 1, res.Groups)
	require.Len(t, tab.Segments(), 2, "one cleaned segment and the active one")
	require.Len(t, readAll(t, tab, 0, ReadHighWatermark), 20)
	e.reopen()
}

// A second cleaning re-cleans the clean section with the new dirty keys,
// and the active segment is never cleaned.
func TestCleanAgainAndNeverTheActiveSegment(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/data")
	tab := e.create(compactConfig())
	for i := range 100 {
		_, err := tab.Append(kvBatch(t, 1000, kv{key: fmt.Sprintf("k%d", i%10), value: fmt.Sprintf("a%d", i)}), AppendOptions{})
		require.NoError(t, err)
	}
	rollAndFlush(t, tab)
	_, err := tab.Clean(CleanOptions{})
	require.NoError(t, err)
	require.Len(t, lastValues(t, tab), 10)
	// Key k0 again, twice, then into the active segment.
	for _, v := range []string{"b1", "b2"} {
		_, err := tab.Append(kvBatch(t, 2000, kv{key: "k0", value: v}), AppendOptions{})
		require.NoError(t, err)
	}
	rollAndFlush(t, tab)
	_, err = tab.Append(kvBatch(t, 3000, kv{key: "k1", value: "active"}), AppendOptions{})
	require.NoError(t, err)
	require.NoError(t, tab.Flush())

	c, err := tab.Cleanable()
	require.NoError(t, err)
	require.Equal(t, int64(100), c.FirstDirty)
	require.Equal(t, int64(102), c.FirstUncleanable, "the active segment is uncleanable")
	require.Greater(t, c.Ratio, 0.0)
	res, err := tab.Clean(CleanOptions{})
	require.NoError(t, err)
	require.Equal(t, int64(2), res.RecordsRemoved, "k0's old value in the clean section and b1")
	got := readAll(t, tab, 0, ReadHighWatermark)
	require.Len(t, got, 11, "ten keys plus k1 in the active segment")
	last := lastValues(t, tab)
	require.Equal(t, "b2", string(last["k0"].Value))
	require.Equal(t, "active", string(last["k1"].Value))
	e.reopen()
}

// Tombstones survive the first cleaning, and go once they are more than
// delete.retention.ms behind the cleaned point (Kafka's
// testDeletedRecords / delete.retention.ms).
func TestCleanTombstonesAfterDeleteRetention(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/data")
	cfg := compactConfig()
	cfg.DeleteRetentionMs = 1000
	tab := e.create(cfg)
	app := func(ts int64, recs ...kv) {
		_, err := tab.Append(kvBatch(t, ts, recs...), AppendOptions{})
		require.NoError(t, err)
	}
	app(1000, kv{key: "a", value: "1"}, kv{key: "b", value: "1"})
	app(1000, kv{key: "a", tombstone: true})
	rollAndFlush(t, tab)
	_, err := tab.Clean(CleanOptions{})
	require.NoError(t, err)
	got := readAll(t, tab, 0, ReadHighWatermark)
	require.Len(t, got, 2, "b and a's tombstone")
	require.Nil(t, lastValues(t, tab)["a"].Value, "the tombstone stays on the first cleaning")

	// The cleaned point moves to records within delete.retention.ms of
	// the tombstone: it stays.
	app(1500, kv{key: "c", value: "1"})
	rollAndFlush(t, tab)
	_, err = tab.Clean(CleanOptions{})
	require.NoError(t, err)
	_, err = tab.Clean(CleanOptions{}) // nothing dirty: a no-op
	require.NoError(t, err)
	app(1600, kv{key: "d", value: "1"})
	rollAndFlush(t, tab)
	_, err = tab.Clean(CleanOptions{})
	require.NoError(t, err)
	require.Contains(t, lastValues(t, tab), "a", "within delete.retention.ms of the cleaned point")

	// Then past it: the tombstone goes.
	app(5000, kv{key: "e", value: "1"})
	rollAndFlush(t, tab)
	_, err = tab.Clean(CleanOptions{}) // the clean section now ends at 1600 … the e segment is dirty
	require.NoError(t, err)
	app(6000, kv{key: "f", value: "1"})
	rollAndFlush(t, tab)
	_, err = tab.Clean(CleanOptions{})
	require.NoError(t, err)
	last := lastValues(t, tab)
	require.NotContains(t, last, "a", "removed more than delete.retention.ms behind the cleaned point")
	for _, k := range []string{"b", "c", "d", "e", "f"} {
		require.Contains(t, last, k)
	}
	e.reopen()
}

// Records of an aborted transaction go; a committed one's stay; a
// producer's last batch stays, emptied, so its sequence survives a
// restart (Kafka's testAbortedTransactionSkipped,
// testEmptyBatchRemovalWithSequenceReuse).
func TestCleanTransactionsAndProducerState(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/data")
	tab := e.create(compactConfig())
	now := e.clock.Now().UnixMilli() // producers expire a day after their last record's time
	txBatch := func(pid int64, seq int32, recs ...kv) []byte {
		b := record.NewBuilder(record.None)
		b.SetProducer(pid, 0, seq)
		b.SetTransactional(true)
		for _, r := range recs {
			require.NoError(t, b.Append(record.Record{Timestamp: now, Key: []byte(r.key), Value: []byte(r.value)}))
		}
		out, err := b.Build()
		require.NoError(t, err)
		return out.Bytes()
	}
	idem := func(pid int64, seq int32, recs ...kv) []byte {
		b := record.NewBuilder(record.None)
		b.SetProducer(pid, 0, seq)
		for _, r := range recs {
			require.NoError(t, b.Append(record.Record{Timestamp: now, Key: []byte(r.key), Value: []byte(r.value)}))
		}
		out, err := b.Build()
		require.NoError(t, err)
		return out.Bytes()
	}
	app := func(data []byte, origin record.Origin) AppendResult {
		res, err := tab.Append(data, AppendOptions{Origin: origin})
		require.NoError(t, err)
		return res
	}
	app(txBatch(7, 0, kv{key: "x", value: "aborted"}), record.OriginClient)
	app(marker(t, 7, 0, true, now), record.OriginCoordinator)
	app(txBatch(8, 0, kv{key: "y", value: "committed"}), record.OriginClient)
	app(marker(t, 8, 0, false, now), record.OriginCoordinator)
	last := app(idem(9, 0, kv{key: "z", value: "old"}), record.OriginClient)
	app(kvBatch(t, now, kv{key: "z", value: "new"}), record.OriginClient)
	rollAndFlush(t, tab)

	res, err := tab.Clean(CleanOptions{})
	require.NoError(t, err)
	require.Equal(t, int64(2), res.BatchesEmptied, "producer 9's only batch, superseded, and producer 7's aborted one, kept empty")
	got := lastValues(t, tab)
	require.NotContains(t, got, "x", "an aborted transaction's records go")
	require.Equal(t, "committed", string(got["y"].Value))
	require.Equal(t, "new", string(got["z"].Value))
	committed := readAll(t, tab, 0, ReadCommitted)
	require.Len(t, committed, 2)

	e.reopen()
	tab = e.tablet()
	// Producer 9's retry of its batch is still a duplicate after the
	// restart: the emptied batch kept its sequence and offsets.
	dup, err := tab.Append(idem(9, 0, kv{key: "z", value: "old"}), AppendOptions{})
	require.NoError(t, err)
	require.True(t, dup.Duplicate)
	require.Equal(t, last.FirstOffset, dup.FirstOffset)
	// And its next sequence is accepted.
	_, err = tab.Append(idem(9, 1, kv{key: "z", value: "next"}), AppendOptions{})
	require.NoError(t, err)
}

// min.compaction.lag.ms keeps young segments out of the dirty section.
func TestCleanMinCompactionLag(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/data")
	cfg := compactConfig()
	cfg.MinCompactionLagMs = 60_000
	tab := e.create(cfg)
	now := e.clock.Now().UnixMilli()
	_, err := tab.Append(kvBatch(t, now-120_000, kv{key: "a", value: "1"}, kv{key: "a", value: "2"}), AppendOptions{})
	require.NoError(t, err)
	rollAndFlush(t, tab)
	_, err = tab.Append(kvBatch(t, now, kv{key: "a", value: "3"}, kv{key: "a", value: "4"}), AppendOptions{})
	require.NoError(t, err)
	rollAndFlush(t, tab)
	c, err := tab.Cleanable()
	require.NoError(t, err)
	require.Equal(t, int64(2), c.FirstUncleanable, "the young segment is not cleanable")
	res, err := tab.Clean(CleanOptions{})
	require.NoError(t, err)
	require.Equal(t, int64(1), res.RecordsRemoved, "only the old segment's first a")
	require.Len(t, readAll(t, tab, 0, ReadHighWatermark), 3)
}

// max.compaction.lag.ms makes a tablet overdue whatever its ratio.
func TestCleanMaxCompactionLag(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/data")
	cfg := compactConfig()
	cfg.MaxCompactionLagMs = 60_000
	tab := e.create(cfg)
	now := e.clock.Now().UnixMilli()
	_, err := tab.Append(kvBatch(t, now-120_000, kv{key: "a", value: "1"}), AppendOptions{})
	require.NoError(t, err)
	rollAndFlush(t, tab)
	c, err := tab.Cleanable()
	require.NoError(t, err)
	require.True(t, c.Overdue)
	cfg.MaxCompactionLagMs = math.MaxInt64
	require.NoError(t, tab.SetConfig(cfg))
	c, err = tab.Cleanable()
	require.NoError(t, err)
	require.False(t, c.Overdue)
}

// A dedupe buffer too small for the dirty section cleans what fits and
// leaves the rest for the next cleaning; one too small for a batch fails.
func TestCleanWithASmallMap(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/data")
	tab := e.create(compactConfig())
	for i := range 100 {
		_, err := tab.Append(kvBatch(t, 1000, kv{key: fmt.Sprintf("k%d", i), value: "1"}, kv{key: fmt.Sprintf("k%d", i), value: "2"}), AppendOptions{})
		require.NoError(t, err)
	}
	rollAndFlush(t, tab)
	m := cleaner.NewOffsetMap(64*cleaner.EntryBytes, 0.75) // 48 keys
	res, err := tab.Clean(CleanOptions{Map: m})
	require.NoError(t, err)
	require.Less(t, res.CleanedTo, int64(200))
	require.Equal(t, res.CleanedTo/2, res.RecordsRemoved, "each mapped batch loses its first record")
	for res.CleanedTo < 200 {
		next, err := tab.Clean(CleanOptions{Map: m})
		require.NoError(t, err)
		require.Greater(t, next.CleanedTo, res.CleanedTo)
		res = next
	}
	require.Len(t, readAll(t, tab, 0, ReadHighWatermark), 100)
	_, err = tab.Append(kvBatch(t, 1000, kv{key: "a", value: "1"}, kv{key: "b", value: "1"}, kv{key: "c", value: "1"}), AppendOptions{})
	require.NoError(t, err)
	rollAndFlush(t, tab)
	_, err = tab.Clean(CleanOptions{Map: cleaner.NewOffsetMap(4*cleaner.EntryBytes, 0.5)})
	require.ErrorIs(t, err, cleaner.ErrMapTooSmall)
	e.reopen()
}

// Clean refuses a tablet that is not compacted.
func TestCleanRefusesDeletePolicy(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/data")
	tab := e.create(DefaultConfig())
	_, err := tab.Clean(CleanOptions{})
	require.ErrorIs(t, err, ErrNotCompacted)
	cfg := compactConfig()
	cfg.RemoteStorageEnable = true
	require.ErrorIs(t, cfg.Validate(), ErrConfig, "a compacted topic is not tiered")
}

// fillCompacted appends rounds of records over a few keys — values,
// tombstones, a committed and an aborted transaction — and returns each
// key's last committed value ("" for a tombstone).
func fillCompacted(t *testing.T, tab *Tablet, round int, want map[string]string) {
	now := tab.opts.Now().UnixMilli()
	for i := range 40 {
		var recs []kv
		for j := range 3 {
			k := fmt.Sprintf("k%d", (i*3+j)%8)
			if (i+j)%7 == 0 {
				recs = append(recs, kv{key: k, tombstone: true})
				want[k] = ""
			} else {
				v := fmt.Sprintf("r%d-%d-%d", round, i, j)
				recs = append(recs, kv{key: k, value: v})
				want[k] = v
			}
		}
		_, err := tab.Append(kvBatch(t, now, recs...), AppendOptions{})
		require.NoError(t, err)
	}
	for pid, abort := range map[int64]bool{int64(100 + 2*round): false, int64(101 + 2*round): true} {
		b := record.NewBuilder(record.None)
		b.SetProducer(pid, 0, 0)
		b.SetTransactional(true)
		k, v := fmt.Sprintf("t%d", pid%2), fmt.Sprintf("txn%d", pid)
		require.NoError(t, b.Append(record.Record{Timestamp: now, Key: []byte(k), Value: []byte(v)}))
		out, err := b.Build()
		require.NoError(t, err)
		_, err = tab.Append(out.Bytes(), AppendOptions{})
		require.NoError(t, err)
		_, err = tab.Append(marker(t, pid, 0, abort, now), AppendOptions{Origin: record.OriginCoordinator})
		require.NoError(t, err)
		if !abort {
			want[k] = v
		}
	}
}

// committedLastValues is lastValues under read_committed, tombstones as "".
func committedLastValues(t *testing.T, tab *Tablet) map[string]string {
	out := map[string]string{}
	for _, r := range readAll(t, tab, 0, ReadCommitted) {
		out[string(r.Key)] = string(r.Value)
	}
	return out
}

// A crash at every step of a cleaning — the process dying at each
// mutating file operation, then the unsynced changes dropped, kept or
// torn — leaves the old segments or the new ones: every key's last value
// reads back, and the directory verifies (docs/format.md §4.1 step 3).
func TestCleanCrashAtEveryStep(t *testing.T) {
	steps := 0
	for step := 0; ; step += Sweep {
		mem := vfs.NewMem()
		in := vfs.NewInjector(mem)
		e := newEnv(t, in, "/data")
		cfg := compactConfig()
		cfg.SegmentBytes, cfg.SegmentIndexBytes = 1024, 1200
		tab := e.create(cfg)
		want := map[string]string{}
		fillCompacted(t, tab, 0, want)
		rollAndFlush(t, tab)
		_, err := tab.Clean(CleanOptions{})
		require.NoError(t, err)
		fillCompacted(t, tab, 1, want)
		rollAndFlush(t, tab)
		require.NoError(t, e.m.Checkpoint())

		in.Add(vfs.Rule{Ops: vfs.OpMutating, Nth: step, Sticky: true})
		_, err = tab.Clean(CleanOptions{})
		// A failure the cleaning survives (closing an old segment's files,
		// logged) ends it as well: every step before was a crash point.
		finished := err == nil
		require.True(t, finished || in.Injected() > 0, "step %d: %v", step, err)
		for i, mode := range []vfs.CrashMode{vfs.CrashDropAll, vfs.CrashRandom, vfs.CrashKeepAll} {
			img := mem.Crash(mode, uint64(step*3+i))
			m, err := OpenManager(img, "/data", e.options())
			require.NoError(t, err, "step %d, %v", step, mode)
			got, ok := m.Get(tp0)
			require.True(t, ok)
			require.Equal(t, want, committedLastValues(t, got), "step %d, %v", step, mode)
			require.NoError(t, m.Close())
			r, err := recovery.Verify(img, "/data", recovery.VerifyOptions{})
			require.NoError(t, err)
			require.True(t, r.OK(), "step %d, %v: %+v", step, mode, r)
		}
		e.m.Close() // failed, but its files and mappings go
		if finished {
			steps = step
			break
		}
	}
	t.Logf("a crash at each of %d steps of a cleaning", steps)
	require.Greater(t, steps, 10)
}

// The manager's cleaner takes a tablet once its dirty ratio reaches
// min.cleanable.dirty.ratio, writes the cleaner-offset-checkpoint, and
// runs in the background.
func TestManagerCleaner(t *testing.T) {
	mem := vfs.NewMem()
	e := newEnv(t, mem, "/data")
	cfg := compactConfig()
	cfg.MinCleanableDirtyRatio = 0.6
	tab := e.create(cfg)
	plainCfg := DefaultConfig()
	plain, err := e.m.Create(checkpoint.TopicPartition{Topic: "plain", Partition: 0}, &plainCfg)
	require.NoError(t, err)
	app := func(k, v string) {
		_, err := tab.Append(kvBatch(t, e.clock.Now().UnixMilli(), kv{key: k, value: v}), AppendOptions{})
		require.NoError(t, err)
		_, err = plain.Append(kvBatch(t, e.clock.Now().UnixMilli(), kv{key: k, value: v}), AppendOptions{})
		require.NoError(t, err)
	}
	for i := range 100 {
		app(fmt.Sprintf("k%d", i%10), fmt.Sprint(i))
	}
	rollAndFlush(t, tab)
	rollAndFlush(t, plain)
	res, err := e.m.CleanDirty()
	require.NoError(t, err)
	require.Len(t, res, 1, "only the compacted tablet")
	require.Equal(t, int64(90), res[tp0].RecordsRemoved)
	data, err := vfs.ReadFile(mem, "/data/cleaner-offset-checkpoint")
	require.NoError(t, err)
	require.Equal(t, "0\n1\nevents 0 100\n", string(data))

	// A little dirt below the ratio: nothing to do.
	app("k0", "again")
	rollAndFlush(t, tab)
	c, err := tab.Cleanable()
	require.NoError(t, err)
	require.Less(t, c.Ratio, 0.6)
	res, err = e.m.CleanDirty()
	require.NoError(t, err)
	require.Empty(t, res)

	// Much more, and the background cleaner (started by a manager with a
	// short backoff) takes it: the swap publishes a change.
	for i := range 200 {
		app(fmt.Sprintf("k%d", i%10), fmt.Sprint(i))
	}
	rollAndFlush(t, tab)
	require.NoError(t, e.m.Close())
	opts := e.options()
	opts.Cleaner.Disable, opts.Cleaner.Backoff = false, time.Millisecond
	m, err := OpenManager(mem, "/data", opts)
	require.NoError(t, err)
	defer m.Close()
	tab, _ = m.Get(tp0)
	for {
		changed := tab.Changed() // before the look: a change after it closes it
		if tab.CleanerCheckpoint() >= 301 {
			break
		}
		<-changed
	}
	require.Len(t, readAll(t, tab, 0, ReadHighWatermark), 10)
}

// A compacted tablet against a model — every record appended, by offset —
// over random appends (tombstones among them), rolls, cleanings (with
// dedupe buffers large and small), flushes, reopens, crashes and time
// passing: each key reads back its last record (a tombstone may be gone
// once old), nothing read differs from what was appended at its offset,
// and nothing durable is lost.
func TestCompactionAgainstModel(t *testing.T) {
	seed := testenv.Seed(t)
	rng := rand.New(rand.NewPCG(seed, 19))
	mem := vfs.NewMem()
	e := newEnv(t, mem, "/data")
	cfg := compactConfig()
	cfg.SegmentBytes, cfg.SegmentIndexBytes, cfg.IndexIntervalBytes = 600, 4096, 100
	cfg.DeleteRetentionMs, cfg.FileDeleteDelayMs = 1500, 0
	tab := e.create(cfg)
	type entry struct {
		key, value string
		tombstone  bool
	}
	history := map[int64]entry{}
	acked := int64(0) // everything below is durable
	next := 0
	check := func(step int, what string) {
		msg := fmt.Sprintf("seed %d step %d (%s)", seed, step, what)
		got := map[string]record.Record{}
		for _, r := range readAll(t, tab, tab.Offsets().LogStartOffset, ReadLogEnd) {
			h, ok := history[r.Offset]
			require.True(t, ok, "%s: offset %d was never appended", msg, r.Offset)
			require.Equal(t, h.key, string(r.Key), "%s: offset %d", msg, r.Offset)
			require.Equal(t, h.tombstone, r.Value == nil, "%s: offset %d", msg, r.Offset)
			if !h.tombstone {
				require.Equal(t, h.value, string(r.Value), "%s: offset %d", msg, r.Offset)
			}
			got[h.key] = r
		}
		last := map[string]int64{}
		for o, h := range history {
			if l, ok := last[h.key]; !ok || o > l {
				last[h.key] = o
			}
		}
		for k, o := range last {
			r, ok := got[k]
			if history[o].tombstone && !ok {
				continue // an old tombstone the cleaner removed
			}
			require.True(t, ok, "%s: key %s (last at %d) is gone", msg, k, o)
			require.Equal(t, o, r.Offset, "%s: key %s reads an older record", msg, k)
		}
	}
	for step := range 400 {
		var what string
		switch op := rng.IntN(100); {
		case op < 50:
			b := record.NewBuilder([]record.Compression{record.None, record.Snappy, record.Zstd}[rng.IntN(3)])
			var batch []entry
			for range 1 + rng.IntN(5) {
				next++
				en := entry{key: fmt.Sprintf("k%d", rng.IntN(12)), value: fmt.Sprintf("v%d", next), tombstone: rng.IntN(100) < 15}
				r := record.Record{Timestamp: e.clock.Now().UnixMilli(), Key: []byte(en.key), Value: []byte(en.value)}
				if en.tombstone {
					r.Value = nil
				}
				require.NoError(t, b.Append(r))
				batch = append(batch, en)
			}
			out, err := b.Build()
			require.NoError(t, err)
			sync := rng.IntN(4) == 0
			res, err := tab.Append(out.Bytes(), AppendOptions{Sync: sync})
			require.NoError(t, err)
			for i, en := range batch {
				history[res.FirstOffset+int64(i)] = en
			}
			if sync {
				acked = res.LastOffset + 1
			}
			what = "append"
		case op < 58:
			rollAndFlush(t, tab)
			acked = tab.Offsets().LogEndOffset
			what = "roll"
		case op < 72:
			var m *cleaner.OffsetMap
			if rng.IntN(3) == 0 {
				m = cleaner.NewOffsetMap(int64(8+rng.IntN(32))*cleaner.EntryBytes, 0.9)
			}
			res, err := tab.Clean(CleanOptions{Map: m})
			if !errors.Is(err, cleaner.ErrMapTooSmall) {
				require.NoError(t, err, "seed %d step %d", seed, step)
			}
			what = fmt.Sprintf("clean to %d, %d removed", res.CleanedTo, res.RecordsRemoved)
		case op < 78:
			require.NoError(t, tab.Flush())
			acked = tab.Offsets().LogEndOffset
			what = "flush"
		case op < 84:
			e.reopen()
			tab = e.tablet()
			acked = tab.Offsets().LogEndOffset
			what = "clean reopen"
		case op < 90:
			mode := []vfs.CrashMode{vfs.CrashKeepAll, vfs.CrashDropAll, vfs.CrashRandom}[rng.IntN(3)]
			after := mem.Crash(mode, rng.Uint64())
			if testing.Verbose() {
				names, _ := after.List(tab.Dir())
				for _, n := range names {
					before, _ := mem.Stat(tab.Dir() + "/" + n)
					st, _ := after.Stat(tab.Dir() + "/" + n)
					var was int64 = -1
					if before != nil {
						was = before.Size()
					}
					t.Logf("  after crash: %s %d (was %d)", n, st.Size(), was)
				}
			}
			e.m.Close()
			mem = after
			e.fsys = mem
			e.open()
			tab = e.tablet()
			end := tab.Offsets().LogEndOffset
			require.GreaterOrEqual(t, end, acked, "seed %d step %d: a durable record was lost (%v)", seed, step, mode)
			// What was not durable may be gone, from the tail or from
			// the middle (a compacted log keeps a gap, as Kafka does).
			present := map[int64]bool{}
			for _, r := range readAll(t, tab, 0, ReadLogEnd) {
				present[r.Offset] = true
			}
			for o := range history {
				if o >= end || (o >= acked && !present[o]) {
					delete(history, o)
				}
			}
			acked = end
			what = fmt.Sprintf("crash (%v)", mode)
		default:
			e.clock.Advance(time.Duration(rng.IntN(2000)) * time.Millisecond)
			what = "time passes"
		}
		logStep(t, tab, step, what)
		check(step, what)
	}
	e.reopen()
}

// The measure: a compacted topic of a million records over ten
// thousand keys, on real files, is ten thousand records after one
// cleaning, each key's last value; the directory verifies.
func TestCleanAMillionRecordsOverTenThousandKeys(t *testing.T) {
	e := newEnv(t, vfs.OS, t.TempDir())
	cfg := compactConfig()
	cfg.SegmentBytes = 4 << 20
	tab := e.create(cfg)
	const keys, perBatch = 10_000, 1000
	n := 1_000_000 / Sweep // (a fifth under the race detector)
	b := record.NewBuilder(record.LZ4)
	now := e.clock.Now().UnixMilli()
	for i := 0; i < n; i += perBatch {
		b.Reset()
		for j := i; j < i+perBatch; j++ {
			require.NoError(t, b.Append(record.Record{Timestamp: now, Key: fmt.Appendf(nil, "key-%d", j%keys), Value: fmt.Appendf(nil, "value-%d", j)}))
		}
		batch, err := b.Build()
		require.NoError(t, err)
		_, err = tab.Append(batch.Bytes(), AppendOptions{})
		require.NoError(t, err)
	}
	rollAndFlush(t, tab)
	res, err := tab.Clean(CleanOptions{})
	require.NoError(t, err)
	t.Logf("%d records, %d segments cleaned in %v: read %d + %d bytes, wrote %d", res.RecordsRead, len(tab.Segments())-1, res.Took,
		res.MapBytesRead, res.BytesRead, res.BytesWritten)
	require.Equal(t, int64(n-keys), res.RecordsRemoved)
	got := readAll(t, tab, 0, ReadHighWatermark)
	require.Len(t, got, keys)
	for _, r := range got {
		require.Equal(t, fmt.Sprintf("value-%d", r.Offset), string(r.Value))
		require.GreaterOrEqual(t, r.Offset, int64(n-keys), "the last of each key is in the last ten thousand")
	}
	e.reopen()
	require.Len(t, readAll(t, e.tablet(), 0, ReadHighWatermark), keys)
}

// Records larger than any buffer a reader might use survive cleaning
// whole (Kafka's testLargeMessage): the cleaner maps segments, it does
// not read them through a fixed buffer.
func TestCleanLargeRecords(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/data")
	cfg := compactConfig()
	cfg.SegmentBytes, cfg.MaxMessageBytes = 16<<20, 8<<20
	tab := e.create(cfg)
	big := func(c byte, n int) string { return string(bytes.Repeat([]byte{c}, n)) }
	for _, r := range []kv{{key: "a", value: big('1', 3<<20)}, {key: "b", value: big('2', 5<<20)}, {key: "a", value: big('3', 4<<20)}} {
		_, err := tab.Append(kvBatch(t, e.clock.Now().UnixMilli(), r), AppendOptions{})
		require.NoError(t, err)
	}
	rollAndFlush(t, tab)
	res, err := tab.Clean(CleanOptions{})
	require.NoError(t, err)
	require.Equal(t, int64(1), res.RecordsRemoved)
	last := lastValues(t, tab)
	require.Equal(t, big('2', 5<<20), string(last["b"].Value))
	require.Equal(t, big('3', 4<<20), string(last["a"].Value))
	require.Len(t, readAll(t, tab, 0, ReadHighWatermark), 2)
	e.reopen()
}

// A read in flight keeps the segment it read: a cleaning that replaces it
// does not take its bytes away (reference counts, as retention).
func TestCleanKeepsReadsInFlight(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/data")
	cfg := compactConfig()
	cfg.FileDeleteDelayMs = 0
	tab := e.create(cfg)
	for i := range 20 {
		_, err := tab.Append(kvBatch(t, 1, kv{key: "k", value: fmt.Sprint(i)}), AppendOptions{})
		require.NoError(t, err)
	}
	rollAndFlush(t, tab)
	res, err := tab.Read(0, ReadOptions{MaxBytes: 1 << 20})
	require.NoError(t, err)
	require.False(t, res.Records.InMemory(), "a slice of the segment file")
	before := make([]byte, res.Records.Size())
	_, err = res.Records.ReadAt(before, 0)
	require.NoError(t, err)
	_, err = tab.Clean(CleanOptions{})
	require.NoError(t, err)
	after := make([]byte, res.Records.Size())
	_, err = res.Records.ReadAt(after, 0)
	require.NoError(t, err)
	require.Equal(t, before, after, "the old segment's bytes, still readable")
	b, _, err := record.ParseBatch(after)
	require.NoError(t, err)
	require.NoError(t, b.Verify())
	res.Close()
	require.Len(t, readAll(t, tab, 0, ReadHighWatermark), 1, "new reads see the cleaned log")
}

// Readers never see a torn, foreign or changed record while a writer
// appends and rolls and cleanings replace segments under them: every
// record read is the one appended at its offset.
func TestConcurrentReadsDuringCleanings(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/data")
	cfg := compactConfig()
	cfg.SegmentBytes, cfg.SegmentIndexBytes, cfg.FileDeleteDelayMs = 800, 4096, 0
	tab := e.create(cfg)
	var mu sync.Mutex
	appended := map[int64]string{} // offset → key=value
	var reads, cleanings atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for r := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(r), 2))
			for {
				select {
				case <-stop:
					return
				default:
				}
				o := tab.Offsets()
				from := o.LogStartOffset + rng.Int64N(o.LogEndOffset-o.LogStartOffset+1)
				for r, err := range tab.Scan(from, ReadHighWatermark) {
					if err != nil {
						t.Errorf("reading from %d: %v", from, err)
						return
					}
					reads.Add(1)
					mu.Lock()
					want, ok := appended[r.Offset]
					mu.Unlock()
					if got := string(r.Key) + "=" + string(r.Value); !ok || got != want {
						t.Errorf("offset %d reads %q, appended %q", r.Offset, got, want)
						return
					}
				}
			}
		}()
	}
	wg.Add(1)
	go func() { // the cleaner, over and over
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			res, err := tab.Clean(CleanOptions{})
			if err != nil && !errors.Is(err, ErrCleaningAborted) {
				t.Error(err)
				return
			}
			if res.RecordsRemoved > 0 {
				cleanings.Add(1)
			}
		}
	}()
	for i := range 1500 {
		k, v := fmt.Sprintf("k%d", i%9), fmt.Sprintf("v%d", i)
		mu.Lock() // recorded before it can be read
		appended[tab.Offsets().LogEndOffset] = k + "=" + v
		res, err := tab.Append(kvBatch(t, e.clock.Now().UnixMilli(), kv{key: k, value: v}), AppendOptions{})
		mu.Unlock()
		require.NoError(t, err)
		require.Equal(t, res.FirstOffset, res.LastOffset)
		if i%100 == 99 {
			require.NoError(t, tab.Flush()) // the recovery point moves: more is cleanable
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("%d records read, %d cleanings that removed records", reads.Load(), cleanings.Load())
	require.Positive(t, reads.Load())
	require.Positive(t, cleanings.Load())
	require.NoError(t, tab.Flush())
	_, err := tab.Clean(CleanOptions{})
	require.NoError(t, err)
	last := lastValues(t, tab)
	require.Len(t, last, 9)
	for k, r := range last {
		i, _ := strconv.Atoi(strings.TrimPrefix(string(r.Value), "v"))
		require.Equal(t, k, fmt.Sprintf("k%d", i%9))
		require.GreaterOrEqual(t, i, 1500-9, "%s's last value", k)
	}
	e.reopen()
}

// SegmentDetails describes the newest segments: their offsets, the first
// batch's and the largest timestamps, and the offset index's fill.
func TestSegmentDetails(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/data")
	cfg := DefaultConfig()
	cfg.SegmentBytes, cfg.IndexIntervalBytes = 4096, 256
	tab := e.create(cfg)
	for i := range 100 {
		_, err := tab.Append(kvBatch(t, int64(1000+i), kv{key: "k", value: strings.Repeat("v", 100)}), AppendOptions{})
		require.NoError(t, err)
	}
	total, ds := tab.SegmentDetails(2)
	require.Equal(t, len(tab.Segments()), total)
	require.Greater(t, total, 2)
	require.Len(t, ds, 2, "the newest two")
	all := tab.Segments()
	sealed, active := ds[0], ds[1]
	require.Equal(t, all[total-2], sealed.SegmentInfo)
	require.Equal(t, all[total-1], active.SegmentInfo)
	require.Equal(t, 1000+sealed.BaseOffset, sealed.FirstTimestamp, "each batch's timestamp is 1000 past its offset")
	require.Equal(t, 1000+sealed.NextOffset-1, sealed.MaxTimestamp)
	require.Positive(t, sealed.IndexEntries, "an entry every 256 bytes")
	require.GreaterOrEqual(t, sealed.IndexSlots, sealed.IndexEntries)
	require.Equal(t, int64(1099), active.MaxTimestamp)
	_, none := tab.SegmentDetails(0)
	require.Empty(t, none)
}
