package tablet

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/internal/nearest"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/segment"
	"github.com/seglog/seglog/vfs"
)

// Config is a tablet's topic configuration, under Kafka's names (docs/format.md §6).
// The zero Config is not valid: start from DefaultConfig.
type Config struct {
	// SegmentBytes: segment.bytes. The default is 1073741824.
	SegmentBytes int64
	// SegmentMs: segment.ms. The default is 604800000 (7 days).
	SegmentMs int64
	// SegmentJitterMs: segment.jitter.ms. The default is 0.
	SegmentJitterMs int64
	// SegmentIndexBytes: segment.index.bytes. The default is 10485760.
	SegmentIndexBytes int
	// IndexIntervalBytes: index.interval.bytes; 0 gives every append
	// after the first an entry. The default is 4096.
	IndexIntervalBytes int
	// RetentionMs: retention.ms, -1 for no limit. The default is
	// 604800000 (7 days).
	RetentionMs int64
	// RetentionBytes: retention.bytes, -1 for no limit. The default is -1.
	RetentionBytes int64
	// LocalRetentionMs and LocalRetentionBytes: local.retention.ms and
	// local.retention.bytes, how much of the log stays local once a tier
	// holds it; -2 means retention.ms / retention.bytes, -1 no limit. The
	// defaults are -2.
	LocalRetentionMs    int64
	LocalRetentionBytes int64
	// FlushMessages: flush.messages, how many records may be appended
	// before a flush. The default is MaxInt64 (the page cache decides).
	FlushMessages int64
	// FlushMs: flush.ms, how long appended data may wait for a flush. The
	// default is MaxInt64.
	FlushMs int64
	// MaxMessageBytes: max.message.bytes, the largest batch. The default
	// is 1048588.
	MaxMessageBytes int
	// TimestampType: message.timestamp.type. The default is CreateTime.
	TimestampType record.TimestampType
	// TimestampBeforeMaxMs and TimestampAfterMaxMs:
	// message.timestamp.before.max.ms and message.timestamp.after.max.ms.
	// The defaults are MaxInt64 (no bound).
	TimestampBeforeMaxMs int64
	TimestampAfterMaxMs  int64
	// Preallocate: preallocate. The default is false.
	Preallocate bool
	// CompressionType: compression.type, the codec batches are stored
	// with: "producer" keeps the producer's, "uncompressed", "gzip",
	// "snappy", "lz4" or "zstd" recompress a batch compressed otherwise as
	// it is appended (as Kafka's broker does; control batches stay as
	// they are). The default is "producer".
	CompressionType string
	// RemoteStorageEnable: remote.storage.enable, whether the tablet is
	// tiered to an object store (KIP-405): seglog tier and the tier service
	// tier only the tablets that enable it (and those tiered before). The
	// default is false.
	RemoteStorageEnable bool
	// FileDeleteDelayMs: file.delete.delay.ms, how long a deleted segment's
	// files stay (renamed .deleted) before they are unlinked. The default
	// is 60000.
	FileDeleteDelayMs int64
	// DurableAcks: seglog.durable.acks (beyond Kafka), for a broker on the
	// tablet: an acks=-1 produce is answered only after the fsync that
	// covers it (the broker appends with AppendOptions.Sync). The engine
	// itself does not read it. The default is false.
	DurableAcks bool
	// CleanupPolicy: cleanup.policy, "delete", "compact" or
	// "compact,delete". With compact the cleaner keeps the last record of
	// every key (and refuses records without a key); retention.ms and
	// retention.bytes delete segments only with delete. The default is
	// delete.
	CleanupPolicy string
	// MinCleanableDirtyRatio: min.cleanable.dirty.ratio, the share of the
	// cleanable log not cleaned yet above which the cleaner takes the
	// tablet. The default is 0.5.
	MinCleanableDirtyRatio float64
	// MinCompactionLagMs: min.compaction.lag.ms, how old a record must be
	// before the cleaner may remove it. The default is 0.
	MinCompactionLagMs int64
	// MaxCompactionLagMs: max.compaction.lag.ms, how old a record not yet
	// cleaned may become before the cleaner takes the tablet whatever its
	// dirty ratio. The default is MaxInt64.
	MaxCompactionLagMs int64
	// DeleteRetentionMs: delete.retention.ms, how long a tombstone (and a
	// transaction marker whose data is gone) survives past the cleaned
	// point. The default is 86400000 (1 day).
	DeleteRetentionMs int64
	// set marks the keys Set was called for (bit i: ConfigKeys()[i]): the
	// topic's own configs, kept in its config file even when equal to the
	// defaults, as Kafka keeps a topic's overrides.
	set uint64
}

// Cleanup policies (cleanup.policy).
const (
	PolicyDelete        = "delete"
	PolicyCompact       = "compact"
	PolicyCompactDelete = "compact,delete"
)

// Compacted says the cleaner compacts the tablet (cleanup.policy holds
// compact).
func (c Config) Compacted() bool { return strings.Contains(c.CleanupPolicy, PolicyCompact) }

// Deletes says retention deletes old segments (cleanup.policy holds
// delete).
func (c Config) Deletes() bool { return strings.Contains(c.CleanupPolicy, PolicyDelete) }

// compressionTarget reads a compression.type: the codec batches are stored
// with, or keep false for "producer".
func compressionTarget(v string) (record.Compression, bool, error) {
	switch v {
	case "producer", "":
		return record.None, false, nil
	case "uncompressed":
		return record.None, true, nil
	}
	c, err := record.ParseCompression(v)
	if err != nil || c == record.None {
		return record.None, false, fmt.Errorf("%q is not producer, uncompressed, gzip, snappy, lz4 or zstd", v)
	}
	return c, true, nil
}

// DefaultConfig returns Kafka's defaults (docs/format.md §6).
func DefaultConfig() Config {
	return Config{
		CompressionType:        "producer",
		SegmentBytes:           segment.DefaultSegmentBytes,
		SegmentMs:              segment.DefaultSegmentMs,
		SegmentIndexBytes:      segment.DefaultMaxIndexSize,
		IndexIntervalBytes:     segment.DefaultIndexIntervalBytes,
		RetentionMs:            7 * 24 * 3600 * 1000,
		RetentionBytes:         -1,
		LocalRetentionMs:       -2,
		LocalRetentionBytes:    -2,
		FlushMessages:          math.MaxInt64,
		FlushMs:                math.MaxInt64,
		MaxMessageBytes:        record.DefaultMaxMessageBytes,
		TimestampType:          record.CreateTime,
		TimestampBeforeMaxMs:   math.MaxInt64,
		TimestampAfterMaxMs:    math.MaxInt64,
		FileDeleteDelayMs:      60000,
		CleanupPolicy:          PolicyDelete,
		MinCleanableDirtyRatio: 0.5,
		MaxCompactionLagMs:     math.MaxInt64,
		DeleteRetentionMs:      24 * 3600 * 1000,
	}
}

// ErrConfig is the cause of an unknown key or a bad value.
var ErrConfig = seglog.NewKafkaError("tablet: invalid config", 40)

// configKey is one settable key: how to read it into a Config and how to
// print it back.
type configKey struct {
	set func(c *Config, v string) error
	get func(c *Config) string
}

func int64Key(field func(*Config) *int64, lo int64) configKey {
	return configKey{
		set: func(c *Config, v string) error {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < lo {
				return fmt.Errorf("%q is not an integer ≥ %d", v, lo)
			}
			*field(c) = n
			return nil
		},
		get: func(c *Config) string { return strconv.FormatInt(*field(c), 10) },
	}
}

func intKey(field func(*Config) *int, lo int) configKey {
	return configKey{
		set: func(c *Config, v string) error {
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil || int(n) < lo {
				return fmt.Errorf("%q is not an integer in [%d, %d]", v, lo, math.MaxInt32)
			}
			*field(c) = int(n)
			return nil
		},
		get: func(c *Config) string { return strconv.Itoa(*field(c)) },
	}
}

var configKeys = map[string]configKey{
	"segment.bytes":                   int64Key(func(c *Config) *int64 { return &c.SegmentBytes }, record.PrefixSize),
	"segment.ms":                      int64Key(func(c *Config) *int64 { return &c.SegmentMs }, 1),
	"segment.jitter.ms":               int64Key(func(c *Config) *int64 { return &c.SegmentJitterMs }, 0),
	"segment.index.bytes":             intKey(func(c *Config) *int { return &c.SegmentIndexBytes }, 12),
	"index.interval.bytes":            intKey(func(c *Config) *int { return &c.IndexIntervalBytes }, 0),
	"retention.ms":                    int64Key(func(c *Config) *int64 { return &c.RetentionMs }, -1),
	"retention.bytes":                 int64Key(func(c *Config) *int64 { return &c.RetentionBytes }, -1),
	"local.retention.ms":              int64Key(func(c *Config) *int64 { return &c.LocalRetentionMs }, -2),
	"local.retention.bytes":           int64Key(func(c *Config) *int64 { return &c.LocalRetentionBytes }, -2),
	"flush.messages":                  int64Key(func(c *Config) *int64 { return &c.FlushMessages }, 1),
	"flush.ms":                        int64Key(func(c *Config) *int64 { return &c.FlushMs }, 0),
	"max.message.bytes":               intKey(func(c *Config) *int { return &c.MaxMessageBytes }, 0),
	"message.timestamp.before.max.ms": int64Key(func(c *Config) *int64 { return &c.TimestampBeforeMaxMs }, 0),
	"message.timestamp.after.max.ms":  int64Key(func(c *Config) *int64 { return &c.TimestampAfterMaxMs }, 0),
	"file.delete.delay.ms":            int64Key(func(c *Config) *int64 { return &c.FileDeleteDelayMs }, 0),
	"message.timestamp.type": {
		set: func(c *Config, v string) error {
			switch v {
			case "CreateTime":
				c.TimestampType = record.CreateTime
			case "LogAppendTime":
				c.TimestampType = record.LogAppendTime
			default:
				return fmt.Errorf("%q is not CreateTime or LogAppendTime", v)
			}
			return nil
		},
		get: func(c *Config) string {
			if c.TimestampType == record.LogAppendTime {
				return "LogAppendTime"
			}
			return "CreateTime"
		},
	},
	"preallocate":           boolKey(func(c *Config) *bool { return &c.Preallocate }),
	"remote.storage.enable": boolKey(func(c *Config) *bool { return &c.RemoteStorageEnable }),
	"compression.type": {
		set: func(c *Config, v string) error {
			if _, _, err := compressionTarget(v); err != nil {
				return err
			}
			c.CompressionType = v
			return nil
		},
		get: func(c *Config) string { return c.CompressionType },
	},
	"seglog.durable.acks":   boolKey(func(c *Config) *bool { return &c.DurableAcks }),
	"min.compaction.lag.ms": int64Key(func(c *Config) *int64 { return &c.MinCompactionLagMs }, 0),
	"max.compaction.lag.ms": int64Key(func(c *Config) *int64 { return &c.MaxCompactionLagMs }, 1),
	"delete.retention.ms":   int64Key(func(c *Config) *int64 { return &c.DeleteRetentionMs }, 0),
	"cleanup.policy": {
		set: func(c *Config, v string) error {
			var compact, del bool
			for _, p := range strings.Split(v, ",") {
				switch strings.TrimSpace(p) {
				case PolicyCompact:
					compact = true
				case PolicyDelete:
					del = true
				default:
					return fmt.Errorf("%q is not a list of delete and compact", v)
				}
			}
			switch {
			case compact && del:
				c.CleanupPolicy = PolicyCompactDelete
			case compact:
				c.CleanupPolicy = PolicyCompact
			default:
				c.CleanupPolicy = PolicyDelete
			}
			return nil
		},
		get: func(c *Config) string { return c.CleanupPolicy },
	},
	"min.cleanable.dirty.ratio": {
		set: func(c *Config, v string) error {
			r, err := strconv.ParseFloat(v, 64)
			if err != nil || r < 0 || r > 1 || math.IsNaN(r) {
				return fmt.Errorf("%q is not a number in [0, 1]", v)
			}
			c.MinCleanableDirtyRatio = r
			return nil
		},
		get: func(c *Config) string { return strconv.FormatFloat(c.MinCleanableDirtyRatio, 'g', -1, 64) },
	},
}

// boolKey is a config key of a boolean field: true or false, nothing else.
func boolKey(field func(*Config) *bool) configKey {
	return configKey{
		set: func(c *Config, v string) error {
			if v != "true" && v != "false" {
				return fmt.Errorf("%q is not true or false", v)
			}
			*field(c) = v == "true"
			return nil
		},
		get: func(c *Config) string { return strconv.FormatBool(*field(c)) },
	}
}

// ConfigKeys returns the keys Set accepts, sorted.
func ConfigKeys() []string {
	keys := make([]string, 0, len(configKeys))
	for k := range configKeys {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Set sets one config by its Kafka name. An unknown key or a bad value
// fails with ErrConfig and changes nothing.
func (c *Config) Set(key, value string) error {
	k, ok := configKeys[key]
	if !ok {
		if near := nearest.Name(key, ConfigKeys()); near != "" {
			return fmt.Errorf("%w: unknown key %q: did you mean %q?", ErrConfig, key, near)
		}
		return fmt.Errorf("%w: unknown key %q (known: %s)", ErrConfig, key, strings.Join(ConfigKeys(), ", "))
	}
	next := *c
	if err := k.set(&next, strings.TrimSpace(value)); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrConfig, key, err)
	}
	if err := next.Validate(); err != nil {
		return err
	}
	next.set |= keyBits[key]
	*c = next
	return nil
}

// keyBits are the keys' bits in Config.set.
var keyBits = func() map[string]uint64 {
	bits := map[string]uint64{}
	for i, k := range ConfigKeys() {
		bits[k] = 1 << i
	}
	return bits
}()

// IsSet reports whether key was set (with Set, or read from a tablet's
// config file): a topic's own config rather than a default, whatever its
// value.
func (c Config) IsSet(key string) bool { return c.set&keyBits[key] != 0 }

// Unset marks key as not set, keeping its value: it follows the defaults
// again once its value is theirs.
func (c *Config) Unset(key string) { c.set &^= keyBits[key] }

// Defaults is c with no key marked as set: the configuration a tablet
// takes its values from when it sets none itself.
func (c Config) Defaults() Config {
	c.set = 0
	return c
}

// Get returns one config by its Kafka name.
func (c *Config) Get(key string) (string, bool) {
	k, ok := configKeys[key]
	if !ok {
		return "", false
	}
	return k.get(c), true
}

// Validate reports a config out of range, or that does not hold together.
func (c *Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, args...))
	}
	switch {
	case c.SegmentBytes < record.PrefixSize || c.SegmentBytes > math.MaxInt32:
		return bad("segment.bytes %d is not in [%d, %d]", c.SegmentBytes, record.PrefixSize, math.MaxInt32)
	case c.SegmentMs <= 0 || c.SegmentJitterMs < 0:
		return bad("segment.ms %d must be positive and segment.jitter.ms %d not negative", c.SegmentMs, c.SegmentJitterMs)
	case c.SegmentIndexBytes < 12:
		return bad("segment.index.bytes %d holds no time-index entry", c.SegmentIndexBytes)
	case c.IndexIntervalBytes < 0:
		return bad("index.interval.bytes %d is negative", c.IndexIntervalBytes)
	case c.RetentionMs < -1 || c.RetentionBytes < -1:
		return bad("retention.ms %d and retention.bytes %d must be -1 or more", c.RetentionMs, c.RetentionBytes)
	case c.LocalRetentionMs < -2 || c.LocalRetentionBytes < -2:
		return bad("local.retention.ms %d and local.retention.bytes %d must be -2 or more", c.LocalRetentionMs, c.LocalRetentionBytes)
	case c.FlushMessages < 1 || c.FlushMs < 0:
		return bad("flush.messages %d must be positive and flush.ms %d not negative", c.FlushMessages, c.FlushMs)
	case c.MaxMessageBytes < record.HeaderSize:
		return bad("max.message.bytes %d is below a batch header (%d bytes)", c.MaxMessageBytes, record.HeaderSize)
	case c.TimestampType != record.CreateTime && c.TimestampType != record.LogAppendTime:
		return bad("message.timestamp.type %d is unknown", c.TimestampType)
	case c.TimestampBeforeMaxMs < 0 || c.TimestampAfterMaxMs < 0:
		return bad("message.timestamp.before/after.max.ms must not be negative")
	case c.FileDeleteDelayMs < 0:
		return bad("file.delete.delay.ms %d is negative", c.FileDeleteDelayMs)
	case c.CleanupPolicy != PolicyDelete && c.CleanupPolicy != PolicyCompact && c.CleanupPolicy != PolicyCompactDelete:
		return bad("cleanup.policy %q is not delete, compact or compact,delete", c.CleanupPolicy)
	case c.MinCleanableDirtyRatio < 0 || c.MinCleanableDirtyRatio > 1 || math.IsNaN(c.MinCleanableDirtyRatio):
		return bad("min.cleanable.dirty.ratio %v is not in [0, 1]", c.MinCleanableDirtyRatio)
	case c.MinCompactionLagMs < 0 || c.MaxCompactionLagMs < 1 || c.DeleteRetentionMs < 0:
		return bad("min.compaction.lag.ms %d and delete.retention.ms %d must not be negative, max.compaction.lag.ms %d must be positive",
			c.MinCompactionLagMs, c.DeleteRetentionMs, c.MaxCompactionLagMs)
	case c.RemoteStorageEnable && c.Compacted():
		return bad("remote.storage.enable is not supported with cleanup.policy %s (as in Kafka): a tier's objects are never recopied, so a compacted log stays local", c.CleanupPolicy)
	case c.MinCompactionLagMs > c.MaxCompactionLagMs:
		return bad("min.compaction.lag.ms %d is above max.compaction.lag.ms %d", c.MinCompactionLagMs, c.MaxCompactionLagMs)
	}
	return nil
}

// segmentOptions returns the segment options the config gives.
func (c *Config) segmentOptions() segment.Options {
	interval := c.IndexIntervalBytes
	if interval == 0 {
		interval = segment.IndexEveryAppend
	}
	return segment.Options{IndexIntervalBytes: interval, MaxIndexSize: c.SegmentIndexBytes,
		SegmentBytes: c.SegmentBytes, Preallocate: c.Preallocate, SegmentMs: c.SegmentMs,
		SegmentJitterMs: c.SegmentJitterMs}
}

// ConfigFile is the file in a tablet directory that keeps its configs, as
// Java properties: every one that differs from Kafka's defaults (a broker's
// defaults at the tablet's creation among them, so that a tool opening the
// directory without them keeps the same retention), and those the tablet
// sets itself (Config.IsSet) even when equal to the defaults. A comment
// line, setLine, names the ones it sets; a file without it (written before
// seglog kept it) sets none.
const ConfigFile = "seglog.properties"

// setLine starts the comment line of ConfigFile that lists the configs
// the tablet sets itself.
const setLine = "# set by the topic: "

// formatConfig renders c's configs that differ from Kafka's defaults or
// that c sets.
func formatConfig(c Config) []byte {
	def := DefaultConfig()
	var sb strings.Builder
	sb.WriteString("# seglog tablet configuration (Kafka topic config names)\n")
	var set []string
	for _, k := range ConfigKeys() {
		if c.IsSet(k) {
			set = append(set, k)
		}
	}
	if len(set) > 0 {
		sb.WriteString(setLine + strings.Join(set, ",") + "\n")
	}
	for _, k := range ConfigKeys() {
		v, _ := c.Get(k)
		if d, _ := def.Get(k); v != d || c.IsSet(k) {
			fmt.Fprintf(&sb, "%s=%s\n", k, v)
		}
	}
	return []byte(sb.String())
}

// readConfig reads a tablet's config file over the defaults; a missing
// file gives the defaults.
func readConfig(fsys vfs.FS, path string) (Config, error) {
	c := DefaultConfig()
	data, err := vfs.ReadFile(fsys, path)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, err
	}
	props := checkpoint.ParseProperties(data)
	for _, k := range slices.Sorted(maps.Keys(props)) {
		if err := c.Set(k, props[k]); err != nil {
			return c, fmt.Errorf("%s: %w", path, err)
		}
	}
	c = c.Defaults()
	for _, line := range strings.Split(string(data), "\n") {
		if keys, ok := strings.CutPrefix(strings.TrimSpace(line), setLine); ok {
			for _, k := range strings.Split(keys, ",") {
				c.set |= keyBits[strings.TrimSpace(k)]
			}
		}
	}
	return c, nil
}

// writeConfig writes a tablet's config file atomically.
func writeConfig(fsys vfs.FS, path string, c Config) error {
	return vfs.WriteAtomic(fsys, path, formatConfig(c))
}
