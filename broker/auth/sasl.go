package auth

import (
	"bytes"
	"fmt"
	"strings"

	kgosasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/seglog/seglog"
)

// The SASL mechanisms a broker can serve.
const PLAIN = "PLAIN"

// SASLMechanisms are the mechanisms Exchange knows, in Kafka's order.
var SASLMechanisms = []string{PLAIN, SHA256, SHA512}

// ErrAuthentication is the cause of every failed exchange: its message is
// what the client is told (never the password, never whether the user
// exists).
var ErrAuthentication = seglog.NewKafkaError("authentication failed", 58)

// ErrBadCredentials is matched by the failures whose credentials were
// checked and refused (a wrong password, an unknown user): what a password
// guesser gets, as against a malformed exchange. They match
// ErrAuthentication too.
var ErrBadCredentials = seglog.NewKafkaError("auth: credentials checked and refused", 58)

// badCredentials is a checked failure with its message.
type badCredentials string

func (e badCredentials) Error() string   { return ErrAuthentication.Error() + ": " + string(e) }
func (e badCredentials) Unwrap() []error { return []error{ErrAuthentication, ErrBadCredentials} }

// Exchange is one SASL authentication on a connection: Step takes each of
// the client's tokens and returns the server's, until Done.
type Exchange struct {
	mech  string
	creds *Credentials
	scram *scramServer // SCRAM's
	user  string
	done  bool
	ok    bool // PLAIN's: the password matched
}

// NewExchange starts an authentication with mech, one of SASLMechanisms,
// against creds.
func NewExchange(creds *Credentials, mech string) (*Exchange, error) {
	x := &Exchange{mech: mech, creds: creds}
	switch mech {
	case PLAIN:
	case SHA256, SHA512:
		x.scram = newSCRAMServer(creds, mech)
	default:
		return nil, fmt.Errorf("auth: %q: not a SASL mechanism this broker serves", mech)
	}
	return x, nil
}

// Step answers one of the client's tokens. An error is a failed
// authentication (errors.Is ErrAuthentication) whose message may be shown
// to the client; the user it names, if any, is User's.
func (x *Exchange) Step(token []byte) ([]byte, error) {
	if x.done {
		return nil, fmt.Errorf("%w: the %s exchange is over", ErrAuthentication, x.mech)
	}
	if x.scram == nil {
		x.done = true
		return nil, x.plain(token)
	}
	resp, err := x.scram.next(string(token))
	x.user = x.scram.user
	if err != nil {
		x.done = true
		return nil, err
	}
	x.done = x.scram.ok
	return []byte(resp), nil
}

// plain checks a PLAIN message: [authzid] NUL authcid NUL passwd (RFC
// 4616), the authorization id empty or the user's own, as Kafka allows.
func (x *Exchange) plain(token []byte) error {
	parts := bytes.Split(token, []byte{0})
	if len(parts) != 3 {
		return fmt.Errorf("%w: invalid SASL/PLAIN message: expected 3 parts, got %d", ErrAuthentication, len(parts))
	}
	authz, user, pass := string(parts[0]), string(parts[1]), string(parts[2])
	x.user = user
	switch {
	case user == "":
		return fmt.Errorf("%w: username not specified", ErrAuthentication)
	case authz != "" && authz != user:
		return fmt.Errorf("%w: client requested an authorization id that is different from username", ErrAuthentication)
	case !x.creds.VerifyPassword(user, pass):
		return badCredentials("invalid username or password")
	}
	x.ok = true
	return nil
}

// Done reports whether the exchange ended with the client authenticated.
func (x *Exchange) Done() bool {
	if x.scram != nil {
		return x.scram.ok
	}
	return x.ok
}

// User is the user the client named (authenticated once Done).
func (x *Exchange) User() string { return x.user }

// Mechanism is the exchange's mechanism.
func (x *Exchange) Mechanism() string { return x.mech }

// ClientMechanism is a client's SASL login to a broker (the brokers'
// own, the command line's) by mechanism: PLAIN, SCRAM-SHA-256 or
// SCRAM-SHA-512 (the default, for "").
func ClientMechanism(mechanism, user, password string) (kgosasl.Mechanism, error) {
	switch strings.ToUpper(mechanism) {
	case PLAIN:
		return plain.Auth{User: user, Pass: password}.AsMechanism(), nil
	case SHA256:
		return scram.Auth{User: user, Pass: password}.AsSha256Mechanism(), nil
	case SHA512, "":
		return scram.Auth{User: user, Pass: password}.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("%s: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", mechanism)
}
