// Package nearest finds the name a mistyped one most likely meant, for
// "did you mean" in error messages.
package nearest

// Name is the one of names that word is most likely a typo of: within two
// edits (one for words shorter than 8 bytes), else "".
func Name(word string, names []string) string {
	best, bestD := "", 3
	if len(word) < 8 {
		bestD = 2
	}
	for _, n := range names {
		if d := distance(word, n); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// distance is the Levenshtein distance between a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
