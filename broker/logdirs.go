package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"

	"github.com/seglog/seglog/checkpoint"
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
	var asked map[checkpoint.TopicPartition]bool // nil: every partition
	if r.Topics != nil {
		asked = map[checkpoint.TopicPartition]bool{}
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				asked[checkpoint.TopicPartition{Topic: t.Topic, Partition: p}] = true
			}
		}
	}
	for _, t := range b.m.Tablets() { // sorted: a topic's partitions together
		tp := t.TopicPartition()
		if asked != nil && !asked[tp] {
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
