package seglog_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/seglog/seglog"
)

// Message drops the package names sentinels start with wherever a message
// begins, and nothing else.
func TestMessage(t *testing.T) {
	base := errors.New("tablet: invalid config")
	for _, c := range []struct {
		err  error
		want string
	}{
		{base, "invalid config"},
		{fmt.Errorf("opening t-0: %w", base), "opening t-0: invalid config"},
		{fmt.Errorf("f.txt: unsupported file (logfile: not a segment file name)"), "f.txt: unsupported file (not a segment file name)"},
		{fmt.Errorf("seglog: corruption in a: %w", errors.New("record: bad crc")), "corruption in a: bad crc"},
		{errors.New("topic: orders"), "topic: orders"}, // not a package of seglog's
		{errors.New("a tablet: b"), "a tablet: b"},     // not where a message begins
		{nil, ""},
	} {
		if got := seglog.Message(c.err); got != c.want {
			t.Errorf("Message(%q) = %q, want %q", c.err, got, c.want)
		}
	}
}
