//go:build race

package tablet

// Sweep is the stride of a test that sweeps every byte or every step
// (TestCorruptionMatrix, TestCleanCrashAtEveryStep) and the scale of one
// that measures a million records: the race detector slows them several
// times over and what they check is not concurrency, so under it they
// sample; make test runs them whole without it (see the Makefile).
const Sweep = 5
