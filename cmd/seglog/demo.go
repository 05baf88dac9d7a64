package main

import (
	"fmt"

	"github.com/seglog/seglog/record"
)

// demoAppend is one append of the demo: a producer batch or a marker.
type demoAppend struct {
	data          []byte
	origin        record.Origin
	logAppendTime bool // stamped by the broker, as for a LogAppendTime topic
}

// demoAppends builds the demo's batches as producers and a transaction
// coordinator would send them: base offset 0, no leader epoch.
func demoAppends(now int64) ([]demoAppend, error) {
	type producer struct {
		codec         record.Compression
		id            int64
		epoch         int16
		seq           int32
		transactional bool
		logAppendTime bool
		values        []string
	}
	batches := []producer{
		{codec: record.None, id: -1, epoch: -1, seq: -1, values: []string{"plain", "records", "uncompressed"}},
		{codec: record.Gzip, id: 1000, epoch: 0, seq: 0, values: []string{"idempotent", "gzip"}},
		{codec: record.Snappy, id: 2000, epoch: 0, seq: 0, transactional: true, values: []string{"committed", "snappy"}},
		{codec: record.LZ4, id: 1000, epoch: 0, seq: 2, values: []string{"idempotent", "lz4"}},
		{codec: record.Zstd, id: 3000, epoch: 0, seq: 0, transactional: true, values: []string{"aborted", "zstd"}},
		{codec: record.None, id: -1, epoch: -1, seq: -1, logAppendTime: true, values: []string{"log append time"}},
	}
	var out []demoAppend
	for i, p := range batches {
		b := record.NewBuilder(p.codec)
		b.SetProducer(p.id, p.epoch, p.seq)
		b.SetTransactional(p.transactional)
		for j, v := range p.values {
			r := record.Record{Timestamp: now + int64(i*10+j), Key: []byte(fmt.Sprintf("key-%d-%d", i, j)), Value: []byte(v)}
			if j == 0 {
				r.Headers = []record.Header{{Key: []byte("source"), Value: []byte("demo")}}
			}
			if err := b.Append(r); err != nil {
				return nil, err
			}
		}
		batch, err := b.Build()
		if err != nil {
			return nil, err
		}
		out = append(out, demoAppend{data: batch.Bytes(), origin: record.OriginClient, logAppendTime: p.logAppendTime})
		if p.transactional {
			m, err := record.EndTxnMarker{Type: record.MarkerType(p.id != 3000), ProducerID: p.id, ProducerEpoch: p.epoch,
				CoordinatorEpoch: 1, Timestamp: now + int64(i*10+9)}.AppendTo(nil)
			if err != nil {
				return nil, err
			}
			out = append(out, demoAppend{data: m, origin: record.OriginCoordinator})
		}
	}
	return out, nil
}
