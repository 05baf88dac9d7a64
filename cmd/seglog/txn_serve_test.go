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
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Exactly once through SIGKILLs: a franz-go GroupTransactSession copies
// 100,000 records from one topic to another, its consumer group's offsets
// committed inside each transaction, while seglog serve is killed several
// times (and restarted on the same directory). The copy, read with
// read_committed, holds every input record exactly once.
func TestServeExactlyOnceAcrossKills(t *testing.T) {
	t.Parallel()
	k := newKiller(t)
	lives := min(kills(t), 40) + 2
	const total = 100_000
	var copied int // committed transactions' records, as the session reported them
	for life := range lives {
		cmd, lines := startServe(t, "--data-dir", k.dir, "--config", "listeners=PLAINTEXT://127.0.0.1:0",
			"--config", "num.partitions=3", "--config", "group.initial.rebalance.delay.ms=0",
			"--config", "group.min.session.timeout.ms=1000")
		addr := servedAddr(t, cmd, lines)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		if life == 0 {
			p, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("eos-in"),
				kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
			require.NoError(t, err)
			for i := range total {
				p.Produce(ctx, &kgo.Record{Value: fmt.Appendf(nil, "r%06d", i)}, nil)
			}
			require.NoError(t, p.Flush(ctx))
			p.Close()
		}
		s, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(addr), kgo.TransactionalID("eos-copier"), kgo.ConsumerGroup("eos"),
			kgo.ConsumeTopics("eos-in"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.AllowAutoTopicCreation(), kgo.FetchMaxWait(100*time.Millisecond),
			kgo.SessionTimeout(time.Second), kgo.RebalanceTimeout(time.Second), kgo.HeartbeatInterval(100*time.Millisecond),
			kgo.FetchMaxPartitionBytes(8<<10))
		require.NoError(t, err)
		last := life == lives-1
		budget := 1 + k.rng.IntN(3) // transactions this life, before the kill
		lifeStart := time.Now()
		for n := 0; copied < total && (last || n < budget); n++ {
			fs := s.PollFetches(ctx)
			require.NoError(t, ctx.Err(), "seed %d life %d: copied %d", k.seed, life, copied)
			k.fetchErrors(life, fs)
			if err := s.Begin(); err != nil {
				t.Fatalf("seed %d life %d: begin: %v", k.seed, life, err)
			}
			batch := 0
			fs.EachRecord(func(r *kgo.Record) {
				batch++
				s.Produce(ctx, &kgo.Record{Topic: "eos-out", Value: r.Value}, nil)
			})
			endCtx, endCancel := context.WithCancel(ctx)
			killing := !last && n == budget-1
			if killing {
				go func() { // killed while the transaction ends
					k.kill(cmd)
					endCancel() // the broker is gone: stop retrying the end
				}()
			}
			ok, err := s.End(endCtx, kgo.TryCommit)
			if killing {
				for cmd.ProcessState == nil {
					_ = cmd.Wait() // the kill goroutine reaps it; wait for that
				}
			}
			endCancel()
			if err == nil && ok && !killing {
				copied += batch // (one ended by the kill may or may not have committed)
			}
			if killing {
				break
			}
		}
		if last || copied >= total {
			s.Close()
			require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
			require.NoError(t, cmd.Wait(), "%s", cmd.Stderr)
		} else {
			s.Close()
		}
		cancel()
		t.Logf("life %d: %v, copied %d", life, time.Since(lifeStart), copied)
	}

	// The copy, read committed: every input record exactly once.
	cmd, lines := startServe(t, "--data-dir", k.dir, "--config", "listeners=PLAINTEXT://127.0.0.1:0")
	addr := servedAddr(t, cmd, lines)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("eos-out"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(100*time.Millisecond))
	require.NoError(t, err)
	defer c.Close()
	seen := map[string]int{}
	dups := 0
	for len(seen) < total {
		fs := c.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "seed %d: read %d of %d distinct records", k.seed, len(seen), total)
		fs.EachRecord(func(r *kgo.Record) {
			seen[string(r.Value)]++
			if seen[string(r.Value)] > 1 {
				dups++
			}
		})
	}
	require.Zero(t, dups, "seed %d: records copied more than once", k.seed)
	require.Len(t, seen, total)
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait(), "%s", cmd.Stderr)
	t.Logf("%d lives, %d kills, %d records copied exactly once (0 duplicates, 0 lost)", lives, k.kills, total)
}
