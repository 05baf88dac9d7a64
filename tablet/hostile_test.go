package tablet_test

import (
	"encoding/binary"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/recovery"
	"github.com/seglog/seglog/tablet"
	"github.com/seglog/seglog/vfs"
)

// Topic names that would reach outside the data directory, or that Kafka
// refuses, are refused before any path is built: nothing appears on disk.
func TestHostileTopicNamesRefused(t *testing.T) {
	d := filepath.Join(t.TempDir(), "data")
	m, err := tablet.OpenManager(vfs.OS, d, quietManager())
	require.NoError(t, err)
	defer m.Close()
	before, err := os.ReadDir(d)
	require.NoError(t, err)
	outside, err := os.ReadDir(filepath.Dir(d))
	require.NoError(t, err)
	for _, topic := range []string{"", ".", "..", "../escape", "a/b", "/abs", `a\b`, "a\x00b", "nul\x00",
		strings.Repeat("t", 250), "spaces here", "ümlaut", "a:b", "-0\n"} {
		_, err := m.Create(checkpoint.TopicPartition{Topic: topic}, nil)
		require.Error(t, err, "%q", topic)
		_, err = m.GetOrCreate(checkpoint.TopicPartition{Topic: topic}, nil)
		require.Error(t, err, "%q", topic)
	}
	_, err = m.Create(checkpoint.TopicPartition{Topic: "ok", Partition: -1}, nil)
	require.Error(t, err, "a negative partition")
	after, err := os.ReadDir(d)
	require.NoError(t, err)
	require.Equal(t, names(before), names(after), "nothing was created in the data directory")
	outsideAfter, err := os.ReadDir(filepath.Dir(d))
	require.NoError(t, err)
	require.Equal(t, names(outside), names(outsideAfter), "nothing was created beside it")
	_, err = m.Create(checkpoint.TopicPartition{Topic: strings.Repeat("t", 249)}, nil)
	require.NoError(t, err, "249 characters is Kafka's limit")
}

func names(entries []os.DirEntry) []string {
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// Every file the engine creates is 0640 and every directory 0750 (under a
// 022 umask), or what ManagerOptions asks.
func TestFileModes(t *testing.T) {
	old := unix.Umask(0o022)
	defer unix.Umask(old)
	for _, c := range []struct {
		file, dir os.FileMode
	}{{0, 0}, {0o600, 0o700}} {
		d := filepath.Join(t.TempDir(), "data")
		opts := quietManager()
		opts.FileMode, opts.DirMode = c.file, c.dir
		m, err := tablet.OpenManager(vfs.OS, d, opts)
		require.NoError(t, err)
		cfg := smallConfig()
		tab, err := m.Create(crashTP, &cfg)
		require.NoError(t, err)
		for i := range 40 {
			_, err := tab.AppendRecords([]record.Record{{Value: []byte(strings.Repeat("v", 300+i))}}, record.None,
				tablet.AppendOptions{})
			require.NoError(t, err)
		}
		require.NoError(t, m.Close())
		wantFile, wantDir := os.FileMode(0o640), os.FileMode(0o750)
		if c.file != 0 {
			wantFile, wantDir = c.file, c.dir
		}
		n := 0
		require.NoError(t, filepath.WalkDir(d, func(path string, e fs.DirEntry, err error) error {
			require.NoError(t, err)
			info, err := e.Info()
			require.NoError(t, err)
			want := wantFile
			if e.IsDir() {
				want = wantDir
			}
			require.Equal(t, want, info.Mode().Perm(), path)
			n++
			return nil
		}))
		require.Greater(t, n, 10)
	}
	opts := quietManager()
	opts.FileMode = 0o044
	_, err := tablet.OpenManager(vfs.OS, t.TempDir(), opts)
	require.ErrorIs(t, err, tablet.ErrConfig, "a mode the owner cannot write")
}

// A batch claiming far more than it holds — a huge length, a huge record
// count, a record claiming a huge key — is refused without the engine
// allocating more than a small multiple of the bytes it was given.
func TestHugeClaimsDoNotAllocate(t *testing.T) {
	mem := vfs.NewMem()
	m, err := tablet.OpenManager(mem, "/data", quietManager())
	require.NoError(t, err)
	defer m.Close()
	cfg := smallConfig()
	tab, err := m.Create(crashTP, &cfg)
	require.NoError(t, err)
	b := record.NewBuilder(record.None)
	require.NoError(t, b.Append(record.Record{Key: []byte("k"), Value: []byte("a small record")}))
	built, err := b.Build()
	require.NoError(t, err)
	valid := built.Bytes()

	withCRC := func(data []byte) []byte { // a claim that passes the CRC check, so that parsing goes on
		binary.BigEndian.PutUint32(data[17:], crc32.Checksum(data[21:], crc32.MakeTable(crc32.Castagnoli)))
		return data
	}
	hugeCount := withCRC(append([]byte(nil), valid...))
	binary.BigEndian.PutUint32(hugeCount[57:], 0x7fffffff) // records count
	hugeLength := append([]byte(nil), valid...)
	binary.BigEndian.PutUint32(hugeLength[8:], 0x7ffffff0) // batch length
	hugeKey := append([]byte(nil), valid...)
	// The first record: length, attributes, timestamp delta, offset delta,
	// then the key length varint at 65, made a claim of about 2^27 bytes.
	copy(hugeKey[65:], []byte{0xfe, 0xff, 0xff, 0x7f})
	hugeKey = withCRC(hugeKey)

	for name, data := range map[string][]byte{"record count": hugeCount, "batch length": hugeLength, "key length": hugeKey} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err := tab.Append(data, tablet.AppendOptions{})
		runtime.ReadMemStats(&after)
		require.Error(t, err, name)
		require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "%s: allocated %d bytes for a %d-byte batch",
			name, after.TotalAlloc-before.TotalAlloc, len(data))
	}
	_, err = tab.Append(valid, tablet.AppendOptions{})
	require.NoError(t, err, "the tablet still takes a good batch")
}

// FuzzAppend appends any bytes as a producer batch (and, when accepted,
// reads them back): never a panic, and after a clean close the directory
// passes verify.
func FuzzAppend(f *testing.F) {
	for _, seed := range fuzzAppendSeeds(f) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		mem := vfs.NewMem()
		m, err := tablet.OpenManager(mem, "/data", quietManager())
		require.NoError(t, err)
		cfg := smallConfig()
		tab, err := m.Create(crashTP, &cfg)
		require.NoError(t, err)
		for _, origin := range []record.Origin{record.OriginClient, record.OriginCoordinator} {
			if _, err := tab.Append(data, tablet.AppendOptions{Origin: origin}); err == nil {
				require.NoError(t, tab.Records(0, tablet.ReadCommitted, func(record.Batch, *record.Record) bool { return true }))
			}
		}
		require.NoError(t, m.Close())
		r, err := recovery.Verify(mem, "/data", recovery.VerifyOptions{})
		require.NoError(t, err)
		require.True(t, r.OK(), "%s", problems(r))
	})
}

func fuzzAppendSeeds(f *testing.F) [][]byte {
	var out [][]byte
	add := func(b *record.Builder, recs ...record.Record) {
		for _, r := range recs {
			require.NoError(f, b.Append(r))
		}
		built, err := b.Build()
		require.NoError(f, err)
		out = append(out, built.Bytes())
	}
	add(record.NewBuilder(record.None), record.Record{Key: []byte("k"), Value: []byte("v")})
	idem := record.NewBuilder(record.LZ4)
	idem.SetProducer(7, 0, 0)
	add(idem, record.Record{Value: []byte("idempotent")}, record.Record{Value: []byte("two")})
	txn := record.NewBuilder(record.Zstd)
	txn.SetProducer(8, 1, 0)
	txn.SetTransactional(true)
	add(txn, record.Record{Value: []byte("in a transaction")})
	marker, err := record.EndTxnMarker{Type: record.ControlAbort, ProducerID: 8, ProducerEpoch: 1}.AppendTo(nil)
	require.NoError(f, err)
	return append(out, marker, []byte{}, make([]byte, 61))
}
