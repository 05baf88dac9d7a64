package tiering

import (
	"context"
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
