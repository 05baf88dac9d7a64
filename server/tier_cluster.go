package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/cluster"
	"github.com/seglog/seglog/replica"
	"github.com/seglog/seglog/tiering"
)

// tierFence is a partition's tiering.Fence in a cluster: its leadership
// from the replica manager, its published manifest in etcd.
type tierFence struct {
	m  *cluster.Member
	r  *replica.Manager
	tp checkpoint.TopicPartition
}

// tierFences gives each replica of this broker its fence.
func tierFences(m *cluster.Member, r *replica.Manager) func(tp checkpoint.TopicPartition) tiering.Fence {
	return func(tp checkpoint.TopicPartition) tiering.Fence {
		if _, ok := r.Get(tp); !ok {
			return nil
		}
		return tierFence{m: m, r: r, tp: tp}
	}
}

func (f tierFence) Leads() (int32, bool) {
	p, ok := f.r.Get(f.tp)
	if !ok {
		return -1, false
	}
	return p.LeaderEpoch()
}

func (f tierFence) Pointer() (tiering.Pointer, bool) {
	p, ok := f.m.Snapshot().Tier(f.tp.Topic, f.tp.Partition)
	return tiering.Pointer{Seq: p.Seq, Mirror: p.Mirror, TieredEnd: p.TieredEnd, Epoch: p.LeaderEpoch}, ok
}

func (f tierFence) Publish(ctx context.Context, epoch int32, p tiering.Pointer) error {
	err := f.m.PublishTier(ctx, f.tp.Topic, f.tp.Partition, epoch, cluster.TierPointer{Seq: p.Seq, Mirror: p.Mirror,
		TieredEnd: p.TieredEnd, LeaderEpoch: p.Epoch})
	if errors.Is(err, cluster.ErrStaleState) {
		return fmt.Errorf("%w: %w", tiering.ErrFenced, err)
	}
	return err
}
