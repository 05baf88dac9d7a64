package broker

import (
	"context"
	"maps"
	"math"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/broker/auth"
	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/cluster"
	"github.com/seglog/seglog/coordinator/group"
	"github.com/seglog/seglog/coordinator/txn"
)

// Metadata: the broker, the topics and their partitions, topics
// auto-created on first mention.

func init() {
	register(api{key: 3, min: 0, max: 13, handle: handler((*Broker).metadata), null: nullMetadata,
		rule: ruleFor(ruleTopic, opDescribe, (*guard).authorizeMetadata)},
		api{key: 60, min: 0, max: 2, handle: handler((*Broker).describeCluster),
			rule: ruleFor(ruleCluster, opDescribe, (*guard).authorizeDescribeCluster)},
		api{key: 75, min: 0, max: 0, handle: handler((*Broker).describeTopicPartitions),
			rule: ruleFor(ruleTopic, opDescribe, (*guard).authorizeDescribeTopicPartitions)})
}

// maxDescribedPartitions is Kafka's max.request.partition.size.limit: the
// most partitions one DescribeTopicPartitions answers.
const maxDescribedPartitions = 2000

// describeTopicPartitions (KIP-966, what Kafka 4's admin client describes
// topics with) lists the topics asked, or every topic the principal may
// describe, by name, with their partitions, in pages: at most
// ResponsePartitionLimit partitions, the next page's first topic and
// partition in NextCursor. It creates nothing. A topic asked by name that
// the principal may not describe is TOPIC_AUTHORIZATION_FAILED.
func (b *Broker) describeTopicPartitions(_ context.Context, h header, r *kmsg.DescribeTopicPartitionsRequest) *kmsg.DescribeTopicPartitionsResponse {
	resp := r.ResponseKind().(*kmsg.DescribeTopicPartitionsResponse)
	var names []string
	all := len(r.Topics) == 0
	snap := b.cat.snapshot()
	if all {
		names = slices.Collect(maps.Keys(snap.Topics))
	}
	for _, t := range r.Topics {
		if !slices.Contains(names, t.Topic) {
			names = append(names, t.Topic)
		}
	}
	slices.Sort(names)
	limit := int(r.ResponsePartitionLimit)
	if limit <= 0 || limit > maxDescribedPartitions {
		limit = maxDescribedPartitions
	}
	from := 0
	if r.Cursor != nil {
		i, ok := slices.BinarySearch(names, r.Cursor.Topic)
		if !ok && !all {
			// Kafka: the cursor's topic must be one of those asked for.
			for _, n := range names {
				resp.Topics = append(resp.Topics, kmsg.DescribeTopicPartitionsResponseTopic{Topic: kmsg.StringPtr(n),
					ErrorCode: kerr.InvalidRequest.Code, AuthorizedOperations: math.MinInt32})
			}
			return resp
		}
		names, from = names[i:], int(r.Cursor.Partition)
	}
	count := 0
	for i, name := range names {
		allowed := b.guard.may(h, opDescribe, resTopic, name)
		if !allowed && all {
			continue // a listing of every topic leaves it out, a cursor never names it
		}
		first := 0
		if i == 0 {
			first = from
		}
		if count == limit {
			resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name, Partition: int32(first)}
			break
		}
		topic := kmsg.NewDescribeTopicPartitionsResponseTopic()
		topic.Topic, topic.IsInternal = kmsg.StringPtr(name), internalTopics[name]
		if !allowed { // asked for by name
			topic.ErrorCode = kerr.TopicAuthorizationFailed.Code
			resp.Topics = append(resp.Topics, topic)
			continue
		}
		parts, id := describedPartitions(snap, name)
		if len(parts) == 0 {
			topic.ErrorCode = kerr.UnknownTopicOrPartition.Code
			resp.Topics = append(resp.Topics, topic)
			continue
		}
		topic.TopicID = id
		for _, dp := range parts {
			if int(dp.Partition) < first {
				continue
			}
			if count == limit {
				resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name, Partition: dp.Partition}
				break
			}
			topic.Partitions = append(topic.Partitions, dp)
			count++
		}
		topic.AuthorizedOperations = b.guard.authorizedOps(h, resTopic, name)
		if len(topic.Partitions) > 0 {
			resp.Topics = append(resp.Topics, topic)
		}
		if resp.NextCursor != nil {
			break
		}
	}
	return resp
}

// describedPartitions are a topic's partitions as DescribeTopicPartitions
// tells them, and its id: leader, ISR as clients are shown them
// (cluster.Snapshot.Shown), the Eligible Leader Replicas and the last
// known one, the replicas offline.
func describedPartitions(snap *cluster.Snapshot, name string) ([]kmsg.DescribeTopicPartitionsResponseTopicPartition, [16]byte) {
	ts, ok := snap.Topics[name]
	if !ok {
		return nil, [16]byte{}
	}
	var out []kmsg.DescribeTopicPartitionsResponseTopicPartition
	for i, st := range ts.Partitions {
		dp := kmsg.NewDescribeTopicPartitionsResponseTopicPartition()
		leader, isr := snap.Shown(st)
		dp.Partition, dp.LeaderID, dp.LeaderEpoch = int32(i), leader, st.LeaderEpoch
		dp.Replicas, dp.ISR = slices.Clone(ts.Replicas[i]), isr
		dp.EligibleLeaderReplicas, dp.LastKnownELR = append([]int32{}, st.ELR...), append([]int32{}, st.LastKnownELR...)
		dp.OfflineReplicas, dp.ErrorCode = offlineReplicas(snap, ts.Replicas[i]), leaderCode(leader)
		out = append(out, dp)
	}
	return out, ts.ID
}

// authorizeDescribeTopicPartitions leaves each topic to the handler,
// which pages the topics in name order: it answers TOPIC_AUTHORIZATION_FAILED
// for one asked by name and leaves one out of a listing of every topic.
func (g *guard) authorizeDescribeTopicPartitions(header, *kmsg.DescribeTopicPartitionsRequest) (kmsg.Response, func(kmsg.Response)) {
	return nil, nil
}

// authorizeDescribeCluster refuses nothing: Kafka answers DescribeCluster
// (KIP-700) to any principal, as it lists the brokers in Metadata; the
// cluster's authorized operations are computed for the principal (none
// without Describe on the cluster).
func (g *guard) authorizeDescribeCluster(header, *kmsg.DescribeClusterRequest) (kmsg.Response, func(kmsg.Response)) {
	return nil, nil
}

// describeCluster lists the live brokers and the controller.
func (b *Broker) describeCluster(_ context.Context, h header, r *kmsg.DescribeClusterRequest) *kmsg.DescribeClusterResponse {
	resp := r.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.EndpointType = 1
	switch {
	case r.GetVersion() >= 1 && r.EndpointType == 2:
		// Controllers are asked of a controller, not a broker (KIP-919).
		resp.ErrorCode = kerr.MismatchedEndpointType.Code
		resp.EndpointType = r.EndpointType
		return resp
	case r.GetVersion() >= 1 && r.EndpointType != 1:
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		resp.EndpointType = r.EndpointType
		return resp
	}
	s := b.cat.snapshot()
	resp.ClusterID, resp.ControllerID = b.clusterID, s.Controller
	for _, mb := range b.cat.brokers(h, s) {
		resp.Brokers = append(resp.Brokers, kmsg.DescribeClusterResponseBroker{NodeID: mb.NodeID, Host: mb.Host, Port: mb.Port, Rack: mb.Rack})
	}
	resp.ClusterAuthorizedOperations = b.guard.authorizedOpsIf(r.IncludeClusterAuthorizedOperations, h, resCluster, auth.ClusterName)
	return resp
}

// nullMetadata lists the null broker's topics, every partition led by it.
func nullMetadata(b *Broker, _ header, req kmsg.Request) kmsg.Response {
	r := req.(*kmsg.MetadataRequest)
	resp := r.ResponseKind().(*kmsg.MetadataResponse)
	host, port := b.advertised(header{})
	resp.Brokers = []kmsg.MetadataResponseBroker{{NodeID: b.opts.NodeID, Host: host, Port: port}}
	resp.ControllerID = b.opts.NodeID
	for name, n := range b.null.topics {
		topic := kmsg.MetadataResponseTopic{Topic: kmsg.StringPtr(name)}
		for p := range n {
			mp := kmsg.NewMetadataResponseTopicPartition()
			mp.Partition, mp.Leader = p, b.opts.NodeID
			mp.Replicas, mp.ISR = []int32{b.opts.NodeID}, []int32{b.opts.NodeID}
			topic.Partitions = append(topic.Partitions, mp)
		}
		resp.Topics = append(resp.Topics, topic)
	}
	return resp
}

// internalTopics are Kafka's internal topics, flagged in Metadata.
var internalTopics = map[string]bool{"__consumer_offsets": true, "__transaction_state": true}

// autoCreation is one request's auto-creation of topics, bounded by
// AutoCreateMaxTopicsPerRequest, the client's controller_mutation_rate and
// the broker's AutoCreateMaxRate: past them a topic is not created, and a
// client asking for it gets UNKNOWN_TOPIC_OR_PARTITION (which it retries).
type autoCreation struct {
	b    *Broker
	h    header
	left int
	mut  *mutations // resolved at the first creation: a request creating nothing pays nothing
}

func (b *Broker) autoCreation(h header) autoCreation {
	return autoCreation{b: b, h: h, left: b.opts.AutoCreateMaxTopicsPerRequest}
}

// finish throttles the response by what the creations overdrew.
func (a *autoCreation) finish(resp kmsg.Response) {
	if a.mut != nil {
		a.mut.finish(resp)
	}
}

// create creates a topic that does not exist with num.partitions
// partitions, if the bounds allow.
func (a *autoCreation) create(topic string) {
	b := a.b
	if a.left <= 0 {
		b.metrics.autoCreateRefused.Inc()
		return
	}
	if b.opts.AutoCreateMaxRate > 0 {
		if ok, _ := b.autoCreate.take(b.clock(), b.opts.AutoCreateMaxRate, float64(b.opts.NumPartitions), true); !ok {
			b.metrics.autoCreateRefused.Inc()
			return
		}
	}
	if a.mut == nil {
		a.mut = b.limits.mutations(a.h, true)
	}
	spec := cluster.TopicSpec{Name: topic, Partitions: int(b.opts.NumPartitions), ReplicationFactor: -1}
	switch code, msg := b.cat.createTopic(spec, b.m.DefaultConfig(), false, a.mut, metadataWriteTimeout); code {
	case 0:
		a.left--
	case kerr.ThrottlingQuotaExceeded.Code:
		b.metrics.autoCreateRefused.Inc()
	case kerr.TopicAlreadyExists.Code: // another request made it meanwhile
	default:
		b.opts.Logger.Warn("auto-creating a topic", "topic", topic, "err", *msg)
	}
}

// A topicView is the topics as the broker knows them: the cluster's
// metadata (a broker without a replica of a topic still knows it, and
// answers NOT_LEADER_OR_FOLLOWER for its partitions, not UNKNOWN_TOPIC_ID)
// or a single node's data directory — both a group.Topics. name resolves
// an id, id a name, exists says whether a topic exists.
type topicView struct{ group.Topics }

func (v topicView) name(id [16]byte) (string, bool) { return v.TopicByID(id) }

func (v topicView) id(topic string) ([16]byte, bool) {
	id, _, ok := v.TopicPartitions(topic)
	return id, ok
}

func (v topicView) exists(topic string) bool {
	_, ok := v.id(topic)
	return ok
}

// advertised is the address a connection's clients are told: its
// listener's.
func (b *Broker) advertised(h header) (string, int32) {
	if h.listener != nil {
		return h.listener.AdvertisedHost, h.listener.AdvertisedPort
	}
	b.mu.Lock() // set by the first listener served, perhaps now
	defer b.mu.Unlock()
	return b.opts.AdvertisedHost, b.opts.AdvertisedPort
}

// metadata answers Metadata: the live brokers, the controller, and the
// topics asked for (every one: nil, or none at v0) with each partition's
// leader, epoch, replicas, ISR and offline replicas — an internal topic
// asked for is created, another auto-created when the request and the
// broker allow.
func (b *Broker) metadata(_ context.Context, h header, r *kmsg.MetadataRequest) *kmsg.MetadataResponse {
	resp := r.ResponseKind().(*kmsg.MetadataResponse)
	s := b.cat.snapshot()
	resp.Brokers = b.cat.brokers(h, s)
	resp.ControllerID = s.Controller
	resp.ClusterID = kmsg.StringPtr(b.clusterID)
	var names []string
	all := r.Topics == nil || (r.GetVersion() == 0 && len(r.Topics) == 0)
	if all {
		names = slices.Sorted(maps.Keys(s.Topics))
	}
	for _, t := range r.Topics {
		switch {
		case t.Topic != nil:
			names = append(names, *t.Topic)
		case t.TopicID != [16]byte{}: // by id (v10+): a topic that exists, or UNKNOWN_TOPIC_ID
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
	// A broker not certain of its session claims no leadership: its
	// metadata may be stale, and clients must look elsewhere.
	fenced := !b.cat.leased()
	for _, name := range names {
		topic := kmsg.MetadataResponseTopic{Topic: kmsg.StringPtr(name), IsInternal: internalTopics[name]}
		ts, ok := s.Topics[name]
		switch {
		case ok:
		case internalTopics[name] && !all:
			b.ensureInternal(name)
			s = b.cat.snapshot()
			ts, ok = s.Topics[name]
		case autoCreate:
			if checkpoint.ValidateTopic(name) != nil {
				topic.ErrorCode = kerr.InvalidTopicException.Code
				resp.Topics = append(resp.Topics, topic)
				continue
			}
			ac.create(name)
			s = b.cat.snapshot()
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

// ensureInternal creates a coordinator's internal topic (as Kafka does
// when a client asks for it).
func (b *Broker) ensureInternal(name string) {
	ensure := b.groups.Ensure
	if name == txn.Topic {
		ensure = b.txns.Ensure
	}
	if err := ensure(); err != nil {
		b.opts.Logger.Error("creating "+name, "err", err)
	}
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

// metadataAuthorizedOps fills the cluster's and each topic's authorized
// operations when the request asks for them.
func (b *Broker) metadataAuthorizedOps(h header, r *kmsg.MetadataRequest, resp *kmsg.MetadataResponse) {
	resp.AuthorizedOperations = b.guard.authorizedOpsIf(r.IncludeClusterAuthorizedOperations, h, resCluster, auth.ClusterName)
	for i := range resp.Topics {
		t := &resp.Topics[i]
		ask := r.IncludeTopicAuthorizedOperations && t.ErrorCode == 0
		name := ""
		if ask {
			name = *t.Topic // a topic without error has its name
		}
		t.AuthorizedOperations = b.guard.authorizedOpsIf(ask, h, resTopic, name)
	}
}

// authorizeMetadata: a topic the principal may not describe is
// TOPIC_AUTHORIZATION_FAILED when asked for by name, and left out of a
// listing of every topic; a topic that would be auto-created needs Create
// on the cluster or the topic, else TOPIC_AUTHORIZATION_FAILED.
func (g *guard) authorizeMetadata(h header, r *kmsg.MetadataRequest) (kmsg.Response, func(kmsg.Response)) {
	all := r.Topics == nil || (r.GetVersion() == 0 && len(r.Topics) == 0)
	if all {
		return nil, func(resp kmsg.Response) {
			m := resp.(*kmsg.MetadataResponse)
			m.Topics = slices.DeleteFunc(m.Topics, func(t kmsg.MetadataResponseTopic) bool {
				return t.Topic == nil || !g.may(h, opDescribe, resTopic, *t.Topic)
			})
		}
	}
	createCluster := g.mayCluster(h, opCreate)
	denied := takeOut(&r.Topics, func(t kmsg.MetadataRequestTopic) int16 {
		if t.Topic == nil {
			// By id: one the principal may not describe is answered as
			// unknown, so its existence does not show.
			if name, ok := g.topics.name(t.TopicID); ok && !g.may(h, opDescribe, resTopic, name) {
				return kerr.UnknownTopicID.Code
			}
			return 0
		}
		name := *t.Topic
		ok := g.may(h, opDescribe, resTopic, name)
		if ok && !g.topics.exists(name) && !internalTopics[name] && (r.GetVersion() < 4 || r.AllowAutoTopicCreation) {
			ok = createCluster || g.may(h, opCreate, resTopic, name)
		}
		if ok {
			return 0
		}
		return topicRefused
	}, func(t kmsg.MetadataRequestTopic, code int16) kmsg.MetadataResponseTopic {
		rt := kmsg.NewMetadataResponseTopic()
		rt.Topic, rt.TopicID, rt.ErrorCode = t.Topic, t.TopicID, code
		if t.Topic != nil {
			rt.IsInternal = internalTopics[*t.Topic]
		}
		return rt
	})
	return nil, func(resp kmsg.Response) {
		m := resp.(*kmsg.MetadataResponse)
		m.Topics = append(m.Topics, denied...)
	}
}
