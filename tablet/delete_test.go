package tablet

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog/vfs"
)

// DeleteInBackground frees the partition at once (a new tablet of it can
// be created while the old files go) and Close waits until the old
// directory is gone.
func TestDeleteInBackground(t *testing.T) {
	dir := t.TempDir()
	e := newEnv(t, vfs.OS, dir)
	cfg := DefaultConfig()
	cfg.SegmentBytes = 4096
	tab := e.create(cfg)
	for i := range 50 {
		_, err := tab.Append(batch(t, 3, 1_700_000_000_000+int64(i), 100), AppendOptions{})
		require.NoError(t, err)
	}
	require.NoError(t, e.m.DeleteInBackground(tp0))
	again := e.create(cfg)
	require.Zero(t, again.Offsets().LogEndOffset, "a new tablet of the partition, empty")
	require.NoError(t, e.m.Close())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, de := range entries {
		require.False(t, strings.HasSuffix(de.Name(), "-delete"), "the deleted tablet's directory is gone after Close: %s", de.Name())
	}
}
