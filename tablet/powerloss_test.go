package tablet_test

import (
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/internal/testenv"
	"github.com/seglog/seglog/recovery"
	"github.com/seglog/seglog/tablet"
	"github.com/seglog/seglog/tablet/tablettest"
	"github.com/seglog/seglog/vfs"
)

var crashTP = checkpoint.TopicPartition{Topic: "mixed", Partition: 0}

// TestPowerLossHarness runs the mixed idempotent and transactional
// workload (tablet/tablettest) through lives that each end in a power cut
// at a random mutating filesystem operation — an operation and every one
// after it fail, then the crash simulator keeps a random part of what was
// not synced, tearing sectors. After each cut a copy of the image is
// opened (recovered) and checked: every acknowledged batch and commit is
// there with its exact bytes, nothing of an aborted or unfinished
// transaction is visible, sequences have no gap, and after a clean close
// the directory passes recovery.Verify. The next life opens the crashed
// image itself and produces on. The seed is logged; SEGLOG_SEED replays it.
func TestPowerLossHarness(t *testing.T) {
	seed := testenv.Seed(t)
	lives := int(testenv.CrashSeeds(t, 40, 50))
	rng := rand.New(rand.NewPCG(seed, 11))
	var clock atomic.Int64
	clock.Store(1_700_000_000_000)
	now := func() int64 { return clock.Add(1) }
	opts := tablet.ManagerOptions{Tablet: tablet.Options{Now: func() time.Time { return time.UnixMilli(now()) },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}}
	cfg := tablet.DefaultConfig()
	cfg.SegmentBytes = 16384
	cfg.SegmentIndexBytes = 4096
	cfg.IndexIntervalBytes = 256

	mem := vfs.NewMem()
	var acks []tablettest.Ack
	cuts, steps := 0, 0
	for life := range lives {
		// A quarter of the cuts fall while opening (recovery included),
		// the rest while producing.
		inj := vfs.NewInjector(mem)
		duringOpen := rng.IntN(4) == 0
		cutAt := rng.IntN(600)
		if duringOpen {
			cutAt = rng.IntN(200)
			inj.Add(vfs.Rule{Ops: vfs.OpMutating, Nth: cutAt, Sticky: true})
		}
		m, err := tablet.OpenManager(inj, "/data", opts)
		if err == nil {
			var tab *tablet.Tablet
			if tab, err = m.GetOrCreate(crashTP, &cfg); err == nil && !duringOpen {
				inj.Add(vfs.Rule{Ops: vfs.OpMutating, Nth: cutAt, Sticky: true})
			}
			if err == nil {
				w := tablettest.New(tab, life, seed, now, func(a tablettest.Ack) error { acks = append(acks, a); return nil })
				for err = w.Begin(); err == nil; err = w.Step() {
					if steps++; steps%8 == 0 { // the checkpoints the manager writes every minute
						if err = m.Checkpoint(); err != nil {
							break
						}
					}
				}
			}
			_ = m.Close() // it fails: the power is gone
		}
		require.ErrorIs(t, err, vfs.ErrInjected, "seed %d life %d: the workload stops only at the cut", seed, life)
		cuts++
		mem = mem.Crash(vfs.CrashRandom, rng.Uint64())

		// Check a copy: recovery, the workload's invariants, a clean close, verify.
		img := mem.Crash(vfs.CrashKeepAll, 0)
		m, err = tablet.OpenManager(img, "/data", opts)
		require.NoError(t, err, "seed %d life %d: opening after the cut at operation %d", seed, life, cutAt)
		tab, ok := m.Get(crashTP)
		if !ok {
			require.Empty(t, acks, "seed %d life %d: acknowledged, then the tablet is gone", seed, life)
			require.NoError(t, m.Close())
			continue
		}
		require.NoError(t, tablettest.AbortPrevious(tab, life+1, now(), false))
		sum, err := tablettest.Check(tab, acks)
		if err != nil { // what recovery did, to read beside the failure
			for _, rt := range m.Loaded.Tablets {
				for _, c := range rt.Report {
					t.Logf("recovery: %v", c)
				}
			}
		}
		require.NoError(t, err, "seed %d life %d (cut at operation %d)", seed, life, cutAt)
		require.Equal(t, len(acks)-countAborted(acks), sum.Acked)
		require.NoError(t, m.Close())
		r, err := recovery.Verify(img, "/data", recovery.VerifyOptions{})
		require.NoError(t, err)
		require.True(t, r.OK(), "seed %d life %d: %s", seed, life, problems(r))
	}
	t.Logf("%d lives, %d power cuts, %d steps, %d acknowledged, 0 lost", lives, cuts, steps, len(acks))
}

func countAborted(acks []tablettest.Ack) int {
	n := 0
	for _, a := range acks {
		if a.Kind == 'a' {
			n++
		}
	}
	return n
}

func problems(r *recovery.VerifyReport) string {
	var out []string
	for _, p := range r.Problems {
		out = append(out, p.String())
	}
	for _, tr := range r.Tablets {
		for _, p := range tr.Problems {
			out = append(out, p.String())
		}
	}
	return strings.Join(out, "\n")
}
