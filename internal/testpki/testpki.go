// Package testpki makes the certificates TLS tests need: a CA, server
// certificates for 127.0.0.1 and client certificates, as PEM files.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// PKI is a CA and the directory its PEM files are in.
type PKI struct {
	Dir    string
	Pool   *x509.CertPool // the CA, for clients
	CAFile string
	ca     *x509.Certificate
	key    *ecdsa.PrivateKey
}

// New makes a CA in a test's temporary directory.
func New(t testing.TB) *PKI {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "seglog test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	must(t, err)
	ca, err := x509.ParseCertificate(der)
	must(t, err)
	p := &PKI{Dir: t.TempDir(), Pool: x509.NewCertPool(), ca: ca, key: key}
	p.Pool.AddCert(ca)
	p.CAFile = p.write(t, "ca.pem", "CERTIFICATE", der)
	return p
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (p *PKI) write(t testing.TB, name, typ string, der []byte) string {
	path := filepath.Join(p.Dir, name)
	must(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
	return path
}

// Issue writes name.pem and name.key: a certificate of serial for a
// server on 127.0.0.1, or for a client whose subject is CN=cn, and its
// key. It returns their paths (the same for the same name: a new issue
// replaces the files).
func (p *PKI) Issue(t testing.TB, name string, serial int64, cn string, server bool) (string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if server {
		// (client auth too: a broker shows it to the brokers it connects to)
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.key)
	must(t, err)
	kder, err := x509.MarshalECPrivateKey(key)
	must(t, err)
	return p.write(t, name+".pem", "CERTIFICATE", der), p.write(t, name+".key", "EC PRIVATE KEY", kder)
}
