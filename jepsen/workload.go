package jepsen

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// queue is Jepsen's queue workload on one topic: producers send unique
// values (acks=all, idempotent) to partitions in turn; consumers assigned
// every partition poll from the start; at the end one read of everything.
type queue struct {
	h          *History
	seeds      []string
	topic      string
	partitions int32
}

// clientOpts are every client's: quick to see a leader move.
func (q *queue) clientOpts(more ...kgo.Opt) []kgo.Opt {
	return append([]kgo.Opt{kgo.SeedBrokers(q.seeds...), kgo.MetadataMinAge(100 * time.Millisecond),
		kgo.MetadataMaxAge(2 * time.Second), kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond })}, more...)
}

// produce runs producer n until ctx ends: one record at a time, each
// send recorded as invoke, then ok (with its offset) or info.
func (q *queue) produce(ctx context.Context, n int) error {
	cl, err := kgo.NewClient(q.clientOpts(kgo.DefaultProduceTopic(q.topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0), kgo.RecordDeliveryTimeout(20*time.Second))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	proc := fmt.Sprintf("producer-%d", n)
	for seq := 0; ctx.Err() == nil; seq++ {
		p := int32((seq + n) % int(q.partitions))
		v := fmt.Sprintf("%d-%d", n, seq)
		q.h.Add(Op{Process: proc, Type: Invoke, F: "send", Value: []Record{{Partition: p, Offset: -1, Value: v}}})
		// Each send has its own deadline, not the run's: a send the run's
		// end cut short is still answered.
		sctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
		res := cl.ProduceSync(sctx, &kgo.Record{Value: []byte(v), Partition: p})
		cancel()
		r, err := res.First()
		if err != nil {
			q.h.Add(Op{Process: proc, Type: Info, F: "send", Value: []Record{{Partition: p, Offset: -1, Value: v}}, Error: err.Error()})
			pause(ctx, 100*time.Millisecond)
			continue
		}
		q.h.Add(Op{Process: proc, Type: OK, F: "send", Value: []Record{{Partition: r.Partition, Offset: r.Offset, Value: v}}})
	}
	return nil
}

// consume runs consumer n until ctx ends, recording each poll's records.
func (q *queue) consume(ctx context.Context, n int) error {
	offsets := map[int32]kgo.Offset{}
	for p := range q.partitions {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(q.clientOpts(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{q.topic: offsets}),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	proc := fmt.Sprintf("consumer-%d", n)
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		var recs []Record
		fs.EachRecord(func(r *kgo.Record) {
			recs = append(recs, Record{Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
		})
		if len(recs) > 0 {
			q.h.Add(Op{Process: proc, Type: OK, F: "poll", Value: recs})
		}
	}
	return nil
}

// final reads every partition from its start to its high watermark, as
// one op.
func (q *queue) final(ctx context.Context) error {
	adm, err := kgo.NewClient(q.clientOpts()...)
	if err != nil {
		return err
	}
	defer adm.Close()
	ends, err := kadm.NewClient(adm).ListEndOffsets(ctx, q.topic)
	if err != nil {
		return err
	}
	want := map[int32]int64{}
	offsets := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err == nil && o.Offset > 0 {
			want[o.Partition] = o.Offset
			offsets[o.Partition] = kgo.NewOffset().AtStart()
		}
	})
	if len(ends) == 0 {
		return errors.New("jepsen: no end offsets for the final read")
	}
	return q.readAll(ctx, q.topic, "final", offsets, func(r *kgo.Record) bool {
		if end, ok := want[r.Partition]; ok && r.Offset+1 >= end {
			delete(want, r.Partition)
		}
		return len(want) == 0
	}, func() string { return fmt.Sprintf("partitions not read to their end: %v", want) })
}

// readAll reads topic's partitions from the offsets given as one op of
// function f, until done (told each record) says it has all it wants;
// if ctx ends first the op is info, saying what missing says.
func (q *queue) readAll(ctx context.Context, topic, f string, offsets map[int32]kgo.Offset, done func(*kgo.Record) bool,
	missing func() string, more ...kgo.Opt) error {
	q.h.Add(Op{Process: "final", Type: Invoke, F: f})
	cl, err := kgo.NewClient(q.clientOpts(append([]kgo.Opt{kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchMaxWait(200 * time.Millisecond)}, more...)...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	var recs []Record
	for finished := false; !finished; {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			q.h.Add(Op{Process: "final", Type: Info, F: f, Value: recs, Error: missing()})
			return fmt.Errorf("jepsen: the final read of %s did not end (%s): %w", topic, missing(), err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			recs = append(recs, Record{Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
			finished = finished || done(r)
		})
	}
	q.h.Add(Op{Process: "final", Type: OK, F: f, Value: recs})
	return nil
}

// pause waits d or until ctx ends.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
