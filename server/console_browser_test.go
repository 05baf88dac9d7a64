package server

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/tablet"
)

// browser is headless Debian chromium (make test installs it) driven by
// chromedp, on one server's console.
type browser struct {
	t    *testing.T
	ctx  context.Context
	base string
	// shots is where screenshots go: SEGLOG_SCREENSHOTS (make
	// console-screenshots), or the test's temporary directory.
	shots string
}

func newBrowser(t *testing.T, s *Server) *browser {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("chromium is not installed (make clients installs Debian's chromium)")
		}
		t.Skip("chromium is not installed: make clients installs Debian's chromium, which this test drives")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 860), chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	require.NoError(t, chromedp.Do(ctx), "starting chromium") // (no timeout: it would end the browser)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	shots := os.Getenv("SEGLOG_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	return &browser{t: t, ctx: ctx, base: "http://" + s.MetricsAddr().String(), shots: shots}
}

// run runs steps with a bound on how long they may take.
func (b *browser) run(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	require.NoError(b.t, chromedp.Do(ctx, steps...))
}

// open loads a page and returns its HTTP status.
func (b *browser) open(path string) int64 {
	b.t.Helper()
	return b.load(chromedp.Navigate(b.base + path))
}

// load runs steps that load a page (a click on a link or a button) and
// returns the page's HTTP status once it has loaded.
func (b *browser) load(steps ...chromedp.Action[chromedp.Void]) int64 {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	resp, err := chromedp.RunResponse(ctx, steps...)
	require.NoError(b.t, err)
	return resp.Status
}

// click clicks what sel finds and waits for the page it loads.
func (b *browser) click(sel string) int64 {
	b.t.Helper()
	return b.load(chromedp.Click(chromedp.CSS(sel)))
}

// text is the visible text of what sel finds.
func (b *browser) text(sel string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	require.NoError(b.t, err, sel)
	return s
}

// js evaluates a JavaScript expression (awaiting a promise) in the page.
func js[T any](b *browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	require.NoError(b.t, err, expr)
	return v
}

func (b *browser) location() string {
	b.t.Helper()
	loc, err := chromedp.Run(b.ctx, chromedp.Location())
	require.NoError(b.t, err)
	return strings.TrimPrefix(loc, b.base)
}

// shot saves a screenshot of the page as name.png.
func (b *browser) shot(name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
	require.NoError(b.t, err)
	require.True(b.t, len(png) > 1000 && string(png[1:4]) == "PNG", "a screenshot")
	require.NoError(b.t, os.WriteFile(filepath.Join(b.shots, name+".png"), png, 0o644))
}

// act opens the action form in details#id, fills it, submits it, checks
// the confirmation page says plan, confirms, and returns the result page's
// status and message.
func (b *browser) act(id string, fields map[string]string, plan string) (int64, string) {
	b.t.Helper()
	steps := []chromedp.Action[chromedp.Void]{chromedp.Click(chromedp.CSS("details#" + id + " > summary"))}
	for name, v := range fields {
		steps = append(steps, chromedp.SetValue(chromedp.CSS(fmt.Sprintf("details#%s [name=%q]", id, name)), v))
	}
	b.run(steps...)
	require.Equal(b.t, int64(200), b.click("details#"+id+" button[type=submit]"))
	require.Contains(b.t, b.text("#plan"), plan)
	status := b.click("#confirm")
	return status, b.text("#message")
}

// The console in a real browser against a broker with records, a group
// with lag and a hanging transaction: every page clicked through as a
// person would, what it shows checked, screenshots taken; every action
// performed through its form and confirmation, its effect checked with a
// Kafka client; a POST without the CSRF token refused.
func TestConsoleInABrowser(t *testing.T) {
	s, seed := runServer(t, nil)
	ctx := context.Background()
	cl, err := kgo.NewClient(seed, kgo.DefaultProduceTopic("orders"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for _, topic := range []string{"orders", "payments"} {
		_, err = adm.CreateTopic(ctx, 2, 1, nil, topic)
		require.NoError(t, err)
	}
	s.Console().Sample(ctx) // (the charts' first sample: rates start at the next)
	produce := func(from, to int) {
		for i := from; i < to; i++ {
			require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Key: fmt.Appendf(nil, "order-%d", i),
				Value:   fmt.Appendf(nil, `{"id":%d,"item":"book"}`, i),
				Headers: []kgo.RecordHeader{{Key: "source", Value: []byte("web")}}}).FirstErr())
		}
	}
	produce(0, 10)
	s.Console().Sample(ctx)
	// The group billing reads the ten records and commits, then five more
	// come: a lag of five. Its consumer stays a member for now.
	billing, err := kgo.NewClient(seed, kgo.ConsumerGroup("billing"), kgo.ConsumeTopics("orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	require.NoError(t, err)
	defer billing.Close()
	for n := 0; n < 10; {
		fs := billing.PollFetches(ctx)
		require.NoError(t, fs.Err())
		n += fs.NumRecords()
	}
	require.NoError(t, billing.CommitUncommittedOffsets(ctx))
	s.Console().Sample(ctx)
	produce(10, 15)
	// A hanging transaction: a transactional batch on payments-0 an hour
	// old whose coordinator never heard of it (as after a lost marker).
	tb, ok := s.Manager().Get(checkpoint.TopicPartition{Topic: "payments", Partition: 0})
	require.True(t, ok)
	bld := record.NewBuilder(record.None)
	bld.SetProducer(1<<40, 0, 0)
	bld.SetTransactional(true)
	require.NoError(t, bld.Append(record.Record{Timestamp: time.Now().Add(-time.Hour).UnixMilli(), Value: []byte("stuck")}))
	batch, err := bld.Build()
	require.NoError(t, err)
	_, err = tb.Append(batch.Bytes(), tablet.AppendOptions{})
	require.NoError(t, err)
	lso := func() int64 {
		l, err := adm.ListCommittedOffsets(ctx, "payments")
		require.NoError(t, err)
		o, _ := l.Lookup("payments", 0)
		return o.Offset
	}
	require.Equal(t, int64(0), lso(), "the hanging transaction holds the last stable offset back")
	s.Console().Sample(ctx)

	// partitions asks the broker (not the client's cached metadata) how
	// many partitions a topic has: -1 for none.
	partitions := func(topic string) int {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = &topic
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		require.NoError(t, err)
		if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
			return -1
		}
		return len(resp.Topics[0].Partitions)
	}
	b := newBrowser(t, s)

	// The cluster, then the topics by the navigation, then a topic.
	require.Equal(t, int64(200), b.open("/"))
	require.Contains(t, b.text("#brokers"), "127.0.0.1")
	require.Equal(t, "3", b.text("#topic-count"), "orders, payments, __consumer_offsets")
	require.Equal(t, "0", b.text("#under-min-isr"))
	require.Contains(t, b.text("#charts"), "Produce request time")
	require.Equal(t, "3", js[string](b, `document.getElementById("throughput").getAttribute("data-samples")`), "four samples: three intervals")
	b.shot("cluster")
	require.Equal(t, int64(200), b.click(`nav a[href="/topics"]`))
	require.Contains(t, b.text("#topics"), "orders")
	b.shot("topics")
	require.Equal(t, int64(200), b.click(`#topics a[href="/topics/orders"]`))
	require.Equal(t, "15", b.text("#records"))
	require.Contains(t, b.text("#partitions"), "0")
	require.Contains(t, b.text("#configs"), "retention.ms")
	b.shot("topic")
	// The message browser: the newest records, their JSON pretty-printed.
	require.Equal(t, int64(200), b.click("#browse"))
	body := b.text("main")
	require.Contains(t, body, "\"item\": \"book\"")
	require.Contains(t, body, "order-14")
	require.Contains(t, body, "source")
	b.shot("messages")
	// A partition: this broker's replica of it, its segments.
	require.Equal(t, int64(200), b.open("/topics/orders"))
	require.Equal(t, int64(200), b.click(`#partitions a[href="/topics/orders/partitions/0"]`))
	require.Equal(t, "leader", b.text("#role"))
	require.Equal(t, "8", b.text("#leo"), "round robin: 8 of the 15 records in partition 0")
	require.Contains(t, b.text("#segments"), "0 (active)")
	require.Equal(t, "No tier is attached.", b.text("#tier"))
	b.shot("partition")

	// The groups, then billing's lag.
	require.Equal(t, int64(200), b.click(`nav a[href="/groups"]`))
	require.Contains(t, b.text("#groups"), "billing")
	require.Equal(t, int64(200), b.click(`#groups a[href="/groups/billing"]`))
	require.Equal(t, "5", b.text("#lag"))
	require.Equal(t, "Stable", b.text("#state"))
	legend := `document.querySelector("#lag-chart text.legend").textContent`
	require.Equal(t, "lag 5", js[string](b, legend), "the lag chart's latest sample")
	b.shot("group")
	// Its offsets are not reset while it has a member.
	status, msg := b.act("reset-offsets", map[string]string{"to": "earliest"}, "Reset group billing's offsets")
	require.Equal(t, int64(409), status, msg)
	require.Contains(t, msg, "has 1 members")
	billing.Close()
	require.Equal(t, int64(200), b.open("/groups/billing"))
	require.Equal(t, "Empty", b.text("#state"))
	status, msg = b.act("reset-offsets", map[string]string{"to": "earliest"}, "to the earliest offset")
	require.Equal(t, int64(200), status, msg)
	offs, err := adm.FetchOffsets(ctx, "billing")
	require.NoError(t, err)
	for p := range int32(2) {
		o, ok := offs.Lookup("orders", p)
		require.True(t, ok)
		require.Equal(t, int64(0), o.At, "reset to the earliest")
	}
	require.Equal(t, int64(200), b.click("#next"))
	require.Equal(t, "15", b.text("#lag"))
	// The live refresh: a new sample, and the page's chart follows it
	// without a reload.
	s.Console().Sample(ctx)
	require.GreaterOrEqual(t, js[int](b, `window.seglogRefresh()`), 2, "the chart and the offsets replaced")
	require.Equal(t, "lag 15", js[string](b, legend))
	require.Equal(t, "3", js[string](b, `document.getElementById("lag-chart").getAttribute("data-samples")`), "lag 0, 5 and 15")

	// The transactions: the hanging one, aborted.
	require.Equal(t, int64(200), b.click(`nav a[href="/transactions"]`))
	open := b.text("#open")
	require.Contains(t, open, "payments-0")
	require.Contains(t, open, "hanging")
	b.shot("transactions")
	require.Equal(t, int64(200), b.click("#open button"))
	require.Contains(t, b.text("#plan"), "Abort producer 1099511627776's open transaction on payments-0")
	require.Equal(t, int64(200), b.click("#confirm"))
	require.Contains(t, b.text("#message"), "Aborted")
	require.Equal(t, int64(2), lso(), "past the record and the abort marker")

	// Create a topic, produce a test record to it, change a config, add
	// partitions, delete it.
	require.Equal(t, int64(200), b.open("/topics"))
	status, msg = b.act("create-topic", map[string]string{"name": "made", "partitions": "2"}, "Create topic made with 2 partitions")
	require.Equal(t, int64(200), status, msg)
	require.Equal(t, 2, partitions("made"))

	require.Equal(t, int64(200), b.click("#next"))
	status, msg = b.act("produce", map[string]string{"partition": "1", "key": "hello", "value": `{"x":1}`, "headers": "h=v"},
		"Produce a record of 12 bytes to made-1")
	require.Equal(t, int64(200), status, msg)
	require.Contains(t, msg, "at offset 0")
	rd, err := kgo.NewClient(seed, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"made": {1: kgo.NewOffset().AtStart()}}))
	require.NoError(t, err)
	defer rd.Close()
	fs := rd.PollFetches(ctx)
	require.NoError(t, fs.Err())
	recs := fs.Records()
	require.Len(t, recs, 1)
	require.Equal(t, "hello", string(recs[0].Key))
	require.Equal(t, `{"x":1}`, string(recs[0].Value))
	require.Equal(t, []kgo.RecordHeader{{Key: "h", Value: []byte("v")}}, recs[0].Headers)
	require.Equal(t, int64(200), b.click("#next"))
	require.Contains(t, b.text("main"), "\"x\": 1", "the result links to the record")

	require.Equal(t, int64(200), b.open("/topics/made"))
	status, msg = b.act("alter-config", map[string]string{"name": "retention.ms", "value": "3600000"}, "Set topic made's config retention.ms")
	require.Equal(t, int64(200), status, msg)
	rc, err := adm.DescribeTopicConfigs(ctx, "made")
	require.NoError(t, err)
	cfg, err := rc.On("made", nil)
	require.NoError(t, err)
	i := slices.IndexFunc(cfg.Configs, func(c kadm.Config) bool { return c.Key == "retention.ms" })
	require.GreaterOrEqual(t, i, 0)
	require.Equal(t, "3600000", cfg.Configs[i].MaybeValue())
	require.Equal(t, int64(200), b.click("#next"))
	require.Equal(t, "1 h", b.text("#retention"))

	status, msg = b.act("add-partitions", map[string]string{"count": "3"}, "Grow topic made to 3 partitions")
	require.Equal(t, int64(200), status, msg)
	require.Equal(t, 3, partitions("made"))

	// A POST without the CSRF token is refused, and changes nothing.
	code, err := chromedp.Run(b.ctx, chromedp.Evaluate[int](`fetch("/topics/made/delete", {method: "POST",
		headers: {"Content-Type": "application/x-www-form-urlencoded"}, body: "confirm=yes"}).then(r => r.status)`,
		chromedp.EvalAwaitPromise))
	require.NoError(t, err)
	require.Equal(t, 403, code)
	require.Equal(t, 3, partitions("made"))

	require.Equal(t, int64(200), b.open("/topics/made"))
	status, msg = b.act("delete-topic", nil, "Delete topic made")
	require.Equal(t, int64(200), status, msg)
	require.Equal(t, -1, partitions("made"))
	require.Equal(t, int64(200), b.click("#next"))
	require.NotContains(t, b.text("#topics"), "made")
}

// With ACLs on, the browser meets the login page first, on every page;
// after logging in it sees the pages, as its principal.
func TestConsoleLoginInABrowser(t *testing.T) {
	s, _ := loginServer(t, "admin")
	b := newBrowser(t, s)
	for _, path := range []string{"/", "/topics", "/topics/secret", "/topics/secret/messages", "/groups", "/transactions"} {
		require.Equal(t, int64(200), b.open(path))
		require.Equal(t, "/login", b.location(), path)
	}
	b.shot("login")
	b.run(chromedp.SetValue(chromedp.CSS("[name=user]"), "admin"), chromedp.SetValue(chromedp.CSS("[name=password]"), "wrong"))
	require.Equal(t, int64(401), b.click("form.login button"), b.text("main"))
	require.Equal(t, "Login failed.", b.text("#message"))
	b.run(chromedp.SetValue(chromedp.CSS("[name=user]"), "admin"), chromedp.SetValue(chromedp.CSS("[name=password]"), "admin-password"))
	require.Equal(t, int64(200), b.click("form.login button"))
	require.Equal(t, "/", b.location())
	require.Equal(t, "User:admin", b.text("#principal"))
	require.Equal(t, int64(200), b.click(`nav a[href="/topics"]`))
	require.Contains(t, b.text("#topics"), "secret")
	require.Equal(t, int64(200), b.click("form.logout button"))
	require.Equal(t, "/login", b.location())
	require.Equal(t, int64(200), b.open("/topics"))
	require.Equal(t, "/login", b.location(), "logged out")
}
