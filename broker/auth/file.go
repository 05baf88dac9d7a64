package auth

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"sync/atomic"

	"github.com/seglog/seglog/vfs"
)

// readJSON reads a security file into v, whose Version field it checks;
// a missing file is false and no error.
func readJSON(fsys vfs.FS, path string, v interface{ version() int }) (bool, error) {
	data, err := vfs.ReadFile(fsys, path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("auth: reading %s: %w", path, err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return false, fmt.Errorf("auth: %s: %w", path, err)
	}
	if v.version() != fileVersion {
		return false, fmt.Errorf("auth: %s: version %d, not %d", path, v.version(), fileVersion)
	}
	return true, nil
}

// writeJSON replaces a security file with v, atomically and durably,
// readable by its owner only.
func writeJSON(fsys vfs.FS, path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err == nil {
		err = vfs.WriteAtomicPerm(fsys, path, append(data, '\n'), 0o600)
	}
	return err
}

// snapshot holds a store's state: readers load it without a lock, and one
// writer at a time makes the next state, saves it durably and only then
// publishes it whole. A reader never waits for a writer's fsync, and never
// sees a state that is not on disk.
type snapshot[T any] struct {
	writeMu sync.Mutex
	cur     atomic.Pointer[T]
}

// load returns the current state; it is never changed.
func (s *snapshot[T]) load() *T { return s.cur.Load() }

// update calls next with the current state under the writer's lock; the
// state next returns (after saving it) is published, unless it returns an
// error or nil.
func (s *snapshot[T]) update(next func(cur *T) (*T, error)) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	n, err := next(s.cur.Load())
	if err == nil && n != nil {
		s.cur.Store(n)
	}
	return err
}
