package tablet

import (
	"fmt"
	"strconv"
)

// BrokerSynonym is a broker config that sets the default of a topic
// config (Kafka's synonyms: log.retention.hours for retention.ms), its
// value in units of Scale of the topic config's (3600000 for hours).
type BrokerSynonym struct {
	Broker, Topic string
	Scale         int64
}

// BrokerSynonyms are the broker configs of topic defaults, Kafka's names;
// of several for one topic config, the first listed wins.
var BrokerSynonyms = []BrokerSynonym{
	{"log.segment.bytes", "segment.bytes", 1},
	{"log.roll.ms", "segment.ms", 1},
	{"log.roll.hours", "segment.ms", 3600_000},
	{"log.roll.jitter.ms", "segment.jitter.ms", 1},
	{"log.index.size.max.bytes", "segment.index.bytes", 1},
	{"log.index.interval.bytes", "index.interval.bytes", 1},
	{"log.retention.ms", "retention.ms", 1},
	{"log.retention.minutes", "retention.ms", 60_000},
	{"log.retention.hours", "retention.ms", 3600_000},
	{"log.retention.bytes", "retention.bytes", 1},
	{"log.local.retention.ms", "local.retention.ms", 1},
	{"log.local.retention.bytes", "local.retention.bytes", 1},
	{"log.flush.interval.messages", "flush.messages", 1},
	{"log.flush.interval.ms", "flush.ms", 1},
	{"message.max.bytes", "max.message.bytes", 1},
	{"log.message.timestamp.type", "message.timestamp.type", 1},
	{"log.message.timestamp.before.max.ms", "message.timestamp.before.max.ms", 1},
	{"log.message.timestamp.after.max.ms", "message.timestamp.after.max.ms", 1},
	{"log.preallocate", "preallocate", 1},
	{"log.segment.delete.delay.ms", "file.delete.delay.ms", 1},
	{"log.cleanup.policy", "cleanup.policy", 1},
	{"log.cleaner.min.cleanable.ratio", "min.cleanable.dirty.ratio", 1},
	{"log.cleaner.min.compaction.lag.ms", "min.compaction.lag.ms", 1},
	{"log.cleaner.max.compaction.lag.ms", "max.compaction.lag.ms", 1},
	{"log.cleaner.delete.retention.ms", "delete.retention.ms", 1},
	{"compression.type", "compression.type", 1},
}

// BrokerSynonymOf returns the synonym a broker config is; false if it sets
// no topic default.
func BrokerSynonymOf(broker string) (BrokerSynonym, bool) {
	for _, s := range BrokerSynonyms {
		if s.Broker == broker {
			return s, true
		}
	}
	return BrokerSynonym{}, false
}

// SetFrom sets c's topic config from the broker config's value, scaled
// (a negative number, "no limit", is kept as it is).
func (s BrokerSynonym) SetFrom(c *Config, value string) error {
	if s.Scale > 1 {
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			return fmt.Errorf("%w: %s=%q: not a whole number", ErrConfig, s.Broker, value)
		}
		if n > 0 {
			n *= s.Scale
		}
		value = strconv.FormatInt(n, 10)
	}
	return c.Set(s.Topic, value)
}
