// Package jepsen is seglog's fault checker, modelled on Jepsen's analysis
// of Kafka (its queue and txn workloads): it runs a real cluster — `seglog serve`
// processes over etcd processes, all on loopback — drives it with
// independent clients (franz-go) while a nemesis injects faults on a
// seeded random schedule, records every operation to a history, and
// judges the history, never counters (docs/jepsen.md).
//
//	seed ──► schedule ──► nemesis ──► SIGUSR1 (power cut: only fsynced bytes kept)
//	                          │        SIGUSR2 (crash: the page cache kept)
//	                          │        SIGSTOP past the session (zombie), SIGCONT
//	                          │        etcd: SIGKILL a member, SIGSTOP a majority
//	                          ▼
//	  producers ──► brokers 1..3 ◄── consumers        history.jsonl
//	  (acks=all,      │   ▲            (assign, poll)   invoke / ok / fail / info
//	  idempotent)     ▼   │                              │
//	                etcd 1..3                            ▼
//	                                                check ──► anomalies, report
//
// The anomalies it counts, each with the records involved: lost (an
// acknowledged record never read although later offsets of its partition
// were), unseen (acknowledged, never read, nothing after it read either),
// duplicate (one value at two offsets), inconsistent offsets (one offset
// read with two values, or an acknowledged record read at another offset),
// non-monotonic send (a producer's acknowledged offsets in one partition
// going back), non-monotonic poll and poll skip (a consumer's reads of a
// partition going back, or jumping over records other reads saw); of the
// transactions (txn.go, txncheck.go): aborted read (G1a), intermediate
// read (G1b), cycles of read dependencies (G1c) and regressions of the
// group's committed offsets.
//
// A write whose answer was lost (a timeout, a connection cut) is "info":
// neither lost nor duplicated if it never appears, but a value appearing
// twice is a duplicate whatever its answer.
package jepsen
