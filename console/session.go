package console

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"sync"
	"time"
)

// Sessions: with ACLs on, a login (a SCRAM user's password, checked as
// SASL/PLAIN checks it) opens a session whose id is in an HttpOnly,
// SameSite=Strict cookie (Secure under TLS); its principal is whom the
// console's requests come from. Each session has a CSRF token that every
// mutating request carries. The table is bounded (the oldest session goes
// first) and sessions end after sessionTTL.
const (
	sessionCookie = "seglog_session"
	loginCookie   = "seglog_login" // the login form's CSRF token, before there is a session
	csrfCookie    = "seglog_csrf"  // a browser's CSRF token without ACLs (no sessions then)
	maxSessions   = 1024
	sessionTTL    = 8 * time.Hour
)

type consoleSession struct {
	login     bool // a login's session (not the anonymous one without ACLs)
	principal string
	csrf      string
	expires   time.Time
}

type sessions struct {
	mu    sync.Mutex // guards byID and order
	byID  map[string]*consoleSession
	order []string // ids, oldest first
	now   func() time.Time
}

func newSessions() *sessions { return &sessions{byID: map[string]*consoleSession{}, now: time.Now} }

// open starts a session of principal and returns its id.
func (s *sessions) open(principal string) (string, *consoleSession) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.order) >= maxSessions {
		delete(s.byID, s.order[0])
		s.order = s.order[1:]
	}
	id := token()
	cs := &consoleSession{login: true, principal: principal, csrf: token(), expires: s.now().Add(sessionTTL)}
	s.byID[id] = cs
	s.order = append(s.order, id)
	return id, cs
}

// get returns the live session of r's cookie, or nil.
func (s *sessions) get(r *http.Request) (string, *consoleSession) {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return "", nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cs := s.byID[c.Value]
	if cs == nil {
		return "", nil
	}
	if s.now().After(cs.expires) {
		s.closeLocked(c.Value)
		return "", nil
	}
	return c.Value, cs
}

func (s *sessions) close(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeLocked(id)
}

func (s *sessions) closeLocked(id string) {
	delete(s.byID, id)
	for i, o := range s.order {
		if o == id {
			s.order = append(s.order[:i], s.order[i+1:]...)
			break
		}
	}
}

// token is 32 random bytes, URL-safe base64.
func token() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// sameToken compares two tokens in constant time; an empty one never matches.
func sameToken(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// setCookie sets an HttpOnly, SameSite=Strict cookie for the whole
// console, Secure when the request came over TLS; maxAge < 0 deletes it.
func setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: "/", MaxAge: maxAge, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
}
