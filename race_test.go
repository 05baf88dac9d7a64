//go:build race

package seglog_test

// raced: the race detector is on. TestDocReferences, regular expressions
// over every file of the repository, runs ten times slower under it and
// checks no concurrency: make test runs it in its lane without the race
// detector instead (see the Makefile).
const raced = true
