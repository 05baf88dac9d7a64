package tablet_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/leaderepoch"
	"github.com/seglog/seglog/recovery"
	"github.com/seglog/seglog/segment"
	"github.com/seglog/seglog/tablet"
	"github.com/seglog/seglog/writerstate"
)

// Every public entry point takes its zero values — a nil filesystem (the
// OS), zero options, a nil config — and answers a bad one with an error,
// never a panic.
func TestZeroValuesAreUsable(t *testing.T) {
	dir := t.TempDir()
	m, err := tablet.OpenManager(nil, dir, tablet.ManagerOptions{})
	require.NoError(t, err)
	tab, err := m.Create(tablet.TopicPartition{Topic: "t", Partition: 0}, nil)
	require.NoError(t, err)
	_, err = tab.AppendRecords(nil, 0, tablet.AppendOptions{})
	require.Error(t, err, "an empty batch is refused")
	_, err = tab.Append(nil, tablet.AppendOptions{})
	require.Error(t, err)
	res := new(tablet.FetchResult)
	require.NoError(t, tab.ReadInto(res, 0, tablet.ReadOptions{}))
	res.Close()
	res.Close() // twice is harmless
	_, err = m.Create(tablet.TopicPartition{}, nil)
	require.Error(t, err, "the zero topic-partition has no name")
	_, err = m.Create(tablet.TopicPartition{Topic: "z"}, &tablet.Config{})
	require.ErrorIs(t, err, tablet.ErrConfig, "the zero Config is refused, not used")
	_, err = tablet.Open(nil, nil, tablet.DefaultConfig(), tablet.Options{})
	require.Error(t, err)
	require.NoError(t, m.Close())

	r, err := recovery.Load(nil, dir, recovery.Options{})
	require.NoError(t, err)
	require.Len(t, r.Tablets, 1)
	require.NoError(t, r.CloseClean(0))
	v, err := recovery.Verify(nil, dir, recovery.VerifyOptions{})
	require.NoError(t, err)
	require.Empty(t, v.Problems)

	tabDir := filepath.Join(dir, "t-0")
	_, err = tablet.ReadConfig(nil, tabDir)
	require.NoError(t, err)
	seg, err := segment.Open(nil, tabDir, 0, segment.Options{})
	require.NoError(t, err)
	require.NoError(t, seg.Close())
	st, err := writerstate.Open(nil, tabDir, writerstate.Options{})
	require.NoError(t, err)
	require.True(t, st.IsEmpty())
	_, err = leaderepoch.Open(nil, filepath.Join(tabDir, checkpoint.LeaderEpochFile))
	require.NoError(t, err)
	_, _, err = checkpoint.ReadMetaProperties(nil, filepath.Join(dir, checkpoint.MetaPropertiesFile))
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(dir, checkpoint.CleanShutdownFile))
	require.NoError(t, err, "the directory is still clean after all of that")
}
