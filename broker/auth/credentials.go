// Package auth holds the broker's security state: SCRAM credentials
// (salted and hashed, never a password) and ACLs, each in a file of its
// own at the top of the data directory, replaced atomically on every
// change.
//
//	seglog-scram-credentials   {"version":1,"users":{"alice":{"SCRAM-SHA-256":{salt, iterations, stored_key, server_key}}}}
//	seglog-acls                {"version":1,"acls":[{resource_type, name, pattern, principal, host, operation, permission}]}
//
// A credential is what RFC 5802 has a server store: the salt, the
// iteration count, StoredKey = H(HMAC(SaltedPassword, "Client Key")) and
// ServerKey = HMAC(SaltedPassword, "Server Key"). The SCRAM exchange
// (scram.go) is on the standard library's HMAC and hashes; PLAIN is checked
// by deriving StoredKey from the password and the stored salt with
// crypto/pbkdf2.
package auth

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"errors"
	"fmt"
	"hash"
	"maps"
	"slices"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/internal/docstore"
	"github.com/seglog/seglog/vfs"
)

// File names (checkpoint's, where recovery and verify know them) and the
// files' version: part of the on-disk format; never change.
const (
	CredentialsFile = checkpoint.ScramCredentialsFile
	ACLFile         = checkpoint.ACLFile
	fileVersion     = 1
)

// The SCRAM mechanisms, as SASL names them and as Kafka numbers them in
// DescribeUserScramCredentials and AlterUserScramCredentials.
const (
	SHA256 = "SCRAM-SHA-256"
	SHA512 = "SCRAM-SHA-512"
)

// Mechanisms are the SCRAM mechanisms by Kafka's number.
var Mechanisms = map[int8]string{1: SHA256, 2: SHA512}

// MechanismNumber is Kafka's number for a SCRAM mechanism, 0 if unknown.
func MechanismNumber(name string) int8 {
	for n, m := range Mechanisms {
		if m == name {
			return n
		}
	}
	return 0
}

// Kafka's bounds on a credential's iteration count.
const (
	MinIterations = 4096
	MaxIterations = 16384
)

// Errors of Credentials' changes.
var (
	ErrUnknownMechanism = seglog.NewKafkaError("auth: not a SCRAM mechanism (SCRAM-SHA-256 or SCRAM-SHA-512)", 33)
	ErrIterations       = seglog.NewKafkaError(fmt.Sprintf("auth: iterations must be from %d to %d", MinIterations, MaxIterations), 93)
	ErrEmptyUser        = seglog.NewKafkaError("auth: a user name must not be empty", 93)
	ErrNoCredential     = seglog.NewKafkaError("auth: no such credential", 91)
)

// Credential is one user's stored SCRAM credential for one mechanism.
type Credential struct {
	Salt       []byte `json:"salt"`
	Iterations int    `json:"iterations"`
	StoredKey  []byte `json:"stored_key"`
	ServerKey  []byte `json:"server_key"`
}

type credentialsFile struct {
	Version int                              `json:"version"`
	Users   map[string]map[string]Credential `json:"users"`
}

func (f *credentialsFile) version() int { return f.Version }

// Credentials are the SCRAM credentials of a data directory (or, in a
// cluster, of every broker), safe for concurrent use. Every change is
// stored before it returns.
type Credentials struct {
	// users: user → mechanism → credential; never changed once published.
	users *docstore.Doc[map[string]map[string]Credential]
}

// OpenCredentials reads the credentials at path; a missing file is none.
func OpenCredentials(fsys vfs.FS, path string) (*Credentials, error) {
	return NewCredentials(FileStore(fsys, path))
}

// NewCredentials reads the credentials from store.
func NewCredentials(store Store) (*Credentials, error) {
	d, err := docstore.Open(store, decodeCredentials)
	if err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	return &Credentials{users: d}, nil
}

func decodeCredentials(data []byte) (*map[string]map[string]Credential, error) {
	var f credentialsFile
	if ok, err := decodeJSON(data, &f); !ok || f.Users == nil {
		none := map[string]map[string]Credential{}
		return &none, err
	}
	for user, mechs := range f.Users {
		for mech, cred := range mechs {
			h, ok := hashes[mech]
			switch {
			case user == "":
				return nil, ErrEmptyUser
			case !ok:
				return nil, fmt.Errorf("user %q: %q: %w", user, mech, ErrUnknownMechanism)
			case cred.Iterations < MinIterations || cred.Iterations > MaxIterations:
				return nil, fmt.Errorf("user %q %s: %d: %w", user, mech, cred.Iterations, ErrIterations)
			case len(cred.Salt) == 0 || len(cred.StoredKey) != h().Size() || len(cred.ServerKey) != h().Size():
				return nil, fmt.Errorf("user %q %s: a salt, and keys of %d bytes", user, mech, h().Size())
			}
		}
	}
	return &f.Users, nil
}

// Refresh loads the credentials again from their store, if another
// broker changed them.
func (c *Credentials) Refresh() (bool, error) { return c.users.Refresh() }

var hashes = map[string]func() hash.Hash{SHA256: sha256.New, SHA512: sha512.New}

// Lookup returns user's credential for mech.
func (c *Credentials) Lookup(user, mech string) (Credential, bool) {
	cred, ok := (*c.users.Load())[user][mech]
	return cred, ok
}

// Users lists the users and, for each, its mechanisms and their iteration
// counts.
func (c *Credentials) Users() map[string]map[string]int {
	users := *c.users.Load()
	out := make(map[string]map[string]int, len(users))
	for user, mechs := range users {
		out[user] = map[string]int{}
		for mech, cred := range mechs {
			out[user][mech] = cred.Iterations
		}
	}
	return out
}

// Change is one upsertion (SaltedPassword set) or deletion of a user's
// credential, as AlterUserScramCredentials carries them.
type Change struct {
	User, Mechanism string
	// Salt, Iterations and SaltedPassword (Hi(password, salt, i) of RFC
	// 5802, which the client computes) make an upsertion; a nil
	// SaltedPassword is a deletion.
	Salt           []byte
	Iterations     int
	SaltedPassword []byte
}

// Check returns why a change cannot be applied, or nil.
func (ch Change) Check() error {
	switch _, ok := hashes[ch.Mechanism]; {
	case ch.User == "":
		return ErrEmptyUser
	case !ok:
		return ErrUnknownMechanism
	case ch.SaltedPassword != nil && (ch.Iterations < MinIterations || ch.Iterations > MaxIterations):
		return ErrIterations
	case ch.SaltedPassword != nil && len(ch.Salt) == 0:
		return errors.New("auth: a credential needs a salt")
	}
	return nil
}

// Apply applies the changes, durably, and returns each one's error (nil
// for those applied): a change that fails its check, or a deletion of a
// credential that does not exist, is not applied; the others are, with one
// write of the file. A failed write applies none and is the second result.
func (c *Credentials) Apply(changes []Change) ([]error, error) {
	errs := make([]error, len(changes))
	err := c.users.Update(func(cur *map[string]map[string]Credential) (*map[string]map[string]Credential, []byte, error) {
		return c.apply(*cur, changes, errs)
	})
	if err != nil {
		return nil, err
	}
	return errs, nil
}

// apply makes the next credentials from cur (errs says each change's
// refusal) and their document.
func (c *Credentials) apply(cur map[string]map[string]Credential, changes []Change, errs []error) (*map[string]map[string]Credential, []byte, error) {
	next := make(map[string]map[string]Credential, len(cur))
	for u, m := range cur {
		next[u] = maps.Clone(m)
	}
	for i, ch := range changes {
		if errs[i] = ch.Check(); errs[i] != nil {
			continue
		}
		if ch.SaltedPassword == nil {
			if _, ok := next[ch.User][ch.Mechanism]; !ok {
				errs[i] = ErrNoCredential
				continue
			}
			delete(next[ch.User], ch.Mechanism)
			if len(next[ch.User]) == 0 {
				delete(next, ch.User)
			}
			continue
		}
		if next[ch.User] == nil {
			next[ch.User] = map[string]Credential{}
		}
		next[ch.User][ch.Mechanism] = derive(ch.Mechanism, ch.Salt, ch.Iterations, ch.SaltedPassword)
	}
	data, err := encodeJSON(credentialsFile{Version: fileVersion, Users: next})
	if err != nil {
		return nil, nil, fmt.Errorf("auth: saving credentials: %w", err)
	}
	return &next, data, nil
}

// derive makes the stored credential from a salted password (RFC 5802
// section 3).
func derive(mech string, salt []byte, iters int, salted []byte) Credential {
	h := hashes[mech]
	mac := func(key []byte, s string) []byte {
		m := hmac.New(h, key)
		m.Write([]byte(s))
		return m.Sum(nil)
	}
	clientKey := mac(salted, "Client Key")
	stored := h()
	stored.Write(clientKey)
	return Credential{Salt: slices.Clone(salt), Iterations: iters, StoredKey: stored.Sum(nil), ServerKey: mac(salted, "Server Key")}
}

// SaltPassword returns a new random salt and Hi(password, salt, iters) for
// mech: what a client sends in AlterUserScramCredentials. The password's
// UTF-8 bytes are used as they are, as Kafka's ScramFormatter does.
func SaltPassword(mech, password string, iters int) (salt, salted []byte, err error) {
	salt = make([]byte, 24)
	_, _ = rand.Read(salt) // crypto/rand.Read never fails
	salted, err = saltedPassword(mech, password, salt, iters)
	return salt, salted, err
}

func saltedPassword(mech, password string, salt []byte, iters int) ([]byte, error) {
	h, ok := hashes[mech]
	if !ok {
		return nil, ErrUnknownMechanism
	}
	salted, err := pbkdf2.Key(h, password, salt, iters, h().Size())
	if err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	return salted, nil
}

// VerifyPassword reports whether password is user's, against its
// strongest SCRAM credential (SASL/PLAIN), comparing the keys in constant
// time.
func (c *Credentials) VerifyPassword(user, password string) bool {
	mechs := (*c.users.Load())[user]
	for _, mech := range []string{SHA512, SHA256} {
		cred, ok := mechs[mech]
		if !ok {
			continue
		}
		salted, err := saltedPassword(mech, password, cred.Salt, cred.Iterations)
		if err != nil {
			return false
		}
		return subtle.ConstantTimeCompare(derive(mech, cred.Salt, cred.Iterations, salted).StoredKey, cred.StoredKey) == 1
	}
	return false
}
