package tiering

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/seglog/seglog/internal/testenv"
	"github.com/seglog/seglog/vfs"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/tablet"
)

// attachEnv is a data directory of two tablets, a (tiered to a file://
// store, its local copies deleted) and b (never tiered), closed cleanly.
func attachEnv(t *testing.T) (dataDir, store string) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	dataDir, store = filepath.Join(dir, "data"), "file://"+filepath.Join(dir, "store")
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	m, err := tablet.OpenManager(nil, dataDir, tablet.ManagerOptions{Tablet: tablet.Options{Logger: quiet}})
	require.NoError(t, err)
	cfg := tablet.DefaultConfig()
	cfg.SegmentBytes, cfg.LocalRetentionBytes = 4096, 0
	for _, topic := range []string{"a", "b"} {
		tab, err := m.Create(tablet.TopicPartition{Topic: topic}, &cfg)
		require.NoError(t, err)
		for i := range 10 {
			recs := make([]record.Record, 20)
			for j := range recs {
				recs[j].Value = fmt.Appendf(nil, "%s %03d %0100d", topic, i*20+j, 0)
			}
			_, err := tab.AppendRecords(recs, record.None, tablet.AppendOptions{})
			require.NoError(t, err)
		}
	}
	tab, _ := m.Get(tablet.TopicPartition{Topic: "a"})
	s, err := OpenStore(ctx, store, nil)
	require.NoError(t, err)
	require.NoError(t, SaveStoreURL(nil, tab.Dir(), store))
	x, err := Open(ctx, tab, "a", 0, s, &Options{Logger: quiet})
	require.NoError(t, err)
	up, err := x.Upload(ctx, nil)
	require.NoError(t, err)
	require.NotEmpty(t, up.Objects)
	_, err = x.DeleteLocal()
	require.NoError(t, err)
	require.Positive(t, tab.Offsets().LocalLogStartOffset)
	require.NoError(t, x.Close())
	require.NoError(t, m.Close())
	return dataDir, store
}

// Attach opens the tier of each tablet that has a store URL, and only
// those: the tiered tablet reads from offset 0 again, the other is left
// alone; match narrows it; the store's manifests are found by Manifests.
func TestAttach(t *testing.T) {
	ctx := context.Background()
	dataDir, store := attachEnv(t)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	m, err := tablet.OpenManager(nil, dataDir, tablet.ManagerOptions{Tablet: tablet.Options{Logger: quiet}})
	require.NoError(t, err)
	defer m.Close()
	a, _ := m.Get(tablet.TopicPartition{Topic: "a"})
	url, ok, err := StoreURL(nil, a.Dir())
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, store, url)
	b, _ := m.Get(tablet.TopicPartition{Topic: "b"})
	_, ok, err = StoreURL(nil, b.Dir())
	require.NoError(t, err)
	require.False(t, ok, "b was never tiered")

	none, err := Attach(ctx, m, func(tp tablet.TopicPartition) bool { return tp.Topic == "b" }, nil, &Options{Logger: quiet})
	require.NoError(t, err)
	require.Empty(t, none.Tiers, "match leaves out a; b has no tier")
	require.NoError(t, none.Close())

	att, err := Attach(ctx, m, nil, nil, &Options{Logger: quiet})
	require.NoError(t, err)
	require.Len(t, att.Tiers, 1)
	x := att.Tiers[0]
	require.Equal(t, "a-0", x.Name())
	require.Same(t, a, x.Tablet())
	require.Zero(t, a.Offsets().LogStartOffset, "the log starts in the store again")
	n := 0
	for r, err := range a.Scan(0, tablet.ReadHighWatermark) {
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("a %03d", n), string(r.Value[:5]))
		n++
	}
	require.Equal(t, 200, n)

	s, err := OpenStore(ctx, store, nil)
	require.NoError(t, err)
	list, err := s.List(ctx, "")
	require.NoError(t, err)
	infos, err := Manifests(ctx, s, list, dataDir)
	require.NoError(t, err)
	require.Len(t, infos, 1)
	require.Equal(t, "a-0", infos[0].Tablet)
	require.Equal(t, x.Manifest().TieredEnd(), infos[0].State.TieredEnd)
	fromStore, err := Manifests(ctx, s, list, "")
	require.NoError(t, err)
	require.Len(t, fromStore, 1, "without the data directory: the store's mirror")
	require.Equal(t, infos[0].State.TieredEnd, fromStore[0].State.TieredEnd)
	require.NoError(t, att.Close())
}

// A URL carrying credentials is never saved.
func TestSaveStoreURLRefusesCredentials(t *testing.T) {
	dir := t.TempDir()
	require.Error(t, SaveStoreURL(nil, dir, "s3://KEY:SECRET@bucket/x"))
	_, ok, err := StoreURL(nil, dir)
	require.NoError(t, err)
	require.False(t, ok, "nothing was written")
	require.Error(t, SaveStoreURL(nil, dir, "%zz"))
}

// A read-only tablet gets a read-only tier: reads go to the store, an
// upload left prepared is left alone, and neither the data directory nor
// the store changes.
func TestReadOnlyTier(t *testing.T) {
	ctx := context.Background()
	dataDir, store := attachEnv(t)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	// A crash between PREPARE and COMMIT: the object is in the store, the
	// manifest says prepared.
	s, err := OpenStore(ctx, store, nil)
	require.NoError(t, err)
	m0, err := OpenManifest(nil, filepath.Join(dataDir, "a-0", ManifestDir), 0)
	require.NoError(t, err)
	require.NoError(t, m0.Prepare("crashed", "a-0/crashed.seg", m0.TieredEnd(), m0.TieredEnd()+20, 1))
	require.NoError(t, m0.Close())
	_, err = s.Put(ctx, "a-0/crashed.seg", []byte("half an object"))
	require.NoError(t, err)
	storeBefore, err := s.List(ctx, "")
	require.NoError(t, err)
	dirBefore := testenv.Tree(t, dataDir)

	m, err := tablet.OpenManager(nil, dataDir, tablet.ManagerOptions{ReadOnly: true, Tablet: tablet.Options{Logger: quiet}})
	require.NoError(t, err)
	att, err := Attach(ctx, m, nil, nil, &Options{Logger: quiet})
	require.NoError(t, err)
	require.Len(t, att.Tiers, 1)
	a, _ := m.Get(tablet.TopicPartition{Topic: "a"})
	n := 0
	for _, err := range a.Scan(0, tablet.ReadHighWatermark) {
		require.NoError(t, err)
		n++
	}
	require.Equal(t, 200, n, "every record, through the store")
	_, err = att.Tiers[0].Upload(ctx, nil)
	require.ErrorIs(t, err, tablet.ErrReadOnly)
	_, err = att.Tiers[0].CollectGarbage(ctx)
	require.ErrorIs(t, err, tablet.ErrReadOnly)
	require.NoError(t, att.Close())
	require.NoError(t, m.Close())

	storeAfter, err := s.List(ctx, "")
	require.NoError(t, err)
	require.Equal(t, storeBefore, storeAfter, "nothing put to or deleted from the store")
	require.Equal(t, dirBefore, testenv.Tree(t, dataDir), "nothing changed in the data directory")
}

// A relative file:// store is saved with its directory made absolute, so
// every later command finds the same store whatever its working directory.
func TestSaveStoreURLMakesFileStoresAbsolute(t *testing.T) {
	work := t.TempDir()
	t.Chdir(work)
	dir := t.TempDir()
	require.NoError(t, SaveStoreURL(nil, dir, "file://store2"))
	got, ok, err := StoreURL(nil, dir)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "file://"+filepath.Join(work, "store2"), got)
	require.NoError(t, SaveStoreURL(nil, dir, "file:///abs/store"))
	got, _, _ = StoreURL(nil, dir)
	require.Equal(t, "file:///abs/store", got)
	require.NoError(t, SaveStoreURL(nil, dir, "s3://bucket/prefix?region=x"))
	got, _, _ = StoreURL(nil, dir)
	require.Equal(t, "s3://bucket/prefix?region=x", got, "an S3 URL as written")
}

// A tier with Options.StoreURL binds its tablet to the store before it
// deletes a local segment: when saving the binding fails, nothing local
// is deleted; once it is saved, the deletion goes on, and a later open
// finds the store (Attach reads below the local log start again). A
// kill between the deletion and a caller's own binding used to leave the
// local segments gone and the tablet unattached.
func TestDeleteLocalBindsFirst(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	store := "file://" + filepath.Join(dir, "store")
	m, err := tablet.OpenManager(nil, filepath.Join(dir, "data"), tablet.ManagerOptions{Tablet: tablet.Options{Logger: quiet}})
	require.NoError(t, err)
	defer func() { require.NoError(t, m.Close()) }()
	cfg := tablet.DefaultConfig()
	cfg.SegmentBytes, cfg.LocalRetentionBytes, cfg.RemoteStorageEnable = 4096, 0, true
	tab, err := m.Create(tablet.TopicPartition{Topic: "a"}, &cfg)
	require.NoError(t, err)
	for i := range 10 {
		recs := make([]record.Record, 20)
		for j := range recs {
			recs[j].Value = fmt.Appendf(nil, "a %03d %0100d", i*20+j, 0)
		}
		_, err := tab.AppendRecords(recs, record.None, tablet.AppendOptions{})
		require.NoError(t, err)
	}
	s, err := OpenStore(ctx, store, nil)
	require.NoError(t, err)
	inj := vfs.NewInjector(vfs.OS)
	inj.Add(vfs.Rule{Ops: vfs.OpRename, Path: StoreURLFile + "*"})
	x, err := Open(ctx, tab, "a", 0, s, &Options{Logger: quiet, FS: inj, StoreURL: store})
	require.NoError(t, err)
	defer x.Close()
	up, err := x.Upload(ctx, nil)
	require.NoError(t, err)
	require.NotEmpty(t, up.Objects)

	_, err = x.DeleteLocal()
	require.ErrorIs(t, err, vfs.ErrInjected, "the binding could not be saved")
	require.Zero(t, tab.Offsets().LocalLogStartOffset, "so nothing local was deleted")
	_, ok, err := StoreURL(nil, tab.Dir())
	require.NoError(t, err)
	require.False(t, ok)

	del, err := x.DeleteLocal()
	require.NoError(t, err, "the injected failure was the first rename only")
	require.Positive(t, del.Segments)
	url, ok, err := StoreURL(nil, tab.Dir())
	require.NoError(t, err)
	require.True(t, ok, "bound before the deletion")
	require.Equal(t, store, url)
}
