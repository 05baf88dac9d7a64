//go:build !race

package tablet

// Sweep is 1 without the race detector: the sweeps run whole (race_test.go).
const Sweep = 1
