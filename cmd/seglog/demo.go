package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/seglog/seglog/internal/vfs"
	"github.com/seglog/seglog/record"
)

func newDemoCmd() *cobra.Command {
	dir := filepath.Join("data", "demo")
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Write a small log of every kind of batch and dump it",
		Long: `demo builds batches with the record builder — every codec, an idempotent
producer, a committed and an aborted transaction, a LogAppendTime batch —
validates them as a broker would, stamps offsets and the leader epoch in
place, writes them to a .log file with one positional write each, fsyncs
it, and dumps it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path, n, err := writeDemoLog(vfs.OS, dir, time.Now())
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "seglog demo: wrote %d batches to %s\n\n", n, path)
			d := &dumper{w: w, opts: dumpOptions{printData: true}}
			if err := d.dumpFile(vfs.OS, path); err != nil {
				return err
			}
			if d.problems > 0 {
				return &exitError{code: 1, msg: fmt.Sprintf("%d problem(s) found", d.problems)}
			}
			fmt.Fprintf(w, "\nInspect it yourself: seglog dump --print-data-log %s\n", path)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", dir, "directory to write the demo log in")
	return cmd
}

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
			typ := record.ControlCommit
			if p.id == 3000 {
				typ = record.ControlAbort
			}
			m, err := record.EndTxnMarker{Type: typ, ProducerID: p.id, ProducerEpoch: p.epoch,
				CoordinatorEpoch: 1, Timestamp: now + int64(i*10+9)}.AppendTo(nil)
			if err != nil {
				return nil, err
			}
			out = append(out, demoAppend{data: m, origin: record.OriginCoordinator})
		}
	}
	return out, nil
}

// writeDemoLog writes the demo's appends to DIR/00000000000000000000.log as
// a broker would, and returns the path and the number of batches.
func writeDemoLog(fsys vfs.FS, dir string, now time.Time) (string, int, error) {
	appends, err := demoAppends(now.UnixMilli())
	if err != nil {
		return "", 0, err
	}
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return "", 0, err
	}
	path := filepath.Join(dir, "00000000000000000000.log")
	f, err := fsys.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	var pos, next int64
	const leaderEpoch = 0
	for _, a := range appends {
		opts := record.ValidateOptions{Origin: a.origin, NowMs: now.UnixMilli()}
		if a.logAppendTime {
			opts.TimestampType = record.LogAppendTime
		}
		v, err := record.ValidateAppend(a.data, opts)
		if err != nil {
			return "", 0, err
		}
		b := v.Batch
		b.SetLastOffset(next + int64(b.LastOffsetDelta()))
		b.SetPartitionLeaderEpoch(leaderEpoch)
		if a.logAppendTime {
			b.SetMaxTimestamp(record.LogAppendTime, now.UnixMilli()) // rewrites the CRC
		}
		if _, err := f.WriteAt(b.Bytes(), pos); err != nil {
			return "", 0, err
		}
		pos += int64(b.Size())
		next = b.NextOffset()
	}
	if err := f.Sync(); err != nil {
		return "", 0, err
	}
	return path, len(appends), f.Close()
}
