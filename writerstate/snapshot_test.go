package writerstate

import (
	"encoding/binary"
	"flag"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"github.com/seglog/seglog/logfile"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/vfs"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func (f *fixture) files(t *testing.T) []string {
	names, err := f.fsys.List(f.dir)
	require.NoError(t, err)
	return names
}

func snapName(o int64) string { return logfile.Filename(o, logfile.Snapshot) }

// Scenario 63: testTakeSnapshot, testSkipSnapshotIfOffsetUnchanged,
// testDeleteSnapshotsBefore, testTruncateFullyAndStartAt.
func TestTakeAndDeleteSnapshots(t *testing.T) {
	f := newFixture(t)
	s := f.s
	require.NoError(t, appendEntry(s, producerID, epoch, defaultSequence, 0, 0, record.OriginClient, false))
	require.NoError(t, s.TakeSnapshot(false))
	require.Equal(t, []string{snapName(1)}, f.files(t))
	require.NoError(t, s.TakeSnapshot(false))
	require.Equal(t, []string{snapName(1)}, f.files(t), "nothing changed: no new snapshot")

	require.NoError(t, f.appendClient(s, producerID, epoch, 1, 1, false))
	require.NoError(t, s.TakeSnapshot(false))
	require.NoError(t, f.appendClient(s, producerID, epoch, 2, 2, false))
	require.NoError(t, s.TakeSnapshot(false))
	require.Equal(t, []int64{1, 2, 3}, s.Snapshots())
	require.NoError(t, s.DeleteSnapshotsBefore(3))
	require.Equal(t, []string{snapName(3)}, f.files(t))
	require.NoError(t, s.DeleteSnapshotsBefore(4))
	require.Empty(t, f.files(t))

	require.NoError(t, f.appendClient(s, producerID, epoch, 3, 3, false))
	require.NoError(t, s.TakeSnapshot(false))
	require.NoError(t, s.TruncateFullyAndStartAt(0))
	require.Empty(t, f.files(t))
	require.Empty(t, s.Snapshots())
	require.NoError(t, f.appendClient(s, producerID, epoch, 0, 0, false))
	require.NoError(t, s.TakeSnapshot(false))
	require.Equal(t, []int64{1}, s.Snapshots())

	require.NoError(t, f.appendClient(s, producerID, epoch, 1, 5, false))
	require.NoError(t, s.TakeSnapshot(false))
	require.NoError(t, s.DeleteSnapshotsAfter(1))
	require.Equal(t, []string{snapName(1)}, f.files(t))
}

// Scenario 64: testTruncateAndReloadRemovesOutOfRangeSnapshots.
func TestTruncateAndReloadRemovesOutOfRangeSnapshots(t *testing.T) {
	f := newFixture(t)
	s := f.s
	for i := range int32(5) {
		require.NoError(t, f.appendClient(s, producerID, epoch, i, int64(i), false))
		require.NoError(t, s.TakeSnapshot(false))
	}
	require.NoError(t, s.TruncateAndReload(1, 3, f.time.millis()))
	oldest, _ := s.OldestSnapshotOffset()
	latest, _ := s.LatestSnapshotOffset()
	require.Equal(t, int64(2), oldest)
	require.Equal(t, int64(3), latest)
	require.Equal(t, int64(3), s.MapEndOffset())
	require.Equal(t, int32(2), lastEntry(t, s, producerID).LastSeq())
}

// Scenario 65: testRecoverFromSnapshot{Unfinished,Finished,Empty}Transaction.
func TestRecoverFromSnapshot(t *testing.T) {
	f := newFixture(t)
	require.NoError(t, f.appendClient(f.s, producerID, epoch, 0, 0, true))
	require.NoError(t, f.appendClient(f.s, producerID, epoch, 1, 1, true))
	require.NoError(t, f.s.TakeSnapshot(false))
	recovered := f.open(t)
	require.NoError(t, recovered.TruncateAndReload(0, 3, f.time.millis()))
	e := lastEntry(t, recovered, producerID)
	require.Equal(t, int64(1), e.FirstDataOffset(), "only the last batch is kept")
	require.Equal(t, int32(1), e.FirstSeq())
	require.Equal(t, int64(1), e.LastDataOffset())
	require.Equal(t, int32(1), e.LastSeq())
	require.Equal(t, int64(0), e.CurrentTxnFirstOffset)
	und, _ := recovered.FirstUndecidedOffset()
	require.Equal(t, int64(0), und)
	require.NoError(t, f.appendClient(recovered, producerID, epoch, 2, 2, true))

	f = newFixture(t)
	require.NoError(t, f.appendClient(f.s, producerID, epoch, 0, 0, true))
	require.NoError(t, f.appendClient(f.s, producerID, epoch, 1, 1, true))
	require.NoError(t, f.abort(f.s, producerID, epoch, 2))
	require.NoError(t, f.s.TakeSnapshot(false))
	recovered = f.open(t)
	require.NoError(t, recovered.TruncateAndReload(0, 3, f.time.millis()))
	e = lastEntry(t, recovered, producerID)
	require.Equal(t, int64(1), e.FirstDataOffset())
	require.Equal(t, int32(1), e.LastSeq())
	require.Equal(t, int64(-1), e.CurrentTxnFirstOffset)

	f = newFixture(t)
	ts := f.time.millis()
	require.NoError(t, appendMarker(f.s, producerID, epoch, true, 0, 0, ts))
	require.NoError(t, f.s.TakeSnapshot(false))
	recovered = f.open(t)
	require.NoError(t, recovered.TruncateAndReload(0, 1, f.time.millis()))
	e = lastEntry(t, recovered, producerID)
	require.Equal(t, ts, e.LastTimestamp)
	require.Equal(t, int64(-1), e.CurrentTxnFirstOffset)
}

// Scenario 66: testLoadFrom{Empty,Truncated,Corrupt}SnapshotFile.
func TestLoadFromDamagedSnapshot(t *testing.T) {
	damage := map[string]func(data []byte) []byte{
		"empty":     func([]byte) []byte { return nil },
		"truncated": func(d []byte) []byte { return d[:len(d)/2] },
		"corrupt":   func(d []byte) []byte { copy(d, make([]byte, 37)); return d },
		"crc":       func(d []byte) []byte { d[len(d)-1] ^= 1; return d },
	}
	for name, fn := range damage {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			require.NoError(t, f.appendClient(f.s, producerID, epoch, 0, 0, false))
			require.NoError(t, f.s.TakeSnapshot(false))
			require.NoError(t, f.appendClient(f.s, producerID, epoch, 1, 1, false))
			require.NoError(t, f.s.TakeSnapshot(false))
			latest, _ := f.s.LatestSnapshotOffset()
			require.Equal(t, int64(2), latest)
			path := filepath.Join(f.dir, snapName(2))
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(path, fn(data), 0o644))

			reloaded := f.open(t)
			require.NoError(t, reloaded.TruncateAndReload(0, 20, f.time.millis()))
			_, err = os.Stat(path)
			require.ErrorIs(t, err, os.ErrNotExist, "the damaged snapshot is deleted")
			require.Equal(t, int64(0), lastEntry(t, reloaded, producerID).LastDataOffset(), "state from the older one")
			require.Equal(t, int64(1), reloaded.MapEndOffset())
		})
	}
}

// Scenario 67: testRemoveStraySnapshotsKeepCleanShutdownSnapshot and
// testRemoveAllStraySnapshots.
func TestRemoveStraySnapshots(t *testing.T) {
	for _, c := range []struct {
		bases []int64
		want  []int64
	}{
		{[]int64{5}, []int64{5, 42}},
		{[]int64{42}, []int64{42}},
		{nil, []int64{42}},
	} {
		f := newFixture(t)
		for _, o := range []int64{5, 2, 42} {
			require.NoError(t, os.WriteFile(filepath.Join(f.dir, snapName(o)), nil, 0o644))
		}
		require.NoError(t, f.s.RemoveStraySnapshots(c.bases))
		require.Equal(t, c.want, f.s.Snapshots(), "bases %v", c.bases)
		var names []string
		for _, o := range c.want {
			names = append(names, snapName(o))
		}
		require.Equal(t, names, f.files(t))
	}
}

// Scenario 68: testReadWriteSnapshot, testAcceptAppendWithoutProducerStateOnReplica,
// and testRemoveExpiredPidsOnReload (scenario 62).
func TestReadWriteSnapshot(t *testing.T) {
	entries := []Entry{
		{ProducerID: 1, Epoch: 2, CoordinatorEpoch: 3, LastTimestamp: record.NoTimestamp, CurrentTxnFirstOffset: 100,
			Batches: []BatchMetadata{{LastSeq: 1, LastOffset: 2, OffsetDelta: 3, Timestamp: record.NoTimestamp}}},
		{ProducerID: 11, Epoch: 12, CoordinatorEpoch: 13, LastTimestamp: 123456, CurrentTxnFirstOffset: -1},
	}
	got, err := ParseSnapshot(AppendSnapshot(nil, entries))
	require.NoError(t, err)
	require.Equal(t, entries[0], got[0])
	require.Equal(t, entries[1].ProducerID, got[1].ProducerID)
	require.Empty(t, got[1].Batches)
	require.Equal(t, entries[1].LastTimestamp, got[1].LastTimestamp)
	require.Equal(t, int64(-1), got[1].CurrentTxnFirstOffset)

	// Expired producers are dropped on reload; a client may then start
	// anew, and a replica append is taken as it comes.
	f := newFixture(t)
	require.NoError(t, appendEntry(f.s, producerID, epoch, defaultSequence, 0, 0, record.OriginClient, false))
	require.NoError(t, appendEntry(f.s, producerID, epoch, 1, 1, 1, record.OriginClient, false))
	require.NoError(t, f.s.TakeSnapshot(false))
	recovered := f.open(t)
	require.NoError(t, recovered.TruncateAndReload(0, 1, 70000+expirationMs))
	require.Zero(t, recovered.ProducerCount())
	require.NoError(t, appendEntry(recovered, producerID, epoch, 2, 2, 70001, record.OriginClient, false))
	require.Equal(t, int32(2), recovered.Producers()[0].LastSeq())
	require.Equal(t, int64(3), recovered.MapEndOffset())

	recovered = f.open(t)
	require.NoError(t, recovered.TruncateAndReload(0, 1, 70000+expirationMs))
	require.NoError(t, appendEntry(recovered, producerID, epoch, 2, 2, 70001, record.OriginReplication, false))
	e := lastEntry(t, recovered, producerID)
	require.Equal(t, int32(2), e.FirstSeq())
	require.Equal(t, int32(2), e.LastSeq())
}

func TestLoadFromSnapshotRetainsNonExpiredProducers(t *testing.T) {
	f := newFixture(t)
	require.NoError(t, f.appendClient(f.s, 1, epoch, defaultSequence, 0, false))
	require.NoError(t, f.appendClient(f.s, 2, epoch, defaultSequence, 1, false))
	require.NoError(t, f.s.TakeSnapshot(false))
	require.NoError(t, f.s.TruncateAndReload(1, 2, f.time.millis()))
	require.Equal(t, 2, f.s.ProducerCount())
	require.Equal(t, int64(0), lastEntry(t, f.s, 1).LastDataOffset())
	require.Equal(t, int64(1), lastEntry(t, f.s, 2).LastDataOffset())
}

func TestFirstUnstableOffsetAfterTruncation(t *testing.T) {
	f := newFixture(t)
	s := f.s
	require.NoError(t, f.appendClient(s, producerID, epoch, defaultSequence, 99, true))
	require.Equal(t, int64(99), fuo(s))
	require.NoError(t, s.TakeSnapshot(false))
	require.NoError(t, f.commit(s, producerID, epoch, 105))
	s.OnHighWatermarkUpdated(106)
	require.Equal(t, int64(-1), fuo(s))
	require.NoError(t, s.TakeSnapshot(false))
	require.NoError(t, f.appendClient(s, producerID, epoch, defaultSequence+1, 106, false))
	require.NoError(t, s.TruncateAndReload(0, 106, f.time.millis()))
	require.Equal(t, int64(-1), fuo(s))
	require.NoError(t, s.TruncateAndReload(0, 100, f.time.millis()))
	require.Equal(t, int64(99), fuo(s))
}

func TestCoordinatorFencedAndLateTransactionAfterReload(t *testing.T) {
	f := newFixture(t)
	require.NoError(t, f.appendClient(f.s, producerID, epoch, defaultSequence, 99, true))
	require.NoError(t, appendMarker(f.s, producerID, epoch, false, 100, 1, f.time.millis()))
	require.NoError(t, f.s.TakeSnapshot(false))
	recovered := f.open(t)
	require.NoError(t, recovered.TruncateAndReload(0, 101, f.time.millis()))
	require.ErrorIs(t, appendMarker(recovered, producerID, epoch, false, 101, 0, f.time.millis()), ErrCoordinatorFenced)

	f = newFixture(t)
	require.NoError(t, f.appendClient(f.s, 39, 2, defaultSequence, 100, true))
	f.time.sleep(500)
	require.NoError(t, f.appendClient(f.s, 57, 9, defaultSequence, 150, true))
	require.NoError(t, f.s.TakeSnapshot(false))
	f.time.sleep(lateTxnMs - 500 + 1)
	require.True(t, f.s.HasLateTransaction(f.time.millis()))
	recovered = f.open(t)
	require.NoError(t, recovered.TruncateAndReload(0, f.s.MapEndOffset(), f.time.millis()))
	require.True(t, recovered.HasLateTransaction(f.time.millis()))
}

func TestReloadSnapshotsAndMarkForDeletion(t *testing.T) {
	f := newFixture(t)
	s := f.s
	require.NoError(t, f.appendClient(s, producerID, epoch, 1, 1, false))
	require.NoError(t, f.appendClient(s, producerID, epoch, 2, 2, false))
	require.NoError(t, s.TakeSnapshot(false))
	saved, err := os.ReadFile(filepath.Join(f.dir, snapName(3)))
	require.NoError(t, err)
	require.NoError(t, f.appendClient(s, producerID, epoch, 3, 3, false))
	require.NoError(t, f.appendClient(s, producerID, epoch, 4, 4, false))
	require.NoError(t, s.TakeSnapshot(false))
	require.Equal(t, []int64{3, 5}, s.Snapshots())
	require.NoError(t, s.TruncateAndReload(3, 5, f.time.millis()))
	require.Equal(t, []int64{5}, s.Snapshots())
	require.NoError(t, os.WriteFile(filepath.Join(f.dir, snapName(3)), saved, 0o644))
	require.NoError(t, s.ReloadSnapshots())
	require.Equal(t, []int64{3}, s.Snapshots())

	ok, err := s.MarkSnapshotForDeletion(3)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, []string{snapName(3) + logfile.DeletedSuffix}, f.files(t))
	require.Empty(t, s.Snapshots())
	ok, err = s.MarkSnapshotForDeletion(3)
	require.NoError(t, err)
	require.False(t, ok)

	require.NoError(t, os.WriteFile(filepath.Join(f.dir, snapName(9)), nil, 0o644))
	s = f.open(t)
	require.NoError(t, os.Remove(filepath.Join(f.dir, snapName(9))))
	ok, err = s.MarkSnapshotForDeletion(9)
	require.NoError(t, err)
	require.False(t, ok, "already deleted")
	require.Empty(t, s.Snapshots())
}

// The golden snapshot: docs/format.md §5.5 byte for byte, encoded here with the
// standard library from the spec's table and compared with the committed
// file and with AppendSnapshot.
func TestGoldenSnapshot(t *testing.T) {
	entries := []Entry{
		{ProducerID: 1000, Epoch: 3, CoordinatorEpoch: 7, LastTimestamp: 1_700_000_000_123, CurrentTxnFirstOffset: 42,
			Batches: []BatchMetadata{{LastSeq: 9, LastOffset: 45, OffsetDelta: 3, Timestamp: 1_700_000_000_123}}},
		{ProducerID: 2000, Epoch: 0, CoordinatorEpoch: -1, LastTimestamp: 1_700_000_000_456, CurrentTxnFirstOffset: -1},
	}
	var want []byte
	want = binary.BigEndian.AppendUint16(want, 1)
	want = binary.BigEndian.AppendUint32(want, 0)
	want = binary.BigEndian.AppendUint32(want, 2)
	for _, e := range []struct {
		pid         int64
		epoch       int16
		lastSeq     int32
		lastOffset  int64
		delta       int32
		ts          int64
		coordinator int32
		txnFirst    int64
	}{{1000, 3, 9, 45, 3, 1_700_000_000_123, 7, 42}, {2000, 0, -1, -1, 0, 1_700_000_000_456, -1, -1}} {
		want = binary.BigEndian.AppendUint64(want, uint64(e.pid))
		want = binary.BigEndian.AppendUint16(want, uint16(e.epoch))
		want = binary.BigEndian.AppendUint32(want, uint32(e.lastSeq))
		want = binary.BigEndian.AppendUint64(want, uint64(e.lastOffset))
		want = binary.BigEndian.AppendUint32(want, uint32(e.delta))
		want = binary.BigEndian.AppendUint64(want, uint64(e.ts))
		want = binary.BigEndian.AppendUint32(want, uint32(e.coordinator))
		want = binary.BigEndian.AppendUint64(want, uint64(e.txnFirst))
	}
	binary.BigEndian.PutUint32(want[2:], crc32.Checksum(want[6:], crc32.MakeTable(crc32.Castagnoli)))
	require.Len(t, want, 10+2*46)
	require.Equal(t, want, AppendSnapshot(nil, entries))

	golden := filepath.Join("testdata", "00000000000000000046.snapshot")
	if *update {
		require.NoError(t, os.WriteFile(golden, want, 0o644))
	}
	stored, err := os.ReadFile(golden)
	require.NoError(t, err)
	require.Equal(t, want, stored)
	got, err := ReadSnapshotFile(vfs.OS, golden)
	require.NoError(t, err)
	require.Equal(t, entries[0], got[0])
}

func TestParseSnapshotRejects(t *testing.T) {
	good := AppendSnapshot(nil, []Entry{{ProducerID: 1, Epoch: 1, CurrentTxnFirstOffset: -1}})
	bad := map[string][]byte{
		"short":          good[:9],
		"version":        append([]byte{0, 2}, good[2:]...),
		"negative count": func() []byte { b := append([]byte{}, good...); binary.BigEndian.PutUint32(b[6:], 0xffffffff); return b }(),
		"count too big":  func() []byte { b := append([]byte{}, good...); binary.BigEndian.PutUint32(b[6:], 2); return b }(),
		"crc":            func() []byte { b := append([]byte{}, good...); b[20] ^= 1; return b }(),
	}
	for name, b := range bad {
		_, err := ParseSnapshot(b)
		require.ErrorIs(t, err, ErrCorruptSnapshot, name)
	}
	path := filepath.Join(t.TempDir(), snapName(1))
	require.NoError(t, os.WriteFile(path, good[:5], 0o644))
	_, err := ReadSnapshotFile(vfs.OS, path)
	require.ErrorIs(t, err, seglog.ErrCorruption)
	require.ErrorIs(t, err, ErrCorruptSnapshot)
}

// A torn newest snapshot (a crash while writing it, unsynced) falls back to
// the older one; a synced one survives.
func TestCrashWhileWritingSnapshot(t *testing.T) {
	seen := map[int64]bool{}
	for seed := range uint64(40) {
		mem := vfs.NewMem()
		require.NoError(t, mem.MkdirAll("/t", 0o755))
		require.NoError(t, mem.SyncDir("/"))
		clock := newMockTime()
		s, err := Open(mem, "/t", Options{Now: clock.Now})
		require.NoError(t, err)
		for i := range int32(20) {
			require.NoError(t, appendEntry(s, int64(1+i%4), 0, i/4, int64(i), clock.millis(), record.OriginClient, false))
		}
		require.NoError(t, s.TakeSnapshot(true))
		require.NoError(t, mem.SyncDir("/t"))
		for i := int32(20); i < 40; i++ {
			require.NoError(t, appendEntry(s, int64(1+i%4), 0, i/4, int64(i), clock.millis(), record.OriginClient, false))
		}
		require.NoError(t, s.TakeSnapshot(false)) // not synced
		after := mem.Crash(vfs.CrashRandom, seed)
		r, err := Open(after, "/t", Options{Now: clock.Now})
		require.NoError(t, err)
		require.NoError(t, r.TruncateAndReload(0, 1000, clock.millis()))
		seen[r.MapEndOffset()] = true
		switch r.MapEndOffset() {
		case 20:
			require.Equal(t, int32(4), lastEntry(t, r, 1).LastSeq(), "seed %d", seed)
		case 40:
			require.Equal(t, int32(9), lastEntry(t, r, 1).LastSeq(), "seed %d", seed)
		default:
			t.Fatalf("seed %d: map end %d", seed, r.MapEndOffset())
		}
		require.Equal(t, 4, r.ProducerCount())
	}
	require.True(t, seen[20] && seen[40], "both the fallback and the new snapshot occur: %v", seen)
}
