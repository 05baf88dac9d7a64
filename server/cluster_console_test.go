package server

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/seglog/seglog/internal/faultproxy"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// One broker's console shows the whole cluster: the offsets, sizes and
// records of partitions other brokers lead, groups and a transaction
// other brokers coordinate, a test record produced to a partition another
// broker leads and a reset of a group another broker coordinates — each
// request forwarded in an envelope to the broker that answers it and
// authorized there as the logged-in user's (alice's listing leaves out the
// group she may not describe, which its coordinator lists to a super
// user).
func TestClusterConsole(t *testing.T) {
	t.Parallel()
	c := makeTestCluster(t)
	c.configure = func(_ int32, cfg *Config) {
		cfg.MetricsAddr, cfg.ConsoleSampleInterval = "127.0.0.1:0", -1
		cfg.Broker.Authorizer = true
		// (ANONYMOUS: the PLAINTEXT listener, the test's clients and the brokers.)
		cfg.Broker.SuperUsers = []string{"User:ANONYMOUS", "User:admin"}
	}
	c.links = map[int32]*faultproxy.Proxy{} // (the inter-broker listeners, cut below)
	for id := range int32(3) {
		c.links[id+1] = faultproxy.StartFor(t)
	}
	c.boot(3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c.createAssigned(ctx, "spread", []int32{1, 2, 3}, []int32{2, 3, 1}, []int32{3, 1, 2})
	adm := c.admin()
	for _, u := range []string{"admin", "alice"} {
		res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: u, Mechanism: kadm.ScramSha256, Iterations: 4096,
			Password: u + "-password"}})
		require.NoError(t, err)
		require.NoError(t, res.Error())
	}
	// Partition p has 5(p+1) records.
	cl := c.producer(kgo.DefaultProduceTopic("spread"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := range int32(3) {
		for i := range 5 * (p + 1) {
			require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: fmt.Appendf(nil, `{"p":%d,"i":%d}`, p, i)}).FirstErr())
		}
	}
	// Groups and a transactional id coordinated by brokers other than 1.
	away := func(prefix string, typ int8) string {
		for i := 0; ; i++ {
			if key := fmt.Sprintf("%s-%d", prefix, i); c.coordinator(ctx, key, typ) != 1 {
				return key
			}
		}
	}
	mine, theirs, txid := away("mine", 0), away("theirs", 0), away("tx", 1)
	var offsets kadm.Offsets
	for p := range int32(3) {
		offsets.AddOffset("spread", p, int64(p+1), -1)
	}
	for _, g := range []string{mine, theirs} {
		resp, err := adm.CommitOffsets(ctx, g, offsets)
		require.NoError(t, err)
		require.NoError(t, resp.Error())
	}
	acl := kadm.NewACLs().Allow("User:alice").Topics("spread").Groups(mine).
		Operations(kadm.OpDescribe, kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral)
	res, err := adm.CreateACLs(ctx, acl)
	require.NoError(t, err)
	for _, r := range res {
		require.NoError(t, r.Err)
	}
	tx := c.producer(kgo.TransactionalID(txid), kgo.DefaultProduceTopic("spread"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, tx.BeginTransaction())
	require.NoError(t, tx.ProduceSync(ctx, &kgo.Record{Partition: 1, Value: []byte("open")}).FirstErr())

	s := c.servers[1]
	admin := newWebClient(t, s)
	admin.login("admin", "admin-password")
	status, body := admin.get("/topics/spread")
	require.Equal(t, http.StatusOK, status, body)
	for p, leader := range []int32{1, 2, 3} {
		// Log start, high watermark, last stable: the leader's answers
		// (partition 1's open transaction holds its last stable offset).
		lso := []int{5, 10, 15}[p]
		require.Regexp(t, fmt.Sprintf(`<td><a href="/topics/spread/partitions/%d">%d</a></td><td>%d</td>`, p, p, leader)+
			`(?s:.*?)`+fmt.Sprintf(`<td>0</td><td>%d</td><td>%d</td>`, []int{5, 11, 15}[p], lso), body)
	}
	require.NotContains(t, body, "<td>?</td>", "no partition's offsets unknown")
	status, body = admin.get("/topics/spread/messages?partition=2") // (led by broker 3)
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, "&#34;p&#34;: 2,\n  &#34;i&#34;: 14")

	// Lag is behind the high watermark: 4 + 9 (the open transaction's
	// record counts) + 12.
	status, body = admin.get("/groups")
	require.Equal(t, http.StatusOK, status, body)
	for _, g := range []string{mine, theirs} {
		require.Regexp(t, fmt.Sprintf(`<a href="/groups/%s">%s</a></td>\s*<td>Empty</td>.*\s*<td>3</td><td class="lag">25</td>`, g, g), body)
	}
	status, body = admin.get("/groups/" + mine)
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `<dd id="lag">25</dd>`)
	status, body = admin.get("/transactions")
	require.Equal(t, http.StatusOK, status, body)
	require.Regexp(t, `(?s)<td>`+txid+`</td>\s*<td>Ongoing</td>.*<td>spread-1</td>`, body)
	require.Regexp(t, `spread</a>-1</td>\s*<td>\d+ \(epoch 0\)</td><td>10</td>`, body, "the partition's leader's open transaction")
	require.NotContains(t, body, `class="bad"`, "neither hanging nor failed")

	// The sampler asks the coordinators too, as the brokers' principal.
	s.Console().Sample(ctx)
	status, body = admin.get("/groups/" + mine)
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `data-last="25"`)

	// Actions on other brokers' partitions and groups.
	status, body = admin.act("/topics/spread", "/topics/spread/produce", url.Values{"partition": {"2"}, "value": {"from the console"}})
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, "Produced a record to spread-2 at offset 15.")
	status, body = admin.act("/groups/"+theirs, "/groups/"+theirs+"/reset", url.Values{"to": {"earliest"}})
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, "Reset group "+theirs+"&#39;s offsets of 3 partitions.")
	fetched, err := adm.FetchOffsets(ctx, theirs)
	require.NoError(t, err)
	for p := range int32(3) {
		o, ok := fetched.Lookup("spread", p)
		require.True(t, ok)
		require.Zero(t, o.At, "spread-%d", p)
	}

	// Alice sees her group, with its lag, and not the other: the
	// coordinators authorized the forwarded requests as hers.
	alice := newWebClient(t, s)
	alice.login("alice", "alice-password")
	status, body = alice.get("/groups")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `<a href="/groups/`+mine+`">`)
	require.NotContains(t, body, theirs)
	status, body = alice.get("/groups/" + mine)
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `<dd id="lag">26</dd>`, "with the test record")
	status, _ = alice.get("/groups/" + theirs)
	require.Equal(t, http.StatusNotFound, status)
	status, body = alice.get("/topics/spread/messages?partition=1")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, "&#34;i&#34;: 9")
	require.NoError(t, tx.EndTransaction(ctx, kgo.TryAbort))

	// A broker this one cannot reach: the lists show what the others
	// coordinate and say whose is missing.
	gone := c.coordinator(ctx, theirs, 0)
	c.links[gone].Cut()
	status, body = admin.get("/groups")
	require.Equal(t, http.StatusOK, status, body)
	require.Regexp(t, fmt.Sprintf(`id="warning">Not every broker answered: the groups that broker %d \(.*\) coordinates are not listed.`, gone), body)
	require.NotContains(t, body, `<a href="/groups/`+theirs+`">`)
	if c.coordinator(ctx, mine, 0) != gone {
		require.Contains(t, body, `<a href="/groups/`+mine+`">`)
	}
	status, body = admin.get("/transactions")
	require.Equal(t, http.StatusOK, status, body)
	require.Regexp(t, fmt.Sprintf(`id="warning">Not every broker answered: the transactions that broker %d \(`, gone), body)
	c.links[gone].Heal()
	status, body = admin.get("/groups")
	require.Equal(t, http.StatusOK, status, body)
	require.NotContains(t, body, `id="warning"`)
	require.Contains(t, body, `<a href="/groups/`+theirs+`">`)
}
