package broker

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/tablet"
)

// adminClient is franz-go's admin client (kadm) on the broker.
func adminClient(t *testing.T, addr string) (*kadm.Client, *kgo.Client, context.Context) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(func() { cancel(); cl.Close() })
	return kadm.NewClient(cl), cl, ctx
}

// configOf returns one config of a topic as DescribeConfigs lists it.
func configOf(t *testing.T, ctx context.Context, adm *kadm.Client, topic, key string) kadm.Config {
	t.Helper()
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	require.NoError(t, err)
	rc, err := rcs.On(topic, nil)
	require.NoError(t, err)
	require.NoError(t, rc.Err)
	for _, c := range rc.Configs {
		if c.Key == key {
			return c
		}
	}
	t.Fatalf("%s has no config %s", topic, key)
	return kadm.Config{}
}

// Topics are created (with configs, a shared topic id, validate-only
// creating nothing), refused with Kafka's codes, grown and deleted through
// kadm, the way an operator's tooling does it.
func TestAdminTopics(t *testing.T) {
	_, m, addr := testBroker(t, Options{NoAutoCreate: true})
	adm, _, ctx := adminClient(t, addr)

	created, err := adm.CreateTopic(ctx, 3, 1, map[string]*string{"retention.ms": kmsg.StringPtr("1234"),
		"seglog.durable.acks": kmsg.StringPtr("true")}, "orders")
	require.NoError(t, err)
	require.NoError(t, created.Err)
	require.Equal(t, int32(3), created.NumPartitions)
	require.Equal(t, "1234", valueOf(created.Configs["retention.ms"]))
	require.Len(t, m.Tablets(), 3)
	id, ok := m.TopicID("orders")
	require.True(t, ok)
	require.Equal(t, [16]byte(id), [16]byte(created.ID), "CreateTopics answers the topic id")
	md, err := adm.Metadata(ctx, "orders")
	require.NoError(t, err)
	require.Equal(t, [16]byte(id), [16]byte(md.Topics["orders"].ID), "Metadata answers the same id")
	for p := range int32(3) {
		cfg, err := tablet.ReadConfig(nil, filepath.Join(m.Dir(), checkpoint.TopicPartition{Topic: "orders", Partition: p}.DirName()))
		require.NoError(t, err)
		require.Equal(t, int64(1234), cfg.RetentionMs, "partition %d keeps the topic config", p)
		require.True(t, cfg.DurableAcks)
	}

	// Refusals, each with Kafka's code, each creating nothing.
	for _, c := range []struct {
		topic   string
		parts   int32
		rf      int16
		configs map[string]*string
		want    *kerr.Error
	}{
		{"orders", 1, 1, nil, kerr.TopicAlreadyExists},
		{"bad/name", 1, 1, nil, kerr.InvalidTopicException},
		{"x", 1, 3, nil, kerr.InvalidReplicationFactor},
		{"x", 0, 1, nil, kerr.InvalidPartitions},
		{"x", 1, 1, map[string]*string{"retention.ms": kmsg.StringPtr("soon")}, kerr.InvalidConfig},
		{"x", 1, 1, map[string]*string{"no.such.config": kmsg.StringPtr("1")}, kerr.InvalidConfig},
		{"x", 1, 1, map[string]*string{"cleanup.policy": kmsg.StringPtr("shred")}, kerr.InvalidConfig},
	} {
		_, err := adm.CreateTopic(ctx, c.parts, c.rf, c.configs, c.topic)
		require.ErrorIs(t, err, c.want, "%+v", c)
	}
	// The message a client gets names the mistake, for people: no Go
	// package name in it.
	typo, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"retention.msx": kmsg.StringPtr("1")}, "x")
	require.ErrorIs(t, err, kerr.InvalidConfig)
	require.Equal(t, `invalid config: unknown key "retention.msx": did you mean "retention.ms"?`, typo.ErrMessage)
	v, err := adm.ValidateCreateTopics(ctx, 2, 1, nil, "dry")
	require.NoError(t, err)
	require.NoError(t, v["dry"].Err)
	require.Len(t, m.Tablets(), 3, "a refused or validate-only create makes no tablet")

	// Default partitions (-1) are num.partitions.
	r, err := adm.CreateTopic(ctx, -1, -1, nil, "logs")
	require.NoError(t, err)
	require.NoError(t, r.Err)
	require.Len(t, m.Tablets(), 4)
	otherID, _ := m.TopicID("logs")
	require.NotEqual(t, id, otherID)

	// Grow, never shrink.
	grown, err := adm.UpdatePartitions(ctx, 5, "orders")
	require.NoError(t, err)
	require.NoError(t, grown["orders"].Err)
	require.Len(t, m.Tablets(), 6)
	t4, ok := m.Get(checkpoint.TopicPartition{Topic: "orders", Partition: 4})
	require.True(t, ok)
	require.Equal(t, int64(1234), t4.Config().RetentionMs, "a new partition takes the topic's config")
	nid, _ := m.TopicID("orders")
	require.Equal(t, id, nid)
	shrunk, err := adm.UpdatePartitions(ctx, 2, "orders")
	require.NoError(t, err)
	require.ErrorIs(t, shrunk["orders"].Err, kerr.InvalidPartitions)
	missing, err := adm.CreatePartitions(ctx, 1, "nope")
	require.NoError(t, err)
	require.ErrorIs(t, missing["nope"].Err, kerr.UnknownTopicOrPartition)

	// Delete: the tablets and their directories go.
	del, err := adm.DeleteTopics(ctx, "orders", "nope")
	require.NoError(t, err)
	require.NoError(t, del["orders"].Err)
	require.ErrorIs(t, del["nope"].Err, kerr.UnknownTopicOrPartition)
	require.Len(t, m.Tablets(), 1)
	_, err = os.Stat(filepath.Join(m.Dir(), "orders-0"))
	require.ErrorIs(t, err, os.ErrNotExist)
	md, err = adm.Metadata(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"logs"}, md.Topics.Names())

	// DeleteTopics v6 by topic id.
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.Topics = []kmsg.DeleteTopicsRequestTopic{{TopicID: otherID}, {TopicID: [16]byte{1}}}
	resp, err := req.RequestWith(ctx, adminKgo(t, addr))
	require.NoError(t, err)
	require.Equal(t, int16(0), resp.Topics[0].ErrorCode)
	require.Equal(t, "logs", *resp.Topics[0].Topic)
	require.Equal(t, kerr.UnknownTopicID.Code, resp.Topics[1].ErrorCode)
	require.Empty(t, m.Tablets())
}

// valueOf is a config's value ("" for none).
func valueOf(c kadm.Config) string { return c.MaybeValue() }

// leaderEpochEnd asks OffsetForLeaderEpoch for one partition, with the
// client's current leader epoch (kadm sends none).
func leaderEpochEnd(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, epoch, current int32) kmsg.OffsetForLeaderEpochResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.ReplicaID = -1
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.LeaderEpoch, rp.CurrentLeaderEpoch = epoch, current
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	require.NoError(t, err)
	return resp.Topics[0].Partitions[0]
}

// adminKgo is a plain franz-go client, for requests kadm has no call for.
func adminKgo(t *testing.T, addr string) *kgo.Client {
	_, cl, _ := adminClient(t, addr)
	return cl
}

// Topic configs are listed with their sources, altered incrementally and
// wholesale, persisted in every partition's directory and applied live; a
// bad alteration changes nothing.
func TestAdminConfigs(t *testing.T) {
	_, m, addr := testBroker(t, Options{})
	adm, _, ctx := adminClient(t, addr)
	r, err := adm.CreateTopic(ctx, 2, 1, map[string]*string{"retention.ms": kmsg.StringPtr("60000")}, "cfg")
	require.NoError(t, err)
	require.NoError(t, r.Err)

	c := configOf(t, ctx, adm, "cfg", "retention.ms")
	require.Equal(t, "60000", c.MaybeValue())
	require.Equal(t, kmsg.ConfigSourceDynamicTopicConfig, c.Source)
	c = configOf(t, ctx, adm, "cfg", "segment.bytes")
	require.Equal(t, "1073741824", c.MaybeValue())
	require.Equal(t, kmsg.ConfigSourceDefaultConfig, c.Source)
	require.Equal(t, "delete", valueOf(configOf(t, ctx, adm, "cfg", "cleanup.policy")))

	// Set to its default value, a config is still the topic's own, as in
	// Kafka; deleted, it is the default again.
	res, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "cleanup.policy", Value: kmsg.StringPtr("delete")}}, "cfg")
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	require.Equal(t, kmsg.ConfigSourceDynamicTopicConfig, configOf(t, ctx, adm, "cfg", "cleanup.policy").Source)
	kept, err := tablet.ReadConfig(nil, filepath.Join(m.Dir(), "cfg-0"))
	require.NoError(t, err)
	require.True(t, kept.IsSet("cleanup.policy"), "kept in the partition's config file")
	res, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "cleanup.policy"}}, "cfg")
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	require.Equal(t, kmsg.ConfigSourceDefaultConfig, configOf(t, ctx, adm, "cfg", "cleanup.policy").Source)

	// Incremental: set one, reset another to its default.
	res, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "retention.bytes", Value: kmsg.StringPtr("1048576")},
		{Op: kadm.DeleteConfig, Name: "retention.ms"},
	}, "cfg")
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	require.Equal(t, "1048576", valueOf(configOf(t, ctx, adm, "cfg", "retention.bytes")))
	c = configOf(t, ctx, adm, "cfg", "retention.ms")
	require.Equal(t, "604800000", c.MaybeValue())
	require.Equal(t, kmsg.ConfigSourceDefaultConfig, c.Source)
	for p := range int32(2) {
		tp := checkpoint.TopicPartition{Topic: "cfg", Partition: p}
		live, _ := m.Get(tp)
		require.Equal(t, int64(1048576), live.Config().RetentionBytes, "applied live to partition %d", p)
		kept, err := tablet.ReadConfig(nil, filepath.Join(m.Dir(), tp.DirName()))
		require.NoError(t, err)
		require.Equal(t, int64(1048576), kept.RetentionBytes, "persisted in partition %d", p)
	}

	// A bad change among good ones changes nothing.
	res, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "segment.ms", Value: kmsg.StringPtr("1000")},
		{Op: kadm.SetConfig, Name: "segment.bytes", Value: kmsg.StringPtr("-5")},
	}, "cfg")
	require.NoError(t, err)
	require.ErrorIs(t, res[0].Err, kerr.InvalidConfig)
	require.Equal(t, "604800000", valueOf(configOf(t, ctx, adm, "cfg", "segment.ms")))
	res, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.AppendConfig, Name: "segment.ms", Value: kmsg.StringPtr("1")}}, "cfg")
	require.NoError(t, err)
	require.ErrorIs(t, res[0].Err, kerr.InvalidConfig, "APPEND is for list configs")
	// cleanup.policy is a list: APPEND adds what it lacks, SUBTRACT takes
	// items out, as Kafka's.
	res, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: kmsg.StringPtr("compact,delete")}}, "cfg")
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	require.Equal(t, "compact,delete", valueOf(configOf(t, ctx, adm, "cfg", "cleanup.policy"))) // (kept in one order)
	res, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SubtractConfig, Name: "cleanup.policy", Value: kmsg.StringPtr("delete")}}, "cfg")
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	c = configOf(t, ctx, adm, "cfg", "cleanup.policy")
	require.Equal(t, "compact", valueOf(c))
	require.Equal(t, kmsg.ConfigSourceDynamicTopicConfig, c.Source)
	live, _ := m.Get(checkpoint.TopicPartition{Topic: "cfg", Partition: 1})
	require.True(t, live.Config().Compacted(), "applied to every partition")
	res, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "cleanup.policy"}}, "cfg")
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	res, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "segment.ms", Value: kmsg.StringPtr("1")}}, "nope")
	require.NoError(t, err)
	require.ErrorIs(t, res[0].Err, kerr.UnknownTopicOrPartition)
	val, err := adm.ValidateAlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "segment.ms", Value: kmsg.StringPtr("1000")}}, "cfg")
	require.NoError(t, err)
	require.NoError(t, val[0].Err)
	require.Equal(t, "604800000", valueOf(configOf(t, ctx, adm, "cfg", "segment.ms")), "validate-only changes nothing")

	// AlterConfigs (not incremental) replaces the topic's whole set.
	res, err = adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "max.message.bytes", Value: kmsg.StringPtr("2000000")}}, "cfg")
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	require.Equal(t, "2000000", valueOf(configOf(t, ctx, adm, "cfg", "max.message.bytes")))
	require.Equal(t, "-1", valueOf(configOf(t, ctx, adm, "cfg", "retention.bytes")), "unnamed configs return to the defaults")

	// The broker's configs are listed (num.partitions static).
	brs, err := adm.DescribeBrokerConfigs(ctx, 0)
	require.NoError(t, err)
	require.NoError(t, brs[0].Err)
	found := map[string]string{}
	for _, c := range brs[0].Configs {
		found[c.Key] = c.MaybeValue()
	}
	require.Equal(t, "1", found["num.partitions"])
	require.Equal(t, m.Dir(), found["log.dirs"])
	bres, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "num.partitions", Value: kmsg.StringPtr("3")}})
	require.NoError(t, err)
	require.ErrorIs(t, bres[0].Err, kerr.InvalidRequest)
}

// DeleteRecords moves the log start; ListOffsets answers earliest, latest,
// by timestamp and the largest timestamp; OffsetForLeaderEpoch answers
// Kafka's end offsets.
func TestAdminRecordsAndOffsets(t *testing.T) {
	_, _, addr := testBroker(t, Options{})
	adm, cl, ctx := adminClient(t, addr)
	var recs []*kgo.Record
	for i, ts := range []int64{1000, 3000, 2000, 3000, 1500, 1200, 1300, 1400, 1500, 1600} {
		recs = append(recs, &kgo.Record{Topic: "r", Value: []byte{byte(i)}, Timestamp: time.UnixMilli(ts)})
	}
	p, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("r"),
		kgo.ProducerLinger(0), kgo.MaxBufferedRecords(1))
	require.NoError(t, err)
	defer p.Close()
	for _, r := range recs {
		require.NoError(t, p.ProduceSync(ctx, r).FirstErr())
	}

	maxTs, err := adm.ListMaxTimestampOffsets(ctx, "r")
	require.NoError(t, err)
	o, _ := maxTs.Lookup("r", 0)
	require.NoError(t, o.Err)
	require.Equal(t, int64(1), o.Offset, "the first record with the largest timestamp")
	require.Equal(t, int64(3000), o.Timestamp)
	after, err := adm.ListOffsetsAfterMilli(ctx, 2500, "r")
	require.NoError(t, err)
	o, _ = after.Lookup("r", 0)
	require.Equal(t, int64(1), o.Offset)

	e := leaderEpochEnd(t, ctx, cl, "r", 0, -1)
	require.Equal(t, int16(0), e.ErrorCode)
	require.Equal(t, int64(10), e.EndOffset, "the current epoch ends at the log end")
	require.Equal(t, int32(0), e.LeaderEpoch)
	e = leaderEpochEnd(t, ctx, cl, "r", 7, 0)
	require.Equal(t, int64(-1), e.EndOffset, "an epoch above every epoch is undefined")
	require.Equal(t, int32(-1), e.LeaderEpoch)
	e = leaderEpochEnd(t, ctx, cl, "r", 0, 3)
	require.Equal(t, kerr.UnknownLeaderEpoch.Code, e.ErrorCode, "a client ahead of the broker's epoch")
	epochs, err := adm.OffsetForLeaderEpoch(ctx, kadm.OffsetForLeaderEpochRequest{"r": {0: 0}})
	require.NoError(t, err)
	require.Equal(t, int64(10), epochs["r"][0].EndOffset, "through kadm too")

	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "r", Partition: 0, At: 4})
	dr, err := adm.DeleteRecords(ctx, offs)
	require.NoError(t, err)
	d, _ := dr.Lookup("r", 0)
	require.NoError(t, d.Err)
	require.Equal(t, int64(4), d.LowWatermark)
	start, err := adm.ListStartOffsets(ctx, "r")
	require.NoError(t, err)
	o, _ = start.Lookup("r", 0)
	require.Equal(t, int64(4), o.Offset)
	offs = kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "r", Partition: 0, At: 11})
	dr, err = adm.DeleteRecords(ctx, offs)
	require.NoError(t, err)
	d, _ = dr.Lookup("r", 0)
	require.ErrorIs(t, d.Err, kerr.OffsetOutOfRange, "past the high watermark")

	// A fetch below the new log start is out of range, as Kafka answers.
	f := kmsg.NewPtrFetchRequest()
	f.MaxBytes = 1 << 20
	ft := kmsg.NewFetchRequestTopic()
	listed, err := adm.ListTopics(ctx, "r")
	require.NoError(t, err)
	ft.Topic, ft.TopicID = "r", listed["r"].ID // by name before Fetch v13, by id from it
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.FetchOffset, fp.PartitionMaxBytes = 2, 1<<20
	ft.Partitions = append(ft.Partitions, fp)
	f.Topics = append(f.Topics, ft)
	fr, err := f.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Equal(t, kerr.OffsetOutOfRange.Code, fr.Topics[0].Partitions[0].ErrorCode)
	require.Equal(t, int64(4), fr.Topics[0].Partitions[0].LogStartOffset)
}

// Metadata answers the data directory's node id and cluster id (its
// meta.properties), whatever Options.NodeID says.
func TestMetadataNamesTheDirectorysNode(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	m, err := tablet.OpenManager(nil, dir, tablet.ManagerOptions{NodeID: 7, ClusterID: "cluster-seven", Tablet: tablet.Options{Logger: quiet}})
	require.NoError(t, err)
	defer m.Close()
	b, err := compose(m, Options{Logger: quiet, NodeID: 3})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = b.Serve(ln) }()
	defer b.Close()
	adm, _, ctx := adminClient(t, ln.Addr().String())
	md, err := adm.BrokerMetadata(ctx)
	require.NoError(t, err)
	require.Equal(t, "cluster-seven", md.Cluster)
	require.Equal(t, int32(7), md.Controller)
	require.Equal(t, int32(7), md.Brokers[0].NodeID)
}

// DescribeCluster (KIP-700) lists this broker, at the address of the
// listener asked, as the controller of its cluster; controllers are not
// asked of a broker (MISMATCHED_ENDPOINT_TYPE, KIP-919).
func TestDescribeCluster(t *testing.T) {
	b, _, addr := testBroker(t, Options{})
	c := dialRaw(t, addr)
	for _, v := range []int16{0, 1, 2} {
		r := kmsg.NewPtrDescribeClusterRequest()
		r.IncludeClusterAuthorizedOperations = true
		resp := kmsg.NewPtrDescribeClusterResponse()
		c.do(r, v, resp)
		require.Zero(t, resp.ErrorCode, "v%d", v)
		require.Equal(t, b.clusterID, resp.ClusterID)
		require.Equal(t, b.opts.NodeID, resp.ControllerID)
		require.Len(t, resp.Brokers, 1)
		host, port, err := net.SplitHostPort(addr)
		require.NoError(t, err)
		require.Equal(t, host, resp.Brokers[0].Host)
		require.Equal(t, port, strconv.Itoa(int(resp.Brokers[0].Port)))
		require.Equal(t, b.opts.NodeID, resp.Brokers[0].NodeID)
	}
	r := kmsg.NewPtrDescribeClusterRequest()
	r.EndpointType = 2
	resp := kmsg.NewPtrDescribeClusterResponse()
	c.do(r, 1, resp)
	require.Equal(t, kerr.MismatchedEndpointType.Code, resp.ErrorCode)
}

// DescribeTopicPartitions (KIP-966) pages through the topics in name
// order: at most ResponsePartitionLimit partitions, the next page from
// NextCursor, until there is none; a topic asked by name that does not
// exist is UNKNOWN_TOPIC_OR_PARTITION and is not created.
func TestDescribeTopicPartitions(t *testing.T) {
	_, m, addr := testBroker(t, Options{})
	for topic, n := range map[string]int32{"c": 1, "a": 3, "b": 2} {
		for p := range n {
			_, err := m.Create(checkpoint.TopicPartition{Topic: topic, Partition: p}, nil)
			require.NoError(t, err)
		}
	}
	c := dialRaw(t, addr)
	var pages [][]string
	var cursor *kmsg.DescribeTopicPartitionsRequestCursor
	for {
		r := kmsg.NewPtrDescribeTopicPartitionsRequest()
		r.ResponsePartitionLimit, r.Cursor = 2, cursor
		resp := kmsg.NewPtrDescribeTopicPartitionsResponse()
		c.do(r, 0, resp)
		var page []string
		for _, topic := range resp.Topics {
			require.Zero(t, topic.ErrorCode)
			id, _ := m.TopicID(*topic.Topic)
			require.Equal(t, id, checkpoint.TopicID(topic.TopicID))
			for _, p := range topic.Partitions {
				require.Equal(t, []int32{p.LeaderID}, p.ISR)
				page = append(page, fmt.Sprintf("%s-%d", *topic.Topic, p.Partition))
			}
		}
		pages = append(pages, page)
		if resp.NextCursor == nil {
			break
		}
		cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: resp.NextCursor.Topic, Partition: resp.NextCursor.Partition}
		require.Less(t, len(pages), 10)
	}
	require.Equal(t, [][]string{{"a-0", "a-1"}, {"a-2", "b-0"}, {"b-1", "c-0"}}, pages)

	r := kmsg.NewPtrDescribeTopicPartitionsRequest()
	r.Topics = []kmsg.DescribeTopicPartitionsRequestTopic{{Topic: "b"}, {Topic: "nope"}}
	resp := kmsg.NewPtrDescribeTopicPartitionsResponse()
	c.do(r, 0, resp)
	require.Len(t, resp.Topics, 2)
	require.Equal(t, "b", *resp.Topics[0].Topic)
	require.Len(t, resp.Topics[0].Partitions, 2)
	require.Equal(t, kerr.UnknownTopicOrPartition.Code, resp.Topics[1].ErrorCode)
	_, ok := m.TopicID("nope")
	require.False(t, ok, "not created")
	require.Nil(t, resp.NextCursor)
}

// DescribeConfigs on the broker lists every config the operator set, with
// a password's value hidden (sensitive), as Kafka lists them.
func TestDescribeBrokerConfigsListsWhatWasSet(t *testing.T) {
	_, _, addr := testBroker(t, Options{ReauthInterval: time.Minute,
		Configs: map[string]string{"listeners": "PLAINTEXT://127.0.0.1:0", "sasl.test.password": "hush"}})
	adm, _, ctx := adminClient(t, addr)
	brs, err := adm.DescribeBrokerConfigs(ctx, 0)
	require.NoError(t, err)
	require.NoError(t, brs[0].Err)
	found := map[string]*kadm.Config{}
	for _, c := range brs[0].Configs {
		found[c.Key] = &c
	}
	require.Equal(t, "60000", found["connections.max.reauth.ms"].MaybeValue())
	require.Equal(t, "PLAINTEXT://127.0.0.1:0", found["listeners"].MaybeValue())
	secret := found["sasl.test.password"]
	require.True(t, secret.Sensitive)
	require.Nil(t, secret.Value, "a password is not told")
}

// A topic created with compression.type lz4 stores a snappy producer's
// batches as lz4 (Kafka recompresses them on append), and reports the
// config as the topic's own.
func TestCompressionTypeTopic(t *testing.T) {
	_, m, addr := testBroker(t, Options{})
	adm, _, ctx := adminClient(t, addr)
	r, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"compression.type": kmsg.StringPtr("lz4")}, "squeezed")
	require.NoError(t, err)
	require.NoError(t, r.Err)
	_, err = adm.CreateTopic(ctx, 1, 1, map[string]*string{"compression.type": kmsg.StringPtr("brotli")}, "nope")
	require.ErrorIs(t, err, kerr.InvalidConfig)
	c := configOf(t, ctx, adm, "squeezed", "compression.type")
	require.Equal(t, "lz4", c.MaybeValue())
	require.Equal(t, kmsg.ConfigSourceDynamicTopicConfig, c.Source)
	p, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ProducerBatchCompression(kgo.SnappyCompression()))
	require.NoError(t, err)
	defer p.Close()
	for i := range 20 {
		require.NoError(t, p.ProduceSync(ctx, &kgo.Record{Topic: "squeezed", Value: fmt.Appendf(nil, "value %d %0200d", i, i)}).FirstErr())
	}
	tb, _ := m.Get(checkpoint.TopicPartition{Topic: "squeezed"})
	n := 0
	for _, h := range logBatches(t, tb.Dir()) {
		require.Equal(t, record.LZ4, h.Attributes.Compression())
		n += int(h.NumRecords)
	}
	require.Equal(t, 20, n)
}

// With an authorizer on, a DescribeTopicPartitions of every topic lists
// only what the principal may describe, and its cursor names no other.
func TestDescribeTopicPartitionsAuthorized(t *testing.T) {
	b, m, _ := testBroker(t, Options{Authorizer: true, SuperUsers: []string{"User:admin"}})
	for _, topic := range []string{"a", "b"} {
		_, err := m.Create(checkpoint.TopicPartition{Topic: topic}, nil)
		require.NoError(t, err)
	}
	listed := func(who string, limit int32) *kmsg.DescribeTopicPartitionsResponse {
		r := kmsg.NewPtrDescribeTopicPartitionsRequest()
		r.ResponsePartitionLimit = limit
		return handleAs(t, b, who, r, 0).(*kmsg.DescribeTopicPartitionsResponse)
	}
	admin := listed("User:admin", 1)
	require.Len(t, admin.Topics, 1)
	require.Equal(t, "b", admin.NextCursor.Topic, "one partition a page")
	nobody := listed("User:nobody", 1)
	require.Empty(t, nobody.Topics)
	require.Nil(t, nobody.NextCursor, "no cursor to a topic it may not describe")
}

// ElectLeaders on a single node: each of its partitions is led by its
// only replica (ELECTION_NOT_NEEDED), others are unknown, asked for all
// nothing is answered; an unknown election type is INVALID_REQUEST.
func TestElectLeadersSingleNode(t *testing.T) {
	_, m, addr := testBroker(t, Options{})
	_, err := m.Create(checkpoint.TopicPartition{Topic: "e"}, nil)
	require.NoError(t, err)
	c := dialRaw(t, addr)
	for _, v := range []int16{0, 1, 2} {
		r := kmsg.NewPtrElectLeadersRequest()
		r.ElectionType = int8(v % 2)
		r.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: "e", Partitions: []int32{0, 1}}, {Topic: "nope", Partitions: []int32{0}}}
		resp := kmsg.NewPtrElectLeadersResponse()
		c.do(r, v, resp)
		require.Zero(t, resp.ErrorCode)
		require.Len(t, resp.Topics, 2)
		require.Equal(t, kerr.ElectionNotNeeded.Code, resp.Topics[0].Partitions[0].ErrorCode, "v%d", v)
		require.Equal(t, kerr.UnknownTopicOrPartition.Code, resp.Topics[0].Partitions[1].ErrorCode)
		require.Equal(t, kerr.UnknownTopicOrPartition.Code, resp.Topics[1].Partitions[0].ErrorCode)

		all := kmsg.NewPtrElectLeadersRequest()
		all.Topics = nil
		resp = kmsg.NewPtrElectLeadersResponse()
		c.do(all, v, resp)
		require.Zero(t, resp.ErrorCode)
		require.Empty(t, resp.Topics)
	}
	r := kmsg.NewPtrElectLeadersRequest()
	r.ElectionType = 7
	r.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: "e", Partitions: []int32{0}}}
	resp := kmsg.NewPtrElectLeadersResponse()
	c.do(r, 2, resp)
	require.Equal(t, kerr.InvalidRequest.Code, resp.ErrorCode)
	require.Equal(t, kerr.InvalidRequest.Code, resp.Topics[0].Partitions[0].ErrorCode)
}
