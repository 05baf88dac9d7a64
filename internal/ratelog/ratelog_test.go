package ratelog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// lines decodes a JSON log.
func lines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m))
		out = append(out, m)
	}
	return out
}

// Twenty thousand lines of one message in a second write Burst; the first
// line of the next second counts what was dropped. Another message has its
// own budget, and loggers derived with With share theirs.
func TestBurstPerMessage(t *testing.T) {
	var buf bytes.Buffer
	now := time.Unix(1000, 0)
	log := slog.New(New(slog.NewJSONHandler(&buf, nil), Options{Burst: 5, Clock: func() time.Time { return now }}))
	for i := range 20000 {
		log.With("remote", fmt.Sprint("127.0.0.1:", i)).Warn("closing the connection", "i", i)
	}
	log.Warn("another message")
	got := lines(t, &buf)
	require.Len(t, got, 6)
	for i, l := range got[:5] {
		require.Equal(t, float64(i), l["i"])
		require.NotContains(t, l, DroppedKey)
	}
	require.Equal(t, "another message", got[5]["msg"])

	buf.Reset()
	now = now.Add(time.Second)
	log.Warn("closing the connection", "i", -1)
	got = lines(t, &buf)
	require.Len(t, got, 1)
	require.Equal(t, float64(20000-5), got[0][DroppedKey])
}

// A disabled level costs nothing and counts nothing.
func TestDisabledLevel(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}), Options{Burst: 1}))
	for range 100 {
		log.Debug("noise")
	}
	log.Info("noise")
	got := lines(t, &buf)
	require.Len(t, got, 1)
	require.NotContains(t, got[0], DroppedKey)
}

// Messages beyond maxMessages share one budget: the tracked set is bounded.
func TestMessagesBounded(t *testing.T) {
	var buf bytes.Buffer
	h := New(slog.NewJSONHandler(&buf, nil), Options{Burst: 1}).(*handler)
	log := slog.New(h)
	for i := range 3 * maxMessages {
		log.Info(fmt.Sprint("message ", i))
	}
	require.Len(t, h.st.by, maxMessages)
	require.Len(t, lines(t, &buf), maxMessages+1)
}
