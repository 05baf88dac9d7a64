package main

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// franzIndexes writes, beside franz.log, the indexes a Kafka broker keeps
// for it with index.interval.bytes = 0 (an entry for every batch after the
// first), encoded here straight from the spec with encoding/binary and
// kmsg's batch parser — independently of seglog's index packages. The
// files are golden: -update rewrites them.
func franzIndexes(t *testing.T, data []byte) map[string][]byte {
	var offsetIdx, timeIdx, txnIdx []byte
	running, first := int64(-1), true
	for pos := 0; pos < len(data); {
		var rb kmsg.RecordBatch
		length := int(binary.BigEndian.Uint32(data[pos+8:])) + 12
		require.NoError(t, rb.ReadFrom(data[pos:pos+length]))
		last := rb.FirstOffset + int64(rb.LastOffsetDelta)
		raised := rb.MaxTimestamp > running
		if raised {
			running = rb.MaxTimestamp
		}
		if !first {
			offsetIdx = binary.BigEndian.AppendUint32(offsetIdx, uint32(last))
			offsetIdx = binary.BigEndian.AppendUint32(offsetIdx, uint32(pos))
			if raised {
				timeIdx = binary.BigEndian.AppendUint64(timeIdx, uint64(running))
				timeIdx = binary.BigEndian.AppendUint32(timeIdx, uint32(last))
			}
		}
		if rb.Attributes&0x20 != 0 && len(rb.Records) > 0 {
			var rec kmsg.Record
			require.NoError(t, rec.ReadFrom(rb.Records))
			if binary.BigEndian.Uint16(rec.Key[2:]) == 0 { // ABORT: the open txn began at 12
				txnIdx = binary.BigEndian.AppendUint16(txnIdx, 0)
				for _, v := range []int64{rb.ProducerID, 12, last, last + 1} {
					txnIdx = binary.BigEndian.AppendUint64(txnIdx, uint64(v))
				}
			}
		}
		first = false
		pos += length
	}
	return map[string][]byte{".index": offsetIdx, ".timeindex": timeIdx, ".txnindex": txnIdx}
}

// franzSegment puts franz.log and its golden indexes in a temporary
// directory and returns the directory and the base path (no extension).
func franzSegment(t *testing.T) (string, string) {
	logPath, data := franzLog(t)
	dir := filepath.Dir(logPath)
	basePath := strings.TrimSuffix(logPath, ".log")
	want := franzIndexes(t, data)
	for ext, content := range want {
		golden := filepath.Join("testdata", "00000000000000000000"+ext)
		if *update {
			require.NoError(t, os.WriteFile(golden, content, 0o644))
		}
		stored, err := os.ReadFile(golden)
		require.NoError(t, err)
		require.Equal(t, content, stored, "golden %s", golden)
		require.NoError(t, os.WriteFile(basePath+ext, stored, 0o644))
	}
	return dir, basePath
}

func TestDumpIndexesGolden(t *testing.T) {
	_, basePath := franzSegment(t)
	code, out, errOut := runSeglog(t, "dump", basePath+".index", basePath+".timeindex", basePath+".txnindex")
	require.Equal(t, 0, code, errOut)
	out = strings.ReplaceAll(out, basePath, "SEGMENT")
	golden := filepath.Join("testdata", "franz.indexes.dump.txt")
	if *update {
		require.NoError(t, os.WriteFile(golden, []byte(out), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	require.Equal(t, string(want), out)
	require.Contains(t, out, "offset: 6 position: 119\n")
	require.Contains(t, out, "version: 0 producerId: 3000 firstOffset: 12 lastOffset: 14 lastStableOffset: 15\n")
	require.Equal(t, 8, strings.Count(out, "\noffset: "), "an offset entry for every batch after the first")
}

func TestDumpIndexChecksPass(t *testing.T) {
	_, basePath := franzSegment(t)
	for _, flag := range []string{"--index-sanity-check", "--verify-index-only"} {
		code, out, errOut := runSeglog(t, "dump", flag, basePath+".index", basePath+".timeindex", basePath+".txnindex")
		require.Equal(t, 0, code, "%s: %s%s", flag, out, errOut)
		require.NotContains(t, out, "error")
		require.NotContains(t, out, "offset: ", "the checks do not print entries")
	}
}

func TestDumpIndexChecksFlagDefects(t *testing.T) {
	_, basePath := franzSegment(t)
	idx, err := os.ReadFile(basePath + ".index")
	require.NoError(t, err)
	tidx, err := os.ReadFile(basePath + ".timeindex")
	require.NoError(t, err)

	// A zero-filled tail, as a crash leaves a preallocated index.
	require.NoError(t, os.WriteFile(basePath+".index", append(append([]byte{}, idx...), make([]byte, 80)...), 0o644))
	code, out, _ := runSeglog(t, "dump", "--index-sanity-check", basePath+".index")
	require.Equal(t, 1, code)
	require.Contains(t, out, "(slot 8): 10 slots after the 8 valid entries were left untrimmed")
	code, out, _ = runSeglog(t, "dump", basePath+".index")
	require.Equal(t, 0, code, "a plain dump of an untrimmed (active) index is not an error")
	require.Contains(t, out, "10 slots after the valid entries were not read")

	// A non-increasing entry.
	bad := append([]byte{}, idx...)
	copy(bad[16:24], bad[8:16])
	require.NoError(t, os.WriteFile(basePath+".index", bad, 0o644))
	code, out, _ = runSeglog(t, "dump", "--index-sanity-check", basePath+".index")
	require.Equal(t, 1, code)
	require.Contains(t, out, "error at position 16 (slot 2): offset 8 does not increase (previous 8)")

	// An entry pointing into the middle of a batch.
	bad = append([]byte{}, idx...)
	binary.BigEndian.PutUint32(bad[4:], binary.BigEndian.Uint32(bad[4:])+7)
	require.NoError(t, os.WriteFile(basePath+".index", bad, 0o644))
	code, out, _ = runSeglog(t, "dump", "--index-sanity-check", basePath+".index")
	require.Equal(t, 0, code, "the sanity check cannot see it")
	require.Contains(t, out, "passed sanity check")
	code, out, _ = runSeglog(t, "dump", "--verify-index-only", basePath+".index")
	require.Equal(t, 1, code)
	require.Contains(t, out, "error at position 0 (slot 0): offset 6 position 126: not the start of a batch (inside the batch at 119)")

	// A time entry whose timestamp is not the maximum its batch reached.
	bad = append([]byte{}, tidx...)
	binary.BigEndian.PutUint64(bad[12:], binary.BigEndian.Uint64(bad[12:])+1)
	require.NoError(t, os.WriteFile(basePath+".timeindex", bad, 0o644))
	code, out, _ = runSeglog(t, "dump", "--verify-index-only", basePath+".timeindex")
	require.Equal(t, 1, code)
	require.Contains(t, out, "(slot 1)")
	require.Contains(t, out, "raised the maximum to")

	// An aborted transaction with the wrong producer.
	txn, err := os.ReadFile(basePath + ".txnindex")
	require.NoError(t, err)
	binary.BigEndian.PutUint64(txn[2:], 2000)
	require.NoError(t, os.WriteFile(basePath+".txnindex", txn, 0o644))
	code, out, _ = runSeglog(t, "dump", "--verify-index-only", basePath+".txnindex")
	require.Equal(t, 1, code)
	require.Contains(t, out, "the ABORT marker at offset 14 is producer 3000's")

	// Without the log beside it, verification cannot run.
	require.NoError(t, os.Remove(basePath+".log"))
	code, _, errOut := runSeglog(t, "dump", "--verify-index-only", basePath+".txnindex")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "needs the log beside the index")
}

func TestDumpIndexJSON(t *testing.T) {
	_, basePath := franzSegment(t)
	code, out, _ := runSeglog(t, "dump", "--json", basePath+".timeindex")
	require.Equal(t, 0, code)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.NotEmpty(t, lines)
	for _, l := range lines {
		require.True(t, strings.HasPrefix(l, `{"kind":"timeindex","timestamp":`), l)
	}
}
