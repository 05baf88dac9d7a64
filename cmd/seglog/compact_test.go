package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// seglog compact cleans a compacted topic, offsets shows the cleaner's
// sections, the log reads back the last value of every key, verify passes.
func TestCompactCommand(t *testing.T) {
	d := t.TempDir()
	var sb strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&sb, "k%d:v%d\n", i%50, i)
	}
	code, _, errOut := runWithStdin(t, sb.String(), "produce", "--data-dir", d, "--topic", "changes",
		"--key-separator", ":", "--batch-records", "50", "--config", "cleanup.policy=compact", "--config", "segment.bytes=8192")
	require.Equal(t, 0, code, errOut)
	code, _, errOut = runWithStdin(t, "a:b\n", "produce", "--data-dir", d, "--topic", "plain", "--key-separator", ":")
	require.Equal(t, 0, code, errOut)

	var before struct {
		Cleaner struct {
			Checkpoint int64   `json:"checkpoint"`
			DirtyRatio float64 `json:"dirtyRatio"`
			DirtyBytes int64   `json:"dirtyBytes"`
		} `json:"cleaner"`
	}
	code, out, errOut := runSeglog(t, "offsets", "--data-dir", d, "--topic", "changes")
	require.Equal(t, 0, code, errOut)
	require.NoError(t, json.Unmarshal([]byte(out), &before))
	require.Equal(t, int64(-1), before.Cleaner.Checkpoint)
	require.Equal(t, 1.0, before.Cleaner.DirtyRatio)
	code, out, _ = runSeglog(t, "offsets", "--data-dir", d, "--topic", "plain")
	require.Equal(t, 0, code)
	require.NotContains(t, out, `"cleaner"`, "a delete topic has no cleaner section")

	code, out, errOut = runSeglog(t, "compact", "--data-dir", d, "--json")
	require.Equal(t, 0, code, errOut)
	var reports []struct {
		Topic          string `json:"topic"`
		RecordsRemoved int64  `json:"recordsRemoved"`
		RecordsRead    int64  `json:"recordsRead"`
		BytesWritten   int64  `json:"bytesWritten"`
		CleanedTo      int64  `json:"cleanedTo"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &reports))
	require.Len(t, reports, 1, "only the compacted topic: %s", out)
	r := reports[0]
	require.Equal(t, "changes", r.Topic)
	require.Equal(t, r.RecordsRead-50, r.RecordsRemoved, "all but one record per key of the cleaned section")
	require.Positive(t, r.BytesWritten)

	code, out, errOut = runSeglog(t, "consume", "--data-dir", d, "--topic", "changes")
	require.Equal(t, 0, code, errOut)
	last := map[string]string{}
	n := 0
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var rec struct{ Key, Value string }
		require.NoError(t, json.Unmarshal([]byte(l), &rec))
		last[rec.Key] = rec.Value
		n++
	}
	require.Len(t, last, 50)
	for i := 2950; i < 3000; i++ {
		require.Equal(t, fmt.Sprintf("v%d", i), last[fmt.Sprintf("k%d", i%50)])
	}
	require.Less(t, n, 3000-int(r.RecordsRemoved)+1)

	code, out, errOut = runSeglog(t, "offsets", "--data-dir", d, "--topic", "changes")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, fmt.Sprintf(`"checkpoint":%d`, r.CleanedTo))
	code, out, errOut = runSeglog(t, "verify", "--data-dir", d)
	require.Equal(t, 0, code, out+errOut)

	code, _, errOut = runSeglog(t, "compact", "--data-dir", d, "--topic", "plain")
	require.NotEqual(t, 0, code)
	require.Contains(t, errOut, "cleanup.policy does not hold compact")
	code, out, errOut = runSeglog(t, "compact", "--data-dir", d)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "nothing dirty")
}
