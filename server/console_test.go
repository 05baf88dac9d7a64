package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/seglog/seglog/broker"
	"github.com/seglog/seglog/internal/testpki"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// runServer starts a server on a fresh data directory (its config changed
// by tune, if set) and runs it until the test ends; seed is a client's
// option to reach it.
// loginServer runs a server with ACLs on (User:admin a super user), a
// topic "secret" and the named SCRAM-SHA-256 users, each with the
// password "<user>-password"; adm is a super user's admin client.
func loginServer(t *testing.T, users ...string) (*Server, *kadm.Client) {
	t.Helper()
	s, seed := runServer(t, func(cfg *Config) {
		cfg.Broker.Authorizer = true
		cfg.Broker.SuperUsers = []string{"User:admin", "User:ANONYMOUS"} // the test's own client sets up as ANONYMOUS
	})
	ctx := context.Background()
	cl, err := kgo.NewClient(seed)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	adm := kadm.NewClient(cl)
	_, err = adm.CreateTopic(ctx, 1, 1, nil, "secret")
	require.NoError(t, err)
	for _, u := range users {
		res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: u, Mechanism: kadm.ScramSha256, Iterations: 4096,
			Password: u + "-password"}})
		require.NoError(t, err)
		require.NoError(t, res.Error())
	}
	return s, adm
}

func runServer(t *testing.T, tune func(*Config)) (s *Server, seed kgo.Opt) {
	t.Helper()
	cfg := config(filepath.Join(t.TempDir(), "data"))
	cfg.ConsoleSampleInterval = -1 // the test samples: s.Console().Sample
	if tune != nil {
		tune(&cfg)
	}
	s, err := New(context.Background(), cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	return s, kgo.SeedBrokers(s.Listeners()[0].Addr.String())
}

// get fetches a console page and returns its status and body.
func get(t *testing.T, s *Server, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + s.MetricsAddr().String() + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// webClient is a browser without JavaScript of one server's console: it
// keeps its cookies and does not follow redirects.
type webClient struct {
	t    *testing.T
	base string
	c    *http.Client
}

func newWebClient(t *testing.T, s *Server) *webClient {
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &webClient{t: t, base: "http://" + s.MetricsAddr().String(),
		c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// do sends a request, a form if form is not nil, and reads the answer.
func (w *webClient) do(method, path string, form url.Values) (*http.Response, string) {
	w.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, w.base+path, body)
	require.NoError(w.t, err)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := w.c.Do(req)
	require.NoError(w.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(w.t, err)
	return resp, string(b)
}

// get is a page's status and body.
func (w *webClient) get(path string) (int, string) {
	w.t.Helper()
	resp, body := w.do("GET", path, nil)
	return resp.StatusCode, body
}

// login logs in through the login form.
func (w *webClient) login(user, password string) {
	w.t.Helper()
	resp, body := w.do("GET", "/login", nil)
	require.Equal(w.t, http.StatusOK, resp.StatusCode)
	resp, _ = w.do("POST", "/login", url.Values{"csrf": {csrfOf(w.t, body)}, "user": {user}, "password": {password}})
	require.Equal(w.t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(w.t, "/", resp.Header.Get("Location"))
}

// act performs an action as its form and then its confirmation page
// send it, with the CSRF token of page, and returns the result page.
func (w *webClient) act(page, path string, form url.Values) (int, string) {
	w.t.Helper()
	_, body := w.get(page)
	form.Set("csrf", csrfOf(w.t, body))
	resp, body := w.do("POST", path, form)
	require.Equal(w.t, http.StatusOK, resp.StatusCode, body)
	require.Contains(w.t, body, `value="yes"`, "a confirmation page first")
	form.Set("confirm", "yes")
	resp, body = w.do("POST", path, form)
	return resp.StatusCode, body
}

// csrfOf is the CSRF token of a page's form.
func csrfOf(t *testing.T, body string) string {
	t.Helper()
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(body)
	require.Len(t, m, 2, body)
	return m[1]
}

// The console on the HTTP listener, beside /metrics: the cluster, the
// topics with their records and configs, a topic's partitions with their
// offsets — read through the broker's own request handling after a client
// produced.
func TestConsolePages(t *testing.T) {
	s, seed := runServer(t, nil)
	cl, err := kgo.NewClient(seed, kgo.DefaultProduceTopic("orders"),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	require.NoError(t, err)
	defer cl.Close()
	ctx := context.Background()
	adm := kadm.NewClient(cl)
	_, err = adm.CreateTopic(ctx, 3, 1, map[string]*string{"retention.ms": kstr("3600000")}, "orders")
	require.NoError(t, err)
	_, err = adm.CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": kstr("compact")}, "profiles")
	require.NoError(t, err)
	s.Console().Sample(ctx)
	for i := range 30 {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "order-%d", i)}).FirstErr())
	}
	s.Console().Sample(ctx)

	// DescribeLogDirs (what the console's sizes come from), as kadm asks.
	dirs, err := adm.DescribeAllLogDirs(ctx, nil)
	require.NoError(t, err)
	var orders int64
	dirs.Each(func(d kadm.DescribedLogDir) {
		require.NoError(t, d.Err)
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
			if p.Topic == "orders" {
				orders += p.Size
			}
		})
	})
	require.Positive(t, orders)

	status, body := get(t, s, "/")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `<dd id="topic-count"><a href="/topics">2</a></dd>`)
	require.Contains(t, body, `<dd id="partition-count">4</dd>`)
	require.Contains(t, body, `<dd id="under-replicated">0</dd>`)
	require.Contains(t, body, `<dd id="under-min-isr">0</dd>`)
	// The broker's charts: one interval sampled, the produces in it.
	for _, id := range []string{"throughput", "requests", "produce-latency"} {
		require.Regexp(t, `<svg class="chart" id="`+id+`" [^>]*data-samples="1">`, body)
	}
	require.Regexp(t, `data-series="in" data-last="[1-9][0-9.e+]*"`, body, "bytes came in")
	require.Regexp(t, `data-series="p99" data-last="[0-9][0-9.e+-]*"`, body, "produce requests were timed")
	require.Regexp(t, `<tr><td>0</td><td>127\.0\.0\.1</td><td>\d+</td><td></td><td>controller</td></tr>`, body)

	status, body = get(t, s, "/topics")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `<a href="/topics/orders">orders</a>`)
	require.Regexp(t, `orders</a></td>\s*<td>3</td><td>30</td><td class="rate">([1-9][0-9.]*|0\.[1-9])/s</td><td>[0-9.]+ (B|KiB)</td><td>0 B</td><td>delete</td><td>1 h</td>`, body)
	require.Regexp(t, `profiles</a></td>\s*<td>1</td><td>0</td><td class="rate">0/s</td><td>0 B</td><td>0 B</td><td>compact</td><td>7 d</td>`, body)

	status, body = get(t, s, "/topics/orders")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `<dd id="records">30</dd>`)
	for p := range 3 {
		// Round robin: ten records in each partition, from offset 0.
		require.Regexp(t, fmt.Sprintf(`<td><a href="/topics/orders/partitions/%d">%d</a></td><td>0</td><td>0</td><td>0</td>\s*<td>0</td>\s*<td>0</td><td>10</td><td>10</td><td>10</td>`, p, p), body)
	}

	// A partition: its offsets, and this broker's replica — its one
	// segment, active, with ten records and their times; no tier.
	status, body = get(t, s, "/topics/orders/partitions/1")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `<dd id="hw">10</dd>`)
	require.Contains(t, body, `<dd id="min-isr">1</dd>`)
	require.Contains(t, body, `<dd id="role">leader</dd>`)
	require.Contains(t, body, `<dd id="leo">10</dd>`)
	require.Contains(t, body, "1 local segment(s).")
	require.Regexp(t, `<tr><td>0 \(active\)</td><td>10</td><td>[0-9.]+ (B|KiB)</td>\s*<td>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d</td><td>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d</td>\s*<td>\d+ / \d+ \(\d+%\)</td></tr>`, body)
	require.Contains(t, body, `<p id="tier">No tier is attached.</p>`)
	require.NotContains(t, body, `id="followers"`, "a single node has no followers")
	for _, path := range []string{"/topics/orders/partitions/3", "/topics/orders/partitions/x", "/topics/missing/partitions/0"} {
		status, _ = get(t, s, path)
		require.Equal(t, http.StatusNotFound, status, path)
	}

	status, body = get(t, s, "/topics/missing")
	require.Equal(t, http.StatusNotFound, status)
	require.Contains(t, body, "UNKNOWN_TOPIC_OR_PARTITION")

	status, body = get(t, s, "/static/style.css")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, "dl.facts")

	status, body = get(t, s, "/metrics")
	require.Equal(t, http.StatusOK, status, "/metrics is still served")
	require.Contains(t, body, "go_goroutines")
}

// With ACLs on, the console asks for a login before anything (but its
// stylesheet): a SCRAM user's password, checked as SASL/PLAIN checks it;
// the session cookie is HttpOnly and SameSite; a principal sees what its
// ACLs let it describe; every POST needs the session's CSRF token.
func TestConsoleLogin(t *testing.T) {
	s, _ := loginServer(t, "admin", "alice")

	base := "http://" + s.MetricsAddr().String()
	browser := func() *webClient { return newWebClient(t, s) }
	do := func(c *webClient, method, path string, form url.Values) (*http.Response, string) {
		t.Helper()
		return c.do(method, path, form)
	}
	csrfOf := func(body string) string { return csrfOf(t, body) }
	login := func(user, password string) *webClient {
		c := browser()
		c.login(user, password)
		return c
	}

	anon := browser()
	for _, path := range []string{"/", "/topics", "/topics/secret", "/groups", "/transactions"} {
		resp, _ := do(anon, "GET", path, nil)
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, path)
		require.Equal(t, "/login", resp.Header.Get("Location"), path)
	}
	resp, _ := do(anon, "POST", "/logout", url.Values{})
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	resp, _ = do(anon, "GET", "/static/style.css", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)

	// A login without the form's token, and a wrong password, are refused.
	resp, body := do(anon, "GET", "/login", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp, _ = do(anon, "POST", "/login", url.Values{"user": {"alice"}, "password": {"alice-password"}})
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	resp, body = do(anon, "POST", "/login", url.Values{"csrf": {csrfOf(body)}, "user": {"alice"}, "password": {"wrong"}})
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Contains(t, body, "Login failed.")
	for _, c := range resp.Cookies() {
		require.NotEqual(t, "seglog_session", c.Name, "no session for a wrong password")
	}

	alice := login("alice", "alice-password")
	resp, body = do(alice, "GET", "/topics", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, `<span id="principal">User:alice</span>`)
	require.NotContains(t, body, "secret", "alice may not describe it")
	// An action needs the ACL its Kafka API needs: alice may not delete it.
	resp, body = do(alice, "POST", "/topics/secret/delete", url.Values{"csrf": {csrfOf(body)}, "confirm": {"yes"}})
	require.Equal(t, http.StatusForbidden, resp.StatusCode, body)
	require.Contains(t, body, "TOPIC_AUTHORIZATION_FAILED")
	// A form another site sends is refused, with the right token too.
	req, err := http.NewRequest("POST", base+"/topics", strings.NewReader(url.Values{"csrf": {csrfOf(body)}, "name": {"x"}}.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err = alice.c.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)

	admin := browser()
	resp, body = do(admin, "GET", "/login", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp, _ = do(admin, "POST", "/login", url.Values{"csrf": {csrfOf(body)}, "user": {"admin"}, "password": {"admin-password"}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	var session *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "seglog_session" {
			session = c
		}
	}
	require.NotNil(t, session)
	require.True(t, session.HttpOnly)
	require.Equal(t, http.SameSiteStrictMode, session.SameSite)
	resp, body = do(admin, "GET", "/topics", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, `<a href="/topics/secret">secret</a>`)

	// Logging out needs the session's token; then the session is gone.
	resp, _ = do(admin, "POST", "/logout", url.Values{})
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	resp, _ = do(admin, "POST", "/logout", url.Values{"csrf": {csrfOf(body)}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	resp, _ = do(admin, "GET", "/topics", nil)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	resp, _ = do(alice, "GET", "/topics", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "alice's session is her own")
}

// The message browser: from an offset, from the end, from a time; JSON
// pretty-printed, text, hex; headers; read committed leaves an aborted
// transaction's records out, read uncommitted shows them; each record's
// batch and producer.
func TestConsoleMessageBrowser(t *testing.T) {
	s, seed := runServer(t, nil)
	ctx := context.Background()
	cl, err := kgo.NewClient(seed, kgo.DefaultProduceTopic("events"))
	require.NoError(t, err)
	defer cl.Close()
	_, err = kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "events")
	require.NoError(t, err)
	require.NoError(t, cl.ProduceSync(ctx,
		&kgo.Record{Key: []byte("order-1"), Value: []byte(`{"id":1,"items":["pen"]}`),
			Headers: []kgo.RecordHeader{{Key: "source", Value: []byte("web")}}},
		&kgo.Record{Key: []byte{0xff, 0x00, 0x01}, Value: []byte("plain text")},
		&kgo.Record{Value: nil}).FirstErr())
	// An aborted transaction, then a committed one.
	tx, err := kgo.NewClient(seed, kgo.DefaultProduceTopic("events"), kgo.TransactionalID("console-test"))
	require.NoError(t, err)
	defer tx.Close()
	for _, commit := range []bool{false, true} {
		require.NoError(t, tx.BeginTransaction())
		require.NoError(t, tx.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "txn-committed=%v", commit)}).FirstErr())
		require.NoError(t, tx.EndTransaction(ctx, kgo.TransactionEndTry(commit)))
	}
	// EndTxn answers at the commit point, the markers follow: a read
	// committed consumer waits for the committed record to be stable.
	rc, err := kgo.NewClient(seed, kgo.ConsumeTopics("events"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer rc.Close()
	for stable := false; !stable; {
		fs := rc.PollFetches(ctx)
		require.NoError(t, fs.Err())
		fs.EachRecord(func(r *kgo.Record) { stable = stable || string(r.Value) == "txn-committed=true" })
	}

	status, body := get(t, s, "/topics/events/messages")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, "<pre class=\"json\">{\n  &#34;id&#34;: 1,\n  &#34;items&#34;: [\n    &#34;pen&#34;\n  ]\n}</pre>")
	require.Contains(t, body, `<b>source</b>: <pre class="utf-8">web</pre>`)
	require.Contains(t, body, `<pre class="hex">ff0001</pre>`)
	require.Contains(t, body, `<pre class="utf-8">plain text</pre>`)
	require.Contains(t, body, `<span class="null">null</span>`)
	require.Contains(t, body, "txn-committed=true")
	require.NotContains(t, body, "txn-committed=false", "read committed leaves the aborted record out")
	require.Regexp(t, `producer \d+ epoch \d+, transactional`, body)

	status, body = get(t, s, "/topics/events/messages?isolation=uncommitted")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, "txn-committed=false")

	status, body = get(t, s, "/topics/events/messages?from=offset&offset=1&format=hex")
	require.Equal(t, http.StatusOK, status)
	require.NotContains(t, body, "<td>0</td><td>", "from offset 1")
	require.Contains(t, body, `<pre class="hex">706c61696e2074657874</pre>`) // "plain text"

	status, body = get(t, s, "/topics/events/messages?from=end")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, "order-1", "the last 50 hold them all")

	future := time.Now().Add(time.Hour).UTC().Format("2006-01-02T15:04")
	status, body = get(t, s, "/topics/events/messages?from=time&time="+future)
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, "No records there.")

	status, _ = get(t, s, "/topics/events/messages?partition=7")
	require.Equal(t, http.StatusNotFound, status)
	status, _ = get(t, s, "/topics/events/messages?offset=x")
	require.Equal(t, http.StatusBadRequest, status)
	status, _ = get(t, s, "/topics/nothing/messages")
	require.Equal(t, http.StatusNotFound, status)
}

// Consumer groups: an empty one with commits and its lag, a live one with
// its member and assignment.
func TestConsoleGroups(t *testing.T) {
	s, seed := runServer(t, nil)
	ctx := context.Background()
	cl, err := kgo.NewClient(seed, kgo.DefaultProduceTopic("in"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	_, err = adm.CreateTopic(ctx, 2, 1, nil, "in")
	require.NoError(t, err)
	for i := range 20 {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "%d", i)}).FirstErr())
	}
	var offsets kadm.Offsets
	offsets.AddOffset("in", 0, 3, -1)
	offsets.AddOffset("in", 1, 5, -1)
	resp, err := adm.CommitOffsets(ctx, "idle", offsets)
	require.NoError(t, err)
	require.NoError(t, resp.Error())

	live, err := kgo.NewClient(seed, kgo.ConsumerGroup("live"), kgo.ConsumeTopics("in"), kgo.ClientID("live-client"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	require.NoError(t, err)
	defer live.Close()
	for n := 0; n < 20; {
		fs := live.PollFetches(ctx)
		require.NoError(t, fs.Err())
		n += fs.NumRecords()
	}
	require.NoError(t, live.CommitUncommittedOffsets(ctx))

	status, body := get(t, s, "/groups")
	require.Equal(t, http.StatusOK, status, body)
	require.Regexp(t, `<a href="/groups/idle">idle</a></td>\s*<td>Empty</td><td>classic</td>\s*<td>2</td><td class="lag">12</td>`, body)
	require.Regexp(t, `<a href="/groups/live">live</a></td>\s*<td>Stable</td><td>classic \(consumer\)</td>\s*<td>2</td><td class="lag">0</td>`, body)

	status, body = get(t, s, "/groups/idle")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `<dd id="lag">12</dd>`)
	require.Contains(t, body, `<td><a href="/topics/in">in</a></td><td>0</td><td>3</td>`+"\n"+`<td>10</td><td>7</td>`)

	status, body = get(t, s, "/groups/live")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `<dd id="state">Stable</dd>`)
	require.Regexp(t, `<td>live-client</td><td>/?127\.0\.0\.1</td><td>in-0, in-1</td>`, body)

	status, _ = get(t, s, "/groups/none")
	require.Equal(t, http.StatusNotFound, status)
}

// Transactions: an open one with its partitions listed first, a committed
// one after it.
func TestConsoleTransactions(t *testing.T) {
	s, seed := runServer(t, nil)
	ctx := context.Background()
	for _, id := range []string{"done", "open"} {
		tx, err := kgo.NewClient(seed, kgo.DefaultProduceTopic("t"), kgo.TransactionalID(id), kgo.AllowAutoTopicCreation())
		require.NoError(t, err)
		defer tx.Close()
		require.NoError(t, tx.BeginTransaction())
		require.NoError(t, tx.ProduceSync(ctx, &kgo.Record{Value: []byte(id)}).FirstErr())
		if id == "done" {
			require.NoError(t, tx.EndTransaction(ctx, kgo.TryCommit))
		}
	}
	status, body := get(t, s, "/transactions")
	require.Equal(t, http.StatusOK, status, body)
	require.Regexp(t, `(?s)<td>open</td>\s*<td>Ongoing</td>.*<td>t-0</td>.*<td>done</td>\s*<td>(CompleteCommit|PrepareCommit)</td>`, body)
}

func kstr(s string) *string { return &s }

// The HTTP listener over TLS (--http-tls): the console and /metrics on
// https with the listeners' certificate; the login's cookies are Secure.
func TestConsoleOverTLS(t *testing.T) {
	pki := testpki.New(t)
	cert, key := pki.Issue(t, "node", 10, "broker", true)
	s, _ := runServer(t, func(cfg *Config) {
		cfg.HTTPTLS = true
		cfg.TLS = broker.TLSOptions{CertFile: cert, KeyFile: key}
		cfg.Broker.Authorizer = true
	})
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pki.Pool}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	base := "https://" + s.MetricsAddr().String()
	resp, err := c.Get(base + "/topics")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "a login first, over TLS")
	resp, err = c.Get(base + "/login")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NotEmpty(t, resp.Cookies())
	for _, ck := range resp.Cookies() {
		require.True(t, ck.Secure, ck.Name)
	}
	resp, err = c.Get(base + "/metrics")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp, err = http.Get("http://" + s.MetricsAddr().String() + "/metrics")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "no plain HTTP on a TLS listener")
}
