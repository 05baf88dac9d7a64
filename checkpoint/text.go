package checkpoint

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"strconv"
	"strings"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/vfs"
)

// File names: part of the on-disk format; never change.
const (
	RecoveryPointFile     = "recovery-point-offset-checkpoint"
	LogStartOffsetFile    = "log-start-offset-checkpoint"
	ReplicationOffsetFile = "replication-offset-checkpoint"
	CleanerOffsetFile     = "cleaner-offset-checkpoint"
	LeaderEpochFile       = "leader-epoch-checkpoint"
	PartitionMetadataFile = "partition.metadata"
	MetaPropertiesFile    = "meta.properties"
	CleanShutdownFile     = ".kafka_cleanshutdown"
	// ProducerIDBlockFile is seglog's own (the broker's): the end of the
	// block of producer ids handed out so far, one decimal number.
	ProducerIDBlockFile = "seglog-producer-id-block"
	// ScramCredentialsFile, ACLFile and ClientQuotasFile are seglog's own
	// (the broker's security state, JSON; package broker/auth reads and
	// writes them).
	ScramCredentialsFile = "seglog-scram-credentials"
	ACLFile              = "seglog-acls"
	ClientQuotasFile     = "seglog-client-quotas"
	// DynamicBrokerConfigFile is seglog's own: the dynamic broker configs
	// (AlterConfigs on the BROKER resource), JSON; package broker keeps it.
	DynamicBrokerConfigFile = "seglog-dynamic-broker-configs"
	// version is the version of every offset and epoch checkpoint.
	version = 0
)

// ErrMalformed is the cause of a checkpoint file that cannot be parsed.
var ErrMalformed = seglog.NewKafkaError("checkpoint: malformed file", 56)

var whitespace = regexp.MustCompile(`\s+`)

// malformed returns a *seglog.CorruptionError at the byte where line n
// (from 1) starts.
func malformed(path string, data []byte, n int, format string, args ...any) error {
	off := 0
	for i := 1; i < n && off < len(data); i++ {
		j := bytes.IndexByte(data[off:], '\n')
		if j < 0 {
			off = len(data)
			break
		}
		off += j + 1
	}
	return &seglog.CorruptionError{Path: path, Offset: int64(off), Err: ErrMalformed,
		Reason: fmt.Sprintf("line %d: %s", n, fmt.Sprintf(format, args...))}
}

// parse reads the version/count/entries layout, returning each entry's
// whitespace-separated fields, which must number fields. An empty file, or
// one without a count line, has no entries.
func parse(path string, data []byte, fields int) ([][]string, error) {
	lines := strings.Split(string(data), "\n")
	if n := len(lines); n > 0 && lines[n-1] == "" {
		lines = lines[:n-1] // the newline after the last line
	}
	for i, l := range lines {
		lines[i] = strings.TrimSuffix(l, "\r")
	}
	if len(lines) == 0 {
		return nil, nil
	}
	v, err := strconv.Atoi(lines[0])
	if err != nil {
		return nil, malformed(path, data, 1, "version %q is not a number", lines[0])
	}
	if v != version {
		return nil, malformed(path, data, 1, "unrecognized version %d", v)
	}
	if len(lines) == 1 {
		return nil, nil
	}
	count, err := strconv.Atoi(lines[1])
	if err != nil || count < 0 {
		return nil, malformed(path, data, 2, "count %q is not a number", lines[1])
	}
	entries := make([][]string, 0, min(count, len(lines)))
	for i, line := range lines[2:] {
		parts := whitespace.Split(line, -1)
		if len(parts) != fields {
			return nil, malformed(path, data, i+3, "%q does not have %d fields", line, fields)
		}
		entries = append(entries, parts)
	}
	if len(entries) != count {
		return nil, malformed(path, data, len(lines), "expected %d entries, found %d", count, len(entries))
	}
	return entries, nil
}

// format renders the version/count/entries layout.
func format(entries []string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d\n%d\n", version, len(entries))
	for _, e := range entries {
		b.WriteString(e)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// readFile returns the file's bytes, or nil if it does not exist.
func readFile(fsys vfs.FS, path string) ([]byte, error) {
	data, err := vfs.ReadFile(fsys, path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return data, err
}
