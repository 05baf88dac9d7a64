package auth

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/xdg-go/scram"
)

// BenchmarkLogin is one whole SASL login, server and client: PLAIN costs
// the server a PBKDF2 of the password (MinIterations rounds) each time;
// SCRAM costs it a few HMACs (the client, xdg-go's, derives its keys once
// per salt and caches them, as clients do).
func BenchmarkLogin(b *testing.B) {
	c, err := OpenCredentials(nil, filepath.Join(b.TempDir(), CredentialsFile))
	if err != nil {
		b.Fatal(err)
	}
	var changes []Change
	for _, mech := range []string{SHA256, SHA512} {
		salt, salted, err := SaltPassword(mech, "secret", MinIterations)
		if err != nil {
			b.Fatal(err)
		}
		changes = append(changes, Change{User: "alice", Mechanism: mech, Salt: salt, Iterations: MinIterations, SaltedPassword: salted})
	}
	if _, err := c.Apply(changes); err != nil {
		b.Fatal(err)
	}
	b.Run("mech=PLAIN", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			x, _ := NewExchange(c, PLAIN)
			if _, err := x.Step([]byte("\x00alice\x00secret")); err != nil || !x.Done() {
				b.Fatal(err)
			}
		}
	})
	for mech, h := range map[string]scram.HashGeneratorFcn{SHA256: scram.SHA256, SHA512: scram.SHA512} {
		b.Run("mech="+mech, func(b *testing.B) {
			client, err := h.NewClient("alice", "secret", "")
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				x, _ := NewExchange(c, mech)
				conv := client.NewConversation()
				msg, _ := conv.Step("")
				for !x.Done() {
					resp, err := x.Step([]byte(msg))
					if err != nil {
						b.Fatal(err)
					}
					if msg, err = conv.Step(string(resp)); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkAuthorize is one check against 10,000 literal topic ACLs and
// 100 prefixed ones (the index finds the topic's own and the prefixes).
func BenchmarkAuthorize(b *testing.B) {
	s, err := OpenACLs(nil, filepath.Join(b.TempDir(), ACLFile))
	if err != nil {
		b.Fatal(err)
	}
	var acls []ACL
	for i := range 10_000 {
		acls = append(acls, allow(topic, fmt.Sprintf("topic-%d", i), literal, fmt.Sprintf("User:u%d", i%100), kmsg.ACLOperationRead))
	}
	for i := range 100 {
		acls = append(acls, allow(topic, fmt.Sprintf("team-%d-", i), prefixed, "User:u1", kmsg.ACLOperationWrite))
	}
	if _, err := s.Create(acls); err != nil {
		b.Fatal(err)
	}
	z := &Authorizer{ACLs: s}
	b.ReportAllocs()
	for b.Loop() {
		if !z.Authorize("User:u42", "127.0.0.1", kmsg.ACLOperationDescribe, topic, "topic-4242") {
			b.Fatal("refused")
		}
	}
}
