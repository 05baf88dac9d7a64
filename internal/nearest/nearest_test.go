package nearest

import "testing"

func TestName(t *testing.T) {
	names := []string{"listeners", "log.dirs", "retention.ms", "node.id"}
	for _, c := range []struct{ word, want string }{
		{"listners", "listeners"},        // one letter left out
		{"retention.sm", "retention.ms"}, // two swapped: two edits
		{"nod.id", "node.id"},
		{"nodeid.x", ""}, // three edits
		{"lg.dir", ""},   // short: two edits are too many
		{"log.dir", "log.dirs"},
		{"something", ""},
	} {
		if got := Name(c.word, names); got != c.want {
			t.Errorf("Name(%q) = %q, want %q", c.word, got, c.want)
		}
	}
	if d := distance("kitten", "sitting"); d != 3 {
		t.Errorf("distance(kitten, sitting) = %d, want 3", d)
	}
}
