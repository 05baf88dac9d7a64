package replica

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseThrottledReplicas(t *testing.T) {
	none, err := ParseThrottledReplicas("")
	require.NoError(t, err)
	require.False(t, none.Has(0, 1))
	all, err := ParseThrottledReplicas("*")
	require.NoError(t, err)
	require.True(t, all.Has(7, 3))
	some, err := ParseThrottledReplicas("0:1, 2:3")
	require.NoError(t, err)
	require.True(t, some.Has(0, 1))
	require.True(t, some.Has(2, 3))
	require.False(t, some.Has(0, 3))
	for _, bad := range []string{"0", "0:x", "a:1", "-1:2", "0:1,"} {
		_, err := ParseThrottledReplicas(bad)
		require.Error(t, err, bad)
	}
}

// A throttle lets a second's bytes through, then holds back until time
// has given back what went over.
func TestQuota(t *testing.T) {
	var q quota
	now := time.Unix(1000, 0)
	q.set(Unthrottled, now)
	q.record(1<<40, now)
	require.False(t, q.exceeded(now), "unthrottled")
	q.set(1000, now)
	require.False(t, q.exceeded(now))
	q.record(1500, now)
	require.True(t, q.exceeded(now))
	require.True(t, q.exceeded(now.Add(400*time.Millisecond)), "500 over, 400 given back")
	require.False(t, q.exceeded(now.Add(600*time.Millisecond)))
	require.False(t, q.exceeded(now.Add(time.Hour)))
	q.record(1000, now.Add(time.Hour))
	require.False(t, q.exceeded(now.Add(time.Hour)), "a full bucket holds one second's bytes, not more")
	q.record(1, now.Add(time.Hour))
	require.True(t, q.exceeded(now.Add(time.Hour)))
}
