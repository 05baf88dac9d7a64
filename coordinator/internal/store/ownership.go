package store

import "github.com/twmb/franz-go/pkg/kerr"

// A cluster's coordinator coordinates the keys of the internal topic's
// partitions its broker leads: a partition is Loading from when it takes
// the leadership until its keys are replayed, then Owned.
const (
	Unowned = iota
	Loading
	Owned
)

// Ownership is the partitions a coordinator coordinates, by state; nil on
// a single node, which owns every partition.
type Ownership map[int32]int

// Code is Kafka's answer for a key of partition p: 0 when it is owned,
// COORDINATOR_LOAD_IN_PROGRESS while it loads, NOT_COORDINATOR
// otherwise.
func (o Ownership) Code(p int32) int16 {
	if o == nil {
		return 0
	}
	switch o[p] {
	case Owned:
		return 0
	case Loading:
		return kerr.CoordinatorLoadInProgress.Code
	}
	return kerr.NotCoordinator.Code
}

// LoadingIfElected reports whether a code of Code for a partition the cluster has
// just named this broker the leader of is really a load about to begin:
// NOT_COORDINATOR becomes COORDINATOR_LOAD_IN_PROGRESS when elected says
// so (asked only then).
func LoadingIfElected(code int16, elected func() bool) int16 {
	if code == kerr.NotCoordinator.Code && elected() {
		return kerr.CoordinatorLoadInProgress.Code
	}
	return code
}
