package logfile

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFilenames(t *testing.T) {
	require.Equal(t, "00000000000000000000.log", Filename(0, Log))
	require.Equal(t, "00000000000000001872.index", Filename(1872, Index))
	require.Equal(t, "09223372036854775807.timeindex", Filename(1<<63-1, TimeIndex))
	require.Equal(t, "00000000000000000045.txnindex.deleted", FilenameWithSuffix(45, TxnIndex, DeletedSuffix))
	for _, k := range []Kind{Log, Index, TimeIndex, TxnIndex, Snapshot} {
		for _, s := range []string{"", DeletedSuffix, CleanedSuffix, SwapSuffix} {
			name := FilenameWithSuffix(98765, k, s)
			n, err := ParseFilename(name)
			require.NoError(t, err, name)
			require.Equal(t, Name{Base: 98765, Kind: k, Suffix: s}, n)
			require.Equal(t, name, n.String())
		}
	}
	n, err := ParseFilename("45.log")
	require.NoError(t, err, "Kafka reads any number of digits")
	require.Equal(t, int64(45), n.Base)
	for _, bad := range []string{"", "log", ".log", "abc.log", "-1.log", "+1.log", "00000000000000000000.logx",
		"00000000000000000000", "00000000000000000000.log.tmp", "00000000000000000000.deleted",
		"99999999999999999999.log", "1 .log"} {
		_, err := ParseFilename(bad)
		require.ErrorIs(t, err, ErrBadName, bad)
	}
	require.Equal(t, "timeindex", TimeIndex.String())
}
