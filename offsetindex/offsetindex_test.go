package offsetindex

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/vfs"
)

const base = 45

func newIndex(t testing.TB, fsys vfs.FS, path string, base int64, maxEntries int) *Index {
	t.Helper()
	x, err := Open(fsys, path, base, Options{MaxIndexSize: maxEntries * EntrySize})
	require.NoError(t, err)
	t.Cleanup(func() { x.Close() })
	return x
}

func tempIndex(t testing.TB, base int64, maxEntries int) *Index {
	return newIndex(t, vfs.OS, filepath.Join(t.TempDir(), "00000000000000000045.index"), base, maxEntries)
}

// monotonic returns n strictly increasing values starting above start, with
// random gaps.
func monotonic(rng *rand.Rand, n int, start int64) []int64 {
	out := make([]int64, n)
	v := start
	for i := range out {
		v += 1 + rng.Int64N(10)
		out[i] = v
	}
	return out
}

func seeded(t *testing.T) *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	return rand.New(rand.NewPCG(seed, 1))
}

// Scenario 1: randomLookupTest.
func TestRandomLookup(t *testing.T) {
	rng := seeded(t)
	x := tempIndex(t, base, 30)
	offsets := monotonic(rng, 30, base)
	positions := monotonic(rng, 30, 0)
	for i := range offsets {
		require.NoError(t, x.Append(offsets[i], int32(positions[i])))
	}
	for i, o := range offsets {
		e, err := x.Lookup(o)
		require.NoError(t, err)
		require.Equal(t, Entry{o, int32(positions[i])}, e, "exact hit")
	}
	for o := int64(base); o < offsets[29]+10; o++ {
		e, err := x.Lookup(o)
		require.NoError(t, err)
		i, found := slices.BinarySearch(offsets, o)
		if !found {
			i--
		}
		if i < 0 {
			require.Equal(t, Entry{base, 0}, e, "below the first entry")
		} else {
			require.Equal(t, Entry{offsets[i], int32(positions[i])}, e, "floor of %d", o)
		}
	}
}

// Scenario 2: lookupExtremeCases.
func TestLookupExtremeCases(t *testing.T) {
	x := tempIndex(t, base, 30)
	e, err := x.Lookup(base)
	require.NoError(t, err)
	require.Equal(t, Entry{base, 0}, e, "empty index")
	for i := range 30 {
		require.NoError(t, x.Append(base+int64(i)+1, int32(i)))
	}
	e, err = x.Lookup(base + 1)
	require.NoError(t, err)
	require.Equal(t, Entry{base + 1, 0}, e)
	e, err = x.Lookup(base + 30)
	require.NoError(t, err)
	require.Equal(t, Entry{base + 30, 29}, e)
	e, err = x.Lookup(math.MaxInt64)
	require.NoError(t, err)
	require.Equal(t, Entry{base + 30, 29}, e)
	e, err = x.Lookup(math.MinInt64)
	require.NoError(t, err)
	require.Equal(t, Entry{base, 0}, e)
}

// Scenario 3: testEntry / testEntryOverflow.
func TestEntry(t *testing.T) {
	x := tempIndex(t, base, 30)
	_, err := x.Entry(0)
	require.Error(t, err, "entry 0 of an empty index")
	for i := range 10 {
		require.NoError(t, x.Append(base+int64(i), int32(i*100)))
	}
	for i := range 10 {
		e, err := x.Entry(i)
		require.NoError(t, err)
		require.Equal(t, Entry{base + int64(i), int32(i * 100)}, e)
	}
	_, err = x.Entry(10)
	require.Error(t, err)
	_, err = x.Entry(-1)
	require.Error(t, err)
}

// Scenario 4: appendTooMany.
func TestAppendTooMany(t *testing.T) {
	x := tempIndex(t, base, 30)
	for i := range 30 {
		full, err := x.IsFull()
		require.NoError(t, err)
		require.False(t, full)
		require.NoError(t, x.Append(base+int64(i), int32(i)))
	}
	full, err := x.IsFull()
	require.NoError(t, err)
	require.True(t, full)
	require.ErrorIs(t, x.Append(base+30, 30), ErrFull)
}

// Scenario 5: appendOutOfOrder.
func TestAppendOutOfOrder(t *testing.T) {
	x := tempIndex(t, base, 30)
	require.NoError(t, x.Append(51, 0))
	require.ErrorIs(t, x.Append(50, 1), ErrInvalidOffset)
	require.ErrorIs(t, x.Append(51, 1), ErrInvalidOffset, "an equal offset")
	require.ErrorIs(t, x.Append(base-1, 1), ErrOffsetOverflow)
	require.ErrorIs(t, x.Append(base+math.MaxInt32+1, 1), ErrOffsetOverflow)
	require.NoError(t, x.Append(base+math.MaxInt32, 1))
	require.True(t, x.CanAppendOffset(base))
	require.False(t, x.CanAppendOffset(base+math.MaxInt32+1))
	n, err := x.Entries()
	require.NoError(t, err)
	require.Equal(t, 2, n)
}

// Scenario 6: testFetchUpperBoundOffset.
func TestFetchUpperBoundOffset(t *testing.T) {
	x := tempIndex(t, 0, 30)
	entries := []Entry{{0, 0}, {1, 10}, {2, 23}, {3, 37}}
	for _, e := range entries {
		require.NoError(t, x.Append(e.Offset, e.Position))
	}
	cases := []struct {
		pos  int32
		size int
		want int // index in entries, -1 for none
	}{{0, 5, 1}, {0, 10, 1}, {0, 22, 2}, {0, 23, 2}, {10, 24, 3}, {37, 1, -1}, {0, 200, -1}}
	for _, c := range cases {
		e, ok, err := x.FetchUpperBoundOffset(c.pos, c.size)
		require.NoError(t, err)
		if c.want < 0 {
			require.False(t, ok, "%+v", c)
			continue
		}
		require.True(t, ok, "%+v", c)
		require.Equal(t, entries[c.want], e, "%+v", c)
	}
}

// Scenario 7: testReopen.
func TestReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "00000000000000000045.index")
	x, err := Open(vfs.OS, path, base, Options{MaxIndexSize: 30 * EntrySize})
	require.NoError(t, err)
	require.NoError(t, x.Append(base+5, 100))
	require.NoError(t, x.Append(base+10, 200))
	require.NoError(t, x.Close())
	info, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, int64(2*EntrySize), info.Size(), "close trims")

	y := newIndex(t, vfs.OS, path, base, 30)
	n, err := y.Entries()
	require.NoError(t, err)
	require.Equal(t, 2, n)
	last, err := y.LastOffset()
	require.NoError(t, err)
	require.Equal(t, int64(base+10), last)
	e, err := y.Lookup(base + 7)
	require.NoError(t, err)
	require.Equal(t, Entry{base + 5, 100}, e)
	e, err = y.Lookup(base + 10)
	require.NoError(t, err)
	require.Equal(t, Entry{base + 10, 200}, e)
	full, err := y.IsFull()
	require.NoError(t, err)
	require.True(t, full, "a trimmed index is full until resized")
	_, err = y.Resize(30 * EntrySize)
	require.NoError(t, err)
	require.NoError(t, y.Append(base+11, 300))
}

// Scenario 8: truncate.
func TestTruncate(t *testing.T) {
	x := tempIndex(t, 0, 10)
	for i := int64(1); i < 10; i++ {
		require.NoError(t, x.Append(i, int32(i)))
	}
	check := func(lookup Entry, last int64) {
		t.Helper()
		e, err := x.Lookup(10)
		require.NoError(t, err)
		require.Equal(t, lookup, e)
		l, err := x.LastOffset()
		require.NoError(t, err)
		require.Equal(t, last, l)
	}
	require.NoError(t, x.TruncateTo(12))
	check(Entry{9, 9}, 9)
	require.NoError(t, x.Append(10, 10))
	require.NoError(t, x.TruncateTo(10))
	check(Entry{9, 9}, 9)
	require.NoError(t, x.Append(10, 10))
	require.NoError(t, x.TruncateTo(9))
	check(Entry{8, 8}, 8)
	require.NoError(t, x.Append(9, 9))
	require.NoError(t, x.TruncateTo(5))
	check(Entry{4, 4}, 4)
	require.NoError(t, x.Append(5, 5))
	require.NoError(t, x.TruncateTo(0))
	n, err := x.Entries()
	require.NoError(t, err)
	require.Zero(t, n)
	require.NoError(t, x.Append(0, 0))
}

// Scenario 9: testSanityLastOffsetEqualToBaseOffset.
func TestSanityLastOffsetEqualToBaseOffset(t *testing.T) {
	x := tempIndex(t, 20, 30)
	require.NoError(t, x.Append(20, 5))
	require.NoError(t, x.SanityCheck())
}

func writeIndexFile(t *testing.T, fsys vfs.FS, path string, entries [][2]int32, extraZeroSlots int) {
	var data []byte
	for _, e := range entries {
		data = binary.BigEndian.AppendUint32(data, uint32(e[0]))
		data = binary.BigEndian.AppendUint32(data, uint32(e[1]))
	}
	data = append(data, make([]byte, extraZeroSlots*EntrySize)...)
	require.NoError(t, vfs.WriteFile(fsys, path, data))
}

func TestSanityCheckAndCheck(t *testing.T) {
	mem := vfs.NewMem()
	open := func(path string) *Index {
		x, err := Open(mem, path, base, Options{ReadOnly: true})
		require.NoError(t, err)
		return x
	}
	writeIndexFile(t, mem, "/neg.index", [][2]int32{{1, 10}, {-5, 20}}, 0)
	err := open("/neg.index").SanityCheck()
	require.ErrorIs(t, err, seglog.ErrCorruption)
	require.Contains(t, err.Error(), "/neg.index at byte 8")

	require.NoError(t, vfs.WriteFile(mem, "/odd.index", make([]byte, 8*3+3)))
	require.ErrorContains(t, open("/odd.index").SanityCheck(), "not a multiple of 8")

	writeIndexFile(t, mem, "/bad.index", [][2]int32{{1, 10}, {3, 20}, {3, 30}, {4, 25}, {6, 40}}, 0)
	x := open("/bad.index")
	require.NoError(t, x.SanityCheck(), "Kafka's check looks at the last entry only")
	problems, err := x.Check()
	require.NoError(t, err)
	require.Len(t, problems, 2)
	require.Equal(t, int64(2*EntrySize), problems[0].Offset)
	require.Contains(t, problems[0].Reason, "offset 48 does not increase")
	require.Equal(t, int64(3*EntrySize), problems[1].Offset)
	require.Contains(t, problems[1].Reason, "position 25 does not increase")

	// A zero-filled tail, as a crash leaves a preallocated index.
	writeIndexFile(t, mem, "/tail.index", [][2]int32{{1, 10}, {3, 20}}, 5)
	x = open("/tail.index")
	n, err := x.Entries()
	require.NoError(t, err)
	require.Equal(t, 2, n, "the zero tail is not read as entries")
	problems, err = x.Check()
	require.NoError(t, err)
	require.Len(t, problems, 1)
	require.Equal(t, int64(2*EntrySize), problems[0].Offset)
	require.Contains(t, problems[0].Reason, "5 slots after the 2 valid entries were left untrimmed")
}

// A model test: lookups, upper bounds and truncations against a linear
// scan over random contents, with indexes large enough to have a cold part
// and a warm tail.
func TestModelAgainstLinearScan(t *testing.T) {
	rng := seeded(t)
	for round := range 20 {
		n := 1 + rng.IntN(4000)
		x := newIndex(t, vfs.NewMem(), "/m.index", base, n+10)
		offsets := monotonic(rng, n, base)
		positions := monotonic(rng, n, -1)
		for i := range n {
			require.NoError(t, x.Append(offsets[i], int32(positions[i])))
		}
		for range 300 {
			target := base - 5 + rng.Int64N(offsets[n-1]-base+15)
			got, err := x.Lookup(target)
			require.NoError(t, err)
			want := Entry{Offset: base}
			for i := range n {
				if offsets[i] <= target {
					want = Entry{offsets[i], int32(positions[i])}
				}
			}
			require.Equal(t, want, got, "round %d lookup %d", round, target)
			floor, next, hasNext, err := x.Bounds(target)
			require.NoError(t, err)
			require.Equal(t, want, floor)
			i, _ := slices.BinarySearch(offsets, target+1)
			require.Equal(t, i < n, hasNext, "round %d bounds %d", round, target)
			if hasNext {
				require.Equal(t, Entry{offsets[i], int32(positions[i])}, next)
			}

			pos, size := int32(rng.Int64N(positions[n-1]+5)), rng.IntN(20)
			gotE, gotOK, err := x.FetchUpperBoundOffset(pos, size)
			require.NoError(t, err)
			wantOK := false
			var wantE Entry
			for i := range n {
				if positions[i] >= int64(pos)+int64(size) {
					wantE, wantOK = Entry{offsets[i], int32(positions[i])}, true
					break
				}
			}
			require.Equal(t, wantOK, gotOK, "round %d upper bound %d+%d", round, pos, size)
			require.Equal(t, wantE, gotE)

			gotE, gotOK, err = x.LookupPosition(int64(pos))
			require.NoError(t, err)
			wantOK = false
			for i := range n {
				if positions[i] <= int64(pos) {
					wantE, wantOK = Entry{offsets[i], int32(positions[i])}, true
				}
			}
			require.Equal(t, wantOK, gotOK, "round %d floor position %d", round, pos)
			if wantOK {
				require.Equal(t, wantE, gotE)
			}
		}
		cut := base + rng.Int64N(offsets[n-1]-base+2)
		require.NoError(t, x.TruncateTo(cut))
		keep := 0
		for keep < n && offsets[keep] < cut {
			keep++
		}
		m, err := x.Entries()
		require.NoError(t, err)
		require.Equal(t, keep, m, "round %d truncate to %d", round, cut)
	}
}

// Unsynced appends may vanish in a crash; flushed ones never do, and the
// crash's zero tail is not read as entries.
func TestCrash(t *testing.T) {
	for seed := range uint64(60) {
		mem := vfs.NewMem()
		require.NoError(t, mem.MkdirAll("/t", 0o755))
		require.NoError(t, mem.SyncDir("/"))
		x, err := Open(mem, "/t/0.index", 0, Options{MaxIndexSize: 4096})
		require.NoError(t, err)
		var want []Entry
		for i := range 200 {
			e := Entry{int64(i*3 + 1), int32(i*100 + 50)}
			require.NoError(t, x.Append(e.Offset, e.Position))
			want = append(want, e)
			if i == 99 {
				require.NoError(t, x.Flush())
				require.NoError(t, mem.SyncDir("/t"))
			}
		}
		mode := vfs.CrashRandom
		if seed == 0 {
			mode = vfs.CrashDropAll
		}
		after := mem.Crash(mode, seed)
		y, err := Open(after, "/t/0.index", 0, Options{MaxIndexSize: 4096})
		require.NoError(t, err)
		n, err := y.Entries()
		require.NoError(t, err)
		require.GreaterOrEqual(t, n, 100, "seed %d: a flushed entry was lost", seed)
		if mode == vfs.CrashDropAll {
			require.Equal(t, 100, n)
		}
		for i := range n {
			got, err := y.Entry(i)
			require.NoError(t, err)
			if i < 100 {
				require.Equal(t, want[i], got, "seed %d entry %d", seed, i)
			} else {
				requireTornOf(t, want[i], got)
			}
		}
		require.NoError(t, y.Close())
	}
}

// requireTornOf checks that got is want with some bytes still zero: what a
// torn write of want over zeros leaves.
func requireTornOf(t *testing.T, want, got Entry) {
	var w, g [EntrySize]byte
	binary.BigEndian.PutUint32(w[:], uint32(want.Offset))
	binary.BigEndian.PutUint32(w[4:], uint32(want.Position))
	binary.BigEndian.PutUint32(g[:], uint32(got.Offset))
	binary.BigEndian.PutUint32(g[4:], uint32(got.Position))
	for i := range w {
		require.True(t, g[i] == w[i] || g[i] == 0, "entry %+v is not a torn %+v", got, want)
	}
}

func TestLazyCreationAndLifecycle(t *testing.T) {
	mem := vfs.NewMem()
	x, err := Open(mem, "/l.index", 0, Options{MaxIndexSize: 100})
	require.NoError(t, err)
	_, err = mem.Stat("/l.index")
	require.Error(t, err, "nothing is created before first use")
	require.False(t, x.IsOpen())
	require.NoError(t, x.Append(1, 10))
	info, err := mem.Stat("/l.index")
	require.NoError(t, err)
	require.Equal(t, int64(96), info.Size(), "preallocated to the maximum rounded down to whole entries")

	require.NoError(t, x.Rename("/l.index.deleted"))
	require.Equal(t, "/l.index.deleted", x.Path())
	e, err := x.Lookup(5)
	require.NoError(t, err)
	require.Equal(t, Entry{1, 10}, e)
	require.NoError(t, x.Close())
	require.False(t, x.IsOpen())
	e, err = x.Lookup(5) // reopens
	require.NoError(t, err)
	require.Equal(t, Entry{1, 10}, e)
	require.NoError(t, x.Delete())
	_, err = mem.Stat("/l.index.deleted")
	require.Error(t, err)
	_, err = x.Lookup(5)
	require.Error(t, err)

	_, err = Open(mem, "/x.index", 0, Options{MaxIndexSize: 7})
	require.Error(t, err, "smaller than one entry")

	ro, err := Open(mem, "/missing.index", 0, Options{ReadOnly: true})
	require.NoError(t, err)
	_, err = ro.Entries()
	require.Error(t, err, "read-only never creates")
}

func TestResetAndResize(t *testing.T) {
	x := newIndex(t, vfs.NewMem(), "/r.index", 0, 10)
	for i := range 5 {
		require.NoError(t, x.Append(int64(i+1), int32(i)))
	}
	require.NoError(t, x.TrimToValidSize())
	m, err := x.MaxEntries()
	require.NoError(t, err)
	require.Equal(t, 5, m)
	changed, err := x.Resize(10 * EntrySize)
	require.NoError(t, err)
	require.True(t, changed)
	changed, err = x.Resize(10*EntrySize + 3)
	require.NoError(t, err)
	require.False(t, changed, "rounded down to the same length")
	require.NoError(t, x.Reset())
	n, err := x.Entries()
	require.NoError(t, err)
	require.Zero(t, n)
	m, err = x.MaxEntries()
	require.NoError(t, err)
	require.Equal(t, 10, m)
	require.NoError(t, x.Append(1, 1))
}

// QuickCheck reads a closed index's ends without mapping it and flags what
// a sealed index must not be.
func TestQuickCheck(t *testing.T) {
	mem := vfs.NewMem()
	x := newIndex(t, mem, "/x.index", base, 16)
	for i := int64(1); i <= 3; i++ {
		require.NoError(t, x.Append(base+i*10, int32(i*100)))
	}
	require.NoError(t, x.Close()) // trimmed: three entries
	last, n, err := x.QuickCheck()
	require.NoError(t, err)
	require.Equal(t, Entry{Offset: base + 30, Position: 300}, last)
	require.Equal(t, 3, n)
	require.False(t, x.IsOpen(), "the check does not map it")

	damage := func(data []byte) error {
		require.NoError(t, vfs.WriteFile(mem, "/y.index", data))
		y, err := Open(mem, "/y.index", base, Options{MaxIndexSize: 16 * EntrySize})
		require.NoError(t, err)
		_, _, err = y.QuickCheck()
		return err
	}
	good, err := vfs.ReadFile(mem, "/x.index")
	require.NoError(t, err)
	require.NoError(t, damage(good))
	for name, data := range map[string][]byte{
		"torn":      good[:len(good)-3],
		"untrimmed": append(slices.Clone(good), make([]byte, 16)...),
		"below base": func() []byte {
			d := slices.Clone(good)
			binary.BigEndian.PutUint32(d[len(d)-8:], uint32(0xffffffff)) // relative -1
			return d
		}(),
	} {
		err := damage(data)
		require.ErrorIs(t, err, seglog.ErrCorruption, name)
		var ce *seglog.CorruptionError
		require.ErrorAs(t, err, &ce, name)
		require.Equal(t, "/y.index", ce.Path)
	}
}
