package broker

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/tablet"
)

// The admin APIs: topics created, deleted and grown, records deleted,
// topic configs described and altered — all on the manager's tablets.

// errText returns a pointer to an error's text, for a response's message.
func errText(format string, args ...any) *string {
	s := fmt.Sprintf(format, args...)
	return &s
}

// topicConfigCode maps a config error to Kafka's code.
func topicConfigCode(err error) int16 {
	if errors.Is(err, tablet.ErrConfig) || errors.Is(err, errConfigUnsupported) {
		return kerr.InvalidConfig.Code
	}
	return errorCode(err)
}

// errConfigUnsupported is a Kafka topic config this broker lists but does
// not take (other than its one value).
var errConfigUnsupported = errors.New("broker: config not supported")

// fixedConfigs are Kafka topic configs the engine has no field for: listed
// by DescribeConfigs with their one accepted value (setting that value is a
// no-op, any other is INVALID_CONFIG).
var fixedConfigs = map[string]struct {
	value string
	typ   kmsg.ConfigType
	why   string
}{
	"compression.type":    {"producer", kmsg.ConfigTypeString, "batches are stored as the producer compressed them"},
	"min.insync.replicas": {"1", kmsg.ConfigTypeInt, "a single-node broker has one replica"},
}

// configTypes are the Kafka types of the engine's topic configs; a key not
// here is a long.
var configTypes = map[string]kmsg.ConfigType{
	"segment.bytes": kmsg.ConfigTypeInt, "segment.index.bytes": kmsg.ConfigTypeInt,
	"index.interval.bytes": kmsg.ConfigTypeInt, "max.message.bytes": kmsg.ConfigTypeInt,
	"message.timestamp.type": kmsg.ConfigTypeString, "preallocate": kmsg.ConfigTypeBoolean,
	"remote.storage.enable": kmsg.ConfigTypeBoolean, "seglog.durable.acks": kmsg.ConfigTypeBoolean,
	"cleanup.policy": kmsg.ConfigTypeList, "min.cleanable.dirty.ratio": kmsg.ConfigTypeDouble,
	// (the others: longs — min/max.compaction.lag.ms, delete.retention.ms)
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

// resetTopicConfig returns one key to the broker's default.
func (b *Broker) resetTopicConfig(c *tablet.Config, key string) error {
	if _, ok := fixedConfigs[key]; ok {
		return nil
	}
	def := b.m.DefaultConfig()
	v, ok := def.Get(key)
	if !ok {
		return fmt.Errorf("%w: unknown key %q", tablet.ErrConfig, key)
	}
	return c.Set(key, v)
}

// topicConfig is a topic's config: its first partition's (they share it).
func (b *Broker) topicConfig(topic string) (tablet.Config, bool) {
	parts := b.partitionsOf(topic)
	if len(parts) == 0 {
		return tablet.Config{}, false
	}
	return parts[0].Config(), true
}

// describedConfig is one config as DescribeConfigs lists it.
type describedConfig struct {
	name, value string
	source      kmsg.ConfigSource
	typ         kmsg.ConfigType
	readOnly    bool
}

// sortedConfigs sorts configs by name, as Kafka lists them.
func sortedConfigs(cs []describedConfig) []describedConfig {
	slices.SortFunc(cs, func(a, b describedConfig) int { return strings.Compare(a.name, b.name) })
	return cs
}

// describeTopicConfig lists every topic config with its value and source:
// a value other than the broker's default is the topic's own
// (DYNAMIC_TOPIC_CONFIG), the broker's default other than Kafka's is
// STATIC_BROKER_CONFIG, else DEFAULT_CONFIG.
func (b *Broker) describeTopicConfig(c tablet.Config) []describedConfig {
	kafka, broker := tablet.DefaultConfig(), b.m.DefaultConfig()
	var out []describedConfig
	for _, k := range tablet.ConfigKeys() {
		v, _ := c.Get(k)
		bv, _ := broker.Get(k)
		kv, _ := kafka.Get(k)
		d := describedConfig{name: k, value: v, source: kmsg.ConfigSourceDefaultConfig, typ: kmsg.ConfigTypeLong}
		if t, ok := configTypes[k]; ok {
			d.typ = t
		}
		switch {
		case v != bv:
			d.source = kmsg.ConfigSourceDynamicTopicConfig
		case bv != kv:
			d.source = kmsg.ConfigSourceStaticBrokerConfig
		}
		out = append(out, d)
	}
	for k, f := range fixedConfigs {
		out = append(out, describedConfig{name: k, value: f.value, source: kmsg.ConfigSourceDefaultConfig, typ: f.typ})
	}
	return sortedConfigs(out)
}

// describeBrokerConfig lists the broker's own configs (all static).
func (b *Broker) describeBrokerConfig() []describedConfig {
	def := b.m.DefaultConfig()
	get := func(k string) string { v, _ := def.Get(k); return v }
	static := func(name, value string, typ kmsg.ConfigType) describedConfig {
		return describedConfig{name: name, value: value, source: kmsg.ConfigSourceStaticBrokerConfig, typ: typ, readOnly: true}
	}
	out := []describedConfig{
		static("node.id", strconv.Itoa(int(b.opts.NodeID)), kmsg.ConfigTypeInt),
		static("broker.id", strconv.Itoa(int(b.opts.NodeID)), kmsg.ConfigTypeInt),
		static("num.partitions", strconv.Itoa(int(b.opts.NumPartitions)), kmsg.ConfigTypeInt),
		static("auto.create.topics.enable", strconv.FormatBool(!b.opts.NoAutoCreate), kmsg.ConfigTypeBoolean),
		static("default.replication.factor", "1", kmsg.ConfigTypeInt),
		static("log.dirs", b.m.Dir(), kmsg.ConfigTypeString),
		static("log.segment.bytes", get("segment.bytes"), kmsg.ConfigTypeInt),
		static("log.retention.ms", get("retention.ms"), kmsg.ConfigTypeLong),
		static("log.retention.bytes", get("retention.bytes"), kmsg.ConfigTypeLong),
		static("log.cleanup.policy", get("cleanup.policy"), kmsg.ConfigTypeList),
		static("log.cleaner.min.cleanable.ratio", get("min.cleanable.dirty.ratio"), kmsg.ConfigTypeDouble),
		static("log.cleaner.delete.retention.ms", get("delete.retention.ms"), kmsg.ConfigTypeLong),
		static("log.cleaner.min.compaction.lag.ms", get("min.compaction.lag.ms"), kmsg.ConfigTypeLong),
		static("log.cleaner.max.compaction.lag.ms", get("max.compaction.lag.ms"), kmsg.ConfigTypeLong),
		static("message.max.bytes", get("max.message.bytes"), kmsg.ConfigTypeInt),
		static("socket.request.max.bytes", strconv.Itoa(int(b.opts.MaxRequestBytes)), kmsg.ConfigTypeInt),
		static("connections.max.idle.ms", strconv.FormatInt(b.opts.IdleTimeout.Milliseconds(), 10), kmsg.ConfigTypeLong),
		static("max.connections", strconv.Itoa(b.opts.MaxConnections), kmsg.ConfigTypeInt),
		static("seglog.durable.acks", strconv.FormatBool(b.opts.DurableAcks), kmsg.ConfigTypeBoolean),
	}
	return sortedConfigs(out)
}

func (b *Broker) createTopics(r *kmsg.CreateTopicsRequest) *kmsg.CreateTopicsResponse {
	resp := r.ResponseKind().(*kmsg.CreateTopicsResponse)
	seen := map[string]int{}
	for _, rt := range r.Topics {
		seen[rt.Topic]++
	}
	for _, rt := range r.Topics {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		st.NumPartitions, st.ReplicationFactor = -1, -1
		fail := func(code int16, msg *string) {
			st.ErrorCode, st.ErrorMessage = code, msg
			resp.Topics = append(resp.Topics, st)
		}
		if seen[rt.Topic] > 1 {
			fail(kerr.InvalidRequest.Code, errText("topic %q is given %d times", rt.Topic, seen[rt.Topic]))
			continue
		}
		if err := checkpoint.ValidateTopic(rt.Topic); err != nil {
			fail(kerr.InvalidTopicException.Code, errText("%v", err))
			continue
		}
		partitions := rt.NumPartitions
		if len(rt.ReplicaAssignment) > 0 {
			if rt.NumPartitions != -1 || rt.ReplicationFactor != -1 {
				fail(kerr.InvalidRequest.Code, errText("a replica assignment comes with partitions and replication factor -1"))
				continue
			}
			if msg := b.checkAssignment(rt.ReplicaAssignment); msg != nil {
				fail(kerr.InvalidReplicaAssignment.Code, msg)
				continue
			}
			partitions = int32(len(rt.ReplicaAssignment))
		}
		if partitions == -1 {
			partitions = b.opts.NumPartitions
		}
		if partitions <= 0 || partitions > b.opts.MaxTopicPartitions {
			fail(kerr.InvalidPartitions.Code, errText("number of partitions %d is not in [1, %d]", partitions, b.opts.MaxTopicPartitions))
			continue
		}
		if rf := rt.ReplicationFactor; rf != -1 && rf != 1 && len(rt.ReplicaAssignment) == 0 {
			fail(kerr.InvalidReplicationFactor.Code, errText("replication factor %d is larger than the 1 broker available", rf))
			continue
		}
		cfg := b.m.DefaultConfig()
		var cfgErr error
		for _, c := range rt.Configs {
			if cfgErr = setTopicConfig(&cfg, c.Name, c.Value); cfgErr != nil {
				break
			}
		}
		if cfgErr != nil {
			fail(kerr.InvalidConfig.Code, errText("%v", cfgErr))
			continue
		}
		if code, msg := b.createTopicChecked(rt.Topic, partitions, &cfg, r.ValidateOnly); code != 0 {
			fail(code, msg)
			continue
		}
		st.NumPartitions, st.ReplicationFactor = partitions, 1
		if id, ok := b.m.TopicID(rt.Topic); ok {
			st.TopicID = id
		}
		for _, d := range b.describeTopicConfig(cfg) {
			c := kmsg.NewCreateTopicsResponseTopicConfig()
			c.Name, c.Value, c.ReadOnly, c.Source = d.name, kmsg.StringPtr(d.value), d.readOnly, int8(d.source)
			st.Configs = append(st.Configs, c)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// checkAssignment accepts a manual assignment only of every partition, in
// order, to this broker alone.
func (b *Broker) checkAssignment(as []kmsg.CreateTopicsRequestTopicReplicaAssignment) *string {
	for i, a := range as {
		if a.Partition != int32(i) {
			return errText("the assignment must list partitions 0 to %d in order", len(as)-1)
		}
		if len(a.Replicas) != 1 || a.Replicas[0] != b.opts.NodeID {
			return errText("partition %d: the only broker is %d", a.Partition, b.opts.NodeID)
		}
	}
	return nil
}

// createTopicChecked creates a topic that must not exist; a failure part
// way deletes the partitions it made (no half-created topic).
func (b *Broker) createTopicChecked(topic string, partitions int32, cfg *tablet.Config, validateOnly bool) (int16, *string) {
	b.createMu.Lock()
	defer b.createMu.Unlock()
	if len(b.partitionsOf(topic)) > 0 {
		return kerr.TopicAlreadyExists.Code, errText("topic %q already exists", topic)
	}
	if validateOnly {
		return 0, nil
	}
	for p := range partitions {
		if _, err := b.m.Create(checkpoint.TopicPartition{Topic: topic, Partition: p}, cfg); err != nil {
			for q := range p {
				_ = b.m.Delete(checkpoint.TopicPartition{Topic: topic, Partition: q})
			}
			b.opts.Logger.Warn("creating a topic", "topic", topic, "err", err)
			return topicConfigCode(err), errText("%v", err)
		}
	}
	b.opts.Logger.Info("created a topic", "topic", topic, "partitions", partitions)
	return 0, nil
}

func (b *Broker) deleteTopics(r *kmsg.DeleteTopicsRequest) *kmsg.DeleteTopicsResponse {
	resp := r.ResponseKind().(*kmsg.DeleteTopicsResponse)
	type target struct {
		name *string
		id   [16]byte
	}
	var targets []target
	for _, n := range r.TopicNames {
		targets = append(targets, target{name: kmsg.StringPtr(n)})
	}
	for _, t := range r.Topics {
		targets = append(targets, target{name: t.Topic, id: t.TopicID})
	}
	for _, tg := range targets {
		st := kmsg.NewDeleteTopicsResponseTopic()
		st.Topic, st.TopicID = tg.name, tg.id
		name := ""
		if tg.name != nil {
			name = *tg.name
		} else if n, ok := b.topicByID(tg.id); ok {
			name, st.Topic = n, kmsg.StringPtr(n)
		} else {
			st.ErrorCode, st.ErrorMessage = kerr.UnknownTopicID.Code, errText("no topic has that id")
			resp.Topics = append(resp.Topics, st)
			continue
		}
		st.ErrorCode, st.ErrorMessage = b.deleteTopic(name)
		if st.ErrorCode == 0 {
			st.ErrorMessage = nil
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// topicByID finds a topic by its id.
func (b *Broker) topicByID(id [16]byte) (string, bool) {
	seen := map[string]bool{}
	for _, t := range b.m.Tablets() {
		n := t.TopicPartition().Topic
		if seen[n] {
			continue
		}
		seen[n] = true
		if tid, ok := b.m.TopicID(n); ok && tid == id {
			return n, true
		}
	}
	return "", false
}

// deleteTopic deletes every partition of a topic.
func (b *Broker) deleteTopic(topic string) (int16, *string) {
	if internalTopics[topic] {
		// The coordinators' own log: deleting it would drop every group.
		return kerr.InvalidTopicException.Code, errText("%s is an internal topic", topic)
	}
	b.createMu.Lock()
	defer b.createMu.Unlock()
	parts := b.partitionsOf(topic)
	if len(parts) == 0 {
		return kerr.UnknownTopicOrPartition.Code, errText("topic %q does not exist", topic)
	}
	for _, t := range parts {
		if err := b.m.Delete(t.TopicPartition()); err != nil {
			b.opts.Logger.Warn("deleting a topic", "topic", topic, "err", err)
			return errorCode(err), errText("%v", err)
		}
	}
	b.opts.Logger.Info("deleted a topic", "topic", topic, "partitions", len(parts))
	if b.groups != nil {
		// As Kafka: the groups' offsets of a deleted topic go too.
		if err := b.groups.RemoveTopicOffsets(topic); err != nil {
			b.opts.Logger.Warn("deleting the committed offsets of a deleted topic", "topic", topic, "err", err)
		}
	}
	return 0, nil
}

func (b *Broker) createPartitions(r *kmsg.CreatePartitionsRequest) *kmsg.CreatePartitionsResponse {
	resp := r.ResponseKind().(*kmsg.CreatePartitionsResponse)
	for _, rt := range r.Topics {
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic = rt.Topic
		st.ErrorCode, st.ErrorMessage = b.growTopic(rt, r.ValidateOnly)
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// growTopic adds partitions to a topic, with its config.
func (b *Broker) growTopic(rt kmsg.CreatePartitionsRequestTopic, validateOnly bool) (int16, *string) {
	b.createMu.Lock()
	defer b.createMu.Unlock()
	parts := b.partitionsOf(rt.Topic)
	if len(parts) == 0 {
		return kerr.UnknownTopicOrPartition.Code, errText("topic %q does not exist", rt.Topic)
	}
	have := int32(len(parts))
	if rt.Count <= have || rt.Count > b.opts.MaxTopicPartitions {
		return kerr.InvalidPartitions.Code, errText("topic %q has %d partitions; the count must grow, to at most %d", rt.Topic,
			have, b.opts.MaxTopicPartitions)
	}
	if rt.Assignment != nil && int32(len(rt.Assignment)) != rt.Count-have {
		return kerr.InvalidReplicaAssignment.Code, errText("%d new partitions, %d assignments", rt.Count-have, len(rt.Assignment))
	}
	for _, a := range rt.Assignment {
		if len(a.Replicas) != 1 || a.Replicas[0] != b.opts.NodeID {
			return kerr.InvalidReplicaAssignment.Code, errText("the only broker is %d", b.opts.NodeID)
		}
	}
	if validateOnly {
		return 0, nil
	}
	cfg := parts[0].Config()
	for p := have; p < rt.Count; p++ {
		if _, err := b.m.Create(checkpoint.TopicPartition{Topic: rt.Topic, Partition: p}, &cfg); err != nil {
			b.opts.Logger.Warn("adding partitions", "topic", rt.Topic, "err", err)
			return errorCode(err), errText("%v", err)
		}
	}
	b.opts.Logger.Info("added partitions", "topic", rt.Topic, "from", have, "to", rt.Count)
	return 0, nil
}

func (b *Broker) deleteRecords(r *kmsg.DeleteRecordsRequest) *kmsg.DeleteRecordsResponse {
	resp := r.ResponseKind().(*kmsg.DeleteRecordsResponse)
	for _, rt := range r.Topics {
		st := kmsg.DeleteRecordsResponseTopic{Topic: rt.Topic}
		for _, rp := range rt.Partitions {
			sp := kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition, sp.LowWatermark = rp.Partition, -1
			t, ok := b.m.Get(checkpoint.TopicPartition{Topic: rt.Topic, Partition: rp.Partition})
			switch {
			case !ok:
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			default:
				o := t.Offsets()
				offset := rp.Offset
				if offset == -1 {
					offset = o.HighWatermark // -1: everything committed
				}
				if offset < 0 || offset > o.HighWatermark {
					sp.ErrorCode = kerr.OffsetOutOfRange.Code
					break
				}
				start, err := t.DeleteRecordsBefore(offset)
				sp.ErrorCode, sp.LowWatermark = errorCode(err), start
				if err != nil {
					sp.LowWatermark = -1
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

func (b *Broker) describeConfigs(r *kmsg.DescribeConfigsRequest) *kmsg.DescribeConfigsResponse {
	resp := r.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, rr := range r.Resources {
		sr := kmsg.NewDescribeConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		var configs []describedConfig
		switch rr.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			c, ok := b.topicConfig(rr.ResourceName)
			if !ok {
				sr.ErrorCode, sr.ErrorMessage = kerr.UnknownTopicOrPartition.Code, errText("topic %q does not exist", rr.ResourceName)
				break
			}
			configs = b.describeTopicConfig(c)
		case kmsg.ConfigResourceTypeBroker:
			if rr.ResourceName != "" && rr.ResourceName != strconv.Itoa(int(b.opts.NodeID)) {
				sr.ErrorCode, sr.ErrorMessage = kerr.InvalidRequest.Code, errText("this broker is node %d", b.opts.NodeID)
				break
			}
			configs = b.describeBrokerConfig()
		default:
			sr.ErrorCode, sr.ErrorMessage = kerr.InvalidRequest.Code, errText("configs of resource type %s are not served", rr.ResourceType)
		}
		for _, d := range configs {
			if rr.ConfigNames != nil && !slices.Contains(rr.ConfigNames, d.name) {
				continue
			}
			c := kmsg.NewDescribeConfigsResponseResourceConfig()
			c.Name, c.Value, c.ReadOnly, c.Source, c.ConfigType = d.name, kmsg.StringPtr(d.value), d.readOnly, d.source, d.typ
			c.IsDefault = d.source == kmsg.ConfigSourceDefaultConfig
			if r.IncludeSynonyms {
				syn := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
				syn.Name, syn.Value, syn.Source = d.name, kmsg.StringPtr(d.value), d.source
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
}

// alterTopicConfig applies changes to a topic's config on every partition,
// after checking them all: a bad one changes nothing. replace starts from
// the broker's defaults instead of the topic's config (AlterConfigs).
func (b *Broker) alterTopicConfig(topic string, changes []configChange, replace, validateOnly bool) (int16, *string) {
	b.createMu.Lock()
	defer b.createMu.Unlock()
	parts := b.partitionsOf(topic)
	if len(parts) == 0 {
		return kerr.UnknownTopicOrPartition.Code, errText("topic %q does not exist", topic)
	}
	cfg := parts[0].Config()
	if replace {
		cfg = b.m.DefaultConfig()
	}
	for _, ch := range changes {
		var err error
		if ch.reset {
			err = b.resetTopicConfig(&cfg, ch.key)
		} else {
			err = setTopicConfig(&cfg, ch.key, ch.value)
		}
		if err != nil {
			return topicConfigCode(err), errText("%v", err)
		}
	}
	if validateOnly {
		return 0, nil
	}
	for _, t := range parts {
		if err := t.SetConfig(cfg); err != nil {
			b.opts.Logger.Warn("altering a topic config", "topic", topic, "partition", t.TopicPartition().Partition, "err", err)
			return errorCode(err), errText("%v", err)
		}
	}
	b.opts.Logger.Info("altered a topic config", "topic", topic, "changes", len(changes))
	return 0, nil
}

func (b *Broker) incrementalAlterConfigs(r *kmsg.IncrementalAlterConfigsRequest) *kmsg.IncrementalAlterConfigsResponse {
	resp := r.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	for _, rr := range r.Resources {
		sr := kmsg.NewIncrementalAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		if rr.ResourceType != kmsg.ConfigResourceTypeTopic {
			sr.ErrorCode, sr.ErrorMessage = kerr.InvalidRequest.Code, errText("only topic configs are altered here; the broker's are static")
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
			default: // APPEND and SUBTRACT are for lists; no served config is one
				sr.ErrorCode, sr.ErrorMessage = kerr.InvalidConfig.Code, errText("%s: %s applies only to list configs", c.Name, c.Op)
			}
		}
		if sr.ErrorCode == 0 {
			sr.ErrorCode, sr.ErrorMessage = b.alterTopicConfig(rr.ResourceName, changes, false, r.ValidateOnly)
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return resp
}

func (b *Broker) alterConfigs(r *kmsg.AlterConfigsRequest) *kmsg.AlterConfigsResponse {
	resp := r.ResponseKind().(*kmsg.AlterConfigsResponse)
	for _, rr := range r.Resources {
		sr := kmsg.NewAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		if rr.ResourceType != kmsg.ConfigResourceTypeTopic {
			sr.ErrorCode, sr.ErrorMessage = kerr.InvalidRequest.Code, errText("only topic configs are altered here; the broker's are static")
			resp.Resources = append(resp.Resources, sr)
			continue
		}
		changes := make([]configChange, 0, len(rr.Configs))
		for _, c := range rr.Configs {
			changes = append(changes, configChange{key: c.Name, value: c.Value})
		}
		sr.ErrorCode, sr.ErrorMessage = b.alterTopicConfig(rr.ResourceName, changes, true, r.ValidateOnly)
		resp.Resources = append(resp.Resources, sr)
	}
	return resp
}

// offsetForLeaderEpoch answers, per partition, the end offset of the
// largest leader epoch at or below the one asked: the start of the next
// epoch, or the log end for the current one (Kafka's
// LeaderEpochFileCache.endOffsetFor).
func (b *Broker) offsetForLeaderEpoch(r *kmsg.OffsetForLeaderEpochRequest) *kmsg.OffsetForLeaderEpochResponse {
	resp := r.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	for _, rt := range r.Topics {
		st := kmsg.OffsetForLeaderEpochResponseTopic{Topic: rt.Topic}
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition, sp.LeaderEpoch, sp.EndOffset = rp.Partition, -1, -1
			t, ok := b.m.Get(checkpoint.TopicPartition{Topic: rt.Topic, Partition: rp.Partition})
			if !ok {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			epochs := t.LeaderEpochs()
			current := int32(0)
			if len(epochs) > 0 {
				current = epochs[len(epochs)-1].Epoch
			}
			switch {
			case rp.CurrentLeaderEpoch > current:
				sp.ErrorCode = kerr.UnknownLeaderEpoch.Code
			case rp.CurrentLeaderEpoch >= 0 && rp.CurrentLeaderEpoch < current:
				sp.ErrorCode = kerr.FencedLeaderEpoch.Code
			default:
				sp.LeaderEpoch, sp.EndOffset = endOffsetFor(epochs, rp.LeaderEpoch, t.Offsets().LogEndOffset)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// endOffsetFor is Kafka's (epoch, end offset) answer for a requested
// epoch: the current epoch ends at the log end; an earlier one where the
// next starts (with the largest epoch at or below it, or the requested
// one if it is below every epoch); one above every epoch, or any epoch of
// an empty cache, is undefined (-1, -1).
func endOffsetFor(epochs []checkpoint.EpochEntry, want int32, logEnd int64) (int32, int64) {
	if want < 0 || len(epochs) == 0 {
		return -1, -1
	}
	if want == epochs[len(epochs)-1].Epoch {
		return want, logEnd
	}
	higher := slices.IndexFunc(epochs, func(e checkpoint.EpochEntry) bool { return e.Epoch > want })
	switch {
	case higher < 0:
		return -1, -1
	case higher == 0:
		return want, epochs[0].StartOffset
	}
	return epochs[higher-1].Epoch, epochs[higher].StartOffset
}
