package broker

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"
)

// DescribeLogDirs (KIP-113): this broker's data directory and the size of
// each partition in it, behind Describe on the cluster, as
// kafka-log-dirs.sh asks for them. seglog has one log directory, the data
// directory; no partition is ever a future replica, and a replica's offset
// lag (its log end's distance from the high watermark) is 0 on a single
// node.

func init() {
	register(api{key: 35, min: 1, max: 4, handle: handler((*Broker).describeLogDirs),
		rule: clusterRule[*kmsg.DescribeLogDirsRequest](opDescribe, nil)})
}

func (b *Broker) describeLogDirs(_ context.Context, _ header, r *kmsg.DescribeLogDirsRequest) *kmsg.DescribeLogDirsResponse {
	resp := r.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	dir := kmsg.NewDescribeLogDirsResponseDir()
	dir.Dir = b.m.Dir()
	dir.TotalBytes, dir.UsableBytes = -1, -1
	var st unix.Statfs_t
	if err := unix.Statfs(dir.Dir, &st); err == nil {
		dir.TotalBytes, dir.UsableBytes = int64(st.Blocks)*st.Bsize, int64(st.Bavail)*st.Bsize
	}
	asked := func(topic string, partition int32) bool {
		if r.Topics == nil {
			return true // every partition
		}
		for _, t := range r.Topics {
			if t.Topic == topic && slices.Contains(t.Partitions, partition) {
				return true
			}
		}
		return false
	}
	for _, t := range b.m.Tablets() { // sorted: a topic's partitions together
		tp := t.TopicPartition()
		if !asked(tp.Topic, tp.Partition) {
			continue
		}
		if n := len(dir.Topics); n == 0 || dir.Topics[n-1].Topic != tp.Topic {
			rt := kmsg.NewDescribeLogDirsResponseDirTopic()
			rt.Topic = tp.Topic
			dir.Topics = append(dir.Topics, rt)
		}
		p := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
		p.Partition, p.Size = tp.Partition, t.Size()
		rt := &dir.Topics[len(dir.Topics)-1]
		rt.Partitions = append(rt.Partitions, p)
	}
	resp.Dirs = append(resp.Dirs, dir)
	return resp
}
