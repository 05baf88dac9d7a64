package auth

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"

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
