package tablet

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/vfs"
)

// slowFS holds every MkdirAll of a directory whose name starts with
// "slow" until release is closed, saying so on entered.
type slowFS struct {
	vfs.FS
	entered chan string
	release chan struct{}
}

func (s slowFS) MkdirAll(dir string, perm os.FileMode) error {
	if strings.HasPrefix(filepath.Base(dir), "slow") {
		s.entered <- filepath.Base(dir)
		<-s.release
	}
	return s.FS.MkdirAll(dir, perm)
}

// within fails the test if fn has not returned by the limit (a bound for
// a lookup that would wait for a create's I/O, which here never ends).
func within(t *testing.T, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatalf("%s waited for a tablet being created", what)
	}
}

// A tablet being created (its directory's writes and fsyncs under way)
// blocks no lookup, listing or creation of other tablets; partitions of
// a new topic created at the same time share its topic id; the tablet
// appears once its directory is durable.
func TestCreateDoesNotBlockOthers(t *testing.T) {
	fsys := slowFS{FS: vfs.OS, entered: make(chan string, 2), release: make(chan struct{})}
	m, err := OpenManager(fsys, filepath.Join(t.TempDir(), "data"), ManagerOptions{Tablet: Options{Logger: quiet}})
	require.NoError(t, err)
	defer func() { require.NoError(t, m.Close()) }()
	kept := checkpoint.TopicPartition{Topic: "kept"}
	_, err = m.Create(kept, nil)
	require.NoError(t, err)

	created := make(chan *Tablet, 2)
	var wg sync.WaitGroup
	for p := range int32(2) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tb, err := m.Create(checkpoint.TopicPartition{Topic: "slow", Partition: p}, nil)
			require.NoError(t, err)
			created <- tb
		}()
	}
	<-fsys.entered
	<-fsys.entered // both partitions of the new topic are mid-create
	within(t, "Get", func() {
		_, ok := m.Get(kept)
		require.True(t, ok)
		_, ok = m.Get(checkpoint.TopicPartition{Topic: "slow"})
		require.False(t, ok, "not there until its directory is durable")
	})
	within(t, "Tablets", func() { require.Len(t, m.Tablets(), 1) })
	within(t, "TopicID", func() {
		_, ok := m.TopicID("kept")
		require.True(t, ok)
	})
	within(t, "another Create", func() {
		_, err := m.Create(checkpoint.TopicPartition{Topic: "other"}, nil)
		require.NoError(t, err)
	})
	close(fsys.release)
	wg.Wait()
	a, b := <-created, <-created
	require.Equal(t, a.topicID, b.topicID, "one topic id for the topic's partitions")
	id, ok := m.TopicID("slow")
	require.True(t, ok)
	require.Equal(t, a.topicID, id)
	require.Len(t, m.Tablets(), 4)
	_, err = m.Create(checkpoint.TopicPartition{Topic: "slow"}, nil)
	require.ErrorIs(t, err, ErrExists)
}

// Concurrent creates of one tablet: one creates it, the others get
// ErrExists (or, through GetOrCreate, the tablet) once it exists.
func TestConcurrentCreatesOfOneTablet(t *testing.T) {
	m, err := OpenManager(nil, filepath.Join(t.TempDir(), "data"), ManagerOptions{Tablet: Options{Logger: quiet}})
	require.NoError(t, err)
	defer func() { require.NoError(t, m.Close()) }()
	tp := checkpoint.TopicPartition{Topic: "race"}
	got := make(chan *Tablet, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tb, err := m.GetOrCreate(tp, nil)
			require.NoError(t, err)
			got <- tb
		}()
	}
	wg.Wait()
	close(got)
	first := <-got
	for tb := range got {
		require.Same(t, first, tb)
	}
}

// SetDefaults moves the tablets that follow the defaults (a key they do
// not set, at the old default's value) and no other; a tablet created
// after takes the new defaults; a reopened tablet still follows them.
func TestSetDefaults(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	m, err := OpenManager(nil, dir, ManagerOptions{Tablet: Options{Logger: quiet}})
	require.NoError(t, err)
	follows, err := m.Create(checkpoint.TopicPartition{Topic: "follows"}, nil)
	require.NoError(t, err)
	own := m.DefaultConfig()
	require.NoError(t, own.Set("retention.ms", "5000"))
	mine, err := m.Create(checkpoint.TopicPartition{Topic: "own"}, &own)
	require.NoError(t, err)

	next := m.DefaultConfig()
	require.NoError(t, next.Set("retention.ms", "60000"))
	require.NoError(t, next.Set("segment.bytes", "1048576"))
	require.NoError(t, m.SetDefaults(next))
	require.Equal(t, int64(60000), follows.Config().RetentionMs)
	require.False(t, follows.Config().IsSet("retention.ms"))
	require.Equal(t, int64(5000), mine.Config().RetentionMs, "its own")
	require.Equal(t, int64(1048576), mine.Config().SegmentBytes, "follows the key it does not set")
	later, err := m.Create(checkpoint.TopicPartition{Topic: "later"}, nil)
	require.NoError(t, err)
	require.Equal(t, int64(60000), later.Config().RetentionMs)
	require.NoError(t, m.Close())

	m, err = OpenManager(nil, dir, ManagerOptions{Tablet: Options{Logger: quiet}})
	require.NoError(t, err)
	defer m.Close()
	require.NoError(t, m.SetDefaults(next)) // as a broker does at start
	back := m.DefaultConfig()
	require.NoError(t, m.SetDefaults(DefaultConfig()))
	tb, _ := m.Get(checkpoint.TopicPartition{Topic: "follows"})
	require.Equal(t, DefaultConfig().RetentionMs, tb.Config().RetentionMs, "back to the defaults")
	tb, _ = m.Get(checkpoint.TopicPartition{Topic: "own"})
	require.Equal(t, int64(5000), tb.Config().RetentionMs)
	require.Equal(t, int64(60000), back.RetentionMs)
}

// CreateWithID gives a new topic the id asked for, and refuses a
// partition of a topic that is here under another id (a cluster's topic
// deleted and recreated while this broker was away).
func TestCreateWithID(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	m, err := OpenManager(nil, dir, ManagerOptions{Tablet: Options{Logger: quiet}})
	require.NoError(t, err)
	id := checkpoint.NewTopicID()
	tb, err := m.CreateWithID(checkpoint.TopicPartition{Topic: "c"}, nil, id)
	require.NoError(t, err)
	got, ok := m.TopicID("c")
	require.True(t, ok)
	require.Equal(t, id, got)
	_, err = m.CreateWithID(checkpoint.TopicPartition{Topic: "c", Partition: 1}, nil, id)
	require.NoError(t, err)
	_, err = m.CreateWithID(checkpoint.TopicPartition{Topic: "c", Partition: 2}, nil, checkpoint.NewTopicID())
	require.ErrorIs(t, err, ErrExists)

	// A manual high watermark stays where it is set; switching back moves
	// it to the log end.
	require.NoError(t, tb.SetManualHighWatermark(true))
	_, err = tb.AppendRecords([]record.Record{{Value: []byte("a")}, {Value: []byte("b")}}, record.None, AppendOptions{})
	require.NoError(t, err)
	require.Zero(t, tb.Offsets().HighWatermark)
	require.NoError(t, tb.SetHighWatermark(1))
	require.Equal(t, int64(1), tb.Offsets().HighWatermark)
	require.NoError(t, tb.SetManualHighWatermark(false))
	require.Equal(t, int64(2), tb.Offsets().HighWatermark)
	require.NoError(t, m.Close())

	m, err = OpenManager(nil, dir, ManagerOptions{Tablet: Options{Logger: quiet}})
	require.NoError(t, err)
	defer m.Close()
	got, _ = m.TopicID("c")
	require.Equal(t, id, got, "the id is the tablet's, kept in partition.metadata")
}
