package tablet

import (
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog/record"
)

// Sealed opens a whole sealed segment at its base, or its part from a
// batch inside it (a new leader's tier continuing where the old one's
// segment ended); an offset that starts no batch, or the active
// segment, is refused.
func TestSealedFromInsideASegment(t *testing.T) {
	_, tab, _ := segmentedTablet(t, t.TempDir())
	segs := tab.Segments()
	require.GreaterOrEqual(t, len(segs), 3)
	whole, err := tab.Sealed(segs[0].BaseOffset)
	require.NoError(t, err)
	defer whole.Close()
	require.Equal(t, segs[1].BaseOffset, whole.Next)

	mid := segs[0].BaseOffset + 6 // the third batch (3 records each)
	part, err := tab.Sealed(mid)
	require.NoError(t, err)
	defer part.Close()
	require.Equal(t, mid, part.Base)
	require.Equal(t, whole.Next, part.Next)
	data, err := io.ReadAll(io.NewSectionReader(part.Log, 0, part.LogSize))
	require.NoError(t, err)
	h, _, err := record.ParseHeader(data)
	require.NoError(t, err)
	require.Equal(t, mid, h.BaseOffset, "the part starts at the batch")
	require.Equal(t, whole.LogSize-2*int64(len(batch(t, 3, 0, 100))), part.LogSize)

	_, err = tab.Sealed(mid + 1)
	require.ErrorIs(t, err, ErrNotSealed, "no batch starts there")
	_, err = tab.Sealed(segs[len(segs)-1].BaseOffset)
	require.ErrorIs(t, err, ErrNotSealed, "the active segment")
}
