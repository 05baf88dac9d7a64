package writerstate

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzSnapshot parses any bytes as a snapshot: no panic, no allocation
// beyond the entries the input holds, and whatever parses re-encodes to
// entries that parse the same (and to the same bytes when the input was
// written the canonical way).
func FuzzSnapshot(f *testing.F) {
	golden, err := os.ReadFile(filepath.Join("testdata", "00000000000000000046.snapshot"))
	require.NoError(f, err)
	f.Add(golden)
	f.Add(AppendSnapshot(nil, nil))
	f.Add([]byte{0, 1, 0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := ParseSnapshot(data)
		if err != nil {
			require.ErrorIs(t, err, ErrCorruptSnapshot)
			return
		}
		require.LessOrEqual(t, len(entries)*snapshotEntrySize, len(data))
		again := AppendSnapshot(nil, entries)
		reparsed, err := ParseSnapshot(again)
		require.NoError(t, err)
		require.Equal(t, entries, reparsed)
		// Trailing bytes aside (the CRC covers them, so they parse), only a
		// snapshot that is not canonical — a transaction offset below -1,
		// a sequence or delta kept with no batch — re-encodes differently.
		if len(data) == len(again) && !bytes.Equal(data, again) {
			require.True(t, nonCanonical(data), "%x re-encodes as %x", data, again)
		}
	})
}

// nonCanonical reports whether a parsed snapshot has a field the encoder
// would write otherwise.
func nonCanonical(data []byte) bool {
	p := data[snapshotHeader:]
	for len(p) >= snapshotEntrySize {
		lastSeq := int32(binary.BigEndian.Uint32(p[10:]))
		lastOffset := int64(binary.BigEndian.Uint64(p[14:]))
		delta := int32(binary.BigEndian.Uint32(p[22:]))
		txn := int64(binary.BigEndian.Uint64(p[38:]))
		if txn < -1 || (lastOffset < 0 && (lastSeq != -1 || delta != 0 || lastOffset != -1)) {
			return true
		}
		p = p[snapshotEntrySize:]
	}
	return false
}
