package broker

import (
	"context"
	"crypto/tls"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/seglog/seglog/internal/testpki"
)

// serveTLS serves a broker on a plaintext and a TLS listener.
func serveTLS(t *testing.T, o TLSOptions) (b *Broker, plain, secure string, tl *TLS) {
	b, _, plain = testBroker(t, Options{})
	tl, err := NewTLS(o)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = b.ServeListener(tls.NewListener(ln, tl.Config()), Listener{Name: "SSL"}) }()
	return b, plain, ln.Addr().String(), tl
}

// TLS: franz-go produces and consumes through a TLS listener beside a
// plaintext one (each connection is told its own listener's address);
// with ssl.client.auth=required a client without a certificate is refused;
// TLS 1.1 is refused; Reload makes new connections get the new
// certificate.
func TestTLSListener(t *testing.T) {
	pki := testpki.New(t)
	cert, key := pki.Issue(t, "server", 10, "broker", true)
	_, _, secure, tl := serveTLS(t, TLSOptions{CertFile: cert, KeyFile: key})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(secure), kgo.DialTLSConfig(&tls.Config{RootCAs: pki.Pool}),
		kgo.AllowAutoTopicCreation(), kgo.ConsumeTopics("secure"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100*time.Millisecond))
	require.NoError(t, err)
	defer cl.Close()
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "secure", Value: []byte("over TLS")}).FirstErr())
	fs := cl.PollFetches(ctx)
	require.NoError(t, ctx.Err())
	require.Equal(t, 1, fs.NumRecords())
	require.Equal(t, "over TLS", string(fs.Records()[0].Value))

	_, err = tls.Dial("tcp", secure, &tls.Config{RootCAs: pki.Pool, MaxVersion: tls.VersionTLS11})
	require.Error(t, err, "TLS 1.1 is refused")

	serial := func() int64 {
		c, err := tls.Dial("tcp", secure, &tls.Config{RootCAs: pki.Pool})
		require.NoError(t, err)
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
	}
	require.Equal(t, int64(10), serial())
	pki.Issue(t, "server", 11, "broker", true) // the same files, a new certificate
	require.NoError(t, tl.Reload())
	require.Equal(t, int64(11), serial(), "reloaded")
	require.NoError(t, os.WriteFile(cert, []byte("garbage"), 0o600))
	require.Error(t, tl.Reload(), "a bad file is an error")
	require.Equal(t, int64(11), serial(), "and the certificate in use stays")
}

func TestTLSClientAuth(t *testing.T) {
	pki := testpki.New(t)
	cert, key := pki.Issue(t, "server", 10, "broker", true)
	ccert, ckey := pki.Issue(t, "client", 20, "alice", false)
	_, err := NewTLS(TLSOptions{CertFile: cert, KeyFile: key, ClientAuth: "required"})
	require.ErrorContains(t, err, "ssl.ca.location", "client auth needs the CA")
	_, _, secure, _ := serveTLS(t, TLSOptions{CertFile: cert, KeyFile: key, CAFile: pki.CAFile, ClientAuth: "required"})

	c, err := tls.Dial("tcp", secure, &tls.Config{RootCAs: pki.Pool})
	if err == nil {
		// TLS 1.3 reports the refusal at the first read.
		_, err = c.Read(make([]byte, 1))
		c.Close()
	}
	require.Error(t, err, "no client certificate")
	pair, err := tls.LoadX509KeyPair(ccert, ckey)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(secure), kgo.DialTLSConfig(&tls.Config{RootCAs: pki.Pool, Certificates: []tls.Certificate{pair}}),
		kgo.AllowAutoTopicCreation())
	require.NoError(t, err)
	defer cl.Close()
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "mtls", Value: []byte("with a certificate")}).FirstErr())
}
