package txnindex

import (
	"bytes"
	"testing"

	"github.com/seglog/seglog/record"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/vfs"
)

// The transactions of TransactionIndexTest: (producer, first, last, LSO).
var kafkaTxns = []record.AbortedTxn{txn(0, 0, 10, 11), txn(1, 5, 15, 13), txn(2, 18, 35, 25), txn(3, 32, 50, 40)}

func withTxns(t *testing.T, fsys vfs.FS, path string, base int64, txns []record.AbortedTxn) *Index {
	x := Open(fsys, path, base, Options{})
	for _, txn := range txns {
		require.NoError(t, x.Append(txn))
	}
	return x
}

// Scenario 16: testPositionSetCorrectlyWhenOpened.
func TestReopenAppends(t *testing.T) {
	mem := vfs.NewMem()
	x := withTxns(t, mem, "/0.txnindex", 0, kafkaTxns)
	require.NoError(t, x.Close())
	y := Open(mem, "/0.txnindex", 0, Options{})
	another := txn(3, 50, 60, 55)
	require.NoError(t, y.Append(another))
	all, err := y.All()
	require.NoError(t, err)
	require.Equal(t, append(append([]record.AbortedTxn{}, kafkaTxns...), another), all)
	// Beyond Kafka, the last offset is reloaded on reopen.
	require.NoError(t, y.Close())
	z := Open(mem, "/0.txnindex", 0, Options{})
	require.ErrorIs(t, z.Append(txn(4, 1, 55, 56)), ErrLastOffsetNotIncreasing)
}

// Scenario 17: testSanityCheck.
func TestSanityCheck(t *testing.T) {
	mem := vfs.NewMem()
	require.NoError(t, withTxns(t, mem, "/0.txnindex", 0, kafkaTxns[:2]).Close())
	require.NoError(t, Open(mem, "/0.txnindex", 0, Options{}).SanityCheck())
	err := Open(mem, "/0.txnindex", 100, Options{}).SanityCheck()
	require.ErrorIs(t, err, seglog.ErrCorruption)
	var ce *seglog.CorruptionError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, int64(0), ce.Offset)
	require.Equal(t, "/0.txnindex", ce.Path)
}

// Scenario 18: testLastOffsetMustIncrease / testLastOffsetCannotDecrease.
func TestLastOffsetMustIncrease(t *testing.T) {
	x := withTxns(t, vfs.NewMem(), "/0.txnindex", 0, []record.AbortedTxn{txn(0, 0, 15, 11)})
	require.ErrorIs(t, x.Append(txn(1, 5, 15, 13)), ErrLastOffsetNotIncreasing)
	require.ErrorIs(t, x.Append(txn(1, 5, 10, 13)), ErrLastOffsetNotIncreasing)
}

// Scenario 19: testCollectAbortedTransactions.
func TestCollectAbortedTxns(t *testing.T) {
	x := withTxns(t, vfs.NewMem(), "/0.txnindex", 0, kafkaTxns)
	cases := []struct {
		fetch, upper int64
		want         []record.AbortedTxn
		complete     bool
	}{
		{0, 100, kafkaTxns, false},
		{0, 32, kafkaTxns[:3], true},
		{0, 35, kafkaTxns, true},
		{11, 35, kafkaTxns[1:], true},
		{20, 41, kafkaTxns[2:], false},
	}
	for _, c := range cases {
		r, err := x.CollectAbortedTxns(c.fetch, c.upper, -1)
		require.NoError(t, err)
		require.Equal(t, c.want, r.Txns, "[%d, %d)", c.fetch, c.upper)
		require.Equal(t, c.complete, r.Complete, "[%d, %d)", c.fetch, c.upper)
	}
}

// Scenario 20: testTruncate.
func TestTruncate(t *testing.T) {
	x := withTxns(t, vfs.NewMem(), "/0.txnindex", 0, kafkaTxns)
	require.NoError(t, x.TruncateTo(51))
	all, err := x.All()
	require.NoError(t, err)
	require.Equal(t, kafkaTxns, all)
	require.NoError(t, x.TruncateTo(50))
	all, err = x.All()
	require.NoError(t, err)
	require.Equal(t, kafkaTxns[:3], all)
	require.ErrorIs(t, x.Append(txn(9, 30, 35, 36)), ErrLastOffsetNotIncreasing, "the last offset is now 35")
	require.NoError(t, x.Append(txn(9, 30, 36, 37)))
	require.NoError(t, x.Reset())
	all, err = x.All()
	require.NoError(t, err)
	require.Empty(t, all)
	size, err := x.Size()
	require.NoError(t, err)
	require.Zero(t, size)
	require.NoError(t, x.Append(txn(0, 0, 1, 2)), "anything goes after a reset")
}

// Scenario 21: testAbortedTxnSerde.
func TestAbortedTxnSerde(t *testing.T) {
	txn := record.AbortedTxn{ProducerID: 983493, FirstOffset: 137, LastOffset: 299, LastStableOffset: 200}
	b := txn.AppendTo(nil)
	require.Len(t, b, EntrySize)
	got, version := parse(b)
	require.Equal(t, txn, got)
	require.Equal(t, int8(0), version)
}

func TestCreatedOnFirstAppendAndPartialTail(t *testing.T) {
	mem := vfs.NewMem()
	x := Open(mem, "/0.txnindex", 0, Options{})
	all, err := x.All()
	require.NoError(t, err)
	require.Empty(t, all)
	require.NoError(t, x.TruncateTo(5))
	require.NoError(t, x.Flush())
	_, err = mem.Stat("/0.txnindex")
	require.Error(t, err, "not created by reads, truncation or flush")
	require.NoError(t, x.Append(kafkaTxns[0]))
	_, err = mem.Stat("/0.txnindex")
	require.NoError(t, err)
	require.NoError(t, x.Close())

	// A torn append leaves a partial entry: it is ignored, and the next
	// append overwrites it.
	data, err := vfs.ReadFile(mem, "/0.txnindex")
	require.NoError(t, err)
	data = append(data, kafkaTxns[1].AppendTo(nil)[:20]...)
	require.NoError(t, vfs.WriteFile(mem, "/0.txnindex", data))
	y := Open(mem, "/0.txnindex", 0, Options{})
	all, err = y.All()
	require.NoError(t, err)
	require.Equal(t, kafkaTxns[:1], all)
	require.NoError(t, y.Append(kafkaTxns[1]))
	all, err = y.All()
	require.NoError(t, err)
	require.Equal(t, kafkaTxns[:2], all)
	size, err := y.Size()
	require.NoError(t, err)
	require.Equal(t, int64(2*EntrySize), size)
}

func TestUnknownVersion(t *testing.T) {
	mem := vfs.NewMem()
	data := bytes.Join([][]byte{kafkaTxns[0].AppendTo(nil), kafkaTxns[1].AppendTo(nil)}, nil)
	data[EntrySize] = 1 // the version's high byte, which is what Kafka reads
	require.NoError(t, vfs.WriteFile(mem, "/0.txnindex", data))
	_, err := Open(mem, "/0.txnindex", 0, Options{}).All()
	var ce *seglog.CorruptionError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, int64(EntrySize), ce.Offset)
	require.Contains(t, ce.Reason, "version 1")
}

func TestManyEntriesAcrossReadBuffers(t *testing.T) {
	var txns []record.AbortedTxn
	for i := range 1000 {
		txns = append(txns, txn(int64(i), int64(i*10), int64(i*10+5), int64(i*10+6)))
	}
	x := withTxns(t, vfs.NewMem(), "/0.txnindex", 0, txns)
	all, err := x.All()
	require.NoError(t, err)
	require.Equal(t, txns, all)
	r, err := x.CollectAbortedTxns(5000, 5100, -1)
	require.NoError(t, err)
	require.Len(t, r.Txns, 10)
	require.True(t, r.Complete)
}

func TestLifecycle(t *testing.T) {
	mem := vfs.NewMem()
	x := withTxns(t, mem, "/0.txnindex", 0, kafkaTxns)
	require.NoError(t, x.Rename("/0.txnindex.deleted"))
	require.Equal(t, "/0.txnindex.deleted", x.Path())
	all, err := x.All()
	require.NoError(t, err)
	require.Len(t, all, 4)
	require.NoError(t, x.Delete())
	_, err = mem.Stat("/0.txnindex.deleted")
	require.Error(t, err)
	_, err = x.All()
	require.ErrorIs(t, err, ErrDeleted)

	never := Open(mem, "/never.txnindex", 0, Options{})
	require.NoError(t, never.Rename("/never.txnindex.deleted"), "renaming a file never created")
	require.NoError(t, never.Delete())

	ro := Open(mem, "/ro.txnindex", 0, Options{ReadOnly: true})
	require.ErrorIs(t, ro.Append(kafkaTxns[0]), ErrReadOnly)
	require.ErrorIs(t, ro.Reset(), ErrReadOnly)
	require.ErrorIs(t, ro.TruncateTo(1), ErrReadOnly)
}

// Flushed entries survive a crash; an unflushed append may leave a partial
// entry, which is ignored.
func TestCrash(t *testing.T) {
	for seed := range uint64(50) {
		mem := vfs.NewMem()
		x := withTxns(t, mem, "/0.txnindex", 0, kafkaTxns[:2])
		require.NoError(t, x.Flush())
		require.NoError(t, mem.SyncDir("/"))
		require.NoError(t, x.Append(kafkaTxns[2]))
		require.NoError(t, x.Append(kafkaTxns[3]))
		after := mem.Crash(vfs.CrashRandom, seed)
		all, err := Open(after, "/0.txnindex", 0, Options{}).All()
		require.NoError(t, err)
		require.GreaterOrEqual(t, len(all), 2)
		require.Equal(t, kafkaTxns[:2], all[:2])
	}
}

func TestCheck(t *testing.T) {
	mem := vfs.NewMem()
	bad := []record.AbortedTxn{txn(1, 0, 10, 11), txn(2, 20, 15, 16), txn(3, 5, 14, 15), txn(4, 30, 40, 60), txn(5, 1, 3, 4)}
	var data []byte
	for _, b := range bad {
		data = b.AppendTo(data)
	}
	data = append(data, 0, 0, 0)
	require.NoError(t, vfs.WriteFile(mem, "/5.txnindex", data))
	problems, err := Open(mem, "/5.txnindex", 5, Options{ReadOnly: true}).Check()
	require.NoError(t, err)
	var reasons []string
	for _, p := range problems {
		reasons = append(reasons, p.Reason)
	}
	require.Equal(t, []string{
		"first offset 20 is after the last offset 15",
		"last offset 14 does not increase (previous 15)",
		"last stable offset 60 is beyond the marker at 40",
		"last offset 3 is below the base offset 5",
		"a partial entry of 3 bytes at the end",
	}, reasons)
	require.Equal(t, int64(EntrySize), problems[0].Offset)

	good := withTxns(t, mem, "/0.txnindex", 0, kafkaTxns)
	problems, err = good.Check()
	require.NoError(t, err)
	require.Empty(t, problems)
}

// txn is an aborted transaction by its fields, in order.
func txn(pid, first, last, lso int64) record.AbortedTxn {
	return record.AbortedTxn{ProducerID: pid, FirstOffset: first, LastOffset: last, LastStableOffset: lso}
}
