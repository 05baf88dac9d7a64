package broker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/cluster"
	"github.com/seglog/seglog/config"
	"github.com/seglog/seglog/coordinator/group"
	"github.com/seglog/seglog/replica"
	"github.com/seglog/seglog/tablet"
)

// A broker in a cluster (Options.Cluster set, docs/cluster.md) answers
// from the cluster's metadata: Metadata lists every live broker and each
// partition's leader, epoch, replicas and ISR; topics are created and
// deleted in etcd; produce and fetch are served by a partition's leader
// only (a follower's fetch is replication), and acks=all waits for the
// ISR.

// clustered reports whether the broker is one of a cluster.
func (b *Broker) clustered() bool { return b.opts.Cluster != nil }

// ClusterOptions make a broker one of a cluster.
type ClusterOptions struct {
	// Member is the broker's membership (metadata, leases); Replicas its
	// partitions' leadership and replication. Both are required.
	Member   *cluster.Member
	Replicas *replica.Manager
	// DefaultReplicationFactor is default.replication.factor, of topics
	// created without one (and auto-created ones). The default is 1.
	DefaultReplicationFactor int16
	// OffsetsReplicationFactor is offsets.topic.replication.factor
	// (default 3; fewer when the cluster has fewer live brokers).
	OffsetsReplicationFactor int16
	// TransactionsReplicationFactor is
	// transaction.state.log.replication.factor (default 3; fewer when the
	// cluster has fewer live brokers), TransactionsMinISR
	// transaction.state.log.min.isr (default 2, never above the replicas).
	TransactionsReplicationFactor int16
	TransactionsMinISR            int16
	// MinInsyncReplicas and UncleanLeaderElection are the broker's
	// min.insync.replicas and unclean.leader.election.enable, the
	// defaults of topics that do not set them (for DescribeConfigs).
	MinInsyncReplicas     int
	UncleanLeaderElection bool
	// RackAwareReplicaSelector is replica.selector.class Kafka's
	// RackAwareReplicaSelector (KIP-392): a consumer that names its rack
	// (client.rack) is sent to a follower in it.
	RackAwareReplicaSelector bool
}

// clusterTopicConfig is the config of a topic this broker holds no
// replica of: the defaults and the configs set on it in the cluster.
func (b *Broker) clusterTopicConfig(topic string) (tablet.Config, bool) {
	ts, ok := b.opts.Cluster.Member.Snapshot().Topics[topic]
	if !ok {
		return tablet.Config{}, false
	}
	c := b.m.DefaultConfig()
	for k, v := range ts.Configs {
		if replicationConfigs[k] == nil {
			_ = c.Set(k, v) // (checked when it was set)
		}
	}
	return c, true
}

// clusterAlterTopicConfig is alterTopicConfig in a cluster: the topic's
// configs are its key's in etcd (those set explicitly), changed there for
// every broker, whose replicas take them; the answer comes once this
// broker's have. Every change is checked first: a bad one changes
// nothing.
func (b *Broker) clusterAlterTopicConfig(topic string, changes []configChange, replace, validateOnly bool) (int16, *string) {
	c := b.opts.Cluster
	ts, ok := c.Member.Snapshot().Topics[topic]
	if !ok {
		return kerr.UnknownTopicOrPartition.Code, errText("topic %q does not exist", topic)
	}
	configs := map[string]string{}
	if !replace {
		configs = maps.Clone(ts.Configs)
		if configs == nil {
			configs = map[string]string{}
		}
	}
	defaults := b.m.DefaultConfig()
	for _, ch := range changes {
		switch {
		case ch.reset:
			if _, known := defaults.Get(ch.key); !known && replicationConfigs[ch.key] == nil && fixedConfigs[ch.key].value == "" {
				return errorCode(tablet.ErrConfig), errText("unknown key %q", ch.key)
			}
			delete(configs, ch.key)
		case ch.value == nil:
			return kerr.InvalidConfig.Code, errText("%s has no value", ch.key)
		case ch.list != 0:
			current, ok := configs[ch.key]
			if !ok {
				current, _ = defaults.Get(ch.key)
			}
			configs[ch.key] = listChange(current, ch.value, ch.list)
		default:
			configs[ch.key] = *ch.value
		}
	}
	cfg := b.m.DefaultConfig()
	for _, k := range slices.Sorted(maps.Keys(configs)) {
		v := configs[k]
		var err error
		if check := replicationConfigs[k]; check != nil {
			err = check(&v)
		} else {
			err = setTopicConfig(&cfg, k, &v)
		}
		if err != nil {
			return errorCode(err), errMessage(err)
		}
	}
	if validateOnly {
		return 0, nil
	}
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if _, err := c.Member.AlterTopicConfigs(ctx, topic, configs); err != nil {
		return errorCode(err), errMessage(err)
	}
	if err := c.Replicas.Await(ctx, c.Member.Snapshot().Revision); err != nil {
		return errorCode(err), errMessage(err)
	}
	b.opts.Logger.Info("altered a topic config in the cluster", "topic", topic, "changes", len(changes))
	return 0, nil
}

// syncCluster brings this broker's view of the cluster — the snapshot and
// the replicas' configs — up to every write etcd has made, for a read that
// must see another broker's change; if etcd does not answer within
// syncTimeout, the read is of the view the broker has (as Kafka's
// metadata cache, which may lag).
func (b *Broker) syncCluster(ctx context.Context) {
	c := b.opts.Cluster
	ctx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	err := c.Member.Sync(ctx)
	if err == nil {
		err = c.Replicas.Await(ctx, c.Member.Snapshot().Revision)
	}
	if err != nil {
		b.opts.Logger.Debug("answering from this broker's view of the cluster: it could not catch up with etcd", "err", err)
	}
}

// syncTimeout bounds syncCluster.
const syncTimeout = 2 * time.Second

// describeReplicationConfigs sets, in a topic's described configs, the
// replication configs of the cluster: the topic's own (a dynamic topic
// config) or the broker's default.
func (b *Broker) describeReplicationConfigs(topic string, out []describedConfig) []describedConfig {
	out = slices.DeleteFunc(out, func(d describedConfig) bool { return replicationConfigs[d.name] != nil })
	set := map[string]string{}
	if ts, ok := b.opts.Cluster.Member.Snapshot().Topics[topic]; ok {
		set = ts.Configs
	}
	defaults := map[string]string{"min.insync.replicas": strconv.Itoa(max(b.opts.Cluster.MinInsyncReplicas, 1)),
		"unclean.leader.election.enable":          strconv.FormatBool(b.opts.Cluster.UncleanLeaderElection),
		"leader.replication.throttled.replicas":   "",
		"follower.replication.throttled.replicas": ""}
	types := map[string]kmsg.ConfigType{"min.insync.replicas": kmsg.ConfigTypeInt, "unclean.leader.election.enable": kmsg.ConfigTypeBoolean,
		"leader.replication.throttled.replicas": kmsg.ConfigTypeList, "follower.replication.throttled.replicas": kmsg.ConfigTypeList}
	for k, v := range defaults {
		d := describedConfig{name: k, value: v, source: kmsg.ConfigSourceStaticBrokerConfig, typ: types[k]}
		if tv, ok := set[k]; ok {
			d.value, d.source = tv, kmsg.ConfigSourceDynamicTopicConfig
		}
		out = append(out, d)
	}
	return out
}

// clusterBrokers lists the live brokers, each at its endpoint on the
// listener the client connected through (Kafka: a broker without that
// listener is left out).
func (b *Broker) clusterBrokers(h header, s *cluster.Snapshot) []kmsg.MetadataResponseBroker {
	name := ""
	if h.listener != nil {
		name = h.listener.Name
	}
	var out []kmsg.MetadataResponseBroker
	for _, id := range s.BrokerIDs() {
		br := s.Brokers[id]
		e, ok := br.Endpoint(name)
		if !ok {
			if name != "" || len(br.Endpoints) == 0 {
				continue
			}
			e = br.Endpoints[0]
		}
		mb := kmsg.NewMetadataResponseBroker()
		mb.NodeID, mb.Host, mb.Port = id, e.Host, e.Port
		if br.Rack != "" {
			mb.Rack = kmsg.StringPtr(br.Rack)
		}
		out = append(out, mb)
	}
	return out
}

// clusterMetadata answers Metadata from the cluster's snapshot.
func (b *Broker) clusterMetadata(h header, r *kmsg.MetadataRequest) *kmsg.MetadataResponse {
	resp := r.ResponseKind().(*kmsg.MetadataResponse)
	s := b.opts.Cluster.Member.Snapshot()
	resp.Brokers = b.clusterBrokers(h, s)
	resp.ControllerID = s.Controller
	resp.ClusterID = kmsg.StringPtr(b.clusterID)
	var names []string
	all := r.Topics == nil || (r.GetVersion() == 0 && len(r.Topics) == 0)
	if all {
		for n := range s.Topics {
			names = append(names, n)
		}
		sort.Strings(names)
	}
	for _, t := range r.Topics {
		switch {
		case t.Topic != nil:
			names = append(names, *t.Topic)
		case t.TopicID != [16]byte{}:
			if ts, ok := s.TopicByID(t.TopicID); ok {
				names = append(names, ts.Name)
			} else {
				rt := kmsg.NewMetadataResponseTopic()
				rt.TopicID, rt.ErrorCode = t.TopicID, kerr.UnknownTopicID.Code
				resp.Topics = append(resp.Topics, rt)
			}
		}
	}
	autoCreate := !all && (r.GetVersion() < 4 || r.AllowAutoTopicCreation) && !b.opts.NoAutoCreate
	ac := b.autoCreation(h)
	defer ac.finish(resp)
	for _, name := range names {
		topic := kmsg.MetadataResponseTopic{Topic: kmsg.StringPtr(name), IsInternal: internalTopics[name]}
		ts, ok := s.Topics[name]
		if !ok && autoCreate && !internalTopics[name] {
			if checkpoint.ValidateTopic(name) != nil {
				topic.ErrorCode = kerr.InvalidTopicException.Code
				resp.Topics = append(resp.Topics, topic)
				continue
			}
			ac.create(name)
			s = b.opts.Cluster.Member.Snapshot()
			ts, ok = s.Topics[name]
		}
		if !ok {
			topic.ErrorCode = kerr.UnknownTopicOrPartition.Code
			resp.Topics = append(resp.Topics, topic)
			continue
		}
		if r.GetVersion() >= 10 {
			topic.TopicID = ts.ID
		}
		// A broker not certain of its session claims no leadership: its
		// snapshot may be stale, and clients must look elsewhere.
		fenced := !b.opts.Cluster.Member.Leased()
		for i, st := range ts.Partitions {
			leader, isr := s.Shown(st)
			if fenced && leader == b.opts.NodeID {
				leader = cluster.NoLeader
			}
			p := kmsg.NewMetadataResponseTopicPartition()
			p.Partition, p.Leader, p.LeaderEpoch = int32(i), leader, st.LeaderEpoch
			p.Replicas, p.ISR = slices.Clone(ts.Replicas[i]), isr
			p.OfflineReplicas, p.ErrorCode = offlineReplicas(s, ts.Replicas[i]), leaderCode(leader)
			topic.Partitions = append(topic.Partitions, p)
		}
		resp.Topics = append(resp.Topics, topic)
	}
	b.metadataAuthorizedOps(h, r, resp)
	return resp
}

// offlineReplicas are the replicas whose broker is not registered.
func offlineReplicas(s *cluster.Snapshot, replicas []int32) []int32 {
	out := []int32{}
	for _, r := range replicas {
		if _, live := s.Brokers[r]; !live {
			out = append(out, r)
		}
	}
	return out
}

// leaderCode is a partition's error as clients are told it: none, or
// LEADER_NOT_AVAILABLE while it has no leader.
func leaderCode(leader int32) int16 {
	if leader == cluster.NoLeader {
		return kerr.LeaderNotAvailable.Code
	}
	return 0
}

// clusterDescribeCluster lists the live brokers and the controller.
func (b *Broker) clusterDescribeCluster(h header, resp *kmsg.DescribeClusterResponse) {
	s := b.opts.Cluster.Member.Snapshot()
	resp.ControllerID = s.Controller
	resp.Brokers = nil
	for _, mb := range b.clusterBrokers(h, s) {
		resp.Brokers = append(resp.Brokers, kmsg.DescribeClusterResponseBroker{NodeID: mb.NodeID, Host: mb.Host, Port: mb.Port, Rack: mb.Rack})
	}
}

// clusterReplicaFor is replicaFor in a cluster: the partition's replica
// here (its leadership is the produce's CheckAppend's), else
// NOT_LEADER_OR_FOLLOWER (or Kafka's answer for a partition that does not
// exist, after auto-creation).
func (b *Broker) clusterReplicaFor(topic string, partition int32, ac *autoCreation) (*replica.Partition, int16) {
	s := b.opts.Cluster.Member.Snapshot()
	ts, ok := s.Topics[topic]
	if !ok && ac != nil && !b.opts.NoAutoCreate && !internalTopics[topic] {
		if err := checkpoint.ValidateTopic(topic); err != nil {
			return nil, kerr.InvalidTopicException.Code
		}
		ac.create(topic)
		ts, ok = b.opts.Cluster.Member.Snapshot().Topics[topic]
	}
	if !ok || partition < 0 || int(partition) >= len(ts.Partitions) {
		return nil, kerr.UnknownTopicOrPartition.Code
	}
	p, ok := b.replicas.Get(checkpoint.TopicPartition{Topic: topic, Partition: partition})
	if !ok {
		return nil, kerr.NotLeaderForPartition.Code
	}
	return p, 0
}

// fetchSource is where a fetch reads a partition.
type fetchSource struct {
	t    *tablet.Tablet
	code int16 // Kafka's error instead (no tablet)
	// throttled: a follower's fetch whose bytes the leader's replication
	// throttle counts; held: the throttle holds them back now.
	throttled, held bool
	// preferred is KIP-392's replica the consumer should read from
	// instead (-1: this broker).
	preferred int32
	// follower: a follower's fetch.
	follower bool
}

// fetchTablet finds where a fetch reads a partition: on a leader, for a
// consumer at its current leader epoch (or, KIP-392, the follower in the
// consumer's rack it should read from), or for a follower (whose fetch
// offset is its progress, under the replication throttle); on a
// follower, for a consumer's Fetch v11+ (KIP-392: up to the follower's
// high watermark).
func (b *Broker) fetchTablet(r *kmsg.FetchRequest, topic string, rp kmsg.FetchRequestTopicPartition) fetchSource {
	p, code := b.replicaOf(topic, rp.Partition)
	if p == nil {
		return fetchSource{code: code, preferred: -1}
	}
	if id := fetchReplica(r); id >= 0 {
		code, throttled := p.FollowerFetch(id, rp.CurrentLeaderEpoch, rp.FetchOffset, rp.LogStartOffset)
		if code != 0 {
			return fetchSource{code: code, preferred: -1}
		}
		held := throttled && b.replicas.LeaderThrottleHeld()
		return fetchSource{t: p.Tablet(), throttled: throttled, held: held, preferred: -1, follower: true}
	}
	code = p.CheckLeader(rp.CurrentLeaderEpoch)
	if code == kerr.NotLeaderForPartition.Code && r.GetVersion() >= 11 {
		if code := p.CheckFollowerRead(rp.CurrentLeaderEpoch); code != 0 {
			return fetchSource{code: code, preferred: -1}
		}
		return fetchSource{t: p.Tablet(), preferred: -1}
	}
	if code := cmp.Or(code, p.CheckHighWatermark()); code != 0 {
		return fetchSource{code: code, preferred: -1}
	}
	src := fetchSource{t: p.Tablet(), preferred: -1}
	if b.clustered() && b.opts.Cluster.RackAwareReplicaSelector && r.GetVersion() >= 11 {
		snap := b.opts.Cluster.Member.Snapshot()
		src.preferred = p.PreferredReadReplica(r.Rack, rp.FetchOffset, func(id int32) string { return snap.Brokers[id].Rack })
	}
	return src
}

// fetchReplica is the replica id of a follower's fetch (-1: a consumer's).
func fetchReplica(r *kmsg.FetchRequest) int32 {
	if r.GetVersion() >= 15 {
		return r.ReplicaState.ID
	}
	return r.ReplicaID
}

// metadataWriteTimeout bounds a change of the cluster's metadata in etcd.
const metadataWriteTimeout = 30 * time.Second

// awaitReplicas waits, up to wait (a request's timeout_ms; none for 0 or
// less), until this broker's replicas follow the metadata it has now: a
// topic created or deleted is done here. Running out of time is
// REQUEST_TIMED_OUT, as in Kafka, and the change stands.
func (b *Broker) awaitReplicas(wait time.Duration) (int16, *string) {
	if wait <= 0 {
		return 0, nil
	}
	c := b.opts.Cluster
	ctx, cancel := context.WithTimeout(b.ctx, wait)
	defer cancel()
	if err := c.Replicas.Await(ctx, c.Member.Snapshot().Revision); err != nil {
		return kerr.RequestTimedOut.Code, errMessage(err)
	}
	return 0, nil
}

// clusterCreateTopic creates a topic in the cluster and waits (up to
// wait) until this broker holds its replicas.
func (b *Broker) clusterCreateTopic(topic string, partitions int32, rf int16, assignment [][]int32, configs map[string]string,
	validateOnly bool, mut *mutations, wait time.Duration) (int16, *string) {
	c := b.opts.Cluster
	if rf == -1 {
		rf = c.DefaultReplicationFactor
	}
	spec := cluster.TopicSpec{Name: topic, Partitions: int(partitions), ReplicationFactor: int(rf), Assignment: assignment, Configs: configs}
	s := c.Member.Snapshot()
	if _, ok := s.Topics[topic]; ok {
		return kerr.TopicAlreadyExists.Code, errText("topic %q already exists", topic)
	}
	if _, err := s.Placement(spec, 0, -1); err != nil {
		return clusterCode(err), errMessage(err)
	}
	if validateOnly {
		return 0, nil
	}
	if !mut.take(int(partitions)) {
		return kerr.ThrottlingQuotaExceeded.Code, mut.refusal()
	}
	ctx, cancel := context.WithTimeout(b.ctx, metadataWriteTimeout)
	defer cancel()
	if _, err := c.Member.CreateTopic(ctx, spec); err != nil {
		return clusterCode(err), errMessage(err)
	}
	b.opts.Logger.Info("created a topic", "topic", topic, "partitions", partitions, "replication_factor", rf)
	return b.awaitReplicas(wait)
}

// clusterCode is Kafka's code for a cluster metadata error (a wait
// that ran out is REQUEST_TIMED_OUT).
func clusterCode(err error) int16 {
	if errors.Is(err, context.DeadlineExceeded) {
		return kerr.RequestTimedOut.Code
	}
	return errorCode(err)
}

// clusterDeleteTopic deletes a topic from the cluster (the replicas go
// with it on every broker; this one's are waited for up to wait).
func (b *Broker) clusterDeleteTopic(topic string, mut *mutations, wait time.Duration) (int16, *string) {
	c := b.opts.Cluster
	ts, ok := c.Member.Snapshot().Topics[topic]
	if !ok {
		return kerr.UnknownTopicOrPartition.Code, errText("topic %q does not exist", topic)
	}
	if !mut.take(len(ts.Partitions)) {
		return kerr.ThrottlingQuotaExceeded.Code, mut.refusal()
	}
	ctx, cancel := context.WithTimeout(b.ctx, metadataWriteTimeout)
	defer cancel()
	if err := c.Member.DeleteTopic(ctx, topic, ts.ID); err != nil {
		return clusterCode(err), errMessage(err)
	}
	b.opts.Logger.Info("deleted a topic", "topic", topic, "partitions", len(ts.Partitions))
	return b.awaitReplicas(wait)
}

// clusterGrowTopic adds partitions to a topic of the cluster.
func (b *Broker) clusterGrowTopic(rt kmsg.CreatePartitionsRequestTopic, validateOnly bool, mut *mutations) (int16, *string) {
	c := b.opts.Cluster
	ts, ok := c.Member.Snapshot().Topics[rt.Topic]
	if !ok {
		return kerr.UnknownTopicOrPartition.Code, errText("topic %q does not exist", rt.Topic)
	}
	have := int32(len(ts.Partitions))
	if rt.Count <= have || rt.Count > b.opts.MaxTopicPartitions {
		return kerr.InvalidPartitions.Code, errText("topic %q has %d partitions; the count must grow, to at most %d", rt.Topic,
			have, b.opts.MaxTopicPartitions)
	}
	var assignment [][]int32
	for _, a := range rt.Assignment {
		assignment = append(assignment, a.Replicas)
	}
	if validateOnly {
		return 0, nil
	}
	if !mut.take(int(rt.Count - have)) {
		return kerr.ThrottlingQuotaExceeded.Code, mut.refusal()
	}
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if _, err := c.Member.CreatePartitions(ctx, rt.Topic, int(rt.Count), assignment); err != nil {
		return clusterCode(err), errMessage(err)
	}
	if err := c.Replicas.Await(ctx, c.Member.Snapshot().Revision); err != nil {
		return kerr.RequestTimedOut.Code, errMessage(err)
	}
	return 0, nil
}

// awaitAcks completes a produce (a single node's at once): each partition appended
// tells its leadership (the high watermark may move), then acks=all waits
// for the high watermark to cover what was appended, within the request's
// timeout; acks=1 is answered only by a broker still certain it leads.
func (b *Broker) awaitAcks(ctx context.Context, acks int16, timeoutMs int32, jobs []appendJob) {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(max(timeoutMs, 0))*time.Millisecond)
	defer cancel()
	for _, jb := range jobs {
		if jb.sp.ErrorCode != 0 || *jb.end < 0 {
			continue
		}
		p := jb.p
		p.Appended()
		switch {
		case acks == 0:
		case acks == -1:
			jb.sp.ErrorCode = p.AwaitAcks(ctx, *jb.end)
		case !p.Leads():
			jb.sp.ErrorCode = kerr.NotLeaderForPartition.Code
		}
	}
}

// replicationConfigs are the topic configs a cluster's replication
// takes (kept in the topic's metadata), with their checks: the table's
// (package config), and the throttled replicas' syntax.
var replicationConfigs = map[string]func(*string) error{
	"min.insync.replicas":                     checkByTable("min.insync.replicas"),
	"unclean.leader.election.enable":          checkByTable("unclean.leader.election.enable"),
	"leader.replication.throttled.replicas":   checkThrottledReplicas,
	"follower.replication.throttled.replicas": checkThrottledReplicas,
}

// checkByTable checks a topic config's value by package config's table.
func checkByTable(name string) func(*string) error {
	d, ok := config.TopicDef(name)
	if !ok {
		panic("broker: " + name + " is not in package config's table") // (a programming error, at init)
	}
	return func(v *string) error {
		if err := d.Check(deref(v)); err != nil {
			return fmt.Errorf("%w: %s: %v", tablet.ErrConfig, name, err)
		}
		return nil
	}
}

func checkThrottledReplicas(v *string) error {
	if _, err := replica.ParseThrottledReplicas(deref(v)); err != nil {
		return fmt.Errorf("%w: %w", tablet.ErrConfig, err)
	}
	return nil
}

// IsReplicationConfig reports whether a topic config is the cluster's
// replication's (kept in the topic's metadata), not its tablets'.
func IsReplicationConfig(name string) bool { return replicationConfigs[name] != nil }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// leaderHint is KIP-951's current leader of a partition, for a client
// told NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH: it moves there
// without asking Metadata. ok is false when there is none to tell.
func (b *Broker) leaderHint(code int16, topic string, partition int32) (leader, epoch int32, ok bool) {
	if !b.clustered() || code != kerr.NotLeaderForPartition.Code && code != kerr.FencedLeaderEpoch.Code {
		return -1, -1, false
	}
	st, ok := b.opts.Cluster.Member.Snapshot().Partition(topic, partition)
	if !ok || st.Leader == cluster.NoLeader || st.Leader == b.opts.NodeID {
		return -1, -1, false // (none, or this broker, fenced: its snapshot may be stale)
	}
	return st.Leader, st.LeaderEpoch, true
}

// hintedBrokers are the endpoints (KIP-951's NodeEndpoints) of the
// leaders hinted in a response, on the client's listener.
func (b *Broker) hintedBrokers(h header, leaders map[int32]bool) []kmsg.MetadataResponseBroker {
	if len(leaders) == 0 {
		return nil
	}
	return slices.DeleteFunc(b.clusterBrokers(h, b.opts.Cluster.Member.Snapshot()), func(mb kmsg.MetadataResponseBroker) bool {
		return !leaders[mb.NodeID]
	})
}

// hintProduceLeaders tells, for each partition this broker does not
// lead, its current leader and that leader's endpoint (KIP-951, Produce
// v10+).
func (b *Broker) hintProduceLeaders(h header, resp *kmsg.ProduceResponse) {
	leaders := map[int32]bool{}
	for i := range resp.Topics {
		rt := &resp.Topics[i]
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			if id, epoch, ok := b.leaderHint(rp.ErrorCode, rt.Topic, rp.Partition); ok {
				rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = id, epoch
				leaders[id] = true
			}
		}
	}
	for _, mb := range b.hintedBrokers(h, leaders) {
		resp.Brokers = append(resp.Brokers, kmsg.ProduceResponseBroker{NodeID: mb.NodeID, Host: mb.Host, Port: mb.Port, Rack: mb.Rack})
	}
}

// errNotCoordinator is a coordinator's write to a partition this broker
// does not lead (any more).
var errNotCoordinator = seglog.NewKafkaError("broker: not the coordinator", 16) // NOT_COORDINATOR

// clusterGroupHooks make the group coordinator a cluster's: its
// __consumer_offsets is a cluster topic (offsets.topic.num.partitions,
// replicated offsets.topic.replication.factor times, or once per broker
// when there are fewer), whose partitions' leaders coordinate their
// groups; a write is answered once the partition's ISR has it.
func clusterGroupHooks(c *ClusterOptions, gopts group.Options, log *slog.Logger) *group.ClusterHooks {
	partitions := cmp.Or(gopts.Partitions, 50)
	segmentBytes := cmp.Or(gopts.SegmentBytes, 104857600)
	it := internalTopic{c: c, topic: group.Topic}
	return &group.ClusterHooks{Topics: clusterTopics{c.Member}, Hooks: group.Hooks{Tablet: it.tablet, Replicated: it.replicated, Partitions: it.partitions, Elected: it.elected,
		Leased: c.Member.Leased,
		Ensure: func() error {
			return ensureInternalTopic(c, group.Topic, partitions, c.OffsetsReplicationFactor, 0, map[string]string{
				"cleanup.policy": "compact", "segment.bytes": strconv.FormatInt(segmentBytes, 10),
				"retention.ms": "-1", "retention.bytes": "-1"})
		},
	}}
}

// internalTopic is a coordinator's internal topic in a cluster.
type internalTopic struct {
	c     *ClusterOptions
	topic string
}

// tablet returns partition p's tablet if this broker leads it, else
// errNotCoordinator.
func (it internalTopic) tablet(p int32) (*tablet.Tablet, error) {
	r, ok := it.c.Replicas.Get(checkpoint.TopicPartition{Topic: it.topic, Partition: p})
	if !ok || !r.Leads() {
		return nil, fmt.Errorf("%w: %s-%d", errNotCoordinator, it.topic, p)
	}
	return r.Tablet(), nil
}

// replicated returns once what was appended to t below end is on the
// partition's ISR (as acks=all), else errNotCoordinator.
func (it internalTopic) replicated(t *tablet.Tablet, end int64) error {
	code := kerr.NotLeaderForPartition.Code
	if p, ok := it.c.Replicas.Get(t.TopicPartition()); ok {
		code = awaitISR(context.Background(), p, end)
	}
	if code != 0 {
		return fmt.Errorf("%w: %s: %s", errNotCoordinator, t.TopicPartition(), kerr.ErrorForCode(code))
	}
	return nil
}

// awaitISR returns once what this broker, as leader, appended to p below
// end is on p's ISR (acks=all; 30 s at most), or Kafka's error.
func awaitISR(ctx context.Context, p *replica.Partition, end int64) int16 {
	p.Appended()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return p.AwaitAcks(ctx, end)
}

// elected reports whether the metadata names this broker partition p's
// leader (it may not have taken the leadership up yet), and its session
// is certainly alive (else it is NOT_COORDINATOR: clients look again).
func (it internalTopic) elected(p int32) bool {
	st, ok := it.c.Member.Snapshot().Partition(it.topic, p)
	return ok && st.Leader == it.c.Member.NodeID() && it.c.Member.Leased()
}

// partitions is the topic's partition count in the cluster (0 before it
// exists).
func (it internalTopic) partitions() int32 {
	if t, ok := it.c.Member.Snapshot().Topics[it.topic]; ok {
		return int32(len(t.Partitions))
	}
	return 0
}

// ensureInternalTopic creates an internal topic in the cluster if it
// does not exist, with rf replicas (default 3; fewer when there are fewer
// live brokers) and, if minISR is set, that min.insync.replicas (never
// above the replicas), and waits until this broker applied it.
func ensureInternalTopic(c *ClusterOptions, topic string, partitions int32, rf, minISR int16, configs map[string]string) error {
	s := c.Member.Snapshot()
	if _, ok := s.Topics[topic]; ok {
		return nil
	}
	live := 0
	for id := range s.Brokers {
		if s.Live(id) {
			live++
		}
	}
	replicas := max(min(int(cmp.Or(rf, 3)), live), 1)
	if minISR > 0 {
		configs["min.insync.replicas"] = strconv.Itoa(min(int(minISR), replicas))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := c.Member.CreateTopic(ctx, cluster.TopicSpec{Name: topic, Partitions: int(partitions),
		ReplicationFactor: replicas, Configs: configs})
	if err != nil && !errors.Is(err, cluster.ErrTopicExists) {
		return err
	}
	return c.Replicas.Await(ctx, c.Member.Snapshot().Revision)
}

// watchCoordinated has a coordinator follow the leadership of its
// internal topic's partitions: load runs (off the manager's goroutine:
// it replays the partition) for each partition this broker comes to lead,
// at its leader epoch, and unload for each it stops leading.
func watchCoordinated(r *replica.Manager, topic string, load func(p int32, t *tablet.Tablet, epoch int32) func() error,
	unload func(p int32), log *slog.Logger) {
	r.Watch(func(tp checkpoint.TopicPartition, t *tablet.Tablet, leading bool) {
		if tp.Topic != topic {
			return
		}
		if !leading {
			unload(tp.Partition)
			return
		}
		p, ok := r.Get(tp)
		if !ok {
			return
		}
		if run := load(tp.Partition, t, p.State().LeaderEpoch); run != nil {
			go func() {
				if err := run(); err != nil {
					log.Error("loading a coordinator's partition", "partition", tp.String(), "err", err)
				}
			}()
		}
	})
}

// clusterTopics are the cluster's topics, as the group coordinator asks
// for them.
type clusterTopics struct{ m *cluster.Member }

func (ct clusterTopics) TopicPartitions(name string) (checkpoint.TopicID, int32, bool) {
	t, ok := ct.m.Snapshot().Topics[name]
	if !ok {
		return checkpoint.TopicID{}, 0, false
	}
	return checkpoint.TopicID(t.ID), int32(len(t.Partitions)), true
}

func (ct clusterTopics) TopicsVersion() uint64 { return uint64(ct.m.Snapshot().Revision) }

func (ct clusterTopics) TopicNames() []string {
	return slices.Sorted(maps.Keys(ct.m.Snapshot().Topics))
}

func (ct clusterTopics) TopicByID(id checkpoint.TopicID) (string, bool) {
	t, ok := ct.m.Snapshot().TopicByID(cluster.TopicID(id))
	if !ok {
		return "", false
	}
	return t.Name, true
}

// leaderReplica is the replica a request for a partition's leader reads
// or changes (ListOffsets, OffsetForLeaderEpoch, DeleteRecords, a
// transaction marker): only this broker's as the partition's leader at
// currentEpoch (-1: any), and, when hwKnown, only once its high watermark
// is known to be its epoch's (OFFSET_NOT_AVAILABLE before, as Kafka's new
// leader answers ListOffsets).
func (b *Broker) leaderReplica(topic string, partition, currentEpoch int32, hwKnown bool) (*replica.Partition, int16) {
	p, code := b.replicaOf(topic, partition)
	if p == nil {
		return nil, code
	}
	code = p.CheckLeader(currentEpoch)
	if code == 0 && hwKnown {
		code = p.CheckHighWatermark()
	}
	if code != 0 {
		return nil, code
	}
	return p, 0
}

// replicaOf finds this broker's replica of a partition (a single node's
// is its tablet's), else Kafka's code for it — a partition of the cluster
// with no replica here is NOT_LEADER_OR_FOLLOWER.
func (b *Broker) replicaOf(topic string, partition int32) (p *replica.Partition, code int16) {
	tp := checkpoint.TopicPartition{Topic: topic, Partition: partition}
	if p, ok := b.replicas.Get(tp); ok {
		return p, 0
	}
	if _, n, ok := b.topics.TopicPartitions(topic); ok && partition >= 0 && partition < n {
		return nil, kerr.NotLeaderForPartition.Code
	}
	return nil, kerr.UnknownTopicOrPartition.Code
}
