package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog/internal/testpki"
)

// servedAddrs reads serve's n listener lines and returns their addresses
// by listener name.
func servedAddrs(t *testing.T, cmd *exec.Cmd, lines *bufio.Scanner, n int) map[string]string {
	t.Helper()
	addrs := map[string]string{}
	for range n {
		require.True(t, lines.Scan(), "serve printed nothing: %s", cmd.Stderr)
		f := strings.Fields(strings.TrimPrefix(lines.Text(), "serving the Kafka protocol on "))
		addrs[strings.Trim(f[1], "(,")] = f[0]
	}
	return addrs
}

// seglog serve with a plaintext and a TLS listener (listeners,
// ssl.certificate.location, ssl.key.location): kcat produces over TLS
// and consumes over plaintext, each listener advertising itself; SIGHUP
// reloads the certificate; a SASL listener is refused at start.
func TestServeTLSListener(t *testing.T) {
	t.Parallel()
	kcat := "/usr/bin/kcat"
	if _, err := os.Stat(kcat); err != nil {
		t.Skipf("kcat is not installed (make test installs it with apt-get): %v", err)
	}
	pki := testpki.New(t)
	cert, key := pki.Issue(t, "server", 10, "broker", true)
	d := t.TempDir() + "/data"
	cmd, lines := startServe(t, "--data-dir", d, "--config", "listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
		"--config", "ssl.certificate.location="+cert, "--config", "ssl.key.location="+key)
	addrs := servedAddrs(t, cmd, lines, 2)
	require.Contains(t, addrs, "SSL")
	require.Contains(t, addrs, "PLAINTEXT")
	run := func(addr string, stdin string, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a deadline, not a wait
		defer cancel()
		c := exec.CommandContext(ctx, kcat, append([]string{"-b", addr}, args...)...)
		c.Stdin = strings.NewReader(stdin)
		out, err := c.CombinedOutput()
		require.NoError(t, err, "kcat %v: %s", args, out)
		return string(out)
	}
	var in strings.Builder
	for i := range 20 {
		fmt.Fprintf(&in, "secure %d\n", i)
	}
	run(addrs["SSL"], in.String(), "-P", "-t", "tls", "-X", "security.protocol=ssl", "-X", "ssl.ca.location="+pki.CAFile)
	out := run(addrs["PLAINTEXT"], "", "-C", "-t", "tls", "-o", "beginning", "-e", "-q")
	require.Equal(t, in.String(), out, "written over TLS, read over plaintext")
	out = run(addrs["SSL"], "", "-C", "-t", "tls", "-o", "beginning", "-e", "-q", "-X", "security.protocol=ssl",
		"-X", "ssl.ca.location="+pki.CAFile)
	require.Equal(t, in.String(), out, "and over TLS")

	serial := func() int64 {
		c, err := tls.Dial("tcp", addrs["SSL"], &tls.Config{RootCAs: pki.Pool})
		require.NoError(t, err)
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
	}
	require.Equal(t, int64(10), serial())
	pki.Issue(t, "server", 11, "broker", true)
	require.NoError(t, cmd.Process.Signal(syscall.SIGHUP))
	// The reload is done when serve logs it; a connection after that has
	// the new certificate. (Reading stderr as it comes would race with
	// the buffer; the serial is asked until it changes, each ask a full
	// handshake — no sleep.)
	for tries := 0; serial() != 11; tries++ {
		require.Less(t, tries, 10000, "the certificate was never reloaded")
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait(), "%s", cmd.Stderr)
	require.Contains(t, cmd.Stderr.(interface{ String() string }).String(), "reloaded the TLS files")

	code, _, errOut := runSeglog(t, "serve", "--data-dir", t.TempDir()+"/d2", "--config", "listeners=SASL_SSL://127.0.0.1:0")
	require.NotZero(t, code)
	require.Contains(t, errOut, "needs ssl.certificate.location", "SASL_SSL is TLS too")
}
