package seglog

import (
	"errors"
	"fmt"
	"regexp"
)

// ErrCorruption is matched (with errors.Is) by every *CorruptionError.
var ErrCorruption = NewKafkaError("seglog: corruption", 56) // KAFKA_STORAGE_ERROR

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

// KafkaError is a sentinel error that carries the Kafka error code a
// broker answers for it: the engine's and the coordinators' sentinels are
// made with NewKafkaError, and KafkaCode finds the code of any error that
// wraps one. The code is part of the error's identity, kept with it where
// it is defined, not found from its name.
type KafkaError struct {
	msg  string
	code int16
}

// NewKafkaError returns a sentinel error with the message and the Kafka
// error code (kerr's numbering: 1 OFFSET_OUT_OF_RANGE, 3
// UNKNOWN_TOPIC_OR_PARTITION, …; -1 UNKNOWN_SERVER_ERROR).
func NewKafkaError(msg string, code int16) error { return &KafkaError{msg: msg, code: code} }

func (e *KafkaError) Error() string { return e.msg }

// KafkaCode is the error's Kafka error code.
func (e *KafkaError) KafkaCode() int16 { return e.code }

// UnknownServerError is Kafka's UNKNOWN_SERVER_ERROR, the code of an error
// that carries none.
const UnknownServerError int16 = -1

// KafkaCode returns the Kafka error code of err: 0 for nil, the code of
// the first error in its chain that has a KafkaCode method, and
// UnknownServerError when none has.
func KafkaCode(err error) int16 {
	if err == nil {
		return 0
	}
	var k interface{ KafkaCode() int16 }
	if errors.As(err, &k) {
		return k.KafkaCode()
	}
	return UnknownServerError
}

// packagePrefix matches the package names seglog's errors start with
// ("tablet: ", "checkpoint: ", …), where a message begins: at its start or
// after ": ", "(" or a newline.
var packagePrefix = regexp.MustCompile(`(^|: |\(|\n)(seglog|tablet|checkpoint|vfs|recovery|segment|tiering|record|mmapfile|offsetindex|timeindex|txnindex|writerstate|leaderepoch|logfile|cleaner|group|txn|store|broker|auth|server|snappy): `)

// Message is err's text for a person or a client rather than a Go
// program: without the package names the sentinels start with, which mean
// nothing outside the code ("tablet: invalid config: …" reads "invalid
// config: …"). The sentinels keep them, as Go's convention is; a command's
// output and a broker's error messages use Message.
func Message(err error) string {
	if err == nil {
		return ""
	}
	return Humanize(err.Error())
}

// Humanize is Message for an error's text.
func Humanize(msg string) string {
	for {
		next := packagePrefix.ReplaceAllString(msg, "$1")
		if next == msg {
			return msg
		}
		msg = next
	}
}
