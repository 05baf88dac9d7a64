package broker

import (
	"fmt"
	"os"
	"testing"

	"github.com/seglog/seglog/tablet"
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

// partitionsOf returns a topic's tablets on b's data directory.
func partitionsOf(b *Broker, topic string) []*tablet.Tablet {
	var out []*tablet.Tablet
	for _, t := range b.m.Tablets() {
		if t.TopicPartition().Topic == topic {
			out = append(out, t)
		}
	}
	return out
}
