package checkpoint

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/seglog/seglog/vfs"
)

// TopicPartition names a tablet.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// Compare orders by topic, then partition.
func (tp TopicPartition) Compare(o TopicPartition) int {
	if c := strings.Compare(tp.Topic, o.Topic); c != 0 {
		return c
	}
	return cmp.Compare(tp.Partition, o.Partition)
}

func (tp TopicPartition) String() string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }

// Offsets is an offset checkpoint: an offset per tablet.
type Offsets map[TopicPartition]int64

// ReadOffsets reads an offset checkpoint (recovery point, log start,
// high watermark, cleaner). A missing or empty file has no entries.
func ReadOffsets(fsys vfs.FS, path string) (Offsets, error) {
	fsys = vfs.OrOS(fsys)
	data, err := readFile(fsys, path)
	if err != nil {
		return nil, err
	}
	return ParseOffsets(path, data)
}

// ParseOffsets parses the contents of an offset checkpoint; path is only
// for errors.
func ParseOffsets(path string, data []byte) (Offsets, error) {
	entries, err := parse(path, data, 3)
	if err != nil {
		return nil, err
	}
	out := Offsets{}
	for i, e := range entries {
		p, err1 := strconv.ParseInt(e[1], 10, 32)
		o, err2 := strconv.ParseInt(e[2], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, malformed(path, data, i+3, "%q is not topic, partition, offset", strings.Join(e, " "))
		}
		out[TopicPartition{e[0], int32(p)}] = o
	}
	return out, nil
}

// Format renders the checkpoint, sorted by topic and partition.
func (o Offsets) Format() []byte {
	keys := make([]TopicPartition, 0, len(o))
	for tp := range o {
		keys = append(keys, tp)
	}
	slices.SortFunc(keys, func(a, b TopicPartition) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition) - int(b.Partition)
	})
	lines := make([]string, len(keys))
	for i, tp := range keys {
		lines[i] = fmt.Sprintf("%s %d %d", tp.Topic, tp.Partition, o[tp])
	}
	return format(lines)
}

// WriteOffsets replaces the checkpoint at path atomically.
func WriteOffsets(fsys vfs.FS, path string, o Offsets) error {
	fsys = vfs.OrOS(fsys)
	return vfs.WriteAtomic(fsys, path, o.Format())
}

// EpochEntry is a leader epoch and the first offset written in it.
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

// ReadEpochs reads a leader-epoch-checkpoint. A missing or empty file has
// no entries.
func ReadEpochs(fsys vfs.FS, path string) ([]EpochEntry, error) {
	fsys = vfs.OrOS(fsys)
	data, err := readFile(fsys, path)
	if err != nil {
		return nil, err
	}
	return ParseEpochs(path, data)
}

// ParseEpochs parses the contents of a leader-epoch-checkpoint.
func ParseEpochs(path string, data []byte) ([]EpochEntry, error) {
	entries, err := parse(path, data, 2)
	if err != nil {
		return nil, err
	}
	out := make([]EpochEntry, len(entries))
	for i, e := range entries {
		ep, err1 := strconv.ParseInt(e[0], 10, 32)
		o, err2 := strconv.ParseInt(e[1], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, malformed(path, data, i+3, "%q is not epoch, start offset", strings.Join(e, " "))
		}
		out[i] = EpochEntry{int32(ep), o}
	}
	return out, nil
}

// FormatEpochs renders a leader-epoch-checkpoint.
func FormatEpochs(entries []EpochEntry) []byte {
	lines := make([]string, len(entries))
	for i, e := range entries {
		lines[i] = fmt.Sprintf("%d %d", e.Epoch, e.StartOffset)
	}
	return format(lines)
}

// WriteEpochs replaces the leader-epoch-checkpoint at path atomically.
func WriteEpochs(fsys vfs.FS, path string, entries []EpochEntry) error {
	fsys = vfs.OrOS(fsys)
	return vfs.WriteAtomic(fsys, path, FormatEpochs(entries))
}

// Tablet directory suffixes: part of the on-disk format; never change.
const (
	// DeleteDirSuffix ends the name of a tablet directory being deleted
	// (<topic>-<partition>.<uuid>-delete).
	DeleteDirSuffix = "-delete"
	// FutureDirSuffix ends the name of a tablet being moved between
	// directories.
	FutureDirSuffix = "-future"
	// StrayDirSuffix ends the name of a tablet no longer assigned here.
	StrayDirSuffix = "-stray"
)

// ValidateTopic checks Kafka's rule for topic names: 1 to 249 characters of
// [a-zA-Z0-9._-], and neither "." nor "..".
func ValidateTopic(topic string) error {
	if topic == "" || len(topic) > 249 || topic == "." || topic == ".." {
		return fmt.Errorf("checkpoint: invalid topic name %q", topic)
	}
	for _, c := range topic {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("checkpoint: invalid topic name %q: %q is not allowed", topic, c)
		}
	}
	return nil
}

// DirName returns the name of a tablet's directory: <topic>-<partition>.
func (tp TopicPartition) DirName() string { return tp.String() }

// ParseDirName parses a tablet directory name. suffix is "" for a live
// tablet, or DeleteDirSuffix, FutureDirSuffix or StrayDirSuffix (whose
// names carry a .<uuid> before the suffix).
func ParseDirName(name string) (tp TopicPartition, suffix string, err error) {
	for _, s := range []string{DeleteDirSuffix, FutureDirSuffix, StrayDirSuffix} {
		if strings.HasSuffix(name, s) {
			dot := strings.LastIndexByte(name, '.')
			if dot < 0 {
				return TopicPartition{}, "", fmt.Errorf("checkpoint: %q is not a tablet directory", name)
			}
			name, suffix = name[:dot], s
			break
		}
	}
	dash := strings.LastIndexByte(name, '-')
	if dash <= 0 {
		return TopicPartition{}, "", fmt.Errorf("checkpoint: %q is not a tablet directory", name)
	}
	p, err := strconv.ParseInt(name[dash+1:], 10, 32)
	if err != nil || p < 0 || strings.TrimLeft(name[dash+1:], "0123456789") != "" {
		return TopicPartition{}, "", fmt.Errorf("checkpoint: %q is not a tablet directory", name)
	}
	tp = TopicPartition{Topic: name[:dash], Partition: int32(p)}
	if err := ValidateTopic(tp.Topic); err != nil {
		return TopicPartition{}, "", err
	}
	return tp, suffix, nil
}
