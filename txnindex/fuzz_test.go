package txnindex

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog/vfs"
)

// FuzzTxnIndex opens any bytes as a transaction index. Nothing may panic;
// a partial tail is ignored; when Check finds nothing wrong, every entry
// ends at or above the base and the sanity check agrees.
func FuzzTxnIndex(f *testing.F) {
	var good []byte
	for _, t := range kafkaTxns {
		good = t.AppendTo(good)
	}
	f.Add(good, int64(0), int64(11), int64(35))
	f.Add(good[:50], int64(100), int64(0), int64(100))
	f.Fuzz(func(t *testing.T, data []byte, base, fetch, upper int64) {
		mem := vfs.NewMem()
		require.NoError(t, vfs.WriteFile(mem, "/x.txnindex", data))
		x := Open(mem, "/x.txnindex", base, Options{ReadOnly: true})
		all, err := x.All()
		if err == nil {
			require.Len(t, all, len(data)/EntrySize)
		}
		_, _ = x.CollectAbortedTxns(fetch, upper, -1)
		problems, err := x.Check()
		if err == nil && len(problems) == 0 {
			require.NoError(t, x.SanityCheck())
			for _, a := range all {
				require.GreaterOrEqual(t, a.LastOffset, base)
			}
		}
		w := Open(mem, "/x.txnindex", base, Options{})
		_ = w.TruncateTo(fetch)
		_ = w.Append(txn(1, fetch, upper, upper))
		require.NoError(t, w.Close())
	})
}
