package cleaner

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The map keeps the last offset of each key, grows as keys come, and
// refuses a new key past its bound (changing nothing).
func TestOffsetMap(t *testing.T) {
	m := NewOffsetMap(100_000*EntryBytes, 0.9)
	require.Equal(t, 90_000, m.Limit())
	require.Equal(t, int64(initialSlots*EntryBytes), m.Bytes(), "small until keys come")
	require.Equal(t, int64(-1), m.Get([]byte("nope")))
	for i := range 50_000 {
		require.True(t, m.Put(fmt.Appendf(nil, "k%d", i%20_000), int64(i)))
	}
	require.Equal(t, 20_000, m.Len())
	for i := range 20_000 {
		last := int64(40_000 + i) // put at i, i+20,000 and (below 10,000) i+40,000
		if i >= 10_000 {
			last = int64(20_000 + i)
		}
		require.Equal(t, last, m.Get(fmt.Appendf(nil, "k%d", i)), "k%d", i)
	}
	require.Greater(t, m.Bytes(), int64(initialSlots*EntryBytes))
	require.LessOrEqual(t, m.Bytes(), int64(100_000*EntryBytes))

	for i := 20_000; m.Len() < m.Limit(); i++ {
		require.True(t, m.Put(fmt.Appendf(nil, "k%d", i), int64(i)))
	}
	require.Equal(t, m.Limit(), m.Len())
	require.False(t, m.Put([]byte("one more"), 1), "a new key past the bound")
	require.True(t, m.Put([]byte("k7"), 123_456), "an old key is updated")
	require.Equal(t, int64(123_456), m.Get([]byte("k7")))
	require.Equal(t, int64(-1), m.Get([]byte("one more")))

	m.Clear()
	require.Zero(t, m.Len())
	require.Equal(t, int64(-1), m.Get([]byte("k7")))
}

// A tiny map still holds a key and ends every probe.
func TestOffsetMapTiny(t *testing.T) {
	m := NewOffsetMap(1, 1)
	require.Equal(t, 1, m.Limit())
	require.True(t, m.Put([]byte("a"), 1))
	require.False(t, m.Put([]byte("b"), 2))
	require.Equal(t, int64(-1), m.Get([]byte("b")))
}

// The throttler sleeps when the bytes run ahead of the rate.
func TestThrottler(t *testing.T) {
	now := time.Unix(0, 0)
	var slept time.Duration
	th := NewThrottler(1000) // 1000 bytes a second
	th.start, th.now = now, func() time.Time { return now.Add(slept) }
	th.sleep = func(d time.Duration) { slept += d }
	th.wait(5) // 5 ms worth: below the 10 ms slack
	require.Zero(t, slept)
	th.wait(495) // 500 bytes: half a second
	require.Equal(t, 500*time.Millisecond, slept)
	require.Nil(t, NewThrottler(0), "no rate, no throttle")
	var none *Throttler
	none.wait(1 << 30) // a nil throttler waits for nothing
}
