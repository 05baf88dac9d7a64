package replica

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog/checkpoint"
)

// A partition's fetcher is Kafka's: abs(31 × the topic's Java hash code
// + partition) mod num.replica.fetchers ("topic".hashCode() is
// 110546223; 31 × it overflows to -868034383).
func TestFetcherIDIsKafkas(t *testing.T) {
	require.Equal(t, 0, fetcherID(checkpoint.TopicPartition{Topic: "topic", Partition: 1}, 3)) // 868034382 % 3
	require.Equal(t, 1, fetcherID(checkpoint.TopicPartition{Topic: "topic", Partition: 0}, 3)) // 868034383 % 3
	require.Equal(t, 2, fetcherID(checkpoint.TopicPartition{Topic: "t", Partition: 0}, 3))     // 3596 % 3
	require.Equal(t, 0, fetcherID(checkpoint.TopicPartition{Topic: "t", Partition: 0}, 1))
}
