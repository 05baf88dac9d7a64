package seglog_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Every document a comment, a help text or a Markdown file points at is
// in the repository, and so is the section it names: `docs/format.md
// §1.6` needs a "### 1.6" heading there. Nothing points outside the
// repository (../shared, a design document or spec a clone lacks).
func TestDocReferences(t *testing.T) {
	if raced {
		t.Skip("ten times slower under the race detector, and no concurrency to check: make test runs it without it")
	}
	var (
		sectionRef = regexp.MustCompile(`(docs/[\w.-]+\.md) §(\d+(?:\.\d+)?)((?:, \d+(?:\.\d+)?)*)`)
		mdPath     = regexp.MustCompile(`(?:^|[\s(\[` + "`" + `'"])((?:\.\./)?(?:[\w.-]+/)+[\w.-]+\.md|[A-Z][\w.-]*\.md)\b`)
		outside    = regexp.MustCompile(`\.\./shared|\bDESIGN(?:\.md)?(?: section| §)|\bspec \d|spec/[\w-]+\.md`)
		heading    = regexp.MustCompile(`(?m)^#{2,3} (\d+(?:\.\d+)?)\.? `)
	)
	headings := map[string]map[string]bool{}
	sectionsOf := func(doc string) map[string]bool {
		if h, ok := headings[doc]; ok {
			return h
		}
		h := map[string]bool{}
		if data, err := os.ReadFile(doc); err == nil {
			for _, m := range heading.FindAllStringSubmatch(string(data), -1) {
				h[m[1]] = true
			}
		}
		headings[doc] = h
		return h
	}
	var bad []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "vendor", "testdata":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, ".md") || path == "docrefs_test.go" {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		// A reference may be wrapped over two comment lines.
		text := regexp.MustCompile(`\n\s*(?://\s*)?`).ReplaceAllString(string(data), " ")
		for _, m := range outside.FindAllString(text, -1) {
			bad = append(bad, path+": points outside the repository: "+m)
		}
		for _, m := range sectionRef.FindAllStringSubmatch(text, -1) {
			secs := sectionsOf(m[1])
			for _, s := range append([]string{m[2]}, strings.FieldsFunc(m[3], func(r rune) bool { return r == ',' || r == ' ' })...) {
				if !secs[s] {
					bad = append(bad, path+": "+m[1]+" has no section "+s)
				}
			}
		}
		for _, m := range mdPath.FindAllStringSubmatch(string(data), -1) {
			ref := m[1]
			if strings.Contains(ref, "://") {
				continue
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(path), ref)); err == nil {
				continue
			}
			if _, err := os.Stat(ref); err == nil {
				continue
			}
			bad = append(bad, path+": no such document: "+ref)
		}
		return nil
	})
	require.NoError(t, err)
	require.Empty(t, bad)
}
