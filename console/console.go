// Package console is the web console seglog serve serves on its HTTP
// listener: pages of the cluster, its topics and partitions, rendered on the
// server with html/template from embedded assets (nothing fetched at run
// time; the read-only pages need no JavaScript). It reads through the
// broker's own request handling (broker.Broker.Request), as a Kafka client
// would, never the files: what a principal may see there is what its ACLs
// let it describe.
package console

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/broker"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Requester handles a Kafka request inside the process for a caller: the
// broker's Request.
type Requester interface {
	Request(ctx context.Context, caller broker.Caller, req kmsg.Request) (kmsg.Response, error)
	// RequestTo handles req for caller on broker node of the cluster
	// (here when node is this broker or there is no cluster).
	RequestTo(ctx context.Context, caller broker.Caller, node int32, req kmsg.Request) (kmsg.Response, error)
	// Authorizes reports whether ACLs are on: then nothing is shown
	// before a login.
	Authorizes() bool
	// Login checks a user's password as SASL/PLAIN does and returns its
	// principal.
	Login(host, user, password string) (string, error)
	// Authorized reports whether caller may do op on a resource.
	Authorized(caller broker.Caller, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool
	// LogEnds sums this broker's replicas' log ends by topic.
	LogEnds() map[string]int64
	// DescribePartition describes this broker's replica of a partition
	// (its newest segments, tier objects, followers) for a caller that
	// may describe the topic; broker.ErrNoReplica when it holds none.
	DescribePartition(caller broker.Caller, topic string, partition int32, newest int) (broker.PartitionDetail, error)
}

// Options configure the console.
type Options struct {
	// Timeout bounds the requests behind one page. The default is 10 s.
	Timeout time.Duration
	Logger  *slog.Logger
	// Metrics are the broker's metrics (its Collector's), which the
	// throughput and latency charts sample; nil: no such charts.
	Metrics prometheus.Gatherer
	// SampleInterval is how often Run samples for the charts (10 s by
	// default; negative: never, the caller calls Sample).
	SampleInterval time.Duration
}

// Console serves the pages.
type Console struct {
	b        Requester
	opts     Options
	pages    map[string]*template.Template
	mux      *http.ServeMux
	sessions *sessions
	samples  sampler
}

// New returns the console of b.
func New(b Requester, opts Options) (*Console, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.SampleInterval == 0 {
		opts.SampleInterval = defaultSampleInterval
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Console{b: b, opts: opts, pages: map[string]*template.Template{}, mux: http.NewServeMux(), sessions: newSessions()}
	c.samples.lags = map[string][]lagSample{}
	for _, page := range []string{"cluster", "topics", "topic", "partition", "messages", "groups", "group", "txns", "login", "refused", "confirm", "result"} {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+page+".html")
		if err != nil {
			return nil, fmt.Errorf("console: %s: %w", page, err)
		}
		c.pages[page] = t
	}
	static, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, err
	}
	c.mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	c.mux.HandleFunc("GET /{$}", c.page(c.cluster))
	c.mux.HandleFunc("GET /topics", c.page(c.topics))
	c.mux.HandleFunc("GET /topics/{topic}", c.page(c.topic))
	c.mux.HandleFunc("GET /topics/{topic}/partitions/{partition}", c.page(c.partition))
	c.mux.HandleFunc("GET /topics/{topic}/messages", c.page(c.messages))
	c.mux.HandleFunc("GET /groups", c.page(c.groups))
	c.mux.HandleFunc("GET /groups/{group}", c.page(c.group))
	c.mux.HandleFunc("GET /transactions", c.page(c.txns))
	c.registerActions()
	return c, nil
}

// ServeHTTP serves a page. With ACLs on, everything but the stylesheet
// and the login form needs a session: a page asked without one is sent to
// the login, anything else refused (401). Every mutating request needs a
// CSRF token — its session's, or without ACLs the browser's own (a
// double-submit cookie) — and must not come from another origin (403).
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Referrer-Policy", "same-origin")
	mutating := r.Method != http.MethodGet && r.Method != http.MethodHead
	if mutating {
		r.Body = http.MaxBytesReader(w, r.Body, maxForm)
		if !sameOrigin(r) {
			c.render(w, r, http.StatusForbidden, "refused", view{Title: "Forbidden", Message: "A change must come from the console's own pages."})
			return
		}
	}
	if !c.b.Authorizes() {
		cs := &consoleSession{principal: broker.Anonymous, csrf: browserToken(w, r, mutating)}
		if mutating && !sameToken(r.PostFormValue("csrf"), cs.csrf) {
			c.render(w, r, http.StatusForbidden, "refused", view{Title: "Forbidden", Message: "The form's token is missing or stale: reload the page."})
			return
		}
		c.mux.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, cs)))
		return
	}
	switch {
	case strings.HasPrefix(r.URL.Path, "/static/") || r.URL.Path == "/favicon.ico": // (none: 404, not the login)
		c.mux.ServeHTTP(w, r)
		return
	case r.URL.Path == "/login":
		c.login(w, r)
		return
	}
	id, cs := c.sessions.get(r)
	if cs == nil {
		if !mutating {
			http.Redirect(w, r, "/login", http.StatusSeeOther)
			return
		}
		c.render(w, r, http.StatusUnauthorized, "refused", view{Title: "Login required", Message: "Log in first."})
		return
	}
	if mutating && !sameToken(r.PostFormValue("csrf"), cs.csrf) {
		c.render(w, r, http.StatusForbidden, "refused", view{Title: "Forbidden", Message: "The form's token is missing or stale: reload the page."})
		return
	}
	if r.URL.Path == "/logout" && r.Method == http.MethodPost {
		c.sessions.close(id)
		setCookie(w, r, sessionCookie, "", -1)
		http.Redirect(w, r, "/login", http.StatusSeeOther)
		return
	}
	c.mux.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, cs)))
}

// sameOrigin reports whether a mutating request may come from the
// console's own page: a browser says where a form was sent from (Origin,
// Sec-Fetch-Site); a request that says another site is refused.
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" {
		return site == "same-origin" || site == "none"
	}
	origin := r.Header.Get("Origin")
	if origin == "" || origin == "null" {
		return true // no browser's word on it: the CSRF token decides
	}
	u, err := url.Parse(origin)
	return err == nil && u.Host == r.Host
}

// browserToken is the CSRF token of a browser without ACLs: the value of
// its csrfCookie, set on a page it reads without one.
func browserToken(w http.ResponseWriter, r *http.Request, mutating bool) string {
	if ck, err := r.Cookie(csrfCookie); err == nil && len(ck.Value) >= 32 {
		return ck.Value
	}
	if mutating {
		return ""
	}
	t := token()
	setCookie(w, r, csrfCookie, t, int(sessionTTL.Seconds()))
	return t
}

// maxForm bounds a form's body.
const maxForm = 64 << 10

type principalKey struct{}

// login shows the login form (GET) or checks it (POST): the form carries
// a token its cookie must match (no login from another site's form).
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		// The form's token stays the browser's while it has one: a page
		// it loads beside the form must not make the form stale.
		t := token()
		if ck, err := r.Cookie(loginCookie); err == nil && len(ck.Value) >= 32 {
			t = ck.Value
		}
		setCookie(w, r, loginCookie, t, 600)
		c.render(w, r, http.StatusOK, "login", view{Title: "Log in", Data: t})
	case http.MethodPost:
		r.Body = http.MaxBytesReader(w, r.Body, maxForm)
		cookie, err := r.Cookie(loginCookie)
		if err != nil || !sameToken(r.PostFormValue("csrf"), cookie.Value) {
			c.render(w, r, http.StatusForbidden, "refused", view{Title: "Forbidden", Message: "The login form is stale: reload it."})
			return
		}
		principal, err := c.b.Login(hostOf(r.RemoteAddr), r.PostFormValue("user"), r.PostFormValue("password"))
		if err != nil {
			t := token()
			setCookie(w, r, loginCookie, t, 600)
			c.render(w, r, http.StatusUnauthorized, "login", view{Title: "Log in", Message: "Login failed.", Data: t})
			return
		}
		id, _ := c.sessions.open(principal)
		setCookie(w, r, loginCookie, "", -1)
		setCookie(w, r, sessionCookie, id, int(sessionTTL.Seconds()))
		http.Redirect(w, r, "/", http.StatusSeeOther)
	default:
		w.Header().Set("Allow", "GET, POST")
		c.render(w, r, http.StatusMethodNotAllowed, "refused", view{Title: "Method not allowed"})
	}
}

// view is what a page's template gets.
type view struct {
	Title   string
	Nav     string
	Message string
	// Warning says what a page could not show (a broker that did not
	// answer).
	Warning string
	Data    any
	// Principal and CSRF are the session's (empty without a login): the
	// layout's logout form carries the token.
	Principal, CSRF string
}

// page adapts a page's reader: its error is the page's (404 for what does
// not exist, 502 for a request that failed).
func (c *Console) page(read func(ctx context.Context, r *http.Request) (string, view, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), c.opts.Timeout)
		defer cancel()
		name, v, err := read(ctx, r)
		if err != nil {
			status := http.StatusBadGateway
			switch {
			case errors.Is(err, errNotFound):
				status = http.StatusNotFound
			case errors.Is(err, errBadRequest):
				status = http.StatusBadRequest
			}
			c.opts.Logger.Debug("console page failed", "path", r.URL.Path, "err", err)
			c.render(w, r, status, "refused", view{Title: http.StatusText(status), Message: err.Error()})
			return
		}
		c.render(w, r, http.StatusOK, name, v)
	}
}

func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, v view) {
	if cs, ok := r.Context().Value(principalKey{}).(*consoleSession); ok && cs.csrf != "" {
		v.CSRF = cs.csrf
		if cs.login {
			v.Principal = cs.principal
		}
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := c.pages[name].Execute(w, v); err != nil {
		c.opts.Logger.Debug("console template failed", "page", name, "err", err)
	}
}

var (
	errNotFound   = errors.New("not found")
	errBadRequest = errors.New("bad request")
)

// caller is who the console's requests come from: the session's
// principal (the anonymous one without ACLs). It has no listener: the
// brokers' addresses are the ones the broker advertises by default (its
// first listener's).
func (c *Console) caller(r *http.Request) broker.Caller {
	principal := broker.Anonymous
	if cs, ok := r.Context().Value(principalKey{}).(*consoleSession); ok {
		principal = cs.principal
	}
	return broker.Caller{Principal: principal, Host: hostOf(r.RemoteAddr), ClientID: "seglog-console"}
}

var funcs = template.FuncMap{
	"bytes": humanBytes,
	"limit": func() int { return browseLimit },
	"join":  joinInt32s,
	"at":    at,
	"rate":  func(v float64) string { return count(v) + "/s" },
}

// at shows a timestamp in milliseconds (UTC, to the second); "–" for
// none (a negative one).
func at(ms int64) string {
	if ms < 0 {
		return "–"
	}
	return time.UnixMilli(ms).UTC().Format(time.DateTime)
}
