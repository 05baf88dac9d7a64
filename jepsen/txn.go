package jepsen

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// txns is Jepsen's txn workload, on its own topic: transactional
// consume-transform-produce workers in one consumer group (franz-go's
// GroupTransactSession, read_committed). Each transaction reads what its
// worker's poll returned, writes one to three new values to random
// partitions of the same topic, commits the group's offsets past what it
// read, and ends — committed, or aborted on purpose one time in five.
// Beside them a reader fetches the group's committed offsets with
// require_stable. At the end, a marker is written to every partition
// outside any transaction and one read_committed read runs until it has
// seen them all: every transaction before them is then decided.
type txns struct {
	h          *History
	q          *queue // (its client options and seeds)
	topic      string
	group      string
	partitions int32
	seed       int64
}

// txnTimeout is the workers' transaction.timeout.ms: a transaction whose
// worker's broker died is aborted by its coordinator after it.
const txnTimeout = 10 * time.Second

// work runs worker n until ctx ends; a session that fails (franz-go: no
// error End returns is retryable) is closed and a new one started.
func (t *txns) work(ctx context.Context, n int) {
	rng := rand.New(rand.NewPCG(uint64(t.seed), uint64(n)))
	proc := fmt.Sprintf("txn-%d", n)
	for seq := 0; ctx.Err() == nil; {
		s, err := kgo.NewGroupTransactSession(t.q.clientOpts(kgo.TransactionalID(proc), kgo.TransactionTimeout(txnTimeout),
			kgo.ConsumerGroup(t.group), kgo.ConsumeTopics(t.topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(200*time.Millisecond),
			kgo.DefaultProduceTopic(t.topic), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0),
			kgo.RecordDeliveryTimeout(20*time.Second))...)
		if err != nil {
			pause(ctx, time.Second)
			continue
		}
		err = t.session(ctx, s, proc, rng, &seq)
		s.Close()
		if err != nil {
			t.h.Add(Op{Process: proc, Type: Info, F: "restart", Error: err.Error()})
			pause(ctx, 500*time.Millisecond)
		}
	}
}

// session runs transactions on s until ctx ends or one ends with an
// error; the transaction in progress when ctx ends is finished.
func (t *txns) session(ctx context.Context, s *kgo.GroupTransactSession, proc string, rng *rand.Rand, seq *int) error {
	for ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fs := s.PollRecords(pctx, 50)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		var reads []Record
		fs.EachRecord(func(r *kgo.Record) {
			reads = append(reads, Record{Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
		})
		if err := s.Begin(); err != nil {
			return err
		}
		id := fmt.Sprintf("%s.%d", proc, *seq)
		*seq++
		t.h.Add(Op{Process: proc, Type: Invoke, F: "txn", Txn: id, Reads: reads})
		var sent []Record
		for i := range 1 + rng.IntN(3) {
			rec := Record{Partition: rng.Int32N(t.partitions), Offset: -1, Value: fmt.Sprintf("%s-%d", id, i)}
			sctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
			r, err := s.ProduceSync(sctx, &kgo.Record{Value: []byte(rec.Value), Partition: rec.Partition}).First()
			cancel()
			if err == nil {
				rec.Offset = r.Offset
			}
			sent = append(sent, rec)
			if err != nil {
				break // (the session aborts it)
			}
		}
		try, how := kgo.TryCommit, "commit"
		if rng.IntN(5) == 0 {
			try, how = kgo.TryAbort, "abort"
		}
		t.h.Add(Op{Process: proc, Type: Invoke, F: "end", Txn: id, Note: how})
		ectx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		committed, err := s.End(ectx, try)
		cancel()
		switch {
		case err != nil:
			t.h.Add(Op{Process: proc, Type: Info, F: "txn", Txn: id, Value: sent, Error: err.Error()})
			return err
		case committed:
			t.h.Add(Op{Process: proc, Type: OK, F: "txn", Txn: id, Value: sent})
		default:
			t.h.Add(Op{Process: proc, Type: Fail, F: "txn", Txn: id, Value: sent, Note: "aborted"})
		}
	}
	return nil
}

// watchOffsets reads the group's committed offsets (require_stable) until
// ctx ends: an op each, ok with a record per partition.
func (t *txns) watchOffsets(ctx context.Context) {
	cl, err := kgo.NewClient(t.q.clientOpts()...)
	if err != nil {
		return
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for ctx.Err() == nil {
		t.h.Add(Op{Process: "offsets", Type: Invoke, F: "offsets"})
		fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		offs, err := adm.FetchOffsets(kadm.RequireStable(fctx), t.group)
		cancel()
		if err == nil {
			err = offs.Error()
		}
		if err != nil {
			t.h.Add(Op{Process: "offsets", Type: Fail, F: "offsets", Error: err.Error()})
		} else {
			var at []Record
			offs.Each(func(o kadm.OffsetResponse) {
				if o.Topic == t.topic {
					at = append(at, Record{Partition: o.Partition, Offset: o.At})
				}
			})
			t.h.Add(Op{Process: "offsets", Type: OK, F: "offsets", Value: at})
		}
		pause(ctx, 300*time.Millisecond)
	}
}

// endMarker is the value final writes to partition p.
func endMarker(p int32) string { return fmt.Sprintf("end-%d", p) }

// final writes the end markers and reads every partition, read_committed,
// until it has read each one's marker.
func (t *txns) final(ctx context.Context) error {
	pr, err := kgo.NewClient(t.q.clientOpts(kgo.DefaultProduceTopic(t.topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		return err
	}
	defer pr.Close()
	want := map[string]bool{}
	for p := range t.partitions {
		for {
			err := pr.ProduceSync(ctx, &kgo.Record{Value: []byte(endMarker(p)), Partition: p}).FirstErr()
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return fmt.Errorf("jepsen: writing the transactional topic's end markers: %w", err)
			}
			pause(ctx, 200*time.Millisecond)
		}
		want[endMarker(p)] = true
	}
	offsets := map[int32]kgo.Offset{}
	for p := range t.partitions {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	return t.q.readAll(ctx, t.topic, "txn-final", offsets, func(r *kgo.Record) bool {
		delete(want, string(r.Value))
		return len(want) == 0
	}, func() string {
		return fmt.Sprintf("end markers not read (a transaction left open?): %v", slices.Sorted(maps.Keys(want)))
	},
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
}
