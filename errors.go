package seglog

import (
	"errors"
	"fmt"
)

// ErrCorruption is matched (with errors.Is) by every *CorruptionError.
var ErrCorruption = errors.New("seglog: corruption")

// CorruptionError reports damaged stored data: the file, the byte offset in
// that file where the damage was found, and why it is considered damaged.
// It matches ErrCorruption and unwraps to its cause, which is usually a
// package sentinel such as record.ErrCorruptBatch.
type CorruptionError struct {
	// Path is the file that holds the damage, or "" for data not read from
	// a file.
	Path string
	// Offset is the byte position of the damage within the file, or -1
	// when the damage is the file as a whole (missing, or unreadable
	// without a position to point at).
	Offset int64
	// Reason says, in a few words, what is wrong at Offset.
	Reason string
	// Err is the underlying cause, if any.
	Err error
}

func (e *CorruptionError) Error() string {
	where := e.Path
	if where == "" {
		where = "data"
	}
	msg := fmt.Sprintf("seglog: corruption in %s at byte %d: %s", where, e.Offset, e.Reason)
	if e.Offset < 0 {
		msg = fmt.Sprintf("seglog: corruption in %s: %s", where, e.Reason)
	}
	if e.Err != nil && e.Err != ErrCorruption {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Is reports whether target is ErrCorruption.
func (e *CorruptionError) Is(target error) bool { return target == ErrCorruption }

// Unwrap returns the cause.
func (e *CorruptionError) Unwrap() error { return e.Err }
