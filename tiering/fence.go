package tiering

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/seglog/seglog"
)

// A tier in a cluster (docs/tiering.md §8). Every replica of a partition
// has its tier, over one store, but only the partition's leader acts on
// it: it uploads, deletes what local retention lets go, applies retention
// and collects garbage. The cluster keeps, beside the partition's
// leadership, a pointer to the partition's newest published manifest (its
// mirror's key in the store): a leader publishes each manifest it
// mirrors, comparing that it still leads at its epoch, so two leaders
// never both continue one manifest; a replica that starts leading, or
// follows, takes the published manifest as its own when it is not the one
// it has. A follower deletes local segments only below the published
// tiered end; the store's keys are deleted only once a published manifest
// no longer names them.

// Fence is what a tier knows of its partition's leadership in a cluster.
type Fence interface {
	// Leads reports whether this broker leads the partition now (its
	// session certainly alive), and at which leader epoch.
	Leads() (epoch int32, ok bool)
	// Pointer is the partition's newest published manifest, if any.
	Pointer() (Pointer, bool)
	// Publish makes p the partition's newest manifest if this broker
	// still leads it at epoch; ErrFenced if not.
	Publish(ctx context.Context, epoch int32, p Pointer) error
}

// Pointer names a published manifest: its sequence, its mirror's key in
// the store, its tiered end, and the leader epoch it was published at.
type Pointer struct {
	Seq       int64
	Mirror    string
	TieredEnd int64
	Epoch     int32
}

// ErrFenced is a publication refused: this broker no longer leads the
// partition at its epoch.
var ErrFenced = seglog.NewKafkaError("tiering: no longer the partition's leader at its epoch", 6) // NOT_LEADER_OR_FOLLOWER

// errNotLeading: a cluster's tier steps only on its partition's leader.
var errNotLeading = fmt.Errorf("%w: this broker does not lead the partition", ErrFenced)

// fencedMirrorKey is a cluster's mirror key: the leader epoch beside the
// sequence, so two leaders' mirrors of one sequence never share a key.
func (x *Tier) fencedMirrorKey(seq int64, epoch int32) string {
	return fmt.Sprintf("%s/manifest-%020d-%010d.json", x.prefix, seq, epoch)
}

// sync takes the published manifest when it is not the one this tier
// has (a replica that follows, or has just started leading): it replaces
// the manifest and attaches the tier as it says. It reports whether this
// broker leads the partition, and at which epoch.
func (x *Tier) sync(ctx context.Context) (epoch int32, leads bool, err error) {
	f := x.opts.Fence
	epoch, leads = f.Leads()
	p, ok := f.Pointer()
	if !ok || p.Mirror == x.adopted.Mirror {
		if leads {
			x.epoch = epoch
		}
		return epoch, leads, nil
	}
	info, err := x.store.Head(ctx, p.Mirror)
	var data []byte
	if err == nil {
		data, err = readAll(ctx, x.store, p.Mirror, info.Size)
	}
	if err != nil {
		return epoch, leads, fmt.Errorf("tiering: %s: reading the published manifest %s: %w", x.prefix, p.Mirror, err)
	}
	var st ManifestState
	if err := json.Unmarshal(data, &st); err != nil || st.Seq != p.Seq {
		return epoch, leads, fmt.Errorf("%w: %s: the published manifest %s does not read as sequence %d", seglog.ErrCorruption, x.prefix, p.Mirror, p.Seq)
	}
	if err := x.m.Adopt(st); err != nil {
		return epoch, leads, x.manifestErr(err)
	}
	x.adopted, x.epoch = p, epoch
	x.opts.Logger.Info("took the partition's published manifest", "tablet", x.prefix, "seq", p.Seq, "tieredEnd", p.TieredEnd,
		"published_at_epoch", p.Epoch)
	return epoch, leads, x.attach()
}

// lead checks, before an action of a cluster's tier, that this broker
// leads the partition with the published manifest taken.
func (x *Tier) lead(ctx context.Context) error {
	if x.opts.Fence == nil {
		return nil
	}
	_, leads, err := x.sync(ctx)
	if err != nil {
		return err
	}
	if !leads {
		return errNotLeading
	}
	return nil
}

// publish mirrors the manifest and, in a cluster, publishes it at the
// epoch this broker leads at (the step's): what follows (deleting local
// segments or store keys) relies on it.
func (x *Tier) publish(ctx context.Context) error {
	if x.opts.Fence == nil {
		return x.mirror(ctx)
	}
	if x.adopted.Mirror != "" && x.m.State().Seq == x.adopted.Seq {
		return nil // (published as it is)
	}
	st, key, err := x.mirrorAs(ctx, func(seq int64) string { return x.fencedMirrorKey(seq, x.epoch) })
	if err != nil {
		return err
	}
	p := Pointer{Seq: st.Seq, Mirror: key, TieredEnd: st.TieredEnd, Epoch: x.epoch}
	if err := x.opts.Fence.Publish(ctx, x.epoch, p); err != nil {
		return err
	}
	x.adopted = p
	return nil
}

// publishedEnd is the tiered end local deletion may go up to: the
// manifest's, or in a cluster the published one's.
func (x *Tier) publishedEnd() int64 {
	if x.opts.Fence == nil {
		return x.m.TieredEnd()
	}
	return min(x.m.TieredEnd(), x.adopted.TieredEnd)
}

// allPublished reports whether the store may lose keys the manifest no
// longer names: always on a single node; in a cluster, once the manifest
// as it is now is published (and this broker still leads).
func (x *Tier) allPublished() bool {
	if x.opts.Fence == nil {
		return true
	}
	epoch, leads := x.opts.Fence.Leads()
	return leads && epoch == x.epoch && x.adopted.Mirror != "" && x.adopted.Seq == x.m.State().Seq
}

// oldMirror reports whether a cluster's mirror key may go: older than
// the published manifest's by more than keepMirrors sequences, or a
// deposed leader's that was never published (a later sequence at an
// older epoch).
func (x *Tier) oldMirror(key string) bool {
	var seq int64
	var epoch int32
	if _, err := fmt.Sscanf(strings.TrimPrefix(key, x.prefix+"/"), "manifest-%020d-%010d.json", &seq, &epoch); err != nil {
		return false
	}
	p := x.adopted
	return p.Mirror != "" && key != p.Mirror && (seq < p.Seq-keepMirrors || seq > p.Seq && epoch < p.Epoch)
}
