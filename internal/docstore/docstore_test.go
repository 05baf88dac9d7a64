package docstore

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog/vfs"
)

// shared is a document several Docs share, each write moving its
// revision, as etcd's key does: what two brokers' Docs see.
type shared struct {
	mu   sync.Mutex
	data []byte
	rev  int64
}

func (s *shared) Load() ([]byte, int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.data, s.rev, nil
}

func (s *shared) Save(data []byte, rev int64) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rev != s.rev {
		return 0, ErrConflict
	}
	s.data, s.rev = data, s.rev+1
	return s.rev, nil
}

func (s *shared) Rev() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rev
}

func (s *shared) String() string { return "the shared document" }

func decodeList(data []byte) (*[]string, error) {
	l := []string{}
	if data == nil {
		return &l, nil
	}
	return &l, json.Unmarshal(data, &l)
}

// add is an Update's change: the list with v added.
func add(v string) func(cur *[]string) (*[]string, []byte, error) {
	return func(cur *[]string) (*[]string, []byte, error) {
		next := append(slices.Clone(*cur), v)
		data, err := json.Marshal(next)
		return &next, data, err
	}
}

func TestFileKeepsTheDocument(t *testing.T) {
	path := filepath.Join(t.TempDir(), "doc")
	d, err := Open(File(vfs.OS, path, 0o600), decodeList)
	require.NoError(t, err)
	require.Empty(t, *d.Load(), "no file: the empty state")
	require.NoError(t, d.Update(add("a")))
	require.NoError(t, d.Update(add("b")))
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())

	again, err := Open(File(vfs.OS, path, 0o600), decodeList)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, *again.Load())

	require.NoError(t, os.WriteFile(path, []byte("{not json"), 0o600))
	_, err = Open(File(vfs.OS, path, 0o600), decodeList)
	require.ErrorContains(t, err, path, "a bad file is refused, named")
}

// Two writers of one document (two brokers): a change made over a stale
// state is refused by revision and made again over the newer document, so
// neither change is lost; a reader sees the other's change as soon as the
// revision moved.
func TestWritersOfOneDocumentLoseNothing(t *testing.T) {
	s := &shared{}
	a, err := Open[[]string](s, decodeList)
	require.NoError(t, err)
	b, err := Open[[]string](s, decodeList)
	require.NoError(t, err)

	require.NoError(t, a.Update(add("from a")))
	require.Equal(t, []string{"from a"}, *b.Load(), "b reads a's change")
	require.NoError(t, b.Update(add("from b")))
	require.NoError(t, a.Update(add("again a"))) // (a's revision is stale: made again)
	require.Equal(t, []string{"from a", "from b", "again a"}, *a.Load())
	require.Equal(t, []string{"from a", "from b", "again a"}, *b.Load())

	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			d := a
			if i%2 == 1 {
				d = b
			}
			require.NoError(t, d.Update(add(string(rune('A'+i)))))
		})
	}
	wg.Wait()
	require.Len(t, *a.Load(), 23)
	require.ElementsMatch(t, *a.Load(), *b.Load())
}

// A document that does not decode keeps the state before it: reads
// answer from that state, Refresh reports the document once, and the next
// change replaces it.
func TestBadDocumentKeepsTheState(t *testing.T) {
	s := &shared{}
	d, err := Open[[]string](s, decodeList)
	require.NoError(t, err)
	require.NoError(t, d.Update(add("a")))
	s.mu.Lock()
	s.data, s.rev = []byte("{garbage"), s.rev+1
	s.mu.Unlock()

	require.Equal(t, []string{"a"}, *d.Load())
	_, err = d.Refresh()
	require.ErrorContains(t, err, "the shared document at revision 2")
	_, err = d.Refresh()
	require.NoError(t, err, "reported once")
	require.NoError(t, d.Update(add("b")))
	require.Equal(t, []string{"a", "b"}, *d.Load())
	data, _, _ := s.Load()
	require.JSONEq(t, `["a","b"]`, string(data))
}
