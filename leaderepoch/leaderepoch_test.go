package leaderepoch

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/vfs"
)

func newCache(t *testing.T) (*Cache, string) {
	path := filepath.Join(t.TempDir(), checkpoint.LeaderEpochFile)
	c, err := Open(vfs.OS, path)
	require.NoError(t, err)
	return c, path
}

func persisted(t *testing.T, path string) []Entry {
	e, err := checkpoint.ReadEpochs(vfs.OS, path)
	require.NoError(t, err)
	return e
}

func TestAssign(t *testing.T) {
	c, path := newCache(t)
	require.NoError(t, c.Assign(2, 6))
	require.NoError(t, c.Assign(2, 10), "same epoch, later offset: no change")
	require.NoError(t, c.Assign(3, 11))
	require.Equal(t, []Entry{{Epoch: 2, StartOffset: 6}, {Epoch: 3, StartOffset: 11}}, c.Entries())
	require.Equal(t, c.Entries(), persisted(t, path))
	require.NoError(t, c.Assign(3, 9), "same epoch, earlier offset: replaced")
	require.Equal(t, []Entry{{Epoch: 2, StartOffset: 6}, {Epoch: 3, StartOffset: 9}}, c.Entries())
	require.NoError(t, c.Assign(4, 7), "drops entries that would break monotonicity")
	require.Equal(t, []Entry{{Epoch: 2, StartOffset: 6}, {Epoch: 4, StartOffset: 7}}, c.Entries())
	require.NoError(t, c.Assign(1, 20))
	require.Equal(t, []Entry{{Epoch: 1, StartOffset: 20}}, c.Entries())
	require.Error(t, c.Assign(-1, 0))
	require.Error(t, c.Assign(0, -1))
	latest, ok := c.LatestEpoch()
	require.True(t, ok)
	require.Equal(t, int32(1), latest)

	reopened, err := Open(vfs.OS, path)
	require.NoError(t, err)
	require.Equal(t, []Entry{{Epoch: 1, StartOffset: 20}}, reopened.Entries())
}

func TestEndOffsetFor(t *testing.T) {
	c, _ := newCache(t)
	e, o := c.EndOffsetFor(0, 100)
	require.Equal(t, [2]int64{Undefined, Undefined}, [2]int64{int64(e), o}, "empty cache")
	require.NoError(t, c.Assign(2, 6))
	require.NoError(t, c.Assign(4, 12))
	require.NoError(t, c.Assign(7, 20))
	for _, tc := range []struct {
		ask       int32
		wantEpoch int32
		wantEnd   int64
	}{
		{Undefined, Undefined, Undefined},
		{7, 7, 100}, // the latest epoch ends at the log end
		{4, 4, 20},
		{2, 2, 12},
		{3, 2, 12}, // unknown epoch between two known ones
		{1, 1, 6},  // below every known epoch: the first known start
		{8, Undefined, Undefined},
	} {
		e, o := c.EndOffsetFor(tc.ask, 100)
		require.Equal(t, tc.wantEpoch, e, "epoch %d", tc.ask)
		require.Equal(t, tc.wantEnd, o, "epoch %d", tc.ask)
	}
	for _, tc := range []struct {
		offset int64
		epoch  int32
		ok     bool
	}{{5, Undefined, false}, {6, 2, true}, {11, 2, true}, {12, 4, true}, {1000, 7, true}} {
		e, ok := c.EpochForOffset(tc.offset)
		require.Equal(t, tc.ok, ok, "offset %d", tc.offset)
		require.Equal(t, tc.epoch, e, "offset %d", tc.offset)
	}
}

func TestTruncate(t *testing.T) {
	c, path := newCache(t)
	for _, e := range []Entry{{Epoch: 2, StartOffset: 6}, {Epoch: 3, StartOffset: 8}, {Epoch: 4, StartOffset: 11}} {
		require.NoError(t, c.Assign(e.Epoch, e.StartOffset))
	}
	require.NoError(t, c.TruncateFromEnd(12))
	require.Len(t, c.Entries(), 3, "nothing starts at or after 12")
	require.NoError(t, c.TruncateFromEnd(8))
	require.Equal(t, []Entry{{Epoch: 2, StartOffset: 6}}, c.Entries())
	require.Equal(t, c.Entries(), persisted(t, path))

	for _, e := range []Entry{{Epoch: 3, StartOffset: 8}, {Epoch: 4, StartOffset: 11}} {
		require.NoError(t, c.Assign(e.Epoch, e.StartOffset))
	}
	require.NoError(t, c.TruncateFromStart(5))
	require.Equal(t, []Entry{{Epoch: 2, StartOffset: 6}, {Epoch: 3, StartOffset: 8}, {Epoch: 4, StartOffset: 11}}, c.Entries(), "nothing below 5")
	require.NoError(t, c.TruncateFromStart(9))
	require.Equal(t, []Entry{{Epoch: 3, StartOffset: 9}, {Epoch: 4, StartOffset: 11}}, c.Entries(), "epoch 3 now starts at 9")
	require.NoError(t, c.TruncateFromStart(11))
	require.Equal(t, []Entry{{Epoch: 4, StartOffset: 11}}, c.Entries())
	require.NoError(t, os.Remove(path))
	require.NoError(t, c.TruncateFromStart(11))
	require.NoFileExists(t, path, "a truncation that changes nothing writes nothing (a full disk still opens)")
	require.NoError(t, c.TruncateFromStart(3))
	require.NoFileExists(t, path)
	first, ok := c.EarliestEntry()
	require.True(t, ok)
	require.Equal(t, Entry{Epoch: 4, StartOffset: 11}, first)
	require.NoError(t, c.Clear())
	require.Empty(t, c.Entries())
	require.Empty(t, persisted(t, path))
}
