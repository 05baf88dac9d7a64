package tiering

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// The public entry points answer missing parts with an error, not a panic.
func TestMissingPartsAreErrors(t *testing.T) {
	ctx := context.Background()
	_, err := Open(ctx, nil, "t", 0, nil, nil)
	require.Error(t, err)
	_, err = Attach(ctx, nil, nil, nil, nil)
	require.Error(t, err)
	s := NewService(nil, nil, nil)
	_, err = s.RunOnce(ctx, false)
	require.Error(t, err)
	_, err = s.Tier(ctx, nil)
	require.Error(t, err)
	require.NoError(t, s.Close())
	_, err = OpenStore(ctx, "", nil)
	require.Error(t, err)
	_, err = OpenStore(ctx, "ftp://host/x", nil)
	require.Error(t, err)
}

// A store that cannot be opened is a nil ObjectStore, not a typed nil that
// looks like a store.
func TestOpenStoreFailureIsNil(t *testing.T) {
	f := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(f, nil, 0o644))
	s, err := OpenStore(context.Background(), "file://"+f, nil)
	require.Error(t, err)
	require.True(t, s == nil, "a nil interface")
	s, err = OpenStore(context.Background(), "s3:///nobucket", nil)
	require.Error(t, err)
	require.True(t, s == nil)
}
