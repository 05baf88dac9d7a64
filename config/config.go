// Package config is seglog's one table of configurations: every broker
// config `seglog serve` takes and every topic config, each defined once —
// its Kafka name, type, default, valid values, whether it may change at
// run time, and a line of documentation. `serve` parses and checks
// against it, DescribeConfigs describes from it, AlterConfigs and
// IncrementalAlterConfigs check dynamic broker configs by it, and the
// README's and docs/configuration.md's tables are generated from it
// (TestDocs checks them; go test ./config -run TestDocs -update writes
// them).
package config

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Type is a config's type, with the numbers DescribeConfigs gives them
// (KIP-569's config_type: a broker sends int8(Type)). The package imports
// no Kafka client: the engine (tablet) reads the table too.
type Type int8

// The types.
const (
	Boolean Type = iota + 1
	String
	Int
	Short
	Long
	Double
	List
	Class
	Password
)

func (t Type) String() string {
	if t < Boolean || t > Password {
		return "UNKNOWN"
	}
	return [...]string{"BOOLEAN", "STRING", "INT", "SHORT", "LONG", "DOUBLE", "LIST", "CLASS", "PASSWORD"}[t-1]
}

// maxMs is the most milliseconds a duration config holds.
const maxMs = math.MaxInt64 / 1e6

// Def is one config.
type Def struct {
	// Name is Kafka's name (seglog's own start with "seglog.").
	Name string
	Type Type
	// Default is the value when none is set, as DescribeConfigs shows it
	// ("" with none, or one the doc line says how it is worked out).
	Default string
	// Min and Max bound a number (both 0: no bound); Values are a
	// string's (or each item of a list's) valid values (none: any).
	Min, Max float64
	Values   []string
	// Dynamic: AlterConfigs may change it at run time (a broker config:
	// per broker or cluster-wide).
	Dynamic bool
	// Topic, for a broker config, is the topic config it is the default
	// of (log.retention.hours → retention.ms), its value times Scale (0:
	// 1) in the topic config's unit.
	Topic string
	Scale int64
	// RunTime: set only at run time (AlterConfigs, seglog configs
	// --alter), not among serve's configs.
	RunTime bool
	// Doc is a line of documentation.
	Doc string
}

// Broker is the broker configs' table; Topic the topic configs'.
var (
	brokerByName = index(Broker)
	topicByName  = index(Topic)
)

func index(defs []Def) map[string]*Def {
	m := make(map[string]*Def, len(defs))
	for i := range defs {
		if _, dup := m[defs[i].Name]; dup {
			panic("config: " + defs[i].Name + " is defined twice") // (a programming error, at init)
		}
		m[defs[i].Name] = &defs[i]
	}
	return m
}

// BrokerDef returns a broker config's definition.
func BrokerDef(name string) (Def, bool) {
	d, ok := brokerByName[name]
	if !ok {
		return Def{}, false
	}
	return *d, true
}

// TopicDef returns a topic config's definition.
func TopicDef(name string) (Def, bool) {
	d, ok := topicByName[name]
	if !ok {
		return Def{}, false
	}
	return *d, true
}

// TopicDefaults are the broker configs that are topic configs' defaults.
func TopicDefaults() []Def {
	var out []Def
	for _, d := range Broker {
		if d.Topic != "" {
			out = append(out, d)
		}
	}
	return out
}

// Check reports whether v is a valid value of the config: of its type,
// within its bounds, one of its values.
func (d Def) Check(v string) error {
	switch d.Type {
	case Boolean:
		if v != "true" && v != "false" {
			return fmt.Errorf("%q is not true or false", v)
		}
	case Int, Short, Long:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || d.bounded() && (float64(n) < d.Min || float64(n) > d.Max) {
			return fmt.Errorf("%q is not an integer in %s", v, d.Range())
		}
	case Double:
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(f) || d.bounded() && (f < d.Min || f > d.Max) {
			return fmt.Errorf("%q is not a number in %s", v, d.Range())
		}
	case List:
		if len(d.Values) > 0 {
			for _, item := range strings.Split(v, ",") {
				if item = strings.TrimSpace(item); !slices.Contains(d.Values, item) {
					return fmt.Errorf("%q is not one of %s", item, strings.Join(d.Values, ", "))
				}
			}
		}
	default:
		if len(d.Values) > 0 && !slices.Contains(d.Values, v) {
			return fmt.Errorf("%q is not one of %s", v, strings.Join(d.Values, ", "))
		}
	}
	return nil
}

func (d Def) bounded() bool { return d.Min != 0 || d.Max != 0 }

// Range is the valid values as the docs write them: [lo, hi], [lo, …],
// the values, or "" for any.
func (d Def) Range() string {
	switch {
	case len(d.Values) > 0:
		return strings.Join(d.Values, ", ")
	case !d.bounded():
		return ""
	}
	num := func(f float64) string {
		switch {
		case f == math.MaxInt64 || f == maxMs || math.IsInf(f, 1):
			return "…"
		case f == math.MaxInt32:
			return "2³¹−1"
		case f == math.MaxInt16:
			return "2¹⁵−1"
		}
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return "[" + num(d.Min) + ", " + num(d.Max) + "]"
}

// TypeName is the type as Kafka's docs name it.
func (d Def) TypeName() string {
	return strings.ToLower(d.Type.String())
}
