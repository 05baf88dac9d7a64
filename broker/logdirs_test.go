package broker

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/tablet"
)

// DescribeLogDirs lists the data directory with its bytes and, of the
// partitions asked (every one when none is named), the ones it holds with
// their sizes.
func TestDescribeLogDirs(t *testing.T) {
	b, m, _ := testBroker(t, Options{})
	for _, tp := range []checkpoint.TopicPartition{{Topic: "a"}, {Topic: "a", Partition: 1}, {Topic: "b"}} {
		tab, err := m.Create(tp, nil)
		require.NoError(t, err)
		_, err = tab.AppendRecords([]record.Record{{Value: make([]byte, 100)}}, record.None, tablet.AppendOptions{})
		require.NoError(t, err)
	}
	describe := func(topics []kmsg.DescribeLogDirsRequestTopic) kmsg.DescribeLogDirsResponseDir {
		req := kmsg.NewPtrDescribeLogDirsRequest()
		req.Topics = topics
		resp := handleAs(t, b, Anonymous, req, 4).(*kmsg.DescribeLogDirsResponse)
		require.Len(t, resp.Dirs, 1)
		return resp.Dirs[0]
	}
	all := describe(nil)
	require.Equal(t, m.Dir(), all.Dir)
	require.Positive(t, all.TotalBytes)
	require.Len(t, all.Topics, 2)

	some := describe([]kmsg.DescribeLogDirsRequestTopic{{Topic: "a", Partitions: []int32{1, 7}}, {Topic: "c", Partitions: []int32{0}}})
	require.Len(t, some.Topics, 1, "what it does not hold is left out")
	require.Equal(t, "a", some.Topics[0].Topic)
	require.Len(t, some.Topics[0].Partitions, 1)
	require.Equal(t, int32(1), some.Topics[0].Partitions[0].Partition)
	require.Greater(t, some.Topics[0].Partitions[0].Size, int64(100), "its batch's bytes")
}
