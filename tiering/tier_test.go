package tiering

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/leaderepoch"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/tablet"
	"github.com/seglog/seglog/tablet/tablettest"
	"github.com/seglog/seglog/vfs"
	"github.com/seglog/seglog/writerstate"
)

var quiet = slog.New(slog.DiscardHandler)

var tp = checkpoint.TopicPartition{Topic: "orders", Partition: 3}

// fixture is a data directory with one tablet written by the crash
// workload (idempotent batches and committed and aborted transactions) in
// small segments.
type fixture struct {
	dir  string
	m    *tablet.Manager
	t    *tablet.Tablet
	acks []tablettest.Ack
	now  atomic.Int64
}

func newFixture(t *testing.T, steps int) *fixture {
	f := &fixture{dir: t.TempDir()}
	f.now.Store(1_700_000_000_000)
	f.open(t)
	cfg := tablet.DefaultConfig()
	require.NoError(t, cfg.Set("segment.bytes", "6000"))
	require.NoError(t, cfg.Set("local.retention.bytes", "0"))
	require.NoError(t, cfg.Set("remote.storage.enable", "true"))
	var err error
	f.t, err = f.m.Create(tp, &cfg)
	require.NoError(t, err)
	w := tablettest.New(f.t, 0, 42, func() int64 { return f.now.Add(1000) }, func(a tablettest.Ack) error {
		f.acks = append(f.acks, a)
		return nil
	})
	require.NoError(t, w.Begin())
	for range steps {
		require.NoError(t, w.Step())
	}
	t.Cleanup(func() { f.m.Close() })
	return f
}

func (f *fixture) open(t *testing.T) {
	var err error
	f.m, err = tablet.OpenManager(vfs.OS, f.dir, tablet.ManagerOptions{
		Tablet: tablet.Options{Now: func() time.Time { return time.UnixMilli(f.now.Load()) }, Logger: quiet}})
	require.NoError(t, err)
	if tb, ok := f.m.Get(tp); ok {
		f.t = tb
	}
}

func (f *fixture) reopen(t *testing.T) {
	require.NoError(t, f.m.Close())
	f.open(t)
}

func (f *fixture) tierOpts() *Options {
	return &Options{BlockSize: 2048, Now: func() time.Time { return time.UnixMilli(f.now.Load()) },
		GracePeriod: time.Minute, Logger: quiet}
}

// everything reads the log from its start as a follower would, in reads
// of maxBytes, and returns the batches' bytes.
func everything(t *testing.T, tb *tablet.Tablet, maxBytes int) []byte {
	var out []byte
	off := tb.Offsets().LogStartOffset
	for {
		res, err := tb.Read(off, tablet.ReadOptions{MaxBytes: maxBytes, Isolation: tablet.ReadLogEnd, MinOneMessage: true})
		require.NoError(t, err, "read at %d", off)
		b, err := res.Records.AppendTo(nil)
		res.Close()
		require.NoError(t, err)
		if len(b) == 0 {
			return out
		}
		out = append(out, b...)
		for len(b) > 0 {
			batch, rest, err := record.ParseBatch(b)
			require.NoError(t, err)
			off = batch.NextOffset()
			b = rest
		}
	}
}

type consumed struct {
	Offset int64
	Key    string
	Value  string
}

func committed(t *testing.T, tb *tablet.Tablet) []consumed {
	var out []consumed
	require.NoError(t, tb.Records(tb.Offsets().LogStartOffset, tablet.ReadCommitted, func(_ record.Batch, r *record.Record) bool {
		out = append(out, consumed{r.Offset, string(r.Key), string(r.Value)})
		return true
	}))
	return out
}

func allStores(t *testing.T) map[string]func() ObjectStore {
	return map[string]func() ObjectStore{
		"file": func() ObjectStore {
			s, err := OpenFileStore(t.TempDir())
			require.NoError(t, err)
			return s
		},
		"gofakes3": func() ObjectStore { return s3Store(t, s3testFake(t)) },
		"versitygw": func() ObjectStore {
			return s3Store(t, s3testVersity(t))
		},
	}
}

// The acceptance check: after tiering and local deletion every record is
// read back with its original offsets, byte for byte and record for
// record, read-committed included, and every object passes the
// independent format check.
func TestTierEndToEnd(t *testing.T) {
	ctx := context.Background()
	for name, mk := range allStores(t) {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, 150)
			require.NoError(t, f.t.Flush())
			before := everything(t, f.t, 1<<20)
			wantRecs := committed(t, f.t)
			times := []int64{1_700_000_000_001, 1_700_000_040_000, 1_700_000_120_000}
			var byTime []tablet.TimestampOffset
			for _, ts := range times {
				got, err := f.t.OffsetForTimestamp(ts)
				require.NoError(t, err)
				byTime = append(byTime, got)
			}
			segsBefore := len(f.t.Segments())
			require.Greater(t, segsBefore, 10)
			store := mk()

			x, err := Open(ctx, f.t, tp.Topic, tp.Partition, store, f.tierOpts())
			require.NoError(t, err)
			up, err := x.Upload(ctx, nil)
			require.NoError(t, err)
			require.Len(t, up.Objects, segsBefore-1, "every sealed segment")
			require.Equal(t, f.t.Segments()[len(f.t.Segments())-1].BaseOffset, x.Manifest().TieredEnd())

			for _, e := range x.Manifest().Visible() {
				obj, err := readAll(ctx, store, e.Key, e.Size)
				require.NoError(t, err)
				data, base, end := independentCheck(t, obj)
				require.Equal(t, e.Base, base)
				require.Equal(t, e.End, end)
				require.True(t, bytes.Contains(before, data), "object %s holds the log's bytes", e.Key)
			}

			del, err := x.DeleteLocal()
			require.NoError(t, err)
			require.Equal(t, segsBefore-1, del.Segments)
			off := f.t.Offsets()
			require.Equal(t, x.Manifest().TieredEnd(), off.LocalLogStartOffset)
			require.Equal(t, int64(0), off.LogStartOffset)

			requireSameBytes(t, before, everything(t, f.t, 1<<20), "byte for byte")
			requireSameBytes(t, before, everything(t, f.t, 1), "batch by batch (maxBytes below one batch)")
			require.Equal(t, wantRecs, committed(t, f.t), "record for record, read-committed")
			_, err = tablettest.Check(f.t, f.acks)
			require.NoError(t, err)

			// Every offset's read lands on the batch holding it.
			for o := int64(0); o < off.LocalLogStartOffset; o += 7 {
				res, err := f.t.Read(o, tablet.ReadOptions{MaxBytes: 1, Isolation: tablet.ReadLogEnd, MinOneMessage: true})
				require.NoError(t, err)
				b, _ := res.Records.AppendTo(nil)
				res.Close()
				batch, _, err := record.ParseBatch(b)
				require.NoError(t, err)
				require.True(t, batch.BaseOffset() <= o && o <= batch.LastOffset(), "offset %d in [%d, %d]", o, batch.BaseOffset(), batch.LastOffset())
			}
			// Without MinOneMessage, a batch above maxBytes is incomplete.
			res, err := f.t.Read(0, tablet.ReadOptions{MaxBytes: 1, Isolation: tablet.ReadLogEnd})
			require.NoError(t, err)
			require.True(t, res.FirstEntryIncomplete)
			require.Zero(t, res.Records.Size())
			res.Close()

			// By timestamp: the same answers as before deletion, for times
			// in the tier and locally.
			for i, ts := range times {
				got, err := f.t.OffsetForTimestamp(ts)
				require.NoError(t, err)
				require.Equal(t, byTime[i], got, "timestamp %d", ts)
			}

			// After a restart the tier is attached again and reads go on.
			require.NoError(t, x.Close())
			f.reopen(t)
			x, err = Open(ctx, f.t, tp.Topic, tp.Partition, store, f.tierOpts())
			require.NoError(t, err)
			defer x.Close()
			require.Equal(t, int64(0), f.t.Offsets().LogStartOffset)
			requireSameBytes(t, before, everything(t, f.t, 64<<10))
			require.Equal(t, wantRecs, committed(t, f.t))
		})
	}
}

func TestTierOffsetForTimestamp(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, 80)
	var want []tablet.TimestampOffset
	var times []int64
	for ts := int64(1_700_000_000_000); ts < f.now.Load()+2000; ts += 3000 {
		got, err := f.t.OffsetForTimestamp(ts)
		if errors.Is(err, tablet.ErrNoOffsetForTimestamp) {
			got = tablet.TimestampOffset{Offset: -1}
		} else {
			require.NoError(t, err)
		}
		want = append(want, got)
		times = append(times, ts)
	}
	_, x := f.fileTier(t)
	defer x.Close()
	_, err := x.Upload(ctx, nil)
	require.NoError(t, err)
	_, err = x.DeleteLocal()
	require.NoError(t, err)
	require.Greater(t, f.t.Offsets().LocalLogStartOffset, int64(0))
	for i, ts := range times {
		got, err := f.t.OffsetForTimestamp(ts)
		if errors.Is(err, tablet.ErrNoOffsetForTimestamp) {
			got = tablet.TimestampOffset{Offset: -1}
		} else {
			require.NoError(t, err)
		}
		require.Equal(t, want[i], got, "timestamp %d", ts)
	}
}

// faultStore wraps a store and fails, tears or hangs the operations its
// fields choose.
type faultStore struct {
	ObjectStore
	mu       sync.Mutex
	failPuts int  // the next n puts fail with a retriable-looking error
	tearPuts int  // the next n puts store half the body and say it is whole
	hangPuts int  // the next n puts hang until their context ends
	lostResp int  // the next n puts succeed but answer with an error
	down     bool // every call fails
	puts     int
}

var errStore = errors.New("store: 503 Slow Down")

func (s *faultStore) take(n *int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if *n > 0 {
		*n--
		return true
	}
	return false
}

func (s *faultStore) isDown() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.down
}

func (s *faultStore) Put(ctx context.Context, key string, body []byte) (ObjectInfo, error) {
	s.mu.Lock()
	s.puts++
	s.mu.Unlock()
	switch {
	case s.isDown() || s.take(&s.failPuts):
		return ObjectInfo{}, errStore
	case s.take(&s.tearPuts):
		info, err := s.ObjectStore.Put(ctx, key, body[:len(body)/2])
		info.Checksum = ""
		return info, err
	case s.take(&s.hangPuts):
		<-ctx.Done()
		return ObjectInfo{}, ctx.Err()
	case s.take(&s.lostResp):
		if _, err := s.ObjectStore.Put(ctx, key, body); err != nil {
			return ObjectInfo{}, err
		}
		return ObjectInfo{}, errors.New("store: connection reset reading the response")
	}
	return s.ObjectStore.Put(ctx, key, body)
}

func (s *faultStore) GetRange(ctx context.Context, key string, off int64, n int) ([]byte, error) {
	if s.isDown() {
		return nil, errStore
	}
	return s.ObjectStore.GetRange(ctx, key, off, n)
}

func (s *faultStore) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	if s.isDown() {
		return nil, errStore
	}
	return s.ObjectStore.List(ctx, prefix)
}

func keysOf(t *testing.T, s ObjectStore, suffix string) []string {
	list, err := s.List(context.Background(), "")
	require.NoError(t, err)
	var out []string
	for _, o := range list {
		if filepath.Ext(o.Key) == suffix {
			out = append(out, o.Key)
		}
	}
	return out
}

// Failures of docs/tiering.md §7 with a fault-injecting store: a lost PUT
// answer, torn objects, retries after ABORT, a hanging upload, an outage.
func TestTierStoreFaults(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, 60)
	inner, err := OpenFileStore(t.TempDir())
	require.NoError(t, err)
	fs := &faultStore{ObjectStore: inner}
	opts := f.tierOpts()
	opts.UploadTimeout = 200 * time.Millisecond
	x, err := Open(ctx, f.t, tp.Topic, tp.Partition, fs, opts)
	require.NoError(t, err)
	defer x.Close()
	nsegs := len(f.t.Segments()) - 1
	require.Greater(t, nsegs, 6)

	// Segments 1–3 commit, the 4th fails and is retried later.
	fs.mu.Lock()
	fs.failPuts = 0
	fs.mu.Unlock()
	for i := 0; i < 3; i++ {
		_, ok, err := x.uploadNext(ctx, nil)
		require.NoError(t, err)
		require.True(t, ok)
	}
	end3 := x.Manifest().TieredEnd()
	fs.failPuts = 1
	_, err = x.Upload(ctx, nil)
	require.ErrorIs(t, err, errStore)
	require.Equal(t, end3, x.Manifest().TieredEnd(), "the tiered end never moves on a failure")

	// A PUT that succeeds but whose answer is lost: the retry uses a new
	// key, and the old one is never visible, then collected.
	fs.lostResp = 1
	_, err = x.Upload(ctx, nil)
	require.Error(t, err)
	require.Equal(t, end3, x.Manifest().TieredEnd())
	// A torn body is refused at commit.
	fs.tearPuts = 1
	_, err = x.Upload(ctx, nil)
	require.ErrorIs(t, err, ErrChecksum)
	// An upload that hangs is cut by its timeout.
	fs.hangPuts = 1
	_, err = x.Upload(ctx, nil)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, end3, x.Manifest().TieredEnd())

	// A long outage: nothing is deleted locally that is not tiered.
	fs.mu.Lock()
	fs.down = true
	fs.mu.Unlock()
	for range 3 {
		_, err = x.Upload(ctx, nil)
		require.Error(t, err)
	}
	_, err = x.DeleteLocal()
	require.NoError(t, err)
	require.Equal(t, end3, f.t.Offsets().LocalLogStartOffset, "only the tiered segments went")
	eligible, _ := x.Untiered()
	require.Positive(t, eligible, "the growth is reported")
	fs.mu.Lock()
	fs.down = false
	fs.mu.Unlock()

	// Back up: everything goes, under keys never used before.
	up, err := x.Upload(ctx, nil)
	require.NoError(t, err)
	require.Len(t, up.Objects, nsegs-3)
	seen := map[string]bool{}
	for _, e := range x.Manifest().Visible() {
		require.False(t, seen[e.Key])
		seen[e.Key] = true
	}
	// Every aborted key was deleted; the store holds only visible objects
	// (the lost-response key was deleted on abort as well).
	require.ElementsMatch(t, keys(x.Manifest().Visible()), keysOf(t, inner, ".seg"))
	for _, e := range x.Manifest().State().Objects {
		require.Equal(t, StateCommitted, e.State)
	}
}

func keys(es []Entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Key)
	}
	return out
}

// Crash points of the upload protocol (section 7 case 1): the manifest and
// the store are left as a crash at each point would leave them, then a
// new process opens the tier. No offset is lost, no partial object is
// visible, the tiered end never goes back.
func TestTierCrashPoints(t *testing.T) {
	ctx := context.Background()
	for _, point := range []string{"before-prepare", "after-prepare", "mid-put", "mid-multipart", "after-put", "after-commit", "mid-local-delete"} {
		t.Run(point, func(t *testing.T) {
			f := newFixture(t, 40)
			before := everything(t, f.t, 1<<20)
			store, x := f.fileTier(t)
			_, ok, err := x.uploadNext(ctx, nil) // one committed object first
			require.NoError(t, err)
			require.True(t, ok)
			end := x.Manifest().TieredEnd()
			segs := f.t.Segments()
			var next int64
			for i, s := range segs {
				if s.BaseOffset == end {
					next = segs[i+1].BaseOffset
				}
			}
			id := newID()
			key := x.objectKey(end, id)
			switch point {
			case "before-prepare":
			case "after-prepare":
				require.NoError(t, x.Manifest().Prepare(id, key, end, next, 0))
			case "mid-put":
				require.NoError(t, x.Manifest().Prepare(id, key, end, next, 0))
				_, err := store.Put(ctx, key, []byte("half an obj")) // a store that kept a torn body
				require.NoError(t, err)
			case "mid-multipart":
				require.NoError(t, x.Manifest().Prepare(id, key, end, next, 0))
				up, err := store.CreateMultipart(ctx, key)
				require.NoError(t, err)
				_, err = store.UploadPart(ctx, key, up, 1, make([]byte, 100))
				require.NoError(t, err)
			case "after-put":
				require.NoError(t, x.Manifest().Prepare(id, key, end, next, 0))
				s, err := f.t.Sealed(end)
				require.NoError(t, err)
				p, err := PlanObject(SegmentSource{Log: s.Log, LogSize: s.LogSize, BaseOffset: s.Base, EndOffset: s.Next})
				require.NoError(t, err)
				var buf bytes.Buffer
				_, err = p.WriteTo(&buf)
				s.Close()
				require.NoError(t, err)
				_, err = store.Put(ctx, key, buf.Bytes())
				require.NoError(t, err)
			case "after-commit":
				_, ok, err := x.uploadNext(ctx, nil)
				require.NoError(t, err)
				require.True(t, ok)
				end = x.Manifest().TieredEnd()
			case "mid-local-delete":
				_, err := x.Upload(ctx, nil)
				require.NoError(t, err)
				end = x.Manifest().TieredEnd()
				// A deletion that renamed the files .deleted and stopped.
				_, err = f.t.DeleteLocalBefore(next)
				require.NoError(t, err)
			}
			require.NoError(t, x.Close())
			f.reopen(t)
			x, err = Open(ctx, f.t, tp.Topic, tp.Partition, store, f.tierOpts())
			require.NoError(t, err)
			defer x.Close()
			require.Equal(t, end, x.Manifest().TieredEnd(), "the tiered end never goes back")
			for _, e := range x.Manifest().State().Objects {
				require.Contains(t, []State{StateCommitted}, e.State, "a prepared upload is aborted and its key deleted at restart")
			}
			ups, err := store.ListMultipart(ctx, "")
			require.NoError(t, err)
			require.Empty(t, ups, "a multipart upload of an aborted object is aborted")
			require.ElementsMatch(t, keys(x.Manifest().Visible()), keysOf(t, store, ".seg"), "no partial object left")
			requireSameBytes(t, before, everything(t, f.t, 1<<20), "no offset lost")
			// And tiering goes on to the end.
			_, err = x.Upload(ctx, nil)
			require.NoError(t, err)
			_, err = x.DeleteLocal()
			require.NoError(t, err)
			requireSameBytes(t, before, everything(t, f.t, 1<<20))
		})
	}
}

// Retention retires the oldest objects, moves the log start, deletes them
// after the grace period; a reader holding an object's data finishes.
func TestTierRetention(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, 60)
	store, err := OpenFileStore(t.TempDir())
	require.NoError(t, err)
	opts := f.tierOpts()
	x, err := Open(ctx, f.t, tp.Topic, tp.Partition, store, opts)
	require.NoError(t, err)
	defer x.Close()
	_, err = x.Upload(ctx, nil)
	require.NoError(t, err)
	_, err = x.DeleteLocal()
	require.NoError(t, err)
	vis := x.Manifest().Visible()
	var total int64
	for _, e := range vis {
		total += e.Size
	}
	// A reader in the middle of the oldest object.
	res, err := f.t.Read(vis[0].Base, tablet.ReadOptions{MaxBytes: 1 << 20, Isolation: tablet.ReadLogEnd})
	require.NoError(t, err)

	setConfig(t, f.t, "retention.bytes", fmt.Sprint(total-vis[0].Size-vis[1].Size+f.t.Segments()[0].Size))
	rr, err := x.ApplyRetention(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, rr.Retired)
	require.Zero(t, rr.Deleted, "not before the grace period")
	require.Equal(t, vis[2].Base, f.t.Offsets().LogStartOffset)
	_, err = f.t.Read(vis[0].Base, tablet.ReadOptions{MaxBytes: 1, Isolation: tablet.ReadLogEnd})
	require.ErrorIs(t, err, tablet.ErrOffsetOutOfRange)
	// The reader holding the retired object's bytes still has them.
	b, err := res.Records.AppendTo(nil)
	require.NoError(t, err)
	batch, _, err := record.ParseBatch(b)
	require.NoError(t, err)
	require.NoError(t, batch.Verify())
	res.Close()

	f.now.Add(2 * time.Minute.Milliseconds())
	rr, err = x.ApplyRetention(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, rr.Deleted)
	require.ElementsMatch(t, keys(x.Manifest().Visible()), keysOf(t, store, ".seg"))

	// Time retention removes everything older than retention.ms.
	setConfig(t, f.t, "retention.bytes", "-1")
	setConfig(t, f.t, "retention.ms", "1")
	f.now.Add(time.Hour.Milliseconds())
	rr, err = x.ApplyRetention(ctx)
	require.NoError(t, err)
	require.Equal(t, len(vis)-2, rr.Retired)
	require.Equal(t, x.Manifest().TieredEnd(), f.t.Offsets().LogStartOffset)
}

// A lost local manifest is rebuilt from the store's mirror; an object
// uploaded after the last mirror becomes an orphan for collection, which
// deletes only unreferenced keys past the grace period.
func TestTierManifestRebuildAndGC(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, 40)
	before := everything(t, f.t, 1<<20)
	store, x := f.fileTier(t)
	_, err := x.Upload(ctx, nil)
	require.NoError(t, err)
	want := x.Manifest().State()
	// An orphan: a key of this tablet no manifest names (an upload whose
	// PREPARE was lost with the manifest).
	orphan := x.objectKey(999_999, newID())
	_, err = store.Put(ctx, orphan, []byte("orphan"))
	require.NoError(t, err)
	other := "abcd/other-0/00000000000000000000-x.seg" // another tablet's key
	_, err = store.Put(ctx, other, []byte("not ours"))
	require.NoError(t, err)
	require.NoError(t, x.Close())
	require.NoError(t, f.m.Close())
	require.NoError(t, removeAll(filepath.Join(f.dir, tp.String(), ManifestDir)))
	f.open(t)

	x, err = Open(ctx, f.t, tp.Topic, tp.Partition, store, f.tierOpts())
	require.NoError(t, err)
	defer x.Close()
	require.Equal(t, want.TieredEnd, x.Manifest().TieredEnd())
	require.Equal(t, keys(want.Objects), keys(x.Manifest().Visible()))
	_, err = x.DeleteLocal()
	require.NoError(t, err)
	requireSameBytes(t, before, everything(t, f.t, 1<<20))

	g, err := x.CollectGarbage(ctx)
	require.NoError(t, err)
	require.Zero(t, g.Orphans, "not before the grace period")
	f.now.Add(time.Hour.Milliseconds())
	x.opts.Now = func() time.Time { return time.Now().Add(time.Hour) }
	g, err = x.CollectGarbage(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, g.Orphans)
	_, err = store.Head(ctx, orphan)
	require.ErrorIs(t, err, ErrNotFound)
	_, err = store.Head(ctx, other)
	require.NoError(t, err, "another tablet's key is never touched")
	for _, e := range x.Manifest().Visible() {
		_, err := store.Head(ctx, e.Key)
		require.NoError(t, err, "a committed key is never collected")
	}
	requireSameBytes(t, before, everything(t, f.t, 1<<20))
}

// Append, roll, tier, delete and read concurrently (run under -race).
func TestTierConcurrent(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, 10)
	_, x := f.fileTier(t)
	defer x.Close()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var readErr atomic.Value
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				off := f.t.Offsets()
				res, err := f.t.Read(off.LogStartOffset, tablet.ReadOptions{MaxBytes: 64 << 10, Isolation: tablet.ReadCommitted})
				if err != nil {
					if !errors.Is(err, tablet.ErrOffsetOutOfRange) {
						readErr.Store(err)
					}
					continue
				}
				if _, err := res.Records.WriteTo(io.Discard); err != nil {
					readErr.Store(err)
				}
				res.Close()
			}
		}()
	}
	w := tablettest.New(f.t, 1, 7, func() int64 { return f.now.Add(1000) }, func(a tablettest.Ack) error {
		f.acks = append(f.acks, a)
		return nil
	})
	require.NoError(t, w.Begin())
	for i := range 60 {
		require.NoError(t, w.Step())
		if i%5 == 0 {
			_, err := x.Step(ctx)
			require.NoError(t, err)
		}
	}
	close(stop)
	wg.Wait()
	if err := readErr.Load(); err != nil {
		t.Fatal(err)
	}
	_, err := x.Step(ctx)
	require.NoError(t, err)
	require.NoError(t, tablettest.AbortPrevious(f.t, 2, f.now.Add(1000), true))
	_, err = tablettest.Check(f.t, f.acks)
	require.NoError(t, err)
	require.Greater(t, f.t.Offsets().LocalLogStartOffset, int64(0))
}

func setConfig(t *testing.T, tb *tablet.Tablet, key, value string) {
	cfg := tb.Config()
	require.NoError(t, cfg.Set(key, value))
	require.NoError(t, tb.SetConfig(cfg))
}

// A tablet whose local segments are all gone (a new disk) starts from the
// tier: at its end, with the producers' state from the newest object's
// snapshot, and every tiered record readable.
func TestTierWriterStateFromSnapshot(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, 30)
	// A second leader epoch, so the cache the tier restores has two.
	require.NoError(t, f.t.SetLeaderEpoch(3))
	w := tablettest.New(f.t, 1, 43, func() int64 { return f.now.Add(1000) }, func(a tablettest.Ack) error {
		f.acks = append(f.acks, a)
		return nil
	})
	require.NoError(t, w.Begin())
	for range 30 {
		require.NoError(t, w.Step())
	}
	store, x := f.fileTier(t)
	_, err := x.Upload(ctx, nil)
	require.NoError(t, err)
	end := x.Manifest().TieredEnd()
	var wantEpochs []leaderepoch.Entry
	for _, e := range f.t.LeaderEpochs() {
		if e.StartOffset < end {
			wantEpochs = append(wantEpochs, e)
		}
	}
	require.Len(t, wantEpochs, 2)
	before := everything(t, f.t, 1<<20)
	// What the producers' state was at the tiered end.
	var tiered []byte
	for b := before; len(b) > 0; {
		batch, rest, err := record.ParseBatch(b)
		require.NoError(t, err)
		if batch.BaseOffset() >= end {
			break
		}
		tiered = append(tiered, batch.Bytes()...)
		b = rest
	}
	require.NoError(t, x.Close())
	require.NoError(t, f.m.Close())
	require.NoError(t, removeAll(f.dir))

	f.open(t)
	cfg := tablet.DefaultConfig()
	require.NoError(t, cfg.Set("segment.bytes", "6000"))
	f.t, err = f.m.Create(tp, &cfg)
	require.NoError(t, err)
	x, err = Open(ctx, f.t, tp.Topic, tp.Partition, store, f.tierOpts())
	require.NoError(t, err)
	defer x.Close()
	off := f.t.Offsets()
	require.Equal(t, end, off.LogEndOffset)
	require.Equal(t, end, off.LocalLogStartOffset)
	require.Zero(t, off.LogStartOffset)
	requireSameBytes(t, tiered, everything(t, f.t, 1<<20))
	require.Equal(t, wantEpochs, f.t.LeaderEpochs(), "the epochs of every object")

	// The idempotent producer's state came back: its next sequence is
	// accepted, a sequence it already passed is not.
	var idem *tablettest.Ack
	for i := range f.acks {
		if a := f.acks[i]; a.Kind == 'i' && a.Last < end {
			idem = &f.acks[i]
		}
	}
	require.NotNil(t, idem)
	p, ok := findProducer(f.t.Producers(), tablettest.IdempotentPID)
	require.True(t, ok, "the producer is known again")
	last := p.Batches[len(p.Batches)-1]
	require.Equal(t, idem.Last, last.LastOffset)
	b := record.NewBuilder(record.None)
	b.SetProducer(tablettest.IdempotentPID, p.Epoch, last.LastSeq+1)
	require.NoError(t, b.Append(record.Record{Timestamp: f.now.Load(), Key: []byte("k"), Value: []byte("v")}))
	batch, err := b.Build()
	require.NoError(t, err)
	res, err := f.t.Append(batch.Bytes(), tablet.AppendOptions{})
	require.NoError(t, err)
	require.Equal(t, end, res.FirstOffset)
	b.Reset()
	b.SetProducer(tablettest.IdempotentPID, p.Epoch, last.LastSeq+5)
	require.NoError(t, b.Append(record.Record{Timestamp: f.now.Load(), Key: []byte("k"), Value: []byte("v")}))
	batch, err = b.Build()
	require.NoError(t, err)
	_, err = f.t.Append(batch.Bytes(), tablet.AppendOptions{})
	require.Error(t, err, "a gap in sequences is refused: the state is there")
}

func findProducer(ps []writerstate.Entry, pid int64) (writerstate.Entry, bool) {
	for _, p := range ps {
		if p.ProducerID == pid {
			return p, true
		}
	}
	return writerstate.Entry{}, false
}

// A corrupt object (a flipped bit in a block, a bad footer) is an error at
// read time, never served; data still local is read locally.
func TestTierCorruptObjectAtRead(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, 40)
	store, x := f.fileTier(t)
	defer x.Close()
	_, err := x.Upload(ctx, nil)
	require.NoError(t, err)
	vis := x.Manifest().Visible()
	// Before local deletion the local copy serves every read.
	flip := func(e Entry, at int64) {
		p := filepath.Join(store.Dir(), filepath.FromSlash(e.Key))
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		b[at] ^= 0x40
		require.NoError(t, os.WriteFile(p, b, 0o640))
	}
	flip(vis[0], 30)             // inside the first block's data
	flip(vis[1], vis[1].Size-10) // the footer's magic
	before := everything(t, f.t, 1<<20)
	_, err = x.DeleteLocal()
	require.NoError(t, err)
	_, err = f.t.Read(vis[0].Base, tablet.ReadOptions{MaxBytes: 1 << 20, Isolation: tablet.ReadLogEnd})
	var ce *seglog.CorruptionError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, vis[0].Key, ce.Path)
	_, err = f.t.Read(vis[1].Base, tablet.ReadOptions{MaxBytes: 1 << 20, Isolation: tablet.ReadLogEnd})
	require.ErrorAs(t, err, &ce)
	require.Equal(t, vis[1].Key, ce.Path)
	// Other objects read fine.
	res, err := f.t.Read(vis[2].Base, tablet.ReadOptions{MaxBytes: 1 << 20, Isolation: tablet.ReadLogEnd})
	require.NoError(t, err)
	b, err := res.Records.AppendTo(nil)
	res.Close()
	require.NoError(t, err)
	require.True(t, bytes.Contains(before, b))
}

// The background service tiers every tablet, bounded, and reports untiered
// bytes; through a store outage nothing untiered is deleted and the
// growth shows in the metric.
func TestTierService(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, 40)
	cfg := f.t.Config()
	other, err := f.m.Create(checkpoint.TopicPartition{Topic: "other", Partition: 0}, &cfg)
	require.NoError(t, err)
	for i := range 200 {
		_, err := other.AppendRecords([]record.Record{{Timestamp: f.now.Load(), Value: bytes.Repeat([]byte{byte(i)}, 300)}}, record.None, tablet.AppendOptions{})
		require.NoError(t, err)
	}
	inner, err := OpenFileStore(t.TempDir())
	require.NoError(t, err)
	fs := &faultStore{ObjectStore: inner}
	svc := NewService(f.m, fs, &ServiceOptions{Tier: *f.tierOpts(), Concurrency: 1})
	defer svc.Close()
	res, err := svc.RunOnce(ctx, true)
	require.NoError(t, err)
	require.Len(t, res, 2)
	for _, tb := range f.m.Tablets() {
		x, err := svc.Tier(ctx, tb)
		require.NoError(t, err)
		require.Equal(t, x.Manifest().TieredEnd(), tb.Offsets().LocalLogStartOffset, "%s: tiered and deleted locally", tb.TopicPartition())
		eligible, total := x.Untiered()
		require.Zero(t, eligible)
		require.Equal(t, tb.Segments()[len(tb.Segments())-1].Size, total, "only the active segment is untiered")
	}
	fs.mu.Lock()
	fs.down = true
	fs.mu.Unlock()
	localStart := other.Offsets().LocalLogStartOffset
	for i := range 200 {
		_, err := other.AppendRecords([]record.Record{{Timestamp: f.now.Load(), Value: bytes.Repeat([]byte{byte(i)}, 300)}}, record.None, tablet.AppendOptions{})
		require.NoError(t, err)
	}
	_, err = svc.RunOnce(ctx, false)
	require.ErrorIs(t, err, errStore)
	require.Equal(t, localStart, other.Offsets().LocalLogStartOffset, "nothing untiered is deleted")
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(svc.Collector()))
	got, err := reg.Gather()
	require.NoError(t, err)
	var eligible float64
	var failures float64
	for _, mf := range got {
		for _, m := range mf.GetMetric() {
			switch mf.GetName() {
			case "seglog_tier_eligible_bytes":
				eligible += m.GetGauge().GetValue()
			case "seglog_tier_step_failures_total":
				failures = m.GetCounter().GetValue()
			}
		}
	}
	require.Positive(t, eligible, "the growth is reported")
	require.Positive(t, failures)
}

// A service given its store's URL binds each tablet it commits to (so
// every later opener attaches the tier), and refuses a tablet bound to
// another store with objects there.
func TestTierServiceBindsItsStore(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, 40)
	dir := t.TempDir()
	store, err := OpenFileStore(dir)
	require.NoError(t, err)
	svc := NewService(f.m, store, &ServiceOptions{Tier: *f.tierOpts(), StoreURL: "file://" + dir})
	_, err = svc.RunOnce(ctx, false)
	require.NoError(t, err)
	u, ok, err := StoreURL(vfs.OS, f.t.Dir())
	require.NoError(t, err)
	require.True(t, ok, "bound once an object is committed")
	require.Equal(t, "file://"+dir, u)
	require.NoError(t, svc.Close())

	otherDir := t.TempDir()
	other, err := OpenFileStore(otherDir)
	require.NoError(t, err)
	svc2 := NewService(f.m, other, &ServiceOptions{Tier: *f.tierOpts(), StoreURL: "file://" + otherDir})
	defer svc2.Close()
	_, err = svc2.RunOnce(ctx, false)
	require.ErrorIs(t, err, ErrOtherStore)
	names, err := os.ReadDir(otherDir)
	require.NoError(t, err)
	require.Empty(t, names, "nothing written to the other store")
}

// dyingStore fails every call from its dieAt-th on: the process (or the
// network) died there.
type dyingStore struct {
	ObjectStore
	mu    sync.Mutex
	calls int
	dieAt int
}

func (s *dyingStore) ok() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.dieAt >= 0 && s.calls > s.dieAt {
		return errStore
	}
	return nil
}

func (s *dyingStore) Put(ctx context.Context, key string, body []byte) (ObjectInfo, error) {
	if err := s.ok(); err != nil {
		return ObjectInfo{}, err
	}
	return s.ObjectStore.Put(ctx, key, body)
}

func (s *dyingStore) CreateMultipart(ctx context.Context, key string) (string, error) {
	if err := s.ok(); err != nil {
		return "", err
	}
	return s.ObjectStore.CreateMultipart(ctx, key)
}

func (s *dyingStore) UploadPart(ctx context.Context, key, id string, n int32, body []byte) (PartInfo, error) {
	if err := s.ok(); err != nil {
		return PartInfo{}, err
	}
	return s.ObjectStore.UploadPart(ctx, key, id, n, body)
}

func (s *dyingStore) CompleteMultipart(ctx context.Context, key, id string, parts []PartInfo) (ObjectInfo, error) {
	if err := s.ok(); err != nil {
		return ObjectInfo{}, err
	}
	return s.ObjectStore.CompleteMultipart(ctx, key, id, parts)
}

func (s *dyingStore) AbortMultipart(ctx context.Context, key, id string) error {
	if err := s.ok(); err != nil {
		return err
	}
	return s.ObjectStore.AbortMultipart(ctx, key, id)
}

func (s *dyingStore) ListMultipart(ctx context.Context, prefix string) ([]MultipartUpload, error) {
	if err := s.ok(); err != nil {
		return nil, err
	}
	return s.ObjectStore.ListMultipart(ctx, prefix)
}

func (s *dyingStore) GetRange(ctx context.Context, key string, off int64, n int) ([]byte, error) {
	if err := s.ok(); err != nil {
		return nil, err
	}
	return s.ObjectStore.GetRange(ctx, key, off, n)
}

func (s *dyingStore) Head(ctx context.Context, key string) (ObjectInfo, error) {
	if err := s.ok(); err != nil {
		return ObjectInfo{}, err
	}
	return s.ObjectStore.Head(ctx, key)
}

func (s *dyingStore) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	if err := s.ok(); err != nil {
		return nil, err
	}
	return s.ObjectStore.List(ctx, prefix)
}

func (s *dyingStore) Delete(ctx context.Context, key string) error {
	if err := s.ok(); err != nil {
		return err
	}
	return s.ObjectStore.Delete(ctx, key)
}

// Kill points around every store call and every manifest fsync (section 7
// case 1): a life of tiering (upload, local deletion, retention, garbage
// collection) dies at the n-th store call, or at the n-th manifest
// operation with the unsynced part of the manifest lost; the next life
// opens the tier again on a healthy store. No offset is lost, no partial
// object is visible, the tiered end never goes back, and once the grace
// period has passed the store holds exactly the visible objects.
func TestTierKillPoints(t *testing.T) {
	ctx := context.Background()
	life := func(t *testing.T, f *fixture, store ObjectStore, fsys vfs.FS) (int64, error) {
		opts := f.tierOpts()
		opts.FS = fsys
		x, err := Open(ctx, f.t, tp.Topic, tp.Partition, store, opts)
		if err != nil {
			return 0, err
		}
		defer x.Close()
		_, err = x.Step(ctx)
		end := x.Manifest().TieredEnd()
		if err == nil {
			_, err = x.CollectGarbage(ctx)
		}
		return end, err
	}
	check := func(t *testing.T, f *fixture, inner ObjectStore, fsys vfs.FS, before []byte, acked int64) {
		// The next life: the process restarts (a manifest failure failed the
		// tablet, whose close then reports it).
		_ = f.m.Close()
		f.open(t)
		f.now.Add(time.Hour.Milliseconds())
		opts := f.tierOpts()
		opts.FS = fsys
		// Past the grace period by the store's clock (the objects' times);
		// retention by time is off, as the records are from the fixture's
		// clock.
		setConfig(t, f.t, "retention.ms", "-1")
		opts.Now = func() time.Time { return time.Now().Add(2 * time.Hour) }
		x, err := Open(ctx, f.t, tp.Topic, tp.Partition, inner, opts)
		require.NoError(t, err)
		defer x.Close()
		require.GreaterOrEqual(t, x.Manifest().TieredEnd(), acked, "the tiered end never goes back")
		_, err = x.Step(ctx)
		require.NoError(t, err)
		_, err = x.CollectGarbage(ctx)
		require.NoError(t, err)
		requireSameBytes(t, before, everything(t, f.t, 1<<20), "no offset lost")
		require.ElementsMatch(t, keys(x.Manifest().Visible()), keysOf(t, inner, ".seg"), "no partial or orphan object; manifest %+v", x.Manifest().State())
		for _, e := range x.Manifest().Visible() {
			b, err := readAll(ctx, inner, e.Key, e.Size)
			require.NoError(t, err)
			_, err = Verify(e.Key, b)
			require.NoError(t, err)
		}
	}
	for dieAt := 0; dieAt < 40; dieAt += 1 + dieAt/8 {
		t.Run(fmt.Sprintf("store-call-%d", dieAt), func(t *testing.T) {
			f := newFixture(t, 25)
			before := everything(t, f.t, 1<<20)
			inner, err := OpenFileStore(t.TempDir())
			require.NoError(t, err)
			mem := durableDirs(t, f.t.Dir())
			acked, _ := life(t, f, &dyingStore{ObjectStore: inner, dieAt: dieAt}, mem)
			check(t, f, inner, mem.Crash(vfs.CrashKeepAll, 0), before, acked)
		})
	}
	for n := 0; n < 40; n += 1 + n/8 {
		t.Run(fmt.Sprintf("manifest-op-%d", n), func(t *testing.T) {
			f := newFixture(t, 25)
			before := everything(t, f.t, 1<<20)
			inner, err := OpenFileStore(t.TempDir())
			require.NoError(t, err)
			mem := durableDirs(t, f.t.Dir())
			in := vfs.NewInjector(mem)
			in.Add(vfs.Rule{Nth: n, Sticky: true})
			acked, _ := life(t, f, inner, in)
			check(t, f, inner, mem.Crash(vfs.CrashDropAll, uint64(n)), before, acked)
		})
	}
}

// requireSameBytes compares logs without printing them.
func requireSameBytes(t *testing.T, want, got []byte, msg ...any) {
	t.Helper()
	if !bytes.Equal(want, got) {
		n := 0
		for n < min(len(want), len(got)) && want[n] == got[n] {
			n++
		}
		t.Fatalf("%v: %d bytes, want %d; they differ from byte %d", fmt.Sprint(msg...), len(got), len(want), n)
	}
}

// durableDirs returns a simulated filesystem holding dir and its parents,
// durably, as a real tablet directory is.
func durableDirs(t *testing.T, dir string) *vfs.MemFS {
	mem := vfs.NewMem()
	require.NoError(t, mem.MkdirAll(dir, 0o750))
	for d := dir; ; d = filepath.Dir(d) {
		require.NoError(t, mem.SyncDir(d))
		if d == filepath.Dir(d) {
			return mem
		}
	}
}

// fileTier opens the fixture's tier on a new file store.
func (f *fixture) fileTier(t *testing.T) (*FileStore, *Tier) {
	store, err := OpenFileStore(t.TempDir())
	require.NoError(t, err)
	x, err := Open(context.Background(), f.t, tp.Topic, tp.Partition, store, f.tierOpts())
	require.NoError(t, err)
	return store, x
}

// A manifest that cannot be written fails the tier and the tablet: an
// upload's outcome is never left unknown while the tablet goes on.
func TestTierManifestFailureIsFatal(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, 30)
	store, err := OpenFileStore(t.TempDir())
	require.NoError(t, err)
	in := vfs.NewInjector(durableDirs(t, f.t.Dir()))
	opts := f.tierOpts()
	opts.FS = in
	x, err := Open(ctx, f.t, tp.Topic, tp.Partition, store, opts)
	require.NoError(t, err)
	defer x.Close()
	in.Add(vfs.Rule{Ops: vfs.OpSync, From: true})
	_, err = x.Upload(ctx, nil)
	require.ErrorIs(t, err, ErrManifestFailed)
	_, err = x.Upload(ctx, nil)
	require.ErrorIs(t, err, ErrManifestFailed, "the tier stays failed")
	_, err = f.t.AppendRecords([]record.Record{{Value: []byte("v")}}, record.None, tablet.AppendOptions{})
	require.ErrorIs(t, err, tablet.ErrFailed, "the tablet refuses appends until reopened")
}

// DeleteRecordsBefore below the local log start of a tiered tablet moves
// the log start for good: across a restart too, and retention retires
// the objects wholly below it.
func TestTierDeleteRecordsBelowLocalStart(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, 40)
	store, x := f.fileTier(t)
	_, err := x.Upload(ctx, nil)
	require.NoError(t, err)
	_, err = x.DeleteLocal()
	require.NoError(t, err)
	vis := x.Manifest().Visible()
	cut := vis[1].Base + 3 // inside the second object
	got, err := f.t.DeleteRecordsBefore(cut)
	require.NoError(t, err)
	require.Equal(t, cut, got)
	rr, err := x.ApplyRetention(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, rr.Retired, "the object wholly below the new log start")
	require.Equal(t, cut, f.t.Offsets().LogStartOffset)
	require.NoError(t, x.Close())

	f.reopen(t)
	x, err = Open(ctx, f.t, tp.Topic, tp.Partition, store, f.tierOpts())
	require.NoError(t, err)
	defer x.Close()
	require.Equal(t, cut, f.t.Offsets().LogStartOffset, "the log start survives the restart")
	_, err = f.t.Read(cut-1, tablet.ReadOptions{MaxBytes: 1, Isolation: tablet.ReadLogEnd})
	require.ErrorIs(t, err, tablet.ErrOffsetOutOfRange)
	res, err := f.t.Read(cut, tablet.ReadOptions{MaxBytes: 1, Isolation: tablet.ReadLogEnd, MinOneMessage: true})
	require.NoError(t, err)
	require.Positive(t, res.Records.Size())
	res.Close()
}

// countingStore counts listings of the whole store.
type countingStore struct {
	ObjectStore
	mu         sync.Mutex
	wholeLists int
}

func (s *countingStore) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	if prefix == "" {
		s.mu.Lock()
		s.wholeLists++
		s.mu.Unlock()
	}
	return s.ObjectStore.List(ctx, prefix)
}

// Garbage collection lists the whole store only at the first collection
// of a process, while an orphan waits out its grace period, and every
// OrphanScanInterval: orphans come only from a lost manifest.
func TestTierGCScansTheStoreRarely(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, 20)
	setConfig(t, f.t, "retention.ms", "-1")
	inner, err := OpenFileStore(t.TempDir())
	require.NoError(t, err)
	cs := &countingStore{ObjectStore: inner}
	clock := time.Now()
	opts := f.tierOpts()
	opts.Now = func() time.Time { return clock }
	opts.GracePeriod = time.Minute
	opts.OrphanScanInterval = time.Hour
	x, err := Open(ctx, f.t, tp.Topic, tp.Partition, cs, opts)
	require.NoError(t, err)
	defer x.Close()
	_, err = x.Upload(ctx, nil)
	require.NoError(t, err)
	scans := func() int { cs.mu.Lock(); defer cs.mu.Unlock(); return cs.wholeLists }
	_, err = x.CollectGarbage(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, scans(), "the first collection of a process scans")
	_, err = x.CollectGarbage(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, scans(), "not again within the interval")

	orphan := x.objectKey(999, newID())
	_, err = inner.Put(ctx, orphan, []byte("x"))
	require.NoError(t, err)
	clock = clock.Add(2 * time.Hour)
	g, err := x.CollectGarbage(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, scans(), "the interval passed")
	require.Equal(t, 1, g.Orphans)
}

// Remote reads fetch each object's tail once and its blocks in merged
// runs (readahead), and readers missing the same block at once share one
// GET: a whole read-back costs two GETs per object, however many blocks.
func TestTierBlockCacheMergesAndShares(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, 60)
	_, x := f.fileTier(t)
	defer x.Close()
	_, err := x.Upload(ctx, nil)
	require.NoError(t, err)
	_, err = x.DeleteLocal()
	require.NoError(t, err)
	vis := x.Manifest().Visible()
	blocks := 0
	for _, e := range vis {
		o, err := x.cache.index(ctx, e)
		require.NoError(t, err)
		blocks += len(o.Blocks)
	}
	require.Greater(t, blocks, 2*len(vis), "objects of several blocks")

	x.DropCache()
	before := x.Fetches()
	everything(t, f.t, 1<<20)
	require.Equal(t, int64(2*len(vis)), x.Fetches()-before, "a tail and one merged run of blocks per object")

	x.DropCache()
	before = x.Fetches()
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res, err := f.t.Read(vis[0].Base, tablet.ReadOptions{MaxBytes: 1, Isolation: tablet.ReadLogEnd, MinOneMessage: true})
			if !assert.NoError(t, err) {
				return
			}
			assert.Positive(t, res.Records.Size())
			res.Close()
		}()
	}
	close(start)
	wg.Wait()
	require.Equal(t, int64(2), x.Fetches()-before, "eight readers of one cold block: one tail GET and one block GET")
}

// A remote read that reaches a bad or missing object returns the records
// before it first; the next read, at the damaged offset, fails with the
// object's key, its offsets and the reason — nothing healthy is hidden.
func TestRemoteReadReturnsWhatIsReadable(t *testing.T) {
	ctx := context.Background()
	for _, damage := range []string{"missing", "corrupt"} {
		t.Run(damage, func(t *testing.T) {
			f := newFixture(t, 60)
			store, x := f.fileTier(t)
			defer x.Close()
			up, err := x.Upload(ctx, nil)
			require.NoError(t, err)
			require.GreaterOrEqual(t, len(up.Objects), 3)
			_, err = x.DeleteLocal()
			require.NoError(t, err)
			bad := up.Objects[1]
			path := filepath.Join(store.Dir(), filepath.FromSlash(bad.Key))
			switch damage {
			case "missing":
				require.NoError(t, os.Remove(path))
			case "corrupt":
				data, err := os.ReadFile(path)
				require.NoError(t, err)
				data[blockHeaderSize+20] ^= 0xff // inside block 0's first batch
				require.NoError(t, os.Chmod(path, 0o644))
				require.NoError(t, os.WriteFile(path, data, 0o644))
			}
			x.DropCache()
			var last int64 = -1
			err = f.t.Records(0, tablet.ReadLogEnd, func(_ record.Batch, r *record.Record) bool {
				last = r.Offset
				return true
			})
			require.Error(t, err)
			require.Equal(t, bad.Base-1, last, "every record before the bad object was read")
			require.ErrorContains(t, err, bad.Key)
			require.ErrorContains(t, err, fmt.Sprintf("holding offsets %d to %d", bad.Base, bad.End-1))
			if damage == "missing" {
				require.ErrorIs(t, err, ErrNotFound)
				require.ErrorContains(t, err, "missing from the store")
			} else {
				require.ErrorIs(t, err, seglog.ErrCorruption)
			}
			// Past it, the log reads on.
			n := 0
			require.NoError(t, f.t.Records(bad.End, tablet.ReadLogEnd, func(record.Batch, *record.Record) bool { n++; return true }))
			require.Positive(t, n)
		})
	}
}

// A tier's metrics follow what it does: copy lag before an upload and none
// after, the remote log's size, remote fetches with their bytes and
// errors, cache hits and misses; the collector exports them.
func TestTierMetrics(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, 60)
	store, x := f.fileTier(t)
	defer x.Close()
	before := x.Metrics()
	require.Positive(t, before.CopyLagSegments)
	require.Positive(t, before.CopyLagBytes)
	require.Zero(t, before.RemoteObjects)
	up, err := x.Upload(ctx, nil)
	require.NoError(t, err)
	_, err = x.DeleteLocal()
	require.NoError(t, err)
	after := x.Metrics()
	require.Zero(t, after.CopyLagSegments)
	require.Zero(t, after.CopyLagBytes)
	var size int64
	for _, o := range up.Objects {
		size += o.Size
	}
	require.Equal(t, size, after.RemoteLogSizeBytes)
	require.Equal(t, len(up.Objects), after.RemoteObjects)

	read := func() error {
		return f.t.Records(0, tablet.ReadLogEnd, func(record.Batch, *record.Record) bool { return true })
	}
	require.NoError(t, read())
	m := x.Metrics()
	require.Positive(t, m.RemoteFetchRequests)
	require.Positive(t, m.RemoteFetchBytes)
	require.Positive(t, m.CacheMisses)
	require.NoError(t, read())
	require.Greater(t, x.Metrics().CacheHits, m.CacheHits, "the second read hits the cache")
	require.Zero(t, x.Metrics().RemoteFetchErrors)

	require.NoError(t, os.Remove(filepath.Join(store.Dir(), filepath.FromSlash(up.Objects[0].Key))))
	x.DropCache()
	require.Error(t, read())
	require.Positive(t, x.Metrics().RemoteFetchErrors)

	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register((&Attached{Tiers: []*Tier{x}}).Collector()))
	families, err := reg.Gather()
	require.NoError(t, err)
	names := map[string]bool{}
	for _, fam := range families {
		names[fam.GetName()] = true
	}
	for _, n := range []string{"seglog_tier_remote_fetch_requests_total", "seglog_tier_remote_fetch_bytes_total",
		"seglog_tier_remote_fetch_errors_total", "seglog_tier_remote_log_size_bytes", "seglog_tier_copy_lag_bytes",
		"seglog_tier_copy_lag_segments", "seglog_tier_cache_hits_total", "seglog_tier_cache_misses_total"} {
		require.True(t, names[n], n)
	}
}
