package writerstate

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog/internal/testenv"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/vfs"
)

// refProducer is the reference model of one producer: the rules of
// docs/format.md §5.2, 5.3, 5.4 written plainly.
type refProducer struct {
	epoch       int16
	coordinator int32
	batches     [][4]int64 // firstSeq, lastSeq, firstOffset, lastOffset
	txnFirst    int64
}

type refTxn struct{ pid, first, last int64 }

type reference struct {
	producers    map[int64]*refProducer
	ongoing      []refTxn
	unreplicated []refTxn
}

func (r *reference) producer(pid int64) *refProducer {
	p, ok := r.producers[pid]
	if !ok {
		p = &refProducer{epoch: -1, coordinator: -1, txnFirst: -1}
		r.producers[pid] = p
	}
	return p
}

var errDuplicate = errors.New("duplicate")

func (r *reference) data(pid int64, epoch int16, firstSeq, lastSeq int32, first, last int64, txn bool) error {
	p := r.producer(pid)
	if epoch == p.epoch {
		for _, b := range p.batches {
			if b[0] == int64(firstSeq) && b[1] == int64(lastSeq) {
				return errDuplicate
			}
		}
	}
	if epoch < p.epoch {
		return ErrInvalidProducerEpoch
	}
	if epoch != p.epoch {
		if firstSeq != 0 && p.epoch != -1 {
			return ErrOutOfOrderSequence
		}
	} else {
		prev := int64(-1)
		if n := len(p.batches); n > 0 {
			prev = p.batches[n-1][1]
		}
		if !(int64(firstSeq) == prev+1 || (firstSeq == 0 && prev == math.MaxInt32)) {
			return ErrOutOfOrderSequence
		}
	}
	if p.txnFirst >= 0 && !txn {
		return ErrInvalidTxnState
	}
	if epoch != p.epoch {
		p.batches = nil
	}
	p.epoch = epoch
	p.batches = append(p.batches, [4]int64{int64(firstSeq), int64(lastSeq), first, last})
	if len(p.batches) > BatchesToRetain {
		p.batches = p.batches[1:]
	}
	if txn && p.txnFirst < 0 {
		p.txnFirst = first
		r.ongoing = append(r.ongoing, refTxn{pid, first, -1})
	}
	return nil
}

func (r *reference) marker(pid int64, epoch int16, coordinator int32, offset int64) error {
	p := r.producer(pid)
	if epoch < p.epoch {
		return ErrInvalidProducerEpoch
	}
	if coordinator < p.coordinator {
		return ErrCoordinatorFenced
	}
	if p.txnFirst >= 0 {
		i := slices.IndexFunc(r.ongoing, func(t refTxn) bool { return t.first == p.txnFirst })
		r.unreplicated = append(r.unreplicated, refTxn{pid, p.txnFirst, offset})
		r.ongoing = slices.Delete(r.ongoing, i, i+1)
	}
	if epoch != p.epoch {
		p.batches = nil
	}
	p.epoch, p.coordinator, p.txnFirst = epoch, coordinator, -1
	return nil
}

func (r *reference) firstUnstable(hw int64) int64 {
	r.unreplicated = slices.DeleteFunc(r.unreplicated, func(t refTxn) bool { return t.last < hw })
	best := int64(-1)
	for _, t := range append(slices.Clone(r.ongoing), r.unreplicated...) {
		if best < 0 || t.first < best {
			best = t.first
		}
	}
	return best
}

// The writer state against the reference over random producers, epoch
// bumps, retries of recent and older batches, sequence gaps, transactions,
// markers with old and new coordinator epochs, and stale epochs. Replay a
// failure with SEGLOG_SEED.
func TestModelAgainstReference(t *testing.T) {
	seed := testenv.Seed(t)
	rng := rand.New(rand.NewPCG(seed, 7))
	s, err := Open(vfs.NewMem(), "/", Options{Now: newMockTime().Now})
	require.NoError(t, err)
	ref := &reference{producers: map[int64]*refProducer{}}
	type sentBatch struct {
		epoch             int16
		firstSeq, lastSeq int32
		first, last       int64
	}
	sent := map[int64][]sentBatch{}
	next := map[int64]int32{}
	offset, hw := int64(0), int64(0)
	for step := range 5000 {
		msg := fmt.Sprintf("seed %d step %d", seed, step)
		pid := int64(1 + rng.IntN(4))
		p := ref.producer(pid)
		curEpoch := max(p.epoch, 0)
		var wantErr, gotErr error
		switch op := rng.IntN(20); {
		case op < 10: // a new batch, mostly in sequence
			e, seq := curEpoch, next[pid]
			switch rng.IntN(10) {
			case 0:
				seq += int32(1 + rng.IntN(3)) // a gap
			case 1:
				e++ // an epoch bump, sequence reset
				seq = 0
				if rng.IntN(3) == 0 {
					seq = 5 // ... or not
				}
			case 2:
				e = max(curEpoch-1, 0) // a stale epoch
			}
			n := int32(1 + rng.IntN(3))
			txn := rng.IntN(3) == 0 || p.txnFirst >= 0 && rng.IntN(5) > 0
			first, last := offset, offset+int64(n)-1
			wantErr = ref.data(pid, e, seq, record.IncrementSequence(seq, n-1), first, last, txn)
			if _, dup := s.FindDuplicate(pid, e, seq, record.IncrementSequence(seq, n-1)); dup {
				gotErr = errDuplicate
			} else {
				a := s.NewAppend(record.OriginClient)
				if gotErr = a.AddData(pid, DataBatch{Epoch: e, FirstSeq: seq, LastSeq: record.IncrementSequence(seq, n-1),
					FirstOffset: first, LastOffset: last, Transactional: txn}); gotErr == nil {
					s.Apply(a)
				}
			}
			if wantErr == nil {
				sent[pid] = append(sent[pid], sentBatch{e, seq, record.IncrementSequence(seq, n-1), first, last})
				next[pid] = record.IncrementSequence(seq, n)
				offset = last + 1
			}
		case op < 14: // a retry of one of the producer's recent (or older) batches
			hist := sent[pid]
			if len(hist) == 0 {
				continue
			}
			b := hist[len(hist)-1-rng.IntN(min(len(hist), 7))]
			wantErr = ref.data(pid, b.epoch, b.firstSeq, b.lastSeq, offset, offset, p.txnFirst >= 0)
			if dup, ok := s.FindDuplicate(pid, b.epoch, b.firstSeq, b.lastSeq); ok {
				gotErr = errDuplicate
				require.Equal(t, b.first, dup.FirstOffset(), msg)
				require.Equal(t, b.last, dup.LastOffset, msg)
			} else {
				a := s.NewAppend(record.OriginClient)
				gotErr = a.AddData(pid, DataBatch{Epoch: b.epoch, FirstSeq: b.firstSeq, LastSeq: b.lastSeq,
					FirstOffset: offset, LastOffset: offset, Transactional: p.txnFirst >= 0})
				if gotErr == nil {
					s.Apply(a)
				}
			}
			require.NotNil(t, wantErr, msg)
		case op < 18: // a marker
			e := curEpoch + int16(rng.IntN(3)/2)
			if rng.IntN(8) == 0 {
				e = max(curEpoch-1, 0)
			}
			coordinator := max(p.coordinator, 0) + int32(rng.IntN(3)) - 1
			wantErr = ref.marker(pid, e, coordinator, offset)
			a := s.NewAppend(record.OriginCoordinator)
			c, err := a.AddMarker(pid, Marker{Epoch: e, Offset: offset, Aborted: rng.IntN(2) == 0, CoordinatorEpoch: coordinator})
			gotErr = err
			if err == nil {
				s.Apply(a)
				if c != nil {
					require.NoError(t, s.CompleteTxn(*c), msg)
				}
				if e != curEpoch {
					next[pid] = 0
				}
				offset++
			}
		default: // the high watermark moves
			hw = min(offset, hw+int64(rng.IntN(20)))
			s.OnHighWatermarkUpdated(hw)
		}
		if wantErr == nil {
			require.NoError(t, gotErr, msg)
		} else {
			require.ErrorIs(t, gotErr, wantErr, msg)
		}
		s.UpdateMapEndOffset(offset)
		for id, rp := range ref.producers {
			e, ok := s.Producer(id)
			if !ok {
				require.Equal(t, int16(-1), rp.epoch, "%s: producer %d", msg, id)
				continue
			}
			require.Equal(t, rp.epoch, e.Epoch, "%s: producer %d", msg, id)
			require.Equal(t, rp.txnFirst, e.CurrentTxnFirstOffset, "%s: producer %d", msg, id)
			require.Equal(t, rp.coordinator, e.CoordinatorEpoch, "%s: producer %d", msg, id)
			require.Len(t, e.Batches, len(rp.batches), "%s: producer %d", msg, id)
			for i, b := range rp.batches {
				require.Equal(t, int32(b[1]), e.Batches[i].LastSeq, msg)
				require.Equal(t, b[3], e.Batches[i].LastOffset, msg)
			}
		}
		require.Equal(t, ref.firstUnstable(hw), fuo(s), msg)
	}
}
