package record

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The 34-byte entry round-trips; a short entry, a partial tail and an
// unknown version are errors, never a panic.
func TestAbortedTxnCodec(t *testing.T) {
	a := AbortedTxn{ProducerID: 983493, FirstOffset: 137, LastOffset: 299, LastStableOffset: 200}
	b := AbortedTxn{ProducerID: -1, FirstOffset: 1 << 62, LastOffset: 1<<63 - 1, LastStableOffset: 0}
	enc := b.AppendTo(a.AppendTo(nil))
	require.Len(t, enc, 2*AbortedTxnSize)
	require.Equal(t, []byte{0, 0}, enc[:2], "version 0 as an int16")
	got, v, err := ParseAbortedTxn(enc)
	require.NoError(t, err)
	require.Equal(t, a, got)
	require.Equal(t, int8(AbortedTxnVersion), v)
	all, err := ParseAbortedTxns(enc)
	require.NoError(t, err)
	require.Equal(t, []AbortedTxn{a, b}, all)

	_, _, err = ParseAbortedTxn(enc[:AbortedTxnSize-1])
	require.Error(t, err)
	_, err = ParseAbortedTxns(enc[:AbortedTxnSize+3])
	require.ErrorContains(t, err, "not whole")
	enc[AbortedTxnSize] = 1 // the second entry's version's high byte
	_, err = ParseAbortedTxns(enc)
	require.ErrorContains(t, err, "version 1")
	none, err := ParseAbortedTxns(nil)
	require.NoError(t, err)
	require.Empty(t, none)
}
