package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// sarama, another independent client, produces (idempotently, acks=all)
// and consumes a partition back, offsets and values intact.
func TestSaramaProduceConsume(t *testing.T) {
	_, _, addr := testBroker(t, Options{})
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_8_0_0
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Idempotent = true
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Metadata.AllowAutoTopicCreation = true
	p, err := sarama.NewSyncProducer([]string{addr}, cfg)
	require.NoError(t, err)
	const n = 200
	for i := range n {
		part, off, err := p.SendMessage(&sarama.ProducerMessage{Topic: "sarama", Partition: 0,
			Value: sarama.StringEncoder(fmt.Sprintf("m%d", i))})
		require.NoError(t, err)
		require.Equal(t, int32(0), part)
		require.Equal(t, int64(i), off)
	}
	require.NoError(t, p.Close())

	c, err := sarama.NewConsumer([]string{addr}, cfg)
	require.NoError(t, err)
	defer c.Close()
	pc, err := c.ConsumePartition("sarama", 0, sarama.OffsetOldest)
	require.NoError(t, err)
	defer pc.Close()
	timeout := time.After(time.Minute)
	for i := range n {
		select {
		case m := <-pc.Messages():
			require.Equal(t, int64(i), m.Offset)
			require.Equal(t, fmt.Sprintf("m%d", i), string(m.Value))
		case err := <-pc.Errors():
			t.Fatal(err)
		case <-timeout:
			t.Fatalf("consumed %d of %d", i, n)
		}
	}
}

// saramaHandler collects a sarama group consumer's records and marks them.
type saramaHandler struct {
	got  chan string
	gens chan map[string][]int32
}

func (h saramaHandler) Setup(s sarama.ConsumerGroupSession) error {
	h.gens <- s.Claims()
	return nil
}

func (saramaHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h saramaHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for m := range c.Messages() {
		h.got <- string(m.Value)
		s.MarkMessage(m, "")
	}
	return nil
}

// sarama's ConsumerGroup consumes a topic, commits its marks, and a new
// group consumer resumes after them.
func TestSaramaConsumerGroup(t *testing.T) {
	_, _, addr := testBroker(t, groupOptions())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	produceN(t, ctx, addr, "sg", 0, 90)
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_8_0_0
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Group.Heartbeat.Interval = 100 * time.Millisecond
	consume := func(n int) map[string]bool {
		g, err := sarama.NewConsumerGroup([]string{addr}, "sgroup", cfg)
		require.NoError(t, err)
		h := saramaHandler{got: make(chan string, 1024), gens: make(chan map[string][]int32, 4)}
		cctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- g.Consume(cctx, []string{"sg"}, h) }()
		require.ElementsMatch(t, []int32{0, 1, 2}, (<-h.gens)["sg"])
		got := map[string]bool{}
		for len(got) < n {
			select {
			case v := <-h.got:
				got[v] = true
			case <-ctx.Done():
				t.Fatalf("consumed %d of %d", len(got), n)
			}
		}
		stop()
		require.NoError(t, <-done)
		require.NoError(t, g.Close()) // commits the marks
		return got
	}
	require.Len(t, consume(90), 90)
	produceN(t, ctx, addr, "sg", 90, 30)
	got := consume(30)
	for i := 90; i < 120; i++ {
		require.True(t, got[fmt.Sprintf("v%d", i)], "v%d after the committed offsets", i)
	}
}

// sarama's ConsumerGroup, on the classic protocol, in a group that a
// franz-go consumer on the consumer protocol (KIP-848) joins: the group
// migrates to a consumer group with sarama's member in it, assigned by the
// coordinator through its JoinGroup and SyncGroup; the two share the
// partitions, every record is consumed; when franz-go's member leaves,
// sarama's gets every partition again in a classic group.
func TestSaramaInMigratingGroup(t *testing.T) {
	opts := groupOptions()
	opts.Groups.ConsumerHeartbeatInterval = 100 * time.Millisecond
	b, _, addr := testBroker(t, opts)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	produceN(t, ctx, addr, "sm", 0, 300)
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_8_0_0
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Interval = 100 * time.Millisecond
	cfg.Consumer.Group.Heartbeat.Interval = 100 * time.Millisecond
	g, err := sarama.NewConsumerGroup([]string{addr}, "smg", cfg)
	require.NoError(t, err)
	h := saramaHandler{got: make(chan string, 1024), gens: make(chan map[string][]int32, 16)}
	cctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for cctx.Err() == nil {
			if err := g.Consume(cctx, []string{"sm"}, h); err != nil && cctx.Err() == nil {
				t.Errorf("sarama: %v", err)
				return
			}
		}
	}()
	defer func() {
		stop()
		<-done
		require.NoError(t, g.Close())
	}()
	require.Len(t, (<-h.gens)["sm"], 3, "sarama alone has every partition")
	seen := map[string]bool{}
	drain := func() {
		for {
			select {
			case v := <-h.got:
				seen[v] = true
			default:
				return
			}
		}
	}
	for len(seen) < 100 {
		select {
		case v := <-h.got:
			seen[v] = true
		case <-ctx.Done():
			t.Fatal("sarama consumed nothing")
		}
	}

	fg, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup("smg"), kgo.ConsumeTopics("sm"), kgo.ServerSideBalancer(),
		kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.FetchMaxWait(50*time.Millisecond))
	require.NoError(t, err)
	untilShared(t, ctx, b, "smg", func() {
		pctx, pcancel := context.WithTimeout(ctx, 50*time.Millisecond)
		fg.PollFetches(pctx).EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
		pcancel()
		drain()
	}, map[int8]int{0: 1, 1: 1}, 3, func() bool { return len(seen) == 300 })
	require.NoError(t, fg.CommitUncommittedOffsets(ctx))
	fg.Close() // leaves: the group is classic again, and sarama's member gets every partition
	for {
		select {
		case claims := <-h.gens:
			if len(claims["sm"]) == 3 {
				require.Equal(t, kerr.GroupIDNotFound.Code, describeConsumerGroup(b, "smg").ErrorCode, "a classic group again")
				return
			}
		case v := <-h.got:
			seen[v] = true
		case <-ctx.Done():
			t.Fatal("sarama never got every partition back")
		}
	}
}
