package broker

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/config"
	"github.com/seglog/seglog/tablet"
)

// The config APIs: topic and broker configs described, topic configs
// altered (whole or incrementally).

func init() {
	register(
		api{key: 32, min: 0, max: 4, handle: onCall(configsOf, (*configAPIs).describeConfigs),
			rule: ruleFor(ruleTopic, opDescribeConfigs, (*guard).authorizeDescribeConfigs)},
		api{key: 33, min: 0, max: 2, handle: onCall(configsOf, (*configAPIs).alterConfigs),
			rule: ruleFor(ruleTopic, opAlterConfigs, (*guard).authorizeAlterConfigs)},
		api{key: 44, min: 0, max: 1, handle: onCall(configsOf, (*configAPIs).incrementalAlterConfigs),
			rule: ruleFor(ruleTopic, opAlterConfigs, (*guard).authorizeIncrementalAlterConfigs)},
	)
}

// configAPIs are the config APIs: a topic's configs (the catalog's) and
// the broker's — the static ones it was started with and the dynamic ones
// (dynconfig.go) — described and altered.
type configAPIs struct {
	cat  catalog
	dyn  *dynamicConfigs
	m    *tablet.Manager // the topic defaults, and the topics that follow them
	opts *Options        // the static broker configs
}

// errText returns a pointer to an error's text, for a response's message.
func errText(format string, args ...any) *string {
	s := seglog.Humanize(fmt.Sprintf(format, args...))
	return &s
}

// errMessage is an error's text for a client: without Go package names.
func errMessage(err error) *string { return kmsg.StringPtr(seglog.Message(err)) }

// errConfigUnsupported is a Kafka topic config this broker lists but does
// not take (other than its one value).
var errConfigUnsupported = seglog.NewKafkaError("broker: config not supported", 40) // INVALID_CONFIG

// fixedConfigs are Kafka topic configs the engine has no field for: listed
// by DescribeConfigs with their one accepted value (setting that value is a
// no-op, any other is INVALID_CONFIG).
var fixedConfigs = map[string]struct {
	value string
	typ   kmsg.ConfigType
	why   string
}{
	"min.insync.replicas": {"1", kmsg.ConfigTypeInt, "a single-node broker has one replica"},
}

// configDoc is a config's documentation line from package config's
// table (nil: none).
func configDoc(rt kmsg.ConfigResourceType, name string) *string {
	def, ok := config.TopicDef(name)
	if rt == kmsg.ConfigResourceTypeBroker {
		def, ok = config.BrokerDef(name)
		if ok && def.Topic != "" {
			def.Doc = "the default of the topic config " + def.Topic
		}
	}
	if !ok || def.Doc == "" {
		return nil
	}
	return kmsg.StringPtr(def.Doc)
}

// topicConfigType is a topic config's type (package config's table).
func topicConfigType(name string) kmsg.ConfigType { return configType(config.TopicDef(name)) }

// configType is a definition's type, STRING for a config the table does
// not have.
func configType(d config.Def, ok bool) kmsg.ConfigType {
	if !ok {
		return kmsg.ConfigTypeString
	}
	return kmsg.ConfigType(d.Type)
}

// setTopicConfig sets one key of a topic config (a fixed config only to
// its value).
func setTopicConfig(c *tablet.Config, key string, value *string) error {
	if value == nil {
		return fmt.Errorf("%w: %s has no value", tablet.ErrConfig, key)
	}
	if f, ok := fixedConfigs[key]; ok {
		if *value != f.value {
			return fmt.Errorf("%w: %s=%s: only %s is served (%s)", errConfigUnsupported, key, *value, f.value, f.why)
		}
		return nil
	}
	return c.Set(key, *value)
}

// describedConfig is one config as DescribeConfigs lists it.
type describedConfig struct {
	name, value string
	source      kmsg.ConfigSource
	typ         kmsg.ConfigType
	readOnly    bool
	sensitive   bool // its value is not told (null), as Kafka hides passwords
	// synonyms are the config's values by precedence (this broker's
	// dynamic one, the cluster's, the static one) when more than one
	// is set; none: just its own.
	synonyms []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym
}

// sortedConfigs sorts configs by name, as Kafka lists them.
func sortedConfigs(cs []describedConfig) []describedConfig {
	slices.SortFunc(cs, func(a, b describedConfig) int { return strings.Compare(a.name, b.name) })
	return cs
}

// describeTopicConfig lists every topic config with its value and source:
// one the topic sets (even to the default) or whose value is not the
// broker's default is the topic's own (DYNAMIC_TOPIC_CONFIG), the broker's
// default other than Kafka's is STATIC_BROKER_CONFIG, else DEFAULT_CONFIG.
func (a *configAPIs) describeTopicConfig(topic string, c tablet.Config) []describedConfig {
	kafka, broker := tablet.DefaultConfig(), a.m.DefaultConfig()
	var out []describedConfig
	for _, k := range tablet.ConfigKeys() {
		v, _ := c.Get(k)
		bv, _ := broker.Get(k)
		kv, _ := kafka.Get(k)
		d := describedConfig{name: k, value: v, source: kmsg.ConfigSourceDefaultConfig, typ: topicConfigType(k)}
		switch src := a.dyn.source(k); {
		case v != bv || c.IsSet(k):
			d.source = kmsg.ConfigSourceDynamicTopicConfig
		case src != 0: // a dynamic broker config's
			d.source = src
		case bv != kv:
			d.source = kmsg.ConfigSourceStaticBrokerConfig
		}
		out = append(out, d)
	}
	return sortedConfigs(append(out, a.cat.replicationConfigs(topic)...))
}

// describeBrokerConfig lists the broker's configs: with cluster, the
// dynamic cluster-wide defaults (resource ""); else every one with its
// value and source (this broker's dynamic value, the cluster's, the static
// one), the topic defaults dynamic (not read-only), the others static.
func (a *configAPIs) describeBrokerConfig(cluster bool) []describedConfig {
	if cluster {
		var out []describedConfig
		for _, name := range a.dyn.names(true) {
			v, _ := a.dyn.valueAt(name, true)
			out = append(out, describedConfig{name: name, value: v, source: kmsg.ConfigSourceDynamicDefaultBrokerConfig, typ: brokerConfigType(name)})
		}
		return out
	}
	def := a.dyn.static
	get := func(k string) string { v, _ := def.Get(k); return v }
	static := func(name, value string, typ kmsg.ConfigType) describedConfig {
		return describedConfig{name: name, value: value, source: kmsg.ConfigSourceStaticBrokerConfig, typ: typ, readOnly: true}
	}
	authorizerName := "" // Kafka's default: none
	if a.opts.Authorizer {
		authorizerName = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
	}
	out := []describedConfig{
		static("node.id", strconv.Itoa(int(a.opts.NodeID)), kmsg.ConfigTypeInt),
		static("broker.id", strconv.Itoa(int(a.opts.NodeID)), kmsg.ConfigTypeInt),
		static("num.partitions", strconv.Itoa(int(a.opts.NumPartitions)), kmsg.ConfigTypeInt),
		static("auto.create.topics.enable", strconv.FormatBool(!a.opts.NoAutoCreate), kmsg.ConfigTypeBoolean),
		static("default.replication.factor", "1", kmsg.ConfigTypeInt),
		static("log.dirs", a.m.Dir(), kmsg.ConfigTypeString),
		static("log.segment.bytes", get("segment.bytes"), kmsg.ConfigTypeInt),
		static("log.retention.ms", get("retention.ms"), kmsg.ConfigTypeLong),
		static("log.retention.bytes", get("retention.bytes"), kmsg.ConfigTypeLong),
		static("log.cleanup.policy", get("cleanup.policy"), kmsg.ConfigTypeList),
		static("log.cleaner.min.cleanable.ratio", get("min.cleanable.dirty.ratio"), kmsg.ConfigTypeDouble),
		static("log.cleaner.delete.retention.ms", get("delete.retention.ms"), kmsg.ConfigTypeLong),
		static("log.cleaner.min.compaction.lag.ms", get("min.compaction.lag.ms"), kmsg.ConfigTypeLong),
		static("log.cleaner.max.compaction.lag.ms", get("max.compaction.lag.ms"), kmsg.ConfigTypeLong),
		static("message.max.bytes", get("max.message.bytes"), kmsg.ConfigTypeInt),
		static("socket.request.max.bytes", strconv.Itoa(int(a.opts.MaxRequestBytes)), kmsg.ConfigTypeInt),
		static("connections.max.idle.ms", strconv.FormatInt(a.opts.IdleTimeout.Milliseconds(), 10), kmsg.ConfigTypeLong),
		static("max.connections", strconv.Itoa(a.opts.MaxConnections), kmsg.ConfigTypeInt),
		static("seglog.durable.acks", strconv.FormatBool(a.opts.DurableAcks), kmsg.ConfigTypeBoolean),
		static("connections.max.reauth.ms", strconv.FormatInt(a.opts.ReauthInterval.Milliseconds(), 10), kmsg.ConfigTypeLong),
		static("authorizer.class.name", authorizerName, kmsg.ConfigTypeString),
	}
	for _, d := range config.Broker {
		if d.RunTime {
			out = append(out, static(d.Name, d.Default, kmsg.ConfigType(d.Type)))
		}
	}
	// The topic defaults are dynamic: each one's value is the highest
	// level's that sets it, its synonyms the levels below.
	for _, name := range append(a.dyn.names(false), a.dyn.names(true)...) {
		if !slices.ContainsFunc(out, func(d describedConfig) bool { return d.name == name }) {
			syn, _ := tablet.BrokerSynonymOf(name)
			v, _ := def.Get(syn.Topic)
			if syn.Scale > 1 {
				v = "" // the static value is the ms one's
			}
			out = append(out, static(name, v, brokerConfigType(name)))
		}
	}
	for i := range out {
		d := &out[i]
		if !isDynamicBrokerConfig(d.name) {
			continue
		}
		d.readOnly = false
		levels := []describedConfig{}
		for _, lv := range []bool{false, true} {
			if v, ok := a.dyn.valueAt(d.name, lv); ok {
				src := kmsg.ConfigSourceDynamicBrokerConfig
				if lv {
					src = kmsg.ConfigSourceDynamicDefaultBrokerConfig
				}
				levels = append(levels, describedConfig{name: d.name, value: v, source: src})
			}
		}
		if d.value != "" {
			levels = append(levels, *d) // the static one
		}
		if len(levels) > 0 {
			d.value, d.source = levels[0].value, levels[0].source
		}
		for _, l := range levels {
			syn := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			syn.Name, syn.Value, syn.Source = l.name, kmsg.StringPtr(l.value), l.source
			d.synonyms = append(d.synonyms, syn)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(a.opts.Configs)) {
		if slices.ContainsFunc(out, func(d describedConfig) bool { return d.name == name }) {
			continue // listed with its effective value
		}
		d := static(name, a.opts.Configs[name], kmsg.ConfigTypeString)
		d.sensitive = strings.Contains(name, "password") || strings.Contains(name, "secret")
		out = append(out, d)
	}
	return sortedConfigs(out)
}

func (a *configAPIs) describeConfigs(ctx context.Context, _ header, r *kmsg.DescribeConfigsRequest) *kmsg.DescribeConfigsResponse {
	resp := r.ResponseKind().(*kmsg.DescribeConfigsResponse)
	a.cat.sync(ctx) // what another broker altered a moment ago is described
	for _, rr := range r.Resources {
		sr := kmsg.NewDescribeConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		var configs []describedConfig
		switch rr.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			c, ok := a.cat.topicConfig(rr.ResourceName)
			if !ok {
				sr.ErrorCode, sr.ErrorMessage = kerr.UnknownTopicOrPartition.Code, errText("topic %q does not exist", rr.ResourceName)
				break
			}
			configs = a.describeTopicConfig(rr.ResourceName, c)
		case kmsg.ConfigResourceTypeBroker:
			cluster, code, msg := a.brokerLevel(rr.ResourceName)
			if code != 0 {
				sr.ErrorCode, sr.ErrorMessage = code, msg
				break
			}
			configs = a.describeBrokerConfig(cluster)
		default:
			sr.ErrorCode, sr.ErrorMessage = kerr.InvalidRequest.Code, errText("configs of resource type %s are not served", rr.ResourceType)
		}
		for _, d := range configs {
			if rr.ConfigNames != nil && !slices.Contains(rr.ConfigNames, d.name) {
				continue
			}
			c := kmsg.NewDescribeConfigsResponseResourceConfig()
			c.Name, c.Value, c.ReadOnly, c.Source, c.ConfigType = d.name, kmsg.StringPtr(d.value), d.readOnly, d.source, d.typ
			c.IsDefault, c.IsSensitive = d.source == kmsg.ConfigSourceDefaultConfig, d.sensitive
			if d.sensitive {
				c.Value = nil
			}
			if r.IncludeDocumentation { // (v3+: the table's line)
				c.Documentation = configDoc(rr.ResourceType, d.name)
			}
			if r.IncludeSynonyms && len(d.synonyms) > 0 {
				c.ConfigSynonyms = d.synonyms
			} else if r.IncludeSynonyms {
				syn := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
				syn.Name, syn.Value, syn.Source = d.name, c.Value, d.source
				c.ConfigSynonyms = append(c.ConfigSynonyms, syn)
			}
			sr.Configs = append(sr.Configs, c)
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return resp
}

// configChange is one key's change: set to value, or reset (nil).
type configChange struct {
	key   string
	value *string
	reset bool
	// list is IncrementalAlterConfigs' APPEND or SUBTRACT of a list
	// config's items (value holds them, comma-separated).
	list kmsg.IncrementalAlterConfigOp
}

// listChange is the value a list config takes when items are appended to
// it (those not in it yet, in order) or subtracted from it.
func listChange(current string, items *string, op kmsg.IncrementalAlterConfigOp) string {
	split := func(s string) []string {
		var out []string
		for _, v := range strings.Split(s, ",") {
			if v = strings.TrimSpace(v); v != "" {
				out = append(out, v)
			}
		}
		return out
	}
	have, change := split(current), []string(nil)
	if items != nil {
		change = split(*items)
	}
	if op == kmsg.IncrementalAlterConfigOpAppend {
		for _, v := range change {
			if !slices.Contains(have, v) {
				have = append(have, v)
			}
		}
	} else {
		have = slices.DeleteFunc(have, func(v string) bool { return slices.Contains(change, v) })
	}
	return strings.Join(have, ",")
}

func (a *configAPIs) incrementalAlterConfigs(_ context.Context, _ header, r *kmsg.IncrementalAlterConfigsRequest) *kmsg.IncrementalAlterConfigsResponse {
	resp := r.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	for _, rr := range r.Resources {
		sr := kmsg.NewIncrementalAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		if rr.ResourceType != kmsg.ConfigResourceTypeTopic && rr.ResourceType != kmsg.ConfigResourceTypeBroker {
			sr.ErrorCode, sr.ErrorMessage = kerr.InvalidRequest.Code, errText("configs of resource type %s are not altered here", rr.ResourceType)
			resp.Resources = append(resp.Resources, sr)
			continue
		}
		var changes []configChange
		for _, c := range rr.Configs {
			switch c.Op {
			case kmsg.IncrementalAlterConfigOpSet:
				changes = append(changes, configChange{key: c.Name, value: c.Value})
			case kmsg.IncrementalAlterConfigOpDelete:
				changes = append(changes, configChange{key: c.Name, reset: true})
			case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
				if topicConfigType(c.Name) != kmsg.ConfigTypeList && brokerConfigType(c.Name) != kmsg.ConfigTypeList { // APPEND and SUBTRACT change a list item by item
					// Kafka's words: the operation is for list configs.
					sr.ErrorCode, sr.ErrorMessage = kerr.InvalidConfig.Code, errText("Config value %s is not allowed for config key: %s",
						strings.ToLower(c.Op.String()), c.Name)
					break
				}
				changes = append(changes, configChange{key: c.Name, value: c.Value, list: c.Op})
			default:
				sr.ErrorCode, sr.ErrorMessage = kerr.InvalidRequest.Code, errText("%s: unknown operation %d", c.Name, c.Op)
			}
		}
		switch {
		case sr.ErrorCode != 0:
		case rr.ResourceType == kmsg.ConfigResourceTypeBroker:
			sr.ErrorCode, sr.ErrorMessage = a.alterBrokerConfig(rr.ResourceName, changes, false, r.ValidateOnly)
		default:
			sr.ErrorCode, sr.ErrorMessage = a.cat.alterTopicConfig(rr.ResourceName, changes, false, r.ValidateOnly)
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return resp
}

func (a *configAPIs) alterConfigs(_ context.Context, _ header, r *kmsg.AlterConfigsRequest) *kmsg.AlterConfigsResponse {
	resp := r.ResponseKind().(*kmsg.AlterConfigsResponse)
	for _, rr := range r.Resources {
		sr := kmsg.NewAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		changes := make([]configChange, 0, len(rr.Configs))
		for _, c := range rr.Configs {
			changes = append(changes, configChange{key: c.Name, value: c.Value})
		}
		switch rr.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			sr.ErrorCode, sr.ErrorMessage = a.cat.alterTopicConfig(rr.ResourceName, changes, true, r.ValidateOnly)
		case kmsg.ConfigResourceTypeBroker:
			sr.ErrorCode, sr.ErrorMessage = a.alterBrokerConfig(rr.ResourceName, changes, true, r.ValidateOnly)
		default:
			sr.ErrorCode, sr.ErrorMessage = kerr.InvalidRequest.Code, errText("configs of resource type %s are not altered here", rr.ResourceType)
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return resp
}

// configAuthorization is the error for a config resource the principal
// may not describe or alter (the cluster's for a broker's configs), 0 if
// it may.
func (g *guard) configAuthorization(h header, op kmsg.ACLOperation, rt kmsg.ConfigResourceType, name string) int16 {
	switch rt {
	case kmsg.ConfigResourceTypeTopic:
		if !g.may(h, op, resTopic, name) {
			return kerr.TopicAuthorizationFailed.Code
		}
	default: // broker and broker-logger configs: the cluster's
		if !g.mayCluster(h, op) {
			return kerr.ClusterAuthorizationFailed.Code
		}
	}
	return 0
}

// authorizeDescribeConfigs: DescribeConfigs on each topic, or on the
// cluster for a broker's configs.
func (g *guard) authorizeDescribeConfigs(h header, r *kmsg.DescribeConfigsRequest) (kmsg.Response, func(kmsg.Response)) {
	denied := takeOut(&r.Resources, func(res kmsg.DescribeConfigsRequestResource) int16 {
		return g.configAuthorization(h, opDescribeConfigs, res.ResourceType, res.ResourceName)
	}, func(res kmsg.DescribeConfigsRequestResource, code int16) kmsg.DescribeConfigsResponseResource {
		rr := kmsg.NewDescribeConfigsResponseResource()
		rr.ResourceType, rr.ResourceName, rr.ErrorCode = res.ResourceType, res.ResourceName, code
		return rr
	})
	return nil, func(resp kmsg.Response) {
		d := resp.(*kmsg.DescribeConfigsResponse)
		d.Resources = append(d.Resources, denied...)
	}
}

// authorizeAlterConfigs: AlterConfigs on each topic, or on the cluster for
// a broker's configs.
func (g *guard) authorizeAlterConfigs(h header, r *kmsg.AlterConfigsRequest) (kmsg.Response, func(kmsg.Response)) {
	denied := takeOut(&r.Resources, func(res kmsg.AlterConfigsRequestResource) int16 {
		return g.configAuthorization(h, opAlterConfigs, res.ResourceType, res.ResourceName)
	}, func(res kmsg.AlterConfigsRequestResource, code int16) kmsg.AlterConfigsResponseResource {
		rr := kmsg.NewAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName, rr.ErrorCode = res.ResourceType, res.ResourceName, code
		return rr
	})
	return nil, func(resp kmsg.Response) {
		a := resp.(*kmsg.AlterConfigsResponse)
		a.Resources = append(a.Resources, denied...)
	}
}

// authorizeIncrementalAlterConfigs: as authorizeAlterConfigs.
func (g *guard) authorizeIncrementalAlterConfigs(h header, r *kmsg.IncrementalAlterConfigsRequest) (kmsg.Response, func(kmsg.Response)) {
	denied := takeOut(&r.Resources, func(res kmsg.IncrementalAlterConfigsRequestResource) int16 {
		return g.configAuthorization(h, opAlterConfigs, res.ResourceType, res.ResourceName)
	}, func(res kmsg.IncrementalAlterConfigsRequestResource, code int16) kmsg.IncrementalAlterConfigsResponseResource {
		rr := kmsg.NewIncrementalAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName, rr.ErrorCode = res.ResourceType, res.ResourceName, code
		return rr
	})
	return nil, func(resp kmsg.Response) {
		a := resp.(*kmsg.IncrementalAlterConfigsResponse)
		a.Resources = append(a.Resources, denied...)
	}
}
