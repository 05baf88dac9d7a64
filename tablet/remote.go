package tablet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/segment"

	"github.com/seglog/seglog/logfile"

	"github.com/seglog/seglog/leaderepoch"
	"github.com/seglog/seglog/vfs"
	"github.com/seglog/seglog/writerstate"
)

// Remote is a tier holding the log below the local log start: the tiering
// package implements it, and the tablet never imports it. Its methods are
// called concurrently, without the tablet's locks.
type Remote interface {
	// ReadRemote returns whole batches from the one holding offset: at
	// most maxBytes (at least one batch when minOne), none at or past
	// upper. Data is empty when the tier holds nothing there.
	ReadRemote(ctx context.Context, offset int64, maxBytes int, minOne bool, upper int64) (RemoteRead, error)
	// RemoteAbortedTxns returns the aborted transactions overlapping
	// [from, upper) that the tier indexes, from the object holding from
	// on; complete reports that no later data can hold another.
	RemoteAbortedTxns(ctx context.Context, from, upper int64) (txns []record.AbortedTxn, complete bool, err error)
	// RemoteOffsetForTimestamp returns the first record in the tier with
	// a timestamp at or after ts, or false.
	RemoteOffsetForTimestamp(ctx context.Context, ts int64) (TimestampOffset, bool, error)
	// RemoteEnd is the offset below which every record is in the tier (0
	// when nothing is).
	RemoteEnd() int64
}

// RemoteObject is an object of a tier as an operator looks at it.
type RemoteObject struct {
	Key          string `json:"key"`
	BaseOffset   int64  `json:"baseOffset"`
	NextOffset   int64  `json:"nextOffset"`
	Size         int64  `json:"size"`
	MaxTimestamp int64  `json:"maxTimestamp"`
}

// RemoteLister is a Remote that lists the objects it reads from.
type RemoteLister interface {
	// RemoteObjects returns the objects reads may use, by base offset.
	RemoteObjects() []RemoteObject
}

// TierObjects returns the attached tier's objects; false with no tier
// attached or one that does not list them.
func (t *Tablet) TierObjects() ([]RemoteObject, bool) {
	l, ok := t.remoteTier().(RemoteLister)
	if !ok {
		return nil, false
	}
	return l.RemoteObjects(), true
}

// RemoteRead is what ReadRemote returns.
type RemoteRead struct {
	// Data are whole batches.
	Data []byte
	// FirstEntryIncomplete: the first batch is larger than maxBytes.
	FirstEntryIncomplete bool
	// NextOffset is the offset after the last batch returned.
	NextOffset int64
}

// ErrRemoteStart is returned by SetRemote for a log start the tier cannot
// serve.
var ErrRemoteStart = seglog.NewKafkaError("tablet: remote log start is out of range", 1)

// SetRemote attaches a tier that holds [start, local log start): reads
// below the local log start go to it, the log start becomes start, and
// ApplyRetention leaves the local segments to the tier (which deletes them
// with DeleteLocalBefore once they are uploaded). Called again, it moves
// the log start up to a new start (after remote retention); past the
// local log start, the local segments below it go too.
func (t *Tablet) SetRemote(r Remote, start int64) error {
	return t.setRemote(r, start, false)
}

// AdoptRemote attaches r as SetRemote does, and also moves the log start
// down to start when a tier attached before did not reach so far: a
// cluster's replica that took its partition's published tier (a replica
// started from the tier, or one whose tier was empty when attached).
func (t *Tablet) AdoptRemote(r Remote, start int64) error {
	return t.setRemote(r, start, true)
}

func (t *Tablet) setRemote(r Remote, start int64, lower bool) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.usableLocked(); err != nil {
		return err
	}
	v := t.view()
	if start < 0 || start > v.hw.offset {
		return fmt.Errorf("%w: %d is not in [0, %d]", ErrRemoteStart, start, v.hw.offset)
	}
	attaching := t.remote.Load() == nil || lower && start < v.logStart
	t.remote.Store(&remoteHolder{r})
	if attaching && start <= v.localStart {
		// Attaching: the log start moves down into the tier, as far as the
		// log start the checkpoint kept (DeleteRecordsBefore below the
		// local log start) allows.
		v.logStart = max(start, min(t.checkpointLogStart, v.localStart))
		v.lso = t.lsoMarkLocked(v.hw, v.logStart)
		t.publishLocked(v)
		return nil
	}
	// Remote retention moved the log start up: as DeleteRecordsBefore.
	_, err := t.deleteRecordsBeforeLocked(start)
	return err
}

type remoteHolder struct{ r Remote }

// TieredEnd is the offset below which every record is in the attached
// tier (0 when nothing is); false with no tier attached.
func (t *Tablet) TieredEnd() (int64, bool) {
	r := t.remoteTier()
	if r == nil {
		return 0, false
	}
	return r.RemoteEnd(), true
}

func (t *Tablet) remoteTier() Remote {
	if h := t.remote.Load(); h != nil {
		return h.r
	}
	return nil
}

// DeleteLocalBefore deletes the oldest local segments that end at or
// below offset (and the high watermark), keeping the active one: the tier
// holds them. The local log start moves; the log start does not.
func (t *Tablet) DeleteLocalBefore(offset int64) (RetentionResult, error) {
	if err := t.readOnlyErr(); err != nil {
		return RetentionResult{}, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.usableLocked(); err != nil {
		return RetentionResult{}, err
	}
	if t.remoteTier() == nil {
		return RetentionResult{}, fmt.Errorf("tablet: deleting local segments with no tier attached")
	}
	v := t.view()
	var segs []*seg
	t.mu.segs.Ascend(func(g *seg) bool { segs = append(segs, g); return true })
	var doomed []*seg
	for i, g := range segs[:len(segs)-1] {
		next := segs[i+1].base
		if next > offset || next > v.hw.offset {
			break
		}
		doomed = append(doomed, g)
	}
	if len(doomed) == 0 {
		return RetentionResult{}, nil
	}
	return t.deleteSegmentsLocked(doomed, "tiered", true)
}

// SealedSegment is a sealed segment opened for copying to a tier. Close
// releases it.
type SealedSegment struct {
	Base, Next int64
	// Log is the segment's batches, LogSize bytes.
	Log     io.ReaderAt
	LogSize int64
	Path    string
	// TxnIndex is the .txnindex's bytes.
	TxnIndex []byte
	// Snapshot is the producer snapshot at Next, if one was taken.
	Snapshot []byte
	// Epochs are the leader epochs in force from Base to Next.
	Epochs    []leaderepoch.Entry
	CreatedMs int64
	release   func()
}

// Close releases the segment.
func (s *SealedSegment) Close() {
	if s.release != nil {
		s.release()
		s.release = nil
	}
}

// ErrNotSealed: the segment asked for is the active one or not there.
var ErrNotSealed = seglog.NewKafkaError("tablet: no sealed segment there", -1)

// Sealed opens the sealed segment at base for copying. The segment stays
// readable (and undeleted) until Close. base may also be a batch's base
// offset inside a sealed segment: then the part of the segment from that
// batch on is opened (a cluster's new leader continuing a tier whose end
// falls inside one of its own segments, which rolled elsewhere).
func (t *Tablet) Sealed(base int64) (*SealedSegment, error) {
	t.pub.RLock()
	v := t.pub.v
	g := floorSeg(v.segs, base)
	next := higherSeg(v.segs, base)
	if g == nil || next == nil || !g.acquire() {
		t.pub.RUnlock()
		return nil, fmt.Errorf("%w: %d", ErrNotSealed, base)
	}
	t.pub.RUnlock()
	s := &SealedSegment{Base: base, Next: next.base, Path: g.LogPath(), CreatedMs: g.Created().UnixMilli(),
		release: func() { t.done(g) }}
	fail := func(err error) (*SealedSegment, error) {
		s.Close()
		return nil, err
	}
	sl, err := g.LogSlice()
	if err != nil {
		return fail(err)
	}
	s.Log, s.LogSize = sl, sl.Size()
	if g.base != base {
		pos, err := batchAt(g, sl, base)
		if err != nil {
			return fail(err)
		}
		s.Log, s.LogSize = io.NewSectionReader(sl, pos, sl.Size()-pos), sl.Size()-pos
	}
	txns, err := g.AbortedTxns()
	if err != nil {
		return fail(err)
	}
	for _, x := range txns {
		if x.LastOffset >= base { // (a part's: those that end before it are not its)
			s.TxnIndex = x.AppendTo(s.TxnIndex)
		}
	}
	snap, err := vfs.ReadFile(t.fsys, filepath.Join(t.dir, logfile.Filename(s.Next, logfile.Snapshot)))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fail(err)
	}
	s.Snapshot = snap
	t.mu.Lock()
	entries := t.mu.epochs.Entries()
	t.mu.Unlock()
	for i, e := range entries {
		if e.StartOffset >= s.Next {
			break
		}
		if i+1 < len(entries) && entries[i+1].StartOffset <= s.Base {
			continue // superseded before the segment starts
		}
		s.Epochs = append(s.Epochs, e)
	}
	return s, nil
}

// batchAt is the position in g's log (sl) of the batch whose base offset
// is base: an offset that starts no batch is refused.
func batchAt(g *seg, sl segment.Slice, base int64) (int64, error) {
	op, found, err := g.TranslateOffset(base, 0)
	if err != nil {
		return 0, err
	}
	if found {
		head := make([]byte, record.HeaderSize)
		if _, err := sl.ReadAt(head, op.Position); err == nil {
			if h, _, err := record.ParseHeader(head); err == nil && h.BaseOffset == base {
				return op.Position, nil
			}
		}
	}
	return 0, fmt.Errorf("%w: no batch starts at %d in segment %d", ErrNotSealed, base, g.base)
}

// Producers returns the state of every producer the tablet knows.
func (t *Tablet) Producers() []writerstate.Entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.state.Producers()
}

// ErrNotEmpty: StartFromTier on a tablet that holds records.
var ErrNotEmpty = seglog.NewKafkaError("tablet: the local log is not empty", -1)

// StartFromTier starts an empty tablet at end, the tier's end, with the
// writer state of the producer snapshot taken there (from the newest
// stream object) and the leader epochs given: what a tablet needs to go on
// when the tier holds its whole log and no local segment is left.
func (t *Tablet) StartFromTier(end int64, snapshot []byte, epochs []leaderepoch.Entry) error {
	if err := t.readOnlyErr(); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.usableLocked(); err != nil {
		return err
	}
	v := t.view()
	if v.leo.offset != v.logStart || t.mu.active.Size() != 0 || t.mu.segs.Len() != 1 {
		return fmt.Errorf("%w: offsets [%d, %d)", ErrNotEmpty, v.logStart, v.leo.offset)
	}
	if err := t.truncateFullyLocked(end); err != nil {
		return err
	}
	if len(snapshot) > 0 {
		entries, err := writerstate.ParseSnapshot(snapshot)
		if err != nil {
			return fmt.Errorf("tablet: the tier's producer snapshot at %d: %w", end, err)
		}
		if err := t.mu.state.Restore(end, entries, t.opts.Now().UnixMilli()); err != nil {
			return t.failLocked(err)
		}
	}
	for _, e := range epochs {
		if err := t.mu.epochs.Assign(e.Epoch, min(e.StartOffset, end)); err != nil {
			return t.failLocked(err)
		}
		t.mu.epoch = max(t.mu.epoch, e.Epoch)
	}
	return nil
}

// Fail makes the tablet fail with err from now on (ErrFailed, as a failed
// fsync does): for a part outside the tablet whose failure leaves its
// state unknown, such as a tier's manifest.
func (t *Tablet) Fail(err error) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.failLocked(err)
}

// LeaderEpochs returns the leader-epoch cache's entries.
func (t *Tablet) LeaderEpochs() []leaderepoch.Entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.epochs.Entries()
}

// EpochEnd is the leader's answer to a follower's OffsetForLeaderEpoch
// for epoch (leaderepoch.Cache.EndOffsetFor at the log end, read
// together): the epoch to use and where it ends in this log; (-1, -1)
// when undefined.
func (t *Tablet) EpochEnd(epoch int32) (int32, int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mu.epochs.EndOffsetFor(epoch, t.view().leo.offset)
}
