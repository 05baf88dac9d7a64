package offsetindex

import (
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/seglog/seglog/vfs"
)

// fullIndex returns a full default-size index (1,310,720 entries) at base
// 0, with offsets 0, 2, 4, … and positions 0, 4096, 8192, ….
func fullIndex(b *testing.B) (*Index, int) {
	x, err := Open(vfs.OS, filepath.Join(b.TempDir(), "00000000000000000000.index"), 0, Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { x.Close() })
	n := DefaultMaxIndexSize / EntrySize
	for i := range n {
		if err := x.Append(int64(2*i), int32(i*4096)); err != nil {
			b.Fatal(err)
		}
	}
	return x, n
}

// BenchmarkLookup looks up offsets on a full default-size index: in the
// warm tail (the last 8 KiB, where caught-up readers look) and uniformly
// at random; beside it, the baseline of a binary search over the same
// number of offsets in a Go slice.
func BenchmarkLookup(b *testing.B) {
	x, n := fullIndex(b)
	rng := rand.New(rand.NewPCG(1, 2))
	warm := make([]int64, 4096)
	random := make([]int64, 1<<16)
	for i := range warm {
		warm[i] = int64(2*(n-1-rng.IntN(1000)) + rng.IntN(2))
	}
	for i := range random {
		random[i] = rng.Int64N(int64(2 * n))
	}
	run := func(b *testing.B, targets []int64) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			t := targets[i&(len(targets)-1)]
			e, err := x.Lookup(t)
			if err != nil || e.Offset > t {
				b.Fatal(err, e, t)
			}
			i++
		}
	}
	b.Run("entries=1310720/target=warm-tail", func(b *testing.B) { run(b, warm) })
	b.Run("entries=1310720/target=random", func(b *testing.B) { run(b, random) })
	b.Run("entries=1310720/target=random/baseline=slices.BinarySearch", func(b *testing.B) {
		offsets := make([]int64, n)
		for i := range offsets {
			offsets[i] = int64(2 * i)
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			t := random[i&(len(random)-1)]
			j, found := slices.BinarySearch(offsets, t)
			if !found {
				j--
			}
			if offsets[j] > t {
				b.Fatal(j)
			}
			i++
		}
	})
}

func BenchmarkAppend(b *testing.B) {
	x, err := Open(vfs.OS, filepath.Join(b.TempDir(), "00000000000000000000.index"), 0, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	n := DefaultMaxIndexSize / EntrySize
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i == n {
			b.StopTimer()
			if err := x.TruncateTo(0); err != nil {
				b.Fatal(err)
			}
			i = 0
			b.StartTimer()
		}
		if err := x.Append(int64(i), int32(i)); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
