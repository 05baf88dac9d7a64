package tiering

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/tablet"
)

// memFence is a partition's leadership and published pointer, shared by
// the tiers of its replicas (what etcd is in a cluster).
type memFence struct {
	mu     sync.Mutex
	leader string // which replica leads
	epoch  int32
	ptr    *Pointer
	// stale, if set, is a replica's own view of its leadership (a
	// deposed leader that has not heard yet).
	stale map[string]int32
}

type replicaFence struct {
	f  *memFence
	me string
}

func (r replicaFence) Leads() (int32, bool) {
	r.f.mu.Lock()
	defer r.f.mu.Unlock()
	if e, ok := r.f.stale[r.me]; ok {
		return e, true
	}
	return r.f.epoch, r.f.leader == r.me
}

func (r replicaFence) Pointer() (Pointer, bool) {
	r.f.mu.Lock()
	defer r.f.mu.Unlock()
	if r.f.ptr == nil {
		return Pointer{}, false
	}
	return *r.f.ptr, true
}

func (r replicaFence) Publish(_ context.Context, epoch int32, p Pointer) error {
	r.f.mu.Lock()
	defer r.f.mu.Unlock()
	if r.f.leader != r.me || epoch != r.f.epoch {
		return ErrFenced
	}
	r.f.ptr = &p
	return nil
}

// replicate appends src's batches to a new tablet of segment.bytes
// segBytes, as a follower copies them (same offsets, its own segments).
func replicate(t *testing.T, f *fixture, src *tablet.Tablet, segBytes string) *tablet.Tablet {
	cfg := tablet.DefaultConfig()
	require.NoError(t, cfg.Set("segment.bytes", segBytes))
	require.NoError(t, cfg.Set("local.retention.bytes", "0"))
	require.NoError(t, cfg.Set("remote.storage.enable", "true"))
	dst, err := f.m.Create(checkpoint.TopicPartition{Topic: tp.Topic, Partition: tp.Partition + 1}, &cfg)
	require.NoError(t, err)
	b := everything(t, src, 1<<20)
	for len(b) > 0 {
		batch, rest, err := record.ParseBatch(b)
		require.NoError(t, err)
		_, err = dst.Append(b[:len(b)-len(rest)], tablet.AppendOptions{Origin: record.OriginReplication})
		require.NoError(t, err)
		_ = batch
		b = rest
	}
	require.NoError(t, dst.SetHighWatermark(dst.Offsets().LogEndOffset))
	return dst
}

// A cluster's tier: the leader uploads and publishes at its epoch; a new
// leader takes the published manifest and continues it — from inside one
// of its own segments, which rolled elsewhere — publishing at its epoch;
// every record reads back through it; the deposed leader's late upload
// is refused publication (it takes the new manifest first, and its
// publication at the old epoch is fenced), so nothing it deletes
// locally goes past the published tiered end.
func TestTierFencedAcrossLeaders(t *testing.T) {
	f := newFixture(t, 400)
	a := f.t
	b := replicate(t, f, a, "7777")
	store, err := OpenFileStore(t.TempDir())
	require.NoError(t, err)
	fence := &memFence{leader: "a", epoch: 3}
	optsA, optsB := f.tierOpts(), f.tierOpts()
	optsA.Fence, optsB.Fence = replicaFence{fence, "a"}, replicaFence{fence, "b"}
	ctx := context.Background()
	xa, err := Open(ctx, a, tp.Topic, tp.Partition, store, optsA)
	require.NoError(t, err)
	defer xa.Close()
	xb, err := Open(ctx, b, tp.Topic, tp.Partition, store, optsB) // (the same partition's other replica: one prefix)
	require.NoError(t, err)
	defer xb.Close()

	up, err := xa.Upload(ctx, nil)
	require.NoError(t, err)
	require.NotEmpty(t, up.Objects)
	first := *fence.ptr
	require.Equal(t, int32(3), first.Epoch)
	require.Equal(t, xa.Manifest().TieredEnd(), first.TieredEnd)
	_, err = xb.Upload(ctx, nil)
	require.ErrorIs(t, err, ErrFenced, "a follower uploads nothing")
	_, err = xb.Follow(ctx)
	require.NoError(t, err)
	require.Equal(t, first.Seq, xb.Manifest().State().Seq, "the follower took the published manifest")

	// b's segments rolled elsewhere: the tiered end is inside one.
	inside := false
	for i, s := range b.Segments()[:len(b.Segments())-1] {
		if s.BaseOffset < first.TieredEnd && first.TieredEnd < b.Segments()[i+1].BaseOffset {
			inside = true
		}
	}
	require.True(t, inside, "the test's segments must not line up")

	fence.mu.Lock()
	fence.leader, fence.epoch = "b", 4
	fence.mu.Unlock()
	up, err = xb.Upload(ctx, nil)
	require.NoError(t, err)
	require.NotEmpty(t, up.Objects)
	require.Equal(t, first.TieredEnd, up.Objects[0].Base, "continued from the published tiered end")
	second := *fence.ptr
	require.Equal(t, int32(4), second.Epoch)
	require.Greater(t, second.TieredEnd, first.TieredEnd)
	want := everything(t, a, 1<<20)
	_, err = xb.DeleteLocal()
	require.NoError(t, err)
	require.Greater(t, b.Offsets().LocalLogStartOffset, first.TieredEnd)
	require.Equal(t, want, everything(t, b, 1<<20), "every record reads back through the continued tier")

	// a, deposed, still thinks it leads at epoch 3 and has more sealed
	// segments: it takes the published manifest first, uploads past it,
	// and its publication at 3 is fenced — so its local deletion stops
	// at the published tiered end.
	fence.mu.Lock()
	fence.stale = map[string]int32{"a": 3}
	fence.mu.Unlock()
	for i := range 40 {
		bl := record.NewBuilder(record.None)
		require.NoError(t, bl.Append(record.Record{Timestamp: f.now.Add(1000), Value: make([]byte, 500), Key: []byte{byte(i)}}))
		out, err := bl.Build()
		require.NoError(t, err)
		_, err = a.Append(out.Bytes(), tablet.AppendOptions{})
		require.NoError(t, err)
	}
	_, err = xa.Upload(ctx, nil)
	require.ErrorIs(t, err, ErrFenced)
	require.Greater(t, xa.Manifest().TieredEnd(), second.TieredEnd, "it did upload past the published end")
	require.Equal(t, second, *fence.ptr, "nothing of the deposed leader's was published")
	_, err = xa.DeleteLocal()
	require.NoError(t, err)
	require.LessOrEqual(t, a.Offsets().LocalLogStartOffset, second.TieredEnd, "local deletion stopped at the published tiered end")
}
