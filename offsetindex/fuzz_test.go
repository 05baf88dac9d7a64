package offsetindex

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog/vfs"
)

// FuzzOffsetIndex opens any bytes as an index. Nothing may panic; when the
// checks find nothing wrong, lookups must agree with a linear scan.
func FuzzOffsetIndex(f *testing.F) {
	var good []byte
	for i := range 20 {
		good = binary.BigEndian.AppendUint32(good, uint32(i*3+1))
		good = binary.BigEndian.AppendUint32(good, uint32(i*100))
	}
	f.Add(good, int64(10), int64(30))
	f.Add(append(good[:40:40], make([]byte, 64)...), int64(0), int64(7))
	f.Add([]byte{0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff, 0, 0, 0}, int64(5), int64(-1))
	f.Fuzz(func(t *testing.T, data []byte, base, target int64) {
		base &= 1<<40 - 1 // a base offset is never negative
		mem := vfs.NewMem()
		require.NoError(t, vfs.WriteFile(mem, "/x.index", data))
		x, err := Open(mem, "/x.index", base, Options{ReadOnly: true})
		require.NoError(t, err)
		problems, err := x.Check()
		require.NoError(t, err)
		n, err := x.Entries()
		require.NoError(t, err)
		require.LessOrEqual(t, n, len(data)/EntrySize)
		got, err := x.Lookup(target)
		require.NoError(t, err)
		_, _, err = x.FetchUpperBoundOffset(int32(target), 10)
		require.NoError(t, err)
		if len(problems) == 0 {
			want := Entry{Offset: base}
			for i := range n {
				e, err := x.Entry(i)
				require.NoError(t, err)
				require.GreaterOrEqual(t, e.Offset, base)
				if e.Offset <= target {
					want = e
				}
			}
			require.Equal(t, want, got)
		}
		require.NoError(t, x.Close())

		// A writable open may truncate and append without panicking.
		w, err := Open(mem, "/x.index", base, Options{MaxIndexSize: 1 << 12})
		require.NoError(t, err)
		_ = w.TruncateTo(target)
		_ = w.Append(target, 1)
		require.NoError(t, w.Close())
	})
}
