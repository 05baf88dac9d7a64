package writerstate

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog/record"
)

// Scenario 54: testBasicIdMapping.
func TestBasicIDMapping(t *testing.T) {
	f := newFixture(t)
	s := f.s
	require.NoError(t, appendEntry(s, producerID, epoch, defaultSequence, 0, 0, record.OriginClient, false))
	require.NoError(t, appendEntry(s, producerID, epoch, 1, 0, 1, record.OriginClient, false))
	// A duplicate is detected separately; appended, it is out of order.
	require.ErrorIs(t, appendEntry(s, producerID, epoch, 1, 0, 1, record.OriginClient, false), ErrOutOfOrderSequence)
	require.ErrorIs(t, appendEntry(s, producerID, epoch, 5, 0, 2, record.OriginClient, false), ErrOutOfOrderSequence)
	require.NoError(t, appendEntry(s, producerID, epoch+1, defaultSequence, 0, 3, record.OriginClient, false))
	require.ErrorIs(t, appendEntry(s, producerID, epoch, defaultSequence, 0, 4, record.OriginClient, false), ErrInvalidProducerEpoch)
}

// Scenario 55: testAppendTxnMarkerWithNoProducerState.
func TestAppendTxnMarkerWithNoProducerState(t *testing.T) {
	f := newFixture(t)
	s := f.s
	const producerEpoch = 2
	require.NoError(t, f.commit(s, producerID, producerEpoch, 27))
	first := lastEntry(t, s, producerID)
	require.Equal(t, int16(producerEpoch), first.Epoch)
	require.Equal(t, int64(producerID), first.ProducerID)
	require.Equal(t, record.NoSequence, first.LastSeq())
	require.ErrorIs(t, appendEntry(s, producerID, 0, defaultSequence, 4, 0, record.OriginClient, false), ErrInvalidProducerEpoch,
		"fencing works with only a marker left")
	require.ErrorIs(t, appendEntry(s, producerID, producerEpoch, 17, 4, 0, record.OriginClient, false), ErrOutOfOrderSequence)
	require.NoError(t, appendEntry(s, producerID, producerEpoch, defaultSequence, 4, 39, record.OriginClient, false))
	second := lastEntry(t, s, producerID)
	require.Equal(t, int16(producerEpoch), second.Epoch)
	require.Equal(t, int32(0), second.LastSeq())
}

// Scenario 56: testProducerSequenceWrapAround, ...InvalidWrapAround,
// ...WithWrapAroundBatchRecord, and testNoValidationOnFirstEntryWhenLoadingLog.
func TestSequenceWrapAround(t *testing.T) {
	f := newFixture(t)
	s := f.s
	const e = 15
	require.NoError(t, f.appendReplication(s, e, math.MaxInt32, 735))
	require.NoError(t, f.appendClient(s, producerID, e, 0, 735+500, false))
	last := lastEntry(t, s, producerID)
	require.Equal(t, int16(e), last.Epoch)
	require.Equal(t, int32(math.MaxInt32), last.FirstSeq())
	require.Equal(t, int32(0), last.LastSeq())

	s = newFixture(t).s
	require.NoError(t, f.appendReplication(s, e, math.MaxInt32, 735))
	require.ErrorIs(t, f.appendClient(s, producerID, e, 1, 735+500, false), ErrOutOfOrderSequence)

	s = newFixture(t).s
	a := s.NewAppend(record.OriginReplication)
	require.NoError(t, a.AddData(producerID, DataBatch{Epoch: e, FirstSeq: math.MaxInt32 - 10, LastSeq: 9,
		FirstOffset: 2000, LastOffset: 2020}))
	_, ok := s.Producer(producerID)
	require.False(t, ok, "nothing changes before Apply")
	s.Apply(a)
	last = lastEntry(t, s, producerID)
	require.Equal(t, int32(math.MaxInt32-10), last.FirstSeq())
	require.Equal(t, int32(9), last.LastSeq())
	require.Equal(t, int64(2000), last.FirstDataOffset())
	require.Equal(t, int64(2020), last.LastDataOffset())

	s = newFixture(t).s
	require.NoError(t, f.appendReplication(s, 5, 16, 735))
	last = lastEntry(t, s, producerID)
	require.Equal(t, int16(5), last.Epoch)
	require.Equal(t, int32(16), last.FirstSeq())
	require.Equal(t, int32(16), last.LastSeq())
	require.Equal(t, int64(735), last.LastDataOffset())
	require.Equal(t, int64(735), last.FirstDataOffset())
}

// Scenario 57: testOutOfSequenceAfterControlRecordEpochBump and
// testControlRecordBumpsProducerEpoch.
func TestOutOfSequenceAfterControlRecordEpochBump(t *testing.T) {
	f := newFixture(t)
	s := f.s
	require.NoError(t, f.appendClient(s, producerID, epoch, defaultSequence, 0, true))
	require.NoError(t, f.appendClient(s, producerID, epoch, 1, 1, true))
	const bumped = 1
	require.NoError(t, f.abort(s, producerID, bumped, 1))
	require.ErrorIs(t, f.appendClient(s, producerID, bumped, 2, 2, true), ErrOutOfOrderSequence)
	require.ErrorIs(t, f.appendClient(s, producerID, bumped+1, 2, 2, true), ErrOutOfOrderSequence)
	require.NoError(t, f.appendClient(s, producerID, bumped, defaultSequence, 0, true))
	last := lastEntry(t, s, producerID)
	require.Equal(t, int16(bumped), last.Epoch)
	require.Equal(t, int32(0), last.LastSeq())

	s = newFixture(t).s
	require.NoError(t, f.appendClient(s, producerID, epoch, defaultSequence, 0, false))
	require.NoError(t, f.abort(s, producerID, 1, 1))
	last = lastEntry(t, s, producerID)
	require.Equal(t, int16(1), last.Epoch)
	require.Equal(t, int64(-1), last.CurrentTxnFirstOffset)
	require.Equal(t, record.NoSequence, last.FirstSeq())
	require.Equal(t, record.NoSequence, last.LastSeq())
	require.NoError(t, f.appendClient(s, producerID, 1, 0, 2, false))
	require.Equal(t, int32(defaultSequence), lastEntry(t, s, producerID).FirstSeq())
}

// Scenario 58: testNonTransactionalAppendWithOngoingTransaction.
func TestNonTransactionalAppendWithOngoingTransaction(t *testing.T) {
	f := newFixture(t)
	require.NoError(t, f.appendClient(f.s, producerID, epoch, defaultSequence, 0, true))
	require.ErrorIs(t, f.appendClient(f.s, producerID, epoch, 1, 1, false), ErrInvalidTxnState)
}

// Scenario 59: testCoordinatorFencing, and testOldEpochForControlRecord.
func TestCoordinatorFencing(t *testing.T) {
	f := newFixture(t)
	s := f.s
	const e = 5
	require.NoError(t, f.appendClient(s, producerID, e, defaultSequence, 99, true))
	require.NoError(t, appendMarker(s, producerID, e, false, 100, 1, f.time.millis()))
	require.Equal(t, int32(1), lastEntry(t, s, producerID).CoordinatorEpoch)
	require.NoError(t, appendMarker(s, producerID, e, false, 101, 1, f.time.millis()), "the current epoch")
	require.NoError(t, appendMarker(s, producerID, e, false, 102, 2, f.time.millis()), "a bumped epoch")
	require.ErrorIs(t, appendMarker(s, producerID, e, false, 103, 1, f.time.millis()), ErrCoordinatorFenced)

	s = newFixture(t).s
	require.NoError(t, f.appendClient(s, producerID, e, defaultSequence, 99, true))
	require.ErrorIs(t, f.commit(s, producerID, 3, 100), ErrInvalidProducerEpoch)

	// Replication only reports a fenced coordinator.
	a := s.NewAppend(record.OriginReplication)
	require.NoError(t, appendMarker(s, producerID, e, false, 100, 9, f.time.millis()))
	_, err := a.AddMarker(producerID, Marker{Epoch: e, Offset: 101, CoordinatorEpoch: 1})
	require.NoError(t, err)
}

// Scenario 60: testFirstUnstableOffset / testLastStableOffsetCompletedTxn,
// and testFirstUnstableOffsetAfterTruncation.
func TestFirstUnstableOffset(t *testing.T) {
	f := newFixture(t)
	s := f.s
	const e = 5
	_, ok := s.FirstUndecidedOffset()
	require.False(t, ok)
	require.NoError(t, f.appendClient(s, producerID, e, defaultSequence, 99, true))
	und, _ := s.FirstUndecidedOffset()
	require.Equal(t, int64(99), und)
	require.Equal(t, int64(99), fuo(s))
	const another = 2
	require.NoError(t, f.appendClient(s, another, e, defaultSequence, 105, true))
	require.Equal(t, int64(99), fuo(s))
	require.NoError(t, f.commit(s, producerID, e, 109))
	und, _ = s.FirstUndecidedOffset()
	require.Equal(t, int64(105), und)
	require.Equal(t, int64(99), fuo(s), "the commit is not replicated yet")
	s.OnHighWatermarkUpdated(100)
	require.Equal(t, int64(99), fuo(s))
	s.OnHighWatermarkUpdated(110)
	require.Equal(t, int64(105), fuo(s))
	require.NoError(t, f.abort(s, another, e, 112))
	_, ok = s.FirstUndecidedOffset()
	require.False(t, ok)
	require.Equal(t, int64(105), fuo(s))
	s.OnHighWatermarkUpdated(113)
	require.Equal(t, int64(-1), fuo(s))
}

func TestLastStableOffsetCompletedTxn(t *testing.T) {
	f := newFixture(t)
	s := f.s
	begin := func(pid, start int64) {
		require.NoError(t, appendEntry(s, pid, epoch, 0, start, f.time.millis(), record.OriginClient, true))
	}
	const start1 = 992342
	begin(producerID, start1)
	start2 := int64(start1 + 25)
	begin(producerID+1, start2)
	start3 := int64(start1 + 57)
	begin(producerID+2, start3)

	last1 := start3 + 15
	c1 := CompletedTxn{ProducerID: producerID, FirstOffset: start1, LastOffset: last1}
	require.Equal(t, start2, s.LastStableOffsetOf(c1))
	require.NoError(t, s.CompleteTxn(c1))
	s.OnHighWatermarkUpdated(last1 + 1)
	require.Equal(t, start2, fuo(s))
	require.Equal(t, start2, s.LastStableOffset(last1+1, 0))

	last3 := last1 + 20
	c3 := CompletedTxn{ProducerID: producerID + 2, FirstOffset: start3, LastOffset: last3}
	require.Equal(t, start2, s.LastStableOffsetOf(c3))
	require.NoError(t, s.CompleteTxn(c3))
	s.OnHighWatermarkUpdated(last3 + 1)
	require.Equal(t, start2, fuo(s))

	last2 := last3 + 78
	c2 := CompletedTxn{ProducerID: producerID + 1, FirstOffset: start2, LastOffset: last2}
	require.Equal(t, last2+1, s.LastStableOffsetOf(c2))
	require.NoError(t, s.CompleteTxn(c2))
	s.OnHighWatermarkUpdated(last2 + 1)
	require.Equal(t, int64(-1), fuo(s))
	require.Equal(t, last2+1, s.LastStableOffset(last2+1, 0), "no unstable offset: the LSO is the high watermark")
	require.Error(t, s.CompleteTxn(c2), "completing a transaction that is not open")
}

func TestLastStableOffsetIsClampedToTheLogStart(t *testing.T) {
	f := newFixture(t)
	require.NoError(t, f.appendClient(f.s, producerID, epoch, 0, 10, true))
	require.Equal(t, int64(10), f.s.LastStableOffset(50, 0))
	require.Equal(t, int64(20), f.s.LastStableOffset(50, 20))
	require.Equal(t, int64(5), f.s.LastStableOffset(5, 0), "never above the high watermark")
}

// Scenario 61: testSkipEmptyTransactions.
func TestSkipEmptyTransactions(t *testing.T) {
	f := newFixture(t)
	s := f.s
	seq := int32(defaultSequence)
	appendData := func(a *Append, start, end int64) {
		count := int32(end - start)
		require.NoError(t, a.AddData(producerID, DataBatch{Epoch: epoch, FirstSeq: seq, LastSeq: seq + count,
			FirstOffset: start, LastOffset: end, Transactional: true, MaxTimestamp: f.time.millis()}))
		seq += count + 1
	}
	end := func(a *Append, aborted bool, offset int64) *CompletedTxn {
		c, err := a.AddMarker(producerID, Marker{Epoch: epoch, Offset: offset, Aborted: aborted, CoordinatorEpoch: 27, Timestamp: f.time.millis()})
		require.NoError(t, err)
		return c
	}
	first := s.NewAppend(record.OriginClient)
	appendData(first, 16, 20)
	require.Equal(t, []TxnMetadata{{producerID, 16, -1}}, first.info(producerID).started)
	s.Apply(first)
	s.OnHighWatermarkUpdated(21)
	require.Equal(t, int64(16), fuo(s))

	second := s.NewAppend(record.OriginClient)
	c1 := end(second, false, 21)
	require.Equal(t, &CompletedTxn{ProducerID: producerID, FirstOffset: 16, LastOffset: 21}, c1)
	require.Nil(t, end(second, false, 22), "an empty transaction completes nothing")
	require.Nil(t, end(second, true, 23))
	appendData(second, 24, 27)
	c2 := end(second, true, 28)
	require.NotNil(t, c2)
	require.Nil(t, end(second, true, 29))
	appendData(second, 30, 31)
	started := second.info(producerID).started
	require.Len(t, started, 2)
	require.Equal(t, int64(24), started[0].FirstOffset)
	require.Equal(t, int64(30), started[1].FirstOffset)
	s.Apply(second)
	require.NoError(t, s.CompleteTxn(*c1))
	require.NoError(t, s.CompleteTxn(*c2))
	s.OnHighWatermarkUpdated(32)
	require.Equal(t, int64(30), fuo(s))
}

// Scenario 62: testPidExpirationTimeout, testProducersWithOngoingTransactionsDontExpire,
// testProducerStateAfterFencingAbortMarker.
func TestProducerExpiry(t *testing.T) {
	f := newFixture(t)
	s := f.s
	const e = 5
	require.NoError(t, f.appendClient(s, producerID, e, defaultSequence, 1, false))
	f.time.sleep(expirationMs + 1)
	s.RemoveExpiredProducers(f.time.millis())
	require.Zero(t, s.ProducerCount())
	require.NoError(t, f.appendClient(s, producerID, e, defaultSequence+1, 2, false), "an expired producer may go on")
	require.Equal(t, 1, s.ProducerCount())
	require.Equal(t, int32(defaultSequence+1), s.Producers()[0].LastSeq())
	require.Equal(t, int64(3), s.MapEndOffset())

	f = newFixture(t)
	s = f.s
	require.NoError(t, f.appendClient(s, producerID, e, defaultSequence, 99, true))
	f.time.sleep(expirationMs + 1)
	s.RemoveExpiredProducers(f.time.millis())
	_, ok := s.Producer(producerID)
	require.True(t, ok, "open transactions never expire")
	und, _ := s.FirstUndecidedOffset()
	require.Equal(t, int64(99), und)

	f = newFixture(t)
	s = f.s
	require.NoError(t, f.appendClient(s, producerID, epoch, defaultSequence, 0, true))
	require.NoError(t, f.abort(s, producerID, epoch+1, 1))
	last := lastEntry(t, s, producerID)
	require.Equal(t, int64(-1), last.CurrentTxnFirstOffset)
	require.Equal(t, int64(-1), last.LastDataOffset())
	require.Equal(t, int64(-1), last.FirstDataOffset())
	s.RemoveExpiredProducers(f.time.millis())
	_, ok = s.Producer(producerID)
	require.True(t, ok, "kept to preserve its fencing epoch")
}

// Scenario 69: testAppendEmptyControlBatch.
func TestAppendEmptyControlBatch(t *testing.T) {
	f := newFixture(t)
	s := f.s
	h := record.BatchHeader{BaseOffset: 15, Attributes: record.MakeAttributes(record.None, record.CreateTime, true, true, false),
		ProducerID: 23423, ProducerEpoch: 0, BaseSequence: -1, PartitionLeaderEpoch: -1}
	data := h.AppendTo(nil, record.HeaderSize)
	b, _, err := record.ParseBatch(data)
	require.NoError(t, err)
	a := s.NewAppend(record.OriginClient)
	c, err := a.AddBatch(b)
	require.NoError(t, err)
	require.Nil(t, c)
	s.Apply(a)
	_, ok := s.Producer(23423)
	require.False(t, ok, "an empty control batch changes nothing")
}

// testPrepareUpdateDoesNotMutate and updateProducerTransactionState.
func TestAppendDoesNotMutateBeforeApply(t *testing.T) {
	f := newFixture(t)
	s := f.s
	a := s.NewAppend(record.OriginClient)
	require.NoError(t, a.AddData(producerID, DataBatch{Epoch: epoch, FirstSeq: 0, LastSeq: 5, FirstOffset: 15, LastOffset: 20}))
	_, ok := s.Producer(producerID)
	require.False(t, ok)
	s.Apply(a)
	next := s.NewAppend(record.OriginClient)
	require.NoError(t, next.AddData(producerID, DataBatch{Epoch: epoch, FirstSeq: 6, LastSeq: 10, FirstOffset: 26, LastOffset: 30}))
	last := lastEntry(t, s, producerID)
	require.Equal(t, int32(0), last.FirstSeq())
	require.Equal(t, int32(5), last.LastSeq())
	require.Equal(t, int64(20), last.LastDataOffset())
	s.Apply(next)
	last = lastEntry(t, s, producerID)
	require.Equal(t, int32(0), last.FirstSeq())
	require.Equal(t, int32(10), last.LastSeq())
	require.Equal(t, int64(30), last.LastDataOffset())

	// A transaction within one append: the marker keeps the batches.
	s = newFixture(t).s
	require.NoError(t, f.appendClient(s, producerID, epoch, defaultSequence, 9, false))
	a = s.NewAppend(record.OriginClient)
	require.NoError(t, a.AddData(producerID, DataBatch{Epoch: epoch, FirstSeq: 1, LastSeq: 5, FirstOffset: 16, LastOffset: 20, Transactional: true}))
	require.NoError(t, a.AddData(producerID, DataBatch{Epoch: epoch, FirstSeq: 6, LastSeq: 10, FirstOffset: 26, LastOffset: 30, Transactional: true}))
	updated := &a.info(producerID).updated
	require.Equal(t, int32(1), updated.FirstSeq())
	require.Equal(t, int32(10), updated.LastSeq())
	require.Equal(t, int64(16), updated.CurrentTxnFirstOffset)
	c, err := a.AddMarker(producerID, Marker{Epoch: epoch, Offset: 40, CoordinatorEpoch: 15})
	require.NoError(t, err)
	require.Equal(t, &CompletedTxn{ProducerID: producerID, FirstOffset: 16, LastOffset: 40}, c)
	require.Equal(t, int32(1), updated.FirstSeq())
	require.Equal(t, int64(30), updated.LastDataOffset())
	require.Equal(t, int64(-1), updated.CurrentTxnFirstOffset)
}

// Replicas accept any sequence (scenario 68's
// testAcceptAppendWithSequenceGapsOnReplica).
func TestAcceptSequenceGapsOnReplica(t *testing.T) {
	f := newFixture(t)
	s := f.s
	require.NoError(t, f.appendClient(s, producerID, epoch, defaultSequence, 0, false))
	require.ErrorIs(t, f.appendClient(s, producerID, epoch, 3, 1, false), ErrOutOfOrderSequence)
	require.Equal(t, int32(0), lastEntry(t, s, producerID).LastSeq())
	require.NoError(t, f.appendReplication(s, epoch, 3, 1))
	require.Equal(t, int32(3), lastEntry(t, s, producerID).LastSeq())
}

func TestHasLateTransaction(t *testing.T) {
	f := newFixture(t)
	s := f.s
	const pid1, e1, pid2, e2 = 39, 2, 57, 9
	require.NoError(t, f.appendClient(s, pid1, e1, defaultSequence, 100, true))
	require.False(t, s.HasLateTransaction(f.time.millis()))
	f.time.sleep(500)
	require.NoError(t, f.appendClient(s, pid2, e2, defaultSequence, 150, true))
	require.False(t, s.HasLateTransaction(f.time.millis()))
	f.time.sleep(lateTxnMs - 500 + 1)
	require.True(t, s.HasLateTransaction(f.time.millis()))
	f.time.sleep(500)
	require.True(t, s.HasLateTransaction(f.time.millis()))
	require.NoError(t, f.commit(s, pid1, e1, 200))
	require.True(t, s.HasLateTransaction(f.time.millis()))
	require.NoError(t, f.commit(s, pid2, e2, 250))
	require.False(t, s.HasLateTransaction(f.time.millis()))

	// After a full truncation there is no open transaction.
	require.NoError(t, f.appendClient(s, pid1, e1, 1, 300, true))
	f.time.sleep(lateTxnMs + 1)
	require.True(t, s.HasLateTransaction(f.time.millis()))
	require.NoError(t, s.TruncateFullyAndStartAt(150))
	require.False(t, s.HasLateTransaction(f.time.millis()))
}

// Transaction verification (the sequence check against the lowest
// verified sequence).
func TestVerificationEntries(t *testing.T) {
	f := newFixture(t)
	s := f.s
	v := s.MaybeCreateVerification(producerID, 1, epoch)
	require.Equal(t, Verification{LowestSequence: 1, Epoch: epoch, TimestampMs: f.time.millis()}, v)
	require.Equal(t, int32(0), s.MaybeCreateVerification(producerID, 0, epoch).LowestSequence, "a lower sequence")
	v = s.MaybeCreateVerification(producerID, 2, 1)
	require.Equal(t, int32(2), v.LowestSequence, "a higher epoch")
	v = s.MaybeCreateVerification(producerID, 0, epoch)
	require.Equal(t, int32(2), v.LowestSequence, "a lower epoch is ignored")
	require.Equal(t, int16(1), v.Epoch)

	s = newFixture(t).s
	s.MaybeCreateVerification(producerID, 0, epoch)
	require.ErrorIs(t, f.appendClient(s, producerID, epoch, 4, 0, true), ErrOutOfOrderSequence)
	require.NoError(t, f.appendClient(s, producerID, epoch, 0, 0, true))
	s.ClearVerification(producerID)
	_, ok := s.VerificationOf(producerID)
	require.False(t, ok)

	s.MaybeCreateVerification(producerID, 0, epoch)
	f.time.sleep(expirationMs / 2)
	s.RemoveExpiredProducers(f.time.millis())
	_, ok = s.VerificationOf(producerID)
	require.True(t, ok)
	f.time.sleep(expirationMs/2 + 1)
	s.RemoveExpiredProducers(f.time.millis())
	_, ok = s.VerificationOf(producerID)
	require.False(t, ok)
}

// Scenario 75 (UnifiedLogTest.testDuplicateAppends): a retry of any of the
// last five batches is a duplicate with the original offsets; a partial or
// older one is out of order.
func TestDuplicateAppends(t *testing.T) {
	f := newFixture(t)
	s := f.s
	const pid, e = 1, 0
	seq := int32(0)
	offset := int64(0)
	type sent struct {
		firstSeq, lastSeq int32
		first, last       int64
	}
	var history []sent
	for i := range 10 {
		n := int32(1 + i%3)
		first, last := offset, offset+int64(n)-1
		a := s.NewAppend(record.OriginClient)
		require.NoError(t, a.AddData(pid, DataBatch{Epoch: e, FirstSeq: seq, LastSeq: seq + n - 1, FirstOffset: first,
			LastOffset: last, MaxTimestamp: int64(1000 + i)}))
		s.Apply(a)
		s.UpdateMapEndOffset(last + 1)
		history = append(history, sent{seq, seq + n - 1, first, last})
		seq += n
		offset = last + 1
	}
	// The fifth from last is still recognised, with its offsets.
	fifth := history[len(history)-5]
	dup, ok := s.FindDuplicate(pid, e, fifth.firstSeq, fifth.lastSeq)
	require.True(t, ok)
	require.Equal(t, fifth.first, dup.FirstOffset())
	require.Equal(t, fifth.last, dup.LastOffset)
	// The sixth from last is too old: not a duplicate, and out of order.
	sixth := history[len(history)-6]
	_, ok = s.FindDuplicate(pid, e, sixth.firstSeq, sixth.lastSeq)
	require.False(t, ok)
	require.ErrorIs(t, appendEntry(s, pid, e, sixth.firstSeq, offset, 0, record.OriginClient, false), ErrOutOfOrderSequence)
	// A partial duplicate is not one either.
	partial := history[len(history)-2] // three records
	require.Greater(t, partial.lastSeq, partial.firstSeq+1)
	_, ok = s.FindDuplicate(pid, e, partial.firstSeq+1, partial.lastSeq)
	require.False(t, ok)
	a := s.NewAppend(record.OriginClient)
	require.ErrorIs(t, a.AddData(pid, DataBatch{Epoch: e, FirstSeq: partial.firstSeq + 1, LastSeq: partial.lastSeq,
		FirstOffset: offset, LastOffset: offset}), ErrOutOfOrderSequence)
	_, ok = s.FindDuplicate(pid, e+1, fifth.firstSeq, fifth.lastSeq)
	require.False(t, ok, "another epoch")
	_, ok = s.FindDuplicate(99, e, fifth.firstSeq, fifth.lastSeq)
	require.False(t, ok, "another producer")
}

// One append of many producers' batches (a rebuild replays a segment as
// one): each producer's batches land in its own part, searched while there
// are few and indexed past searchedInfos, and Apply gives each its own.
func TestAppendOfManyProducers(t *testing.T) {
	s := newFixture(t).s
	a := s.NewAppend(record.OriginClient)
	const producers = 3 * searchedInfos
	offset := int64(0)
	for round := range int32(2) {
		for pid := range int64(producers) {
			require.NoError(t, a.AddData(1000+pid, DataBatch{Epoch: 0, FirstSeq: round * 5, LastSeq: round*5 + 4,
				FirstOffset: offset, LastOffset: offset + 4}))
			offset += 5
		}
	}
	require.Len(t, a.infos, producers)
	s.Apply(a)
	require.Equal(t, producers, s.ProducerCount())
	for pid := range int64(producers) {
		e := lastEntry(t, s, 1000+pid)
		require.Equal(t, int32(0), e.FirstSeq())
		require.Equal(t, int32(9), e.LastSeq())
		require.Len(t, e.Batches, 2)
	}
}
