package writerstate

import (
	"errors"
	"math"
	"slices"
	"syscall"

	"github.com/seglog/seglog/record"
)

// Source is one segment of the log, as Rebuild replays it (the segment
// package's *Segment is one).
type Source interface {
	// BaseOffset is the segment's first offset.
	BaseOffset() int64
	// BatchesBelow calls fn with each batch from the one holding from on
	// whose offsets are all below to, in order, stopping at fn's first
	// error.
	BatchesBelow(from, to int64, fn func(b record.Batch) error) error
}

// Sources returns segs as the []Source Rebuild takes.
func Sources[S Source](segs []S) []Source {
	out := make([]Source, len(segs))
	for i, g := range segs {
		out[i] = g
	}
	return out
}

// Rebuild brings the state to lastOffset from its snapshots and the log
// (docs/format.md §5.6), as loading a tablet and truncating it do. segs are the
// tablet's segments in base offset order.
//
// Without any snapshot after a clean shutdown it writes empty snapshots at
// the bases of the last two segments and at lastOffset instead of reading
// the log (the upgrade path). Otherwise it drops the snapshots outside
// (logStart, lastOffset], reloads the newest, and replays the segments from
// its offset to lastOffset, taking snapshots at the last two segment bases
// on the way and one at lastOffset at the end.
func (s *State) Rebuild(segs []Source, logStart, lastOffset int64, cleanShutdown bool, nowMs int64) error {
	toSnapshot := []int64{lastOffset}
	if n := len(segs); n > 0 {
		toSnapshot = append(toSnapshot, segs[n-1].BaseOffset())
		if n > 1 {
			toSnapshot = append(toSnapshot, segs[n-2].BaseOffset())
		}
	}
	if _, ok := s.LatestSnapshotOffset(); !ok && cleanShutdown {
		slices.Sort(toSnapshot)
		for _, off := range toSnapshot {
			s.UpdateMapEndOffset(off)
			if err := s.snapshotIfRoom(); err != nil {
				return err
			}
		}
		return nil
	}
	emptyBefore := s.IsEmpty() && s.mapEnd >= lastOffset
	if err := s.TruncateAndReload(logStart, lastOffset, nowMs); err != nil {
		return err
	}
	if lastOffset > s.mapEnd && !emptyBefore {
		if err := s.replay(segs, logStart, lastOffset, toSnapshot); err != nil {
			return err
		}
	}
	s.UpdateMapEndOffset(lastOffset)
	return s.snapshotIfRoom()
}

// snapshotIfRoom takes the snapshots Rebuild writes on its way, which only
// spare a later load some replay: on a full disk (ENOSPC) they are left
// out, so that loading needs no new space.
func (s *State) snapshotIfRoom() error {
	if err := s.TakeSnapshot(false); err != nil && !errors.Is(err, syscall.ENOSPC) {
		return err
	}
	return nil
}

// replay applies the batches of the segments from the map end up to
// lastOffset, segment by segment.
func (s *State) replay(segs []Source, logStart, lastOffset int64, toSnapshot []int64) error {
	for i, seg := range segs {
		if seg.BaseOffset() >= lastOffset {
			break
		}
		if i+1 < len(segs) && segs[i+1].BaseOffset() <= s.mapEnd {
			continue // wholly below the map end
		}
		start := max(seg.BaseOffset(), s.mapEnd, logStart)
		s.UpdateMapEndOffset(start)
		if slices.Contains(toSnapshot, seg.BaseOffset()) {
			if err := s.snapshotIfRoom(); err != nil {
				return err
			}
		}
		to := int64(math.MaxInt64) // a segment wholly below lastOffset is read to its end
		if i+1 == len(segs) || segs[i+1].BaseOffset() > lastOffset {
			to = lastOffset // the segment holding lastOffset: stop at the batch holding it
		}
		a := s.NewAppend(record.OriginReplication)
		var completed []CompletedTxn
		err := seg.BatchesBelow(start, to, func(b record.Batch) error {
			c, err := a.AddBatch(b)
			if c != nil {
				completed = append(completed, *c)
			}
			return err
		})
		if err != nil {
			return err
		}
		s.Apply(a)
		for _, c := range completed {
			if err := s.CompleteTxn(c); err != nil {
				return err
			}
		}
	}
	return nil
}
