package tiering

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seglog/seglog/tablet"
)

// DeleteLocal deletes the local segments the tier holds that local
// retention no longer keeps (docs/tiering.md §4): committed, below
// the high watermark, past local.retention.bytes / local.retention.ms, not
// among the newest KeepLocalSegments. Untiered segments are never deleted,
// however long the store is down.
func (x *Tier) DeleteLocal() (tablet.RetentionResult, error) {
	x.step.Lock()
	defer x.step.Unlock()
	return x.deleteLocalLocked()
}

// Follow is a cluster's follower's step: it takes the published manifest
// and deletes the local segments local retention lets go below its
// tiered end (nothing when this broker leads: Step is the leader's).
func (x *Tier) Follow(ctx context.Context) (tablet.RetentionResult, error) {
	x.step.Lock()
	defer x.step.Unlock()
	if x.opts.Fence == nil {
		return tablet.RetentionResult{}, nil
	}
	if _, leads, err := x.sync(ctx); err != nil || leads {
		return tablet.RetentionResult{}, err
	}
	return x.deleteLocalLocked()
}

func (x *Tier) deleteLocalLocked() (tablet.RetentionResult, error) {
	if err := x.usable(); err != nil {
		return tablet.RetentionResult{}, err
	}
	cfg := x.t.Config()
	localBytes, localMs := cfg.LocalRetentionBytes, cfg.LocalRetentionMs
	if localBytes == -2 {
		localBytes = cfg.RetentionBytes
	}
	if localMs == -2 {
		localMs = cfg.RetentionMs
	}
	segs := x.t.Segments()
	if len(segs) < 2 {
		return tablet.RetentionResult{}, nil
	}
	off := x.t.Offsets()
	end := x.publishedEnd()
	now := x.nowMs()
	var total int64
	for _, s := range segs {
		total += s.Size
	}
	sealed := segs[:len(segs)-1]
	cutoff := int64(-1)
	for i, s := range sealed {
		next := segs[i+1].BaseOffset
		if i >= len(sealed)-x.opts.KeepLocalSegments || next > end || next > off.HighWatermark {
			break
		}
		bySize := localBytes >= 0 && total-s.Size >= localBytes
		byTime := localMs >= 0 && now-s.MaxTimestamp > localMs
		if !bySize && !byTime {
			break
		}
		total -= s.Size
		cutoff = next
	}
	if cutoff < 0 {
		return tablet.RetentionResult{}, nil
	}
	if err := x.bindLocked(); err != nil {
		return tablet.RetentionResult{}, err
	}
	return x.t.DeleteLocalBefore(cutoff)
}

// bindLocked saves Options.StoreURL in the tablet's tier directory, once,
// unless it is there already.
func (x *Tier) bindLocked() error {
	if x.opts.StoreURL == "" || x.bound {
		return nil
	}
	want, err := AbsoluteStoreURL(x.opts.StoreURL)
	if err != nil {
		return err
	}
	if u, ok, err := StoreURL(x.opts.FS, x.t.Dir()); err != nil {
		return err
	} else if !ok || u != want {
		if err := SaveStoreURL(x.opts.FS, x.t.Dir(), want); err != nil {
			return fmt.Errorf("tiering: binding %s to its store before deleting local segments: %w", x.prefix, err)
		}
	}
	x.bound = true
	return nil
}

// RetentionResult says what ApplyRetention did.
type RetentionResult struct {
	Retired, Deleted int
	LogStart         int64
}

// ApplyRetention applies retention.ms / retention.bytes to the whole log
// (docs/tiering.md §6): the oldest objects are retired (the log
// start moves past them, and past local segments they cover), and
// retired objects older than the grace period are deleted from the store.
func (x *Tier) ApplyRetention(ctx context.Context) (RetentionResult, error) {
	x.step.Lock()
	defer x.step.Unlock()
	var res RetentionResult
	if err := x.usable(); err != nil {
		return res, err
	}
	if err := x.lead(ctx); err != nil {
		return res, err
	}
	vis := x.m.Visible()
	end := x.m.TieredEnd()
	var total int64
	for _, e := range vis {
		total += e.Size
	}
	for _, s := range x.t.Segments() {
		if s.BaseOffset >= end {
			total += s.Size
		}
	}
	now := x.nowMs()
	cfg := x.t.Config()
	logStart := x.t.Offsets().LogStartOffset
	for _, e := range vis {
		byTime := cfg.RetentionMs >= 0 && now-e.MaxTimestamp > cfg.RetentionMs
		bySize := cfg.RetentionBytes >= 0 && total-e.Size >= cfg.RetentionBytes
		byStart := e.End <= logStart
		if !byTime && !bySize && !byStart {
			break
		}
		if err := x.m.Retire(e.ID, now); err != nil {
			return res, x.manifestErr(err)
		}
		total -= e.Size
		res.Retired++
	}
	res.LogStart = max(logStart, x.m.LogStart())
	if res.Retired > 0 {
		if err := x.t.SetRemote(x, res.LogStart); err != nil {
			return res, err
		}
		if err := x.publish(ctx); err != nil {
			if x.opts.Fence != nil {
				return res, err // (not published: no key goes)
			}
			x.opts.Logger.Warn("mirroring the manifest", "err", err)
		}
	}
	if !x.allPublished() {
		return res, nil
	}
	grace := x.opts.GracePeriod.Milliseconds()
	for _, e := range x.m.State().Objects {
		if e.State != StateRetired || e.RetiredMs+grace > now {
			continue
		}
		if e.Key != "" {
			if err := x.store.Delete(ctx, e.Key); err != nil {
				return res, err
			}
		}
		if err := x.m.MarkGone(e.ID); err != nil {
			return res, x.manifestErr(err)
		}
		res.Deleted++
	}
	return res, nil
}

// GCResult says what CollectGarbage deleted.
type GCResult struct {
	Orphans, Multipart, Mirrors, Aborted int
}

// keepMirrors is how many of the newest manifest mirrors GC keeps.
const keepMirrors = 3

// CollectGarbage cleans the tablet's own keys in the store (section 6):
// it aborts uploads prepared past their deadline, deletes the keys of
// aborted uploads, aborts stale multipart uploads, deletes keys no
// manifest entry names once older than the grace period, and old manifest
// mirrors. It never touches a committed, unretired key or an upload in
// flight. It also compacts the manifest when its log has grown.
func (x *Tier) CollectGarbage(ctx context.Context) (GCResult, error) {
	x.step.Lock()
	defer x.step.Unlock()
	var res GCResult
	if err := x.usable(); err != nil {
		return res, err
	}
	if err := x.lead(ctx); err != nil {
		return res, err
	}
	now := x.opts.Now()
	for _, e := range x.m.State().Objects {
		if e.State == StatePrepared && e.DeadlineMs < now.UnixMilli() {
			if _, running := x.inflight.Load(e.ID); running {
				continue
			}
			if err := x.m.Abort(e.ID, now.UnixMilli()); err != nil {
				return res, x.manifestErr(err)
			}
			res.Aborted++
		}
	}
	if err := x.collectAborted(ctx); err != nil {
		return res, err
	}
	st := x.m.State()
	named := map[string]bool{}
	for _, e := range st.Objects {
		named[e.Key] = true
	}
	old := func(t time.Time) bool { return now.Sub(t) > x.opts.GracePeriod }
	mirrors, err := x.store.List(ctx, x.prefix+"/manifest-")
	if err != nil {
		return res, err
	}
	for i := range mirrors {
		if x.opts.Fence == nil && i >= len(mirrors)-keepMirrors || x.opts.Fence != nil && !x.oldMirror(mirrors[i].Key) {
			continue
		}
		if err := x.store.Delete(ctx, mirrors[i].Key); err != nil {
			return res, err
		}
		res.Mirrors++
	}
	if x.scanDue(now) && x.allPublished() {
		young, err := x.scanOrphans(ctx, st, named, old, &res)
		if err != nil {
			return res, err
		}
		x.lastScan, x.rescan = now, young
	}
	if x.m.Records() > 1000 {
		if err := x.m.Compact(); err != nil {
			return res, x.manifestErr(err)
		}
	}
	return res, nil
}

// scanDue reports whether CollectGarbage should list the store for
// orphans: keys of this tablet no manifest entry names exist only when a
// manifest was lost (rebuilt from the mirror) or something outside wrote
// them, so the store — listed whole, as the hash prefix spreads a
// tablet's keys — is scanned at the first collection of a process, until
// no orphan younger than the grace period is left, and then every
// OrphanScanInterval.
func (x *Tier) scanDue(now time.Time) bool {
	return x.rescan || x.lastScan.IsZero() || now.Sub(x.lastScan) >= x.opts.OrphanScanInterval
}

// scanOrphans deletes this tablet's unreferenced keys past the grace
// period and aborts its stale multipart uploads; young reports an orphan
// left for being younger than the grace period.
func (x *Tier) scanOrphans(ctx context.Context, st ManifestState, named map[string]bool, old func(time.Time) bool, res *GCResult) (young bool, err error) {
	list, err := x.store.List(ctx, "")
	if err != nil {
		return false, err
	}
	for _, o := range list {
		if !x.ownsKey(o.Key) || named[o.Key] {
			continue
		}
		if !old(o.Modified) {
			young = true
			continue
		}
		if err := x.store.Delete(ctx, o.Key); err != nil {
			return young, err
		}
		x.opts.Logger.Info("deleted an orphan object", "key", o.Key)
		res.Orphans++
	}
	ups, err := x.store.ListMultipart(ctx, "")
	if err != nil {
		return young, err
	}
	for _, u := range ups {
		if !x.ownsKey(u.Key) {
			continue
		}
		if !old(u.Started) {
			young = true
			continue
		}
		if e, ok := x.entryByKey(st, u.Key); ok && e.State == StatePrepared {
			continue // its upload may still be running
		}
		if err := x.store.AbortMultipart(ctx, u.Key, u.UploadID); err != nil && !errors.Is(err, ErrNotFound) {
			return young, err
		}
		res.Multipart++
	}
	return young, nil
}

func (x *Tier) entryByKey(st ManifestState, key string) (Entry, bool) {
	for _, e := range st.Objects {
		if e.Key == key {
			return e, true
		}
	}
	return Entry{}, false
}

// StepResult says what one Step did.
type StepResult struct {
	Upload    UploadResult
	Local     tablet.RetentionResult
	Retention RetentionResult
}

// Step runs upload, local deletion and retention once.
func (x *Tier) Step(ctx context.Context) (StepResult, error) {
	var res StepResult
	var err error
	if res.Upload, err = x.Upload(ctx, nil); err != nil {
		return res, err
	}
	if res.Local, err = x.DeleteLocal(); err != nil {
		return res, err
	}
	res.Retention, err = x.ApplyRetention(ctx)
	return res, err
}
