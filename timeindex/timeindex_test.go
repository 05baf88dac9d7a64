package timeindex

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/vfs"
)

const (
	base       = 45
	maxEntries = 30
)

func newIndex(t testing.TB, fsys vfs.FS, path string, maxEntries int) *Index {
	t.Helper()
	x, err := Open(fsys, path, base, Options{MaxIndexSize: maxEntries * EntrySize})
	require.NoError(t, err)
	t.Cleanup(func() { x.Close() })
	return x
}

func tempIndex(t testing.TB) *Index {
	return newIndex(t, vfs.OS, filepath.Join(t.TempDir(), "00000000000000000045.timeindex"), maxEntries)
}

// appendEntries adds (10i, base+10i) for i = 1..n, as TimeIndexTest does.
func appendEntries(t *testing.T, x *Index, n int) {
	for i := 1; i <= n; i++ {
		require.NoError(t, x.MaybeAppend(int64(i*10), int64(base+i*10), false))
	}
}

// Scenario 10: testLookUp.
func TestLookup(t *testing.T) {
	x := tempIndex(t)
	e, err := x.Lookup(100)
	require.NoError(t, err)
	require.Equal(t, Entry{-1, base}, e, "empty")
	appendEntries(t, x, maxEntries-1)
	for _, c := range []struct{ ts, wantTS, wantOff int64 }{{9, -1, base}, {25, 20, 65}, {30, 30, 75}, {10_000, 290, 335}} {
		e, err := x.Lookup(c.ts)
		require.NoError(t, err)
		require.Equal(t, Entry{c.wantTS, c.wantOff}, e, "lookup %d", c.ts)
	}
}

// Scenario 11: testTruncate.
func TestTruncate(t *testing.T) {
	x := tempIndex(t)
	appendEntries(t, x, maxEntries-1)
	require.NoError(t, x.TruncateTo(56))
	n, err := x.Entries()
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.NoError(t, x.TruncateTo(55))
	n, err = x.Entries()
	require.NoError(t, err)
	require.Zero(t, n)
	e, err := x.Lookup(1000)
	require.NoError(t, err)
	require.Equal(t, Entry{-1, base}, e)
	last, err := x.LastEntry()
	require.NoError(t, err)
	require.Equal(t, Entry{-1, base}, last)
}

// Scenario 12: testAppend.
func TestAppend(t *testing.T) {
	x := tempIndex(t)
	appendEntries(t, x, maxEntries-1)
	require.ErrorIs(t, x.MaybeAppend(10_000, 1000, false), ErrFull)
	require.ErrorIs(t, x.MaybeAppend(10_000, (maxEntries-2)*10, true), ErrInvalidOffset)
	require.NoError(t, x.MaybeAppend(10_000, 1000, true), "the kept slot")
	last, err := x.LastEntry()
	require.NoError(t, err)
	require.Equal(t, Entry{10_000, 1000}, last)
	require.ErrorIs(t, x.MaybeAppend(20_000, 2000, true), ErrFull, "no slot at all")
}

// Scenario 13: testSanityCheck.
func TestSanityCheck(t *testing.T) {
	mem := vfs.NewMem()
	write := func(path string, entries [][2]int64, extra int) *Index {
		var data []byte
		for _, e := range entries {
			data = binary.BigEndian.AppendUint64(data, uint64(e[0]))
			data = binary.BigEndian.AppendUint32(data, uint32(e[1]))
		}
		data = append(data, make([]byte, extra)...)
		require.NoError(t, vfs.WriteFile(mem, path, data))
		x, err := Open(mem, path, base, Options{ReadOnly: true})
		require.NoError(t, err)
		return x
	}
	require.NoError(t, write("/ok", [][2]int64{{10, 1}, {20, 5}}, 0).SanityCheck())
	require.ErrorContains(t, write("/below", [][2]int64{{10, 1}, {20, -3}}, 0).SanityCheck(), "below the base offset")
	require.ErrorContains(t, write("/ts", [][2]int64{{30, 1}, {20, 5}}, 0).SanityCheck(), "below the first timestamp")
	err := write("/len", [][2]int64{{10, 1}, {20, 5}}, 5).SanityCheck()
	require.ErrorIs(t, err, seglog.ErrCorruption)
	require.ErrorContains(t, err, "not a multiple of 12")

	problems, err := write("/order", [][2]int64{{10, 1}, {20, 5}, {20, 6}, {30, 4}, {40, 9}}, 0).Check()
	require.NoError(t, err)
	require.Len(t, problems, 2)
	require.Equal(t, int64(2*EntrySize), problems[0].Offset)
	require.Contains(t, problems[0].Reason, "timestamp 20 does not increase")
	require.Equal(t, int64(3*EntrySize), problems[1].Offset)
	require.Contains(t, problems[1].Reason, "offset 49 decreases")

	x := write("/tail", [][2]int64{{10, 1}, {20, 5}}, 4*EntrySize)
	problems, err = x.Check()
	require.NoError(t, err)
	require.Len(t, problems, 1)
	require.Contains(t, problems[0].Reason, "4 slots after the 2 valid entries were left untrimmed")
	n, err := x.Entries()
	require.NoError(t, err)
	require.Equal(t, 2, n)
}

// Scenario 14: testIsFull and testResize.
func TestIsFullAndResize(t *testing.T) {
	x := tempIndex(t)
	for i := 1; i < maxEntries-1; i++ {
		require.NoError(t, x.MaybeAppend(int64(i*10), int64(base+i), false))
		full, err := x.IsFull()
		require.NoError(t, err)
		require.False(t, full, "after %d entries", i)
	}
	require.NoError(t, x.MaybeAppend(10_000, base+100, false))
	full, err := x.IsFull()
	require.NoError(t, err)
	require.True(t, full, "full at maxEntries - 1")

	length := maxEntries * EntrySize
	changed, err := x.Resize(length)
	require.NoError(t, err)
	require.False(t, changed, "same size")
	changed, err = x.Resize(length / 2)
	require.NoError(t, err)
	require.True(t, changed, "half")
	changed, err = x.Resize(length * 2)
	require.NoError(t, err)
	require.True(t, changed, "double")
	full, err = x.IsFull()
	require.NoError(t, err)
	require.False(t, full)
}

// Scenario 15: an equal timestamp is ignored, a decreasing one refused.
func TestEqualAndDecreasingTimestamps(t *testing.T) {
	x := tempIndex(t)
	require.NoError(t, x.MaybeAppend(-5, base, false))
	n, _ := x.Entries()
	require.Zero(t, n, "a timestamp below -1 on an empty index is not appended")
	require.NoError(t, x.MaybeAppend(-1, base, false))
	n, _ = x.Entries()
	require.Zero(t, n, "no timestamps, no entries")
	require.NoError(t, x.MaybeAppend(100, base+1, false))
	require.NoError(t, x.MaybeAppend(100, base+1, false))
	require.NoError(t, x.MaybeAppend(100, base+5, true), "the roll entry: equal timestamp, ignored")
	n, _ = x.Entries()
	require.Equal(t, 1, n)
	require.ErrorIs(t, x.MaybeAppend(99, base+6, false), ErrTimestampDecreases)
	require.ErrorIs(t, x.MaybeAppend(200, base, false), ErrInvalidOffset)
	require.ErrorIs(t, x.MaybeAppend(300, base+math.MaxInt32+1, false), ErrOffsetOverflow)
	require.ErrorIs(t, tempIndex(t).MaybeAppend(300, base-1, false), ErrOffsetOverflow)
	require.NoError(t, tempIndex(t).MaybeAppend(-1, -1, true), "nothing to append, nothing to check")
	require.NoError(t, x.MaybeAppend(200, base+1, false), "an equal offset with a larger timestamp")
}

func TestModelAgainstLinearScan(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 2))
	for round := range 20 {
		n := 1 + rng.IntN(3000)
		x := newIndex(t, vfs.NewMem(), "/m.timeindex", n+10)
		var entries []Entry
		ts, off := int64(rng.IntN(100)), int64(base)
		for range n {
			ts += 1 + rng.Int64N(50)
			off += 1 + rng.Int64N(5)
			require.NoError(t, x.MaybeAppend(ts, off, false))
			entries = append(entries, Entry{ts, off})
		}
		for range 300 {
			target := rng.Int64N(ts + 100)
			got, err := x.Lookup(target)
			require.NoError(t, err)
			want := Entry{-1, base}
			for _, e := range entries {
				if e.Timestamp <= target {
					want = e
				}
			}
			require.Equal(t, want, got, "round %d lookup %d", round, target)
		}
		cut := base + rng.Int64N(off-base+2)
		require.NoError(t, x.TruncateTo(cut))
		keep := 0
		for keep < n && entries[keep].Offset < cut {
			keep++
		}
		got, err := x.Entries()
		require.NoError(t, err)
		require.Equal(t, keep, got, "round %d truncate to %d", round, cut)
	}
}

func TestCrash(t *testing.T) {
	for seed := range uint64(60) {
		mem := vfs.NewMem()
		x, err := Open(mem, "/0.timeindex", 0, Options{MaxIndexSize: 3000})
		require.NoError(t, err)
		for i := range 200 {
			require.NoError(t, x.MaybeAppend(int64(1_700_000_000_000+i*7), int64(i*3), false))
			if i == 99 {
				require.NoError(t, x.Flush())
				require.NoError(t, mem.SyncDir("/"))
			}
		}
		after := mem.Crash(vfs.CrashRandom, seed)
		y, err := Open(after, "/0.timeindex", 0, Options{MaxIndexSize: 3000})
		require.NoError(t, err)
		n, err := y.Entries()
		require.NoError(t, err)
		require.GreaterOrEqual(t, n, 100, "seed %d: a flushed entry was lost", seed)
		for i := range 100 {
			e, err := y.Entry(i)
			require.NoError(t, err)
			require.Equal(t, Entry{int64(1_700_000_000_000 + i*7), int64(i * 3)}, e)
		}
		require.NoError(t, y.SanityCheck())
	}
}

func TestQuickCheck(t *testing.T) {
	mem := vfs.NewMem()
	x, err := Open(mem, "/x.timeindex", 100, Options{MaxIndexSize: 16 * EntrySize})
	require.NoError(t, err)
	require.NoError(t, x.MaybeAppend(5, 101, false))
	require.NoError(t, x.MaybeAppend(9, 103, false))
	require.NoError(t, x.Close())
	require.NoError(t, x.QuickCheck())
	require.False(t, x.IsOpen())
	good, err := vfs.ReadFile(mem, "/x.timeindex")
	require.NoError(t, err)
	backwards := slices.Clone(good)
	binary.BigEndian.PutUint64(backwards[EntrySize:], 1) // the last timestamp below the first
	for name, data := range map[string][]byte{
		"torn": good[:len(good)-1], "untrimmed": append(slices.Clone(good), make([]byte, EntrySize)...), "backwards": backwards,
	} {
		require.NoError(t, vfs.WriteFile(mem, "/y.timeindex", data))
		y, err := Open(mem, "/y.timeindex", 100, Options{MaxIndexSize: 16 * EntrySize})
		require.NoError(t, err)
		require.ErrorIs(t, y.QuickCheck(), seglog.ErrCorruption, name)
	}
}
