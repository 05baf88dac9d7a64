package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/seglog/seglog/record"
)

// The console producer and consumer: produce and consume through a
// running broker (--bootstrap-server), as kafka-console-producer.sh and
// kafka-console-consumer.sh do.

// signalContext ends on SIGINT or SIGTERM: a console tool stops cleanly.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// produceRemote sends stdin's lines as records to a running broker: acks
// all, idempotent, each line a record (the key before --key-separator),
// with --header k=v on each; partition is -1 for the client's
// partitioner.
func produceRemote(cmd *cobra.Command, f clientFlags, topic string, partition int32, keySep, codec string, headers []string) error {
	opts, err := f.opts()
	if err != nil {
		return err
	}
	var hs []kgo.RecordHeader
	for _, h := range headers {
		k, v, ok := strings.Cut(h, "=")
		if !ok {
			return fmt.Errorf("--header %q is not key=value", h)
		}
		hs = append(hs, kgo.RecordHeader{Key: k, Value: []byte(v)})
	}
	c, err := record.ParseCompression(codec)
	if err != nil {
		return err
	}
	codecs := map[record.Compression]kgo.CompressionCodec{record.None: kgo.NoCompression(), record.Gzip: kgo.GzipCompression(),
		record.Snappy: kgo.SnappyCompression(), record.LZ4: kgo.Lz4Compression(), record.Zstd: kgo.ZstdCompression()}
	opts = append(opts, kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(codecs[c]),
		kgo.AllowAutoTopicCreation()) // as Java producers ask (allow.auto.create.topics)
	if partition >= 0 {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := signalContext()
	defer cancel()
	var first error
	sent := 0
	in := bufio.NewScanner(cmd.InOrStdin())
	in.Buffer(make([]byte, 64<<10), 1<<30)
	for in.Scan() {
		line := in.Text()
		r := &kgo.Record{Value: []byte(line), Headers: hs, Partition: partition}
		if keySep != "" {
			if k, v, ok := strings.Cut(line, keySep); ok {
				r.Key, r.Value = []byte(k), []byte(v)
			}
		}
		sent++
		n := sent
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil && first == nil {
				first = fmt.Errorf("line %d: %w", n, err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	return errors.Join(in.Err(), first)
}

// consumeRemote prints a running broker's records of a topic (one
// partition's, or every one's), from the committed offsets of --group or
// else the end (--from-beginning: the start), until --max-messages, the
// --timeout-ms with no record, or SIGINT/SIGTERM.
func consumeRemote(cmd *cobra.Command, f clientFlags, topic string, partition int32, group string, fromBeginning, committed bool,
	maxMessages int, timeout time.Duration, format string) error {
	opts, err := f.opts()
	if err != nil {
		return err
	}
	reset := kgo.NewOffset().AtEnd()
	if fromBeginning {
		reset = kgo.NewOffset().AtStart()
	}
	opts = append(opts, kgo.ConsumeResetOffset(reset))
	if committed {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	switch {
	case partition >= 0 && group != "":
		return errors.New("--partition and --group do not go together: a group assigns the partitions")
	case partition >= 0:
		opts = append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: reset}}))
	case group != "":
		// Only what was printed is committed (at the end), not what was
		// fetched beyond --max-records.
		opts = append(opts, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit())
	default:
		opts = append(opts, kgo.ConsumeTopics(topic))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := signalContext()
	defer cancel()
	w := bufio.NewWriter(cmd.OutOrStdout())
	defer w.Flush()
	n := 0
	var printed []*kgo.Record
	for maxMessages <= 0 || n < maxMessages {
		pctx, pcancel := ctx, context.CancelFunc(func() {})
		if timeout > 0 {
			pctx, pcancel = context.WithTimeout(ctx, timeout)
		}
		fs := cl.PollRecords(pctx, maxMessages-n)
		pcancel()
		if ctx.Err() != nil {
			break // interrupted: what was printed stands
		}
		if pctx.Err() != nil && fs.NumRecords() == 0 {
			break // --timeout-ms with no record
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				ferr = errors.Join(ferr, fmt.Errorf("%s-%d: %w", t, p, err))
			}
		})
		if ferr != nil {
			return ferr
		}
		for _, r := range fs.Records() {
			if maxMessages > 0 && n >= maxMessages {
				break
			}
			n++
			printed = append(printed, r)
			if format == "value" {
				fmt.Fprintf(w, "%s\n", r.Value)
				continue
			}
			rec := record.Record{Offset: r.Offset, Timestamp: r.Timestamp.UnixMilli(), Key: r.Key, Value: r.Value}
			for _, h := range r.Headers {
				rec.Headers = append(rec.Headers, record.Header{Key: []byte(h.Key), Value: h.Value})
			}
			out := recordJSON(&rec)
			p := r.Partition
			out.Partition = &p
			if err := printJSON(w, out); err != nil {
				return err
			}
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	if group != "" {
		// The offsets of what was printed, as the console consumer commits.
		cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer ccancel()
		return cl.CommitRecords(cctx, printed...)
	}
	return nil
}
