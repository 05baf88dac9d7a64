package timeindex

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog/vfs"
)

// FuzzTimeIndex opens any bytes as a time index. Nothing may panic; when
// the checks find nothing wrong, lookups must agree with a linear scan.
func FuzzTimeIndex(f *testing.F) {
	var good []byte
	for i := range 20 {
		good = binary.BigEndian.AppendUint64(good, uint64(1_700_000_000_000+i*10))
		good = binary.BigEndian.AppendUint32(good, uint32(i*2))
	}
	f.Add(good, int64(10), int64(1_700_000_000_055))
	f.Add(append(good[:48:48], make([]byte, 60)...), int64(0), int64(0))
	f.Fuzz(func(t *testing.T, data []byte, base, target int64) {
		base &= 1<<40 - 1
		mem := vfs.NewMem()
		require.NoError(t, vfs.WriteFile(mem, "/x.timeindex", data))
		x, err := Open(mem, "/x.timeindex", base, Options{ReadOnly: true})
		require.NoError(t, err)
		problems, err := x.Check()
		require.NoError(t, err)
		n, err := x.Entries()
		require.NoError(t, err)
		got, err := x.Lookup(target)
		require.NoError(t, err)
		if len(problems) == 0 {
			want := Entry{-1, base}
			for i := range n {
				e, err := x.Entry(i)
				require.NoError(t, err)
				require.GreaterOrEqual(t, e.Offset, base)
				if e.Timestamp <= target {
					want = e
				}
			}
			require.Equal(t, want, got)
		}
		require.NoError(t, x.Close())
		w, err := Open(mem, "/x.timeindex", base, Options{MaxIndexSize: 1 << 12})
		require.NoError(t, err)
		_ = w.TruncateTo(target)
		_ = w.MaybeAppend(target, base+5, true)
		require.NoError(t, w.Close())
	})
}
