package tiering

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// FileStore is the embedded object store: a directory. A put writes a
// temporary file, fsyncs it and links it under its key (link(2) refuses an
// existing name, so a key is never overwritten), then fsyncs the
// directory. Multipart uploads keep their parts under .multipart/ until
// they complete.
type FileStore struct {
	dir string
}

var _ ObjectStore = (*FileStore)(nil)

const (
	fileTmp       = ".tmp-"
	multipartDir  = ".multipart"
	multipartMeta = "upload.json"
)

// OpenFileStore opens (creating it) a directory store.
func OpenFileStore(dir string) (*FileStore, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("tiering: file store %q: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o750); err != nil {
		return nil, fmt.Errorf("tiering: file store: %w", err)
	}
	return &FileStore{dir: abs}, nil
}

func (s *FileStore) String() string { return "file://" + s.dir }

// Prefix is "": the directory is the whole store.
func (s *FileStore) Prefix() string { return "" }

// Dir returns the store's directory.
func (s *FileStore) Dir() string { return s.dir }

func (s *FileStore) path(key string) (string, error) {
	clean := filepath.Clean("/" + key)[1:]
	if key == "" || clean != key || strings.HasPrefix(filepath.Base(key), ".") {
		return "", fmt.Errorf("tiering: %q is not a valid key", key)
	}
	return filepath.Join(s.dir, filepath.FromSlash(key)), nil
}

func (s *FileStore) Put(ctx context.Context, key string, body []byte) (ObjectInfo, error) {
	if err := ctx.Err(); err != nil {
		return ObjectInfo{}, err
	}
	p, err := s.path(key)
	if err != nil {
		return ObjectInfo{}, err
	}
	if err := s.publish(p, func(f *os.File) error { _, err := f.Write(body); return err }); err != nil {
		return ObjectInfo{}, fmt.Errorf("tiering: putting %s: %w", key, err)
	}
	return s.Head(ctx, key)
}

// publish writes a temporary file beside p, fsyncs it, links it as p (not
// over an existing one) and fsyncs the directory.
func (s *FileStore) publish(p string, write func(*os.File) error) error {
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, fileTmp)
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	err = write(f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Link(tmp, p); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return ErrExists
		}
		return err
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

type fileUpload struct {
	Key     string    `json:"key"`
	Started time.Time `json:"started"`
}

func (s *FileStore) uploadDir(id string) (string, error) {
	if _, err := hex.DecodeString(id); err != nil || len(id) != 32 {
		return "", fmt.Errorf("%w: multipart upload %q", ErrNotFound, id)
	}
	return filepath.Join(s.dir, multipartDir, id), nil
}

func (s *FileStore) CreateMultipart(ctx context.Context, key string) (string, error) {
	if _, err := s.path(key); err != nil {
		return "", err
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	d := filepath.Join(s.dir, multipartDir, id)
	if err := os.MkdirAll(d, 0o750); err != nil {
		return "", fmt.Errorf("tiering: starting an upload of %s: %w", key, err)
	}
	meta, _ := json.Marshal(fileUpload{Key: key, Started: time.Now().UTC()})
	if err := os.WriteFile(filepath.Join(d, multipartMeta), meta, 0o640); err != nil {
		return "", fmt.Errorf("tiering: starting an upload of %s: %w", key, err)
	}
	return id, nil
}

func (s *FileStore) upload(key, id string) (string, error) {
	d, err := s.uploadDir(id)
	if err != nil {
		return "", err
	}
	meta, err := os.ReadFile(filepath.Join(d, multipartMeta))
	if err != nil {
		return "", fmt.Errorf("%w: multipart upload %s of %s", ErrNotFound, id, key)
	}
	var u fileUpload
	if err := json.Unmarshal(meta, &u); err != nil || u.Key != key {
		return "", fmt.Errorf("%w: multipart upload %s is not of %s", ErrNotFound, id, key)
	}
	return d, nil
}

func (s *FileStore) UploadPart(ctx context.Context, key, id string, n int32, body []byte) (PartInfo, error) {
	if err := ctx.Err(); err != nil {
		return PartInfo{}, err
	}
	d, err := s.upload(key, id)
	if err != nil {
		return PartInfo{}, err
	}
	sum := crcBase64(crc32.Checksum(body, castagnoli))
	part := filepath.Join(d, strconv.Itoa(int(n)))
	// The checksum is kept beside the part: completion checks the list
	// against it and copies the part in the kernel, without reading it.
	if err := errors.Join(os.WriteFile(part, body, 0o640), os.WriteFile(part+".crc", []byte(sum), 0o640)); err != nil {
		return PartInfo{}, fmt.Errorf("tiering: part %d of %s: %w", n, key, err)
	}
	return PartInfo{Number: n, ETag: sum, Checksum: sum}, nil
}

func (s *FileStore) CompleteMultipart(ctx context.Context, key, id string, parts []PartInfo) (ObjectInfo, error) {
	d, err := s.upload(key, id)
	if err != nil {
		return ObjectInfo{}, err
	}
	p, err := s.path(key)
	if err != nil {
		return ObjectInfo{}, err
	}
	err = s.publish(p, func(f *os.File) error {
		for _, part := range parts {
			name := filepath.Join(d, strconv.Itoa(int(part.Number)))
			sum, err := os.ReadFile(name + ".crc")
			if err != nil {
				return fmt.Errorf("%w: part %d", ErrNotFound, part.Number)
			}
			if string(sum) != part.Checksum {
				return fmt.Errorf("%w: part %d holds %s, listed %s", ErrChecksum, part.Number, sum, part.Checksum)
			}
			src, err := os.Open(name)
			if err != nil {
				return fmt.Errorf("%w: part %d", ErrNotFound, part.Number)
			}
			_, err = io.Copy(f, src) // copy_file_range
			src.Close()
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return ObjectInfo{}, fmt.Errorf("tiering: completing %s: %w", key, err)
	}
	if err := os.RemoveAll(d); err != nil {
		return ObjectInfo{}, err
	}
	info, err := s.Head(ctx, key)
	if err != nil {
		return info, err
	}
	info.Checksum, err = compositeChecksum(parts)
	return info, err
}

func (s *FileStore) AbortMultipart(ctx context.Context, key, id string) error {
	d, err := s.upload(key, id)
	if err != nil {
		return err
	}
	return os.RemoveAll(d)
}

func (s *FileStore) ListMultipart(ctx context.Context, prefix string) ([]MultipartUpload, error) {
	ents, err := os.ReadDir(filepath.Join(s.dir, multipartDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []MultipartUpload
	for _, e := range ents {
		meta, err := os.ReadFile(filepath.Join(s.dir, multipartDir, e.Name(), multipartMeta))
		if err != nil {
			continue // being created or aborted
		}
		var u fileUpload
		if json.Unmarshal(meta, &u) == nil && strings.HasPrefix(u.Key, prefix) {
			out = append(out, MultipartUpload{Key: u.Key, UploadID: e.Name(), Started: u.Started})
		}
	}
	return out, nil
}

func (s *FileStore) GetRange(ctx context.Context, key string, off int64, n int) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p, err := s.path(key)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if off < 0 || n < 0 {
		return nil, fmt.Errorf("tiering: range [%d, +%d) of %s", off, n, key)
	}
	b := make([]byte, n)
	if _, err := f.ReadAt(b, off); err != nil {
		if err == io.EOF {
			return nil, fmt.Errorf("tiering: range [%d, %d) is past the end of %s: %w", off, off+int64(n), key, io.ErrUnexpectedEOF)
		}
		return nil, err
	}
	return b, nil
}

func (s *FileStore) Head(ctx context.Context, key string) (ObjectInfo, error) {
	p, err := s.path(key)
	if err != nil {
		return ObjectInfo{}, err
	}
	st, err := os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return ObjectInfo{}, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	if err != nil {
		return ObjectInfo{}, err
	}
	return ObjectInfo{Key: key, Size: st.Size(), Modified: st.ModTime()}, nil
}

func (s *FileStore) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	var out []ObjectInfo
	err := filepath.WalkDir(s.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasPrefix(d.Name(), ".") && p != s.dir {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil // a temporary file
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(s.dir, p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if !strings.HasPrefix(key, prefix) {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil // deleted meanwhile
		}
		out = append(out, ObjectInfo{Key: key, Size: info.Size(), Modified: info.ModTime()})
		return nil
	})
	slices.SortFunc(out, func(a, b ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	return out, err
}

func (s *FileStore) Delete(ctx context.Context, key string) error {
	p, err := s.path(key)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
