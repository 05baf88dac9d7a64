package cleaner

import (
	"math"
	"sort"

	"github.com/seglog/seglog/segment"
)

// Dead batches. Building the map reads every batch of the dirty section;
// once it is built, a batch none of whose offsets is the last of its key
// loses every record to the recopy. Such a batch — not transactional (the
// recopy follows transactions batch by batch), not a control batch, not
// an active producer's last (kept, emptied) — is removed without being
// read again: on a log whose keys are updated often, most batches are.

// deadBatch is where a batch lies in its segment and what it holds.
type deadBatch struct {
	pos        int64
	size       int32
	records    int32
	base, last int64
}

// maxDeadBatches bounds what BuildMap remembers (24 bytes a batch); the
// batches after it are read again as before.
const maxDeadBatches = 1 << 20

// deadBatches holds the candidates BuildMap met, in offset order, by
// segment; keepDead then keeps only the dead ones.
type deadBatches struct {
	segs   []*segment.Segment
	starts []int // segs[i]'s batches start at all[starts[i]]
	all    []deadBatch
}

func (d *deadBatches) reset() { *d = deadBatches{} }

func (d *deadBatches) add(s *segment.Segment, b deadBatch) {
	if len(d.all) >= maxDeadBatches {
		return
	}
	if len(d.segs) == 0 || d.segs[len(d.segs)-1] != s {
		d.segs, d.starts = append(d.segs, s), append(d.starts, len(d.all))
	}
	d.all = append(d.all, b)
}

// keepDead drops the candidates holding an offset m has as a key's last.
func (d *deadBatches) keepDead(m *OffsetMap) {
	if len(d.all) == 0 {
		return
	}
	live := make([]bool, len(d.all))
	m.each(func(offset int64) {
		i := sort.Search(len(d.all), func(i int) bool { return d.all[i].base > offset }) - 1
		if i >= 0 && offset <= d.all[i].last {
			live[i] = true
		}
	})
	kept := d.all[:0]
	for i, s := range d.starts {
		end := len(live)
		if i+1 < len(d.starts) {
			end = d.starts[i+1]
		}
		d.starts[i] = len(kept)
		for j := s; j < end; j++ {
			if !live[j] {
				kept = append(kept, d.all[j])
			}
		}
	}
	d.all = kept
}

// of returns the dead batches of s for scan, each reported to skipped.
func (d *deadBatches) of(s *segment.Segment, skipped func(deadBatch) error) *deadList {
	for i, g := range d.segs {
		if g != s {
			continue
		}
		end := len(d.all)
		if i+1 < len(d.starts) {
			end = d.starts[i+1]
		}
		if d.starts[i] == end {
			return nil
		}
		return &deadList{list: d.all[d.starts[i]:end], skipped: skipped}
	}
	return nil
}

// deadList walks one segment's dead batches as scan goes (nil: none).
type deadList struct {
	list    []deadBatch
	skipped func(deadBatch) error
}

// at returns the dead batch at position pos, dropping those before it.
func (l *deadList) at(pos int64) (deadBatch, bool) {
	if l == nil {
		return deadBatch{}, false
	}
	for len(l.list) > 0 && l.list[0].pos < pos {
		l.list = l.list[1:]
	}
	if len(l.list) > 0 && l.list[0].pos == pos {
		d := l.list[0]
		l.list = l.list[1:]
		return d, true
	}
	return deadBatch{}, false
}

// next returns where the next dead batch starts (at or after the scan's
// position: at dropped those before it).
func (l *deadList) next() int64 {
	if l == nil || len(l.list) == 0 {
		return math.MaxInt64
	}
	return l.list[0].pos
}
