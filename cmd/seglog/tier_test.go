package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog/internal/s3test"
	"github.com/seglog/seglog/tiering"
)

// The acceptance check of the tiering issue, through the command: after
// seglog tier and local deletion, consume --from earliest returns every
// record with its original offsets; every object passes the format check
// and dumps cleanly; tier ls lists them.
func TestTierCommand(t *testing.T) {
	srv := s3test.Versity(t)
	t.Setenv("AWS_ACCESS_KEY_ID", s3test.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s3test.SecretKey)
	for name, store := range map[string]string{
		"file":      "file://" + filepath.Join(t.TempDir(), "store"),
		"versitygw": srv.URL,
	} {
		t.Run(name, func(t *testing.T) {
			d := filepath.Join(t.TempDir(), "data")
			code, _, errOut := runWithStdin(t, lines(3000), "produce", "--data-dir", d, "--topic", "orders",
				"--config", "segment.bytes=16384", "--key-separator", ":")
			require.Zero(t, code, errOut)
			code, before, errOut := runSeglog(t, "consume", "--data-dir", d, "--topic", "orders", "--from", "earliest")
			require.Zero(t, code, errOut)
			require.Equal(t, 3000, strings.Count(before, "\n"))

			code, out, errOut := runSeglog(t, "tier", "--data-dir", d, "--store", store, "--once",
				"--config", "local.retention.bytes=0", "--config", "tier.block.bytes=4096")
			require.Zero(t, code, errOut)
			require.Contains(t, out, "uploaded and committed")
			require.Contains(t, out, "deleted")

			code, offs, errOut := runSeglog(t, "offsets", "--data-dir", d, "--topic", "orders")
			require.Zero(t, code, errOut)
			var o struct {
				LogStartOffset, LocalLogStartOffset, LogEndOffset int64
			}
			require.NoError(t, json.Unmarshal([]byte(offs), &o))
			require.Zero(t, o.LogStartOffset)
			require.Greater(t, o.LocalLogStartOffset, int64(2000), "the local log holds only the tail")
			require.Equal(t, int64(3000), o.LogEndOffset)

			code, after, errOut := runSeglog(t, "consume", "--data-dir", d, "--topic", "orders", "--from", "earliest")
			require.Zero(t, code, errOut)
			require.Equal(t, before, after, "every record with its original offsets")
			code, mid, errOut := runSeglog(t, "consume", "--data-dir", d, "--topic", "orders", "--from-offset", "1234", "--max-records", "1")
			require.Zero(t, code, errOut)
			require.Contains(t, mid, `"offset":1234`)

			code, ls, errOut := runSeglog(t, "tier", "ls", "--store", store, "--topic", "orders")
			require.Zero(t, code, errOut)
			require.Contains(t, ls, "manifest of orders-0")
			require.Contains(t, ls, "committed")

			// Every object: our reader's full check, and dump without a problem.
			s, err := tiering.OpenStore(context.Background(), store, nil)
			require.NoError(t, err)
			list, err := s.List(context.Background(), "")
			require.NoError(t, err)
			objects := 0
			for _, obj := range list {
				if !strings.HasSuffix(obj.Key, ".seg") {
					continue
				}
				objects++
				b, err := s.GetRange(context.Background(), obj.Key, 0, int(obj.Size))
				require.NoError(t, err)
				_, err = tiering.Verify(obj.Key, b)
				require.NoError(t, err)
				arg := strings.TrimSuffix(store, "/store") + "/store/" + obj.Key
				if name == "versitygw" {
					arg = "s3://" + s3test.Bucket + "/" + obj.Key + "?endpoint=" + srv.Endpoint + "&path-style=true"
				}
				code, dump, errOut := runSeglog(t, "dump", arg)
				require.Zero(t, code, errOut+dump)
				require.Contains(t, dump, "stream object")
			}
			require.Greater(t, objects, 2)
		})
	}
}

func TestTierCommandErrors(t *testing.T) {
	d := filepath.Join(t.TempDir(), "data")
	code, _, errOut := runWithStdin(t, lines(10), "produce", "--data-dir", d, "--topic", "orders")
	require.Zero(t, code, errOut)
	for _, args := range [][]string{
		{"tier", "--data-dir", d},
		{"tier", "--data-dir", d, "--store", "ftp://x/y", "--once"},
		{"tier", "--data-dir", d, "--store", "file:///tmp/x", "--once", "--config", "tier.colour=1"},
		{"tier", "--data-dir", d, "--store", "file:///tmp/x", "--once", "--config", "local.retention.ms=-3"},
		{"tier", "--data-dir", d, "--store", "file:///tmp/x", "--once", "--topic", "missing"},
		{"tier", "--data-dir", d, "--store", "s3://user:secret@bucket/p", "--once"},
	} {
		code, _, errOut := runSeglog(t, args...)
		require.NotZero(t, code, "%v", args)
		require.NotContains(t, errOut, "secret@", "credentials are never printed")
	}
}
