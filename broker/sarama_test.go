package broker

import (
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
