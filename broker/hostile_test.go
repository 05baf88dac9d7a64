package broker

import (
	"context"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sys/unix"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/tablet"
)

// count is the number of lines containing s.
func (l *lockedBuffer) count(s string) int {
	return strings.Count(l.String(), s)
}

// loggedBroker is a broker on a new data directory serving ln, logging
// (text) to the returned buffer.
func loggedBroker(t *testing.T, opts Options, ln net.Listener) (*Broker, *lockedBuffer, <-chan error) {
	t.Helper()
	m, err := tablet.OpenManager(nil, filepath.Join(t.TempDir(), "data"), tablet.ManagerOptions{Tablet: tablet.Options{Logger: quiet}})
	require.NoError(t, err)
	logs := &lockedBuffer{}
	opts.Logger = slog.New(slog.NewTextHandler(logs, nil))
	b, err := compose(m, opts)
	require.NoError(t, err)
	served := serveTest(t, b, m, ln)
	return b, logs, served
}

// flakyListener fails its first accepts as a process out of descriptors
// does.
type flakyListener struct {
	net.Listener
	fail atomic.Int32
}

func (l *flakyListener) Accept() (net.Conn, error) {
	if l.fail.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.Addr(), Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// apiVersionsAnswered sends ApiVersions v0 on a new connection and reports
// whether an answer came.
func apiVersionsAnswered(t *testing.T, addr string) bool {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	_, err = c.Write([]byte{0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 1, 0xff, 0xff})
	require.NoError(t, err)
	var size [4]byte
	_, err = io.ReadFull(c, size[:])
	return err == nil
}

// Accept failing (EMFILE) does not end the broker: it backs off, retries,
// counts each failure, and serves the connection waiting once accept works
// again.
func TestAcceptErrorsAreRetried(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ln := &flakyListener{Listener: inner}
	ln.fail.Store(6)
	b, logs, served := loggedBroker(t, Options{}, ln)
	require.True(t, apiVersionsAnswered(t, inner.Addr().String()))
	require.Equal(t, 6.0, testutil.ToFloat64(b.metrics.acceptErrors))
	require.Equal(t, 6, logs.count("accepting a connection failed"))
	require.Len(t, served, 0, "Serve is still running")
}

// max.connections' default leaves half the descriptor limit to the data
// directory.
func TestDefaultMaxConnections(t *testing.T) {
	var l syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l))
	var o Options
	o.ensureDefaults()
	require.Equal(t, max(int(min(l.Cur, 1<<30)/2), 64), o.MaxConnections)
	o = Options{MaxConnections: -1}
	o.ensureDefaults()
	require.Equal(t, -1, o.MaxConnections, "negative: no limit")
}

// Five hundred connections sending garbage as fast as they can write a
// bounded log: at most ten lines a second of the message (internal/ratelog's
// tests show the count of those dropped).
func TestBadConnectionLogsAreRateLimited(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	b, logs, _ := loggedBroker(t, Options{}, ln)
	start := time.Now()
	const conns = 500
	for range conns {
		c, err := net.Dial("tcp", ln.Addr().String())
		require.NoError(t, err)
		_, err = c.Write([]byte{0, 0, 0, 3, 1, 2, 3})
		require.NoError(t, err)
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		_, err = c.Read(make([]byte, 1))
		require.ErrorIs(t, err, io.EOF)
		c.Close()
	}
	elapsed := time.Since(start)
	require.Equal(t, float64(conns), testutil.ToFloat64(b.metrics.closedBad))
	lines := logs.count(`msg="closing the connection"`)
	require.Positive(t, lines)
	require.LessOrEqual(t, lines, 10*(int(elapsed/time.Second)+1), "at most ten a second")
}

// Every file a broker creates in its data directory — the producer id
// block, the coordinators' topics, checkpoints — has the directory's
// modes (0640, directories 0750, under a 022 umask).
func TestBrokerFileModes(t *testing.T) {
	old := unix.Umask(0o022)
	defer unix.Umask(old)
	dir := filepath.Join(t.TempDir(), "data")
	m, err := tablet.OpenManager(nil, dir, tablet.ManagerOptions{Tablet: tablet.Options{Logger: quiet}})
	require.NoError(t, err)
	b, err := compose(m, Options{Logger: quiet})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- b.Serve(ln) }()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(ln.Addr().String()), kgo.AllowAutoTopicCreation(),
		kgo.ConsumerGroup("modes"), kgo.ConsumeTopics("modes"))
	require.NoError(t, err)
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "modes", Value: []byte("v")}).FirstErr())
	require.Len(t, cl.PollRecords(ctx, 1).Records(), 1)
	require.NoError(t, cl.CommitUncommittedOffsets(ctx))
	cl.Close()
	require.NoError(t, b.Close())
	require.ErrorIs(t, <-served, ErrClosed)
	require.NoError(t, m.Close())

	seen := map[string]bool{}
	require.NoError(t, filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		require.NoError(t, err)
		info, err := e.Info()
		require.NoError(t, err)
		want := os.FileMode(0o640)
		if e.IsDir() {
			want = 0o750
		}
		require.Equal(t, want, info.Mode().Perm(), path)
		seen[filepath.Base(path)] = true
		return nil
	}))
	require.True(t, seen[checkpoint.ProducerIDBlockFile], "the producer id block was written")
	require.True(t, seen["__consumer_offsets-0"], "the group coordinator's topic")
}

// A listener bound to every interface advertises the host's name, not
// 0.0.0.0 or ::, which would send a client to itself.
func TestAdvertisedForEveryInterface(t *testing.T) {
	name, err := os.Hostname()
	require.NoError(t, err)
	for _, ip := range []net.IP{net.IPv4zero, net.IPv6unspecified} {
		host, port := advertisedFor(&net.TCPAddr{IP: ip, Port: 9092})
		require.Equal(t, name, host)
		require.Equal(t, int32(9092), port)
	}
	host, _ := advertisedFor(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9092})
	require.Equal(t, "127.0.0.1", host)
}
