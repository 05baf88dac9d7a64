package broker

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	xscram "github.com/xdg-go/scram"

	"github.com/seglog/seglog/broker/auth"
	"github.com/seglog/seglog/internal/testpki"
	"github.com/seglog/seglog/tablet"
)

// lockedBuffer is a log destination tests read while the broker writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// secureBroker is a broker on four listeners — PLAINTEXT, SSL,
// SASL_PLAINTEXT and SASL_SSL — its log kept, and users with passwords.
type secureBroker struct {
	b     *Broker
	addrs map[string]string // by security protocol
	pki   *testpki.PKI
	logs  *lockedBuffer
}

func serveSecure(t *testing.T, opts Options, tlsOpts TLSOptions, users map[string]string, setup ...func(*Broker)) *secureBroker {
	t.Helper()
	sb := &secureBroker{addrs: map[string]string{}, pki: testpki.New(t), logs: &lockedBuffer{}}
	cert, key := sb.pki.Issue(t, "server", 10, "broker", true)
	tlsOpts.CertFile, tlsOpts.KeyFile = cert, key
	if tlsOpts.ClientAuth != "" {
		tlsOpts.CAFile = sb.pki.CAFile
	}
	tl, err := NewTLS(tlsOpts)
	require.NoError(t, err)
	m, err := tablet.OpenManager(nil, filepath.Join(t.TempDir(), "data"), tablet.ManagerOptions{Tablet: tablet.Options{Logger: quiet}})
	require.NoError(t, err)
	opts.Logger = slog.New(slog.NewTextHandler(sb.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if opts.FailedAuthDelay == 0 {
		opts.FailedAuthDelay = -1
	}
	opts.Groups.NoInitialDelay = true
	sb.b, err = compose(m, opts)
	require.NoError(t, err)
	for _, f := range setup {
		f(sb.b)
	}
	var wg sync.WaitGroup
	for _, proto := range []string{ProtocolPlaintext, ProtocolSSL, ProtocolSASLPlaintext, ProtocolSASLSSL} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		sb.addrs[proto] = ln.Addr().String()
		if proto == ProtocolSSL || proto == ProtocolSASLSSL {
			ln = tls.NewListener(ln, tl.Config())
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = sb.b.ServeListener(ln, Listener{Name: proto, SecurityProtocol: proto})
		}()
	}
	t.Cleanup(func() {
		require.NoError(t, sb.b.Close())
		wg.Wait()
		require.NoError(t, m.Close())
	})
	for user, pass := range users {
		var changes []auth.Change
		for _, mech := range []string{auth.SHA256, auth.SHA512} {
			salt, salted, err := auth.SaltPassword(mech, pass, auth.MinIterations)
			require.NoError(t, err)
			changes = append(changes, auth.Change{User: user, Mechanism: mech, Salt: salt, Iterations: auth.MinIterations, SaltedPassword: salted})
		}
		_, err := sb.b.creds.Apply(changes)
		require.NoError(t, err)
	}
	return sb
}

// fakeClock makes the broker's clock (SASL sessions, quotas) stand at
// start until the returned function moves it.
func fakeClock(b *Broker, start time.Time) func(time.Duration) {
	var mu sync.Mutex
	now := start
	b.clock = func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}
	return func(d time.Duration) {
		mu.Lock()
		now = now.Add(d)
		mu.Unlock()
	}
}

func (sb *secureBroker) tlsConfig() *tls.Config { return &tls.Config{RootCAs: sb.pki.Pool} }

// TestSASLClients: franz-go over SASL_SSL with SCRAM-SHA-512 produces and
// consumes; SCRAM-SHA-256 and PLAIN over SASL_PLAINTEXT too; a wrong
// password is refused at the first request.
func TestSASLClients(t *testing.T) {
	sb := serveSecure(t, Options{SASLMechanisms: []string{auth.SHA256, auth.SHA512, auth.PLAIN}}, TLSOptions{},
		map[string]string{"alice": "alice-secret"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a := scram.Auth{User: "alice", Pass: "alice-secret"}
	cl, err := kgo.NewClient(kgo.SeedBrokers(sb.addrs[ProtocolSASLSSL]), kgo.DialTLSConfig(sb.tlsConfig()),
		kgo.SASL(a.AsSha512Mechanism()), kgo.AllowAutoTopicCreation(), kgo.ConsumeTopics("secret"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	require.NoError(t, err)
	defer cl.Close()
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "secret", Value: []byte("over SASL_SSL")}).FirstErr())
	fs := cl.PollFetches(ctx)
	require.NoError(t, ctx.Err())
	require.Equal(t, []string{"over SASL_SSL"}, recordValues(fs.Records()))

	for _, mech := range []kgo.Opt{kgo.SASL(a.AsSha256Mechanism()), kgo.SASL(plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism())} {
		cl, err := kgo.NewClient(kgo.SeedBrokers(sb.addrs[ProtocolSASLPlaintext]), mech)
		require.NoError(t, err)
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "secret", Value: []byte("over SASL_PLAINTEXT")}).FirstErr())
		cl.Close()
	}

	bad, err := kgo.NewClient(kgo.SeedBrokers(sb.addrs[ProtocolSASLSSL]), kgo.DialTLSConfig(sb.tlsConfig()),
		kgo.SASL(scram.Auth{User: "alice", Pass: "wrong-password"}.AsSha512Mechanism()), kgo.RequestRetries(0))
	require.NoError(t, err)
	defer bad.Close()
	err = bad.Ping(ctx)
	require.ErrorIs(t, err, kerr.SaslAuthenticationFailed)
	logs := sb.logs.String()
	require.Contains(t, logs, "authentication failed")
	require.Contains(t, logs, "user=alice")
	for _, secret := range []string{"alice-secret", "wrong-password"} {
		require.NotContains(t, logs, secret, "a password is never logged")
	}
}

// recordValues are records' values as strings.
func recordValues(rs []*kgo.Record) []string {
	var out []string
	for _, r := range rs {
		out = append(out, string(r.Value))
	}
	return out
}

// rawConn is a connection tests write requests on and read answers from.
type rawConn struct {
	t *testing.T
	net.Conn
}

func dialRaw(t *testing.T, addr string) *rawConn {
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return &rawConn{t, c}
}

func (c *rawConn) do(req kmsg.Request, version int16, resp kmsg.Response) {
	exchange(c.t, c.Conn, req, version, resp)
}

// closed asserts the broker closed the connection, answering nothing more.
func (c *rawConn) closed(msg string) {
	c.t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(time.Minute))
	var b [1]byte
	_, err := c.Read(b[:])
	require.ErrorIs(c.t, err, io.EOF, msg)
}

// send writes one request, without reading an answer.
func (c *rawConn) send(req kmsg.Request, version int16) {
	f := frameOf(req, version)
	_, err := c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(f))), f...))
	require.NoError(c.t, err)
}

func handshake(c *rawConn, version int16, mech string) *kmsg.SASLHandshakeResponse {
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.Mechanism = mech
	resp := kmsg.NewPtrSASLHandshakeResponse()
	c.do(req, version, resp)
	return resp
}

func authenticate(c *rawConn, version int16, token string) *kmsg.SASLAuthenticateResponse {
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.SASLAuthBytes = []byte(token)
	resp := kmsg.NewPtrSASLAuthenticateResponse()
	c.do(req, version, resp)
	return resp
}

func metadataOK(c *rawConn) {
	c.t.Helper()
	resp := kmsg.NewPtrMetadataResponse()
	c.do(kmsg.NewPtrMetadataRequest(), 12, resp)
	require.Len(c.t, resp.Brokers, 1)
}

// TestSASLRefusals: what Kafka refuses on a SASL listener, it refuses:
// requests before the exchange, unknown mechanisms, wrong passwords,
// SaslAuthenticate without a handshake — each answered as Kafka does and
// the connection closed; SASL on a plaintext listener is
// ILLEGAL_SASL_STATE and the connection stays.
func TestSASLRefusals(t *testing.T) {
	sb := serveSecure(t, Options{SASLMechanisms: []string{auth.PLAIN, auth.SHA256}}, TLSOptions{},
		map[string]string{"alice": "alice-secret"})
	sasl := sb.addrs[ProtocolSASLPlaintext]

	c := dialRaw(t, sasl)
	av := kmsg.NewPtrApiVersionsResponse()
	avr := kmsg.NewPtrApiVersionsRequest()
	avr.ClientSoftwareName, avr.ClientSoftwareVersion = "test", "1"
	c.do(avr, 3, av)
	require.Zero(t, av.ErrorCode, "ApiVersions before authentication")
	c.send(kmsg.NewPtrMetadataRequest(), 12)
	c.closed("Metadata before authentication closes the connection")

	c = dialRaw(t, sasl)
	hs := handshake(c, 1, "GSSAPI")
	require.Equal(t, kerr.UnsupportedSaslMechanism.Code, hs.ErrorCode)
	require.Equal(t, []string{auth.PLAIN, auth.SHA256}, hs.SupportedMechanisms)
	c.closed("an unsupported mechanism")

	c = dialRaw(t, sasl)
	require.Zero(t, handshake(c, 1, auth.PLAIN).ErrorCode)
	ar := authenticate(c, 2, "\x00alice\x00hunter2-not-it")
	require.Equal(t, kerr.SaslAuthenticationFailed.Code, ar.ErrorCode)
	require.NotNil(t, ar.ErrorMessage)
	require.NotContains(t, *ar.ErrorMessage, "hunter2")
	c.closed("a wrong password")

	c = dialRaw(t, sasl)
	require.Equal(t, kerr.IllegalSaslState.Code, authenticate(c, 1, "\x00alice\x00alice-secret").ErrorCode)
	c.closed("SaslAuthenticate without a handshake")

	c = dialRaw(t, sasl)
	require.Zero(t, handshake(c, 1, auth.PLAIN).ErrorCode)
	require.Equal(t, kerr.IllegalSaslState.Code, handshake(c, 1, auth.PLAIN).ErrorCode)
	c.closed("a second handshake mid-exchange")

	c = dialRaw(t, sb.addrs[ProtocolPlaintext])
	require.Equal(t, kerr.IllegalSaslState.Code, handshake(c, 1, auth.PLAIN).ErrorCode)
	metadataOK(c) // still open, still anonymous

	// SaslHandshake v0: the token and its answer are bare frames.
	c = dialRaw(t, sasl)
	require.Zero(t, handshake(c, 0, auth.PLAIN).ErrorCode)
	tok := []byte("\x00alice\x00alice-secret")
	_, err := c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(tok))), tok...))
	require.NoError(t, err)
	var size [4]byte
	_, err = io.ReadFull(c, size[:])
	require.NoError(t, err)
	require.Zero(t, binary.BigEndian.Uint32(size[:]), "PLAIN's answer is empty")
	metadataOK(c)
	require.Equal(t, kerr.IllegalSaslState.Code, handshake(c, 1, auth.PLAIN).ErrorCode,
		"no re-authentication when sessions never expire")
	metadataOK(c) // and the connection stays

	c = dialRaw(t, sasl)
	require.Zero(t, handshake(c, 0, auth.PLAIN).ErrorCode)
	tok = []byte("\x00alice\x00wrong")
	_, err = c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(tok))), tok...))
	require.NoError(t, err)
	c.closed("a v0 exchange that fails closes without an answer")
	require.NotContains(t, sb.logs.String(), "hunter2")
}

// TestSASLReauthentication (KIP-368): a session lasts
// connections.max.reauth.ms, told to the client; a request after it ends
// closes the connection unless the client authenticated again on it; a
// re-authentication cannot change the principal.
func TestSASLReauthentication(t *testing.T) {
	sb := serveSecure(t, Options{SASLMechanisms: []string{auth.PLAIN}, ReauthInterval: time.Hour}, TLSOptions{},
		map[string]string{"alice": "alice-secret", "bob": "bob-secret"})
	advance := fakeClock(sb.b, time.Now())
	login := func(c *rawConn, user string) *kmsg.SASLAuthenticateResponse {
		require.Zero(t, handshake(c, 1, auth.PLAIN).ErrorCode)
		return authenticate(c, 1, "\x00"+user+"\x00"+user+"-secret")
	}
	c := dialRaw(t, sb.addrs[ProtocolSASLPlaintext])
	ar := login(c, "alice")
	require.Zero(t, ar.ErrorCode)
	require.Equal(t, time.Hour.Milliseconds(), ar.SessionLifetimeMillis)
	metadataOK(c)
	advance(59 * time.Minute)
	require.Zero(t, login(c, "alice").ErrorCode, "re-authenticated before the session ended")
	advance(59 * time.Minute) // 118 minutes after the first login
	metadataOK(c)
	advance(2 * time.Minute)
	c.send(kmsg.NewPtrMetadataRequest(), 12)
	c.closed("the session ended without a re-authentication")

	c = dialRaw(t, sb.addrs[ProtocolSASLPlaintext])
	require.Zero(t, login(c, "alice").ErrorCode)
	require.Equal(t, kerr.SaslAuthenticationFailed.Code, login(c, "bob").ErrorCode)
	c.closed("a re-authentication as another user")
}

// TestSASLSarama: sarama authenticates with SaslHandshake v0 (bare
// tokens) and v1, with SCRAM-SHA-256, and produces.
func TestSASLSarama(t *testing.T) {
	sb := serveSecure(t, Options{}, TLSOptions{}, map[string]string{"alice": "alice-secret"})
	for _, v := range []int16{sarama.SASLHandshakeV0, sarama.SASLHandshakeV1} {
		cfg := sarama.NewConfig()
		cfg.Producer.Return.Successes = true
		cfg.Net.SASL.Enable = true
		cfg.Net.SASL.Version = v
		cfg.ApiVersionsRequest = v != sarama.SASLHandshakeV0 // sarama's rule: a v0 client is an old one
		cfg.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA256
		cfg.Net.SASL.User, cfg.Net.SASL.Password = "alice", "alice-secret"
		cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &xdgClient{hash: xscram.SHA256} }
		p, err := sarama.NewSyncProducer([]string{sb.addrs[ProtocolSASLPlaintext]}, cfg)
		require.NoError(t, err, "handshake v%d", v)
		_, _, err = p.SendMessage(&sarama.ProducerMessage{Topic: "sarama", Value: sarama.StringEncoder("hello")})
		require.NoError(t, err, "handshake v%d", v)
		require.NoError(t, p.Close())
	}
}

// xdgClient is sarama's SCRAM client, on xdg-go/scram.
type xdgClient struct {
	hash xscram.HashGeneratorFcn
	conv *xscram.ClientConversation
}

func (x *xdgClient) Begin(user, pass, authz string) error {
	c, err := x.hash.NewClient(user, pass, authz)
	if err != nil {
		return err
	}
	x.conv = c.NewConversation()
	return nil
}

func (x *xdgClient) Step(challenge string) (string, error) { return x.conv.Step(challenge) }
func (x *xdgClient) Done() bool                            { return x.conv.Done() }

// TestUserSCRAMCredentials: kadm alters and describes SCRAM credentials
// as Kafka answers (per user: unknown mechanisms, iteration bounds,
// deletions of nothing, duplicates), the new user authenticates at once,
// and a restart keeps them.
func TestUserSCRAMCredentials(t *testing.T) {
	sb := serveSecure(t, Options{}, TLSOptions{}, nil)
	adm, _, ctx := adminClient(t, sb.addrs[ProtocolPlaintext])
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "carol", Mechanism: kadm.ScramSha256, Iterations: 8192, Password: "carol-secret"},
		{User: "carol", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "carol-secret"},
	})
	require.NoError(t, err)
	require.NoError(t, res["carol"].Err)

	described, err := adm.DescribeUserSCRAMs(ctx)
	require.NoError(t, err)
	require.Len(t, described, 1)
	require.Len(t, described["carol"].CredInfos, 2)
	require.Equal(t, int32(8192), described["carol"].CredInfos[0].Iterations)
	described, err = adm.DescribeUserSCRAMs(ctx, "dave")
	require.NoError(t, err)
	require.ErrorIs(t, described["dave"].Err, kerr.ResourceNotFound)

	res, err = adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "dave", Mechanism: kadm.ScramSha256}}, nil)
	require.NoError(t, err)
	require.ErrorIs(t, res["dave"].Err, kerr.ResourceNotFound)

	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	req.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestDeletion{{Name: "carol", Mechanism: 1}, {Name: "erin", Mechanism: 3}}
	req.Upsertions = []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{
		{Name: "carol", Mechanism: 1, Iterations: 4096, Salt: []byte("s"), SaltedPassword: make([]byte, 32)},
		{Name: "dave", Mechanism: 1, Iterations: 100, Salt: []byte("s"), SaltedPassword: make([]byte, 32)},
		{Name: "", Mechanism: 1, Iterations: 4096, Salt: []byte("s"), SaltedPassword: make([]byte, 32)},
	}
	resp := kmsg.NewPtrAlterUserSCRAMCredentialsResponse()
	dialRaw(t, sb.addrs[ProtocolPlaintext]).do(req, 0, resp)
	codes := map[string]int16{}
	for _, r := range resp.Results {
		codes[r.User] = r.ErrorCode
	}
	require.Equal(t, map[string]int16{"carol": kerr.DuplicateResource.Code, "erin": kerr.UnsupportedSaslMechanism.Code,
		"dave": kerr.UnacceptableCredential.Code, "": kerr.UnacceptableCredential.Code}, codes)

	cl, err := kgo.NewClient(kgo.SeedBrokers(sb.addrs[ProtocolSASLSSL]), kgo.DialTLSConfig(sb.tlsConfig()),
		kgo.SASL(scram.Auth{User: "carol", Pass: "carol-secret"}.AsSha256Mechanism()))
	require.NoError(t, err)
	defer cl.Close()
	require.NoError(t, cl.Ping(ctx), "carol authenticates with her new credential")
	creds, err := auth.OpenCredentials(nil, filepath.Join(sb.b.m.Dir(), auth.CredentialsFile))
	require.NoError(t, err)
	require.True(t, creds.VerifyPassword("carol", "carol-secret"), "the credential is on disk")
}

// TestSASLReauthenticationFranzGo: franz-go re-authenticates on its own
// before connections.max.reauth.ms ends (KIP-368) and goes on producing
// on the same connections: the broker counts more logins than
// connections and closes none for an expired session.
func TestSASLReauthenticationFranzGo(t *testing.T) {
	sb := serveSecure(t, Options{ReauthInterval: 1500 * time.Millisecond}, TLSOptions{}, map[string]string{"alice": "alice-secret"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(sb.addrs[ProtocolSASLPlaintext]), kgo.AllowAutoTopicCreation(),
		kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism()))
	require.NoError(t, err)
	defer cl.Close()
	logins := func() float64 {
		return testutil.ToFloat64(sb.b.metrics.authentications.WithLabelValues(auth.SHA256, "ok"))
	}
	// Produce until a connection has logged in again: an event, waited
	// for by doing work, bounded by the context.
	for i := 0; logins() < testutil.ToFloat64(sb.b.metrics.accepted)+1; i++ {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "reauth", Value: fmt.Appendf(nil, "%d", i)}).FirstErr())
	}
	require.Zero(t, testutil.ToFloat64(sb.b.metrics.closedAuth), "no connection was closed for an expired session")
}

// TestFailedLoginRate: past seglog.failed.authentication.max.rate an
// address's logins fail without their passwords being checked — the
// right one too, told when to retry — until its checked failures age out
// of the window; refusals unchecked and malformed exchanges do not count.
func TestFailedLoginRate(t *testing.T) {
	sb := serveSecure(t, Options{SASLMechanisms: []string{auth.PLAIN}, MaxFailedAuthRate: 0.5}, TLSOptions{},
		map[string]string{"alice": "alice-secret"})
	advance := fakeClock(sb.b, time.Unix(1_000_000, 0))
	login := func(pass string) *kmsg.SASLAuthenticateResponse {
		c := dialRaw(t, sb.addrs[ProtocolSASLPlaintext])
		require.Zero(t, handshake(c, 1, auth.PLAIN).ErrorCode)
		return authenticate(c, 1, "\x00alice\x00"+pass)
	}
	for i := range 5 { // 5 failures in the (at least) ten-second window: 0.5 a second
		require.Equal(t, kerr.SaslAuthenticationFailed.Code, login(fmt.Sprintf("guess-%d", i)).ErrorCode)
	}
	require.Zero(t, login("alice-secret").ErrorCode, "at the rate, not past it")
	require.Equal(t, kerr.SaslAuthenticationFailed.Code, login("guess-5").ErrorCode)
	r := login("alice-secret")
	require.Equal(t, kerr.SaslAuthenticationFailed.Code, r.ErrorCode, "past the rate, the right password is not checked either")
	require.Contains(t, *r.ErrorMessage, "too many failed authentications from this address: retry in 11000 ms")
	// Alice retrying every second is refused unchecked — which does not
	// count, so it does not keep the address locked — and told when to
	// retry, until the guesses age out.
	for i := 1; i < 11; i++ {
		advance(time.Second)
		r := login("alice-secret")
		require.Equal(t, kerr.SaslAuthenticationFailed.Code, r.ErrorCode)
		require.Contains(t, *r.ErrorMessage, fmt.Sprintf("retry in %d ms", (11-i)*1000))
	}
	advance(time.Second)
	require.Zero(t, login("alice-secret").ErrorCode, "the failures aged out")
	// Malformed exchanges are no guesses: they do not count.
	for range 20 {
		c := dialRaw(t, sb.addrs[ProtocolSASLPlaintext])
		require.Zero(t, handshake(c, 1, auth.PLAIN).ErrorCode)
		require.Equal(t, kerr.SaslAuthenticationFailed.Code, authenticate(c, 1, "no parts").ErrorCode)
	}
	require.Zero(t, login("alice-secret").ErrorCode, "malformed logins are not counted")
}

// The console's login (Broker.Login) checks the same credentials and
// counts toward the same failed-login rate, by address, as SASL: its
// guesses lock SASL logins from that address out, and the reverse.
func TestConsoleLoginSharesTheFailedLoginRate(t *testing.T) {
	sb := serveSecure(t, Options{SASLMechanisms: []string{auth.PLAIN}, MaxFailedAuthRate: 0.5}, TLSOptions{},
		map[string]string{"alice": "alice-secret"})
	fakeClock(sb.b, time.Unix(1_000_000, 0))
	principal, err := sb.b.Login("127.0.0.1", "alice", "alice-secret")
	require.NoError(t, err)
	require.Equal(t, "User:alice", principal)
	for i := range 5 {
		_, err := sb.b.Login("127.0.0.1", "alice", fmt.Sprintf("guess-%d", i))
		require.ErrorIs(t, err, auth.ErrBadCredentials)
	}
	_, err = sb.b.Login("127.0.0.1", "nobody", "x")
	require.ErrorIs(t, err, auth.ErrBadCredentials, "an unknown user is a checked failure too")
	_, err = sb.b.Login("127.0.0.1", "alice", "alice-secret")
	require.ErrorIs(t, err, auth.ErrAuthentication)
	require.NotErrorIs(t, err, auth.ErrBadCredentials, "past the rate the password is not checked")
	require.ErrorContains(t, err, "too many failed authentications from this address")
	c := dialRaw(t, sb.addrs[ProtocolSASLPlaintext])
	require.Zero(t, handshake(c, 1, auth.PLAIN).ErrorCode)
	r := authenticate(c, 1, "\x00alice\x00alice-secret")
	require.Equal(t, kerr.SaslAuthenticationFailed.Code, r.ErrorCode, "SASL from the address is locked out as well")
	_, err = sb.b.Login("10.0.0.9", "alice", "alice-secret")
	require.NoError(t, err, "another address is not")
}
