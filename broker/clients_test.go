package broker

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/record"
)

// tool returns the path of a client the Makefile installs (Debian's kcat
// and python3-confluent-kafka), or skips saying so.
func tool(t *testing.T, name string) string {
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s is not installed (make test installs it with apt-get): %v", name, err)
	}
	return p
}

// kafkajs returns what runs a script of testdata/kafkajs with node on the
// broker at args[0] (and the script's other arguments), requiring it to end well and print "ok", or skips saying
// why it cannot.
func kafkajs(t *testing.T) func(script string, args ...string) string {
	node := kafkajsNode(t)
	return func(script string, args ...string) string {
		t.Helper()
		out, err := node(script, args...).CombinedOutput()
		require.NoError(t, err, "%s", out)
		require.Contains(t, string(out), "ok\n")
		return string(out)
	}
}

// kafkajsNode returns what makes the command running a script of
// testdata/kafkajs with node, or skips saying why it cannot.
func kafkajsNode(t *testing.T) func(script string, args ...string) *exec.Cmd {
	node := tool(t, "node")
	dir := filepath.Join("testdata", "kafkajs")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "kafkajs")); err != nil {
		t.Skipf("kafkajs is not installed (make test runs npm ci in %s): %v", dir, err)
	}
	return func(script string, args ...string) *exec.Cmd {
		return exec.Command(node, append([]string{filepath.Join(dir, script)}, args...)...)
	}
}

// python returns what runs a Python script with Debian's python3 (where
// python3-confluent-kafka is) on the broker at args[0], requiring it to end
// well and print "ok", or skips saying why it cannot.
func python(t *testing.T) func(script string, args ...string) {
	py := "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import confluent_kafka").Run(); err != nil {
		t.Skipf("python3-confluent-kafka is not installed (make test installs it with apt-get): %v", err)
	}
	return func(script string, args ...string) {
		t.Helper()
		out, err := exec.Command(py, append([]string{"-c", script}, args...)...).CombinedOutput()
		require.NoError(t, err, "%s", out)
		require.Contains(t, string(out), "ok")
	}
}

// kcatRun returns what runs kcat on the broker at addr with stdin and
// the arguments, and returns its output (failing the test if it fails).
func kcatRun(t *testing.T, kcat, addr string) func(stdin string, args ...string) string {
	return func(stdin string, args ...string) string {
		t.Helper()
		// A deadline, not a wait: a kcat that never ends fails the test.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, kcat, append([]string{"-b", addr, "-X", "api.version.request=true"}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "kcat %v: %s", args, out)
		return string(out)
	}
}

// kcat (librdkafka): metadata, an idempotent produce, a consume from the
// beginning to the end, and one from a timestamp.
func TestKcat(t *testing.T) {
	kcat := tool(t, "kcat")
	_, _, addr := testBroker(t, Options{})
	run := kcatRun(t, kcat, addr)
	var in strings.Builder
	for i := range 100 {
		in.WriteString("line ")
		in.WriteString(strings.Repeat("x", i%5))
		in.WriteString("\n")
	}
	run(in.String(), "-P", "-t", "kc", "-X", "enable.idempotence=true")
	meta := run("", "-L")
	require.Contains(t, meta, `topic "kc" with 1 partitions`)
	out := run("", "-C", "-t", "kc", "-o", "beginning", "-e", "-q")
	require.Equal(t, in.String(), out, "every line back, in order")
	out = run("", "-C", "-t", "kc", "-o", "beginning", "-e", "-q", "-f", "%o\n", "-c", "3")
	require.Equal(t, "0\n1\n2\n", out)
	out = run("", "-C", "-t", "kc", "-o", "s@0", "-e", "-q", "-c", "1")
	require.Equal(t, "line \n", out, "from timestamp 0: the first record")
}

// kcat compresses with every codec: librdkafka before 2.11.1 (Debian's is
// 2.0.2) compresses only for a broker that lists Produce v0, which the
// broker lists as Kafka 4 does; each batch in the .log carries the codec,
// and the records read back whole.
func TestKcatCompresses(t *testing.T) {
	kcat := tool(t, "kcat")
	_, m, addr := testBroker(t, Options{})
	run := kcatRun(t, kcat, addr)
	in := strings.Repeat("a line that compresses well, a line that compresses well\n", 50)
	for _, codec := range []string{"gzip", "snappy", "lz4", "zstd"} {
		topic := "z-" + codec
		run(in, "-P", "-t", topic, "-z", codec)
		out := run("", "-C", "-t", topic, "-o", "beginning", "-e", "-q")
		require.Equal(t, in, out, codec)
		tb, ok := m.Get(checkpoint.TopicPartition{Topic: topic})
		require.True(t, ok)
		want, err := record.ParseCompression(codec)
		require.NoError(t, err)
		batches := logBatches(t, tb.Dir())
		require.NotEmpty(t, batches, codec)
		for _, h := range batches {
			require.Equal(t, want, h.Attributes.Compression(), "%s: batch at %d", codec, h.BaseOffset)
		}
	}
}

// logBatches are the headers of the batches in a tablet directory's .log
// files, read from the files themselves.
func logBatches(t *testing.T, dir string) []record.BatchHeader {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	require.NoError(t, err)
	var out []record.BatchHeader
	for _, f := range logs {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		for len(data) > 0 {
			h, size, err := record.ParseHeader(data)
			require.NoError(t, err)
			out = append(out, h)
			data = data[size:]
		}
	}
	return out
}

// The Python client (confluent-kafka, librdkafka): produce, then consume a
// partition it assigns itself.
func TestPythonClient(t *testing.T) {
	runPy := python(t)
	_, _, addr := testBroker(t, Options{})
	script := `
import sys
from confluent_kafka import Producer, Consumer, TopicPartition
addr = sys.argv[1]
p = Producer({"bootstrap.servers": addr, "enable.idempotence": True})
for i in range(50):
    p.produce("py", value=("py %d" % i).encode())
assert p.flush(30) == 0
c = Consumer({"bootstrap.servers": addr, "group.id": "unused", "enable.auto.commit": False})
c.assign([TopicPartition("py", 0, 0)])
got = []
while len(got) < 50:
    m = c.poll(30)
    if m is None:
        raise SystemExit("timed out after %d" % len(got))
    if m.error():
        raise SystemExit(str(m.error()))
    got.append((m.offset(), m.value().decode()))
c.close()
assert got == [(i, "py %d" % i) for i in range(50)], got
print("ok")
`
	runPy(script, addr)
}

// kafkajs (npm, the lockfile in testdata/kafkajs): admin create and delete
// topic, describe configs, list offsets, an idempotent producer with gzip,
// and reads by partition through kafkajs's own Fetch (its consumer needs
// groups, issue 20).
func TestKafkajs(t *testing.T) {
	runJS := kafkajs(t)
	_, m, addr := testBroker(t, Options{})
	out := runJS("kafkajs.js", addr)
	require.Contains(t, out, `{"produced":1000,"consumed":1000}`)
	require.Empty(t, m.Tablets(), "kafkajs deleted its topic")
}

// kafkajs consumer groups (testdata/kafkajs/group.js): two members share
// a topic, one leaves and the other takes every partition, offsets are
// committed to the log end, and the group is deleted.
func TestKafkajsConsumerGroup(t *testing.T) {
	runJS := kafkajs(t)
	_, _, addr := testBroker(t, groupOptions())
	out := runJS("group.js", addr)
	require.Contains(t, out, `"consumed":300`)
}

// kafkajs, which has only the classic protocol, in a group that a
// franz-go consumer on the consumer protocol (KIP-848) joins
// (testdata/kafkajs/migrate.js): the group migrates with kafkajs's member
// in it, the two share the partitions and consume every record; when
// franz-go's member leaves, kafkajs's gets every partition back in a
// classic group.
func TestKafkajsInMigratingGroup(t *testing.T) {
	node := kafkajsNode(t)
	opts := groupOptions()
	opts.Groups.ConsumerHeartbeatInterval = 100 * time.Millisecond
	b, _, addr := testBroker(t, opts)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	produceN(t, ctx, addr, "jm", 0, 300, kgo.ProducerBatchCompression(kgo.NoCompression())) // (kafkajs has no snappy)
	cmd := node("migrate.js", addr, "jm", "jmg")
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr lockedBuffer // (exec copies into it while the test reads it)
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	lines := make(chan string, 1024)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	defer func() { // (the process ends when its stdin closes, or with the test's context)
		stdin.Close()
		if cmd.ProcessState == nil && ctx.Err() != nil {
			cmd.Process.Kill()
		}
	}()
	seen := map[string]bool{}
	// line handles one line of kafkajs's and reports whether it was an
	// assignment of every partition.
	line := func(l string) bool {
		if v, ok := strings.CutPrefix(l, "record "); ok {
			seen[v] = true
		}
		require.NotContains(t, l, "crash", "kafkajs: %s", stderr.String())
		return l == "join [0,1,2]"
	}
	untilAll := func(why string) {
		for {
			select {
			case l, ok := <-lines:
				require.True(t, ok, "kafkajs ended: %s", stderr.String())
				if line(l) {
					return
				}
			case <-ctx.Done():
				t.Fatalf("%s: %s", why, stderr.String())
			}
		}
	}
	untilAll("kafkajs never had every partition")

	fg, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup("jmg"), kgo.ConsumeTopics("jm"), kgo.ServerSideBalancer(),
		kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.FetchMaxWait(50*time.Millisecond))
	require.NoError(t, err)
	untilShared(t, ctx, b, "jmg", func() {
		pctx, pcancel := context.WithTimeout(ctx, 50*time.Millisecond)
		fg.PollFetches(pctx).EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
		pcancel()
		for drained := false; !drained; {
			select {
			case l := <-lines:
				line(l)
			default:
				drained = true
			}
		}
	}, map[int8]int{0: 1, 1: 1}, 3, func() bool { return len(seen) == 300 })
	require.NoError(t, fg.CommitUncommittedOffsets(ctx))
	fg.Close() // leaves: the group is classic again, and kafkajs's member gets every partition
	untilAll("kafkajs never got every partition back")
	require.Equal(t, kerr.GroupIDNotFound.Code, describeConsumerGroup(b, "jmg").ErrorCode, "a classic group again")
	require.NoError(t, stdin.Close())
	var rest []string
	for l := range lines {
		rest = append(rest, l)
	}
	require.NoError(t, cmd.Wait(), "%s", stderr.String())
	require.Contains(t, rest, "ok")
}

// kcat -G (librdkafka's balanced consumer) reads a topic and commits; after
// a broker restart the group resumes after its committed offsets.
func TestKcatGroupAcrossRestart(t *testing.T) {
	kcat := tool(t, "kcat")
	dir := filepath.Join(t.TempDir(), "data")
	_, addr, stop := serveDir(t, dir, "127.0.0.1:0", groupOptions())
	run := kcatRun(t, kcat, addr)
	lines := func(from, n int) string {
		var b strings.Builder
		for i := from; i < from+n; i++ {
			fmt.Fprintf(&b, "line %d\n", i)
		}
		return b.String()
	}
	run(lines(0, 100), "-P", "-t", "kg")
	sorted := func(s string) []string {
		l := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
		slices.Sort(l)
		return l
	}
	// -c, not -e (kcat's end-of-partitions count is confused by a
	// second rebalance); auto.offset.reset, not -o beginning, which makes
	// kcat assign offsets itself and then leave some partitions
	// uncommitted.
	out := run("", "-G", "kgroup", "-X", "auto.offset.reset=earliest", "-c", "100", "-q", "kg")
	require.Equal(t, sorted(lines(0, 100)), sorted(out), "the group reads everything, from three partitions")
	stop()

	// (on a new port: each kcat run is a new client, and the old port may
	// have been taken meanwhile by another test's connection)
	_, addr, _ = serveDir(t, dir, "127.0.0.1:0", groupOptions())
	run = kcatRun(t, kcat, addr)
	run(lines(100, 50), "-P", "-t", "kg")
	out = run("", "-G", "kgroup", "-X", "auto.offset.reset=earliest", "-c", "50", "-q", "kg")
	require.Equal(t, sorted(lines(100, 50)), sorted(out), "after the restart, only what came after the committed offsets")
}

// The Python client's group consumer (subscribe with group.id): it reads
// and commits; a second consumer of the group resumes after the commits.
func TestPythonConsumerGroup(t *testing.T) {
	runPy := python(t)
	_, _, addr := testBroker(t, groupOptions())
	script := `
import sys
from confluent_kafka import Producer, Consumer
addr = sys.argv[1]
p = Producer({"bootstrap.servers": addr})
def produce(a, b):
    for i in range(a, b):
        p.produce("pyg", value=("v%d" % i).encode())
    assert p.flush(30) == 0
def consume(n):
    c = Consumer({"bootstrap.servers": addr, "group.id": "pygroup", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "heartbeat.interval.ms": 100})
    c.subscribe(["pyg"])
    got = set()
    while len(got) < n:
        m = c.poll(30)
        if m is None:
            raise SystemExit("timed out after %d" % len(got))
        if m.error():
            raise SystemExit(str(m.error()))
        got.add(m.value().decode())
    c.commit(asynchronous=False)
    c.close()
    return got
produce(0, 60)
assert consume(60) == {"v%d" % i for i in range(60)}
produce(60, 90)
got = consume(30)
assert got == {"v%d" % i for i in range(60, 90)}, sorted(got)
print("ok")
`
	runPy(script, addr)
}

// kafkajs transactions (testdata/kafkajs/txn.js): send, sendOffsets and
// commit; send, sendOffsets and abort; a read_committed consumer sees the
// committed records only, and the group has the committed offset.
func TestKafkajsTransactions(t *testing.T) {
	runJS := kafkajs(t)
	_, _, addr := testBroker(t, groupOptions())
	runJS("txn.js", addr)
}

// The Python client's transactional producer: a committed transaction is
// read by a read_committed consumer, an aborted one is not.
func TestPythonTransactions(t *testing.T) {
	runPy := python(t)
	_, _, addr := testBroker(t, groupOptions())
	script := `
import sys
from confluent_kafka import Producer, Consumer, TopicPartition
addr = sys.argv[1]
p = Producer({"bootstrap.servers": addr, "transactional.id": "py-tx"})
p.init_transactions(30)
p.begin_transaction()
for i in range(20):
    p.produce("pyt", value=("c%d" % i).encode(), partition=0)
p.commit_transaction(30)
p.begin_transaction()
for i in range(20):
    p.produce("pyt", value=("a%d" % i).encode(), partition=0)
p.abort_transaction(30)
p.begin_transaction()
p.produce("pyt", value=b"last", partition=0)
p.commit_transaction(30)
c = Consumer({"bootstrap.servers": addr, "group.id": "pyt-reader", "auto.offset.reset": "earliest",
              "isolation.level": "read_committed", "enable.auto.commit": False})
c.assign([TopicPartition("pyt", 0, 0)])
got = []
while len(got) < 21:
    m = c.poll(30)
    if m is None:
        raise SystemExit("timed out after %d" % len(got))
    if m.error():
        raise SystemExit(str(m.error()))
    got.append(m.value().decode())
c.close()
assert got == ["c%d" % i for i in range(20)] + ["last"], got
print("ok")
`
	runPy(script, addr)
}
