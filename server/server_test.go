package server

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog/checkpoint"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func config(dir string) Config {
	return Config{DataDir: dir, Listeners: []Listener{{Name: "PLAINTEXT", Address: "127.0.0.1:0"}}, MetricsAddr: "127.0.0.1:0", Logger: quiet}
}

// Run serves until its context ends, then closes the data directory
// cleanly (the next start skips recovery) and releases every address.
func TestRunClosesCleanly(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	s, err := New(context.Background(), config(dir))
	require.NoError(t, err)
	addr, metrics := s.Listeners()[0].Addr.String(), s.MetricsAddr().String()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err, "bound once New returns")
	require.NoError(t, c.Close())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	cancel()
	require.NoError(t, <-done)
	_, err = os.Stat(filepath.Join(dir, checkpoint.CleanShutdownFile))
	require.NoError(t, err, "closed cleanly")
	for _, a := range []string{addr, metrics} {
		ln, err := net.Listen("tcp", a)
		require.NoError(t, err, "%s released", a)
		require.NoError(t, ln.Close())
	}
	require.NoError(t, s.Close(), "Close after Run is a no-op")
}

// A node.id other than the data directory's is refused, as Kafka refuses
// it; what New opened is closed (the directory's lock released, the
// listeners unbound).
func TestNewRefusesAnotherNodeID(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	s, err := New(context.Background(), config(dir))
	require.NoError(t, err)
	require.NoError(t, s.Close())

	other := int32(7)
	cfg := config(dir)
	cfg.NodeID = &other
	_, err = New(context.Background(), cfg)
	require.ErrorContains(t, err, "holds node 0")

	zero := int32(0)
	cfg.NodeID = &zero
	s, err = New(context.Background(), cfg)
	require.NoError(t, err, "the lock was released")
	require.NoError(t, s.Close())
}

// A listener that cannot be bound fails New, and the data directory is
// closed again.
func TestNewFailsOnABusyAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	dir := filepath.Join(t.TempDir(), "data")
	cfg := config(dir)
	cfg.Listeners[0].Address = ln.Addr().String()
	_, err = New(context.Background(), cfg)
	require.Error(t, err)
	s, err := New(context.Background(), config(dir))
	require.NoError(t, err, "the data directory was closed")
	require.NoError(t, s.Close())
}
