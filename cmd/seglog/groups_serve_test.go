// Not built under -race, as the cluster's kill loop (cluster_test.go):
// the child servers would be race binaries, and the kills mostly wait for
// sessions to expire; make test runs it without the race detector beside
// the benchmark harness's tests, and the broker and coordinators it drives
// are raced by their own packages' tests.

//go:build !race

package main

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/seglog/seglog/coordinator/group"
)

// A consumer group resumes exactly from its committed offsets after
// seglog serve is killed (SIGKILL, some of them while a commit is in
// flight) or stopped (SIGTERM): after each restart, the first record a new
// member of the group gets from each partition is the one after the last
// acknowledged commit (or after the commit in flight, if it landed). No
// acknowledged commit is lost. At the end, dump --offsets-decoder prints
// the group's records in __consumer_offsets as Kafka's tool does.
func TestServeGroupResumesAfterKill(t *testing.T) {
	t.Parallel()
	k := newKiller(t)
	lives := min(kills(t), 40) + 2 // each life waits a session timeout for the killed member
	total := 250 * lives           // each life reads at most 6 polls of 40: the input never runs out
	acked := map[int32]int64{}     // the last commit acknowledged, per partition
	attempted := map[int32]int64{} // the last commit sent
	resumed := 0
	for life := range lives {
		cmd, lines := startServe(t, "--data-dir", k.dir, "--config", "listeners=PLAINTEXT://127.0.0.1:0",
			"--config", "num.partitions=3", "--config", "group.initial.rebalance.delay.ms=0",
			"--config", "group.min.session.timeout.ms=1000")
		addr := servedAddr(t, cmd, lines)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if life == 0 {
			p, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("in"),
				kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
			require.NoError(t, err)
			for i := range total {
				p.Produce(ctx, &kgo.Record{Value: fmt.Appendf(nil, "r%d", i)}, nil)
			}
			require.NoError(t, p.Flush(ctx))
			p.Close()
		}
		c, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup("g"), kgo.ConsumeTopics("in"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgo.FetchMaxWait(100*time.Millisecond),
			kgo.SessionTimeout(time.Second), kgo.RebalanceTimeout(time.Second), kgo.HeartbeatInterval(100*time.Millisecond),
			kgo.FetchMaxPartitionBytes(2<<10))
		require.NoError(t, err)
		first := map[int32]bool{}
		last := life == lives-1
		polls := 1 + k.rng.IntN(6)
		var killed chan struct{}
		for i := 0; i < polls; i++ {
			fs := c.PollRecords(ctx, 40)
			require.NoError(t, ctx.Err(), "seed %d life %d: polling", k.seed, life)
			k.fetchErrors(life, fs)
			next := map[int32]int64{}
			fs.EachRecord(func(r *kgo.Record) {
				if !first[r.Partition] {
					first[r.Partition] = true
					lo, hi := acked[r.Partition], attempted[r.Partition]
					require.True(t, r.Offset >= lo && r.Offset <= hi, "seed %d life %d: partition %d resumed at %d, committed %d (or %d in flight)",
						k.seed, life, r.Partition, r.Offset, lo, hi)
					resumed++
				}
				next[r.Partition] = r.Offset + 1
			})
			for p, o := range next {
				attempted[p] = max(attempted[p], o)
			}
			inFlight := i == polls-1 && !last && k.rng.IntN(2) == 0
			if inFlight { // killed while the commit is on its way
				killed = make(chan struct{})
				go func() { k.kill(cmd); close(killed) }()
			}
			if err := c.CommitRecords(ctx, fs.Records()...); err == nil {
				for p, o := range next {
					acked[p] = max(acked[p], o)
				}
			}
			if inFlight {
				break
			}
		}
		switch {
		case killed != nil:
			<-killed
		case last:
			c.Close()
			require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
			require.NoError(t, cmd.Wait(), "%s", cmd.Stderr)
		case life%3 == 2:
			require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
			require.NoError(t, cmd.Wait(), "a clean stop: %s", cmd.Stderr)
		default:
			k.kill(cmd)
		}
		c.Close()
		cancel()
	}
	require.Positive(t, resumed)

	// The group's records in __consumer_offsets, decoded.
	p := group.PartitionFor("g", 50)
	seg := filepath.Join(k.dir, fmt.Sprintf("%s-%d", group.Topic, p), "00000000000000000000.log")
	code, out, errOut := runSeglog(t, "dump", "--offsets-decoder", seg)
	require.Zero(t, code, "%s%s", out, errOut)
	// (Some partition's commit: which partitions a run's few polls reach
	// is the client's order, not the broker's — a run once consumed only
	// partitions 1 and 2.)
	require.Regexp(t, `key: \{"type":"1","data":\{"group":"g","topic":"in","partition":[0-2]\}\} payload: \{"version":"3","data":\{"offset":`, out)
	require.Contains(t, out, `key: {"type":"2","data":{"group":"g"}} payload: {"version":"3","data":{"protocolType":"consumer","generation":`)
	code, vout, verr := runSeglog(t, "verify", "--data-dir", k.dir)
	require.Zero(t, code, "%s%s", vout, verr)
	t.Logf("%d lives (%d SIGKILLs), %d resumptions checked, commits acknowledged up to %v", lives, k.kills, resumed, acked)
}
