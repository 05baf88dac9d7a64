// Package tablettest is test support for code that embeds a tablet: the
// producer workload the crash tests run against a tablet, and the check of
// what survived. It sits above tablet (it imports it), so tablet itself and
// the packages below never depend on it.
//
// The workload is an idempotent producer and a transactional one, every
// append acknowledged only once it is durable.
//
// Each run is one life of the producers: both use the run number as their
// epoch (a restarted producer gets a bumped epoch from InitProducerId) and
// start their sequences at 0; the transactional producer's coordinator
// first aborts whatever transaction the previous life left open. Keys say
// what a record is, and a record's value is derived from its key, so a
// reader can tell every record's exact bytes:
//
//	i/<run>/<seq>           an idempotent record
//	t/<run>/<txn>/<k>/<n>   record k of the n of transaction txn
//
// Every third transaction (txn%3 == 2) is aborted.
package tablettest

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/tablet"
)

// The producer ids.
const (
	IdempotentPID    = 1
	TransactionalPID = 2
)

// Ack is an acknowledged step: Kind 'i' (an idempotent batch, N its first
// sequence), 'c' (a committed transaction, N its number) or 'a' (an aborted
// one); First and Last bound its data's offsets (for a transaction, from its
// first record to its marker).
type Ack struct {
	Kind        byte
	Run, N      int
	First, Last int64
}

func (a Ack) String() string {
	return fmt.Sprintf("%c %d %d %d %d", a.Kind, a.Run, a.N, a.First, a.Last)
}

// ParseAck parses a line written by Ack.String.
func ParseAck(line string) (Ack, error) {
	f := strings.Fields(line)
	if len(f) != 5 || len(f[0]) != 1 || !strings.Contains("ica", f[0]) {
		return Ack{}, fmt.Errorf("tablettest: bad ack %q", line)
	}
	var n [4]int64
	for i := range n {
		v, err := strconv.ParseInt(f[i+1], 10, 64)
		if err != nil {
			return Ack{}, fmt.Errorf("tablettest: bad ack %q", line)
		}
		n[i] = v
	}
	return Ack{Kind: f[0][0], Run: int(n[0]), N: int(n[1]), First: n[2], Last: n[3]}, nil
}

// Value is the value of the record with key.
func Value(key string) []byte {
	h := fnv.New32a()
	h.Write([]byte(key))
	n := 16 + int(h.Sum32()%400)
	return []byte(strings.Repeat(key+";", n/len(key)+1)[:n])
}

// Workload runs one life of the two producers on a tablet.
type Workload struct {
	t    *tablet.Tablet
	run  int
	ack  func(Ack) error
	rng  *rand.Rand
	seq  int32 // the idempotent producer's next sequence
	tseq int32 // the transactional producer's
	txn  int
	now  func() int64
}

// New starts life run of the producers on t; ack is called with every
// acknowledged step (and must make it durable before returning). The first
// step of a life after the first aborts the transaction the last life may
// have left open.
func New(t *tablet.Tablet, run int, seed uint64, now func() int64, ack func(Ack) error) *Workload {
	return &Workload{t: t, run: run, ack: ack, rng: rand.New(rand.NewPCG(seed, uint64(run))), now: now}
}

// Begin writes the coordinator's ABORT for the previous life's producer
// (a marker at the bumped epoch fences it and ends its open transaction,
// if any). The first life has nothing to abort.
func (w *Workload) Begin() error {
	if w.run == 0 {
		return nil
	}
	return AbortPrevious(w.t, w.run, w.now(), true)
}

// AbortPrevious appends, as the coordinator, an ABORT marker for the
// transactional producer at epoch run.
func AbortPrevious(t *tablet.Tablet, run int, now int64, sync bool) error {
	m, err := record.EndTxnMarker{Type: record.ControlAbort, ProducerID: TransactionalPID,
		ProducerEpoch: int16(run), Timestamp: now}.AppendTo(nil)
	if err != nil {
		return err
	}
	_, err = t.Append(m, tablet.AppendOptions{Origin: record.OriginCoordinator, Sync: sync})
	return err
}

// Step appends an idempotent batch or a whole transaction, durably, and
// acknowledges it.
func (w *Workload) Step() error {
	if w.rng.IntN(2) == 0 {
		return w.idempotent()
	}
	return w.transaction()
}

func (w *Workload) idempotent() error {
	n := 1 + w.rng.IntN(20)
	b := record.NewBuilder([]record.Compression{record.None, record.LZ4, record.Zstd}[w.rng.IntN(3)])
	b.SetProducer(IdempotentPID, int16(w.run), w.seq)
	for k := range n {
		key := fmt.Sprintf("i/%d/%d", w.run, int(w.seq)+k)
		if err := b.Append(record.Record{Timestamp: w.now(), Key: []byte(key), Value: Value(key)}); err != nil {
			return err
		}
	}
	batch, err := b.Build()
	if err != nil {
		return err
	}
	res, err := w.t.Append(batch.Bytes(), tablet.AppendOptions{Sync: true})
	if err != nil {
		return err
	}
	first := w.seq
	w.seq += int32(n)
	return w.ack(Ack{Kind: 'i', Run: w.run, N: int(first), First: res.FirstOffset, Last: res.LastOffset})
}

func (w *Workload) transaction() error {
	txn := w.txn
	w.txn++
	n := 2 + w.rng.IntN(10)
	split := 1 + w.rng.IntN(n-1) // two batches
	first := int64(-1)
	for _, part := range [][2]int{{0, split}, {split, n}} {
		b := record.NewBuilder(record.None)
		b.SetProducer(TransactionalPID, int16(w.run), w.tseq)
		b.SetTransactional(true)
		for k := part[0]; k < part[1]; k++ {
			key := fmt.Sprintf("t/%d/%d/%d/%d", w.run, txn, k, n)
			if err := b.Append(record.Record{Timestamp: w.now(), Key: []byte(key), Value: Value(key)}); err != nil {
				return err
			}
		}
		batch, err := b.Build()
		if err != nil {
			return err
		}
		res, err := w.t.Append(batch.Bytes(), tablet.AppendOptions{})
		if err != nil {
			return err
		}
		w.tseq += int32(part[1] - part[0])
		if first < 0 {
			first = res.FirstOffset
		}
	}
	typ, kind := record.ControlCommit, byte('c')
	if txn%3 == 2 {
		typ, kind = record.ControlAbort, 'a'
	}
	m, err := record.EndTxnMarker{Type: typ, ProducerID: TransactionalPID, ProducerEpoch: int16(w.run),
		Timestamp: w.now()}.AppendTo(nil)
	if err != nil {
		return err
	}
	res, err := w.t.Append(m, tablet.AppendOptions{Origin: record.OriginCoordinator, Sync: true})
	if err != nil {
		return err
	}
	return w.ack(Ack{Kind: kind, Run: w.run, N: txn, First: first, Last: res.LastOffset})
}

// Summary is what Check saw.
type Summary struct {
	Records, Acked int
}

// Check reads the tablet as a read-committed consumer, from the log start,
// after the previous life's transaction was aborted (AbortPrevious; the log
// must then be stable to its end), and checks: every record's value is its
// key's; each life's idempotent records are one gapless run of sequences
// from 0; every visible transaction is whole and was committed; every
// acknowledged batch and committed transaction is there at its offsets; no
// acknowledged aborted transaction is visible.
func Check(t *tablet.Tablet, acks []Ack) (Summary, error) {
	var sum Summary
	o := t.Offsets()
	if o.LastStableOffset != o.LogEndOffset {
		return sum, fmt.Errorf("tablettest: the last stable offset %d is not the log end %d", o.LastStableOffset, o.LogEndOffset)
	}
	nextSeq := map[int]int{}
	at := map[string]int64{}
	type txnKey struct{ run, txn int }
	parts := map[txnKey][2]int{} // records seen, of n
	var errs []error
	err := t.Records(o.LogStartOffset, tablet.ReadCommitted, func(_ record.Batch, r *record.Record) bool {
		key := string(r.Key)
		sum.Records++
		at[key] = r.Offset
		if string(r.Value) != string(Value(key)) {
			errs = append(errs, fmt.Errorf("offset %d: key %q has value %q", r.Offset, key, r.Value))
		}
		f := strings.Split(key, "/")
		num := func(i int) int { v, _ := strconv.Atoi(f[i]); return v }
		switch {
		case len(f) == 3 && f[0] == "i":
			run, seq := num(1), num(2)
			if seq != nextSeq[run] {
				errs = append(errs, fmt.Errorf("offset %d: %s follows sequence %d of life %d", r.Offset, key, nextSeq[run]-1, run))
			}
			nextSeq[run] = seq + 1
		case len(f) == 5 && f[0] == "t":
			k, n := num(3), num(4)
			tk := txnKey{num(1), num(2)}
			if tk.txn%3 == 2 {
				errs = append(errs, fmt.Errorf("offset %d: %s belongs to an aborted transaction", r.Offset, key))
			}
			p := parts[tk]
			if k != p[0] {
				errs = append(errs, fmt.Errorf("offset %d: %s after %d records of its transaction", r.Offset, key, p[0]))
			}
			parts[tk] = [2]int{p[0] + 1, n}
		default:
			errs = append(errs, fmt.Errorf("offset %d: unknown key %q", r.Offset, key))
		}
		return len(errs) < 10
	})
	if err != nil {
		return sum, err
	}
	for tk, p := range parts {
		if p[0] != p[1] {
			errs = append(errs, fmt.Errorf("transaction %d of life %d: %d of its %d records visible", tk.txn, tk.run, p[0], p[1]))
		}
	}
	for _, a := range acks {
		var key string
		switch a.Kind {
		case 'i':
			key = fmt.Sprintf("i/%d/%d", a.Run, a.N)
		case 'c':
			p, seen := parts[txnKey{a.Run, a.N}]
			if !seen {
				errs = append(errs, fmt.Errorf("acknowledged %v: the committed transaction is not visible", a))
				continue
			}
			key = fmt.Sprintf("t/%d/%d/0/%d", a.Run, a.N, p[1])
		case 'a':
			if _, seen := parts[txnKey{a.Run, a.N}]; seen {
				errs = append(errs, fmt.Errorf("acknowledged %v: the aborted transaction is visible", a))
			}
			continue
		}
		sum.Acked++
		if off, ok := at[key]; !ok || off != a.First {
			errs = append(errs, fmt.Errorf("acknowledged %v: %s is at %d (present: %v)", a, key, off, ok))
		}
		if a.Last >= o.LogEndOffset {
			errs = append(errs, fmt.Errorf("acknowledged %v: the log ends at %d", a, o.LogEndOffset))
		}
	}
	return sum, errors.Join(errs...)
}
