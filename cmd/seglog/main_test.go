package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// runSeglog runs the command in process and returns its status and output.
func runSeglog(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// franzLog copies record/testdata/franz.log — batches franz-go encoded, of
// every codec, idempotent, transactional and control — into a temporary
// directory, as 00000000000000000000.log.
func franzLog(t *testing.T) (string, []byte) {
	data, err := os.ReadFile(filepath.Join("..", "..", "record", "testdata", "franz.log"))
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "00000000000000000000.log")
	require.NoError(t, os.WriteFile(path, data, 0o644))
	return path, data
}

func TestDumpFranzLogGolden(t *testing.T) {
	path, _ := franzLog(t)
	code, out, errOut := runSeglog(t, "dump", "--print-data-log", path)
	require.Equal(t, 0, code, errOut)
	out = strings.ReplaceAll(out, path, "FILE")
	golden := filepath.Join("testdata", "franz.dump.txt")
	if *update {
		require.NoError(t, os.WriteFile(golden, []byte(out), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	require.Equal(t, string(want), out)

	lines := strings.Split(strings.TrimSpace(out), "\n")
	var batches, records, commits, aborts int
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "baseOffset:"):
			batches++
			require.Contains(t, l, "isvalid: true")
		case strings.HasPrefix(l, "| offset:"):
			records++
		}
		commits += strings.Count(l, "endTxnMarker: COMMIT coordinatorEpoch: 3")
		aborts += strings.Count(l, "endTxnMarker: ABORT coordinatorEpoch: 3")
	}
	require.Equal(t, 9, batches)
	require.Equal(t, 18, records)
	require.Equal(t, 1, commits)
	require.Equal(t, 1, aborts)
	for _, codec := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		require.Contains(t, out, "compresscodec: "+codec)
	}
	require.Contains(t, out, "producerId: 1000 producerEpoch: 2")
	require.Contains(t, out, "LogAppendTime: 1700000009999")
	require.Contains(t, out, "| offset: 1 CreateTime: 1700000000002 keySize: -1 valueSize: 8 sequence: -1 headerKeys: [trace,empty] payload: null key")
}

func TestDumpFlippedByte(t *testing.T) {
	path, data := franzLog(t)
	data[200] ^= 0x01 // inside the second batch
	require.NoError(t, os.WriteFile(path, data, 0o644))
	code, out, errOut := runSeglog(t, "dump", "--print-data-log", path)
	require.Equal(t, 1, code)
	require.Equal(t, 1, strings.Count(out, "isvalid: false"), out)
	require.Equal(t, 8, strings.Count(out, "isvalid: true"), "the other batches are still shown")
	require.Contains(t, out, "error at position 119: recovery would cut 1066 bytes of corruption from position 119")
	require.Contains(t, out, "at byte 136: crc mismatch", "the damage is named with its file position")
	require.Contains(t, errOut, "2 problem(s) found")
}

func TestDumpTornAndCorruptTails(t *testing.T) {
	path, data := franzLog(t)
	require.NoError(t, os.WriteFile(path, data[:len(data)-10], 0o644))
	code, out, _ := runSeglog(t, "dump", path)
	require.Equal(t, 1, code)
	require.Equal(t, 8, strings.Count(out, "isvalid: true"))
	require.Contains(t, out, "error at position 932: recovery would cut 243 bytes of torn tail from position 932")

	require.NoError(t, os.WriteFile(path, append(bytes.Clone(data), make([]byte, 100)...), 0o644))
	code, out, _ = runSeglog(t, "dump", path)
	require.Equal(t, 1, code)
	require.Equal(t, 9, strings.Count(out, "isvalid: true"))
	require.Contains(t, out, "error at position 1185: recovery would cut 100 bytes of zero tail from position 1185")

	junk := append(make([]byte, 12), bytes.Repeat([]byte{7}, 88)...)
	junk[11] = 5 // a size field of 5, then junk: damage, not a zero tail
	garbage := append(bytes.Clone(data), junk...)
	require.NoError(t, os.WriteFile(path, garbage, 0o644))
	code, out, _ = runSeglog(t, "dump", path)
	require.Equal(t, 1, code)
	require.Contains(t, out, "recovery would cut 100 bytes of corruption from position 1185")

	// Nothing was changed by any of it.
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, garbage, after)
}

func TestDumpJSON(t *testing.T) {
	path, data := franzLog(t)
	data[200] ^= 0x01
	require.NoError(t, os.WriteFile(path, append(data, 1, 2, 3), 0o644))
	code, out, _ := runSeglog(t, "dump", "--json", "--print-data-log", path)
	require.Equal(t, 1, code)
	kinds := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var obj map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &obj), sc.Text())
		kinds[obj["kind"].(string)]++
		if obj["kind"] == "batch" {
			require.Contains(t, obj, "crc")
			require.Contains(t, obj, "isvalid")
		}
	}
	require.Equal(t, 9, kinds["batch"])
	require.Equal(t, 1, kinds["error"], "the torn tail is an error line; the damaged batch shows isvalid false")
	require.Positive(t, kinds["record"])
}

func TestDumpRejects(t *testing.T) {
	code, _, errOut := runSeglog(t, "dump", filepath.Join(t.TempDir(), "x.index"))
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "unsupported file")
	code, _, errOut = runSeglog(t, "dump", filepath.Join(t.TempDir(), "missing.log"))
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "no such file")
	code, _, _ = runSeglog(t, "dump")
	require.Equal(t, 1, code)
}

func TestVersion(t *testing.T) {
	code, out, _ := runSeglog(t, "version")
	require.Equal(t, 0, code)
	require.True(t, strings.HasPrefix(out, "seglog "), out)
	require.Contains(t, out, "record format v2")
}

func TestDemo(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	code, out, errOut := runSeglog(t, "demo", "--dir", dir, "--records", "30000")
	require.Equal(t, 0, code, errOut)
	require.Empty(t, errOut, "no warning")
	for _, want := range []string{
		"12000 records, 12 lz4 batches",
		"→ duplicate: true, answered with the original offsets [8500, 8999]; the log end stays 9000",
		"30 snappy transactions of 300 from 3 producers, 3 aborted",
		"   orders-0        8100 records\n", // 9000 less the 900 of the three aborted transactions
		"endTxnMarker: COMMIT", "endTxnMarker: ABORT", "compresscodec: zstd",
		"truncated (200 bytes): torn tail at position",
		"the .index is missing",
		"clicks-0    log start 0, log end 12000, high watermark 12000",
		"payments-0  log start 0, log end 9000",
		"appends 97, records 30043", // 12 + 18 + 30 transactions + 30 markers, + 7 in kinds; markers count as records
		"duplicates 1, rejections 0",
		"7. Serve the Kafka protocol on 127.0.0.1:",
		"produced 3000 records to kafka",
		"consumed kafka from the beginning: 3000 records",
		"consumed clicks from the beginning: 12000 records",
		"8. Tier: the sealed segments",
		"   clicks-0       12000 records read back from offset 0\n",
		"   orders-0        8100 records read back from offset 0\n",
		"11. Offsets after recovery",
	} {
		require.Contains(t, out, want)
	}
	require.NotContains(t, out, "isvalid: false")
	require.Regexp(t, `clicks-0 +\d+ object\(s\); log start 0, local log start [1-9]\d*, log end 12000`, out)
	// The tour's own directory was closed cleanly and reads back.
	code, out, errOut = runSeglog(t, "consume", "--data-dir", dir, "--topic", "orders", "--isolation", "read-committed",
		"--max-records", "2", "--format", "value")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "1 items\n2 items\n", out)
}

func TestDumpDeepIteration(t *testing.T) {
	path, _ := franzLog(t)
	code, out, _ := runSeglog(t, "dump", "--deep-iteration", path)
	require.Equal(t, 0, code)
	require.Equal(t, 18, strings.Count(out, "| offset: "))
	require.NotContains(t, out, "payload:", "deep iteration without --print-data-log shows no data")
	require.Contains(t, out, "endTxnMarker: ABORT coordinatorEpoch: 3")
}

func TestDumpSnapshot(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "writerstate", "testdata", "00000000000000000046.snapshot"))
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "00000000000000000046.snapshot")
	require.NoError(t, os.WriteFile(path, data, 0o644))
	code, out, _ := runSeglog(t, "dump", path)
	require.Equal(t, 0, code)
	require.Contains(t, out, "producerId: 1000 producerEpoch: 3 coordinatorEpoch: 7 currentTxnFirstOffset: 42 "+
		"lastTimestamp: 1700000000123 firstSequence: 6 lastSequence: 9 lastOffset: 45 offsetDelta: 3 timestamp: 1700000000123\n")
	require.Contains(t, out, "producerId: 2000 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: -1 "+
		"lastTimestamp: 1700000000456 firstSequence: -1 lastSequence: -1 lastOffset: -1 offsetDelta: 0 timestamp: 1700000000456\n")

	data[len(data)-1] ^= 1
	require.NoError(t, os.WriteFile(path, data, 0o644))
	code, out, _ = runSeglog(t, "dump", path)
	require.Equal(t, 1, code)
	require.Contains(t, out, "crc mismatch")
}
