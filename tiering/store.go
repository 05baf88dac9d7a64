package tiering

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/seglog/seglog"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Errors an ObjectStore returns, matched with errors.Is.
var (
	// ErrNotFound: the key (or the multipart upload) does not exist.
	ErrNotFound = seglog.NewKafkaError("tiering: object not found", 56)
	// ErrExists: a put found the key taken (If-None-Match: *). Keys are
	// written once and never overwritten.
	ErrExists = seglog.NewKafkaError("tiering: object already exists", -1)
	// ErrChecksum: the store refused a body whose checksum did not match,
	// or what it stored is not what was sent.
	ErrChecksum = seglog.NewKafkaError("tiering: checksum mismatch", 56)
)

// Part sizes of an upload (docs/tiering.md §1): objects up to
// SinglePutMax go in one PUT, larger ones as multipart with PartSize parts.
const (
	SinglePutMax = 32 << 20
	PartSize     = 16 << 20
)

// ObjectInfo describes a stored object. Checksum is the store's CRC-32C of
// the object: base64 of the 4 big-endian bytes for a single put, and
// "base64-N" (the CRC-32C of the parts' checksums, N parts) for a
// multipart one, as S3 reports them. It is empty when the store does not
// say.
type ObjectInfo struct {
	Key      string
	Size     int64
	Checksum string
	Modified time.Time
}

// PartInfo is an uploaded part of a multipart upload.
type PartInfo struct {
	Number   int32
	ETag     string
	Checksum string // base64 CRC-32C of the part
}

// MultipartUpload is an upload that was started and neither completed nor
// aborted.
type MultipartUpload struct {
	Key      string
	UploadID string
	Started  time.Time
}

// ObjectStore is what tiering needs from an object store. Keys are
// relative to the store's prefix. Every put carries the body's CRC-32C so
// the store refuses a torn body, and never overwrites a key (ErrExists).
// GetRange returns exactly n bytes from off or an error.
type ObjectStore interface {
	Put(ctx context.Context, key string, body []byte) (ObjectInfo, error)
	CreateMultipart(ctx context.Context, key string) (uploadID string, err error)
	UploadPart(ctx context.Context, key, uploadID string, number int32, body []byte) (PartInfo, error)
	CompleteMultipart(ctx context.Context, key, uploadID string, parts []PartInfo) (ObjectInfo, error)
	AbortMultipart(ctx context.Context, key, uploadID string) error
	ListMultipart(ctx context.Context, prefix string) ([]MultipartUpload, error)
	GetRange(ctx context.Context, key string, off int64, n int) ([]byte, error)
	Head(ctx context.Context, key string) (ObjectInfo, error)
	List(ctx context.Context, prefix string) ([]ObjectInfo, error)
	Delete(ctx context.Context, key string) error
	// Prefix is the prefix the store's URL names ("" for none): tiering
	// builds its keys under it (docs/tiering.md §1).
	Prefix() string
	// String names the store for logs: never with credentials.
	String() string
}

// OpenStore opens a store by URL: file:///abs/dir (or file://rel/dir) or
// s3://bucket/prefix?endpoint=URL&region=R&path-style=true.
func OpenStore(ctx context.Context, rawURL string, s3opts *S3Options) (ObjectStore, error) {
	if err := CheckStoreURL(rawURL); err != nil {
		return nil, err
	}
	u, _ := url.Parse(rawURL)
	switch u.Scheme {
	case "file":
		dir := u.Host + u.Path
		fs, err := OpenFileStore(dir)
		if err != nil {
			return nil, err // a nil interface, not a typed nil
		}
		return fs, nil
	case "s3":
		s, err := OpenS3Store(ctx, u, s3opts)
		if err != nil {
			return nil, err
		}
		return s, nil
	default:
		return nil, fmt.Errorf("tiering: store URL %q: scheme must be file or s3", RedactURL(rawURL))
	}
}

// ErrBadStoreURL is the cause of a store URL that cannot name a store: no
// retry makes it work.
var ErrBadStoreURL = seglog.NewKafkaError("tiering: bad store URL", -1)

// CheckStoreURL checks a store URL without opening the store: file:///dir
// or s3://bucket/prefix with known parameters, and no credentials in it.
// Its errors wrap ErrBadStoreURL.
func CheckStoreURL(rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("%w: %q is not a URL", ErrBadStoreURL, RedactURL(rawURL))
	}
	if carriesSecret(rawURL) {
		return fmt.Errorf("%w: %s carries credentials, which are never taken from a URL: use the AWS chain (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY) or a secret file",
			ErrBadStoreURL, RedactURL(rawURL))
	}
	switch u.Scheme {
	case "file":
		if u.Host+u.Path == "" {
			return fmt.Errorf("%w: %q names no directory", ErrBadStoreURL, RedactURL(rawURL))
		}
		return nil
	case "s3":
		return checkS3URL(u)
	}
	return fmt.Errorf("%w: %q: the scheme must be file or s3", ErrBadStoreURL, RedactURL(rawURL))
}

// secretParam matches the query parameters whose values are secrets.
var secretParam = regexp.MustCompile(`(?i)secret|password|passwd|token|signature|credential`)

// userinfo matches the credentials part of a URL (scheme://user:pass@).
var userinfo = regexp.MustCompile(`(//)[^/@?#]*@`)

// RedactURL returns rawURL fit to print or log: the userinfo of the URL
// and of an endpoint parameter, and every secret-looking query parameter,
// replaced with REDACTED. Nothing that calls itself a secret survives it,
// even a URL that does not parse.
func RedactURL(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return userinfo.ReplaceAllString(rawURL, "${1}REDACTED@")
	}
	if u.User != nil {
		u.User = url.User("REDACTED")
	}
	q := u.Query()
	for k, vs := range q {
		for i, v := range vs {
			switch {
			case secretParam.MatchString(k):
				vs[i] = "REDACTED"
			case strings.Contains(v, "@"):
				vs[i] = RedactURL(v)
			}
		}
		q[k] = vs
	}
	if len(q) > 0 {
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// carriesSecret reports whether a store URL holds a credential: userinfo,
// in it or in its endpoint, or a secret-looking parameter.
func carriesSecret(rawURL string) bool {
	return RedactURL(rawURL) != rawURL && strings.Contains(RedactURL(rawURL), "REDACTED")
}

// AbsoluteStoreURL returns rawURL with a file:// store's directory made
// absolute (file://store2 means ./store2 now; saved as written it would
// mean another directory for every later working directory). Other URLs
// are returned as they are.
func AbsoluteStoreURL(rawURL string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", fmt.Errorf("tiering: store URL: %w", err)
	}
	if u.Scheme != "file" {
		return rawURL, nil
	}
	dir := u.Host + u.Path
	if dir == "" {
		return "", fmt.Errorf("tiering: store URL %q names no directory", rawURL)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("tiering: store URL %q: %w", rawURL, err)
	}
	return (&url.URL{Scheme: "file", Path: abs, RawQuery: u.RawQuery}).String(), nil
}

// crcBase64 is the CRC-32C of b as S3 writes it: base64 of 4 big-endian
// bytes.
func crcBase64(sum uint32) string {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], sum)
	return base64.StdEncoding.EncodeToString(b[:])
}

// compositeChecksum is S3's checksum of a multipart object: the CRC-32C of
// the concatenated binary part checksums, then "-N".
func compositeChecksum(parts []PartInfo) (string, error) {
	var all []byte
	for _, p := range parts {
		b, err := base64.StdEncoding.DecodeString(p.Checksum)
		if err != nil || len(b) != 4 {
			return "", fmt.Errorf("tiering: part %d checksum %q is not a base64 CRC-32C", p.Number, p.Checksum)
		}
		all = append(all, b...)
	}
	return fmt.Sprintf("%s-%d", crcBase64(crc32.Checksum(all, castagnoli)), len(parts)), nil
}

// Upload puts body under key: one PUT up to SinglePutMax, multipart with
// PartSize parts above it (a failed multipart upload is aborted). It
// checks the checksum the store reports against the one computed here and
// returns the object's info.
func Upload(ctx context.Context, s ObjectStore, key string, body io.Reader, size int64) (ObjectInfo, error) {
	if size <= SinglePutMax {
		buf := make([]byte, size)
		if _, err := io.ReadFull(body, buf); err != nil {
			return ObjectInfo{}, fmt.Errorf("tiering: reading the body of %s: %w", key, err)
		}
		info, err := s.Put(ctx, key, buf)
		if err != nil {
			return ObjectInfo{}, err
		}
		return info, checkStored(info, key, size, crcBase64(crc32.Checksum(buf, castagnoli)))
	}
	id, err := s.CreateMultipart(ctx, key)
	if err != nil {
		return ObjectInfo{}, err
	}
	info, err := uploadParts(ctx, s, key, id, body, size)
	if err != nil {
		// A fresh context: the caller's may be what ended the upload.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if aerr := s.AbortMultipart(actx, key, id); aerr != nil && !errors.Is(aerr, ErrNotFound) {
			err = errors.Join(err, fmt.Errorf("tiering: aborting the multipart upload of %s: %w", key, aerr))
		}
		return ObjectInfo{}, err
	}
	return info, nil
}

func uploadParts(ctx context.Context, s ObjectStore, key, id string, body io.Reader, size int64) (ObjectInfo, error) {
	var parts []PartInfo
	buf := make([]byte, PartSize)
	for left, n := size, int32(1); left > 0; n++ {
		b := buf[:min(left, PartSize)]
		if _, err := io.ReadFull(body, b); err != nil {
			return ObjectInfo{}, fmt.Errorf("tiering: reading part %d of %s: %w", n, key, err)
		}
		p, err := s.UploadPart(ctx, key, id, n, b)
		if err != nil {
			return ObjectInfo{}, err
		}
		if want := crcBase64(crc32.Checksum(b, castagnoli)); p.Checksum != "" && p.Checksum != want {
			return ObjectInfo{}, fmt.Errorf("%w: part %d of %s stored with CRC-32C %s, sent %s", ErrChecksum, n, key, p.Checksum, want)
		}
		if p.Checksum == "" {
			p.Checksum = crcBase64(crc32.Checksum(b, castagnoli))
		}
		parts = append(parts, p)
		left -= int64(len(b))
	}
	want, err := compositeChecksum(parts)
	if err != nil {
		return ObjectInfo{}, err
	}
	info, err := s.CompleteMultipart(ctx, key, id, parts)
	if err != nil {
		return ObjectInfo{}, err
	}
	return info, checkStored(info, key, size, want)
}

// checkStored compares what the store says it holds with what was sent.
func checkStored(info ObjectInfo, key string, size int64, checksum string) error {
	if info.Size != size {
		return fmt.Errorf("%w: %s stored with %d bytes, sent %d", ErrChecksum, key, info.Size, size)
	}
	if info.Checksum != "" && info.Checksum != checksum {
		return fmt.Errorf("%w: %s stored with CRC-32C %s, sent %s", ErrChecksum, key, info.Checksum, checksum)
	}
	return nil
}

// readAll is GetRange of a whole object whose size is known.
func readAll(ctx context.Context, s ObjectStore, key string, size int64) ([]byte, error) {
	if size == 0 {
		return nil, nil
	}
	return s.GetRange(ctx, key, 0, int(size))
}

func crc32Of(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }
