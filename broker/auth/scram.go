package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"hash"
	"strconv"
	"strings"
)

// scramServer is the server side of one SCRAM exchange (RFC 5802, RFC
// 7677), on the standard library's HMAC and hashes, with Kafka's rules
// where it has them:
//
//	client-first   n,[a=authzid],n=user,r=cnonce[,ext...]
//	server-first   r=cnonce+snonce,s=salt,i=iterations
//	client-final   c=base64(gs2-header),r=nonce,p=proof
//	server-final   v=server-signature
//
// Kafka's ScramSaslServer accepts a client-final nonce that ends with the
// server's (librdkafka sends the client nonce before it once more), and so
// does this one; the proof is checked over the messages as sent. Channel
// binding and delegation tokens (tokenauth) are refused, as Kafka refuses
// them. An unknown user gets a server-first of a made-up salt, so that
// the exchange fails at the proof like a wrong password: which users exist
// is not told.
type scramServer struct {
	mech  string
	h     func() hash.Hash
	creds *Credentials

	step        int
	user        string
	gs2, bare   string // the client-first's header and bare message
	serverFirst string
	nonce       string // cnonce + snonce
	cred        Credential
	known       bool
	ok          bool
}

// fakeSaltKey makes unknown users' salts: the same user gets the same
// salt for the process's life, as a real one would.
var fakeSaltKey = func() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return k
}()

func newSCRAMServer(creds *Credentials, mech string) *scramServer {
	return &scramServer{mech: mech, h: hashes[mech], creds: creds}
}

func (s *scramServer) fail(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrAuthentication}, args...)...)
}

// step takes the client's next message and returns the server's.
func (s *scramServer) next(msg string) (string, error) {
	s.step++
	switch s.step {
	case 1:
		return s.clientFirst(msg)
	case 2:
		return s.clientFinal(msg)
	}
	return "", s.fail("the %s exchange is over", s.mech)
}

func (s *scramServer) clientFirst(msg string) (string, error) {
	// gs2-header: a channel-binding flag, an authorization id, then the
	// bare message.
	flag, rest, ok := strings.Cut(msg, ",")
	if !ok {
		return "", s.fail("invalid SCRAM client-first message")
	}
	authz, bare, ok := strings.Cut(rest, ",")
	switch {
	case !ok:
		return "", s.fail("invalid SCRAM client-first message")
	case flag != "n" && flag != "y":
		return "", s.fail("channel binding is not supported")
	case authz != "" && !strings.HasPrefix(authz, "a="):
		return "", s.fail("invalid SCRAM client-first message")
	}
	s.gs2, s.bare = msg[:len(msg)-len(bare)], bare
	attrs := strings.Split(bare, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "n=") || !strings.HasPrefix(attrs[1], "r=") || len(attrs[1]) == 2 {
		return "", s.fail("invalid SCRAM client-first message")
	}
	user, err := saslName(attrs[0][2:])
	if err != nil || user == "" {
		return "", s.fail("invalid user name")
	}
	if authz != "" {
		if a, err := saslName(authz[2:]); err != nil || a != user {
			return "", s.fail("client requested an authorization id that is different from username")
		}
	}
	for _, ext := range attrs[2:] {
		if strings.HasPrefix(ext, "m=") || strings.HasPrefix(ext, "tokenauth=") {
			return "", s.fail("SCRAM extension %q is not supported", strings.SplitN(ext, "=", 2)[0])
		}
	}
	s.user = user
	s.cred, s.known = s.creds.Lookup(user, s.mech)
	if !s.known {
		m := hmac.New(s.h, fakeSaltKey)
		m.Write([]byte(s.mech + "\x00" + user))
		s.cred = Credential{Salt: m.Sum(nil)[:24], Iterations: MinIterations}
	}
	snonce := make([]byte, 24)
	_, _ = rand.Read(snonce)
	s.nonce = attrs[1][2:] + base64.RawURLEncoding.EncodeToString(snonce)
	s.serverFirst = "r=" + s.nonce + ",s=" + base64.StdEncoding.EncodeToString(s.cred.Salt) + ",i=" + strconv.Itoa(s.cred.Iterations)
	return s.serverFirst, nil
}

func (s *scramServer) clientFinal(msg string) (string, error) {
	i := strings.LastIndex(msg, ",p=")
	if i < 0 {
		return "", s.fail("invalid SCRAM client-final message: no proof")
	}
	withoutProof, proofB64 := msg[:i], msg[i+3:]
	attrs := strings.Split(withoutProof, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "c=") || !strings.HasPrefix(attrs[1], "r=") {
		return "", s.fail("invalid SCRAM client-final message")
	}
	if cb, err := base64.StdEncoding.DecodeString(attrs[0][2:]); err != nil || string(cb) != s.gs2 {
		return "", s.fail("invalid channel binding")
	}
	if !strings.HasSuffix(attrs[1][2:], s.nonce) {
		return "", s.fail("invalid client nonce in the final client message")
	}
	proof, err := base64.StdEncoding.DecodeString(proofB64)
	if err != nil || len(proof) != s.h().Size() {
		return "", s.fail("invalid client proof")
	}
	authMessage := s.bare + "," + s.serverFirst + "," + withoutProof
	mac := func(key []byte) []byte {
		m := hmac.New(s.h, key)
		m.Write([]byte(authMessage))
		return m.Sum(nil)
	}
	fail := badCredentials("authentication failed during authentication due to invalid credentials with SASL mechanism " + s.mech)
	if !s.known {
		return "", fail
	}
	sig := mac(s.cred.StoredKey)
	clientKey := make([]byte, len(proof))
	for i := range proof {
		clientKey[i] = proof[i] ^ sig[i]
	}
	stored := s.h()
	stored.Write(clientKey)
	if subtle.ConstantTimeCompare(stored.Sum(nil), s.cred.StoredKey) != 1 {
		return "", fail
	}
	s.ok = true
	return "v=" + base64.StdEncoding.EncodeToString(mac(s.cred.ServerKey)), nil
}

// saslName decodes a SCRAM user name: "=2C" is a comma, "=3D" an equals
// sign, and no other "=" may appear (RFC 5802 section 5.1).
func saslName(s string) (string, error) {
	if !strings.Contains(s, "=") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", fmt.Errorf("auth: %q: a bad escape in a SCRAM name", s)
		}
		i += 2
	}
	return b.String(), nil
}
