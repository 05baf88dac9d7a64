package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seglog/seglog/logfile"
	"github.com/seglog/seglog/recovery"
	"github.com/seglog/seglog/tablet"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/segment"
	"github.com/seglog/seglog/txnindex"
	"github.com/seglog/seglog/vfs"
)

func runWithStdin(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	root := newRootCmd()
	var stdout, stderr bytes.Buffer
	root.SetArgs(args)
	root.SetIn(strings.NewReader(stdin))
	root.SetOut(&stdout)
	root.SetErr(&stderr)
	code := exitCode(root.Execute(), &stderr)
	return code, stdout.String(), stderr.String()
}

func lines(n int) string {
	var sb strings.Builder
	for i := range n {
		fmt.Fprintf(&sb, "key-%d:value number %d\n", i, i)
	}
	return sb.String()
}

func TestProduceConsumeOffsets(t *testing.T) {
	d, ackDir := t.TempDir(), t.TempDir()
	code, out, errOut := runWithStdin(t, lines(250), "produce", "--data-dir", d, "--topic", "orders",
		"--batch-records", "20", "--key-separator", ":", "--config", "segment.bytes=2000", "--sync",
		"--acks-file", filepath.Join(ackDir, "acks"))
	require.Equal(t, 0, code, errOut)
	require.JSONEq(t, `{"records":250,"batches":13,"firstOffset":0,"lastOffset":249}`, out)
	acks, err := os.ReadFile(filepath.Join(ackDir, "acks"))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(acks), "0 19\n20 39\n"))
	require.True(t, strings.HasSuffix(string(acks), "240 249\n"))

	code, out, errOut = runSeglog(t, "consume", "--data-dir", d, "--topic", "orders", "--from-offset", "247")
	require.Equal(t, 0, code, errOut)
	got := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, got, 3)
	var r recordOut
	require.NoError(t, json.Unmarshal([]byte(got[0]), &r))
	require.Equal(t, int64(247), r.Offset)
	require.Equal(t, "key-247", *r.Key)
	require.Equal(t, "value number 247", *r.Value)

	code, out, _ = runSeglog(t, "consume", "--data-dir", d, "--topic", "orders", "--from", "earliest",
		"--max-records", "2", "--format", "value")
	require.Equal(t, 0, code)
	require.Equal(t, "value number 0\nvalue number 1\n", out)

	code, out, errOut = runSeglog(t, "offsets", "--data-dir", d, "--topic", "orders")
	require.Equal(t, 0, code, errOut)
	var offs struct {
		LogEndOffset  int64 `json:"logEndOffset"`
		HighWatermark int64 `json:"highWatermark"`
		RecoveryPoint int64 `json:"recoveryPoint"`
		Segments      []struct {
			BaseOffset int64 `json:"baseOffset"`
			NextOffset int64 `json:"nextOffset"`
		} `json:"segments"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &offs))
	require.Equal(t, int64(250), offs.LogEndOffset)
	require.Equal(t, int64(250), offs.HighWatermark)
	require.Equal(t, int64(250), offs.RecoveryPoint)
	require.Greater(t, len(offs.Segments), 3, "segment.bytes=2000 was applied")
	for i := 1; i < len(offs.Segments); i++ {
		require.Equal(t, offs.Segments[i-1].NextOffset, offs.Segments[i].BaseOffset)
	}

	// The config was kept: a later produce rolls the same way.
	props, err := os.ReadFile(filepath.Join(d, "orders-0", "seglog.properties"))
	require.NoError(t, err)
	require.Contains(t, string(props), "segment.bytes=2000")

	// Bad input gets a clear error and changes nothing.
	code, _, errOut = runWithStdin(t, "x\n", "produce", "--data-dir", d, "--topic", "orders", "--config", "segment.byts=1")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, `unknown key "segment.byts"`)
	code, _, errOut = runSeglog(t, "consume", "--data-dir", d, "--topic", "nope")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "no such tablet")
	code, _, errOut = runSeglog(t, "consume", "--data-dir", d, "--topic", "orders", "--from-offset", "999")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "offset out of range")
}

// The acceptance check of the tablet issue: a directory written by
// seglog produce and closed passes every Kafka-format check, read with
// franz-go where it decodes batches.
func TestProduceWritesAKafkaDirectory(t *testing.T) {
	d := t.TempDir()
	code, _, errOut := runWithStdin(t, lines(500), "produce", "--data-dir", d, "--topic", "t", "--partition", "3",
		"--batch-records", "7", "--key-separator", ":", "--config", "segment.bytes=3000", "--config", "index.interval.bytes=200",
		"--compression", "lz4")
	require.Equal(t, 0, code, errOut)
	dir := filepath.Join(d, "t-3")
	names, err := os.ReadDir(dir)
	require.NoError(t, err)
	next := int64(0)
	segments := 0
	for _, n := range names {
		name, err := logfile.ParseFilename(n.Name())
		if err != nil || name.Kind != logfile.Log {
			continue
		}
		segments++
		require.Equal(t, next, name.Base, "segments are contiguous")
		data, err := os.ReadFile(filepath.Join(dir, n.Name()))
		require.NoError(t, err)
		fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{},
			&kmsg.FetchResponseTopicPartition{RecordBatches: data, HighWatermark: 1 << 40, LastStableOffset: 1 << 40},
			kgo.DefaultDecompressor(), nil)
		require.NoError(t, fp.Err, "franz-go decodes and CRC-checks %s", n.Name())
		for _, r := range fp.Records {
			require.Equal(t, next, r.Offset, "contiguous offsets")
			require.Equal(t, fmt.Sprintf("key-%d", next), string(r.Key))
			next++
		}
		seg, err := segment.Open(vfs.OS, dir, name.Base, segment.Options{ReadOnly: true})
		require.NoError(t, err)
		for _, k := range []logfile.Kind{logfile.Index, logfile.TimeIndex, logfile.TxnIndex} {
			problems, err := seg.VerifyIndex(k)
			require.NoError(t, err)
			require.Empty(t, problems, "%v of %s", k, n.Name())
		}
		require.NoError(t, seg.Close())
		for k, width := range map[logfile.Kind]int{logfile.Index: 8, logfile.TimeIndex: 12} {
			idx, err := os.ReadFile(filepath.Join(dir, logfile.Filename(name.Base, k)))
			require.NoError(t, err)
			require.Zero(t, len(idx)%width, "%v of %s: whole entries", k, n.Name())
			if len(idx) > 0 {
				require.NotEqual(t, make([]byte, width), idx[len(idx)-width:], "%v of %s is trimmed", k, n.Name())
			}
		}
	}
	require.Equal(t, int64(500), next)
	require.Greater(t, segments, 3)
	tp := checkpoint.TopicPartition{Topic: "t", Partition: 3}
	for name, want := range map[string]int64{checkpoint.RecoveryPointFile: 500, checkpoint.LogStartOffsetFile: 0,
		checkpoint.ReplicationOffsetFile: 500} {
		o, err := checkpoint.ReadOffsets(vfs.OS, filepath.Join(d, name))
		require.NoError(t, err)
		require.Equal(t, checkpoint.Offsets{tp: want}, o, name)
	}
	clean, _, err := checkpoint.TakeCleanShutdown(vfs.OS, d)
	require.NoError(t, err)
	require.True(t, clean, "the clean-shutdown marker")
}

// franzBatch encodes a batch with franz-go's kmsg, as a producer sends it.
func franzBatch(pid int64, epoch int16, seq int32, transactional bool, values ...string) []byte {
	rb := kmsg.RecordBatch{Magic: 2, PartitionLeaderEpoch: -1, ProducerID: pid, ProducerEpoch: epoch, FirstSequence: seq,
		FirstTimestamp: 1_700_000_000_000, MaxTimestamp: 1_700_000_000_000, NumRecords: int32(len(values)),
		LastOffsetDelta: int32(len(values) - 1)}
	if transactional {
		rb.Attributes = 0x10
	}
	var raw []byte
	for i, v := range values {
		r := kmsg.Record{OffsetDelta: int32(i), Value: []byte(v)}
		r.Length = int32(len(r.AppendTo(nil)) - 1)
		raw = r.AppendTo(raw)
	}
	return finishFranz(rb, raw)
}

// franzMarker encodes a COMMIT (1) or ABORT (0) control batch.
func franzMarker(pid int64, epoch int16, typ byte) []byte {
	rb := kmsg.RecordBatch{Magic: 2, PartitionLeaderEpoch: -1, ProducerID: pid, ProducerEpoch: epoch, FirstSequence: -1,
		Attributes: 0x30, FirstTimestamp: 1_700_000_000_001, MaxTimestamp: 1_700_000_000_001, NumRecords: 1}
	r := kmsg.Record{Key: []byte{0, 0, 0, typ}, Value: []byte{0, 0, 0, 0, 0, 5}}
	r.Length = int32(len(r.AppendTo(nil)) - 1)
	return finishFranz(rb, r.AppendTo(nil))
}

func finishFranz(rb kmsg.RecordBatch, raw []byte) []byte {
	rb.Records = raw
	rb.Length = int32(record.HeaderSize - record.LogOverhead + len(raw))
	enc := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(enc[17:], crc32.Checksum(enc[21:], crc32.MakeTable(crc32.Castagnoli)))
	return enc
}

// The acceptance check of the tablet issue: raw batches from franz-go get
// Kafka's answers through seglog append, the txnindex holds exactly the
// aborted transaction with its LSO, and a read-committed consume hides it.
func TestAppendFranzBatches(t *testing.T) {
	d := t.TempDir()
	write := func(name string, batches ...[]byte) string {
		p := filepath.Join(t.TempDir(), name)
		require.NoError(t, os.WriteFile(p, bytes.Join(batches, nil), 0o644))
		return p
	}
	client := write("client",
		franzBatch(1, 0, 0, false, "a", "b"),    // 0-1
		franzBatch(1, 0, 2, false, "c"),         // 2
		franzBatch(1, 0, 0, false, "a", "b"),    // a retry: the original offsets
		franzBatch(1, 0, 7, false, "gap"),       // out of order
		franzBatch(2, 0, 0, true, "t1", "t2"),   // 3-4, aborted below
		franzBatch(3, 0, 0, true, "c1"),         // 5, committed below
		franzBatch(1, 1, 0, false, "new epoch"), // 6
		franzBatch(1, 0, 3, false, "fenced"),    // an old epoch
		franzMarker(2, 0, 0),                    // markers only from the coordinator
	)
	code, out, _ := runSeglog(t, "append", "--data-dir", d, "--topic", "txns", "--batches", client)
	require.Equal(t, 1, code, "some batches were rejected")
	var answers []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var a map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &a))
		answers = append(answers, a)
	}
	require.Len(t, answers, 9)
	ok := func(i int, base, last float64, dup bool) {
		require.Equal(t, map[string]any{"baseOffset": base, "lastOffset": last, "duplicate": dup}, answers[i], "batch %d", i)
	}
	rejected := func(i int, name string) {
		require.Equal(t, name, answers[i]["error"], "batch %d: %v", i, answers[i])
		require.NotEmpty(t, answers[i]["message"])
	}
	ok(0, 0, 1, false)
	ok(1, 2, 2, false)
	ok(2, 0, 1, true)
	rejected(3, "OUT_OF_ORDER_SEQUENCE_NUMBER")
	ok(4, 3, 4, false)
	ok(5, 5, 5, false)
	ok(6, 6, 6, false)
	rejected(7, "INVALID_PRODUCER_EPOCH")
	rejected(8, "INVALID_RECORD")

	// The coordinator ends the transactions: producer 2 aborts (with a
	// franz-go marker through append), producer 3 commits (end-txn).
	code, out, errOut := runSeglog(t, "append", "--data-dir", d, "--topic", "txns", "--origin", "coordinator",
		"--batches", write("abort", franzMarker(2, 0, 0)))
	require.Equal(t, 0, code, errOut)
	require.JSONEq(t, `{"baseOffset":7,"lastOffset":7,"duplicate":false}`, out)
	code, out, errOut = runSeglog(t, "end-txn", "--data-dir", d, "--topic", "txns", "--producer-id", "3",
		"--producer-epoch", "0", "--commit")
	require.Equal(t, 0, code, errOut)
	require.JSONEq(t, `{"offset":8}`, out)

	aborted, err := txnindex.Open(vfs.OS, filepath.Join(d, "txns-0", logfile.Filename(0, logfile.TxnIndex)), 0,
		txnindex.Options{ReadOnly: true}).All()
	require.NoError(t, err)
	require.Equal(t, []record.AbortedTxn{{ProducerID: 2, FirstOffset: 3, LastOffset: 7, LastStableOffset: 5}}, aborted,
		"producer 3's open transaction at 5 held the LSO when 2 aborted")

	values := func(isolation string) string {
		code, out, errOut := runSeglog(t, "consume", "--data-dir", d, "--topic", "txns", "--isolation", isolation,
			"--format", "value")
		require.Equal(t, 0, code, errOut)
		return out
	}
	require.Equal(t, "a\nb\nc\nt1\nt2\nc1\nnew epoch\n", values("read-uncommitted"))
	require.Equal(t, "a\nb\nc\nc1\nnew epoch\n", values("read-committed"), "the aborted records are hidden")
}

// consume reads every partition of a topic, partition by partition, each
// record naming its partition, unless --partition picks one; Kafka's
// spelling of the isolation level is taken; --from-offset needs
// --partition when the topic has several.
func TestConsumeReadsEveryPartition(t *testing.T) {
	d := filepath.Join(t.TempDir(), "data")
	m, err := tablet.OpenManager(vfs.OS, d, tablet.ManagerOptions{})
	require.NoError(t, err)
	for p := range int32(3) {
		tab, err := m.Create(checkpoint.TopicPartition{Topic: "three", Partition: p}, nil)
		require.NoError(t, err)
		for i := range 10 {
			_, err := tab.AppendRecords([]record.Record{{Value: fmt.Appendf(nil, "p%d-%d", p, i)}}, record.None, tablet.AppendOptions{})
			require.NoError(t, err)
		}
	}
	require.NoError(t, m.Close())
	code, out, errOut := runSeglog(t, "consume", "--data-dir", d, "--topic", "three", "--format", "value", "--isolation", "read_committed")
	require.Zero(t, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 30, "every partition's records")
	require.Equal(t, "p0-0", lines[0])
	require.Equal(t, "p2-9", lines[29])
	code, out, errOut = runSeglog(t, "consume", "--data-dir", d, "--topic", "three", "--max-records", "12")
	require.Zero(t, code, errOut)
	lines = strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 12, "--max-records counts across partitions")
	var rec struct {
		Partition *int32 `json:"partition"`
		Offset    int64  `json:"offset"`
		Value     string `json:"value"`
	}
	require.NoError(t, json.Unmarshal([]byte(lines[11]), &rec))
	require.NotNil(t, rec.Partition, "each record names its partition")
	require.Equal(t, int32(1), *rec.Partition)
	require.Equal(t, int64(1), rec.Offset)
	require.Equal(t, "p1-1", rec.Value)
	code, out, errOut = runSeglog(t, "consume", "--data-dir", d, "--topic", "three", "--partition", "2", "--format", "value")
	require.Zero(t, code, errOut)
	require.Equal(t, 10, strings.Count(out, "\n"))
	require.NotContains(t, out, "p0-")
	code, _, errOut = runSeglog(t, "consume", "--data-dir", d, "--topic", "three", "--from-offset", "3")
	require.NotZero(t, code)
	require.Contains(t, errOut, "--from-offset needs --partition")
}

// After a crash, the notes of one kind (every tablet's index rebuilt) are
// one line with their count; damage stays a line each.
func TestLoadNotesAreAggregated(t *testing.T) {
	rebuilt := func(i int) recovery.Change {
		return recovery.Change{File: fmt.Sprintf("d/t-%d/00000000000000000000.log", i), Action: recovery.RebuiltIndex,
			Why: "recovering after an unclean shutdown"}
	}
	r := &recovery.Result{}
	for i := range 56 {
		r.Tablets = append(r.Tablets, &recovery.Tablet{Report: []recovery.Change{rebuilt(i)}})
	}
	r.Tablets[7].Report = append(r.Tablets[7].Report, recovery.Change{File: "d/t-7/00000000000000000000.log",
		Action: recovery.Lost, FromOffset: 5, ToOffset: 9, Why: "gone"})
	r.Tablets[9].Report = append(r.Tablets[9].Report, recovery.Change{File: "d/t-9/00000000000000000000.log",
		Action: recovery.Truncated, Bytes: 30, Why: "torn tail at position 690"})
	var out bytes.Buffer
	printLoadChanges(&out, &tablet.Manager{Loaded: r}, false)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 3, out.String())
	require.Equal(t, "damage: d/t-7/00000000000000000000.log: durable offsets lost (offsets [5, 9)): gone", lines[0])
	require.Equal(t, "note: 56 files: rebuilt indexes: recovering after an unclean shutdown "+
		"(d/t-0/00000000000000000000.log, d/t-1/00000000000000000000.log, d/t-2/00000000000000000000.log, 53 more)", lines[1])
	require.Equal(t, "note: d/t-9/00000000000000000000.log: truncated (30 bytes): torn tail at position 690", lines[2])
}
