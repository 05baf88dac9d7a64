package console

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func withSession(id string) *http.Request {
	r, _ := http.NewRequest("GET", "/", nil)
	r.AddCookie(&http.Cookie{Name: sessionCookie, Value: id})
	return r
}

// The session table is bounded (the oldest goes first) and a session ends
// after sessionTTL; each has its own CSRF token.
func TestSessionsAreBoundedAndExpire(t *testing.T) {
	s := newSessions()
	now := time.Unix(1_700_000_000, 0)
	s.now = func() time.Time { return now }
	first, cs := s.open("User:a")
	require.NotEmpty(t, cs.csrf)
	for range maxSessions {
		s.open("User:b")
	}
	require.Len(t, s.byID, maxSessions)
	_, gone := s.get(withSession(first))
	require.Nil(t, gone, "the oldest session made room")

	id, cs := s.open("User:c")
	_, got := s.get(withSession(id))
	require.Same(t, cs, got)
	now = now.Add(sessionTTL + time.Second)
	_, got = s.get(withSession(id))
	require.Nil(t, got, "expired")
	require.Len(t, s.byID, maxSessions-1)
	_, got = s.get(withSession("forged"))
	require.Nil(t, got)
}

func TestSameToken(t *testing.T) {
	require.True(t, sameToken("abc", "abc"))
	require.False(t, sameToken("abc", "abd"))
	require.False(t, sameToken("", ""), "an empty token never matches")
}
