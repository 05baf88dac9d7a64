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
	"time"

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
	Authorizes() bool
}

// Options configure the console.
type Options struct {
	// Timeout bounds the requests behind one page. The default is 10 s.
	Timeout time.Duration
	Logger  *slog.Logger
}

// Console serves the pages.
type Console struct {
	b     Requester
	opts  Options
	pages map[string]*template.Template
	mux   *http.ServeMux
}

// New returns the console of b.
func New(b Requester, opts Options) (*Console, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Console{b: b, opts: opts, pages: map[string]*template.Template{}, mux: http.NewServeMux()}
	for _, page := range []string{"cluster", "topics", "topic", "messages", "groups", "group", "txns", "refused"} {
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
	c.mux.HandleFunc("GET /topics/{topic}/messages", c.page(c.messages))
	c.mux.HandleFunc("GET /groups", c.page(c.groups))
	c.mux.HandleFunc("GET /groups/{group}", c.page(c.group))
	c.mux.HandleFunc("GET /transactions", c.page(c.txns))
	return c, nil
}

// ServeHTTP serves a page, or refuses: with an authorizer on, nothing is
// shown before a login, which this console does not have yet — so nothing
// is shown (authorization denies what it has no rule for).
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Referrer-Policy", "no-referrer")
	if c.b.Authorizes() {
		c.render(w, http.StatusUnauthorized, "refused", view{Title: "Login required",
			Message: "ACLs are on (authorizer.class.name): the console shows nothing before a login, and its login is not built yet."})
		return
	}
	c.mux.ServeHTTP(w, r)
}

// view is what a page's template gets.
type view struct {
	Title   string
	Nav     string
	Message string
	Data    any
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
			c.render(w, status, "refused", view{Title: http.StatusText(status), Message: err.Error()})
			return
		}
		c.render(w, http.StatusOK, name, v)
	}
}

func (c *Console) render(w http.ResponseWriter, status int, name string, v view) {
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

// caller is who the console's requests come from: the anonymous principal
// until there is a login. It has no listener: the brokers' addresses are
// the ones the broker advertises by default (its first listener's).
func (c *Console) caller(r *http.Request) broker.Caller {
	return broker.Caller{Principal: broker.Anonymous, Host: hostOf(r.RemoteAddr), ClientID: "seglog-console"}
}

var funcs = template.FuncMap{
	"bytes": humanBytes,
	"limit": func() int { return browseLimit },
	"join":  joinInt32s,
}
