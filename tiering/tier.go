package tiering

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/seglog/seglog/leaderepoch"
	"github.com/seglog/seglog/tablet"
	"github.com/seglog/seglog/vfs"
)

// Options configure a tablet's tier. Retention comes from the tablet's
// config under Kafka's names: retention.ms and retention.bytes bound the
// whole log, tier included; local.retention.ms and local.retention.bytes
// the part kept locally once tiered.
type Options struct {
	// BlockSize closes a data block. The default is DefaultBlockSize.
	BlockSize int
	// KeepLocalSegments is how many of the newest sealed segments stay
	// local whatever the local retention. The default is 0.
	KeepLocalSegments int
	// UploadTimeout cuts an upload that hangs; it is retried later under a
	// new key. The default is 5 minutes.
	UploadTimeout time.Duration
	// GracePeriod is how long a retired object stays in the store after it
	// leaves the visible set (longer than the longest read), and how old an
	// unreferenced key must be before garbage collection deletes it. The
	// default is 10 minutes.
	GracePeriod time.Duration
	// OrphanScanInterval is how often garbage collection lists the whole
	// store for keys no manifest names (besides the first collection of a
	// process). The default is 24 hours.
	OrphanScanInterval time.Duration
	// IndexCacheObjects bounds the objects whose index is cached. The
	// default is 256.
	IndexCacheObjects int
	// BlockCacheBytes bounds the block cache. The default is 64 MiB.
	BlockCacheBytes int64
	// Now is the clock. The default is time.Now.
	Now func() time.Time
	// Logger receives what the tier does. The default is slog.Default().
	Logger *slog.Logger
	// FS is the filesystem of the manifest. The default is the OS's.
	FS vfs.FS
	// StoreURL, if set, is the store's URL, saved in the tablet's tier
	// directory (SaveStoreURL) before DeleteLocal deletes its first local
	// segment: a local deletion never runs ahead of the binding that lets
	// a later open attach the tier and read what was deleted. The default
	// is "": the caller binds the tablet before deleting.
	StoreURL string
	// Fence, if set, makes the tier a cluster's replica's (fence.go): it
	// acts only while this broker leads the partition, publishing each
	// manifest it mirrors at its leader epoch, and follows the published
	// manifest otherwise. The default is nil: a single node's tier.
	Fence Fence
	// ReadOnly opens the tier for reads only, as a read-only command needs:
	// the manifest's changes stay in memory (a vfs.Overlay), uploads left
	// prepared are left for a writer to resolve, and nothing is put to or
	// deleted from the store; Upload, DeleteLocal, ApplyRetention and
	// CollectGarbage fail with tablet.ErrReadOnly. A tablet opened
	// read-only always gets a read-only tier. The default is false.
	ReadOnly bool
}

// EnsureDefaults fills the zero fields.
func (o *Options) EnsureDefaults() {
	if o.BlockSize <= 0 {
		o.BlockSize = DefaultBlockSize
	}
	if o.UploadTimeout <= 0 {
		o.UploadTimeout = 5 * time.Minute
	}
	if o.GracePeriod <= 0 {
		o.GracePeriod = 10 * time.Minute
	}
	if o.OrphanScanInterval <= 0 {
		o.OrphanScanInterval = 24 * time.Hour
	}
	if o.IndexCacheObjects <= 0 {
		o.IndexCacheObjects = 256
	}
	if o.BlockCacheBytes <= 0 {
		o.BlockCacheBytes = 64 << 20
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.FS == nil {
		o.FS = vfs.OS
	}
}

// Tier moves a tablet's sealed segments to an object store and serves
// reads below the local log start from it. Its steps (Upload,
// DeleteLocal, ApplyRetention, CollectGarbage) are serialized; reads run
// concurrently with them.
type Tier struct {
	stats     tierStats
	t         *tablet.Tablet
	topic     string
	partition int32
	store     ObjectStore
	opts      Options
	m         *Manifest
	prefix    string // <prefix>/<topic>-<partition>
	cache     *cache

	step     sync.Mutex // one step at a time
	inflight sync.Map   // object id → struct{}: uploads running now
	failed   error      // the manifest failed: the tier does nothing more
	// lastScan is when garbage collection last listed the store for
	// orphans; rescan asks the next one to (an orphan was too young).
	lastScan time.Time
	rescan   bool
	// bound: Options.StoreURL is saved in the tablet (under step).
	bound bool
	// adopted is the published manifest this tier's is, as taken or
	// published last, and epoch the leader epoch this broker leads at
	// with it (a cluster's tier, under step).
	adopted Pointer
	epoch   int32
}

var _ tablet.Remote = (*Tier)(nil)

// Open opens the tier of a tablet: its manifest (rebuilt from the store's
// mirror if the local one is gone), aborts uploads a crash left prepared,
// and attaches the tier to the tablet.
func Open(ctx context.Context, t *tablet.Tablet, topic string, partition int32, store ObjectStore, o *Options) (*Tier, error) {
	if t == nil || store == nil {
		return nil, errors.New("tiering: Open needs a tablet and a store")
	}
	var opts Options
	if o != nil {
		opts = *o
	}
	opts.EnsureDefaults()
	if t.ReadOnly() {
		opts.ReadOnly = true
	}
	if opts.ReadOnly {
		opts.FS = vfs.NewOverlay(opts.FS)
	}
	x := &Tier{t: t, topic: topic, partition: partition, store: store, opts: opts,
		prefix: strings.TrimPrefix(store.Prefix()+"/"+fmt.Sprintf("%s-%d", topic, partition), "/")}
	x.cache = newCache(x, opts.IndexCacheObjects, opts.BlockCacheBytes)
	start := t.Offsets().LocalLogStartOffset
	if segs := t.Segments(); len(segs) > 0 {
		start = segs[0].BaseOffset
	}
	dir := filepath.Join(t.Dir(), ManifestDir)
	_, statErr := opts.FS.Stat(filepath.Join(dir, ManifestLog))
	m, err := OpenManifest(opts.FS, dir, start)
	if err != nil {
		return nil, err
	}
	x.m = m
	if statErr != nil && opts.Fence == nil { // (a cluster's tier takes the published manifest at its first step)
		if err := x.restoreFromMirror(ctx); err != nil {
			m.Close()
			return nil, err
		}
	}
	if opts.ReadOnly {
		for _, e := range m.State().Objects {
			if e.State == StatePrepared {
				opts.Logger.Info("an upload left prepared is left for a writer to resolve", "tablet", x.prefix, "key", e.Key)
			}
		}
	} else if err := x.abortPrepared(ctx); err != nil {
		m.Close()
		return nil, err
	}
	if err := x.startFromTier(ctx); err != nil {
		m.Close()
		return nil, err
	}
	if err := x.attach(); err != nil {
		m.Close()
		return nil, err
	}
	return x, nil
}

// startFromTier starts a tablet with no local record at the tiered end,
// with the writer state of the newest object and the leader epochs of all
// of them, when the tier holds the log (a tablet rebuilt on a new disk).
func (x *Tier) startFromTier(ctx context.Context) error {
	off := x.t.Offsets()
	end := x.m.TieredEnd()
	if off.LogEndOffset != off.LogStartOffset || end <= off.LogEndOffset {
		return nil
	}
	epochs, newest, _, err := x.epochsUpTo(ctx, end)
	if err != nil || newest == nil {
		return err
	}
	x.opts.Logger.Info("starting the tablet from the tier", "tablet", x.prefix, "end", end)
	return x.t.StartFromTier(end, newest.Snapshot, epochs)
}

// indexReads bounds the object indexes read at once to start a tablet
// from the tier.
const indexReads = 16

// epochsUpTo reads the indexes of the visible objects that start below
// offset (at most indexReads at once) and returns their leader epochs in
// order, the last of them and its end.
func (x *Tier) epochsUpTo(ctx context.Context, offset int64) (epochs []leaderepoch.Entry, last *Object, end int64, err error) {
	var es []Entry
	for _, e := range x.m.Visible() {
		if e.Base >= offset {
			break
		}
		if e.Key != "" {
			es = append(es, e)
		}
	}
	objs := make([]*Object, len(es))
	errs := make([]error, len(es))
	sem := make(chan struct{}, indexReads)
	var wg sync.WaitGroup
	for i, e := range es {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			objs[i], errs[i] = x.cache.index(ctx, e)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, nil, 0, err
	}
	for i, o := range objs {
		for _, ep := range o.Epochs {
			if n := len(epochs); n == 0 || ep.Epoch > epochs[n-1].Epoch {
				epochs = append(epochs, ep)
			}
		}
		last, end = o, es[i].End
	}
	return epochs, last, end, nil
}

// StartFollowerAt starts a new (or far behind) replica of a cluster's
// partition from the tier (KIP-405's OFFSET_MOVED_TO_TIERED_STORAGE
// path): with the leader's local log starting at localStart, the replica
// empties its log and starts at the end of the tier's object holding
// localStart-1, with that object's producer snapshot and the leader
// epochs of the objects up to it; it copies the leader's local tail from
// there, never the tiered history. It returns where the log starts now.
func (x *Tier) StartFollowerAt(ctx context.Context, localStart int64) (int64, error) {
	x.step.Lock()
	defer x.step.Unlock()
	if x.opts.Fence != nil {
		if _, _, err := x.sync(ctx); err != nil {
			return 0, err
		}
	}
	epochs, at, end, err := x.epochsUpTo(ctx, localStart)
	if err != nil {
		return 0, err
	}
	if at == nil || end < localStart {
		return 0, fmt.Errorf("tiering: %s: the tier (to %d) does not hold offset %d, below the leader's local log start", x.prefix, x.m.TieredEnd(), localStart-1)
	}
	if o := x.t.Offsets(); o.LogEndOffset != o.LogStartOffset || o.LogStartOffset != end {
		if err := x.t.TruncateFullyAndStartAt(end); err != nil {
			return 0, err
		}
	}
	if err := x.t.StartFromTier(end, at.Snapshot, epochs); err != nil {
		return 0, err
	}
	x.opts.Logger.Info("a replica starts from the tier, below the leader's local log", "tablet", x.prefix, "start", end,
		"leaderLocalStart", localStart)
	return end, x.attachAdopted()
}

// Close closes the manifest. The tablet keeps the tier attached; close
// the tablet first.
func (x *Tier) Close() error { return x.m.Close() }

// Manifest returns the tier's manifest.
func (x *Tier) Manifest() *Manifest { return x.m }

// attach tells the tablet where the log starts now: the oldest visible
// object's base when the tier reaches the local log (else the local start).
func (x *Tier) attach() error { return x.attachTier(false) }

// attachAdopted attaches the tier of a replica just started from it
// (StartFollowerAt): the log start moves down into it, as far as it
// reaches (the leader's fetches move it up again if the leader's is
// higher, as after DeleteRecords).
func (x *Tier) attachAdopted() error { return x.attachTier(true) }

func (x *Tier) attachTier(adopted bool) error {
	vis := x.m.Visible()
	off := x.t.Offsets()
	start := off.LocalLogStartOffset
	if len(vis) > 0 && x.m.TieredEnd() >= off.LocalLogStartOffset {
		start = max(vis[0].Base, x.m.LogStart())
	} else if len(vis) == 0 && x.m.LogStart() > start {
		start = x.m.LogStart()
	}
	if adopted {
		return x.t.AdoptRemote(x, start)
	}
	return x.t.SetRemote(x, start)
}

// objectKey builds a key: <h>/<prefix>/<topic>-<partition>/<base>-<id>.seg.
func (x *Tier) objectKey(base int64, id string) string {
	rest := fmt.Sprintf("%s/%020d-%s.seg", x.prefix, base, id)
	h := fnv.New32a()
	h.Write([]byte(rest))
	return fmt.Sprintf("%04x/%s", h.Sum32()&0xffff, rest)
}

func (x *Tier) mirrorKey(seq int64) string {
	return fmt.Sprintf("%s/manifest-%020d.json", x.prefix, seq)
}

// ownsKey reports whether key is one of this tablet's object keys.
func (x *Tier) ownsKey(key string) bool {
	return len(key) > 5 && key[4] == '/' && strings.HasPrefix(key[5:], x.prefix+"/") && strings.HasSuffix(key, ".seg")
}

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (x *Tier) nowMs() int64 { return x.opts.Now().UnixMilli() }

// usable fails a step (an upload, a deletion, retention, collection) of a
// failed or read-only tier.
func (x *Tier) usable() error {
	if x.failed != nil {
		return x.failed
	}
	if x.opts.ReadOnly {
		return fmt.Errorf("%w: the tier of %s", tablet.ErrReadOnly, x.prefix)
	}
	return nil
}

// manifestErr keeps a manifest failure: it is fatal for the tier.
func (x *Tier) manifestErr(err error) error {
	if errors.Is(err, ErrManifestFailed) && x.failed == nil {
		x.failed = err
		x.opts.Logger.Error("tier failed: the manifest cannot be written", "tablet", x.prefix, "err", err)
		// Fatal for the tablet too (docs/tiering.md §3): an upload's
		// outcome must never be unknown while the tablet goes on.
		_ = x.t.Fail(err)
	}
	return err
}

// abortPrepared aborts the uploads a previous process prepared and never
// committed: their keys are deleted, their multipart uploads aborted.
func (x *Tier) abortPrepared(ctx context.Context) error {
	for _, e := range x.m.State().Objects {
		if e.State != StatePrepared {
			continue
		}
		if err := x.m.Abort(e.ID, x.nowMs()); err != nil {
			return err
		}
		x.opts.Logger.Info("aborted an upload left prepared", "tablet", x.prefix, "key", e.Key)
	}
	return x.collectAborted(ctx)
}

// collectAborted deletes the keys of aborted uploads (and any multipart
// upload of them) and records them gone.
func (x *Tier) collectAborted(ctx context.Context) error {
	var ups []MultipartUpload
	listed := false
	for _, e := range x.m.State().Objects {
		if e.State != StateAborted {
			continue
		}
		if _, running := x.inflight.Load(e.ID); running {
			continue
		}
		if !listed {
			var err error
			if ups, err = x.store.ListMultipart(ctx, ""); err != nil {
				return err
			}
			listed = true
		}
		for _, u := range ups {
			if u.Key == e.Key {
				if err := x.store.AbortMultipart(ctx, u.Key, u.UploadID); err != nil && !errors.Is(err, ErrNotFound) {
					return err
				}
			}
		}
		if err := x.store.Delete(ctx, e.Key); err != nil {
			return err
		}
		if err := x.m.MarkGone(e.ID); err != nil {
			return x.manifestErr(err)
		}
	}
	return nil
}

// UploadResult says what Upload did.
type UploadResult struct {
	Objects []Entry
	Bytes   int64
}

// Upload uploads every eligible segment, oldest first: sealed, wholly
// below the high watermark and the last stable offset, starting at the
// tiered end. It stops at the first failure (the segment is retried at the
// next call under a new key). progress, if set, is told each object's
// bytes as they go.
func (x *Tier) Upload(ctx context.Context, progress func(n int64)) (UploadResult, error) {
	x.step.Lock()
	defer x.step.Unlock()
	var res UploadResult
	for {
		e, ok, err := x.uploadNext(ctx, progress)
		if err != nil || !ok {
			return res, err
		}
		res.Objects = append(res.Objects, e)
		res.Bytes += e.Size
	}
}

// UploadNext uploads the next eligible segment, if any (ok false when
// none is), as Upload does for each.
func (x *Tier) UploadNext(ctx context.Context, progress func(n int64)) (e Entry, ok bool, err error) {
	x.step.Lock()
	defer x.step.Unlock()
	return x.uploadNext(ctx, progress)
}

// Untiered returns the local bytes not yet tiered (total, the active
// segment included) and those of them that could be uploaded now
// (eligible: sealed, below the high watermark and the last stable offset).
func (x *Tier) Untiered() (eligible, total int64) {
	end := x.m.TieredEnd()
	off := x.t.Offsets()
	segs := x.t.Segments()
	for i, s := range segs {
		if i+1 < len(segs) && segs[i+1].BaseOffset <= end {
			continue // (all below the tiered end)
		}
		total += s.Size
		if i < len(segs)-1 && x.sealedBelowBound(s, off) {
			eligible += s.Size
		}
	}
	return eligible, total
}

func (x *Tier) sealedBelowBound(s tablet.SegmentInfo, off tablet.Offsets) bool {
	return s.NextOffset <= min(off.HighWatermark, off.LastStableOffset)
}

func (x *Tier) uploadNext(ctx context.Context, progress func(int64)) (Entry, bool, error) {
	if err := x.usable(); err != nil {
		return Entry{}, false, err
	}
	if err := x.lead(ctx); err != nil {
		return Entry{}, false, err
	}
	end := x.m.TieredEnd()
	off := x.t.Offsets()
	segs := x.t.Segments()
	var next int64 = -1
	for i, s := range segs[:max(len(segs)-1, 0)] {
		if s.BaseOffset > end {
			return Entry{}, false, fmt.Errorf("tiering: %s: the local log starts at %d, past the tiered end %d: a gap",
				x.prefix, s.BaseOffset, end)
		}
		if segs[i+1].BaseOffset > end {
			// The segment holding the tiered end: from its base, or, in a
			// cluster, from inside it (a new leader's segments rolled
			// elsewhere than the old one's).
			next = segs[i+1].BaseOffset
			break
		}
	}
	if next < 0 || next > min(off.HighWatermark, off.LastStableOffset) {
		return Entry{}, false, nil
	}
	s, err := x.t.Sealed(end)
	if err != nil {
		return Entry{}, false, err
	}
	defer s.Close()
	plan, err := PlanObject(SegmentSource{Log: s.Log, LogSize: s.LogSize, Path: s.Path, BaseOffset: s.Base, EndOffset: s.Next,
		TxnIndex: s.TxnIndex, Snapshot: s.Snapshot, Epochs: s.Epochs, Topic: x.topic, Partition: x.partition,
		CreatedMs: s.CreatedMs, BlockSize: x.opts.BlockSize})
	if errors.Is(err, ErrEmptySegment) {
		// Nothing to upload: an empty object would hold nothing. The tiered
		// end moves past it through a commit of no object.
		return x.skipEmpty(s.Base, s.Next)
	}
	if err != nil {
		return Entry{}, false, err
	}
	id := newID()
	key := x.objectKey(s.Base, id)
	deadline := x.opts.Now().Add(x.opts.UploadTimeout)
	x.inflight.Store(id, struct{}{})
	defer x.inflight.Delete(id)
	if err := x.m.Prepare(id, key, s.Base, s.Next, deadline.UnixMilli()); err != nil {
		return Entry{}, false, x.manifestErr(err)
	}
	info, sum, err := x.put(ctx, key, plan, progress)
	if err != nil {
		x.inflight.Delete(id) // over: its key may be collected now
		x.opts.Logger.Warn("upload failed; it will be retried under a new key", "key", key, "err", err)
		if aerr := x.m.Abort(id, x.nowMs()); aerr != nil {
			return Entry{}, false, errors.Join(err, x.manifestErr(aerr))
		}
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if derr := x.collectAborted(dctx); derr != nil {
			x.opts.Logger.Warn("deleting an aborted upload; garbage collection will retry", "key", key, "err", derr)
		}
		return Entry{}, false, err
	}
	if err := x.m.Commit(id, info.Size, sum, plan.Meta.MaxTimestamp); err != nil {
		if errors.Is(err, ErrWrongBase) { // refused: aborted, its key collected
			x.inflight.Delete(id)
			return Entry{}, false, errors.Join(err, x.manifestErr(x.m.Abort(id, x.nowMs())), x.collectAborted(ctx))
		}
		return Entry{}, false, x.manifestErr(err)
	}
	e, _ := x.m.Get(id)
	x.opts.Logger.Info("uploaded segment", "key", key, "base", s.Base, "end", s.Next, "bytes", info.Size)
	if err := x.attach(); err != nil { // publish: the tablet may serve it from now on
		return e, true, err
	}
	if err := x.publish(ctx); err != nil {
		if x.opts.Fence != nil {
			return e, true, err // (not published: nothing may rely on it)
		}
		x.opts.Logger.Warn("mirroring the manifest", "err", err)
	}
	return e, true, nil
}

// skipEmpty moves the tiered end past an empty segment: a PREPARE and
// COMMIT of an object of no bytes that is never written (its key is
// empty).
func (x *Tier) skipEmpty(base, next int64) (Entry, bool, error) {
	if base == next {
		return Entry{}, false, nil // nothing to move past
	}
	id := newID()
	if err := x.m.Prepare(id, "", base, next, 0); err != nil {
		return Entry{}, false, x.manifestErr(err)
	}
	if err := x.m.Commit(id, 0, 0, -1); err != nil {
		return Entry{}, false, x.manifestErr(err)
	}
	e, _ := x.m.Get(id)
	return e, true, nil
}

// put streams the object to the store within the upload timeout and
// checks what the store holds: size and CRC-32C. It returns the CRC the
// manifest records: the footer's CRC-32C of index ‖ aux, which with each
// block's own CRC covers the object.
func (x *Tier) put(ctx context.Context, key string, plan *Plan, progress func(int64)) (ObjectInfo, uint32, error) {
	ctx, cancel := context.WithTimeout(ctx, x.opts.UploadTimeout)
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		var w io.Writer = pw
		if progress != nil {
			w = io.MultiWriter(pw, progressWriter(progress))
		}
		_, err := plan.WriteTo(w)
		pw.CloseWithError(err)
	}()
	info, err := Upload(ctx, x.store, key, pr, plan.Size)
	pr.CloseWithError(io.ErrClosedPipe) // stop the writer if the upload gave up
	<-done
	if err != nil {
		return ObjectInfo{}, 0, err
	}
	if info.Size != plan.Size {
		return ObjectInfo{}, 0, fmt.Errorf("%w: %s holds %d bytes, %d were sent", ErrChecksum, key, info.Size, plan.Size)
	}
	// The store's checksum was compared with what was sent; read back the
	// tail to check the object is ours and whole where the store gives none.
	if info.Checksum == "" {
		tail, err := x.store.GetRange(ctx, key, plan.Size-footerSize, footerSize)
		if err != nil {
			return ObjectInfo{}, 0, err
		}
		if !bytes.Equal(tail, plan.tail[len(plan.tail)-footerSize:]) {
			return ObjectInfo{}, 0, fmt.Errorf("%w: %s: the stored footer differs from the one sent", ErrChecksum, key)
		}
	}
	return info, plan.CRC(), nil
}

type progressWriter func(int64)

func (p progressWriter) Write(b []byte) (int, error) {
	if p != nil {
		p(int64(len(b)))
	}
	return len(b), nil
}

// mirror writes the manifest to the store as manifest-<seq>.json.
func (x *Tier) mirror(ctx context.Context) error {
	_, _, err := x.mirrorAs(ctx, x.mirrorKey)
	return err
}

// mirrorAs writes the manifest to the store under key(its sequence) (a
// mirror already there under that key is the same one) and returns the
// state written and its key.
func (x *Tier) mirrorAs(ctx context.Context, key func(seq int64) string) (ManifestState, string, error) {
	st := x.m.State()
	data, err := json.Marshal(st)
	if err != nil {
		return st, "", err
	}
	k := key(st.Seq)
	if _, err := x.store.Put(ctx, k, data); err != nil && !errors.Is(err, ErrExists) {
		return st, k, err
	}
	return st, k, nil
}

// restoreFromMirror rebuilds a lost manifest from the newest valid mirror
// in the store. Uploads it never saw become orphans for collection.
func (x *Tier) restoreFromMirror(ctx context.Context) error {
	list, err := x.store.List(ctx, x.prefix+"/manifest-")
	if err != nil {
		return fmt.Errorf("tiering: listing manifest mirrors: %w", err)
	}
	for i := len(list) - 1; i >= 0; i-- {
		data, err := readAll(ctx, x.store, list[i].Key, list[i].Size)
		if err != nil {
			return err
		}
		var st ManifestState
		if json.Unmarshal(data, &st) != nil || st.Seq <= 0 {
			x.opts.Logger.Warn("skipping an unreadable manifest mirror", "key", list[i].Key)
			continue
		}
		x.opts.Logger.Info("rebuilt the manifest from the store", "key", list[i].Key, "tieredEnd", st.TieredEnd)
		return x.m.Restore(st)
	}
	return nil
}
