#!/usr/bin/env bash
# Runs every native fuzz target in the module for the given time each.
set -euo pipefail
fuzztime=${1:-3s}
cd "$(dirname "$0")/.."
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  targets=$(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' || true)
  for t in $targets; do
    echo "fuzz $pkg $t ($fuzztime)"
    go test -run "^$" -fuzz "^${t}\$" -fuzztime "$fuzztime" -fuzzminimizetime 5s "$pkg"
  done
done
