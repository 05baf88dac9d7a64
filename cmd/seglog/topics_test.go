package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/internal/testpki"
)

// seglog topics and configs against a running broker, plaintext: create
// (with a config), list, describe (Kafka's lines), grow, alter and delete
// a config, delete; the broker's configs are described and refuse an
// alter.
func TestTopicsAndConfigsCommands(t *testing.T) {
	t.Parallel()
	d := filepath.Join(t.TempDir(), "data")
	cmd, lines := startServe(t, "--data-dir", d, "--config", "listeners=PLAINTEXT://127.0.0.1:0",
		"--config", "connections.max.reauth.ms=600000")
	addr := servedAddr(t, cmd, lines)
	topics := func(args ...string) (int, string, string) {
		return runSeglog(t, append([]string{"topics", "--bootstrap-server", addr}, args...)...)
	}
	configs := func(args ...string) (int, string, string) {
		return runSeglog(t, append([]string{"configs", "--bootstrap-server", addr}, args...)...)
	}
	code, out, errOut := topics("--create", "--topic", "orders", "--partitions", "3", "--config", "retention.ms=3600000")
	require.Zero(t, code, errOut)
	require.Equal(t, "Created topic orders.\n", out)
	code, _, errOut = topics("--create", "--topic", "orders")
	require.NotZero(t, code)
	require.Contains(t, errOut, "TOPIC_ALREADY_EXISTS")
	code, _, errOut = topics("--create", "--topic", "orders", "--if-not-exists")
	require.Zero(t, code, errOut)
	code, out, errOut = topics("--list")
	require.Zero(t, code, errOut)
	require.Contains(t, out, "orders\n")
	code, out, errOut = topics("--describe", "--topic", "orders")
	require.Zero(t, code, errOut)
	require.Regexp(t, `^Topic: orders\tTopicId: [A-Za-z0-9_-]{22}\tPartitionCount: 3\tReplicationFactor: 1\tConfigs: retention.ms=3600000\n`, out)
	require.Equal(t, 3, len(regexp.MustCompile(`(?m)^\tTopic: orders\tPartition: \d\tLeader: 0\tReplicas: 0\tIsr: 0\tElr: \tLastKnownElr: $`).FindAllString(out, -1)), out)
	code, out, errOut = topics("--alter", "--topic", "orders", "--partitions", "5")
	require.Zero(t, code, errOut)
	require.Contains(t, out, "now has 5 partitions")
	code, _, errOut = topics("--alter", "--topic", "orders", "--partitions", "2")
	require.NotZero(t, code, "partitions only grow")
	require.Contains(t, errOut, "INVALID_PARTITIONS")

	code, out, errOut = configs("--entity-type", "topics", "--entity-name", "orders", "--alter", "--add-config", "cleanup.policy=[compact,delete],segment.ms=60000")
	require.Zero(t, code, errOut)
	require.Equal(t, "Completed updating config for topic orders.\n", out)
	code, out, errOut = configs("--entity-type", "topics", "--entity-name", "orders", "--describe")
	require.Zero(t, code, errOut)
	require.Contains(t, out, "Dynamic configs for topic orders are:\n")
	require.Contains(t, out, "  segment.ms=60000 sensitive=false")
	require.Contains(t, out, "  cleanup.policy=compact,delete sensitive=false")
	require.Contains(t, out, "  retention.ms=3600000 sensitive=false")
	code, _, errOut = configs("--entity-type", "topics", "--entity-name", "orders", "--alter", "--delete-config", "segment.ms")
	require.Zero(t, code, errOut)
	code, out, _ = configs("--entity-type", "topics", "--entity-name", "orders", "--describe")
	require.Zero(t, code)
	require.NotContains(t, out, "segment.ms", "back to its default")
	code, _, errOut = configs("--entity-type", "topics", "--entity-name", "orders", "--alter", "--add-config", "segment.ms=-5")
	require.NotZero(t, code)
	require.Contains(t, errOut, "INVALID_CONFIG")
	code, out, errOut = configs("--entity-type", "brokers", "--entity-name", "0", "--describe", "--all")
	require.Zero(t, code, errOut)
	require.Contains(t, out, "All configs for broker 0 are:\n")
	require.Contains(t, out, "  num.partitions=1 sensitive=false")
	require.Contains(t, out, "  connections.max.reauth.ms=600000 sensitive=false", "every config the broker was given")
	require.Contains(t, out, "  listeners=PLAINTEXT://127.0.0.1:0 sensitive=false")
	code, _, errOut = configs("--entity-type", "brokers", "--entity-name", "0", "--alter", "--add-config", "num.partitions=3")
	require.NotZero(t, code, "num.partitions is static")
	require.Contains(t, errOut, "Cannot update these configs dynamically")

	// A dynamic topic default, every broker's, then this one's.
	code, out, errOut = configs("--entity-type", "brokers", "--entity-default", "--alter", "--add-config", "log.retention.ms=3600000")
	require.Zero(t, code, errOut)
	require.Equal(t, "Completed updating default config for brokers in the cluster.\n", out)
	code, _, errOut = configs("--entity-type", "brokers", "--entity-name", "0", "--alter", "--add-config", "log.retention.ms=7200000,log.segment.bytes=1048576")
	require.Zero(t, code, errOut)
	code, out, _ = configs("--entity-type", "brokers", "--entity-default", "--describe")
	require.Zero(t, code)
	require.Equal(t, "Default configs for brokers in the cluster are:\n"+
		"  log.retention.ms=3600000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=3600000}\n", out)
	code, out, _ = configs("--entity-type", "brokers", "--entity-name", "0", "--describe")
	require.Zero(t, code)
	require.Contains(t, out, "  log.retention.ms=7200000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.retention.ms=7200000, "+
		"DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=3600000, STATIC_BROKER_CONFIG:log.retention.ms=604800000}\n")
	code, out, _ = configs("--entity-type", "topics", "--entity-name", "orders", "--describe", "--all")
	require.Zero(t, code)
	require.Contains(t, out, "  retention.ms=3600000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=3600000}\n", "the topic's own")
	require.Contains(t, out, "  segment.bytes=1048576 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:segment.bytes=1048576}\n", "the broker's")

	code, out, errOut = topics("--delete", "--topic", "orders")
	require.Zero(t, code, errOut)
	require.Equal(t, "Deleted topic orders.\n", out)
	code, out, _ = topics("--list")
	require.Zero(t, code)
	require.NotContains(t, out, "orders")
	code, _, errOut = topics("--describe", "--topic", "orders")
	require.NotZero(t, code)
	require.Contains(t, errOut, "orders")
	stopServe(t, cmd)
}

// The same over SASL_SSL with ACLs on: the super user creates and
// describes; a user without Create on the cluster or topic is refused
// (TOPIC_AUTHORIZATION_FAILED), and sees only what it may describe.
func TestTopicsCommandSecure(t *testing.T) {
	t.Parallel()
	addr, props, cmd := startSecureServe(t, []string{"admin", "bob"},
		[]string{"--allow-principal", "User:bob", "--operation", "Describe", "--topic", "bob-", "--resource-pattern-type", "prefixed"})
	as := func(user string, args ...string) (int, string, string) {
		return runSeglog(t, append([]string{"topics", "--bootstrap-server", addr, "--command-config", props(user)}, args...)...)
	}
	code, out, errOut := as("admin", "--create", "--topic", "bob-topic", "--partitions", "2")
	require.Zero(t, code, errOut)
	require.Contains(t, out, "Created topic bob-topic.")
	code, _, errOut = as("admin", "--create", "--topic", "secret-topic")
	require.Zero(t, code, errOut)
	code, _, errOut = as("bob", "--create", "--topic", "bob-other")
	require.NotZero(t, code)
	require.Contains(t, errOut, "TOPIC_AUTHORIZATION_FAILED")
	code, out, errOut = as("bob", "--list")
	require.Zero(t, code, errOut)
	require.Equal(t, "bob-topic\n", out, "only what bob may describe")
	code, out, errOut = as("admin", "--describe", "--exclude-internal")
	require.Zero(t, code, errOut)
	require.Len(t, regexp.MustCompile(`(?m)^Topic: `).FindAllString(out, -1), 2, "bob-topic and secret-topic, no internal one: %s", out)
	require.Len(t, regexp.MustCompile(`(?m)^\tTopic: bob-topic\tPartition: `).FindAllString(out, -1), 2)
	stopServe(t, cmd)
}

// The console producer and consumer through a running broker: lines with
// keys and a header go in; --from-beginning reads them all back (every
// partition, each record naming its own), --group commits what it
// printed so the next run starts after it, --timeout-ms ends a run with
// nothing new.
func TestConsoleProduceConsume(t *testing.T) {
	t.Parallel()
	d := filepath.Join(t.TempDir(), "data")
	cmd, lines := startServe(t, "--data-dir", d, "--config", "listeners=PLAINTEXT://127.0.0.1:0", "--config", "num.partitions=3")
	addr := servedAddr(t, cmd, lines)
	var in strings.Builder
	for i := range 30 {
		fmt.Fprintf(&in, "k%d:v%d\n", i, i)
	}
	code, out, errOut := runWithStdin(t, in.String(), "produce", "--bootstrap-server", addr, "--topic", "console",
		"--key-separator", ":", "--header", "origin=test")
	require.Zero(t, code, errOut)
	require.Empty(t, out)
	code, out, errOut = runSeglog(t, "consume", "--bootstrap-server", addr, "--topic", "console", "--from-beginning",
		"--max-messages", "30", "--isolation-level", "read_committed")
	require.Zero(t, code, errOut)
	recs := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, recs, 30)
	seen := map[string]bool{}
	parts := map[int32]bool{}
	for _, l := range recs {
		var r struct {
			Partition *int32            `json:"partition"`
			Key       string            `json:"key"`
			Value     string            `json:"value"`
			Headers   map[string]string `json:"headers"`
		}
		require.NoError(t, json.Unmarshal([]byte(l), &r), l)
		require.Equal(t, "v"+strings.TrimPrefix(r.Key, "k"), r.Value)
		require.Equal(t, "test", r.Headers["origin"])
		require.NotNil(t, r.Partition)
		seen[r.Key], parts[*r.Partition] = true, true
	}
	require.Len(t, seen, 30)
	require.Len(t, parts, 3, "the client's partitioner spread them")

	code, out, errOut = runSeglog(t, "consume", "--bootstrap-server", addr, "--topic", "console", "--group", "g",
		"--from-beginning", "--max-records", "10", "--format", "value")
	require.Zero(t, code, errOut)
	first := strings.Fields(out)
	require.Len(t, first, 10)
	code, out, errOut = runSeglog(t, "consume", "--bootstrap-server", addr, "--topic", "console", "--group", "g",
		"--from-beginning", "--max-records", "20", "--format", "value") // (the start where the group committed nothing)
	require.Zero(t, code, errOut)
	got := strings.Fields(out)
	require.Len(t, got, 20)
	require.Empty(t, intersect(first, got), "the second run starts after the first's committed offsets")
	code, out, errOut = runSeglog(t, "consume", "--bootstrap-server", addr, "--topic", "console", "--partition", "0",
		"--timeout-ms", "300", "--format", "value")
	require.Zero(t, code, errOut)
	require.Empty(t, out, "from the end: nothing new before the timeout ends the run")
	stopServe(t, cmd)
}

func intersect(a, b []string) []string {
	var out []string
	for _, x := range a {
		if slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// seglog groups through a running broker: the lag while it serves
// (committed offset, log end, lag), the list with states, and delete.
func TestGroupsThroughTheBroker(t *testing.T) {
	t.Parallel()
	d := filepath.Join(t.TempDir(), "data")
	cmd, lines := startServe(t, "--data-dir", d, "--config", "listeners=PLAINTEXT://127.0.0.1:0")
	addr := servedAddr(t, cmd, lines)
	var in strings.Builder
	for i := range 10 {
		fmt.Fprintf(&in, "v%d\n", i)
	}
	code, _, errOut := runWithStdin(t, in.String(), "produce", "--bootstrap-server", addr, "--topic", "lagging", "--partition", "0")
	require.Zero(t, code, errOut)
	code, _, errOut = runSeglog(t, "consume", "--bootstrap-server", addr, "--topic", "lagging", "--group", "slow",
		"--from-beginning", "--max-records", "4", "--format", "value")
	require.Zero(t, code, errOut)
	groups := func(args ...string) (int, string, string) {
		return runSeglog(t, append([]string{"groups", "--bootstrap-server", addr}, args...)...)
	}
	code, out, errOut := groups("--list", "--state")
	require.Zero(t, code, errOut)
	require.Regexp(t, `(?m)^slow\s+Empty$`, out)
	code, out, errOut = groups("--describe", "--group", "slow")
	require.Zero(t, code, errOut)
	require.Contains(t, out, "Consumer group 'slow' has no active members.")
	require.Regexp(t, `(?m)^slow\s+lagging\s+0\s+4\s+10\s+6\s+-\s+-\s+-$`, out, "committed 4 of 10: a lag of 6")
	code, _, errOut = groups("--describe", "--group", "nobody")
	require.NotZero(t, code)
	require.Contains(t, errOut, "nobody")
	code, out, errOut = groups("--reset-offsets", "--group", "slow", "--topic", "lagging", "--to-offset", "7")
	require.Zero(t, code, errOut)
	require.Regexp(t, `(?m)^slow\s+lagging\s+0\s+7$`, out)
	require.Contains(t, out, "a dry run")
	code, out, _ = groups("--describe", "--group", "slow")
	require.Zero(t, code)
	require.Regexp(t, `(?m)^slow\s+lagging\s+0\s+4\s+10\s+6\s`, out, "a dry run commits nothing")
	code, _, errOut = groups("--reset-offsets", "--group", "slow", "--all-topics", "--to-earliest", "--execute")
	require.Zero(t, code, errOut)
	code, out, _ = groups("--describe", "--group", "slow")
	require.Zero(t, code)
	require.Regexp(t, `(?m)^slow\s+lagging\s+0\s+0\s+10\s+10\s`, out, "reset to the log start")
	code, out, errOut = groups("--reset-offsets", "--group", "slow", "--topic", "lagging:0", "--to-datetime", "2999-01-01T00:00:00.000", "--execute")
	require.Zero(t, code, errOut)
	require.Regexp(t, `(?m)^slow\s+lagging\s+0\s+10$`, out, "no record after that time: the end")

	// A group with a member running is refused, as Kafka's tool does.
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup("live"), kgo.ConsumeTopics("lagging"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cl.Close()
	for got := 0; got < 10; {
		fs := cl.PollFetches(context.Background())
		require.NoError(t, fs.Err0())
		got += fs.NumRecords()
	}
	code, _, errOut = groups("--reset-offsets", "--group", "live", "--topic", "lagging", "--to-earliest", "--execute")
	require.NotZero(t, code)
	require.Contains(t, errOut, `offsets can only be reset while group "live" is inactive (no consumer running), but it is Stable`)
	cl.Close()

	code, out, errOut = groups("--delete", "--group", "slow")
	require.Zero(t, code, errOut)
	require.Contains(t, out, "Deletion of requested consumer groups ('slow') was successful.")
	code, out, _ = groups("--list")
	require.Zero(t, code)
	require.NotContains(t, out, "slow")
	stopServe(t, cmd)
}

// startSecureServe serves a new data directory on SASL_SSL with the
// standard authorizer, admin its super user; users get the password
// user+"-secret" and each acls entry is one seglog acls --add. props
// writes a user's client properties file.
func startSecureServe(t *testing.T, users []string, acls ...[]string) (string, func(user string) string, *exec.Cmd) {
	t.Helper()
	d := filepath.Join(t.TempDir(), "data")
	for _, u := range users {
		code, _, errOut := runWithStdin(t, u+"-secret\n", "users", "--data-dir", d, "--add", u, "--password-file", "-")
		require.Zero(t, code, errOut)
	}
	for _, a := range acls {
		code, _, errOut := runSeglog(t, append([]string{"acls", "--data-dir", d, "--add"}, a...)...)
		require.Zero(t, code, errOut)
	}
	pki := testpki.New(t)
	cert, key := pki.Issue(t, "server", 10, "broker", true)
	cmd, lines := startServe(t, "--data-dir", d, "--config", "listeners=SASL_SSL://127.0.0.1:0",
		"--config", "ssl.certificate.location="+cert, "--config", "ssl.key.location="+key,
		"--config", "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"--config", "super.users=User:admin")
	addr := servedAddr(t, cmd, lines)
	props := func(user string) string {
		p := filepath.Join(t.TempDir(), user+".properties")
		require.NoError(t, os.WriteFile(p, []byte("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"+
			"sasl.username="+user+"\nsasl.password="+user+"-secret\nssl.ca.location="+pki.CAFile+"\n"), 0o600))
		return p
	}
	return addr, props, cmd
}

// Every other admin command over SASL_SSL with ACLs on: the console
// producer and consumer, groups (describe, reset), configs and
// transactions, each allowed what its user's ACLs grant and refused the
// rest with Kafka's authorization errors.
func TestAdminCommandsSecure(t *testing.T) {
	t.Parallel()
	addr, props, cmd := startSecureServe(t, []string{"admin", "app"},
		[]string{"--allow-principal", "User:app", "--operation", "Write", "--operation", "Read", "--operation", "Create",
			"--operation", "Describe", "--topic", "app-", "--resource-pattern-type", "prefixed"},
		[]string{"--allow-principal", "User:app", "--operation", "Read", "--group", "app-", "--resource-pattern-type", "prefixed"},
		[]string{"--allow-principal", "User:app", "--operation", "Write", "--operation", "Describe",
			"--transactional-id", "app-", "--resource-pattern-type", "prefixed"})
	as := func(user, stdin string, args ...string) (int, string, string) {
		return runWithStdin(t, stdin, append(args, "--bootstrap-server", addr, "--command-config", props(user))...)
	}
	code, _, errOut := as("app", "k1:v1\nk2:v2\nk3:v3\n", "produce", "--topic", "app-orders", "--key-separator", ":")
	require.Zero(t, code, errOut)
	code, _, errOut = as("app", "x\n", "produce", "--topic", "other")
	require.NotZero(t, code)
	require.Contains(t, errOut, "TOPIC_AUTHORIZATION_FAILED")
	code, out, errOut := as("app", "", "consume", "--topic", "app-orders", "--group", "app-readers", "--from-beginning",
		"--max-records", "3", "--format", "value")
	require.Zero(t, code, errOut)
	require.Equal(t, "v1\nv2\nv3\n", out)
	code, _, errOut = as("app", "", "consume", "--topic", "app-orders", "--group", "others", "--from-beginning", "--max-records", "1")
	require.NotZero(t, code)
	require.Contains(t, errOut, "GROUP_AUTHORIZATION_FAILED")

	code, out, errOut = as("app", "", "groups", "--describe", "--group", "app-readers")
	require.Zero(t, code, errOut)
	require.Regexp(t, `(?m)^app-readers\s+app-orders\s+0\s+3\s+3\s+0\s`, out)
	code, _, errOut = as("app", "", "groups", "--reset-offsets", "--group", "app-readers", "--topic", "app-orders", "--to-earliest", "--execute")
	require.Zero(t, code, errOut)
	code, out, errOut = as("admin", "", "groups", "--describe", "--group", "app-readers")
	require.Zero(t, code, errOut)
	require.Regexp(t, `(?m)^app-readers\s+app-orders\s+0\s+0\s+3\s+3\s`, out)
	code, out, errOut = as("app", "", "groups", "--list")
	require.Zero(t, code, errOut)
	require.Equal(t, "app-readers\n", out, "only the groups app may describe")

	code, _, errOut = as("app", "", "configs", "--entity-type", "topics", "--entity-name", "app-orders", "--alter", "--add-config", "retention.ms=1000")
	require.NotZero(t, code, "app has no AlterConfigs")
	require.Contains(t, errOut, "TOPIC_AUTHORIZATION_FAILED")
	code, _, errOut = as("admin", "", "configs", "--entity-type", "topics", "--entity-name", "app-orders", "--alter", "--add-config", "retention.ms=3600000")
	require.Zero(t, code, errOut)
	code, out, errOut = as("admin", "", "configs", "--entity-type", "topics", "--entity-name", "app-orders", "--describe")
	require.Zero(t, code, errOut)
	require.Contains(t, out, "  retention.ms=3600000 sensitive=false")
	code, _, errOut = as("app", "", "configs", "--entity-type", "topics", "--entity-name", "app-orders", "--describe")
	require.NotZero(t, code, "app has no DescribeConfigs")
	require.Contains(t, errOut, "TOPIC_AUTHORIZATION_FAILED")

	data, err := os.ReadFile(props("app"))
	require.NoError(t, err)
	opts, err := clientOpts(checkpoint.ParseProperties(data))
	require.NoError(t, err)
	p, err := kgo.NewClient(append(opts, kgo.SeedBrokers(addr), kgo.TransactionalID("app-tx"), kgo.DefaultProduceTopic("app-orders"))...)
	require.NoError(t, err)
	defer p.Close()
	require.NoError(t, p.BeginTransaction())
	require.NoError(t, p.ProduceSync(context.Background(), &kgo.Record{Value: []byte("pending")}).FirstErr())
	code, out, errOut = as("app", "", "transactions", "--list")
	require.Zero(t, code, errOut)
	require.Regexp(t, `(?m)^app-tx\s+\d+\s+0\s+Ongoing\s`, out)
	code, out, errOut = as("app", "", "transactions", "--describe-producers", "--topic", "app-orders", "--partition", "0")
	require.Zero(t, code, errOut)
	require.Regexp(t, `(?m)\s3$`, out, "the open transaction starts after the 3 records")
	code, out, errOut = as("app", "", "transactions", "--abort", "--transactional-id", "app-tx")
	require.Zero(t, code, errOut)
	require.Contains(t, out, `aborted the open transaction of "app-tx"`)
	code, _, errOut = as("app", "", "transactions", "--describe", "--transactional-id", "someone-else")
	require.NotZero(t, code)
	require.Contains(t, errOut, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED")
	p.Close()
	stopServe(t, cmd)
}
