package checkpoint

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/vfs"
)

// TopicID is a topic's 16-byte UUID, written as 22 characters of base64url
// without padding (Kafka's Uuid.toString).
type TopicID [16]byte

// NewTopicID returns a random, non-zero topic id.
func NewTopicID() TopicID {
	var id TopicID
	for id == (TopicID{}) {
		_, _ = rand.Read(id[:])
	}
	return id
}

func (id TopicID) String() string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// ParseTopicID parses the 22-character form.
func ParseTopicID(s string) (TopicID, error) {
	var id TopicID
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != len(id) {
		return id, fmt.Errorf("%w: topic id %q is not 22 characters of base64url", ErrMalformed, s)
	}
	copy(id[:], b)
	return id, nil
}

var colonSpace = regexp.MustCompile(`:\s+`)

// ReadPartitionMetadata reads a tablet's partition.metadata: version 0 and
// a non-zero topic id. A missing file reports false.
func ReadPartitionMetadata(fsys vfs.FS, path string) (TopicID, bool, error) {
	fsys = vfs.OrOS(fsys)
	data, err := readFile(fsys, path)
	if err != nil || data == nil {
		return TopicID{}, false, err
	}
	id, err := ParsePartitionMetadata(path, data)
	return id, err == nil, err
}

// ParsePartitionMetadata parses the contents of partition.metadata.
func ParsePartitionMetadata(path string, data []byte) (TopicID, error) {
	lines := strings.Split(strings.TrimRight(string(data), "\r\n"), "\n")
	field := func(n int, name string) (string, error) {
		if n > len(lines) {
			return "", malformed(path, data, n, "missing %q", name)
		}
		kv := colonSpace.Split(strings.TrimSuffix(lines[n-1], "\r"), -1)
		if len(kv) != 2 || kv[0] != name {
			return "", malformed(path, data, n, "%q is not %q", lines[n-1], name+": …")
		}
		return kv[1], nil
	}
	v, err := field(1, "version")
	if err != nil {
		return TopicID{}, err
	}
	if v != "0" {
		return TopicID{}, malformed(path, data, 1, "unrecognized version %s", v)
	}
	s, err := field(2, "topic_id")
	if err != nil {
		return TopicID{}, err
	}
	id, err := ParseTopicID(s)
	if err != nil {
		return TopicID{}, malformed(path, data, 2, "%v", err)
	}
	if id == (TopicID{}) {
		return TopicID{}, malformed(path, data, 2, "the zero topic id is not valid")
	}
	return id, nil
}

// FormatPartitionMetadata renders partition.metadata, with no newline at
// the end, as Kafka writes it.
func FormatPartitionMetadata(id TopicID) []byte {
	return []byte("version: 0\ntopic_id: " + id.String())
}

// WritePartitionMetadata replaces partition.metadata atomically.
func WritePartitionMetadata(fsys vfs.FS, path string, id TopicID) error {
	fsys = vfs.OrOS(fsys)
	if id == (TopicID{}) {
		return fmt.Errorf("checkpoint: the zero topic id is not valid")
	}
	return vfs.WriteAtomic(fsys, path, FormatPartitionMetadata(id))
}

// MetaProperties is a data directory's meta.properties.
type MetaProperties struct {
	// Version is 1 (KRaft: cluster.id and node.id) or 0 (broker.id).
	Version int
	// ClusterID identifies the cluster.
	ClusterID string
	// NodeID is node.id (version 1) or broker.id (version 0).
	NodeID int32
	// DirectoryID is the directory's id (directory.id), "" if absent.
	DirectoryID string
	// Other holds any other properties found.
	Other map[string]string
}

// ParseProperties reads Java properties: key=value or key: value lines;
// # and ! start comments.
func ParseProperties(data []byte) map[string]string {
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		i := strings.IndexAny(line, "=:")
		if i < 0 {
			out[line] = ""
			continue
		}
		out[strings.TrimSpace(line[:i])] = strings.TrimSpace(line[i+1:])
	}
	return out
}

// ReadMetaProperties reads meta.properties. A missing file reports false.
func ReadMetaProperties(fsys vfs.FS, path string) (MetaProperties, bool, error) {
	fsys = vfs.OrOS(fsys)
	data, err := readFile(fsys, path)
	if err != nil || data == nil {
		return MetaProperties{}, false, err
	}
	m, err := ParseMetaProperties(path, data)
	return m, err == nil, err
}

// ParseMetaProperties parses meta.properties.
func ParseMetaProperties(path string, data []byte) (MetaProperties, error) {
	props := ParseProperties(data)
	bad := func(format string, args ...any) error {
		return &seglog.CorruptionError{Path: path, Offset: -1, Err: ErrMalformed, Reason: fmt.Sprintf(format, args...)}
	}
	v, err := strconv.Atoi(props["version"])
	if err != nil || (v != 0 && v != 1) {
		return MetaProperties{}, bad("version %q is not 0 or 1", props["version"])
	}
	m := MetaProperties{Version: v, ClusterID: props["cluster.id"], DirectoryID: props["directory.id"], Other: map[string]string{}}
	idKey := "node.id"
	if v == 0 {
		idKey = "broker.id"
	}
	if id, ok := props[idKey]; ok {
		n, err := strconv.ParseInt(id, 10, 32)
		if err != nil {
			return MetaProperties{}, bad("%s %q is not a number", idKey, id)
		}
		m.NodeID = int32(n)
	} else if v == 1 {
		return MetaProperties{}, bad("node.id is missing")
	} else {
		m.NodeID = -1
	}
	if v == 1 && m.ClusterID == "" {
		return MetaProperties{}, bad("cluster.id is missing")
	}
	for k, val := range props {
		switch k {
		case "version", "cluster.id", "directory.id", idKey:
		default:
			m.Other[k] = val
		}
	}
	return m, nil
}

// Format renders meta.properties as Java's Properties.store does: a blank
// comment, a date comment, then the properties (sorted here).
func (m MetaProperties) Format(now time.Time) []byte {
	props := map[string]string{"version": strconv.Itoa(m.Version)}
	for k, v := range m.Other {
		props[k] = v
	}
	if m.ClusterID != "" {
		props["cluster.id"] = m.ClusterID
	}
	if m.DirectoryID != "" {
		props["directory.id"] = m.DirectoryID
	}
	if m.Version == 0 {
		props["broker.id"] = strconv.Itoa(int(m.NodeID))
	} else {
		props["node.id"] = strconv.Itoa(int(m.NodeID))
	}
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b bytes.Buffer
	fmt.Fprintf(&b, "#\n#%s\n", now.UTC().Format("Mon Jan 02 15:04:05 MST 2006"))
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, props[k])
	}
	return b.Bytes()
}

// WriteMetaProperties replaces meta.properties atomically.
func WriteMetaProperties(fsys vfs.FS, path string, m MetaProperties) error {
	fsys = vfs.OrOS(fsys)
	return vfs.WriteAtomic(fsys, path, m.Format(time.Now()))
}

// cleanShutdown is the marker's JSON.
type cleanShutdown struct {
	Version     int   `json:"version"`
	BrokerEpoch int64 `json:"brokerEpoch"`
}

// WriteCleanShutdown writes the clean-shutdown marker with a plain write and
// an fsync (and a directory sync, so that the marker itself is durable).
// It is written last, after every tablet is flushed and closed and the
// checkpoints are written.
func WriteCleanShutdown(fsys vfs.FS, dir string, brokerEpoch int64) error {
	fsys = vfs.OrOS(fsys)
	path := filepath.Join(dir, CleanShutdownFile)
	data, _ := json.Marshal(cleanShutdown{Version: 0, BrokerEpoch: brokerEpoch})
	err := vfs.WriteFileSynced(fsys, path, data)
	if err == nil {
		err = fsys.SyncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("checkpoint: writing %s: %w", path, err)
	}
	return nil
}

// ParseCleanShutdown parses the clean-shutdown marker strictly (Kafka
// reads it leniently: TakeCleanShutdown does too) and returns its broker
// epoch.
func ParseCleanShutdown(path string, data []byte) (int64, error) {
	var m cleanShutdown
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return 0, &seglog.CorruptionError{Path: path, Offset: dec.InputOffset(), Err: ErrMalformed, Reason: err.Error()}
	}
	if m.Version != 0 {
		return 0, &seglog.CorruptionError{Path: path, Offset: -1, Err: ErrMalformed, Reason: fmt.Sprintf("version %d is not 0", m.Version)}
	}
	return m.BrokerEpoch, nil
}

// TakeCleanShutdown reports whether the clean-shutdown marker is in dir,
// with the broker epoch it holds (-1 if unreadable), and deletes it at once
// (syncing the directory), so that a crash while loading counts as an
// unclean shutdown.
func TakeCleanShutdown(fsys vfs.FS, dir string) (clean bool, brokerEpoch int64, err error) {
	fsys = vfs.OrOS(fsys)
	path := filepath.Join(dir, CleanShutdownFile)
	data, err := readFile(fsys, path)
	if err != nil || data == nil {
		return false, -1, err
	}
	brokerEpoch = -1
	var m cleanShutdown
	if json.Unmarshal(data, &m) == nil {
		brokerEpoch = m.BrokerEpoch
	}
	if err := fsys.Remove(path); err != nil {
		return true, brokerEpoch, fmt.Errorf("checkpoint: deleting %s: %w", path, err)
	}
	return true, brokerEpoch, fsys.SyncDir(dir)
}
