package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/require"
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
