// Package testenv holds the knobs tests share.
package testenv

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// CrashSeeds returns how many seeds a crash loop tries: def, or the
// SEGLOG_CRASH_SEEDS environment variable divided by cost (at least def),
// where cost is how many of the cheapest loop's seeds one seed of this
// loop is worth. make crash sets the variable high; make test leaves it.
func CrashSeeds(t testing.TB, def, cost uint64) uint64 {
	v := os.Getenv("SEGLOG_CRASH_SEEDS")
	if v == "" {
		return def
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		t.Fatalf("SEGLOG_CRASH_SEEDS=%q: %v", v, err)
	}
	return max(def, n/max(cost, 1))
}

// Seed returns the seed of a randomized test: SEGLOG_SEED if set (to
// replay a failure), else the clock. The test logs it.
func Seed(t testing.TB) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("SEGLOG_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("SEGLOG_SEED=%q: %v", v, err)
		}
		seed = n
	}
	t.Logf("seed %d (replay with SEGLOG_SEED=%d)", seed, seed)
	return seed
}
