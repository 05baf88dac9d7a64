package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/internal/s3test"
	"github.com/seglog/seglog/tablet"
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
			produceLines(t, d, "orders")
			code, before, errOut := runSeglog(t, "consume", "--data-dir", d, "--topic", "orders", "--from", "earliest")
			require.Zero(t, code, errOut)
			require.Equal(t, 3000, strings.Count(before, "\n"))

			code, out, errOut := runSeglog(t, "tier", "--data-dir", d, "--store", store, "--once", "--config", "remote.storage.enable=true",
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

// produceLines produces 3000 "key:value" lines to topic in d, in segments
// of 16 KiB.
func produceLines(t *testing.T, d, topic string) {
	t.Helper()
	code, _, errOut := runWithStdin(t, lines(3000), "produce", "--data-dir", d, "--topic", topic,
		"--config", "segment.bytes=16384", "--key-separator", ":")
	require.Zero(t, code, errOut)
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

// TestKillTier runs `seglog tier --once` as a child process and kills it
// with SIGKILL after a random number of committed objects (0: at once,
// while it opens), again and again, with more records produced between
// lives. After each kill the directory is opened again by `consume`
// (which attaches the tier: a restart) and every record produced so far
// is there with its offset; the last life runs to the end, after which
// the store holds exactly the visible objects and the manifest nothing
// prepared or aborted.
func TestKillTier(t *testing.T) {
	t.Parallel()
	k := newKiller(t)
	store := "file://" + filepath.Join(t.TempDir(), "store")
	n := kills(t)
	produced := 0
	for life := 0; life <= n; life++ {
		lines := 200 + k.rng.IntN(1500)
		var in strings.Builder
		for i := range lines {
			fmt.Fprintln(&in, produceLine(life, i))
		}
		code, _, errOut := runWithStdin(t, in.String(), "produce", "--data-dir", k.dir, "--topic", "lines",
			"--key-separator", ":", "--batch-records", "20", "--config", "segment.bytes=16384")
		require.Zero(t, code, errOut)
		produced += lines
		code, before, errOut := runSeglog(t, "consume", "--data-dir", k.dir, "--topic", "lines", "--from", "earliest")
		require.Zero(t, code, errOut)
		require.Equal(t, produced, strings.Count(before, "\n"))

		args := []string{"tier", "--data-dir", k.dir, "--store", store, "--once", "--config", "remote.storage.enable=true",
			"--config", "local.retention.bytes=0", "--config", "tier.block.bytes=4096", "--config", "tier.grace.period.ms=1"}
		argJSON, err := json.Marshal(args)
		require.NoError(t, err)
		cmd := k.child("cli", "SEGLOG_CHILD_ARGS="+string(argJSON))
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		if life == n {
			rest, _ := io.ReadAll(out)
			require.NoError(t, cmd.Wait(), "%s", cmd.Stderr)
			require.Contains(t, string(rest), "tiered to")
		} else {
			// Kill after the k-th committed object (0: at once).
			objects := k.rng.IntN(4)
			sc := bufio.NewScanner(out)
			for seen := 0; seen < objects && sc.Scan(); {
				if strings.Contains(sc.Text(), "uploaded and committed") {
					seen++
				}
			}
			k.kill(cmd)
		}
		code, after, errOut := runSeglog(t, "consume", "--data-dir", k.dir, "--topic", "lines", "--from", "earliest")
		require.Zero(t, code, "seed %d after kill %d: %s", k.seed, k.kills, errOut)
		require.Equal(t, before, after, "seed %d after kill %d: every record with its offset", k.seed, k.kills)
		k.checks++
	}
	code, offs, errOut := runSeglog(t, "offsets", "--data-dir", k.dir, "--topic", "lines")
	require.Zero(t, code, errOut)
	require.Contains(t, offs, `"logStartOffset":0`)
	s, err := tiering.OpenStore(context.Background(), store, nil)
	require.NoError(t, err)
	list, err := s.List(context.Background(), "")
	require.NoError(t, err)
	states, err := tiering.Manifests(context.Background(), s, list, k.dir)
	require.NoError(t, err)
	require.Len(t, states, 1)
	visible := map[string]bool{}
	for _, e := range states[0].State.Objects {
		require.Equal(t, tiering.StateCommitted, e.State, "seed %d: nothing left prepared or aborted", k.seed)
		visible[e.Key] = true
	}
	for _, o := range list {
		if strings.HasSuffix(o.Key, ".seg") {
			require.True(t, visible[o.Key], "seed %d: %s is in the store but not visible", k.seed, o.Key)
		}
	}
	require.NotEmpty(t, visible)
	t.Logf("%d kills, %d restarts checked, %d records, 0 lost; %d objects", k.kills, k.checks, produced, len(visible))
}

// A tiered tablet's log start moves only through its tier: opening it
// without the tier attached — recover, a refused attach to another store,
// the store down — changes no checkpoint and retires no object; reads
// below the local log start say the tier is not attached, local ones work,
// and once the store answers everything is back.
func TestTieredLogStartHoldsWithoutTheTier(t *testing.T) {
	d := filepath.Join(t.TempDir(), "data")
	storeDir := filepath.Join(t.TempDir(), "store")
	store := "file://" + storeDir
	produceLines(t, d, "orders")
	code, _, errOut := runSeglog(t, "tier", "--data-dir", d, "--store", store, "--once", "--config", "remote.storage.enable=true", "--config", "local.retention.bytes=0")
	require.Zero(t, code, errOut)
	logStart := func() int64 {
		o, err := checkpoint.ReadOffsets(nil, filepath.Join(d, checkpoint.LogStartOffsetFile))
		require.NoError(t, err)
		return o[checkpoint.TopicPartition{Topic: "orders"}]
	}
	objects := func() []string {
		var out []string
		require.NoError(t, filepath.WalkDir(storeDir, func(p string, e fs.DirEntry, err error) error {
			if err == nil && strings.HasSuffix(p, ".seg") {
				out = append(out, p)
			}
			return err
		}))
		return out
	}
	require.Zero(t, logStart())
	before := objects()
	require.NotEmpty(t, before)
	var o tablet.Offsets
	code, out, _ := runSeglog(t, "offsets", "--data-dir", d, "--topic", "orders")
	require.Zero(t, code)
	require.NoError(t, json.Unmarshal([]byte(out), &o))
	local := o.LocalLogStartOffset
	require.Greater(t, local, int64(1000))

	// recover opens it without the tier.
	code, _, errOut = runSeglog(t, "recover", "--data-dir", d)
	require.Zero(t, code, errOut)
	require.Zero(t, logStart(), "recover kept the log start")
	// An attach to another store is refused.
	code, _, _ = runSeglog(t, "tier", "--data-dir", d, "--store", "file://"+t.TempDir(), "--once")
	require.Equal(t, 1, code)
	require.Zero(t, logStart(), "a refused attach kept the log start")
	// The store down: a file where its directory was.
	require.NoError(t, os.Rename(storeDir, storeDir+".away"))
	require.NoError(t, os.WriteFile(storeDir, []byte("not a store"), 0o644))
	code, _, errOut = runSeglog(t, "consume", "--data-dir", d, "--topic", "orders", "--from", "earliest")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "warning: ")
	require.Contains(t, errOut, "tier not attached")
	require.Contains(t, errOut, "start the store or pass --store")
	code, out, errOut = runSeglog(t, "consume", "--data-dir", d, "--topic", "orders", "--from-offset", strconv.FormatInt(local, 10))
	require.Zero(t, code, errOut)
	require.Equal(t, int(3000-local), strings.Count(out, "\n"), "the local records are served")
	code, _, errOut = runWithStdin(t, "more:1\n", "produce", "--data-dir", d, "--topic", "orders", "--key-separator", ":")
	require.Zero(t, code, errOut)
	require.Zero(t, logStart(), "a writer without the tier kept the log start")
	code, _, _ = runSeglog(t, "tier", "--data-dir", d, "--store", store, "--once")
	require.Equal(t, 1, code, "the tier pass fails while the store is down")
	require.Zero(t, logStart())

	// The store back: every record, and nothing was retired.
	require.NoError(t, os.Remove(storeDir))
	require.NoError(t, os.Rename(storeDir+".away", storeDir))
	code, out, errOut = runSeglog(t, "tier", "--data-dir", d, "--store", store, "--once")
	require.Zero(t, code, errOut)
	require.NotContains(t, out, "retired")
	code, out, errOut = runSeglog(t, "consume", "--data-dir", d, "--topic", "orders", "--from", "earliest", "--format", "value")
	require.Zero(t, code, errOut)
	require.Equal(t, 3001, strings.Count(out, "\n"))
	require.Subset(t, objects(), before, "every object is still in the store")
}

// No secret is printed, logged, saved or taken from a flag's value: a
// store URL carrying one is refused without echoing it, dump does not print
// it, --secret-access-key does not exist, and a secret from a file works.
func TestTierSecrets(t *testing.T) {
	srv := s3test.Versity(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	d := filepath.Join(t.TempDir(), "data")
	code, _, errOut := runWithStdin(t, lines(10), "produce", "--data-dir", d, "--topic", "orders")
	require.Zero(t, code, errOut)
	const secret = "TOPSECRETVALUE"
	for _, args := range [][]string{
		{"tier", "--data-dir", d, "--store", "s3://KEY:" + secret + "@bucket/p", "--once"},
		{"tier", "--data-dir", d, "--store", "s3://bucket/p?endpoint=http://KEY:" + secret + "@127.0.0.1:1&path-style=true", "--once"},
		{"dump", "s3://KEY:" + secret + "@bucket/x.seg?endpoint=http://127.0.0.1:1"},
		{"tier", "ls", "--store", "s3://bucket/p?endpoint=http://KEY:" + secret + "@127.0.0.1:1"},
		{"tier", "--data-dir", d, "--store", srv.URL, "--once", "--secret-access-key", secret},
	} {
		code, out, errOut := runSeglog(t, args...)
		require.NotZero(t, code, "%v", args)
		require.NotContains(t, out+errOut, secret, "%v printed the secret", args)
	}
	_, ok, err := tiering.StoreURL(nil, filepath.Join(d, "orders-0"))
	require.NoError(t, err)
	require.False(t, ok, "no URL with a secret was saved")

	keyFile := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(keyFile, []byte(s3test.SecretKey+"\n"), 0o600))
	code, out, errOut := runSeglog(t, "tier", "ls", "--store", srv.URL, "--access-key-id", s3test.AccessKey,
		"--secret-access-key-file", keyFile)
	require.Zero(t, code, "%s%s", out, errOut)
	require.NotContains(t, out+errOut, s3test.SecretKey)
	wrong := filepath.Join(t.TempDir(), "wrong")
	require.NoError(t, os.WriteFile(wrong, []byte(secret), 0o600))
	code, out, errOut = runSeglog(t, "tier", "ls", "--store", srv.URL, "--access-key-id", s3test.AccessKey,
		"--secret-access-key-file", wrong)
	require.NotZero(t, code)
	require.NotContains(t, out+errOut, secret)
	require.NotContains(t, errOut, "https response error", "the store is plain http")
	require.NotContains(t, errOut, "seglog: seglog:")

	// No credentials at all: said plainly, and the EC2 instance-metadata
	// endpoint (not loopback) is never asked for a store that is not AWS.
	code, _, errOut = runSeglog(t, "tier", "ls", "--store", srv.URL)
	require.NotZero(t, code)
	require.Contains(t, errOut, "no S3 credentials")
	require.NotContains(t, errOut, "IMDS role")
}

// A store URL is bound to a tablet only by a commit there: a first run
// that fails binds nothing, and the right store is taken afterwards.
func TestStoreBoundOnlyAfterACommit(t *testing.T) {
	d := filepath.Join(t.TempDir(), "data")
	produceLines(t, d, "orders")
	down := filepath.Join(t.TempDir(), "down")
	require.NoError(t, os.WriteFile(down, []byte("a file, not a store"), 0o644))
	code, _, _ := runSeglog(t, "tier", "--data-dir", d, "--store", "file://"+down, "--once", "--config", "remote.storage.enable=true")
	require.Equal(t, 1, code)
	_, ok, err := tiering.StoreURL(nil, filepath.Join(d, "orders-0"))
	require.NoError(t, err)
	require.False(t, ok, "a run that committed nothing binds nothing")
	good := "file://" + filepath.Join(t.TempDir(), "store")
	code, out, errOut := runSeglog(t, "tier", "--data-dir", d, "--store", good, "--once", "--config", "remote.storage.enable=true")
	require.Zero(t, code, errOut)
	require.Contains(t, out, "uploaded and committed")
	u, ok, err := tiering.StoreURL(nil, filepath.Join(d, "orders-0"))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, good, u)
	code, _, errOut = runSeglog(t, "tier", "--data-dir", d, "--store", "file://"+t.TempDir(), "--once")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "committed object(s)", "once bound, another store is refused")
}

// `seglog tier --interval` keeps going while its store is down, saying
// each failure, and tiers as soon as the store is back.
func TestTierRetriesUntilTheStoreIsBack(t *testing.T) {
	d := filepath.Join(t.TempDir(), "data")
	produceLines(t, d, "orders")
	storeDir := filepath.Join(t.TempDir(), "store")
	require.NoError(t, os.WriteFile(storeDir, []byte("down"), 0o644))
	args, err := json.Marshal([]string{"tier", "--data-dir", d, "--store", "file://" + storeDir, "--interval", "50ms", "--config", "remote.storage.enable=true"})
	require.NoError(t, err)
	cmd := childCmd("cli", "SEGLOG_CHILD_ARGS="+string(args))
	cmd.Stderr = nil
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	errLines := bufio.NewScanner(stderr)
	for retries := 0; retries < 2; {
		require.True(t, errLines.Scan(), "the tier command stopped")
		if strings.Contains(errLines.Text(), "retrying in") {
			retries++
		}
	}
	go func() { // keep draining stderr so the child never blocks on it
		for errLines.Scan() {
		}
	}()
	require.NoError(t, os.Remove(storeDir))
	require.NoError(t, os.MkdirAll(storeDir, 0o755))
	outLines := bufio.NewScanner(stdout)
	for {
		require.True(t, outLines.Scan(), "the tier command stopped before tiering")
		if strings.Contains(outLines.Text(), "uploaded and committed") {
			break
		}
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	go func() {
		for outLines.Scan() {
		}
	}()
	require.NoError(t, cmd.Wait(), "a clean exit on SIGTERM")
}

// The store is audited against the manifests: tier verify and tier ls
// --audit report a committed object missing or changed, with its key and
// offsets, and an orphan; tier --once fails on a committed object gone.
func TestTierAudit(t *testing.T) {
	d := filepath.Join(t.TempDir(), "data")
	storeDir := filepath.Join(t.TempDir(), "store")
	store := "file://" + storeDir
	produceLines(t, d, "orders")
	code, _, errOut := runSeglog(t, "tier", "--data-dir", d, "--store", store, "--once", "--config", "remote.storage.enable=true", "--config", "local.retention.bytes=0")
	require.Zero(t, code, errOut)
	code, out, errOut := runSeglog(t, "tier", "verify", "--data-dir", d)
	require.Zero(t, code, "%s%s", out, errOut)
	require.Contains(t, out, "0 missing, 0 changed, 0 orphan(s)")

	var segs []string
	require.NoError(t, filepath.WalkDir(storeDir, func(p string, e fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".seg") {
			segs = append(segs, p)
		}
		return err
	}))
	sort.Strings(segs)
	require.GreaterOrEqual(t, len(segs), 3)
	require.NoError(t, os.Remove(segs[0]))
	data, err := os.ReadFile(segs[1])
	require.NoError(t, err)
	data[len(data)-20] ^= 0xff // inside the footer's checksum of index and aux
	require.NoError(t, os.Chmod(segs[1], 0o644))
	require.NoError(t, os.WriteFile(segs[1], data, 0o644))
	orphan := filepath.Join(filepath.Dir(segs[2]), "00000000000000999999-0123456789abcdef0123456789abcdef.seg")
	require.NoError(t, os.WriteFile(orphan, []byte("a late PUT"), 0o644))

	code, out, _ = runSeglog(t, "tier", "verify", "--data-dir", d)
	require.Equal(t, 1, code)
	require.Contains(t, out, "1 missing, 1 changed, 1 orphan(s)")
	require.Regexp(t, `MISSING \S+\.seg \(offsets \d+ to \d+\)`, out)
	require.Contains(t, out, "CHANGED ")
	require.Contains(t, out, "footer's checksum")
	require.Contains(t, out, "orphan  ")
	code, out, _ = runSeglog(t, "tier", "ls", "--store", store, "--data-dir", d, "--audit")
	require.Equal(t, 1, code)
	require.Contains(t, out, "audit of orders-0")
	require.Contains(t, out, "1 missing, 1 changed")
	code, _, errOut = runSeglog(t, "tier", "--data-dir", d, "--store", store, "--once")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "is missing from the store")
	require.Contains(t, errOut, "is not what was committed")
}

// remote.storage.enable picks the topics to tier, as in Kafka: seglog tier
// tiers only the tablets that enable it (and keeps tiering those tiered
// before), and says so when none does.
func TestRemoteStorageEnablePerTopic(t *testing.T) {
	d := filepath.Join(t.TempDir(), "data")
	for _, topic := range []string{"hot", "cold"} {
		produceLines(t, d, topic)
	}
	store := "file://" + filepath.Join(t.TempDir(), "store")
	code, _, errOut := runSeglog(t, "tier", "--data-dir", d, "--store", store, "--once")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "remote.storage.enable=true")
	code, out, errOut := runSeglog(t, "tier", "--data-dir", d, "--store", store, "--once", "--topic", "cold",
		"--config", "remote.storage.enable=true")
	require.Zero(t, code, errOut)
	require.Contains(t, out, "cold-0: uploaded and committed")
	require.NotContains(t, out, "hot-0")
	code, out, errOut = runSeglog(t, "tier", "--data-dir", d, "--store", store, "--once")
	require.Zero(t, code, errOut)
	require.Contains(t, out, "cold-0: tiered to", "cold stays tiered: its config says so")
	require.NotContains(t, out, "hot-0", "hot is never tiered")
	cfg, err := tablet.ReadConfig(nil, filepath.Join(d, "cold-0"))
	require.NoError(t, err)
	require.True(t, cfg.RemoteStorageEnable, "kept in the tablet")
}

// A tablet moves to another store explicitly: every committed object
// copied and checked, then switched — the old store can go; and detaches
// only while every record is local.
func TestTierMoveAndDetach(t *testing.T) {
	d := filepath.Join(t.TempDir(), "data")
	produceLines(t, d, "orders")
	oldDir, newDir := filepath.Join(t.TempDir(), "old"), filepath.Join(t.TempDir(), "new")
	code, _, errOut := runSeglog(t, "tier", "--data-dir", d, "--store", "file://"+oldDir, "--once",
		"--config", "remote.storage.enable=true", "--config", "local.retention.bytes=0")
	require.Zero(t, code, errOut)

	code, _, errOut = runSeglog(t, "tier", "--data-dir", d, "--detach")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "are only in the store: detaching would lose them")

	code, out, errOut := runSeglog(t, "tier", "--data-dir", d, "--move-to", "file://"+newDir)
	require.Zero(t, code, errOut)
	require.Contains(t, out, "orders-0: moved to file://"+newDir)
	require.Contains(t, out, "every copy checked")
	u, _, err := tiering.StoreURL(nil, filepath.Join(d, "orders-0"))
	require.NoError(t, err)
	require.Equal(t, "file://"+newDir, u)
	require.NoError(t, os.RemoveAll(oldDir), "the old store is no longer needed")
	code, out, errOut = runSeglog(t, "consume", "--data-dir", d, "--topic", "orders", "--from", "earliest", "--format", "value")
	require.Zero(t, code, errOut)
	require.Equal(t, 3000, strings.Count(out, "\n"), "every record, from the new store")
	code, out, errOut = runSeglog(t, "tier", "verify", "--data-dir", d)
	require.Zero(t, code, "%s%s", out, errOut)

	// A tablet whose records are all local detaches.
	d2 := filepath.Join(t.TempDir(), "data")
	produceLines(t, d2, "orders")
	code, _, errOut = runSeglog(t, "tier", "--data-dir", d2, "--store", "file://"+t.TempDir(), "--once",
		"--config", "remote.storage.enable=true", "--config", "local.retention.bytes=-1")
	require.Zero(t, code, errOut)
	code, out, errOut = runSeglog(t, "tier", "--data-dir", d2, "--detach")
	require.Zero(t, code, errOut)
	require.Contains(t, out, "orders-0: detached")
	_, err = os.Stat(filepath.Join(d2, "orders-0", tablet.TierDir))
	require.ErrorIs(t, err, os.ErrNotExist)
	code, out, errOut = runSeglog(t, "consume", "--data-dir", d2, "--topic", "orders", "--from", "earliest", "--format", "value")
	require.Zero(t, code, errOut)
	require.Equal(t, 3000, strings.Count(out, "\n"))
	code, _, errOut = runSeglog(t, "tier", "--data-dir", d2, "--store", "file://"+t.TempDir(), "--once")
	require.Equal(t, 1, code, "detached: remote.storage.enable is off")
	require.Contains(t, errOut, "remote.storage.enable=true")
}
