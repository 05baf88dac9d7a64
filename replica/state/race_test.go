//go:build race

package state

// raceEnabled: the race detector slows the model tenfold; make test runs
// it whole without it (see the Makefile), and a few runs under it.
const raceEnabled = true
