#!/usr/bin/env bash
# The long crash runs (make crash): 400 SIGKILLs of child processes (100 of
# `seglog produce --sync`, 100 of the mixed library workload, 100 of
# `seglog tier`, 100 of `seglog serve` under an idempotent acks=-1
# producer, 100 faults of a three-broker cluster: SIGKILLs of leaders and
# of the controller, SIGSTOPs of leaders past their session; an etcd member
# killed under the cluster's metadata), power cuts
# through the crash simulator, and the recovery fault loops with many seeds.
# It prints each harness's summary (kills, acknowledged records, lost) and
# fails if any test does.
set -euo pipefail
cd "$(dirname "$0")/.."
kills=${SEGLOG_KILLS:-100}
seeds=${SEGLOG_CRASH_SEEDS:-5000}
# The cluster's kill loop runs over Debian's etcd-server (an external etcd,
# as a deployment has), installed here if missing.
if [ ! -x /usr/bin/etcd ]; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server) >/dev/null
fi
export SEGLOG_ETCD=/usr/bin/etcd
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
SEGLOG_KILLS=$kills SEGLOG_CRASH_SEEDS=$seeds go test -count=1 -timeout 60m -v \
  -run 'Crash|FaultLoop|Kill|PowerLoss' ./... >"$log" 2>&1 || status=$?
grep -E '^(--- FAIL|FAIL|ok )|kills, |lives, |seed [0-9]+ \(replay' "$log" | grep -v '^ok .*no tests to run' || true
if [ "$status" -ne 0 ]; then
  echo "crash: FAILED (full log follows)"
  grep -v '^=== ' "$log" | tail -200
fi
exit "$status"
