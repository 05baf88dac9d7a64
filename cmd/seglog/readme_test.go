package main

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog/bench"
	"github.com/seglog/seglog/internal/testpki"
)

// readmeSynopsis is the README's command synopsis: each "seglog CMD …"
// line of the code block under "## The command", continuation lines
// joined to theirs, keyed by command path ("tier ls").
func readmeSynopsis(t *testing.T) map[string][]string {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(readme), "\n## The command\n")
	require.True(t, ok, "the README has no section The command")
	_, block, ok := strings.Cut(section, "```sh\n")
	require.True(t, ok)
	block, _, _ = strings.Cut(block, "```")
	lines := map[string][]string{}
	var last string
	for _, l := range strings.Split(block, "\n") {
		switch {
		case strings.HasPrefix(l, "seglog "):
			f := strings.Fields(l)
			last = f[1]
			if len(f) > 2 && (f[1] == "tier" && (f[2] == "ls" || f[2] == "verify")) {
				last += " " + f[2]
			}
			lines[last] = append(lines[last], l)
		case strings.TrimSpace(l) != "" && last != "":
			n := len(lines[last]) - 1
			lines[last][n] += " " + strings.TrimSpace(l)
		}
	}
	return lines
}

// commands are every runnable command but help and completion, by path.
func commands(root *cobra.Command) map[string]*cobra.Command {
	out := map[string]*cobra.Command{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Hidden || sub.Name() == "help" || sub.Name() == "completion" {
				continue
			}
			out[strings.TrimPrefix(sub.CommandPath(), "seglog ")] = sub
			walk(sub)
		}
	}
	walk(root)
	return out
}

var flagInText = regexp.MustCompile(`--[a-z][a-z0-9-]*`)

// Every command and every flag --help shows is in the README's synopsis,
// and every command and flag the synopsis shows is one --help shows.
func TestReadmeSynopsisIsTheHelp(t *testing.T) {
	synopsis := readmeSynopsis(t)
	cmds := commands(newRootCmd())
	for path, c := range cmds {
		lines, ok := synopsis[path]
		if !ok {
			t.Errorf("seglog %s is not in the README's synopsis", path)
			continue
		}
		var inReadme []string
		for _, l := range lines {
			inReadme = append(inReadme, flagInText.FindAllString(l, -1)...)
		}
		var inHelp []string
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if f.Hidden || f.Name == "help" {
				return
			}
			inHelp = append(inHelp, "--"+f.Name)
			if !slices.Contains(inReadme, "--"+f.Name) {
				t.Errorf("seglog %s --%s (in its --help) is not in the README's synopsis", path, f.Name)
			}
		})
		for _, f := range inReadme {
			if !slices.Contains(inHelp, f) {
				t.Errorf("seglog %s %s is in the README's synopsis but not a flag of the command", path, f)
			}
		}
	}
	for path := range synopsis {
		if _, ok := cmds[path]; !ok {
			t.Errorf("the README's synopsis shows seglog %s, which is not a command", path)
		}
	}
	require.Greater(t, len(cmds), 20)
}

// Every workload seglog bench runs is described in the README's paragraph
// on it.
func TestReadmeListsEveryBenchWorkload(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	_, para, ok := strings.Cut(string(readme), "`seglog bench` runs end-to-end workloads")
	require.True(t, ok, "the README has no paragraph on seglog bench")
	para, _, _ = strings.Cut(para, "\n\n")
	para = strings.Join(strings.Fields(para), " ")
	for _, w := range bench.Workloads {
		require.Contains(t, para, "`"+w.Name+"` (", "bench workload %s", w.Name)
	}
}

// The README's Security recipe runs as written: every command of its
// block, in order, with only what belongs to a machine replaced — its
// paths (a temporary directory, the test's certificates), "host" and the
// ports (127.0.0.1 and free ports; the listener on every interface is
// bound to loopback, so the test serves nothing beyond this machine).
// Then the app user it sets up produces to an app- topic (auto-created)
// and consumes it in app-group, and is refused elsewhere.
func TestReadmeSecurityRecipe(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(readme), "\n## Security\n")
	require.True(t, ok)
	_, block, ok := strings.Cut(section, "A TLS, SASL, ACL and quota setup, from nothing:\n\n```\n")
	require.True(t, ok, "the Security section has no recipe")
	block, _, _ = strings.Cut(block, "```")

	tmp := t.TempDir()
	pki := testpki.New(t)
	cert, key := pki.Issue(t, "broker", 10, "broker", true)
	secret := filepath.Join(tmp, "admin-secret")
	require.NoError(t, os.WriteFile(secret, []byte("admin-password\n"), 0o600))
	sasl, plain := freePort(t), freePort(t)
	replace := strings.NewReplacer("/var/lib/seglog", filepath.Join(tmp, "data"), "/run/secrets/admin", secret,
		"/etc/seglog/broker.pem", cert, "/etc/seglog/broker.key", key,
		"0.0.0.0:9093", "127.0.0.1:"+sasl, "host:9093", "127.0.0.1:"+sasl, "127.0.0.1:9092", "127.0.0.1:"+plain)
	props := func(user string) string {
		p := filepath.Join(tmp, user+".properties")
		require.NoError(t, os.WriteFile(p, []byte("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"+
			"sasl.username="+user+"\nsasl.password="+user+"-password\nssl.ca.location="+pki.CAFile+"\n"), 0o600))
		return p
	}
	adminProps := props("admin")

	var served *exec.Cmd
	ran := 0
	for _, line := range strings.Split(strings.ReplaceAll(block, "\\\n", " "), "\n") {
		line, _, _ = strings.Cut(line, "#")
		args := strings.Fields(replace.Replace(line))
		if len(args) == 0 {
			continue
		}
		require.Equal(t, "seglog", args[0], line)
		for i, a := range args {
			if a == "admin.properties" {
				args[i] = adminProps
			}
		}
		ran++
		if args[1] == "serve" {
			var lines *bufio.Scanner
			served, lines = startServe(t, args[2:]...)
			addrs := servedAddrs(t, served, lines, 2)
			require.Equal(t, "127.0.0.1:"+sasl, addrs["SASL_SSL"])
			continue
		}
		code, out, errOut := runWithStdin(t, "app-password\n", args[1:]...)
		require.Zero(t, code, "%s\n%s%s", line, out, errOut)
	}
	require.Equal(t, 6, ran, "the recipe's commands")
	require.NotNil(t, served, "the recipe serves")

	as := func(user, stdin string, args ...string) (int, string, string) {
		return runWithStdin(t, stdin, append(args, "--bootstrap-server", "127.0.0.1:"+sasl, "--command-config", props(user))...)
	}
	code, _, errOut := as("app", "one\ntwo\n", "produce", "--topic", "app-orders")
	require.Zero(t, code, errOut)
	code, out, errOut := as("app", "", "consume", "--topic", "app-orders", "--group", "app-group", "--from-beginning",
		"--max-records", "2", "--format", "value")
	require.Zero(t, code, errOut)
	require.Equal(t, "one\ntwo\n", out)
	code, _, errOut = as("app", "x\n", "produce", "--topic", "orders")
	require.NotZero(t, code, "no ACL for app on orders")
	require.Contains(t, errOut, "TOPIC_AUTHORIZATION_FAILED")
	code, out, errOut = as("admin", "", "quotas", "--describe", "--entity-type", "users", "--entity-name", "app")
	require.Zero(t, code, errOut)
	require.Contains(t, out, "producer_byte_rate=10485760")
	stopServe(t, served)
}

// freePort is a loopback port nothing listens on now.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	_, port, err := net.SplitHostPort(l.Addr().String())
	require.NoError(t, err)
	return port
}
