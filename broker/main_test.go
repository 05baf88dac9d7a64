package broker

import (
	"fmt"
	"os"
	"testing"
)

// TestMain fails the package if any test made the broker answer an error
// code Kafka does not define (knownCodes sent UNKNOWN_SERVER_ERROR in its
// place): every code the broker sends across its tests is one of Kafka's;
// and if any request's handler panicked (the broker recovers, closing the
// connection).
func TestMain(m *testing.M) {
	code := m.Run()
	if n := unknownCodes.Load(); n > 0 && code == 0 {
		fmt.Fprintf(os.Stderr, "FAIL: the broker set %d error codes Kafka does not define\n", n)
		code = 1
	}
	if n := recoveredPanics.Load(); n > 0 && code == 0 {
		fmt.Fprintf(os.Stderr, "FAIL: %d requests' handlers panicked\n", n)
		code = 1
	}
	os.Exit(code)
}
