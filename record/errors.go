package record

import (
	"fmt"
	"strings"

	"github.com/seglog/seglog"
)

// Sentinels. Every error this package returns is an *Error that unwraps to
// one of them, so callers match kinds with errors.Is and find the position
// with errors.As.
var (
	// ErrCorruptBatch means the bytes are not a whole, intact batch: a CRC
	// mismatch, a size field below the minimum, or a header that does not
	// fit (Kafka's CorruptRecordException).
	ErrCorruptBatch = seglog.NewKafkaError("record: corrupt batch", 2)
	// ErrInvalidRecord means the batch is intact but its contents break the
	// format or the append rules: malformed records, counts that disagree,
	// control batches from clients (Kafka's InvalidRecordException).
	ErrInvalidRecord = seglog.NewKafkaError("record: invalid record", 87)
	// ErrUnsupportedMagic means the batch uses a message format other than
	// v2 (magic 2).
	ErrUnsupportedMagic = seglog.NewKafkaError("record: unsupported message format", 43)
	// ErrUnknownCompression means the codec id in the attributes is 5, 6 or 7.
	ErrUnknownCompression = seglog.NewKafkaError("record: unknown compression type", 76)
	// ErrDecompressLimit means a compressed batch expands beyond the limit
	// set for decompression.
	ErrDecompressLimit = seglog.NewKafkaError("record: decompressed records exceed the limit", 87)
	// ErrRecordTooLarge means a batch is larger than the maximum message size
	// (Kafka's RecordTooLargeException).
	ErrRecordTooLarge = seglog.NewKafkaError("record: batch larger than the maximum message size", 10)
	// ErrInvalidTimestamp means one or more records carry a timestamp outside
	// the accepted range, or a producer set LogAppendTime (Kafka's
	// InvalidTimestampException).
	ErrInvalidTimestamp = seglog.NewKafkaError("record: invalid timestamp", 32)
)

// Error is a failure at a known byte position. Pos is relative to the bytes
// handed to the function that failed, or a file position for a Scanner.
type Error struct {
	// Pos is the byte position of the problem.
	Pos int64
	// Reason says what is wrong.
	Reason string
	// Err is the kind: one of the package sentinels.
	Err error
	// Records lists per-record failures, when validation rejected records
	// (Kafka's RecordError list); empty otherwise.
	Records []RecordError
}

// RecordError is one rejected record: its index within the batch and why.
type RecordError struct {
	Index   int
	Message string
}

func (e *Error) Error() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%v at byte %d: %s", e.Err, e.Pos, e.Reason)
	for i, r := range e.Records {
		if i == 3 {
			fmt.Fprintf(&sb, " (and %d more)", len(e.Records)-3)
			break
		}
		fmt.Fprintf(&sb, "; record %d: %s", r.Index, r.Message)
	}
	return sb.String()
}

// Unwrap returns the kind.
func (e *Error) Unwrap() error { return e.Err }

func errAt(kind error, pos int64, format string, args ...any) *Error {
	return &Error{Pos: pos, Reason: fmt.Sprintf(format, args...), Err: kind}
}
