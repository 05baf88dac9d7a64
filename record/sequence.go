package record

import "math"

// IncrementSequence returns seq + n, wrapping from MaxInt32 to 0 as Kafka
// does: IncrementSequence(MaxInt32, 1) = 0.
func IncrementSequence(seq, n int32) int32 {
	if seq > math.MaxInt32-n {
		return n - (math.MaxInt32 - seq) - 1
	}
	return seq + n
}

// DecrementSequence returns seq - n, wrapping from 0 to MaxInt32:
// DecrementSequence(0, 1) = MaxInt32.
func DecrementSequence(seq, n int32) int32 {
	if seq < n {
		return math.MaxInt32 - (n - seq) + 1
	}
	return seq - n
}
