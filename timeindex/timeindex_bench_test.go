package timeindex

import (
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/seglog/seglog/vfs"
)

// BenchmarkLookup looks up timestamps on a full default-size time index
// (873,813 entries), in the warm tail and at random.
func BenchmarkLookup(b *testing.B) {
	x, err := Open(vfs.OS, filepath.Join(b.TempDir(), "00000000000000000000.timeindex"), 0, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	n := DefaultMaxIndexSize/EntrySize - 1
	for i := range n {
		if err := x.MaybeAppend(int64(1000+10*i), int64(i), false); err != nil {
			b.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	warm, random := make([]int64, 4096), make([]int64, 1<<16)
	for i := range warm {
		warm[i] = int64(1000 + 10*(n-1-rng.IntN(600)) + rng.IntN(10))
	}
	for i := range random {
		random[i] = 1000 + rng.Int64N(int64(10*n))
	}
	for _, c := range []struct {
		name    string
		targets []int64
	}{{"warm-tail", warm}, {"random", random}} {
		b.Run("entries=873812/target="+c.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				t := c.targets[i&(len(c.targets)-1)]
				if e, err := x.Lookup(t); err != nil || e.Timestamp > t {
					b.Fatal(err, e, t)
				}
				i++
			}
		})
	}
}
