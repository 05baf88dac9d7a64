package auth

import (
	"encoding/json"
	"fmt"

	"github.com/seglog/seglog/internal/docstore"
	"github.com/seglog/seglog/vfs"
)

// Store is where one of the security documents (the credentials, the
// ACLs, the quotas) lives: a file of the data directory (FileStore), or,
// in a cluster, a key in etcd every broker shares.
type Store = docstore.Store

// FileStore is a security document in a file, readable by its owner only.
func FileStore(fsys vfs.FS, path string) Store { return docstore.File(fsys, path, 0o600) }

// decodeJSON decodes a security document into v and checks its version;
// nil data (no document) is false and no error.
func decodeJSON(data []byte, v interface{ version() int }) (bool, error) {
	if data == nil {
		return false, nil
	}
	if err := json.Unmarshal(data, v); err != nil {
		return false, err
	}
	if v.version() != fileVersion {
		return false, fmt.Errorf("version %d, not %d", v.version(), fileVersion)
	}
	return true, nil
}

// encodeJSON is a security document's bytes.
func encodeJSON(v any) ([]byte, error) {
	data, err := json.MarshalIndent(v, "", "  ")
	return append(data, '\n'), err
}
