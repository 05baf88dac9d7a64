package mmapfile

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog/vfs"
)

// An 8-byte entry: key int32, value int32, like the offset index.
var opts8 = Options{EntrySize: 8, MaxSize: 8 * 4096, Key: Column{0, 4}, Value: Column{4, 4}}

func entry(k, v int32) []byte {
	var b [8]byte
	binary.BigEndian.PutUint32(b[:], uint32(k))
	binary.BigEndian.PutUint32(b[4:], uint32(v))
	return b[:]
}

func newFile(t *testing.T, fsys vfs.FS, o Options) *File {
	f, err := New(fsys, "/f.idx", o)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	return f
}

// linear is the reference: the answer of a scan over every entry.
func linear(keys []int64, target int64, b Bound) int {
	if b == LargestLowerBound {
		slot := -1
		for i, k := range keys {
			if k <= target {
				slot = i
			}
		}
		return slot
	}
	for i, k := range keys {
		if k >= target {
			return i
		}
	}
	return -1
}

// The search against a linear scan, for sizes around the warm tail (1024
// entries of 8 bytes) and every target between and around the keys.
func TestSearchAgainstLinear(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 3))
	for _, n := range []int{0, 1, 2, 3, 1023, 1024, 1025, 1026, 3000} {
		f := newFile(t, vfs.NewMem(), opts8)
		keys := make([]int64, n)
		k := int64(rng.IntN(5))
		for i := range n {
			k += 1 + rng.Int64N(3)
			keys[i] = k
			require.NoError(t, f.Append(entry(int32(k), int32(i))))
		}
		targets := []int64{-1, 0, 1 << 40}
		for i := 0; i <= int(k)+2; i += 1 + i/500 {
			targets = append(targets, int64(i))
		}
		for _, target := range targets {
			for _, b := range []Bound{LargestLowerBound, SmallestUpperBound} {
				slot, s, err := f.Search(opts8.Key, target, b)
				require.NoError(t, err)
				require.Equal(t, linear(keys, target, b), slot, "n=%d target=%d bound=%d", n, target, b)
				if slot >= 0 {
					require.Equal(t, keys[slot], int64(int32(binary.BigEndian.Uint32(s[:]))))
				}
			}
		}
		require.NoError(t, f.Close())
	}
}

func TestValidPrefixOnOpen(t *testing.T) {
	cases := []struct {
		name    string
		data    []byte
		entries int
		reason  string
	}{
		{"trimmed", concat(entry(1, 1), entry(2, 2), entry(3, 3)), 3, ""},
		{"zero tail", concat(entry(1, 1), entry(2, 2), make([]byte, 40)), 2, "zero entry"},
		{"all zero", make([]byte, 64), 0, "zero entry"},
		{"not increasing", concat(entry(1, 1), entry(5, 5), entry(4, 6), make([]byte, 8)), 2, "not increasing"},
		{"value decreasing", concat(entry(1, 1), entry(5, 5), entry(6, 4), make([]byte, 8)), 2, "not increasing"},
		// A trimmed file is taken whole, as Kafka does; Check finds the defect.
		{"trimmed but disordered", concat(entry(1, 1), entry(5, 5), entry(4, 6)), 3, ""},
		{"partial slot", concat(entry(1, 1), []byte{1, 2, 3}), 1, ""},
		{"empty", nil, 0, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mem := vfs.NewMem()
			require.NoError(t, vfs.WriteFile(mem, "/f.idx", c.data))
			o := opts8
			o.ReadOnly = true
			f := newFile(t, mem, o)
			opened, err := f.Open()
			require.NoError(t, err)
			require.Equal(t, c.entries, opened.Entries)
			require.Equal(t, len(c.data)/8, opened.Slots)
			require.Equal(t, c.reason, opened.StopReason)
			n, err := f.Entries()
			require.NoError(t, err)
			require.Equal(t, c.entries, n)
			require.NoError(t, f.Close())
			got, err := vfs.ReadFile(mem, "/f.idx")
			require.NoError(t, err)
			require.Equal(t, len(c.data), len(got), "read-only never trims")
		})
	}
}

func concat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func TestTruncateZeroesTheCutSlots(t *testing.T) {
	mem := vfs.NewMem()
	f := newFile(t, mem, opts8)
	for i := range 10 {
		require.NoError(t, f.Append(entry(int32(i+1), int32(i))))
	}
	require.NoError(t, f.TruncateToEntries(4))
	require.NoError(t, f.Flush())
	// Reopening the untrimmed file (as after a crash) finds 4 entries,
	// not the stale 10.
	after := mem.Crash(vfs.CrashKeepAll, 0)
	g, err := New(after, "/f.idx", opts8)
	require.NoError(t, err)
	n, err := g.Entries()
	require.NoError(t, err)
	require.Equal(t, 4, n)
	require.NoError(t, f.TruncateToEntries(99), "beyond the end: nothing changes")
	n, _ = f.Entries()
	require.Equal(t, 4, n)
}

func TestPreallocationFallsBackToZeros(t *testing.T) {
	in := vfs.NewInjector(vfs.NewMem())
	in.Add(vfs.Rule{Ops: vfs.OpPreallocate, Err: vfs.ErrNotSupported})
	f := newFile(t, in, opts8)
	require.NoError(t, f.Append(entry(1, 1)))
	require.Equal(t, 1, in.Injected())
	length, err := f.Length()
	require.NoError(t, err)
	require.Equal(t, firstChunk, length, "a new file's first chunk")
}

// A new file costs a page; it grows as entries come, doubling up to a MiB
// at a time, never past its maximum size, always with the slot after the
// last entry allocated; at the maximum it is full.
func TestGrowsInChunks(t *testing.T) {
	dir := t.TempDir()
	o := Options{EntrySize: 8, MaxSize: 3<<20 + 8*5, Key: Column{0, 4}, Value: Column{4, 4}}
	f, err := New(vfs.OS, filepath.Join(dir, "f.idx"), o)
	require.NoError(t, err)
	defer f.Close()
	_, err = f.Open()
	require.NoError(t, err)
	var st syscall.Stat_t
	require.NoError(t, syscall.Stat(filepath.Join(dir, "f.idx"), &st))
	require.Equal(t, int64(firstChunk), st.Size)
	require.LessOrEqual(t, st.Blocks*512, int64(8<<10), "an empty index costs a page or two of disk")
	slots, err := f.MaxEntries()
	require.NoError(t, err)
	require.Equal(t, o.MaxSize/8, slots, "the slots it may have")

	var lengths []int
	for i := range o.MaxSize / 8 {
		require.NoError(t, f.Append(entry(int32(i+1), int32(i))))
		length, err := f.Length()
		require.NoError(t, err)
		require.GreaterOrEqual(t, length, min((i+2)*8, o.MaxSize), "the next slot is allocated")
		require.LessOrEqual(t, length, o.MaxSize)
		if len(lengths) == 0 || lengths[len(lengths)-1] != length {
			lengths = append(lengths, length)
		}
	}
	require.ErrorIs(t, f.Append(entry(int32(o.MaxSize), 0)), ErrFull)
	want := []int{4 << 10}
	for l := 4 << 10; l < o.MaxSize; {
		l = min(l+min(l, 1<<20), o.MaxSize)
		want = append(want, l)
	}
	require.Equal(t, want, lengths)
}

// An open index holds a mapping, not a descriptor: opening, growing and
// flushing one leaves the process's descriptor count where it was.
func TestMappedFileHoldsNoDescriptor(t *testing.T) {
	fds := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		require.NoError(t, err)
		return len(ents)
	}
	dir := t.TempDir()
	f, err := New(vfs.OS, filepath.Join(dir, "f.idx"), opts8)
	require.NoError(t, err)
	defer f.Close()
	before := fds()
	_, err = f.Open()
	require.NoError(t, err)
	require.True(t, f.IsOpen())
	for i := range 1000 { // past the first chunk: a remap
		require.NoError(t, f.Append(entry(int32(i+1), int32(i))))
	}
	require.NoError(t, f.Flush())
	require.Equal(t, before, fds(), "no descriptor is held while mapped")
	n, err := f.Entries()
	require.NoError(t, err)
	require.Equal(t, 1000, n)
}

// A full disk fails the append whose own slot needs a new chunk before
// anything is stored: the file stays open with its entries, and appends go
// on once there is room. An entry whose slot is allocated is stored even
// when the slot after it cannot be (recovery rebuilding a trimmed index
// on a full disk needs no new space).
func TestGrowthOnFullDisk(t *testing.T) {
	in := vfs.NewInjector(vfs.NewMem())
	f := newFile(t, in, opts8)
	slots := firstChunk / 8
	for i := range slots - 1 {
		require.NoError(t, f.Append(entry(int32(i+1), int32(i))))
	}
	in.Add(vfs.Rule{Ops: vfs.OpPreallocate, Err: syscall.ENOSPC, From: true})
	require.NoError(t, f.Append(entry(int32(slots), 0)), "its slot is allocated, the next one cannot be")
	require.ErrorIs(t, f.Append(entry(int32(slots+1), 0)), syscall.ENOSPC, "its slot is not allocated")
	require.True(t, f.IsOpen())
	n, err := f.Entries()
	require.NoError(t, err)
	require.Equal(t, slots, n)
	length, err := f.Length()
	require.NoError(t, err)
	require.Equal(t, firstChunk, length, "as it was")
	in.Reset()
	require.NoError(t, f.Append(entry(int32(slots+1), 0)))
	n, _ = f.Entries()
	require.Equal(t, slots+1, n)
	length, _ = f.Length()
	require.Equal(t, 2*firstChunk, length)
}

// Resize sets the limit: a larger one is grown into as entries come, a
// smaller one cuts the file now; Reset drops the entries and keeps the
// length.
func TestResizeSetsTheLimit(t *testing.T) {
	f := newFile(t, vfs.NewMem(), opts8)
	for i := range 3 {
		require.NoError(t, f.Append(entry(int32(i+1), int32(i))))
	}
	require.NoError(t, f.TrimToValidSize())
	slots, _ := f.MaxEntries()
	require.Equal(t, 3, slots, "a sealed index is full")
	require.ErrorIs(t, f.Append(entry(9, 9)), ErrFull)
	changed, err := f.Resize(opts8.MaxSize)
	require.NoError(t, err)
	require.True(t, changed)
	slots, _ = f.MaxEntries()
	require.Equal(t, opts8.MaxSize/8, slots)
	length, _ := f.Length()
	require.Equal(t, 24, length, "nothing is allocated until an entry needs it")
	require.NoError(t, f.Append(entry(9, 9)))
	length, _ = f.Length()
	require.Equal(t, firstChunk, length, "then a page, not the limit")
	changed, err = f.Resize(16)
	require.NoError(t, err)
	require.True(t, changed)
	length, _ = f.Length()
	require.Equal(t, 16, length)
	n, _ := f.Entries()
	require.Equal(t, 2, n)
	require.NoError(t, f.Reset())
	length, _ = f.Length()
	require.Equal(t, 16, length, "a reset keeps the blocks it has")
	n, _ = f.Entries()
	require.Zero(t, n)
	slots, _ = f.MaxEntries()
	require.Equal(t, opts8.MaxSize/8, slots)
}

func TestFailedCreateLeavesNothing(t *testing.T) {
	mem := vfs.NewMem()
	in := vfs.NewInjector(mem)
	in.Add(vfs.Rule{Ops: vfs.OpMap})
	f := newFile(t, in, opts8)
	require.ErrorIs(t, f.Append(entry(1, 1)), vfs.ErrInjected)
	_, err := mem.Stat("/f.idx")
	require.Error(t, err, "a half-made index is removed")
	require.NoError(t, f.Append(entry(1, 1)), "the next use tries again")
}

func TestFailedResizeReopens(t *testing.T) {
	mem := vfs.NewMem()
	in := vfs.NewInjector(mem)
	f := newFile(t, in, opts8)
	for i := range 5 {
		require.NoError(t, f.Append(entry(int32(i+1), int32(i))))
	}
	in.Add(vfs.Rule{Ops: vfs.OpTruncate})
	require.ErrorIs(t, f.TrimToValidSize(), vfs.ErrInjected)
	require.False(t, f.IsOpen(), "the mapping is gone, so the file is closed")
	n, err := f.Entries() // reopens the untrimmed file from disk
	require.NoError(t, err)
	require.Equal(t, 5, n)
}

func TestReadOnlyRefusesChanges(t *testing.T) {
	mem := vfs.NewMem()
	require.NoError(t, vfs.WriteFile(mem, "/f.idx", entry(1, 1)))
	o := opts8
	o.ReadOnly = true
	f := newFile(t, mem, o)
	require.ErrorIs(t, f.Append(entry(2, 2)), ErrReadOnly)
	require.ErrorIs(t, f.TruncateToEntries(0), ErrReadOnly)
	require.ErrorIs(t, f.Reset(), ErrReadOnly)
	_, err := f.Resize(100)
	require.ErrorIs(t, err, ErrReadOnly)
	require.NoError(t, f.Flush())
}

func TestOptionsValidation(t *testing.T) {
	for _, o := range []Options{
		{EntrySize: 0, MaxSize: 100, Key: Column{0, 4}, Value: Column{0, 4}},
		{EntrySize: 17, MaxSize: 100, Key: Column{0, 4}, Value: Column{0, 4}},
		{EntrySize: 8, MaxSize: 7, Key: Column{0, 4}, Value: Column{4, 4}},
		{EntrySize: 8, MaxSize: 80, Key: Column{0, 8}, Value: Column{4, 8}},
		{EntrySize: 8, MaxSize: 80, Key: Column{0, 3}, Value: Column{4, 4}},
	} {
		_, err := New(vfs.NewMem(), "/x", o)
		require.Error(t, err, "%+v", o)
	}
	require.Equal(t, int64(-5), RelativeTarget(40, 45))
	require.Equal(t, int64(-1<<63), RelativeTarget(-1<<63, 45))
}

// Lookups run while the writer appends, trims, resizes and closes: the
// read lock keeps them off a mapping being replaced (run with -race).
func TestConcurrentLookupsAndRemaps(t *testing.T) {
	f, err := New(vfs.OS, t.TempDir()+"/f.idx", Options{EntrySize: 8, MaxSize: 8 * 2000, Key: Column{0, 4}, Value: Column{4, 4}})
	require.NoError(t, err)
	defer f.Close()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				slot, s, err := f.Search(Column{0, 4}, 500, LargestLowerBound)
				if err != nil {
					continue
				}
				if slot >= 0 {
					k := int32(binary.BigEndian.Uint32(s[:]))
					if k > 500 {
						assert.Fail(t, "a lookup saw a key above its target", "key %d", k)
						return
					}
				}
			}
		}()
	}
	for round := range 50 {
		for i := range 1000 {
			if err := f.Append(entry(int32(i+1), int32(i))); err != nil {
				require.ErrorIs(t, err, ErrFull, "round %d", round)
				break
			}
		}
		require.NoError(t, f.TrimToValidSize())
		_, err := f.Resize(8 * 2000)
		require.NoError(t, err)
		require.NoError(t, f.Reset())
		if round%10 == 0 {
			require.NoError(t, f.Close())
		}
	}
	close(stop)
	wg.Wait()
}

func TestDeletedFileRefusesUse(t *testing.T) {
	f := newFile(t, vfs.NewMem(), opts8)
	require.NoError(t, f.Append(entry(1, 1)))
	require.NoError(t, f.Delete())
	_, err := f.Entries()
	require.ErrorIs(t, err, ErrDeleted)
	require.ErrorIs(t, f.Rename("/g"), ErrDeleted)
	require.NoError(t, f.Close())
	require.NoError(t, f.Delete(), "deleting twice")
	require.True(t, errors.Is(f.Append(entry(2, 2)), ErrDeleted))
}
