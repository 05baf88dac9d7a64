package segment

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/logfile"
	"github.com/seglog/seglog/offsetindex"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/timeindex"
)

// logSummary is what index verification needs from the .log: each batch's
// position and last offset, which batches raised the running maximum
// timestamp (and to what), and the ABORT markers.
type logSummary struct {
	positions  []int64
	lasts      []int64
	end        int64
	firstReach map[int64]int64 // last offset → the maximum it raised
	aborts     map[int64]int64 // marker offset → producer id
	running    int64           // the maximum timestamp so far
}

func newLogSummary() *logSummary {
	return &logSummary{firstReach: map[int64]int64{}, aborts: map[int64]int64{}, running: record.NoTimestamp}
}

// add records the batch at pos: its last offset and maximum timestamp, and,
// for a control batch (control is nil for others), its ABORT marker.
func (l *logSummary) add(pos, last, maxTS int64, control func() (record.Batch, error)) {
	l.positions, l.lasts = append(l.positions, pos), append(l.lasts, last)
	if maxTS > l.running {
		l.running = maxTS
		l.firstReach[last] = maxTS
	}
	if control == nil {
		return
	}
	if b, err := control(); err == nil {
		if m, err := b.EndTxnMarker(); err == nil && m.Type == record.ControlAbort {
			l.aborts[last] = m.ProducerID
		}
	}
}

func (s *Segment) summarize() (*logSummary, error) {
	size, err := s.end()
	if err != nil {
		return nil, err
	}
	l := newLogSummary()
	f, err := s.file()
	if err != nil {
		return nil, err
	}
	sc := scanners.get(f, 0, size)
	defer scanners.put(sc)
	for sc.Next() {
		h := sc.Header()
		var control func() (record.Batch, error)
		if h.Attributes.IsControl() {
			control = sc.Batch
		}
		l.add(sc.Pos(), h.BaseOffset+int64(h.LastOffsetDelta), h.MaxTimestamp, control)
	}
	if sc.Stop() == record.ReadFailed {
		return nil, sc.Err()
	}
	l.end = sc.Pos()
	return l, nil
}

// VerifyIndex checks one of the segment's indexes (Index, TimeIndex or
// TxnIndex) against its .log, changing nothing: every offset entry must be
// at the start of a batch that ends at its offset; every time entry's
// timestamp must be the running maximum first reached by the batch ending
// at its offset; every aborted transaction must end at an ABORT marker of
// its producer. Each mismatch is a *seglog.CorruptionError at the entry's
// byte position in the index.
func (s *Segment) VerifyIndex(k logfile.Kind) ([]*seglog.CorruptionError, error) {
	l, err := s.summarize()
	if err != nil {
		return nil, err
	}
	return s.verifyAgainst(k, l)
}

// Check reads the .log once as recovery would — framing, CRC, offsets —
// calling fn (which may be nil) with each valid batch, and checks the
// three indexes against what it read (VerifyIndex's checks). It reports
// where the valid batches end and every problem found; it changes nothing.
func (s *Segment) Check(fn func(b record.Batch, pos int64) error) (Tail, []*seglog.CorruptionError, error) {
	f, err := s.file()
	if err != nil {
		return Tail{}, nil, err
	}
	length, err := f.Size()
	if err != nil {
		return Tail{}, nil, err
	}
	l := newLogSummary()
	tail, err := s.ScanLog(length, func(b record.Batch, pos int64) error {
		var control func() (record.Batch, error)
		if b.IsControl() {
			control = func() (record.Batch, error) { return b, nil }
		}
		l.add(pos, b.LastOffset(), b.MaxTimestamp(), control)
		if fn != nil {
			return fn(b, pos)
		}
		return nil
	})
	if err != nil {
		return tail, nil, err
	}
	l.end = tail.Position
	var out []*seglog.CorruptionError
	for _, k := range []logfile.Kind{logfile.Index, logfile.TimeIndex, logfile.TxnIndex} {
		problems, err := s.verifyAgainst(k, l)
		if errors.Is(err, fs.ErrNotExist) && k != logfile.TxnIndex {
			// A transaction index may be absent, and so may every index
			// of an empty segment (they are created on its first append,
			// as Kafka's lazy indexes are). The position is -1: the file
			// as a whole.
			if length == 0 {
				continue
			}
			path := s.offsetIdx.Path()
			if k == logfile.TimeIndex {
				path = s.timeIdx.Path()
			}
			out = append(out, &seglog.CorruptionError{Path: path, Offset: -1, Err: err, Reason: "missing"})
			continue
		}
		if err != nil {
			return tail, out, err
		}
		out = append(out, problems...)
	}
	return tail, out, nil
}

// verifyAgainst checks one index against a summary of the .log.
func (s *Segment) verifyAgainst(k logfile.Kind, l *logSummary) ([]*seglog.CorruptionError, error) {
	var err error
	var out []*seglog.CorruptionError
	report := func(path string, pos int64, format string, args ...any) {
		out = append(out, &seglog.CorruptionError{Path: path, Offset: pos, Err: seglog.ErrCorruption,
			Reason: fmt.Sprintf(format, args...)})
	}
	logName := filepath.Base(s.path())
	switch k {
	case logfile.Index:
		err = eachEntry(s.offsetIdx, s.offsetIdx.Entry, func(i int, e offsetindex.Entry) {
			pos := int64(i) * offsetindex.EntrySize
			j := sort.Search(len(l.positions), func(j int) bool { return l.positions[j] >= int64(e.Position) })
			switch {
			case int64(e.Position) >= l.end:
				report(s.offsetIdx.Path(), pos, "offset %d position %d: beyond the last batch of %s (which ends at %d)",
					e.Offset, e.Position, logName, l.end)
			case l.positions[j] != int64(e.Position):
				report(s.offsetIdx.Path(), pos, "offset %d position %d: not the start of a batch (inside the batch at %d)",
					e.Offset, e.Position, l.positions[j-1])
			case l.lasts[j] != e.Offset:
				report(s.offsetIdx.Path(), pos, "offset %d position %d: the batch there ends at offset %d",
					e.Offset, e.Position, l.lasts[j])
			}
		})
	case logfile.TimeIndex:
		err = eachEntry(s.timeIdx, s.timeIdx.Entry, func(i int, e timeindex.Entry) {
			pos := int64(i) * timeindex.EntrySize
			reached, ok := l.firstReach[e.Offset]
			switch {
			case !ok:
				report(s.timeIdx.Path(), pos, "timestamp %d offset %d: no batch ending at offset %d raised the maximum timestamp",
					e.Timestamp, e.Offset, e.Offset)
			case reached != e.Timestamp:
				report(s.timeIdx.Path(), pos, "timestamp %d offset %d: the batch ending at offset %d raised the maximum to %d",
					e.Timestamp, e.Offset, e.Offset, reached)
			}
		})
	case logfile.TxnIndex:
		path := s.txnIdx.Path()
		err = s.txnIdx.Scan(func(t record.AbortedTxn, pos int64) bool {
			pid, ok := l.aborts[t.LastOffset]
			switch {
			case !ok:
				report(path, pos, "aborted transaction of producer %d: no ABORT marker at offset %d",
					t.ProducerID, t.LastOffset)
			case pid != t.ProducerID:
				report(path, pos, "aborted transaction of producer %d: the ABORT marker at offset %d is producer %d's",
					t.ProducerID, t.LastOffset, pid)
			}
			return true
		})
	default:
		return nil, fmt.Errorf("segment: %v is not an index", k)
	}
	return out, err
}

// eachEntry calls fn with every entry of a mapped index.
func eachEntry[E any](x interface{ Entries() (int, error) }, entry func(int) (E, error), fn func(int, E)) error {
	n, err := x.Entries()
	if err != nil {
		return err
	}
	for i := range n {
		e, err := entry(i)
		if err != nil {
			return err
		}
		fn(i, e)
	}
	return nil
}
