package main

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog/bench"
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
