package main

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/seglog/seglog/internal/testenv"
)

// seglog transactions on a directory seglog serve left with a hanging
// transaction: --list and --describe show it (changing nothing),
// --describe-producers shows where it starts, --abort ends it, and then a
// read_committed consumer reads past it.
func TestTransactionsCommand(t *testing.T) {
	t.Parallel()
	d := t.TempDir() + "/data"
	cmd, lines := startServe(t, "--data-dir", d, "--config", "listeners=PLAINTEXT://127.0.0.1:0")
	addr := servedAddr(t, cmd, lines)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := beginTransaction(t, addr, "hanging", "tx", 10*time.Minute)
	for i := range 5 {
		require.NoError(t, p.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "c%d", i)}).FirstErr())
	}
	require.NoError(t, p.EndTransaction(ctx, kgo.TryCommit))
	require.NoError(t, p.BeginTransaction())
	require.NoError(t, p.ProduceSync(ctx, &kgo.Record{Value: []byte("hanging")}).FirstErr())
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM)) // the transaction stays open
	require.NoError(t, cmd.Wait(), "%s", cmd.Stderr)
	p.Close()

	before := testenv.Tree(t, d)
	code, out, errOut := runSeglog(t, "transactions", "--data-dir", d, "--list")
	require.Zero(t, code, errOut)
	require.Regexp(t, `(?m)^hanging\s+\d+\s+\d+\s+Ongoing\s+\S+$`, out)
	code, out, errOut = runSeglog(t, "transactions", "--data-dir", d, "--describe", "--transactional-id", "hanging")
	require.Zero(t, code, errOut)
	require.Regexp(t, `(?m)^hanging\s+\d+\s+\d+\s+Ongoing\s+600000\s+\S+\s+tx-0$`, out)
	code, out, errOut = runSeglog(t, "transactions", "--data-dir", d, "--describe-producers", "--topic", "tx", "--partition", "0")
	require.Zero(t, code, errOut)
	require.Regexp(t, `(?m)^\d+\s+\d+\s+0\s+\d+\s+\d+\s+6$`, out, "the open transaction starts at offset 6 (after 5 records and a marker)")
	require.Equal(t, before, testenv.Tree(t, d), "list and describe change nothing")
	code, out, _ = runSeglog(t, "consume", "--data-dir", d, "--topic", "tx", "--isolation", "read-committed", "--format", "value")
	require.Zero(t, code)
	require.Equal(t, "c0\nc1\nc2\nc3\nc4\n", out, "the hanging transaction holds the stable offset")

	code, out, errOut = runSeglog(t, "transactions", "--data-dir", d, "--abort", "--transactional-id", "hanging")
	require.Zero(t, code, errOut)
	require.Contains(t, out, `aborted the open transaction of "hanging"`)
	code, out, _ = runSeglog(t, "transactions", "--data-dir", d, "--describe", "--transactional-id", "hanging")
	require.Zero(t, code)
	require.Contains(t, out, "CompleteAbort")
	code, _, errOut = runSeglog(t, "transactions", "--data-dir", d, "--abort", "--transactional-id", "hanging")
	require.NotZero(t, code)
	require.Contains(t, errOut, "no open transaction")
	code, out, _ = runSeglog(t, "offsets", "--data-dir", d, "--topic", "tx")
	require.Zero(t, code)
	require.Contains(t, out, `"lastStableOffset":8`, "the abort marker ended it: the stable offset is the log end")
}

// A transaction past its timeout shows so in --list (read-only, nothing
// aborts it), and --abort succeeds (exit 0) though the coordinator
// aborted it as the directory opened.
func TestTransactionsAbortPastItsTimeout(t *testing.T) {
	d := t.TempDir() + "/data"
	cmd, lines := startServe(t, "--data-dir", d, "--config", "listeners=PLAINTEXT://127.0.0.1:0",
		"--config", "transaction.abort.timed.out.transaction.cleanup.interval.ms=3600000") // the broker aborts nothing
	addr := servedAddr(t, cmd, lines)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := beginTransaction(t, addr, "short", "tx", time.Millisecond)
	require.NoError(t, p.ProduceSync(ctx, &kgo.Record{Value: []byte("hanging")}).FirstErr())
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait(), "%s", cmd.Stderr)
	p.Close()

	code, out, errOut := runSeglog(t, "transactions", "--data-dir", d, "--list")
	require.Zero(t, code, errOut)
	require.Regexp(t, `(?m)^short\s+\d+\s+\d+\s+Ongoing\s+.*past its timeout`, out)
	code, out, errOut = runSeglog(t, "transactions", "--data-dir", d, "--abort", "--transactional-id", "short")
	require.Zero(t, code, errOut)
	require.Contains(t, out, `aborted the open transaction of "short"`)
	code, _, errOut = runSeglog(t, "transactions", "--data-dir", d, "--abort", "--transactional-id", "short")
	require.NotZero(t, code, "aborted before this open: nothing to abort")
	require.Contains(t, errOut, "no open transaction")
}

// transactions --list and --describe through a running broker show an
// open transaction while it serves, with its partitions.
func TestTransactionsThroughTheBroker(t *testing.T) {
	t.Parallel()
	d := t.TempDir() + "/data"
	cmd, lines := startServe(t, "--data-dir", d, "--config", "listeners=PLAINTEXT://127.0.0.1:0")
	addr := servedAddr(t, cmd, lines)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := beginTransaction(t, addr, "open", "txb", 10*time.Minute)
	defer p.Close()
	require.NoError(t, p.ProduceSync(ctx, &kgo.Record{Value: []byte("pending")}).FirstErr())
	code, out, errOut := runSeglog(t, "transactions", "--bootstrap-server", addr, "--list")
	require.Zero(t, code, errOut)
	require.Regexp(t, `(?m)^open\s+\d+\s+\d+\s+Ongoing\s+\S+$`, out)
	code, out, errOut = runSeglog(t, "transactions", "--bootstrap-server", addr, "--describe", "--transactional-id", "open")
	require.Zero(t, code, errOut)
	require.Regexp(t, `(?m)^open\s+\d+\s+\d+\s+Ongoing\s+600000\s+\S+\s+txb-0$`, out)
	code, out, errOut = runSeglog(t, "transactions", "--bootstrap-server", addr, "--describe-producers", "--topic", "txb", "--partition", "0")
	require.Zero(t, code, errOut)
	require.Regexp(t, `(?m)^\d+\s+\d+\s+-?\d+\s+0\s+\d+\s+0$`, out, "the open transaction starts at offset 0")

	code, out, errOut = runSeglog(t, "transactions", "--bootstrap-server", addr, "--abort", "--transactional-id", "open")
	require.Zero(t, code, errOut)
	require.Contains(t, out, `aborted the open transaction of "open"`)
	code, out, errOut = runSeglog(t, "transactions", "--bootstrap-server", addr, "--describe", "--transactional-id", "open")
	require.Zero(t, code, errOut)
	require.Regexp(t, `(?m)^open\s+\d+\s+1\s+Empty\s`, out, "at a new epoch, with no transaction open")
	require.ErrorIs(t, p.EndTransaction(ctx, kgo.TryCommit), kerr.ProducerFenced, "the old producer is fenced")
	code, _, errOut = runSeglog(t, "transactions", "--bootstrap-server", addr, "--abort", "--transactional-id", "open")
	require.NotZero(t, code)
	require.Contains(t, errOut, "no open transaction")
	code, out, errOut = runSeglog(t, "transactions", "--bootstrap-server", addr, "--describe-producers", "--topic", "txb", "--partition", "0")
	require.Zero(t, code, errOut)
	require.Regexp(t, `(?m)^\d+\s+1\s+\d+\s+-1\s+\d+\s+None$`, out, "the abort marker at the new epoch closed it")
	code, out, _ = runSeglog(t, "consume", "--bootstrap-server", addr, "--topic", "txb", "--from-beginning",
		"--isolation-level", "read_committed", "--timeout-ms", "500", "--format", "value")
	require.Zero(t, code)
	require.Empty(t, out, "the aborted record is not read committed")
	p.Close()

	// A hanging transaction aborted by partition, as kafka-transactions.sh
	// abort --topic --partition --start-offset: the marker ends it there.
	h := beginTransaction(t, addr, "hanging", "txb", 10*time.Minute)
	defer h.Close()
	require.NoError(t, h.ProduceSync(ctx, &kgo.Record{Value: []byte("hung")}).FirstErr())
	at := h.ProduceSync(ctx, &kgo.Record{Value: []byte("hung2")})
	require.NoError(t, at.FirstErr())
	start := at[0].Record.Offset - 1
	code, _, errOut = runSeglog(t, "transactions", "--bootstrap-server", addr, "--abort", "--topic", "txb", "--partition", "0",
		"--start-offset", fmt.Sprint(start+1))
	require.NotZero(t, code)
	require.Contains(t, errOut, "no open transaction of txb-0 begins at offset")
	code, out, errOut = runSeglog(t, "transactions", "--bootstrap-server", addr, "--abort", "--topic", "txb", "--partition", "0",
		"--start-offset", fmt.Sprint(start))
	require.Zero(t, code, errOut)
	require.Contains(t, out, fmt.Sprintf("that began at offset %d of txb-0", start))
	code, out, errOut = runSeglog(t, "transactions", "--bootstrap-server", addr, "--describe-producers", "--topic", "txb", "--partition", "0")
	require.Zero(t, code, errOut)
	require.NotRegexp(t, fmt.Sprintf(`(?m)\s%d$`, start), out, "no transaction open at that offset any more")
	plain, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("txb"))
	require.NoError(t, err)
	defer plain.Close()
	require.NoError(t, plain.ProduceSync(ctx, &kgo.Record{Value: []byte("after")}).FirstErr())
	code, out, _ = runSeglog(t, "consume", "--bootstrap-server", addr, "--topic", "txb", "--from-beginning",
		"--isolation-level", "read_committed", "--timeout-ms", "500", "--format", "value")
	require.Zero(t, code)
	require.Equal(t, "after\n", out, "past the aborted transaction, read committed")
	stopServe(t, cmd)
}

// beginTransaction is a transactional producer to topic, with its
// transaction begun; the caller closes it.
func beginTransaction(t *testing.T, addr, id, topic string, timeout time.Duration) *kgo.Client {
	t.Helper()
	p, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID(id), kgo.AllowAutoTopicCreation(),
		kgo.DefaultProduceTopic(topic), kgo.TransactionTimeout(timeout))
	require.NoError(t, err)
	require.NoError(t, p.BeginTransaction())
	return p
}
