package auth

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
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

// TestSecurityFilesCrash: a change to each security file cut short at
// each of its filesystem operations, then a power cut, leaves the old
// state or the new one, and an applied change is durable.
func TestSecurityFilesCrash(t *testing.T) {
	type store struct {
		file string
		// setup makes the old state; change the new one; state reads which
		// it is: "old", "new" or anything else (neither).
		setup, change func(fsys vfs.FS, path string) error
		state         func(fsys vfs.FS, path string) (string, error)
	}
	password := func(pass string) func(vfs.FS, string) error {
		return func(fsys vfs.FS, path string) error {
			c, err := OpenCredentials(fsys, path)
			if err != nil {
				return err
			}
			salt, salted, err := SaltPassword(SHA512, pass, MinIterations)
			if err == nil {
				_, err = c.Apply([]Change{{User: "alice", Mechanism: SHA512, Salt: salt, Iterations: MinIterations, SaltedPassword: salted}})
			}
			return err
		}
	}
	acl := func(name string) func(vfs.FS, string) error {
		return func(fsys vfs.FS, path string) error {
			s, err := OpenACLs(fsys, path)
			if err == nil {
				_, err = s.Create([]ACL{allow(topic, name, literal, "User:bob", kmsg.ACLOperationRead)})
			}
			return err
		}
	}
	quota := func(v float64) func(vfs.FS, string) error {
		return func(fsys vfs.FS, path string) error {
			q, err := OpenQuotas(fsys, path)
			if err == nil {
				_, err = q.Alter([]Entity{{EntityUser: nil}}, [][]QuotaOp{{{Key: ProducerByteRate, Value: v}}}, false)
			}
			return err
		}
	}
	for _, st := range []store{
		{file: CredentialsFile, setup: password("one"), change: password("two"), state: func(fsys vfs.FS, path string) (string, error) {
			c, err := OpenCredentials(fsys, path)
			if err != nil {
				return "", err
			}
			return map[[2]bool]string{{true, false}: "old", {false, true}: "new"}[[2]bool{c.VerifyPassword("alice", "one"),
				c.VerifyPassword("alice", "two")}], nil
		}},
		{file: ACLFile, setup: acl("a"), change: acl("b"), state: func(fsys vfs.FS, path string) (string, error) {
			s, err := OpenACLs(fsys, path)
			if err != nil {
				return "", err
			}
			return map[int]string{1: "old", 2: "new"}[len(s.List(Filter{ResourceType: kmsg.ACLResourceTypeAny,
				Pattern: kmsg.ACLResourcePatternTypeAny, Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}))], nil
		}},
		{file: QuotasFile, setup: quota(1), change: quota(2), state: func(fsys vfs.FS, path string) (string, error) {
			q, err := OpenQuotas(fsys, path)
			if err != nil {
				return "", err
			}
			v, _ := q.Resolve("x", "y", ProducerByteRate)
			return map[float64]string{1: "old", 2: "new"}[v], nil
		}},
	} {
		t.Run(st.file, func(t *testing.T) {
			path := "/d/" + st.file
			for k := 0; ; k++ {
				mem := vfs.NewMem()
				require.NoError(t, mem.MkdirAll("/d", 0o755))
				require.NoError(t, mem.SyncDir("/"))
				require.NoError(t, st.setup(mem, path))
				inj := vfs.NewInjector(mem)
				inj.Add(vfs.Rule{Ops: vfs.OpMutating, Nth: k, Sticky: true})
				changeErr := st.change(inj, path)
				for seed := range uint64(8) {
					got, err := st.state(mem.Crash(vfs.CrashRandom, seed), path)
					require.NoError(t, err, "failing operation %d, seed %d", k, seed)
					require.Contains(t, []string{"old", "new"}, got, "failing operation %d, seed %d", k, seed)
					require.True(t, changeErr != nil || got == "new", "failing operation %d: an applied change is durable", k)
				}
				if changeErr == nil {
					require.Greater(t, k, 2)
					return
				}
			}
		})
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
