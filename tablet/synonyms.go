package tablet

import (
	"fmt"
	"strconv"

	"github.com/seglog/seglog/config"
)

// BrokerSynonym is a broker config that sets the default of a topic
// config (Kafka's synonyms: log.retention.hours for retention.ms), its
// value in units of Scale of the topic config's (3600000 for hours).
type BrokerSynonym struct {
	Broker, Topic string
	Scale         int64
}

// BrokerSynonyms are the broker configs of topic defaults, Kafka's names
// (package config's table: the broker configs that name a Topic); of
// several for one topic config, the first listed wins.
var BrokerSynonyms = func() []BrokerSynonym {
	var out []BrokerSynonym
	for _, d := range config.TopicDefaults() {
		out = append(out, BrokerSynonym{Broker: d.Name, Topic: d.Topic, Scale: max(d.Scale, 1)})
	}
	return out
}()

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
