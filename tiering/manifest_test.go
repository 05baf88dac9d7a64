package tiering

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/vfs"
)

const mdir = "/d/t-0/tier"

func openM(t *testing.T, fsys vfs.FS) *Manifest {
	t.Helper()
	m, err := OpenManifest(fsys, mdir, 0)
	require.NoError(t, err)
	return m
}

func upload(t *testing.T, m *Manifest, id string, base, end int64) {
	t.Helper()
	require.NoError(t, m.Prepare(id, "k/"+id, base, end, 1_000))
	require.NoError(t, m.Commit(id, 100, 7, 5))
}

func TestManifestProtocol(t *testing.T) {
	fsys := vfs.NewMem()
	m := openM(t, fsys)
	upload(t, m, "a", 0, 10)
	upload(t, m, "b", 10, 20)
	require.Equal(t, int64(20), m.TieredEnd())

	// A repeated commit of a committed object is a no-op success.
	require.NoError(t, m.Commit("b", 100, 7, 5))
	// A commit whose base is not the tiered end is refused, writes nothing,
	// and the upload is then aborted.
	require.NoError(t, m.Prepare("c", "k/c", 25, 30, 1_000))
	before := m.Records()
	require.ErrorIs(t, m.Commit("c", 1, 1, 1), ErrWrongBase)
	require.Equal(t, before, m.Records())
	require.NoError(t, m.Abort("c", 50))
	// A retry after an abort goes under a new id and key.
	require.NoError(t, m.Prepare("d", "k/d", 20, 30, 1_000))
	require.NoError(t, m.Commit("d", 1, 1, 1))
	require.Equal(t, int64(30), m.TieredEnd())
	require.ErrorIs(t, m.Commit("c", 1, 1, 1), ErrUnknownObject, "an aborted object never commits")
	require.ErrorIs(t, m.Prepare("a", "k/a", 30, 40, 0), ErrUnknownObject, "an id is used once")

	require.NoError(t, m.Retire("a", 60))
	require.NoError(t, m.MarkGone("a"))
	require.NoError(t, m.MarkGone("c"))
	require.ErrorIs(t, m.MarkGone("b"), ErrUnknownObject, "a visible object is never gone")

	var vis []string
	for _, e := range m.Visible() {
		vis = append(vis, e.ID)
	}
	require.Equal(t, []string{"b", "d"}, vis)
	want := m.State()
	require.NoError(t, m.Close())

	// Replay gives the same state; so does replay after a compaction.
	m = openM(t, fsys)
	require.Equal(t, want, m.State())
	require.NoError(t, m.Compact())
	require.Zero(t, m.Records())
	upload(t, m, "e", 30, 40)
	want = m.State()
	require.NoError(t, m.Close())
	m = openM(t, fsys)
	require.Equal(t, want, m.State())
	require.Equal(t, int64(40), m.TieredEnd())
	require.NoError(t, m.Close())
}

// Every crash point of a sequence of changes (including compaction)
// leaves a manifest that opens to a state the sequence passed through,
// never with a lower tiered end than a change that returned.
func TestManifestCrashes(t *testing.T) {
	for seed := uint64(0); seed < 60; seed++ {
		for _, mode := range []vfs.CrashMode{vfs.CrashRandom, vfs.CrashDropAll, vfs.CrashKeepAll} {
			t.Run(fmt.Sprintf("%d-%v", seed, mode), func(t *testing.T) {
				mem := vfs.NewMem()
				require.NoError(t, mem.MkdirAll(filepath.Dir(mdir), 0o750))
				for d := filepath.Dir(mdir); ; d = filepath.Dir(d) {
					require.NoError(t, mem.SyncDir(d))
					if d == "/" {
						break
					}
				}
				in := vfs.NewInjector(mem)
				in.Add(vfs.Rule{Nth: int(seed), Sticky: true})
				var states []ManifestState
				acked := int64(0)
				m, err := OpenManifest(in, mdir, 0)
				if err == nil {
					states = append(states, m.State())
					for i := int64(0); i < 8; i++ {
						id := fmt.Sprint("o", i)
						if m.Prepare(id, "k/"+id, i*10, i*10+10, 0) != nil {
							break
						}
						states = append(states, m.State())
						if m.Commit(id, 1, 1, 1) != nil {
							break
						}
						acked = m.TieredEnd()
						states = append(states, m.State())
						if i%3 == 2 && m.Compact() != nil {
							break
						}
					}
				}
				after := mem.Crash(mode, seed)
				m2, err := OpenManifest(after, mdir, 0)
				require.NoError(t, err)
				require.GreaterOrEqual(t, m2.TieredEnd(), acked, "a commit that returned is never lost")
				got := m2.State()
				found := got.Seq == 0 && len(got.Objects) == 0
				for _, s := range states {
					if s.Seq == got.Seq {
						require.Equal(t, s, got)
						found = true
					}
				}
				if n := len(states); !found && n > 0 && got.Seq == states[n-1].Seq+1 {
					// The record in flight when the fault hit reached the file
					// before its fsync failed: one more change, no fewer.
					require.GreaterOrEqual(t, got.TieredEnd, states[n-1].TieredEnd)
					found = true
				}
				require.True(t, found, "state %+v is one the sequence passed through", got)
				// And it takes changes again.
				require.NoError(t, m2.Prepare("new", "k/new", m2.TieredEnd(), m2.TieredEnd()+10, 0))
				require.NoError(t, m2.Commit("new", 1, 1, 1))
			})
		}
	}
}

func TestManifestTornAndDamaged(t *testing.T) {
	mem := vfs.NewMem()
	m := openM(t, mem)
	upload(t, m, "a", 0, 10)
	upload(t, m, "b", 10, 20)
	require.NoError(t, m.Close())
	path := filepath.Join(mdir, ManifestLog)
	data, err := vfs.ReadFile(mem, path)
	require.NoError(t, err)

	write := func(b []byte) vfs.FS {
		fsys := vfs.NewMem()
		require.NoError(t, fsys.MkdirAll(mdir, 0o750))
		f, err := fsys.OpenFile(path, 0x42, 0o640) // O_RDWR|O_CREATE
		require.NoError(t, err)
		_, err = f.WriteAt(b, 0)
		require.NoError(t, err)
		require.NoError(t, f.Close())
		return fsys
	}
	// A torn last record, cut at every byte, is dropped: the records
	// before the cut hold, so "a" is committed once its COMMIT (the second
	// record) is whole, and "b" never is.
	var ends []int
	for at := 0; at < len(data); {
		_, _, n, ok := parseRecord(data[at:])
		require.True(t, ok)
		at += int(n)
		ends = append(ends, at)
	}
	require.Len(t, ends, 4)
	for cut := len(data) - 1; cut > 0; cut-- {
		m, err := OpenManifest(write(data[:cut]), mdir, 0)
		require.NoError(t, err, "cut at %d", cut)
		want := int64(0)
		if cut >= ends[1] {
			want = 10
		}
		require.Equal(t, want, m.TieredEnd(), "cut at %d", cut)
		_, prepared := m.Get("b")
		require.Equal(t, cut >= ends[2], prepared, "cut at %d", cut)
	}
	// A damaged record with good ones after it is corruption, located.
	bad := append([]byte(nil), data...)
	bad[12] ^= 1
	_, err = OpenManifest(write(bad), mdir, 0)
	var ce *seglog.CorruptionError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, path, ce.Path)
	require.Zero(t, ce.Offset)
}

func TestManifestFailedSyncIsSticky(t *testing.T) {
	in := vfs.NewInjector(vfs.NewMem())
	m, err := OpenManifest(in, mdir, 0)
	require.NoError(t, err)
	upload(t, m, "a", 0, 10)
	in.Add(vfs.Rule{Ops: vfs.OpSync})
	require.ErrorIs(t, m.Prepare("b", "k/b", 10, 20, 0), ErrManifestFailed)
	in.Reset()
	require.ErrorIs(t, m.Prepare("c", "k/c", 10, 20, 0), ErrManifestFailed, "the manifest stays failed")
	require.ErrorIs(t, m.Compact(), ErrManifestFailed)
}

// FuzzManifest opens a manifest directory built from the fuzzer's bytes: an
// optional snapshot, framed records (whole, with good CRCs, so that replay
// and the protocol's checks see arbitrary payloads and types) and a raw
// tail. It must never panic; a manifest that opens must reopen to the same
// state (the torn tail it cut stays cut), take a new upload on top if its
// protocol allows one, and survive a compaction unchanged.
func FuzzManifest(f *testing.F) {
	good := func(typ RecordType, r string) []byte { return appendRecord(nil, typ, []byte(r)) }
	var log []byte
	log = append(log, good(Prepare, `{"seq":1,"objectId":"a","key":"k/a","endOffset":10,"deadline":5}`)...)
	log = append(log, good(Commit, `{"seq":2,"objectId":"a","size":100,"crc":7,"maxTimestamp":5}`)...)
	f.Add([]byte(nil), log, []byte(nil))
	f.Add([]byte(`{"seq":2,"tieredEnd":10}`), log, []byte{0, 0, 0, 9, 1})
	f.Add([]byte(`not json`), []byte(nil), []byte(nil))
	f.Add([]byte(nil), good(Commit, `{"seq":1,"objectId":"x"}`), log[:20])
	f.Add([]byte(nil), append(good(RecordType(99), `{"seq":1}`), log...), []byte(nil))
	f.Fuzz(func(t *testing.T, snapshot, records, tail []byte) {
		fsys := vfs.NewMem()
		require.NoError(t, fsys.MkdirAll(mdir, 0o750))
		if snapshot != nil {
			require.NoError(t, vfs.WriteFile(fsys, filepath.Join(mdir, ManifestSnapshot), snapshot))
		}
		// records is a sequence of [type byte, 2-byte length, payload].
		var data []byte
		for b := records; len(b) >= 3; {
			n := min(int(b[1])<<8|int(b[2]), len(b)-3)
			data = appendRecord(data, RecordType(b[0]), b[3:3+n])
			b = b[3+n:]
		}
		data = append(data, tail...)
		require.NoError(t, vfs.WriteFile(fsys, filepath.Join(mdir, ManifestLog), data))

		m, err := OpenManifest(fsys, mdir, 0)
		if err != nil {
			return // refused with an error: fine, as long as it did not panic
		}
		st := m.State()
		require.NoError(t, m.Close())
		again, err := OpenManifest(fsys, mdir, 0)
		require.NoError(t, err, "a manifest that opened once opens again")
		require.Equal(t, st, again.State())
		require.NoError(t, again.Compact())
		require.Equal(t, st, again.State(), "compaction changes nothing visible")
		end := again.TieredEnd()
		if again.Prepare("fuzz-new", "k/fuzz-new", end, end+1, 1) == nil {
			require.NoError(t, again.Commit("fuzz-new", 1, 1, 1))
			require.Equal(t, end+1, again.TieredEnd())
		}
		require.NoError(t, again.Close())
	})
}
