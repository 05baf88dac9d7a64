package broker

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/broker/auth"
)

// SaslHandshake and SaslAuthenticate: the SASL exchange, open to any
// client (it is how a principal comes to be), outside the quotas.

func init() {
	register(
		api{key: 17, min: 0, max: 1, beforeAuth: true, sasl: true, rule: anyone, quota: quotaNone,
			handle: handler(func(b *Broker, _ context.Context, h header, r *kmsg.SASLHandshakeRequest) kmsg.Response {
				return b.authn.saslHandshake(h, r)
			})},
		api{key: 36, min: 0, max: 2, beforeAuth: true, sasl: true, rule: anyone, quota: quotaNone,
			handle: handler(func(b *Broker, _ context.Context, h header, r *kmsg.SASLAuthenticateRequest) kmsg.Response {
				return b.authn.saslAuthenticate(h, r)
			})},
	)
}

// Security protocols, as listener.security.protocol.map names them.
const (
	ProtocolPlaintext     = "PLAINTEXT"
	ProtocolSSL           = "SSL"
	ProtocolSASLPlaintext = "SASL_PLAINTEXT"
	ProtocolSASLSSL       = "SASL_SSL"
)

// Anonymous is the principal of a connection that did not authenticate
// (PLAINTEXT, or SSL without a client certificate), as Kafka names it.
const Anonymous = "User:ANONYMOUS"

// An authenticator is who a connection is: its session at accept (a TLS
// client certificate's principal), the SASL exchange (SaslHandshake,
// SaslAuthenticate, v0's bare tokens), re-authentication, and the pacing
// of password guessers. It holds the credentials, the broker's options
// (read only: the SASL, TLS and failed-authentication ones), the sensors
// that count failures and its metric — nothing else of the broker.
type authenticator struct {
	creds   *auth.Credentials // nil: no SASL
	opts    *Options
	sensors *sensors
	metrics *metrics
	clock   func() time.Time
	stop    <-chan struct{} // the broker's: a failure's pause ends with it
}

// newAuthenticator is b's authenticator (its clock read through b, which
// a test may set).
func newAuthenticator(b *Broker) *authenticator {
	return &authenticator{creds: b.creds, opts: &b.opts, sensors: &b.sensors, metrics: b.metrics,
		clock: func() time.Time { return b.clock() }, stop: b.stop}
}

// session is a connection's security state. The goroutine that answers
// requests changes it; the one that reads frames looks at raw only after
// the answer to a SASL request, which it waits for.
type session struct {
	sasl      bool   // a SASL_* listener: requests need authentication
	principal string // User:name
	authed    bool   // the SASL exchange succeeded (always true elsewhere)
	mech      string // the mechanism the session authenticated with
	exch      *auth.Exchange
	expires   time.Time // re-authentication is due (zero: never)
	raw       bool      // SaslHandshake v0: the next frames are bare tokens
	// closeAfter closes the connection once the current response is
	// written (a failed authentication).
	closeAfter bool
	// mutedUntil is when a throttled connection's next request may be
	// handled (quota.go).
	mutedUntil time.Time
}

// newSession starts a connection's session: a TLS connection's principal
// is its client certificate's subject (RFC 2253), if it sent one, mapped by
// ssl.principal.mapping.rules, as Kafka's default principal builder takes
// it; a subject no rule maps is an error (the connection closes).
func (a *authenticator) newSession(c net.Conn, l *Listener) (*session, error) {
	s := &session{principal: Anonymous, authed: true}
	if l != nil && (l.SecurityProtocol == ProtocolSASLPlaintext || l.SecurityProtocol == ProtocolSASLSSL) {
		s.sasl, s.authed = true, false
	}
	if tc, ok := c.(*tls.Conn); ok && !s.sasl {
		if certs := tc.ConnectionState().PeerCertificates; len(certs) > 0 {
			name := certs[0].Subject.String()
			if a.opts.PrincipalRules != nil {
				var err error
				if name, err = a.opts.PrincipalRules.Map(name); err != nil {
					return nil, err
				}
			}
			s.principal = "User:" + name
		}
	}
	return s, nil
}

// errUnauthenticated closes a connection that sends a request other than
// ApiVersions or SASL's before it authenticates, or after its session
// expired without re-authentication (as Kafka closes both).
var errUnauthenticated = errors.New("broker: not authenticated")

// checkSession refuses a request the session does not allow.
func (a *authenticator) checkSession(h header) error {
	s := h.sess
	if s == nil || !s.sasl {
		return nil
	}
	switch {
	case !s.authed:
		return fmt.Errorf("%w: %s before the SASL exchange ended", errUnauthenticated, kmsg.NameForKey(h.key))
	case !s.expires.IsZero() && a.clock().After(s.expires):
		return fmt.Errorf("%w: the session expired (connections.max.reauth.ms) and the client did not re-authenticate", errUnauthenticated)
	}
	return nil
}

// saslHandshake answers SaslHandshake: the mechanism's exchange starts
// (v0: its tokens come next as bare frames; v1: in SaslAuthenticate).
func (a *authenticator) saslHandshake(h header, r *kmsg.SASLHandshakeRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.SupportedMechanisms = a.opts.SASLMechanisms
	s := h.sess
	switch {
	case s == nil || !s.sasl || a.creds == nil:
		resp.ErrorCode = kerr.IllegalSaslState.Code // Kafka's answer on a listener without SASL
	case s.authed && a.opts.ReauthInterval <= 0:
		// Authenticated, and sessions never expire: no re-authentication
		// to start (Kafka's answer; the connection stays).
		resp.ErrorCode = kerr.IllegalSaslState.Code
	case s.exch != nil || s.authed && r.Mechanism != s.mech:
		// A second handshake mid-exchange, or a re-authentication with
		// another mechanism.
		resp.ErrorCode = kerr.IllegalSaslState.Code
		s.closeAfter = true
	case !slices.Contains(a.opts.SASLMechanisms, r.Mechanism):
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		s.closeAfter = true
		a.authFailed(h, r.Mechanism, "", "unsupported SASL mechanism", false)
	default:
		exch, err := auth.NewExchange(a.creds, r.Mechanism)
		if err != nil {
			resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
			s.closeAfter = true
			break
		}
		s.exch = exch
		s.raw = r.Version == 0
	}
	return resp
}

// saslAuthenticate answers SaslAuthenticate with the exchange's next
// token, or SASL_AUTHENTICATION_FAILED after
// connection.failed.authentication.delay.ms and closes the connection.
func (a *authenticator) saslAuthenticate(h header, r *kmsg.SASLAuthenticateRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	s := h.sess
	if s == nil || !s.sasl || s.exch == nil || s.raw {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		msg := "SaslAuthenticate without a SaslHandshake v1 before it"
		resp.ErrorMessage = &msg
		if s != nil && s.sasl {
			s.closeAfter = true
		}
		return resp
	}
	token, err := a.saslStep(h, r.SASLAuthBytes)
	if err != nil {
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		resp.ErrorMessage = errMessage(err)
		return resp
	}
	resp.SASLAuthBytes = token
	if s.authed && s.exch == nil && a.opts.ReauthInterval > 0 {
		resp.SessionLifetimeMillis = a.opts.ReauthInterval.Milliseconds()
	}
	return resp
}

// saslStep takes one client token; a failure waits
// connection.failed.authentication.delay.ms (slowing a password guesser
// down) and marks the connection to close.
func (a *authenticator) saslStep(h header, token []byte) ([]byte, error) {
	s := h.sess
	ip := strings.TrimPrefix(h.host, "/")
	var out []byte
	var err error
	if err = a.refuseGuesser(ip); err == nil {
		out, err = s.exch.Step(token)
	}
	if err == nil && s.exch.Done() {
		principal := "User:" + s.exch.User()
		if s.authed && principal != s.principal {
			err = fmt.Errorf("%w: a re-authentication cannot change the principal", auth.ErrAuthentication)
		} else {
			s.principal, s.mech, s.authed, s.exch = principal, s.exch.Mechanism(), true, nil
			if a.opts.ReauthInterval > 0 {
				s.expires = a.clock().Add(a.opts.ReauthInterval)
			}
			a.metrics.authentications.WithLabelValues(s.mech, "ok").Inc()
		}
	}
	if err != nil {
		a.authFailed(h, s.exch.Mechanism(), s.exch.User(), err.Error(), errors.Is(err, auth.ErrBadCredentials))
		s.exch, s.closeAfter = nil, true
		a.failedAuthPause()
		return nil, err
	}
	return out, nil
}

// saslRawToken answers a bare token after SaslHandshake v0: the reply is a
// bare token too (a 4-byte size and the bytes). A failure is no reply and
// the connection closes.
func (a *authenticator) saslRawToken(h header, token []byte) ([]byte, error) {
	out, err := a.saslStep(h, token)
	if err != nil {
		return nil, err
	}
	if h.sess.exch == nil {
		h.sess.raw = false // authenticated: Kafka requests from here on
	}
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(out))), out...), nil
}

// authFailed counts and logs a failed authentication: the user the client
// named and the reason, never the password (rate-limited as every
// per-connection line is, Options.Logger). Only a checked one (its
// credentials refused) counts toward Options.MaxFailedAuthRate: a
// malformed exchange or a login refused unchecked is no guess.
func (a *authenticator) authFailed(h header, mech, user, reason string, checked bool) {
	a.metrics.authentications.WithLabelValues(mech, "failed").Inc()
	if checked && a.opts.MaxFailedAuthRate > 0 {
		a.sensors.get(failedAuthSensor, strings.TrimPrefix(h.host, "/")).record(a.clock(), 1)
	}
	a.opts.Logger.Warn("authentication failed", "remote", h.host, "mechanism", mech, "user", user, "reason", reason)
}

// refuseGuesser refuses an address guessing passwords: past
// Options.MaxFailedAuthRate, no password is checked until its failures fall
// below the rate (this refusal is not one of them), and the client is told
// when that is.
func (a *authenticator) refuseGuesser(ip string) error {
	if retry := a.failedAuthRetry(ip); retry > 0 {
		return fmt.Errorf("%w: too many failed authentications from this address: retry in %d ms", auth.ErrAuthentication,
			max(1, retry.Milliseconds()))
	}
	return nil
}

// failedAuthPause waits connection.failed.authentication.delay.ms after a
// failed authentication (slowing a guesser down), or until the broker closes.
func (a *authenticator) failedAuthPause() {
	select {
	case <-time.After(a.opts.FailedAuthDelay):
	case <-a.stop:
	}
}

// failedAuthRetry is how long until an address past
// Options.MaxFailedAuthRate falls back to it (0: it is not past it).
func (a *authenticator) failedAuthRetry(ip string) time.Duration {
	if a.opts.MaxFailedAuthRate <= 0 {
		return 0
	}
	return a.sensors.get(failedAuthSensor, ip).untilAtMost(a.clock(), a.opts.MaxFailedAuthRate)
}

// failedAuthSensor counts an address's failed authentications
// (Options.MaxFailedAuthRate).
const failedAuthSensor = "failed-authentications"
