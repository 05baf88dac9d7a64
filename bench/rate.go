package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Latency at a fixed rate, as the OpenMessaging Benchmark measures it: a
// producer sends records on a schedule (a record late to its slot is sent
// at once, never a burst to catch up), each one's publish latency the
// time from its send to its acknowledgement; a consumer reading the topic
// meanwhile takes each record's end-to-end latency, its receipt minus its
// send time (the producer's clock, the same machine's; carried in a
// header in nanoseconds, as the NATS run's: the record's CreateTime is in
// milliseconds, which would add up to one).

// warmUp begins the keys of the records sent before the schedule.
var warmUp = []byte("warm-up")

// rateRun is what a fixed-rate run measured, in µs.
type rateRun struct {
	publish, e2e []float64
}

// rateLatencies produces n records of values at rate records a second
// to topic (which must be new: the consumer reads it from its start)
// through a client of seeds with opts, and consumes them with another.
func rateLatencies(ctx context.Context, seeds []string, topic string, values [][]byte, rate, n int, opts ...kgo.Opt) (*rateRun, error) {
	if rate <= 0 || n <= 0 {
		return nil, errors.New("bench: a fixed-rate run needs a rate and records")
	}
	consumer, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(time.Second))
	if err != nil {
		return nil, err
	}
	defer consumer.Close()
	producer, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchCompression(kgo.NoCompression())}, opts...)...)
	if err != nil {
		return nil, err
	}
	defer producer.Close()
	partitions, err := partitionCount(ctx, producer, topic)
	if err != nil {
		return nil, err
	}
	run := &rateRun{publish: make([]float64, n), e2e: make([]float64, 0, n)}
	ready := make(chan struct{}) // closed once a warm-up record of every partition is consumed
	consumed := make(chan error, 1)
	go func() {
		warmed := map[int32]bool{}
		for len(run.e2e) < n {
			fs := consumer.PollFetches(ctx)
			now := time.Now()
			if err := ctx.Err(); err != nil {
				consumed <- err
				return
			}
			if errs := fs.Errors(); len(errs) > 0 {
				consumed <- fmt.Errorf("bench: consuming %s: %w", topic, errs[0].Err)
				return
			}
			fs.EachRecord(func(r *kgo.Record) {
				if !bytes.HasPrefix(r.Key, warmUp) {
					run.e2e = append(run.e2e, float64(now.Sub(sentAt(r)).Microseconds()))
				} else if !warmed[r.Partition] {
					if warmed[r.Partition] = true; len(warmed) == partitions {
						close(ready)
					}
				}
			})
		}
		consumed <- nil
	}()
	// Warm-up records first, until the consumer has one of every
	// partition: the clients' metadata, connections, producer id and
	// first fetches are not timed.
	for i := 0; ; i++ {
		if err := producer.ProduceSync(ctx, &kgo.Record{Key: fmt.Appendf(slices.Clip(warmUp), "-%d", i), Value: values[0]}).FirstErr(); err != nil {
			return nil, err
		}
		select {
		case <-ready:
		case err := <-consumed:
			return nil, errors.Join(err, errors.New("bench: the consumer ended before the schedule"))
		case <-time.After(10 * time.Millisecond):
			continue
		}
		break
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed error
	onSchedule(rate, n, func(i int) {
		wg.Add(1)
		sent := time.Now()
		rec := &kgo.Record{Value: values[i%len(values)],
			Headers: []kgo.RecordHeader{{Key: natsSent, Value: strconv.AppendInt(nil, sent.UnixNano(), 10)}}}
		producer.Produce(ctx, rec, func(_ *kgo.Record, err error) {
			defer wg.Done()
			run.publish[i] = float64(time.Since(sent).Microseconds())
			if err != nil {
				mu.Lock()
				failed = errors.Join(failed, err)
				mu.Unlock()
			}
		})
	})
	wg.Wait()
	if failed != nil {
		return nil, fmt.Errorf("bench: producing to %s at %d/s: %w", topic, rate, failed)
	}
	if err := <-consumed; err != nil {
		return nil, err
	}
	return run, nil
}

// partitionCount is a topic's partition count, as cl's broker answers.
func partitionCount(ctx context.Context, cl *kgo.Client, topic string) (int, error) {
	topics, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	if err != nil {
		return 0, err
	}
	td, ok := topics[topic]
	if !ok || td.Err != nil || len(td.Partitions) == 0 {
		return 0, fmt.Errorf("bench: topic %s: no partitions (%v)", topic, td.Err)
	}
	return len(td.Partitions), nil
}

// onSchedule calls send(i) for i from 0 to n-1 at rate a second, each at
// its slot: one late to its slot is sent at once, never a burst to catch
// up.
func onSchedule(rate, n int, send func(i int)) {
	interval := time.Second / time.Duration(rate)
	start := time.Now()
	for i := range n {
		if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 {
			time.Sleep(wait)
		}
		send(i)
	}
}

// sentAt is a record's send time: its header's (ns), which the NATS run
// carries the same way, else its CreateTime (ms: up to a millisecond
// early).
func sentAt(r *kgo.Record) time.Time {
	for _, h := range r.Headers {
		if h.Key == natsSent {
			if ns, err := strconv.ParseInt(string(h.Value), 10, 64); err == nil {
				return time.Unix(0, ns)
			}
		}
	}
	return r.Timestamp
}
