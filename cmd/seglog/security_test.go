package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog/internal/testpki"
)

// seglog users sets up the first user of a new data directory (the
// password from standard input, stored hashed); seglog serve with a
// SASL_SSL listener and PLAIN: kcat produces and consumes as that user,
// a wrong password is refused; seglog users --bootstrap-server adds a
// second user through the running broker, who can then log in; no
// password ever reaches serve's log or a file in the directory.
func TestServeSASL(t *testing.T) {
	t.Parallel()
	kcat := "/usr/bin/kcat"
	if _, err := os.Stat(kcat); err != nil {
		t.Skipf("kcat is not installed (make test installs it with apt-get): %v", err)
	}
	d := filepath.Join(t.TempDir(), "data")
	code, out, errOut := runWithStdin(t, "alice-secret\n", "users", "--data-dir", d, "--add", "alice", "--password-file", "-")
	require.Zero(t, code, errOut)
	require.Contains(t, out, "Completed updating config for user alice.")
	code, out, errOut = runSeglog(t, "users", "--data-dir", d, "--list")
	require.Zero(t, code, errOut)
	require.Equal(t, "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=4096, SCRAM-SHA-512=iterations=4096\n", out)
	code, _, errOut = runSeglog(t, "users", "--data-dir", d, "--add", "bob")
	require.NotZero(t, code)
	require.Contains(t, errOut, "--password-file", "no password on a flag, none without a terminal")

	pki := testpki.New(t)
	cert, key := pki.Issue(t, "server", 10, "broker", true)
	cmd, lines := startServe(t, "--data-dir", d, "--config", "listeners=SASL_SSL://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
		"--config", "ssl.certificate.location="+cert, "--config", "ssl.key.location="+key,
		"--config", "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512", "--config", "connection.failed.authentication.delay.ms=0",
		// kcat retries a wrong password a few times: room for them.
		"--config", "seglog.failed.authentication.max.rate=3")
	addrs := servedAddrs(t, cmd, lines, 2)
	kcatAs := func(user, pass string, stdin string, args ...string) (string, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a deadline, not a wait
		defer cancel()
		c := exec.CommandContext(ctx, kcat, append([]string{"-b", addrs["SASL_SSL"], "-X", "security.protocol=SASL_SSL",
			"-X", "ssl.ca.location=" + pki.CAFile, "-X", "sasl.mechanisms=PLAIN", "-X", "sasl.username=" + user,
			"-X", "sasl.password=" + pass}, args...)...)
		c.Stdin = strings.NewReader(stdin)
		out, err := c.CombinedOutput()
		return string(out), err
	}
	var in strings.Builder
	for i := range 10 {
		fmt.Fprintf(&in, "secret %d\n", i)
	}
	out, err := kcatAs("alice", "alice-secret", in.String(), "-P", "-t", "sasl")
	require.NoError(t, err, out)
	out, err = kcatAs("alice", "alice-secret", "", "-C", "-t", "sasl", "-o", "beginning", "-e", "-q")
	require.NoError(t, err, out)
	require.Equal(t, in.String(), out)
	out, err = kcatAs("alice", "wrong-password", "", "-L", "-m", "5")
	require.Error(t, err, "a wrong password is refused")
	require.Contains(t, out, "authentication failed: invalid username or password")

	code, _, errOut = runSeglog(t, "users", "--data-dir", d, "--list")
	require.NotZero(t, code, "the data directory is locked while served")
	require.Contains(t, errOut, "data directory is in use")

	props := filepath.Join(t.TempDir(), "admin.properties")
	require.NoError(t, os.WriteFile(props, []byte("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"+
		"sasl.username=alice\nsasl.password=alice-secret\nssl.ca.location="+pki.CAFile+"\n"), 0o600))
	code, out, errOut = runWithStdin(t, "bob-secret\n", "users", "--bootstrap-server", addrs["SASL_SSL"], "--command-config", props,
		"--add", "bob", "--mechanism", "SCRAM-SHA-512", "--password-file", "-")
	require.Zero(t, code, errOut)
	require.Contains(t, out, "Completed updating config for user bob.")
	code, out, errOut = runSeglog(t, "users", "--bootstrap-server", addrs["SASL_SSL"], "--command-config", props, "--list")
	require.Zero(t, code, errOut)
	require.Contains(t, out, "'bob' are SCRAM-SHA-512=iterations=4096\n")
	out, err = kcatAs("bob", "bob-secret", "", "-C", "-t", "sasl", "-o", "beginning", "-e", "-q")
	require.NoError(t, err, out)
	require.Equal(t, in.String(), out, "bob, added through the broker, logs in with PLAIN")

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait(), "%s", cmd.Stderr)
	logs := cmd.Stderr.(interface{ String() string }).String()
	require.Contains(t, logs, "authentication failed")
	files, err := filepath.Glob(filepath.Join(d, "*"))
	require.NoError(t, err)
	for _, secret := range []string{"alice-secret", "bob-secret", "wrong-password"} {
		require.NotContains(t, logs, secret, "a password in serve's log")
		for _, f := range files {
			if info, err := os.Stat(f); err == nil && !info.IsDir() {
				data, err := os.ReadFile(f)
				require.NoError(t, err)
				require.NotContains(t, string(data), secret, "a password in %s", f)
			}
		}
	}
}

// seglog acls: ACLs set up before the first serve (the data directory's
// lock, a new directory), then a broker with an authorizer and a super
// user: kcat as bob produces to the prefixed topics its ACL names, is
// refused elsewhere and sees only its topics; seglog acls through the
// broker lists, adds and removes ACLs (and needs a principal allowed to).
func TestServeACLs(t *testing.T) {
	t.Parallel()
	kcat := "/usr/bin/kcat"
	if _, err := os.Stat(kcat); err != nil {
		t.Skipf("kcat is not installed (make test installs it with apt-get): %v", err)
	}
	d := filepath.Join(t.TempDir(), "data")
	code, out, errOut := runSeglog(t, "acls", "--data-dir", d, "--add", "--allow-principal", "User:bob", "--operation", "Write",
		"--operation", "Describe", "--topic", "bob-", "--resource-pattern-type", "prefixed")
	require.Zero(t, code, errOut)
	require.Contains(t, out, "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=bob-, patternType=PREFIXED)`")
	require.Contains(t, out, "(principal=User:bob, host=*, operation=WRITE, permissionType=ALLOW)")
	code, _, errOut = runSeglog(t, "acls", "--data-dir", d, "--add", "--allow-principal", "bob", "--operation", "Read", "--topic", "x")
	require.NotZero(t, code)
	require.Contains(t, errOut, "Type:name")
	for _, u := range []string{"admin", "bob"} {
		code, _, errOut = runWithStdin(t, u+"-secret\n", "users", "--data-dir", d, "--add", u, "--password-file", "-")
		require.Zero(t, code, errOut)
	}
	code, out, errOut = runSeglog(t, "acls", "--data-dir", d, "--list", "--principal", "User:bob")
	require.Zero(t, code, errOut)
	require.Equal(t, 2, strings.Count(out, "principal=User:bob"), out)
	// kafka-acls.sh's --force (it answers its prompts) is taken.
	code, _, errOut = runSeglog(t, "acls", "--data-dir", d, "--add", "--force", "--allow-principal", "User:carol", "--operation", "Read", "--topic", "x")
	require.Zero(t, code, errOut)
	code, _, errOut = runSeglog(t, "acls", "--data-dir", d, "--remove", "--force", "--allow-principal", "User:carol", "--operation", "Read", "--topic", "x")
	require.Zero(t, code, errOut)

	cmd, lines := startServe(t, "--data-dir", d, "--config", "listeners=SASL_PLAINTEXT://127.0.0.1:0",
		"--config", "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"--config", "super.users=User:admin", "--config", "sasl.enabled.mechanisms=SCRAM-SHA-256")
	addr := servedAddr(t, cmd, lines)
	kcatAs := func(user string, stdin string, args ...string) (string, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a deadline, not a wait
		defer cancel()
		c := exec.CommandContext(ctx, kcat, append([]string{"-b", addr, "-X", "security.protocol=SASL_PLAINTEXT",
			"-X", "sasl.mechanisms=SCRAM-SHA-256", "-X", "sasl.username=" + user, "-X", "sasl.password=" + user + "-secret"}, args...)...)
		c.Stdin = strings.NewReader(stdin)
		out, err := c.CombinedOutput()
		return string(out), err
	}
	out, err := kcatAs("admin", "admin's\n", "-P", "-t", "admin-topic")
	require.NoError(t, err, out)
	out, err = kcatAs("admin", "for bob\n", "-P", "-t", "bob-topic") // created by the super user: bob may not create
	require.NoError(t, err, out)
	out, err = kcatAs("bob", "bob's\n", "-P", "-t", "bob-topic")
	require.NoError(t, err, out)
	out, err = kcatAs("bob", "bob's\n", "-P", "-t", "admin-topic")
	require.Error(t, err)
	require.Contains(t, out, "Topic authorization failed", out)
	out, err = kcatAs("bob", "", "-L")
	require.NoError(t, err, out)
	require.Contains(t, out, `topic "bob-topic"`)
	require.NotContains(t, out, "admin-topic", "Metadata lists only what bob may describe")

	props := func(user string) string {
		p := filepath.Join(t.TempDir(), user+".properties")
		require.NoError(t, os.WriteFile(p, []byte("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"+
			"sasl.username="+user+"\nsasl.password="+user+"-secret\n"), 0o600))
		return p
	}
	online := func(user string, args ...string) (int, string, string) {
		return runSeglog(t, append([]string{"acls", "--bootstrap-server", addr, "--command-config", props(user)}, args...)...)
	}
	code, _, errOut = online("bob", "--list")
	require.NotZero(t, code)
	require.Contains(t, errOut, "CLUSTER_AUTHORIZATION_FAILED")
	code, out, errOut = online("admin", "--add", "--allow-principal", "User:bob", "--operation", "Read", "--topic", "admin-topic")
	require.Zero(t, code, errOut)
	require.Contains(t, out, "Adding ACLs:")
	code, out, errOut = online("admin", "--list", "--topic", "admin-topic")
	require.Zero(t, code, errOut)
	require.Contains(t, out, "operation=READ")
	out, err = kcatAs("bob", "", "-C", "-t", "admin-topic", "-o", "beginning", "-e", "-q")
	require.NoError(t, err, out)
	require.Equal(t, "admin's\n", out, "bob reads admin-topic once allowed")
	code, out, errOut = online("admin", "--remove", "--allow-principal", "User:bob", "--topic", "admin-topic")
	require.Zero(t, code, errOut)
	require.Contains(t, out, "Removed ACLs:")
	out, err = kcatAs("bob", "", "-C", "-t", "admin-topic", "-o", "beginning", "-e", "-q")
	require.Error(t, err, "refused again: %s", out)

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait(), "%s", cmd.Stderr)
	code, out, errOut = runSeglog(t, "acls", "--data-dir", d, "--list")
	require.Zero(t, code, errOut)
	require.Equal(t, 2, strings.Count(out, "principal=User:bob"), "the ACLs made before serve remain: %s", out)
}

// seglog quotas: set on the data directory before serve, and through a
// running broker; both kept, checked as Kafka checks them.
func TestQuotasCommand(t *testing.T) {
	d := filepath.Join(t.TempDir(), "data")
	code, _, errOut := runWithStdin(t, "alice-secret\n", "users", "--data-dir", d, "--add", "alice", "--password-file", "-")
	require.Zero(t, code, errOut)
	code, out, errOut := runSeglog(t, "quotas", "--data-dir", d, "--alter", "--entity-type", "users", "--entity-name", "alice",
		"--add-config", "producer_byte_rate=1024,consumer_byte_rate=2048")
	require.Zero(t, code, errOut)
	require.Equal(t, "Completed updating config for user-principal 'alice'.\n", out)
	code, _, errOut = runSeglog(t, "quotas", "--data-dir", d, "--alter", "--entity-type", "users", "--entity-name", "alice",
		"--add-config", "connection_creation_rate=1")
	require.NotZero(t, code)
	require.Contains(t, errOut, "is an ip quota")

	cmd, lines := startServe(t, "--data-dir", d, "--config", "listeners=PLAINTEXT://127.0.0.1:0")
	addr := servedAddr(t, cmd, lines)
	code, _, errOut = runSeglog(t, "quotas", "--bootstrap-server", addr, "--alter", "--entity-type", "ips", "--entity-default",
		"--add-config", "connection_creation_rate=100")
	require.Zero(t, code, errOut)
	code, out, errOut = runSeglog(t, "quotas", "--bootstrap-server", addr, "--describe")
	require.Zero(t, code, errOut)
	require.Contains(t, out, "Quota configs for user-principal 'alice' are consumer_byte_rate=2048, producer_byte_rate=1024\n")
	require.Contains(t, out, "Quota configs for ip <default> are connection_creation_rate=100\n")
	code, out, errOut = runSeglog(t, "quotas", "--bootstrap-server", addr, "--describe", "--entity-type", "users")
	require.Zero(t, code, errOut)
	require.Equal(t, "Quota configs for user-principal 'alice' are consumer_byte_rate=2048, producer_byte_rate=1024\n", out,
		"a type alone lists every entity of it, as kafka-configs.sh does")
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait(), "%s", cmd.Stderr)

	code, out, errOut = runSeglog(t, "quotas", "--data-dir", d, "--describe", "--entity-type", "ips", "--entity-default")
	require.Zero(t, code, errOut)
	require.Equal(t, "Quota configs for ip <default> are connection_creation_rate=100\n", out, "kept on disk")
	code, out, errOut = runSeglog(t, "quotas", "--data-dir", d, "--describe", "--entity-type", "users")
	require.Zero(t, code, errOut)
	require.Equal(t, "Quota configs for user-principal 'alice' are consumer_byte_rate=2048, producer_byte_rate=1024\n", out)
	code, out, errOut = runSeglog(t, "verify", "--data-dir", d)
	require.Zero(t, code, "the security files are part of a data directory: %s%s", out, errOut)
}

// The security configs serve takes, under Kafka's names, and their
// refusals.
func TestServeSecurityConfigs(t *testing.T) {
	var s serveSettings
	for _, kv := range [][2]string{
		{"sasl.enabled.mechanisms", "plain,SCRAM-SHA-512"},
		{"connections.max.reauth.ms", "3600000"},
		{"connection.failed.authentication.delay.ms", "0"},
		{"authorizer.class.name", "kafka.security.authorizer.AclAuthorizer"},
		{"super.users", "User:admin; User:ops"},
		{"allow.everyone.if.no.acl.found", "true"},
		{"ssl.principal.mapping.rules", `RULE:^CN=(.*)$/$1/L,DEFAULT`},
		{"seglog.failed.authentication.max.rate", "0"},
		{"max.connections.per.ip", "50"},
		{"max.connections.per.ip.overrides", "127.0.0.1:100,::1:7"},
	} {
		known, err := applyServeConfig(&s, kv[0], kv[1])
		require.True(t, known, kv[0])
		require.NoError(t, err, kv[0])
	}
	b := s.broker
	require.Equal(t, []string{"PLAIN", "SCRAM-SHA-512"}, b.SASLMechanisms)
	require.Equal(t, time.Hour, b.ReauthInterval)
	require.Negative(t, b.FailedAuthDelay, "0 is no delay")
	require.True(t, b.Authorizer)
	require.Equal(t, []string{"User:admin", "User:ops"}, b.SuperUsers)
	require.True(t, b.AllowEveryoneIfNoACL)
	name, err := b.PrincipalRules.Map("CN=App")
	require.NoError(t, err)
	require.Equal(t, "app", name)
	require.Negative(t, b.MaxFailedAuthRate, "0 is no bound")
	require.Equal(t, 50, b.MaxConnectionsPerIP)
	require.Equal(t, map[string]int{"127.0.0.1": 100, "::1": 7}, b.MaxConnectionsPerIPOverrides)
	for _, kv := range [][2]string{
		{"sasl.enabled.mechanisms", "GSSAPI"},
		{"authorizer.class.name", "com.example.MyAuthorizer"},
		{"super.users", "admin"},
		{"ssl.principal.mapping.rules", "RULE:^x"},
		{"max.connections.per.ip.overrides", "localhost:5"},
		{"seglog.failed.authentication.max.rate", "-1"},
	} {
		_, err := applyServeConfig(&s, kv[0], kv[1])
		require.Error(t, err, "%s=%s", kv[0], kv[1])
	}
}

// The cluster's secrets come from files, never from a config's value:
// etcd's password and the broker's inter-broker password are read from
// the first line of the files named, and a missing or empty file is an
// error; nothing of them is listed among the configs the operator set.
func TestServeClusterSecurityConfigs(t *testing.T) {
	dir := t.TempDir()
	etcdPass, brokerPass, empty := filepath.Join(dir, "etcd"), filepath.Join(dir, "broker"), filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(etcdPass, []byte("etcd-secret\nignored\n"), 0o600))
	require.NoError(t, os.WriteFile(brokerPass, []byte("broker-secret\r\n"), 0o600))
	require.NoError(t, os.WriteFile(empty, []byte("\n"), 0o600))
	var s serveSettings
	for _, kv := range [][2]string{
		{"seglog.etcd.ssl.ca.location", "/ca.pem"},
		{"seglog.etcd.ssl.certificate.location", "/c.pem"},
		{"seglog.etcd.ssl.key.location", "/c.key"},
		{"seglog.etcd.username", "seglog"},
		{"seglog.etcd.password.file", etcdPass},
		{"sasl.mechanism.inter.broker.protocol", "SCRAM-SHA-256"},
		{"seglog.inter.broker.sasl.username", "broker"},
		{"seglog.inter.broker.sasl.password.file", brokerPass},
	} {
		known, err := applyServeConfig(&s, kv[0], kv[1])
		require.True(t, known, kv[0])
		require.NoError(t, err, kv[0])
	}
	c := s.cluster
	require.Equal(t, "/ca.pem", c.EtcdTLS.CAFile)
	require.Equal(t, "/c.pem", c.EtcdTLS.CertFile)
	require.Equal(t, "/c.key", c.EtcdTLS.KeyFile)
	require.Equal(t, "seglog", c.EtcdUsername)
	require.Equal(t, "etcd-secret", c.EtcdPassword)
	require.Equal(t, "SCRAM-SHA-256", c.InterBrokerSASL.Mechanism)
	require.Equal(t, "broker", c.InterBrokerSASL.Username)
	require.Equal(t, "broker-secret", c.InterBrokerSASL.Password)
	for _, v := range s.broker.Configs {
		require.NotContains(t, v, "secret", "a password listed among the configs")
	}
	for _, f := range []string{empty, filepath.Join(dir, "missing")} {
		_, err := applyServeConfig(&s, "seglog.etcd.password.file", f)
		require.Error(t, err, f)
	}
}
