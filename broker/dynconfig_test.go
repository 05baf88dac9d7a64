package broker

import (
	"context"
	"net"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/tablet"
)

// brokerConfig is one config of this broker (node 0) as DescribeConfigs
// lists it, with synonyms.
func brokerConfig(t *testing.T, b *Broker, name, resource string) kmsg.DescribeConfigsResponseResourceConfig {
	t.Helper()
	r := kmsg.NewPtrDescribeConfigsRequest()
	r.IncludeSynonyms = true
	r.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeBroker, ResourceName: resource, ConfigNames: []string{name}}}
	resp := b.configs.describeConfigs(context.Background(), header{}, r)
	require.Zero(t, resp.Resources[0].ErrorCode)
	for _, c := range resp.Resources[0].Configs {
		if c.Name == name {
			return c
		}
	}
	return kmsg.DescribeConfigsResponseResourceConfig{}
}

// Dynamic broker configs: the cluster-wide default of log.retention.ms
// moves every topic that does not set retention.ms itself (and new ones);
// this broker's own value wins over it; deleting them brings back the
// static value; they survive a restart; a static config is refused as
// Kafka refuses it, an unknown one with the nearest name.
func TestDynamicBrokerConfigs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	var stop func()
	open := func() (*Broker, *tablet.Manager, string) {
		m, err := tablet.OpenManager(nil, dir, tablet.ManagerOptions{Tablet: tablet.Options{Logger: quiet}})
		require.NoError(t, err)
		b, err := compose(m, Options{Logger: quiet})
		require.NoError(t, err)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		served := make(chan error, 1)
		go func() { served <- b.Serve(ln) }()
		stop = func() {
			require.NoError(t, b.Close())
			require.ErrorIs(t, <-served, ErrClosed)
			require.NoError(t, m.Close())
		}
		return b, m, ln.Addr().String()
	}
	b, m, addr := open()
	defer func() { stop() }()
	adm, _, ctx := adminClient(t, addr)
	for _, topic := range []string{"follows", "own"} {
		r, err := adm.CreateTopic(ctx, 2, 1, nil, topic)
		require.NoError(t, err)
		require.NoError(t, r.Err)
	}
	res, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: kmsg.StringPtr("5000")}}, "own")
	require.NoError(t, err)
	require.NoError(t, res[0].Err)

	var message string // the last refusal's
	set := func(name, value string, brokers ...int32) error {
		rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: name, Value: kmsg.StringPtr(value)}}, brokers...)
		require.NoError(t, err)
		message = rs[0].ErrMessage
		return rs[0].Err
	}
	require.NoError(t, set("log.retention.ms", "3600000"))
	c := configOf(t, ctx, adm, "follows", "retention.ms")
	require.Equal(t, "3600000", c.MaybeValue())
	require.Equal(t, kmsg.ConfigSourceDynamicDefaultBrokerConfig, c.Source)
	require.Equal(t, "5000", valueOf(configOf(t, ctx, adm, "own", "retention.ms")), "a topic's own config stays")
	for p := range int32(2) {
		tb, _ := m.Get(checkpoint.TopicPartition{Topic: "follows", Partition: p})
		require.Equal(t, int64(3600000), tb.Config().RetentionMs, "applied live")
		require.False(t, tb.Config().IsSet("retention.ms"), "still the default's")
	}
	r, err := adm.CreateTopic(ctx, 1, 1, nil, "later")
	require.NoError(t, err)
	require.NoError(t, r.Err)
	require.Equal(t, "3600000", valueOf(configOf(t, ctx, adm, "later", "retention.ms")))

	// This broker's own value wins; its synonyms show every level.
	require.NoError(t, set("log.retention.ms", "7200000", 0))
	require.Equal(t, "7200000", valueOf(configOf(t, ctx, adm, "follows", "retention.ms")))
	bc := brokerConfig(t, b, "log.retention.ms", "0")
	require.Equal(t, "7200000", *bc.Value)
	require.False(t, bc.ReadOnly)
	require.Equal(t, kmsg.ConfigSourceDynamicBrokerConfig, bc.Source)
	var sources []kmsg.ConfigSource
	for _, s := range bc.ConfigSynonyms {
		sources = append(sources, s.Source)
	}
	require.Equal(t, []kmsg.ConfigSource{kmsg.ConfigSourceDynamicBrokerConfig, kmsg.ConfigSourceDynamicDefaultBrokerConfig,
		kmsg.ConfigSourceStaticBrokerConfig}, sources)
	require.Equal(t, "3600000", *brokerConfig(t, b, "log.retention.ms", "").Value, "the cluster default, described alone")

	// Refused: a static config, an unknown one, a bad value, another broker.
	require.ErrorIs(t, set("num.partitions", "4"), kerr.InvalidRequest)
	require.Contains(t, message, "Cannot update these configs dynamically: [num.partitions]")
	require.ErrorIs(t, set("log.retention.mss", "1"), kerr.InvalidConfig)
	require.Contains(t, message, "did you mean log.retention.ms")
	require.ErrorIs(t, set("log.retention.ms", "soon"), kerr.InvalidConfig)
	code, _ := b.configs.alterBrokerConfig("7", []configChange{{key: "log.retention.ms", value: kmsg.StringPtr("1")}}, false, false)
	require.Equal(t, kerr.InvalidRequest.Code, code, "node 7 is not this broker")

	// Across a restart, the dynamic values hold.
	stop()
	_, m, addr = open()
	adm, _, ctx = adminClient(t, addr)
	require.Equal(t, "7200000", valueOf(configOf(t, ctx, adm, "follows", "retention.ms")))
	require.Equal(t, int64(7200000), m.DefaultConfig().RetentionMs)

	// Deleted at both levels, the static value is back.
	for _, brokers := range [][]int32{{0}, nil} {
		rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "log.retention.ms"}}, brokers...)
		require.NoError(t, err)
		require.NoError(t, rs[0].Err)
	}
	c = configOf(t, ctx, adm, "follows", "retention.ms")
	require.Equal(t, "604800000", c.MaybeValue())
	require.Equal(t, kmsg.ConfigSourceDefaultConfig, c.Source)
	require.Equal(t, "5000", valueOf(configOf(t, ctx, adm, "own", "retention.ms")))

	// APPEND on the list log.cleanup.policy; AlterConfigs replaces a
	// level's whole set.
	rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.AppendConfig, Name: "log.cleanup.policy", Value: kmsg.StringPtr("compact")}})
	require.NoError(t, err)
	require.NoError(t, rs[0].Err)
	require.Equal(t, "compact,delete", valueOf(configOf(t, ctx, adm, "follows", "cleanup.policy")))
	rs, err = adm.AlterBrokerConfigsState(ctx, []kadm.AlterConfig{{Name: "log.segment.bytes", Value: kmsg.StringPtr("1048576")}})
	require.NoError(t, err)
	require.NoError(t, rs[0].Err)
	require.Equal(t, "delete", valueOf(configOf(t, ctx, adm, "follows", "cleanup.policy")), "replaced: the append is gone")
	require.Equal(t, "1048576", valueOf(configOf(t, ctx, adm, "follows", "segment.bytes")))
}

// Dynamic and static broker configs merge as on Kafka: each key takes
// its dynamic value over its static one first, then a topic config takes
// the first synonym that has a value. A static log.retention.ms beats a
// dynamic log.retention.hours; a dynamic log.retention.ms beats it.
func TestDynamicConfigsMergeByKey(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	static := tablet.DefaultConfig()
	require.NoError(t, static.Set("retention.ms", "7200000"))
	m, err := tablet.OpenManager(nil, dir, tablet.ManagerOptions{Config: &static, Tablet: tablet.Options{Logger: quiet}})
	require.NoError(t, err)
	defer m.Close()
	b, err := compose(m, Options{Logger: quiet, Configs: map[string]string{"log.retention.ms": "7200000"}})
	require.NoError(t, err)
	defer b.Close()
	alter := func(name, value string) {
		code, msg := b.configs.alterBrokerConfig("", []configChange{{key: name, value: kmsg.StringPtr(value)}}, false, false)
		require.Zero(t, code, "%v", msg)
	}
	alter("log.retention.hours", "1")
	require.Equal(t, int64(7200000), m.DefaultConfig().RetentionMs, "the static log.retention.ms wins")
	alter("log.retention.ms", "60000")
	require.Equal(t, int64(60000), m.DefaultConfig().RetentionMs, "the dynamic log.retention.ms wins")
	require.Equal(t, kmsg.ConfigSourceDynamicDefaultBrokerConfig, b.dyn.source("retention.ms"))
	code, _ := b.configs.alterBrokerConfig("", []configChange{{key: "log.retention.ms", reset: true}}, false, false)
	require.Zero(t, code)
	require.Equal(t, int64(7200000), m.DefaultConfig().RetentionMs)
	require.Zero(t, b.dyn.source("retention.ms"), "the static value's")
}

// The replication throttles are dynamic broker configs (no topic
// default): a rate of 0 or more is taken at either level and listed with
// Kafka's default (none) below it; a negative one is refused.
func TestDynamicReplicationRates(t *testing.T) {
	b, _, addr := testBroker(t, Options{})
	adm, _, ctx := adminClient(t, addr)
	c := brokerConfig(t, b, "leader.replication.throttled.rate", "0")
	require.Equal(t, "9223372036854775807", *c.Value)
	require.False(t, c.ReadOnly)
	v, bad := "1000", "-1"
	rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "leader.replication.throttled.rate", Value: &v}}, 0)
	require.NoError(t, err)
	require.NoError(t, rs[0].Err)
	rs, err = adm.AlterBrokerConfigsState(ctx, []kadm.AlterConfig{{Name: "follower.replication.throttled.rate", Value: &v}})
	require.NoError(t, err)
	require.NoError(t, rs[0].Err)
	c = brokerConfig(t, b, "leader.replication.throttled.rate", "0")
	require.Equal(t, "1000", *c.Value)
	require.Equal(t, kmsg.ConfigSourceDynamicBrokerConfig, c.Source)
	require.Equal(t, int64(1000), b.dyn.rate("follower.replication.throttled.rate"), "the cluster-wide level")
	rs, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "follower.replication.throttled.rate", Value: &bad}}, 0)
	require.NoError(t, err)
	require.ErrorIs(t, rs[0].Err, kerr.InvalidConfig)
}

// Kafka's dynamic Kerberos configs are taken, kept and described (they
// change nothing: seglog has no Kerberos), and a value out of their range
// is refused — they were refused as unknown broker configs, where Kafka
// takes them (librdkafka's test 0081 sets one).
func TestDynamicInertConfigs(t *testing.T) {
	b, _, addr := testBroker(t, Options{})
	adm, _, ctx := adminClient(t, addr)
	c := brokerConfig(t, b, "sasl.kerberos.min.time.before.relogin", "0")
	require.Equal(t, "60000", *c.Value, "Kafka's default")
	v, bad := "58000", "-1"
	rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "sasl.kerberos.min.time.before.relogin", Value: &v}}, 0)
	require.NoError(t, err)
	require.NoError(t, rs[0].Err)
	c = brokerConfig(t, b, "sasl.kerberos.min.time.before.relogin", "0")
	require.Equal(t, "58000", *c.Value)
	require.Equal(t, kmsg.ConfigSourceDynamicBrokerConfig, c.Source)
	rs, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "sasl.kerberos.min.time.before.relogin", Value: &bad}}, 0)
	require.NoError(t, err)
	require.ErrorIs(t, rs[0].Err, kerr.InvalidConfig)
}

// DescribeConfigs v3+ with include_documentation gives each config's line
// from package config's table, and types from it.
func TestDescribeConfigsDocumentation(t *testing.T) {
	m, err := tablet.OpenManager(nil, filepath.Join(t.TempDir(), "data"), tablet.ManagerOptions{Tablet: tablet.Options{Logger: quiet}})
	require.NoError(t, err)
	defer m.Close()
	b, err := compose(m, Options{Logger: quiet})
	require.NoError(t, err)
	defer b.Close()
	_, err = m.Create(checkpoint.TopicPartition{Topic: "d"}, nil)
	require.NoError(t, err)
	r := kmsg.NewPtrDescribeConfigsRequest()
	r.IncludeDocumentation = true
	r.Resources = []kmsg.DescribeConfigsRequestResource{
		{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "d", ConfigNames: []string{"retention.ms", "cleanup.policy"}},
		{ResourceType: kmsg.ConfigResourceTypeBroker, ResourceName: "0", ConfigNames: []string{"log.retention.ms", "leader.replication.throttled.rate"}},
	}
	resp := b.configs.describeConfigs(context.Background(), header{}, r)
	docs := map[string]string{}
	types := map[string]kmsg.ConfigType{}
	for _, rr := range resp.Resources {
		require.Zero(t, rr.ErrorCode)
		for _, c := range rr.Configs {
			require.NotNil(t, c.Documentation, c.Name)
			docs[c.Name], types[c.Name] = *c.Documentation, c.ConfigType
		}
	}
	require.Equal(t, "how long records are kept (-1: for ever)", docs["retention.ms"])
	require.Equal(t, kmsg.ConfigTypeList, types["cleanup.policy"])
	require.Equal(t, "the default of the topic config retention.ms", docs["log.retention.ms"])
	require.Equal(t, kmsg.ConfigTypeLong, types["log.retention.ms"])
	require.Contains(t, docs["leader.replication.throttled.rate"], "KIP-73")
}
