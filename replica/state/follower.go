package state

// EpochStart is an entry of a log's leader-epoch cache: the epoch, and
// the offset of its first record.
type EpochStart struct {
	Epoch int32
	Start int64
}

// TruncationTarget is where a follower truncates its log (of epochs,
// ending at logEnd, with high watermark hw) given its leader's answer
// (leaderEpoch, leaderEnd) for the follower's latest epoch: the lower of
// where that epoch ends in the leader's log and in its own — so the
// follower keeps only what agrees with the leader. An undefined answer
// (the leader knows no epoch as old) truncates to the high watermark:
// what is above it is not committed. The result may be at or above
// logEnd: nothing to truncate then.
func TruncationTarget(epochs []EpochStart, logEnd, hw int64, leaderEpoch int32, leaderEnd int64) int64 {
	if leaderEpoch < 0 || leaderEnd < 0 {
		return hw
	}
	local := logEnd
	for _, e := range epochs {
		if e.Epoch > leaderEpoch {
			local = e.Start
			break
		}
	}
	return min(leaderEnd, local)
}

// FollowerHW is a follower's high watermark after it appended what its
// leader sent with the leader's high watermark leaderHW: the leader's,
// never past the follower's own log end; ok when it is higher than the
// follower's (it never goes back).
func FollowerHW(leaderHW int64, l Local) (hw int64, ok bool) {
	hw = min(leaderHW, l.LogEnd)
	return hw, hw > l.HW
}

// FollowerLogStart is a follower's log start after a fetch that told the
// leader's, leaderStart: the leader's, never past the follower's high
// watermark; ok when it is later than the follower's.
func FollowerLogStart(leaderStart int64, l Local) (start int64, ok bool) {
	start = min(leaderStart, l.HW)
	return start, start > l.LogStart
}

// RestartAt says whether a follower starts its log over at base, the base
// offset of the first batch its leader sent, when that batch begins below
// the follower's log end: it does when its log is empty (log start = log
// end) and the batch reaches the log end — the leader's log start fell
// inside that batch (DeleteRecords), and the follower, started at the
// leader's log start, must take the batch whole (Kafka's
// Partition.appendRecordsToFollowerOrFutureReplica). Any other batch
// below the log end means the logs diverge: the follower truncates.
func RestartAt(base, last int64, l Local) bool {
	return l.LogStart == l.LogEnd && base < l.LogEnd && last >= l.LogEnd
}
