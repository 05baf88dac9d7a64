package writerstate

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/vfs"
)

const (
	producerID      = 1
	epoch           = 0
	defaultSequence = 0
	expirationMs    = 86400000
	maxTxnTimeoutMs = 5 * 60 * 1000
	lateTxnMs       = maxTxnTimeoutMs + LateTransactionBufferMs
)

// mockTime is the clock of a test.
type mockTime struct{ ms int64 }

func (m *mockTime) Now() time.Time { return time.UnixMilli(m.ms) }
func (m *mockTime) sleep(d int64)  { m.ms += d }
func (m *mockTime) millis() int64  { return m.ms }
func newMockTime() *mockTime       { return &mockTime{ms: 1_700_000_000_000} }

// fixture is ProducerStateManagerTest's setup: a state in a directory.
type fixture struct {
	fsys vfs.FS
	dir  string
	time *mockTime
	s    *State
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{fsys: vfs.OS, dir: t.TempDir(), time: newMockTime()}
	f.s = f.open(t)
	return f
}

func (f *fixture) options() Options {
	return Options{ProducerIDExpirationMs: expirationMs, MaxTransactionTimeoutMs: maxTxnTimeoutMs, Now: f.time.Now, SyncSnapshots: true}
}

func (f *fixture) open(t *testing.T) *State {
	s, err := Open(f.fsys, f.dir, f.options())
	require.NoError(t, err)
	return s
}

// appendEntry is Kafka's appendEntry: one batch of one record.
func appendEntry(s *State, pid int64, e int16, seq int32, offset, ts int64, origin record.Origin, txn bool) error {
	a := s.NewAppend(origin)
	if err := a.AddData(pid, DataBatch{Epoch: e, FirstSeq: seq, LastSeq: seq, MaxTimestamp: ts,
		FirstOffset: offset, LastOffset: offset, Transactional: txn}); err != nil {
		return err
	}
	s.Apply(a)
	s.UpdateMapEndOffset(offset + 1)
	return nil
}

func (f *fixture) appendClient(s *State, pid int64, e int16, seq int32, offset int64, txn bool) error {
	return appendEntry(s, pid, e, seq, offset, f.time.millis(), record.OriginClient, txn)
}

func (f *fixture) appendReplication(s *State, e int16, seq int32, offset int64) error {
	return appendEntry(s, producerID, e, seq, offset, f.time.millis(), record.OriginReplication, false)
}

// appendMarker is Kafka's appendEndTxnMarker, from the coordinator.
func appendMarker(s *State, pid int64, e int16, aborted bool, offset int64, coordinatorEpoch int32, ts int64) error {
	a := s.NewAppend(record.OriginCoordinator)
	c, err := a.AddMarker(pid, Marker{Epoch: e, Offset: offset, Timestamp: ts, Aborted: aborted, CoordinatorEpoch: coordinatorEpoch})
	if err != nil {
		return err
	}
	s.Apply(a)
	if c != nil {
		if err := s.CompleteTxn(*c); err != nil {
			return err
		}
	}
	s.UpdateMapEndOffset(offset + 1)
	return nil
}

func (f *fixture) commit(s *State, pid int64, e int16, offset int64) error {
	return appendMarker(s, pid, e, false, offset, 0, f.time.millis())
}

func (f *fixture) abort(s *State, pid int64, e int16, offset int64) error {
	return appendMarker(s, pid, e, true, offset, 0, f.time.millis())
}

func lastEntry(t *testing.T, s *State, pid int64) Entry {
	t.Helper()
	e, ok := s.Producer(pid)
	require.True(t, ok, "producer %d has state", pid)
	return e
}

func fuo(s *State) int64 {
	o, ok := s.FirstUnstableOffset()
	if !ok {
		return -1
	}
	return o
}
