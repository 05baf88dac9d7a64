package segment

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/logfile"
	"github.com/seglog/seglog/offsetindex"
	"github.com/seglog/seglog/record"
)

// What the callers of a segment need of its indexes: the segment answers,
// and nobody above it reaches into an index.

// Path returns the path of the segment's file of kind k (which need not
// exist: a .txnindex is created by the first aborted transaction).
func (s *Segment) Path(k logfile.Kind) string {
	switch k {
	case logfile.Log:
		return s.LogPath()
	case logfile.Index:
		return s.offsetIdx.Path()
	case logfile.TimeIndex:
		return s.timeIdx.Path()
	case logfile.TxnIndex:
		return s.txnIdx.Path()
	}
	return filepath.Join(s.dir, logfile.Filename(s.base, k))
}

// AppendAbortedTxn records a transaction aborted by a marker in this
// segment in its .txnindex (created by the first). Its last offset must be
// above the previous one's.
func (s *Segment) AppendAbortedTxn(t record.AbortedTxn) error { return s.txnIdx.Append(t) }

// AbortedTxns returns every aborted transaction the segment's .txnindex
// holds, in marker order; none when there is no .txnindex.
func (s *Segment) AbortedTxns() ([]record.AbortedTxn, error) {
	txns, err := s.txnIdx.All()
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return txns, err
}

// CollectAbortedTxns appends to dst the aborted transactions of the
// segment's .txnindex that overlap [fetchOffset, upperBound): those with a
// last offset at or above fetchOffset and a first offset below upperBound.
// complete reports that no later segment can hold another (an entry's last
// stable offset reached upperBound). An entry that cannot be right — its
// marker outside [base, segmentEnd), or its first offset after its last —
// is a *seglog.CorruptionError; segmentEnd is -1 when unknown (the active
// segment).
func (s *Segment) CollectAbortedTxns(dst []record.AbortedTxn, fetchOffset, upperBound, segmentEnd int64) (_ []record.AbortedTxn, complete bool, err error) {
	sr, err := s.txnIdx.CollectAbortedTxns(fetchOffset, upperBound, segmentEnd)
	if err != nil {
		return dst, false, err
	}
	return append(dst, sr.Txns...), sr.Complete, nil
}

// UpperBoundOffset returns the offset of the first offset-index entry at or
// after position+size: an offset at or beyond the end of a read of size
// bytes from position, or false when the index has none (the read may reach
// the end of the segment). Kafka's fetchUpperBoundOffset.
func (s *Segment) UpperBoundOffset(position int32, size int) (int64, bool, error) {
	e, ok, err := s.offsetIdx.FetchUpperBoundOffset(position, size)
	return e.Offset, ok, err
}

// IndexInfo describes a segment's offset and time indexes.
type IndexInfo struct {
	// OffsetEntries and OffsetSlots are the entries of the offset index
	// and the entries its file has room for (equal once it is trimmed).
	OffsetEntries, OffsetSlots int
	// LastIndexedOffset is the offset of the offset index's last entry
	// (the base offset when it has none).
	LastIndexedOffset int64
	// LastTimeEntry is the time index's last entry (timestamp -1 when it
	// has none).
	LastTimeEntry TimestampOffset
	// Full reports that either index has no room for another entry.
	Full bool
}

// IndexInfo describes the segment's indexes, opening them if needed.
func (s *Segment) IndexInfo() (IndexInfo, error) {
	var info IndexInfo
	var err error
	if info.OffsetEntries, err = s.offsetIdx.Entries(); err != nil {
		return info, err
	}
	if info.OffsetSlots, err = s.offsetIdx.MaxEntries(); err != nil {
		return info, err
	}
	if info.LastIndexedOffset, err = s.offsetIdx.LastOffset(); err != nil {
		return info, err
	}
	te, err := s.timeIdx.LastEntry()
	if err != nil {
		return info, err
	}
	info.LastTimeEntry = TimestampOffset{Timestamp: te.Timestamp, Offset: te.Offset}
	full, err := s.offsetIdx.IsFull()
	if err != nil {
		return info, err
	}
	timeFull, err := s.timeIdx.IsFull()
	info.Full = full || timeFull
	return info, err
}

// CreateTimeIndex creates an empty .timeindex in place of a missing one
// (Kafka does the same at load: a sealed segment's final entry is then
// missing, which only makes a lookup by time scan further).
func (s *Segment) CreateTimeIndex() error {
	_, err := s.timeIdx.Resize(0)
	return err
}

// QuickCheckIndexes checks a sealed segment's offset and time indexes from
// their lengths and end slots, reading two entries of each and mapping
// nothing: whole entries, a last entry at or above the base, time not going
// backwards from the first entry to the last. A missing index is not
// checked. Every problem found is a *seglog.CorruptionError, joined.
func (s *Segment) QuickCheckIndexes() error {
	_, _, err := s.offsetIdx.QuickCheck()
	if errors.Is(err, fs.ErrNotExist) {
		err = nil
	}
	terr := s.timeIdx.QuickCheck()
	if errors.Is(terr, fs.ErrNotExist) {
		terr = nil
	}
	return errors.Join(err, terr)
}

// CheckIndexes runs the load-time checks of a segment's indexes. Kafka
// checks only the transaction index (KAFKA-7283 dropped the others to
// start faster); the offset and time indexes get O(1) checks here — whole
// entries, a last entry at or above the base, a last position inside the
// .log, time not going backwards from the first entry to the last — which
// catch a torn, truncated or overwritten index without reading it whole.
// Beyond that, a sealed segment's indexes were trimmed when it was sealed,
// and a flush made that durable before the recovery point passed it, so a
// zero tail there means a rebuild or a write was cut short: it fails the
// check too. Sealed indexes are read with two preads each and not mapped,
// so that loading a tablet opens nothing it does not use; the active
// segment's are mapped (it is about to take appends). hasTxnIndex says
// whether a .txnindex exists to check.
func (s *Segment) CheckIndexes(active, hasTxnIndex bool) error {
	var err error
	if active {
		err = s.checkActiveIndexes()
	} else {
		err = s.checkSealedIndexes()
	}
	if hasTxnIndex {
		err = errors.Join(err, s.txnIdx.SanityCheck())
	}
	return err
}

func (s *Segment) checkSealedIndexes() error {
	last, n, err := s.offsetIdx.QuickCheck()
	if err == nil {
		err = s.checkLastPosition(last, n)
	}
	return errors.Join(err, s.timeIdx.QuickCheck())
}

func (s *Segment) checkActiveIndexes() error {
	err := errors.Join(s.offsetIdx.SanityCheck(), s.timeIdx.SanityCheck())
	if err != nil {
		return err
	}
	n, err := s.offsetIdx.Entries()
	if err != nil || n == 0 {
		return err
	}
	last, err := s.offsetIdx.LastEntry()
	if err != nil {
		return err
	}
	return s.checkLastPosition(last, n)
}

func (s *Segment) checkLastPosition(last offsetindex.Entry, n int) error {
	if n == 0 || int64(last.Position) < s.FileLength() { // the length: no read of the .log at load
		return nil
	}
	return &seglog.CorruptionError{Path: s.offsetIdx.Path(), Offset: int64(n-1) * offsetindex.EntrySize,
		Err: seglog.ErrCorruption, Reason: fmt.Sprintf("the last entry (offset %d) points at position %d, beyond the %d bytes of %s",
			last.Offset, last.Position, s.FileLength(), filepath.Base(s.LogPath()))}
}

// UntrimmedIndex is an index a crash left untrimmed: slots of room after
// its valid entries, up to a zero entry or one that does not increase.
type UntrimmedIndex struct {
	Path           string
	Entries, Slots int
	StopReason     string
}

// PrepareForAppends opens the active segment's offset and time indexes and
// gives them their full room back (maxIndexSize bytes each), as a segment
// that takes appends needs. It reports the indexes that were found
// untrimmed (a crash left their preallocated tail); their valid entries
// are kept.
func (s *Segment) PrepareForAppends(maxIndexSize int) ([]UntrimmedIndex, error) {
	var out []UntrimmedIndex
	for _, x := range []interface {
		Open() (offsetindex.Opened, error)
		Resize(int) (bool, error)
		Path() string
	}{s.offsetIdx, s.timeIdx} {
		opened, err := x.Open()
		if err != nil {
			return out, err
		}
		if opened.Untrimmed() {
			out = append(out, UntrimmedIndex{Path: x.Path(), Entries: opened.Entries, Slots: opened.Slots, StopReason: opened.StopReason})
		}
		if _, err := x.Resize(maxIndexSize); err != nil {
			return out, err
		}
	}
	return out, nil
}
