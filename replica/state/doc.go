// Package state is Kafka's replication rules as a pure state machine, in
// the manner of etcd's raft: no I/O, no goroutines, no clock. Events come
// in as method calls carrying what the caller read (the local log's
// offsets, the time, whether this broker's session is certainly alive);
// what must happen comes out as Actions for the caller to carry out (set
// the high watermark, record a leader epoch, start or stop fetching,
// propose an ISR change to the controller, complete acks=all produces,
// tell the coordinators). The caller (package replica) does the I/O and
// feeds the results back as further events.
//
// Partition is one replica's rules, as leader and as follower:
// leadership taken only by the incarnation a state was written for, the
// high watermark as the least log end over the ISR (frozen below
// min.insync.replicas), the ISR's shrink after replica.lag.time.max.ms
// and its expansion once a follower has the leader's epoch, and the acks
// waiting for the high watermark (Kafka's delayed produce). Truncation
// (TruncationTarget) and the follower's high watermark (FollowerHW) are
// functions of the follower's log and its leader's answer. Elect and
// SetISR are the controller's rules (KRaft's, with KIP-966's Eligible
// Leader Replicas).
//
// The rules are tested as tables (one case per rule and per bug the
// fault checker found) and by a randomized model of three replicas,
// their logs, a controller and a network that delays and reorders
// answers, run through thousands of interleavings of appends, fetches,
// ticks, ISR writes, elections, crashes, power cuts and lost sessions
// against the invariants: no acknowledged offset is lost while a
// majority of the replicas survives, the high watermark a consumer sees
// never goes back, and replicas agree below the high watermark.
package state
