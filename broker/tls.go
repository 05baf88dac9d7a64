package broker

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
)

// TLSOptions are a TLS listener's files, under librdkafka's names for
// them: PEM files, never a secret on a command line.
type TLSOptions struct {
	// CertFile (ssl.certificate.location) is the broker's certificate
	// chain and KeyFile (ssl.key.location) its private key, unencrypted.
	CertFile, KeyFile string
	// CAFile (ssl.ca.location) holds the certificates client certificates
	// must chain to; required unless ClientAuth is "none".
	CAFile string
	// ClientAuth is ssl.client.auth: none (the default), requested or
	// required.
	ClientAuth string
}

// TLS is a listener's TLS configuration, reloadable: Reload reads the
// files again (on SIGHUP), and new connections get the new certificate;
// a reload that fails keeps the old one.
type TLS struct {
	opts  TLSOptions
	state atomic.Pointer[tlsState]
}

type tlsState struct {
	cert *tls.Certificate
	cas  *x509.CertPool
}

// NewTLS loads a TLS listener's files.
func NewTLS(o TLSOptions) (*TLS, error) {
	switch o.ClientAuth {
	case "", "none", "requested", "required":
	default:
		return nil, fmt.Errorf("ssl.client.auth=%q: none, requested or required", o.ClientAuth)
	}
	if o.CertFile == "" || o.KeyFile == "" {
		return nil, errors.New("a TLS listener needs ssl.certificate.location and ssl.key.location")
	}
	if o.ClientAuth != "" && o.ClientAuth != "none" && o.CAFile == "" {
		return nil, fmt.Errorf("ssl.client.auth=%s needs ssl.ca.location", o.ClientAuth)
	}
	t := &TLS{opts: o}
	return t, t.Reload()
}

// Reload reads the certificate, key and CA files again.
func (t *TLS) Reload() error {
	cert, err := tls.LoadX509KeyPair(t.opts.CertFile, t.opts.KeyFile)
	if err != nil {
		return fmt.Errorf("broker: loading the TLS certificate: %w", err)
	}
	st := &tlsState{cert: &cert}
	if t.opts.CAFile != "" {
		if st.cas, err = LoadCAs(t.opts.CAFile); err != nil {
			return fmt.Errorf("broker: ssl.ca.location: %w", err)
		}
	}
	t.state.Store(st)
	return nil
}

// Config is the listener's tls.Config: TLS 1.2 and later, the current
// certificate and client CAs for each new connection.
func (t *TLS) Config() *tls.Config {
	auth := map[string]tls.ClientAuthType{"": tls.NoClientCert, "none": tls.NoClientCert,
		"requested": tls.VerifyClientCertIfGiven, "required": tls.RequireAndVerifyClientCert}[t.opts.ClientAuth]
	return &tls.Config{MinVersion: tls.VersionTLS12, GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
		st := t.state.Load()
		return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*st.cert}, ClientCAs: st.cas, ClientAuth: auth}, nil
	}}
}

// ClientConfig is the tls.Config of this broker's own connections to the
// other brokers: it verifies them by the CAs of ssl.ca.location and, when
// a peer asks for a client certificate, shows the current one (which must
// then be good for client authentication too).
func (t *TLS) ClientConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: t.state.Load().cas,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return t.state.Load().cert, nil }}
}

// LoadCAs reads a PEM file of CA certificates.
func LoadCAs(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}

// ClientTLS is a client's tls.Config (TLS 1.2 and later): the CAs of
// caFile verify the server (none: the system's), and certFile with keyFile
// are the client's certificate (none: no certificate).
func ClientTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pool, err := LoadCAs(caFile)
		if err != nil {
			return nil, fmt.Errorf("ssl.ca.location: %w", err)
		}
		cfg.RootCAs = pool
	}
	if certFile != "" || keyFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("the client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}
