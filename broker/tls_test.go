package broker

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// testPKI is a CA with a server certificate for 127.0.0.1 and a client
// certificate, as PEM files in a directory.
type testPKI struct {
	dir  string
	pool *x509.CertPool
	ca   *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newTestPKI(t *testing.T) *testPKI {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "seglog test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	p := &testPKI{dir: t.TempDir(), pool: x509.NewCertPool(), ca: ca, key: key}
	p.pool.AddCert(ca)
	p.write(t, "ca.pem", "CERTIFICATE", der)
	return p
}

func (p *testPKI) write(t *testing.T, name, typ string, der []byte) string {
	path := filepath.Join(p.dir, name)
	require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
	return path
}

// issue writes a certificate (serial, for a server on 127.0.0.1 or a
// client named cn) and its key, and returns their paths.
func (p *testPKI) issue(t *testing.T, name string, serial int64, cn string, server bool) (string, string) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.key)
	require.NoError(t, err)
	kder, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	return p.write(t, name+".pem", "CERTIFICATE", der), p.write(t, name+".key", "EC PRIVATE KEY", kder)
}

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
	pki := newTestPKI(t)
	cert, key := pki.issue(t, "server", 10, "broker", true)
	_, _, secure, tl := serveTLS(t, TLSOptions{CertFile: cert, KeyFile: key})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(secure), kgo.DialTLSConfig(&tls.Config{RootCAs: pki.pool}),
		kgo.AllowAutoTopicCreation(), kgo.ConsumeTopics("secure"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100*time.Millisecond))
	require.NoError(t, err)
	defer cl.Close()
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "secure", Value: []byte("over TLS")}).FirstErr())
	fs := cl.PollFetches(ctx)
	require.NoError(t, ctx.Err())
	require.Equal(t, 1, fs.NumRecords())
	require.Equal(t, "over TLS", string(fs.Records()[0].Value))

	_, err = tls.Dial("tcp", secure, &tls.Config{RootCAs: pki.pool, MaxVersion: tls.VersionTLS11})
	require.Error(t, err, "TLS 1.1 is refused")

	serial := func() int64 {
		c, err := tls.Dial("tcp", secure, &tls.Config{RootCAs: pki.pool})
		require.NoError(t, err)
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
	}
	require.Equal(t, int64(10), serial())
	pki.issue(t, "server", 11, "broker", true) // the same files, a new certificate
	require.NoError(t, tl.Reload())
	require.Equal(t, int64(11), serial(), "reloaded")
	require.NoError(t, os.WriteFile(cert, []byte("garbage"), 0o600))
	require.Error(t, tl.Reload(), "a bad file is an error")
	require.Equal(t, int64(11), serial(), "and the certificate in use stays")
}

func TestTLSClientAuth(t *testing.T) {
	pki := newTestPKI(t)
	cert, key := pki.issue(t, "server", 10, "broker", true)
	ccert, ckey := pki.issue(t, "client", 20, "alice", false)
	_, err := NewTLS(TLSOptions{CertFile: cert, KeyFile: key, ClientAuth: "required"})
	require.ErrorContains(t, err, "ssl.ca.location", "client auth needs the CA")
	_, _, secure, _ := serveTLS(t, TLSOptions{CertFile: cert, KeyFile: key, CAFile: filepath.Join(pki.dir, "ca.pem"), ClientAuth: "required"})

	c, err := tls.Dial("tcp", secure, &tls.Config{RootCAs: pki.pool})
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
	cl, err := kgo.NewClient(kgo.SeedBrokers(secure), kgo.DialTLSConfig(&tls.Config{RootCAs: pki.pool, Certificates: []tls.Certificate{pair}}),
		kgo.AllowAutoTopicCreation())
	require.NoError(t, err)
	defer cl.Close()
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "mtls", Value: []byte("with a certificate")}).FirstErr())
}
