package auth

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	fscram "github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/seglog/seglog/vfs"
)

// setPassword stores user's password for every SCRAM mechanism.
func setPassword(t *testing.T, c *Credentials, user, password string) {
	t.Helper()
	var changes []Change
	for _, mech := range []string{SHA256, SHA512} {
		salt, salted, err := SaltPassword(mech, password, MinIterations)
		require.NoError(t, err)
		changes = append(changes, Change{User: user, Mechanism: mech, Salt: salt, Iterations: MinIterations, SaltedPassword: salted})
	}
	errs, err := c.Apply(changes)
	require.NoError(t, err)
	for _, e := range errs {
		require.NoError(t, e)
	}
}

func TestCredentialsFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, CredentialsFile)
	c, err := OpenCredentials(nil, path)
	require.NoError(t, err)
	require.Empty(t, c.Users())
	setPassword(t, c, "alice", "alice-secret")

	info, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "only the owner reads the credentials")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NotContains(t, string(data), "alice-secret", "the password is never stored")

	c, err = OpenCredentials(nil, path)
	require.NoError(t, err)
	require.Equal(t, map[string]map[string]int{"alice": {SHA256: MinIterations, SHA512: MinIterations}}, c.Users())
	require.True(t, c.VerifyPassword("alice", "alice-secret"))
	require.False(t, c.VerifyPassword("alice", "alice-secreT"))
	require.False(t, c.VerifyPassword("bob", "alice-secret"))

	errs, err := c.Apply([]Change{
		{User: "alice", Mechanism: SHA256},                       // deleted
		{User: "bob", Mechanism: SHA256},                         // none to delete
		{User: "", Mechanism: SHA256, SaltedPassword: []byte{1}}, // no user
		{User: "carol", Mechanism: "SCRAM-SHA-1", SaltedPassword: []byte{1}},
		{User: "carol", Mechanism: SHA256, Salt: []byte{1}, Iterations: 100, SaltedPassword: []byte{1}},
	})
	require.NoError(t, err)
	require.NoError(t, errs[0])
	require.ErrorIs(t, errs[1], ErrNoCredential)
	require.ErrorIs(t, errs[2], ErrEmptyUser)
	require.ErrorIs(t, errs[3], ErrUnknownMechanism)
	require.ErrorIs(t, errs[4], ErrIterations)
	c, err = OpenCredentials(nil, path)
	require.NoError(t, err)
	require.Equal(t, map[string]map[string]int{"alice": {SHA512: MinIterations}}, c.Users())
	require.True(t, c.VerifyPassword("alice", "alice-secret"), "PLAIN checks against SCRAM-SHA-512 alone")

	// A damaged file is an error naming it, never an empty store.
	require.NoError(t, os.WriteFile(path, []byte(`{"version":1,"users":{"x":{"SCRAM-SHA-256":{"iterations":1}}}}`), 0o600))
	_, err = OpenCredentials(nil, path)
	require.ErrorIs(t, err, ErrIterations)
	require.ErrorContains(t, err, path)
	require.NoError(t, os.WriteFile(path, []byte(`{"users":`), 0o600))
	_, err = OpenCredentials(nil, path)
	require.ErrorContains(t, err, path)
}

// TestCredentialsCrash: a change cut short at each of its filesystem
// operations, then a power cut, leaves the old credentials or the new
// ones, and an applied change is durable.
func TestCredentialsCrash(t *testing.T) {
	for k := 0; ; k++ {
		mem := vfs.NewMem()
		require.NoError(t, mem.MkdirAll("/d", 0o755))
		require.NoError(t, mem.SyncDir("/"))
		inj := vfs.NewInjector(mem)
		c, err := OpenCredentials(inj, "/d/"+CredentialsFile)
		require.NoError(t, err)
		setPassword(t, c, "alice", "one")
		inj.Add(vfs.Rule{Ops: vfs.OpMutating, Nth: k, Sticky: true})
		salt, salted, err := SaltPassword(SHA512, "two", MinIterations)
		require.NoError(t, err)
		_, applyErr := c.Apply([]Change{{User: "alice", Mechanism: SHA512, Salt: salt, Iterations: MinIterations, SaltedPassword: salted}})
		for seed := range uint64(8) {
			c, err := OpenCredentials(mem.Crash(vfs.CrashRandom, seed), "/d/"+CredentialsFile)
			require.NoError(t, err, "failing operation %d, seed %d", k, seed)
			one, two := c.VerifyPassword("alice", "one"), c.VerifyPassword("alice", "two")
			require.True(t, one || two, "failing operation %d, seed %d: neither password", k, seed)
			require.True(t, applyErr != nil || two, "failing operation %d: an applied change is durable", k)
		}
		if applyErr == nil {
			require.Greater(t, k, 2)
			return
		}
	}
}

// exchange runs a franz-go client mechanism against an Exchange.
func exchange(t *testing.T, c *Credentials, mech sasl.Mechanism) (*Exchange, error) {
	t.Helper()
	x, err := NewExchange(c, mech.Name())
	require.NoError(t, err)
	sess, token, err := mech.Authenticate(context.Background(), "localhost:9092")
	require.NoError(t, err)
	for {
		resp, err := x.Step(token)
		if err != nil {
			return x, err
		}
		done, next, err := sess.Challenge(resp)
		require.NoError(t, err, "the client refuses the server's answer")
		if done {
			require.Nil(t, next)
			return x, nil
		}
		token = next
	}
}

// TestExchange: franz-go's PLAIN and SCRAM clients authenticate; a wrong
// password or an unknown user fails, and the error says nothing of
// either.
func TestExchange(t *testing.T) {
	c, err := OpenCredentials(nil, filepath.Join(t.TempDir(), CredentialsFile))
	require.NoError(t, err)
	setPassword(t, c, "alice", "alice-secret")
	mechs := func(user, pass string) []sasl.Mechanism {
		a := fscram.Auth{User: user, Pass: pass}
		return []sasl.Mechanism{plain.Auth{User: user, Pass: pass}.AsMechanism(), a.AsSha256Mechanism(), a.AsSha512Mechanism()}
	}
	for _, m := range mechs("alice", "alice-secret") {
		x, err := exchange(t, c, m)
		require.NoError(t, err, m.Name())
		require.True(t, x.Done(), m.Name())
		require.Equal(t, "alice", x.User())
	}
	for _, bad := range [][2]string{{"alice", "wrong"}, {"mallory", "alice-secret"}} {
		for _, m := range mechs(bad[0], bad[1]) {
			x, err := exchange(t, c, m)
			require.ErrorIs(t, err, ErrAuthentication, m.Name())
			require.False(t, x.Done())
			require.NotContains(t, err.Error(), bad[1])
			require.False(t, strings.Contains(err.Error(), "mallory"), "an error does not say which users exist")
		}
	}
	x, err := NewExchange(c, SHA256)
	require.NoError(t, err)
	first, err := x.Step([]byte("n,,n=mallory,r=abc"))
	require.NoError(t, err, "an unknown user gets a server-first like any other")
	require.Regexp(t, `^r=abc[^,]+,s=[^,]+,i=4096$`, string(first))
	_, err = NewExchange(c, "GSSAPI")
	require.Error(t, err)

	x, err = NewExchange(c, PLAIN)
	require.NoError(t, err)
	_, err = x.Step([]byte("bob\x00alice\x00alice-secret"))
	require.ErrorIs(t, err, ErrAuthentication, "an authorization id other than the user")
	_, err = x.Step([]byte("\x00alice\x00alice-secret"))
	require.ErrorIs(t, err, ErrAuthentication, "one PLAIN message per exchange")
}

// FuzzExchange: no token sequence panics or authenticates without the
// password.
func FuzzExchange(f *testing.F) {
	f.Add(0, []byte("\x00alice\x00alice-secret"), []byte(nil))
	f.Add(1, []byte("n,,n=alice,r=abcdefgh"), []byte("c=biws,r=abcdefgh,p=AAAA"))
	f.Add(2, []byte("n,a=alice,n=alice,r=x"), []byte("c=,r=,p="))
	f.Add(1, []byte("y,,n=al=2Cice,r=\xff"), []byte("c=eSws,r=x,p=====,e=1"))
	c, err := OpenCredentials(nil, filepath.Join(f.TempDir(), CredentialsFile))
	require.NoError(f, err)
	salt, salted, err := SaltPassword(SHA256, "alice-secret", MinIterations)
	require.NoError(f, err)
	_, err = c.Apply([]Change{{User: "alice", Mechanism: SHA256, Salt: salt, Iterations: MinIterations, SaltedPassword: salted}})
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, mech int, first, second []byte) {
		x, err := NewExchange(c, SASLMechanisms[uint(mech)%uint(len(SASLMechanisms))])
		require.NoError(t, err)
		if _, err := x.Step(first); err != nil {
			require.False(t, x.Done())
			return
		}
		if x.Done() {
			require.Equal(t, PLAIN, x.Mechanism())
			require.Contains(t, string(first), "alice-secret")
			return
		}
		_, _ = x.Step(second)
		require.False(t, x.Done(), "SCRAM authenticated without the password's proof")
	})
}
