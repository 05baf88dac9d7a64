package checkpoint

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzCheckpoint parses any bytes as each kind of checkpoint: no panic, and
// what parses formats back to something that parses the same.
func FuzzCheckpoint(f *testing.F) {
	f.Add([]byte("0\n2\norders 0 42\norders 1 7\n"))
	f.Add([]byte("0\n2\n0 0\n3 104\n"))
	f.Add([]byte("version: 0\ntopic_id: YWxhbmNlIGtub3dzIGl0YQ"))
	f.Add([]byte("#\nversion=1\nnode.id=1\ncluster.id=x\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if o, err := ParseOffsets("f", data); err == nil {
			again, err := ParseOffsets("f", o.Format())
			require.NoError(t, err)
			require.Equal(t, o, again)
		}
		if e, err := ParseEpochs("f", data); err == nil {
			again, err := ParseEpochs("f", FormatEpochs(e))
			require.NoError(t, err)
			require.Equal(t, len(e), len(again))
			for i := range e {
				require.Equal(t, e[i], again[i])
			}
		}
		if id, err := ParsePartitionMetadata("f", data); err == nil {
			again, err := ParsePartitionMetadata("f", FormatPartitionMetadata(id))
			require.NoError(t, err)
			require.Equal(t, id, again)
		}
		_, _ = ParseMetaProperties("f", data)
	})
}
