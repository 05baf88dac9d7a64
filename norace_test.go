//go:build !race

package seglog_test

// raced is false without the race detector (race_test.go).
const raced = false
