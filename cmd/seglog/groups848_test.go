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

// A KIP-848 consumer group through seglog serve: franz-go's server-side
// balancer consumes and commits; after a SIGKILL the restarted broker
// still has the group (a member heartbeating at its epoch keeps it), a new
// consumer resumes after the commits; groups --list --type shows it as a
// consumer group, and dump decodes its records.
func TestServeConsumerGroup848(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	args := []string{"--data-dir", dir, "--config", "listeners=PLAINTEXT://127.0.0.1:0", "--config", "num.partitions=3",
		"--config", "group.consumer.heartbeat.interval.ms=200", "--config", "group.consumer.session.timeout.ms=2000"}
	cmd, lines := startServe(t, args...)
	addr := servedAddr(t, cmd, lines)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("in"),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	require.NoError(t, err)
	for i := range 90 {
		p.Produce(ctx, &kgo.Record{Value: fmt.Appendf(nil, "r%d", i)}, nil)
	}
	require.NoError(t, p.Flush(ctx))
	p.Close()

	consumer := func(addr string) *kgo.Client {
		c, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup("g"), kgo.ConsumeTopics("in"), kgo.ServerSideBalancer(),
			kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.DisableAutoCommit(), kgo.FetchMaxWait(100*time.Millisecond))
		require.NoError(t, err)
		return c
	}
	c := consumer(addr)
	seen := map[string]bool{}
	for len(seen) < 90 {
		fs := c.PollFetches(ctx)
		require.NoError(t, ctx.Err())
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
		require.NoError(t, c.CommitRecords(ctx, fs.Records()...))
	}
	code, out, errOut := runSeglog(t, "groups", "--bootstrap-server", addr, "--list", "--type", "--state")
	require.Zero(t, code, "%s%s", out, errOut)
	require.Regexp(t, `(?m)^GROUP\s+TYPE\s+STATE\n(.*\n)*g\s+Consumer\s+Stable$`, out)
	code, out, _ = runSeglog(t, "groups", "--bootstrap-server", addr, "--list", "--type", "classic")
	require.Zero(t, code)
	require.NotRegexp(t, `(?m)^g\s`, out)

	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	c.Close()

	cmd, lines = startServe(t, args...)
	addr = servedAddr(t, cmd, lines)
	code, out, errOut = runSeglog(t, "groups", "--bootstrap-server", addr, "--describe", "--group", "g", "--state")
	require.Zero(t, code, errOut)
	require.Regexp(t, `(?m)^g\s+uniform\s+Stable\s+\d+\s+1$`, out, "the member from before the kill is still in the group")
	p, err = kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("in"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	require.NoError(t, err)
	for i := 90; i < 120; i++ {
		p.Produce(ctx, &kgo.Record{Value: fmt.Appendf(nil, "r%d", i)}, nil)
	}
	require.NoError(t, p.Flush(ctx))
	p.Close()
	// A new member gets the partitions once the killed one's session
	// ends, and resumes after its commits: only the new records come.
	c2 := consumer(addr)
	got := map[string]bool{}
	for len(got) < 30 {
		fs := c2.PollFetches(ctx)
		require.NoError(t, ctx.Err())
		fs.EachRecord(func(r *kgo.Record) {
			require.False(t, seen[string(r.Value)] || got[string(r.Value)], "%s again", r.Value)
			got[string(r.Value)] = true
		})
	}
	c2.Close() // leaves the group
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait(), "%s", cmd.Stderr)

	part := group.PartitionFor("g", 50)
	seg := filepath.Join(dir, fmt.Sprintf("%s-%d", group.Topic, part), "00000000000000000000.log")
	code, out, errOut = runSeglog(t, "dump", "--offsets-decoder", seg)
	require.Zero(t, code, "%s%s", out, errOut)
	require.Contains(t, out, `key: {"type":"3","data":{"groupId":"g"}} payload: {"version":"0","data":{"creationTimeMs":`)
	require.Contains(t, out, `"subscribedTopicNames":["in"]`)
	require.Regexp(t, `key: \{"type":"8","data":\{"groupId":"g","memberId":"[^"]+"\}\} payload: \{"version":"0","data":\{"assignedPartitions":\[\{"assignmentEpochs":`, out)
}
