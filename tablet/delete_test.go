package tablet

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// DeleteInBackground frees the partition at once (a new tablet of it can
// be created while the old files go) and Close waits until the old
// directory is gone.
func TestDeleteInBackground(t *testing.T) {
	dir := t.TempDir()
	e, _, cfg := segmentedTablet(t, dir)
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
