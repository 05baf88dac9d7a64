// Package invariants switches on the expensive consistency checks the
// packages carry: they run under the invariants build tag and under -race
// (so in make test), and cost nothing otherwise.
package invariants
