package seglog_test

import (
	"os"
	"strings"
	"testing"
)

// The README's embedding code is examples/quickstart's: every line of its
// code block is a line of the program, in the same order, so the README
// cannot show a call that does not compile.
func TestReadmeEmbeddingIsTheExample(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	program, err := os.ReadFile("examples/quickstart/main.go")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "## Embedding seglog\n")
	if !ok {
		t.Fatal("the README has no Embedding seglog section")
	}
	_, block, ok := strings.Cut(section, "```go\n")
	if !ok {
		t.Fatal("the Embedding seglog section has no Go code")
	}
	block, _, _ = strings.Cut(block, "```")
	var lines []string
	for _, l := range strings.Split(string(program), "\n") {
		lines = append(lines, strings.TrimSpace(l))
	}
	at, checked := 0, 0
	for _, want := range strings.Split(block, "\n") {
		want = strings.TrimSpace(want)
		if want == "" {
			continue
		}
		i := at
		for i < len(lines) && lines[i] != want {
			i++
		}
		if i == len(lines) {
			t.Fatalf("README line %q is not in examples/quickstart/main.go after line %d", want, at+1)
		}
		at, checked = i+1, checked+1
	}
	if checked < 10 {
		t.Fatalf("only %d lines checked", checked)
	}
}
