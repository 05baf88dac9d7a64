package recovery

import "fmt"

// Action is what recovery did to a file.
type Action string

// Actions.
const (
	Deleted       Action = "deleted"
	Renamed       Action = "renamed"
	Truncated     Action = "truncated"
	RebuiltIndex  Action = "rebuilt indexes"
	CreatedIndex  Action = "created empty index"
	Created       Action = "created"
	Ignored       Action = "ignored"
	Recovered     Action = "recovered"
	StateReset    Action = "reset writer state"
	CheckpointBad Action = "ignored checkpoint"
	Gap           Action = "offsets missing"
	NotWritten    Action = "not written"
	// Lost: offsets below the recovery point — made durable, so never a
	// power cut's loss — are not in the log any more: damage.
	Lost Action = "durable offsets lost"
)

// Change is one thing recovery did: to which file, what, how much was
// dropped, and why.
type Change struct {
	File   string
	Action Action
	// Bytes is the number of bytes dropped (truncated or deleted), or 0.
	Bytes int64
	// FromOffset and ToOffset bound the offsets dropped, [FromOffset,
	// ToOffset), when offsets were dropped; both 0 otherwise.
	FromOffset, ToOffset int64
	Why                  string
}

func (c Change) String() string {
	s := fmt.Sprintf("%s: %s", c.File, c.Action)
	if c.Bytes > 0 {
		s += fmt.Sprintf(" (%d bytes)", c.Bytes)
	}
	if c.ToOffset > c.FromOffset {
		s += fmt.Sprintf(" (offsets [%d, %d))", c.FromOffset, c.ToOffset)
	}
	if c.Why != "" {
		s += ": " + c.Why
	}
	return s
}
