package tiering

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog/internal/s3test"
)

// stores returns one of each store the package has, each empty: the
// directory store, gofakes3 in process and versitygw on loopback.
func stores(t *testing.T) map[string]ObjectStore {
	t.Helper()
	ctx := context.Background()
	out := map[string]ObjectStore{}
	fs, err := OpenFileStore(t.TempDir())
	require.NoError(t, err)
	out["file"] = fs
	creds := &S3Options{AccessKey: s3test.AccessKey, SecretKey: s3test.SecretKey}
	for name, srv := range map[string]s3test.Server{"gofakes3": s3test.Fake(t), "versitygw": s3test.Versity(t)} {
		s, err := OpenStore(ctx, srv.URL, creds)
		require.NoError(t, err)
		out[name] = s
	}
	return out
}

func randomBytes(seed uint64, n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, seed))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func TestObjectStores(t *testing.T) {
	ctx := context.Background()
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			body := randomBytes(1, 100_000)
			info, err := Upload(ctx, s, "ab/x/t-0/one.seg", bytes.NewReader(body), int64(len(body)))
			require.NoError(t, err)
			require.Equal(t, int64(len(body)), info.Size)

			_, err = s.Put(ctx, "ab/x/t-0/one.seg", []byte("other"))
			require.ErrorIs(t, err, ErrExists, "a key is never overwritten")

			got, err := s.GetRange(ctx, "ab/x/t-0/one.seg", 0, len(body))
			require.NoError(t, err)
			require.Equal(t, body, got)
			got, err = s.GetRange(ctx, "ab/x/t-0/one.seg", 99_000, 1000)
			require.NoError(t, err)
			require.Equal(t, body[99_000:], got)

			h, err := s.Head(ctx, "ab/x/t-0/one.seg")
			require.NoError(t, err)
			require.Equal(t, int64(len(body)), h.Size)

			_, err = s.Head(ctx, "ab/x/t-0/missing.seg")
			require.ErrorIs(t, err, ErrNotFound)
			_, err = s.GetRange(ctx, "ab/x/t-0/missing.seg", 0, 10)
			require.ErrorIs(t, err, ErrNotFound)
			require.NoError(t, s.Delete(ctx, "ab/x/t-0/missing.seg"), "deleting a missing key is not an error")

			_, err = s.Put(ctx, "ab/x/t-1/two.seg", []byte("two"))
			require.NoError(t, err)
			_, err = s.Put(ctx, "cd/x/t-0/three.seg", []byte("three"))
			require.NoError(t, err)
			list, err := s.List(ctx, "ab/x/")
			require.NoError(t, err)
			var keys []string
			for _, o := range list {
				keys = append(keys, o.Key)
			}
			require.Equal(t, []string{"ab/x/t-0/one.seg", "ab/x/t-1/two.seg"}, keys)

			require.NoError(t, s.Delete(ctx, "ab/x/t-1/two.seg"))
			_, err = s.Head(ctx, "ab/x/t-1/two.seg")
			require.ErrorIs(t, err, ErrNotFound)
		})
	}
}

func TestMultipartUpload(t *testing.T) {
	ctx := context.Background()
	body := randomBytes(2, SinglePutMax+PartSize/2+3) // three parts
	for name, s := range stores(t) {
		t.Run(name, func(t *testing.T) {
			info, err := Upload(ctx, s, "m/big.seg", bytes.NewReader(body), int64(len(body)))
			require.NoError(t, err)
			require.Equal(t, int64(len(body)), info.Size)
			got, err := s.GetRange(ctx, "m/big.seg", int64(len(body))-PartSize-10, PartSize+10)
			require.NoError(t, err)
			require.True(t, bytes.Equal(body[len(body)-PartSize-10:], got))
			ups, err := s.ListMultipart(ctx, "m/")
			require.NoError(t, err)
			require.Empty(t, ups, "a completed upload is not listed")

			// An abandoned upload is listed until it is aborted.
			id, err := s.CreateMultipart(ctx, "m/abandoned.seg")
			require.NoError(t, err)
			_, err = s.UploadPart(ctx, "m/abandoned.seg", id, 1, body[:PartSize])
			require.NoError(t, err)
			ups, err = s.ListMultipart(ctx, "m/")
			require.NoError(t, err)
			require.Len(t, ups, 1)
			require.Equal(t, "m/abandoned.seg", ups[0].Key)
			require.Equal(t, id, ups[0].UploadID)
			require.NoError(t, s.AbortMultipart(ctx, "m/abandoned.seg", id))
			ups, err = s.ListMultipart(ctx, "m/")
			require.NoError(t, err)
			require.Empty(t, ups)
			_, err = s.Head(ctx, "m/abandoned.seg")
			require.ErrorIs(t, err, ErrNotFound)

			// A multipart upload does not overwrite a key either.
			// (gofakes3 ignores If-None-Match on completion; keys are never
			// reused, so nothing relies on it.)
			_, err = Upload(ctx, s, "m/big.seg", bytes.NewReader(body), int64(len(body)))
			if name != "gofakes3" {
				require.ErrorIs(t, err, ErrExists)
			}
			ups, err = s.ListMultipart(ctx, "m/")
			require.NoError(t, err)
			require.Empty(t, ups, "a failed upload is aborted")
		})
	}
}

func TestOpenStoreURLs(t *testing.T) {
	ctx := context.Background()
	for _, bad := range []string{"ftp://x/y", "file://", "s3:///prefix", "s3://b/p?colour=red", "s3://b/p?path-style=maybe", "%zz"} {
		_, err := OpenStore(ctx, bad, nil)
		require.Error(t, err, bad)
	}
	s, err := OpenStore(ctx, "s3://bucket/pre/fix?endpoint=http://127.0.0.1:1&region=eu-west-1&path-style=true",
		&S3Options{AccessKey: "AKIDSECRETISH", SecretKey: "very-secret"})
	require.NoError(t, err)
	require.Equal(t, "s3://bucket/pre/fix at http://127.0.0.1:1", s.String())
	require.NotContains(t, s.String(), "very-secret")
}

func s3testFake(t *testing.T) s3test.Server    { return s3test.Fake(t) }
func s3testVersity(t *testing.T) s3test.Server { return s3test.Versity(t) }

func s3Store(t *testing.T, srv s3test.Server) ObjectStore {
	s, err := OpenStore(context.Background(), srv.URL, &S3Options{AccessKey: s3test.AccessKey, SecretKey: s3test.SecretKey})
	require.NoError(t, err)
	return s
}

func removeAll(dir string) error { return os.RemoveAll(dir) }

// No secret survives RedactURL: userinfo (of the URL and of its endpoint)
// and secret-looking parameters; what is not secret stays readable.
func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"s3://KEY:SECRET@bucket/p":                                     "s3://REDACTED@bucket/p",
		"s3://bucket/p?endpoint=http://KEY:SECRET@127.0.0.1:9000":      "s3://bucket/p?endpoint=http%3A%2F%2FREDACTED%40127.0.0.1%3A9000",
		"s3://bucket/p?region=eu-west-1&X-Amz-Signature=abc&token=xyz": "s3://bucket/p?X-Amz-Signature=REDACTED&region=eu-west-1&token=REDACTED",
		"file:///var/store":                                            "file:///var/store",
		"s3://bucket/p?endpoint=http://127.0.0.1:9000&path-style=true": "s3://bucket/p?endpoint=http%3A%2F%2F127.0.0.1%3A9000&path-style=true",
		"s3://KEY:SEC%zz@bucket":                                       "s3://REDACTED@bucket",
	} {
		got := RedactURL(in)
		require.Equal(t, want, got, in)
		require.NotContains(t, got, "SECRET")
		require.NotContains(t, got, "abc")
		require.NotContains(t, got, "xyz")
	}
	for raw, secret := range map[string]bool{
		"s3://KEY:SECRET@bucket/p":                                true,
		"s3://bucket/p?endpoint=http://KEY:SECRET@127.0.0.1:9000": true,
		"s3://bucket/p?secret=1":                                  true,
		"s3://bucket/p?endpoint=http://127.0.0.1:9000":            false,
		"file:///var/store":                                       false,
	} {
		require.Equal(t, secret, carriesSecret(raw), raw)
	}
	for endpoint, aws := range map[string]bool{"": true, "https://s3.eu-west-1.amazonaws.com": true,
		"http://127.0.0.1:9000": false, "https://amazonaws.com.evil.example": false} {
		require.Equal(t, aws, awsEndpoint(endpoint), endpoint)
	}
}

// A store URL with a credential anywhere is never saved, and the refusal
// does not print it.
func TestSaveStoreURLRefusesSecrets(t *testing.T) {
	dir := t.TempDir()
	for _, raw := range []string{"s3://KEY:SECRET@bucket/p", "s3://bucket/p?endpoint=http://KEY:SECRET@127.0.0.1:9000",
		"s3://bucket/p?session-token=SECRET"} {
		err := SaveStoreURL(nil, dir, raw)
		require.Error(t, err, raw)
		require.NotContains(t, err.Error(), "SECRET")
		_, ok, err := StoreURL(nil, dir)
		require.NoError(t, err)
		require.False(t, ok, "nothing saved for %s", raw)
	}
}
