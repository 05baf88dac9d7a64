package bench

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/seglog/seglog/broker"
	"github.com/seglog/seglog/broker/auth"
	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/server"
	"github.com/seglog/seglog/tablet"
)

// runSecurity: what security costs. seglog over SASL_SSL (TLS 1.3,
// SCRAM-SHA-512, the authorizer on with an ACL allowing the bench user)
// produces and consumes through franz-go, against the same seglog over
// PLAINTEXT with no authorizer, alternating run by run; and SCRAM logins
// through the broker (a new connection each: TLS handshake, SaslHandshake,
// two SaslAuthenticate round trips), against plaintext connections that
// ask ApiVersions.
func runSecurity(o Options) (*Result, error) {
	dir, err := scratch(o, "security")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	size := o.RecordSize
	n := int(min(o.Bytes, 64<<20) / int64(size))
	values := randomValues(size)
	tlsConf, clientTLS, err := selfSigned()
	if err != nil {
		return nil, err
	}
	secure := []kgo.Opt{kgo.DialTLSConfig(clientTLS), kgo.SASL(scram.Auth{User: "bench", Pass: "bench-secret"}.AsSha512Mechanism())}
	var plainP, plainC, secP, secC, logins, plainConns []float64
	reps := max(o.Repeat, 5)
	for rep := range reps {
		o.Progress("security", int64(rep), int64(reps))
		t, err := startSeglog(filepath.Join(dir, fmt.Sprintf("plain-%d", rep)), 4, false)
		if err != nil {
			return nil, err
		}
		p, err := produceAll(t.addr, values, n)
		var c, conns float64
		if err == nil {
			c, err = consumeAll(t.addr, n, size)
		}
		if err == nil {
			conns, err = connectRate(t.addr, 200, nil)
		}
		if err := errors.Join(err, t.close()); err != nil {
			return nil, err
		}
		plainP, plainC, plainConns = append(plainP, p), append(plainC, c), append(plainConns, conns)

		s, err := startSecure(filepath.Join(dir, fmt.Sprintf("secure-%d", rep)), tlsConf)
		if err != nil {
			return nil, err
		}
		p, err = produceAll(s.addr, values, n, secure...)
		if err == nil {
			c, err = consumeAll(s.addr, n, size, secure...)
		}
		var l float64
		if err == nil {
			l, err = connectRate(s.addr, 200, secure)
		}
		if err := errors.Join(err, s.close()); err != nil {
			return nil, err
		}
		secP, secC, logins = append(secP, p), append(secC, c), append(logins, l)
	}
	figs := []Figure{
		figure("security.produce.p4", "MB/s", secP, "PLAINTEXT, no authorizer", plainP),
		figure("security.consume.p4", "MB/s", secC, "PLAINTEXT, no authorizer (sendfile)", plainC),
		figure("security.logins", "logins/s", logins, "PLAINTEXT connections (ApiVersions)", plainConns),
	}
	return &Result{Workload: "security", Params: fmt.Sprintf("franz-go over loopback, 4 partitions, %d records of %d B per run; "+
		"SASL_SSL (TLS 1.3, SCRAM-SHA-512, authorizer with one ACL) against PLAINTEXT; 200 new connections a run", n, size),
		Figures: figs}, nil
}

// startSecure serves a fresh data directory on a SASL_SSL listener, with
// the user bench and an ACL letting it do anything with the topic.
func startSecure(dir string, conf *tls.Config) (*serveTarget, error) {
	m, err := tablet.OpenManager(nil, dir, tablet.ManagerOptions{Tablet: tablet.Options{Logger: quiet}})
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*serveTarget, error) { return nil, errors.Join(err, m.Close()) }
	for p := range int32(4) {
		if _, err := m.Create(checkpoint.TopicPartition{Topic: serveTopic, Partition: p}, nil); err != nil {
			return fail(err)
		}
	}
	creds, err := auth.OpenCredentials(nil, filepath.Join(dir, auth.CredentialsFile))
	if err != nil {
		return fail(err)
	}
	salt, salted, err := auth.SaltPassword(auth.SHA512, "bench-secret", auth.MinIterations)
	if err == nil {
		_, err = creds.Apply([]auth.Change{{User: "bench", Mechanism: auth.SHA512, Salt: salt, Iterations: auth.MinIterations, SaltedPassword: salted}})
	}
	if err != nil {
		return fail(err)
	}
	acls, err := auth.OpenACLs(nil, filepath.Join(dir, auth.ACLFile))
	if err == nil {
		_, err = acls.Create([]auth.ACL{{ResourceType: kmsg.ACLResourceTypeTopic, Name: serveTopic, Pattern: kmsg.ACLResourcePatternTypeLiteral,
			Principal: "User:bench", Host: "*", Operation: kmsg.ACLOperationAll, Permission: kmsg.ACLPermissionTypeAllow}})
	}
	if err != nil {
		return fail(err)
	}
	b, err := server.Compose(m, broker.Options{Logger: quiet, Authorizer: true})
	if err != nil {
		return fail(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(errors.Join(err, b.Close()))
	}
	done := make(chan error, 1)
	go func() {
		done <- b.ServeListener(tls.NewListener(ln, conf), broker.Listener{Name: "SASL_SSL", SecurityProtocol: broker.ProtocolSASLSSL})
	}()
	return &serveTarget{addr: ln.Addr().String(), m: m, close: func() error {
		err := b.Close()
		<-done
		return errors.Join(err, m.Close())
	}}, nil
}

// connectRate opens n clients one after the other, each reaching the
// broker (and, with opts, logging in), and returns connections a second.
func connectRate(addr string, n int, opts []kgo.Opt) (float64, error) {
	start := time.Now()
	for range n {
		_, _, done, err := connected(addr, opts...)
		if err != nil {
			return 0, err
		}
		done()
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// selfSigned makes a certificate for 127.0.0.1: the listener's config and
// a client's that trusts it.
func selfSigned() (*tls.Config, *tls.Config, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "seglog bench"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	server := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}}}
	return server, &tls.Config{RootCAs: pool}, nil
}
