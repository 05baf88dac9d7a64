package recovery

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/seglog/seglog/logfile"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog/leaderepoch"
	"github.com/seglog/seglog/segment"
	"github.com/seglog/seglog/vfs"
	"github.com/seglog/seglog/writerstate"
)

// This file writes a Kafka data directory byte by byte, from the format
// tables of the spec and nothing of seglog's, the way another
// implementation would, and checks that Load reads it back exactly.

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// t0 is the records' time; loading runs a minute later, so that no
// producer has expired.
const t0 = 1_700_000_000_000

type kRecord struct {
	key, value []byte
	tsDelta    int64
}

type kBatch struct {
	base        int64
	leaderEpoch int32
	attrs       int16 // bit 4 transactional, bit 5 control
	pid         int64
	pepoch      int16
	baseSeq     int32
	baseTs      int64
	records     []kRecord
}

func (b kBatch) maxTs() int64 {
	m := b.baseTs
	for _, r := range b.records {
		m = max(m, b.baseTs+r.tsDelta)
	}
	return m
}

func (b kBatch) lastOffset() int64 { return b.base + int64(len(b.records)) - 1 }

// encode writes the batch (docs/format.md §1.1, 1.3); encoding/binary's varints are
// zig-zag, as Kafka's are.
func (b kBatch) encode() []byte {
	var recs []byte
	for i, r := range b.records {
		var body []byte
		body = append(body, 0)
		body = binary.AppendVarint(body, r.tsDelta)
		body = binary.AppendVarint(body, int64(i))
		body = binary.AppendVarint(body, int64(len(r.key)))
		body = append(body, r.key...)
		body = binary.AppendVarint(body, int64(len(r.value)))
		body = append(body, r.value...)
		body = binary.AppendVarint(body, 0)
		recs = binary.AppendVarint(recs, int64(len(body)))
		recs = append(recs, body...)
	}
	be := binary.BigEndian
	out := be.AppendUint64(nil, uint64(b.base))
	out = be.AppendUint32(out, uint32(61-12+len(recs)))
	out = be.AppendUint32(out, uint32(b.leaderEpoch))
	out = append(out, 2)
	out = be.AppendUint32(out, 0) // CRC, below
	out = be.AppendUint16(out, uint16(b.attrs))
	out = be.AppendUint32(out, uint32(len(b.records)-1))
	out = be.AppendUint64(out, uint64(b.baseTs))
	out = be.AppendUint64(out, uint64(b.maxTs()))
	out = be.AppendUint64(out, uint64(b.pid))
	out = be.AppendUint16(out, uint16(b.pepoch))
	out = be.AppendUint32(out, uint32(b.baseSeq))
	out = be.AppendUint32(out, uint32(len(b.records)))
	out = append(out, recs...)
	be.PutUint32(out[17:], crc32.Checksum(out[21:], castagnoli))
	return out
}

// abortMarker is an ABORT control batch (docs/format.md §1.4).
func abortMarker(base int64, leaderEpoch int32, pid int64, pepoch int16, coordinatorEpoch int32, ts int64) kBatch {
	key := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, 0), 0) // version 0, type 0 (ABORT)
	value := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint16(nil, 0), uint32(coordinatorEpoch))
	return kBatch{base: base, leaderEpoch: leaderEpoch, attrs: 0x30, pid: pid, pepoch: pepoch, baseSeq: -1, baseTs: ts,
		records: []kRecord{{key: key, value: value}}}
}

func plain(base int64, leaderEpoch int32, ts int64, n int) kBatch {
	b := kBatch{base: base, leaderEpoch: leaderEpoch, pid: -1, pepoch: -1, baseSeq: -1, baseTs: ts}
	for i := range n {
		b.records = append(b.records, kRecord{key: fmt.Appendf(nil, "k%d", base+int64(i)),
			value: bytes.Repeat([]byte{'v'}, 40), tsDelta: int64(i)})
	}
	return b
}

// kSegment is the files of one segment as Kafka writes them on append and
// roll: an index entry for a batch when more than interval bytes precede
// it since the last entry, a time entry with it when the maximum
// timestamp grew, and a last time entry when the segment is sealed.
type kSegment struct {
	log, index, timeIndex []byte
	maxTs, maxTsOffset    int64
	lastTimeEntry         int64
}

func buildSegment(base int64, interval int, sealed bool, batches []kBatch) kSegment {
	be := binary.BigEndian
	s := kSegment{maxTs: -1, lastTimeEntry: -1}
	lastIndexed := 0
	timeEntry := func() {
		if s.maxTs > s.lastTimeEntry {
			s.timeIndex = be.AppendUint64(s.timeIndex, uint64(s.maxTs))
			s.timeIndex = be.AppendUint32(s.timeIndex, uint32(s.maxTsOffset-base))
			s.lastTimeEntry = s.maxTs
		}
	}
	for _, b := range batches {
		if b.maxTs() > s.maxTs {
			s.maxTs, s.maxTsOffset = b.maxTs(), b.lastOffset()
		}
		if len(s.log)-lastIndexed > interval {
			s.index = be.AppendUint32(s.index, uint32(b.lastOffset()-base))
			s.index = be.AppendUint32(s.index, uint32(len(s.log)))
			timeEntry()
			lastIndexed = len(s.log)
		}
		s.log = append(s.log, b.encode()...)
	}
	if sealed {
		timeEntry()
	}
	return s
}

// snapshotEntry is one producer of a snapshot (docs/format.md §5.5).
type snapshotEntry struct {
	pid                   int64
	epoch                 int16
	lastSeq               int32
	lastOffset            int64
	offsetDelta           int32
	timestamp             int64
	coordinatorEpoch      int32
	currentTxnFirstOffset int64
}

func encodeSnapshot(entries ...snapshotEntry) []byte {
	be := binary.BigEndian
	body := be.AppendUint32(nil, uint32(len(entries)))
	for _, e := range entries {
		body = be.AppendUint64(body, uint64(e.pid))
		body = be.AppendUint16(body, uint16(e.epoch))
		body = be.AppendUint32(body, uint32(e.lastSeq))
		body = be.AppendUint64(body, uint64(e.lastOffset))
		body = be.AppendUint32(body, uint32(e.offsetDelta))
		body = be.AppendUint64(body, uint64(e.timestamp))
		body = be.AppendUint32(body, uint32(e.coordinatorEpoch))
		body = be.AppendUint64(body, uint64(e.currentTxnFirstOffset))
	}
	out := be.AppendUint16(nil, 1)
	out = be.AppendUint32(out, crc32.Checksum(body, castagnoli))
	return append(out, body...)
}

// handmadeDir writes data directory d: topic "orders" partition 0, two
// segments, an aborted transaction of producer 42 and an idempotent
// producer 43, leader epochs 0 and 3, snapshots at the roll and at close,
// both checkpoints, partition.metadata and, if clean, the marker.
func handmadeDir(t *testing.T, d string, clean bool, recoveryPoint int64) (logEnd int64, log0Index []byte) {
	const interval = 100
	dir := filepath.Join(d, "orders-0")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	write := func(name string, data []byte) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o644))
	}
	txn := kBatch{base: 3, leaderEpoch: 0, attrs: 0x10, pid: 42, pepoch: 1, baseSeq: 0, baseTs: t0 + 100,
		records: []kRecord{{value: []byte("t1")}, {value: []byte("t2"), tsDelta: 1}}}
	seg0 := buildSegment(0, interval, true, []kBatch{
		plain(0, 0, t0, 3), txn, plain(5, 0, t0+200, 2),
		abortMarker(7, 0, 42, 1, 5, t0+300), plain(8, 0, t0+400, 2),
	})
	idem := kBatch{base: 10, leaderEpoch: 3, pid: 43, pepoch: 0, baseSeq: 0, baseTs: t0 + 500,
		records: []kRecord{{value: []byte("i1")}, {value: []byte("i2"), tsDelta: 2}}}
	seg1 := buildSegment(10, interval, false, []kBatch{idem, plain(12, 3, t0+600, 3)})
	write("00000000000000000000.log", seg0.log)
	write("00000000000000000000.index", seg0.index)
	write("00000000000000000000.timeindex", seg0.timeIndex)
	be := binary.BigEndian
	aborted := be.AppendUint16(nil, 0)
	for _, v := range []int64{42, 3, 7, 8} { // pid, first, last, LSO
		aborted = be.AppendUint64(aborted, uint64(v))
	}
	write("00000000000000000000.txnindex", aborted)
	write("00000000000000000010.log", seg1.log)
	write("00000000000000000010.index", seg1.index)
	write("00000000000000000010.timeindex", seg1.timeIndex)
	p42 := snapshotEntry{pid: 42, epoch: 1, lastSeq: 1, lastOffset: 4, offsetDelta: 1, timestamp: t0 + 300,
		coordinatorEpoch: 5, currentTxnFirstOffset: -1}
	write("00000000000000000010.snapshot", encodeSnapshot(p42))
	p43 := snapshotEntry{pid: 43, epoch: 0, lastSeq: 1, lastOffset: 11, offsetDelta: 1, timestamp: t0 + 502,
		coordinatorEpoch: -1, currentTxnFirstOffset: -1}
	write("00000000000000000015.snapshot", encodeSnapshot(p42, p43))
	write("leader-epoch-checkpoint", []byte("0\n2\n0 0\n3 10\n"))
	write("partition.metadata", []byte("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ\n"))
	root := func(name, content string) {
		require.NoError(t, os.WriteFile(filepath.Join(d, name), []byte(content), 0o644))
	}
	root("recovery-point-offset-checkpoint", fmt.Sprintf("0\n1\norders 0 %d\n", recoveryPoint))
	root("log-start-offset-checkpoint", "0\n1\norders 0 0\n")
	if clean {
		root(".kafka_cleanshutdown", `{"version":0,"brokerEpoch":7}`)
	}
	return 15, seg0.index
}

func TestLoadHandmadeDirectory(t *testing.T) {
	// A snapshot keeps one timestamp per producer (the marker's, for 42),
	// which a load gives to the retained batch too, as Kafka's does.
	wantProducers := []writerstate.Entry{
		{ProducerID: 42, Epoch: 1, CoordinatorEpoch: 5, LastTimestamp: t0 + 300, CurrentTxnFirstOffset: -1,
			Batches: []writerstate.BatchMetadata{{LastSeq: 1, LastOffset: 4, OffsetDelta: 1, Timestamp: t0 + 300}}},
		{ProducerID: 43, Epoch: 0, CoordinatorEpoch: -1, LastTimestamp: t0 + 502, CurrentTxnFirstOffset: -1,
			Batches: []writerstate.BatchMetadata{{LastSeq: 1, LastOffset: 11, OffsetDelta: 1, Timestamp: t0 + 502}}},
	}
	wantEpochs := []leaderepoch.Entry{{Epoch: 0, StartOffset: 0}, {Epoch: 3, StartOffset: 10}}
	opts := segment.Options{IndexIntervalBytes: 100}

	t.Run("clean", func(t *testing.T) {
		d := dataDir(t)
		logEnd, _ := handmadeDir(t, d, true, 15)
		r := loadAt(t, d, opts)
		require.True(t, r.CleanShutdown)
		require.Equal(t, int64(7), r.BrokerEpoch)
		require.Empty(t, r.Report)
		tab := r.Tablets[0]
		require.Equal(t, tp, tab.TopicPartition)
		require.Empty(t, tab.Report, "a clean directory is loaded without a change")
		require.Equal(t, logEnd, tab.LogEndOffset)
		require.Equal(t, logEnd, tab.RecoveryPoint)
		require.Equal(t, []int64{0, 10}, tabletBases(tab))
		require.Equal(t, wantEpochs, tab.Epochs.Entries())
		require.Equal(t, wantProducers, producersOf(tab), "the snapshot at the log end, read as Kafka wrote it")
		require.Len(t, offsetsOf(t, tab), 15)
		checkTablet(t, tab)
		aborted := abortedOf(t, tab)
		require.Len(t, aborted, 1)
		require.Equal(t, int64(42), aborted[0].ProducerID)
		require.Equal(t, int64(8), aborted[0].LastStableOffset)
	})

	t.Run("unclean", func(t *testing.T) {
		// No marker and no recovery point: every segment is recovered and
		// the writer state is rebuilt by replay.
		d := dataDir(t)
		logEnd, index0 := handmadeDir(t, d, false, 0)
		for _, name := range []string{"00000000000000000010.snapshot", "00000000000000000015.snapshot", "leader-epoch-checkpoint"} {
			require.NoError(t, os.Remove(filepath.Join(d, "orders-0", name)))
		}
		r := loadAt(t, d, opts)
		require.False(t, r.CleanShutdown)
		tab := r.Tablets[0]
		require.Equal(t, logEnd, tab.LogEndOffset)
		require.Equal(t, int64(0), tab.RecoveryPoint)
		for _, c := range tab.Report {
			require.Equal(t, RebuiltIndex, c.Action, "%v", c)
		}
		require.Len(t, tab.Report, 2)
		require.Equal(t, wantEpochs, tab.Epochs.Entries(), "epochs from the batches")
		require.Equal(t, wantProducers, producersOf(tab), "the replay agrees with the snapshot Kafka would write")
		checkTablet(t, tab)
		// The rebuilt index of the sealed segment is Kafka's, byte for byte.
		require.NoError(t, tab.Segments[0].Seal())
		got, err := os.ReadFile(tab.Segments[0].Path(logfile.Index))
		require.NoError(t, err)
		require.Equal(t, index0, got)
		require.NotEmpty(t, index0)
	})
}

func loadAt(t *testing.T, d string, opts segment.Options) *Result {
	r, err := Load(vfs.OS, d, Options{Segment: opts, Now: func() time.Time { return time.UnixMilli(t0 + 60_000) }})
	require.NoError(t, err)
	t.Cleanup(func() { r.Close() })
	require.Len(t, r.Tablets, 1)
	return r
}

func producersOf(tab *Tablet) []writerstate.Entry { return tab.State.Producers() }
