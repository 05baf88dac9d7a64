package broker

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/coordinator/group"
	"github.com/seglog/seglog/coordinator/txn"
)

// The group coordinator's APIs: this broker is every group's coordinator,
// and coordinator/group answers the requests (the classic protocol).

// stopContext ends when the broker closes: JoinGroup and SyncGroup stop
// waiting for a rebalance.
func (b *Broker) stopContext() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-b.stop
		cancel()
	}()
	return ctx
}

// Versions as Kafka 4.1's: FindCoordinator v6's share groups (key type 2)
// are INVALID_REQUEST; OffsetCommit v9 is v8 for a classic group, and
// OffsetFetch v9's member id and epoch are a consumer group's (KIP-848).
func init() {
	register(
		api{key: 10, min: 0, max: 6, handle: handler((*Broker).findCoordinator),
			rule: ruleFor(ruleGroup, opDescribe, (*guard).authorizeFindCoordinator)},
		api{key: 11, min: 0, max: 9, handle: handler(func(b *Broker, ctx context.Context, h header, r *kmsg.JoinGroupRequest) kmsg.Response {
			ctx, cancel := b.grp.groupContext(ctx)
			defer cancel()
			return b.groups.JoinGroup(ctx, group.Client{ID: h.clientID, Host: h.host}, r)
		}), rule: ruleFor(ruleGroup, opRead, (*guard).authorizeJoinGroup)},
		api{key: 14, min: 0, max: 5, handle: handler(func(b *Broker, ctx context.Context, _ header, r *kmsg.SyncGroupRequest) kmsg.Response {
			ctx, cancel := b.grp.groupContext(ctx)
			defer cancel()
			return b.groups.SyncGroup(ctx, r)
		}), rule: ruleFor(ruleGroup, opRead, (*guard).authorizeSyncGroup)},
		api{key: 12, min: 0, max: 4, handle: handler(func(b *Broker, _ context.Context, _ header, r *kmsg.HeartbeatRequest) kmsg.Response {
			return b.groups.Heartbeat(r)
		}), rule: ruleFor(ruleGroup, opRead, (*guard).authorizeHeartbeat)},
		api{key: 13, min: 0, max: 5, handle: handler(func(b *Broker, _ context.Context, _ header, r *kmsg.LeaveGroupRequest) kmsg.Response {
			return b.groups.LeaveGroup(r)
		}), rule: ruleFor(ruleGroup, opRead, (*guard).authorizeLeaveGroup)},
		api{key: 8, min: 0, max: 10, handle: onCall(groupsOf, (*groupAPIs).offsetCommit), topicIDs: offsetCommitTopicIDs,
			rule: ruleFor(ruleGroup, opRead, (*guard).authorizeOffsetCommit)},
		api{key: 9, min: 0, max: 10, handle: onCall(groupsOf, (*groupAPIs).offsetFetch),
			rule: ruleFor(ruleGroup, opDescribe, (*guard).authorizeOffsetFetch)},
		api{key: 47, min: 0, max: 0, handle: handler(func(b *Broker, _ context.Context, _ header, r *kmsg.OffsetDeleteRequest) kmsg.Response {
			return b.groups.OffsetDelete(r)
		}), rule: ruleFor(ruleGroup, opDelete, (*guard).authorizeOffsetDelete)},
		api{key: 15, min: 0, max: 6, handle: onCall(groupsOf, (*groupAPIs).describeGroups),
			rule: ruleFor(ruleGroup, opDescribe, (*guard).authorizeDescribeGroups)},
		api{key: 16, min: 0, max: 5, handle: handler(func(b *Broker, _ context.Context, _ header, r *kmsg.ListGroupsRequest) kmsg.Response {
			return b.groups.ListGroups(r)
		}), rule: ruleFor(ruleGroup, opDescribe, (*guard).authorizeListGroups)},
		api{key: 68, min: 0, max: 1, handle: handler(func(b *Broker, _ context.Context, h header, r *kmsg.ConsumerGroupHeartbeatRequest) kmsg.Response {
			return b.groups.ConsumerGroupHeartbeat(b.grp.groupClient(h), r)
		}), rule: ruleFor(ruleGroup, opRead, (*guard).authorizeConsumerGroupHeartbeat)},
		api{key: 69, min: 0, max: 1, handle: onCall(groupsOf, (*groupAPIs).consumerGroupDescribe),
			rule: ruleFor(ruleGroup, opDescribe, (*guard).authorizeConsumerGroupDescribe)},
		api{key: 42, min: 0, max: 2, handle: handler(func(b *Broker, _ context.Context, _ header, r *kmsg.DeleteGroupsRequest) kmsg.Response {
			return b.groups.DeleteGroups(r)
		}), rule: ruleFor(ruleGroup, opDelete, (*guard).authorizeDeleteGroups)},
	)
}

// groupAPIs are the group coordinator's APIs as the broker answers them:
// the coordinator (coordinator/group), the guard for what a group's
// answer may show, and the topics as the broker knows them (the ids of
// OffsetCommit and OffsetFetch v10+). They hold nothing else of the
// broker.
type groupAPIs struct {
	groups *group.Coordinator
	guard  *guard
	topics topicView
	// wait, if set, bounds how long a JoinGroup or SyncGroup waits for a
	// rebalance (the fuzz test's: fuzzed rebalance timeouts would be long waits).
	wait time.Duration
}

// groupClient is who sent a group request, with what it may describe (a
// consumer group's regular expressions resolve only to those topics).
func (a *groupAPIs) groupClient(h header) group.Client {
	cl := group.Client{ID: h.clientID, Host: h.host}
	if a.guard.authz != nil {
		cl.MayDescribe = func(topic string) bool { return a.guard.may(h, opDescribe, resTopic, topic) }
	}
	return cl
}

// authorizeConsumerGroupHeartbeat: Read on the group, and Describe on
// every topic it subscribes to by name (Kafka 4.1's check: a member may
// not learn the partitions of a topic it may not describe).
func (g *guard) authorizeConsumerGroupHeartbeat(h header, r *kmsg.ConsumerGroupHeartbeatRequest) (kmsg.Response, func(kmsg.Response)) {
	resp := r.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	if !g.may(h, opRead, resGroup, r.Group) {
		resp.ErrorCode = groupErr
		return resp, nil
	}
	if denied := g.undescribable(h, r.SubscribedTopicNames); len(denied) > 0 {
		resp.ErrorCode = kerr.TopicAuthorizationFailed.Code
		resp.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("The group subscribes to topics the client may not describe: %s", strings.Join(denied, ", ")))
		return resp, nil
	}
	return nil, nil
}

// undescribable returns the topics among names h may not describe.
func (g *guard) undescribable(h header, names []string) []string {
	var denied []string
	for _, t := range names {
		if !g.may(h, opDescribe, resTopic, t) {
			denied = append(denied, t)
		}
	}
	return denied
}

// authorizeConsumerGroupDescribe: Describe on each group.
func (g *guard) authorizeConsumerGroupDescribe(h header, r *kmsg.ConsumerGroupDescribeRequest) (kmsg.Response, func(kmsg.Response)) {
	denied := takeOut(&r.Groups, func(group string) int16 {
		return g.refusal(h, opDescribe, resGroup, group, groupErr)
	}, func(g string, code int16) kmsg.ConsumerGroupDescribeResponseGroup {
		rg := kmsg.NewConsumerGroupDescribeResponseGroup()
		rg.Group, rg.ErrorCode = g, code
		return rg
	})
	return nil, func(resp kmsg.Response) {
		d := resp.(*kmsg.ConsumerGroupDescribeResponse)
		d.Groups = append(d.Groups, denied...)
	}
}

// consumerGroupDescribe describes consumer groups, with their
// AuthorizedOperations when asked for. A group using a topic (subscribed
// to by a member, or assigned) the client may not describe is
// TOPIC_AUTHORIZATION_FAILED, its members not shown, as on Kafka 4.1.
func (a *groupAPIs) consumerGroupDescribe(_ context.Context, h header, r *kmsg.ConsumerGroupDescribeRequest) kmsg.Response {
	resp := a.groups.ConsumerGroupDescribe(r)
	for i := range resp.Groups {
		g := &resp.Groups[i]
		if g.ErrorCode == 0 && a.guard.authz != nil && len(a.guard.undescribable(h, topicsOfDescribed(g))) > 0 {
			*g = kmsg.NewConsumerGroupDescribeResponseGroup()
			g.Group, g.ErrorCode = resp.Groups[i].Group, kerr.TopicAuthorizationFailed.Code
			g.ErrorMessage = kmsg.StringPtr("The described group uses topics that the client is not authorized to describe.")
			continue
		}
		g.AuthorizedOperations = a.guard.authorizedOpsIf(r.IncludeAuthorizedOperations && g.ErrorCode == 0, h, resGroup, g.Group)
	}
	return resp
}

// topicsOfDescribed is every topic a described consumer group's members
// subscribe to by name or are assigned (now or in the target).
func topicsOfDescribed(g *kmsg.ConsumerGroupDescribeResponseGroup) []string {
	seen := map[string]bool{}
	var out []string
	add := func(t string) {
		if t != "" && !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	for _, m := range g.Members {
		for _, t := range m.SubscribedTopics {
			add(t)
		}
		for _, a := range [][]kmsg.AssignmentTopicPartition{m.Assignment.TopicPartitions, m.TargetAssignment.TopicPartitions} {
			for _, t := range a {
				add(t.Topic)
			}
		}
	}
	return out
}

// offsetCommitTopicIDs names the topics of an OffsetCommit v10+, which
// gives their ids (KIP-848's topic ids); an unknown id is left unnamed.
func offsetCommitTopicIDs(b *Broker, h header, req kmsg.Request) {
	if h.version < 10 {
		return
	}
	r := req.(*kmsg.OffsetCommitRequest)
	for i := range r.Topics {
		r.Topics[i].Topic, _ = b.topics.name(r.Topics[i].TopicID)
	}
}

// offsetCommit commits a group's offsets; from v10 a topic is given and
// answered by its id, an unknown one UNKNOWN_TOPIC_ID.
func (a *groupAPIs) offsetCommit(_ context.Context, h header, r *kmsg.OffsetCommitRequest) kmsg.Response {
	if h.version < 10 {
		return a.groups.OffsetCommit(r)
	}
	var unknown []kmsg.OffsetCommitResponseTopic
	r.Topics = slices.DeleteFunc(r.Topics, func(t kmsg.OffsetCommitRequestTopic) bool {
		if t.Topic != "" {
			return false
		}
		rt := kmsg.OffsetCommitResponseTopic{TopicID: t.TopicID}
		for _, p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, kmsg.OffsetCommitResponseTopicPartition{Partition: p.Partition, ErrorCode: kerr.UnknownTopicID.Code})
		}
		unknown = append(unknown, rt)
		return true
	})
	resp := a.groups.OffsetCommit(r)
	for i := range resp.Topics {
		resp.Topics[i].TopicID, _ = a.topics.id(resp.Topics[i].Topic)
	}
	resp.Topics = append(resp.Topics, unknown...)
	return resp
}

// groupContext bounds a wait for a rebalance by the fuzz test's groupWait,
// if set.
func (a *groupAPIs) groupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if a.wait > 0 {
		return context.WithTimeout(ctx, a.wait)
	}
	return ctx, func() {}
}

// describeGroups describes groups, with their AuthorizedOperations when
// asked for.
func (a *groupAPIs) describeGroups(_ context.Context, h header, r *kmsg.DescribeGroupsRequest) kmsg.Response {
	resp := a.groups.DescribeGroups(r)
	for i := range resp.Groups {
		g := &resp.Groups[i]
		g.AuthorizedOperations = a.guard.authorizedOpsIf(r.IncludeAuthorizedOperations && g.ErrorCode == 0, h, resGroup, g.Group)
	}
	return resp
}

// findCoordinator names the coordinator of each key (one before v4, a
// batch from v4) — the leader of its partition of the coordinator's
// internal topic — creating that topic on first use.
func (b *Broker) findCoordinator(_ context.Context, h header, r *kmsg.FindCoordinatorRequest) *kmsg.FindCoordinatorResponse {
	resp := r.ResponseKind().(*kmsg.FindCoordinatorResponse)
	keys := r.CoordinatorKeys
	if r.GetVersion() < 4 {
		keys = []string{r.CoordinatorKey}
	}
	for _, key := range keys {
		co := kmsg.FindCoordinatorResponseCoordinator{Key: key, NodeID: -1, Port: -1}
		ensure, topic := b.groups.Ensure, group.Topic
		if r.CoordinatorType == 1 {
			ensure, topic = b.txns.Ensure, txn.Topic
		}
		switch {
		case r.CoordinatorType != 0 && r.CoordinatorType != 1:
			co.ErrorCode = kerr.InvalidRequest.Code
		case key == "":
			co.ErrorCode = kerr.InvalidRequest.Code
		default:
			if err := ensure(); err != nil {
				b.opts.Logger.Error("creating "+topic, "err", err)
				co.ErrorCode = kerr.CoordinatorNotAvailable.Code
				break
			}
			p := group.PartitionFor(key, b.groups.Partitions())
			if r.CoordinatorType == 1 {
				p = b.txns.PartitionFor(key)
			}
			b.coordinatorOf(h, topic, p, &co)
		}
		if co.ErrorCode != 0 {
			co.ErrorMessage = kmsg.StringPtr(kerr.ErrorForCode(co.ErrorCode).Error())
		}
		resp.Coordinators = append(resp.Coordinators, co)
	}
	if r.GetVersion() < 4 && len(resp.Coordinators) == 1 {
		co := resp.Coordinators[0]
		resp.ErrorCode, resp.ErrorMessage, resp.NodeID, resp.Host, resp.Port = co.ErrorCode, co.ErrorMessage, co.NodeID, co.Host, co.Port
		resp.Coordinators = nil
	}
	return resp
}

// offsetsPartition is the __consumer_offsets partition of a group.
func (a *groupAPIs) offsetsPartition(groupID string) checkpoint.TopicPartition {
	return checkpoint.TopicPartition{Topic: group.Topic, Partition: group.PartitionFor(groupID, a.groups.Partitions())}
}

// clientIP is the peer's IP address, as ACL hosts and IP quotas name it.
func clientIP(a net.Addr) string {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.IP.String()
	}
	return a.String()
}

// clientHost is a connection's peer as Kafka shows a member's host.
func clientHost(a net.Addr) string {
	if _, ok := a.(*net.TCPAddr); ok {
		return "/" + clientIP(a)
	}
	return a.String()
}

// authorizeJoinGroup: Read on the group.
func (g *guard) authorizeJoinGroup(h header, r *kmsg.JoinGroupRequest) (kmsg.Response, func(kmsg.Response)) {
	if !g.may(h, opRead, resGroup, r.Group) {
		resp := r.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode, resp.Generation, resp.MemberID = groupErr, -1, r.MemberID
		return resp, nil
	}
	return nil, nil
}

// authorizeSyncGroup: Read on the group.
func (g *guard) authorizeSyncGroup(h header, r *kmsg.SyncGroupRequest) (kmsg.Response, func(kmsg.Response)) {
	if !g.may(h, opRead, resGroup, r.Group) {
		resp := r.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = groupErr
		return resp, nil
	}
	return nil, nil
}

// authorizeHeartbeat: Read on the group.
func (g *guard) authorizeHeartbeat(h header, r *kmsg.HeartbeatRequest) (kmsg.Response, func(kmsg.Response)) {
	if !g.may(h, opRead, resGroup, r.Group) {
		resp := r.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = groupErr
		return resp, nil
	}
	return nil, nil
}

// authorizeLeaveGroup: Read on the group.
func (g *guard) authorizeLeaveGroup(h header, r *kmsg.LeaveGroupRequest) (kmsg.Response, func(kmsg.Response)) {
	if !g.may(h, opRead, resGroup, r.Group) {
		resp := r.ResponseKind().(*kmsg.LeaveGroupResponse)
		resp.ErrorCode = groupErr
		return resp, nil
	}
	return nil, nil
}

// authorizeOffsetDelete: Delete on the group (else refused whole), Read on
// each topic.
func (g *guard) authorizeOffsetDelete(h header, r *kmsg.OffsetDeleteRequest) (kmsg.Response, func(kmsg.Response)) {
	if !g.may(h, opDelete, resGroup, r.Group) {
		resp := r.ResponseKind().(*kmsg.OffsetDeleteResponse)
		resp.ErrorCode = groupErr
		return resp, nil
	}
	denied := takeOut(&r.Topics, func(t kmsg.OffsetDeleteRequestTopic) int16 {
		return g.refusal(h, opRead, resTopic, t.Topic, topicRefused)
	}, func(t kmsg.OffsetDeleteRequestTopic, code int16) kmsg.OffsetDeleteResponseTopic {
		rt := kmsg.OffsetDeleteResponseTopic{Topic: t.Topic}
		for _, p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, kmsg.OffsetDeleteResponseTopicPartition{Partition: p.Partition, ErrorCode: code})
		}
		return rt
	})
	return nil, func(resp kmsg.Response) {
		o := resp.(*kmsg.OffsetDeleteResponse)
		o.Topics = append(o.Topics, denied...)
	}
}

// authorizeDescribeGroups: Describe on each group.
func (g *guard) authorizeDescribeGroups(h header, r *kmsg.DescribeGroupsRequest) (kmsg.Response, func(kmsg.Response)) {
	denied := takeOut(&r.Groups, func(group string) int16 {
		return g.refusal(h, opDescribe, resGroup, group, groupErr)
	}, func(g string, code int16) kmsg.DescribeGroupsResponseGroup {
		rg := kmsg.NewDescribeGroupsResponseGroup()
		rg.Group, rg.ErrorCode = g, code
		return rg
	})
	return nil, func(resp kmsg.Response) {
		d := resp.(*kmsg.DescribeGroupsResponse)
		d.Groups = append(d.Groups, denied...)
	}
}

// authorizeListGroups: Describe on the cluster lists every group; else
// only the groups the principal may describe are listed.
func (g *guard) authorizeListGroups(h header, r *kmsg.ListGroupsRequest) (kmsg.Response, func(kmsg.Response)) {
	if g.mayCluster(h, opDescribe) {
		return nil, nil
	}
	return nil, func(resp kmsg.Response) {
		l := resp.(*kmsg.ListGroupsResponse)
		l.Groups = slices.DeleteFunc(l.Groups, func(lg kmsg.ListGroupsResponseGroup) bool {
			return !g.may(h, opDescribe, resGroup, lg.Group)
		})
	}
}

// authorizeDeleteGroups: Delete on each group.
func (g *guard) authorizeDeleteGroups(h header, r *kmsg.DeleteGroupsRequest) (kmsg.Response, func(kmsg.Response)) {
	denied := takeOut(&r.Groups, func(group string) int16 {
		return g.refusal(h, opDelete, resGroup, group, groupErr)
	}, func(g string, code int16) kmsg.DeleteGroupsResponseGroup {
		return kmsg.DeleteGroupsResponseGroup{Group: g, ErrorCode: code}
	})
	return nil, func(resp kmsg.Response) {
		d := resp.(*kmsg.DeleteGroupsResponse)
		d.Groups = append(d.Groups, denied...)
	}
}

// authorizeFindCoordinator: a group key needs Describe on the group, a
// transactional id Describe on it. A refused key before v4 (one key) is
// answered without the handler, which would create the coordinator's
// topic.
func (g *guard) authorizeFindCoordinator(h header, r *kmsg.FindCoordinatorRequest) (kmsg.Response, func(kmsg.Response)) {
	code := func(key string) int16 {
		switch r.CoordinatorType {
		case 0:
			return g.refusal(h, opDescribe, resGroup, key, kerr.GroupAuthorizationFailed.Code)
		case 1:
			return g.refusal(h, opDescribe, resTxnID, key, kerr.TransactionalIDAuthorizationFailed.Code)
		}
		return 0
	}
	if r.Version < 4 {
		c := code(r.CoordinatorKey)
		if c == 0 {
			return nil, nil
		}
		resp := r.ResponseKind().(*kmsg.FindCoordinatorResponse)
		resp.ErrorCode, resp.NodeID, resp.Port = c, -1, -1
		return resp, nil
	}
	denied := takeOut(&r.CoordinatorKeys, code, func(k string, c int16) kmsg.FindCoordinatorResponseCoordinator {
		return kmsg.FindCoordinatorResponseCoordinator{Key: k, NodeID: -1, Port: -1, ErrorCode: c}
	})
	return nil, func(resp kmsg.Response) {
		f := resp.(*kmsg.FindCoordinatorResponse)
		f.Coordinators = append(f.Coordinators, denied...)
	}
}

// authorizeOffsetCommit: Read on the group (else every partition is
// GROUP_AUTHORIZATION_FAILED, without the handler), Read on each topic.
func (g *guard) authorizeOffsetCommit(h header, r *kmsg.OffsetCommitRequest) (kmsg.Response, func(kmsg.Response)) {
	if code := g.refusal(h, opRead, resGroup, r.Group, kerr.GroupAuthorizationFailed.Code); code != 0 {
		return group.RefuseOffsetCommit(r, code), nil
	}
	denied := takeOut(&r.Topics, func(t kmsg.OffsetCommitRequestTopic) int16 {
		if t.Topic == "" && r.GetVersion() >= 10 {
			return 0 // an unknown topic id: UNKNOWN_TOPIC_ID, from the handler
		}
		return g.refusal(h, opRead, resTopic, t.Topic, topicRefused)
	}, func(t kmsg.OffsetCommitRequestTopic, code int16) kmsg.OffsetCommitResponseTopic {
		rt := kmsg.OffsetCommitResponseTopic{Topic: t.Topic, TopicID: t.TopicID}
		for _, p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, kmsg.OffsetCommitResponseTopicPartition{Partition: p.Partition, ErrorCode: code})
		}
		return rt
	})
	return nil, func(resp kmsg.Response) {
		o := resp.(*kmsg.OffsetCommitResponse)
		o.Topics = append(o.Topics, denied...)
	}
}

// offsetFetch answers OffsetFetch: one group before v8; from v8 several
// (KIP-709), each authorized and answered as one of v7 would be.
func (a *groupAPIs) offsetFetch(_ context.Context, h header, r *kmsg.OffsetFetchRequest) kmsg.Response {
	if r.GetVersion() < 8 {
		return a.groups.OffsetFetch(r)
	}
	resp := r.ResponseKind().(*kmsg.OffsetFetchResponse)
	for _, g := range r.Groups {
		one := kmsg.NewPtrOffsetFetchRequest()
		one.SetVersion(7)
		one.Group, one.RequireStable = g.Group, r.RequireStable
		var unknown []kmsg.OffsetFetchResponseGroupTopic
		if g.Topics != nil { // null: every topic the group has offsets for
			one.Topics = []kmsg.OffsetFetchRequestTopic{}
			for _, t := range g.Topics {
				if r.GetVersion() >= 10 { // by id
					name, ok := a.topics.name(t.TopicID)
					if !ok {
						rt := kmsg.OffsetFetchResponseGroupTopic{TopicID: t.TopicID}
						for _, p := range t.Partitions {
							rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
							rp.Partition, rp.Offset, rp.ErrorCode = p, -1, kerr.UnknownTopicID.Code
							rt.Partitions = append(rt.Partitions, rp)
						}
						unknown = append(unknown, rt)
						continue
					}
					t.Topic = name
				}
				one.Topics = append(one.Topics, kmsg.OffsetFetchRequestTopic{Topic: t.Topic, Partitions: t.Partitions})
			}
		}
		var answer kmsg.Response
		var after func(kmsg.Response)
		if a.guard.authz != nil {
			answer, after = a.guard.authorizeOffsetFetch(h, one)
		}
		if answer == nil && r.GetVersion() >= 9 {
			if code := a.groups.ValidateFetchMember(g.Group, g.MemberID, g.MemberEpoch); code != 0 {
				answer = &kmsg.OffsetFetchResponse{ErrorCode: code}
			}
		}
		if answer == nil {
			answer = a.groups.OffsetFetch(one)
			if after != nil {
				after(answer)
			}
		}
		got := answer.(*kmsg.OffsetFetchResponse)
		rg := kmsg.OffsetFetchResponseGroup{Group: g.Group, ErrorCode: got.ErrorCode}
		for _, t := range got.Topics {
			rt := kmsg.OffsetFetchResponseGroupTopic{Topic: t.Topic}
			if r.GetVersion() >= 10 {
				var ok bool
				if rt.TopicID, ok = a.topics.id(t.Topic); !ok && g.Topics == nil {
					continue // offsets of a topic gone: it has no id to answer with
				}
			}
			for _, p := range t.Partitions {
				rt.Partitions = append(rt.Partitions, kmsg.OffsetFetchResponseGroupTopicPartition{Partition: p.Partition,
					Offset: p.Offset, LeaderEpoch: p.LeaderEpoch, Metadata: p.Metadata, ErrorCode: p.ErrorCode})
			}
			rg.Topics = append(rg.Topics, rt)
		}
		rg.Topics = append(rg.Topics, unknown...)
		resp.Groups = append(resp.Groups, rg)
	}
	return resp
}

// authorizeOffsetFetch: Describe on the group (GROUP_AUTHORIZATION_FAILED,
// per partition before v2), Describe on each topic: asked for by name,
// TOPIC_AUTHORIZATION_FAILED; every topic (nil), the ones it may not
// describe left out.
func (g *guard) authorizeOffsetFetch(h header, r *kmsg.OffsetFetchRequest) (kmsg.Response, func(kmsg.Response)) {
	if r.GetVersion() >= 8 {
		return nil, nil // each of its groups is authorized by offsetFetch
	}
	deniedTopic := func(t string, parts []int32, code int16) kmsg.OffsetFetchResponseTopic {
		rt := kmsg.OffsetFetchResponseTopic{Topic: t}
		for _, p := range parts {
			rp := kmsg.NewOffsetFetchResponseTopicPartition()
			rp.Partition, rp.Offset, rp.ErrorCode = p, -1, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		return rt
	}
	if !g.may(h, opDescribe, resGroup, r.Group) {
		resp := r.ResponseKind().(*kmsg.OffsetFetchResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		if r.Version < 2 {
			for _, t := range r.Topics {
				resp.Topics = append(resp.Topics, deniedTopic(t.Topic, t.Partitions, kerr.GroupAuthorizationFailed.Code))
			}
		}
		return resp, nil
	}
	if r.Topics == nil {
		return nil, func(resp kmsg.Response) {
			f := resp.(*kmsg.OffsetFetchResponse)
			f.Topics = slices.DeleteFunc(f.Topics, func(t kmsg.OffsetFetchResponseTopic) bool {
				return !g.may(h, opDescribe, resTopic, t.Topic)
			})
		}
	}
	denied := takeOut(&r.Topics, func(t kmsg.OffsetFetchRequestTopic) int16 {
		return g.refusal(h, opDescribe, resTopic, t.Topic, topicRefused)
	}, func(t kmsg.OffsetFetchRequestTopic, code int16) kmsg.OffsetFetchResponseTopic {
		return deniedTopic(t.Topic, t.Partitions, code)
	})
	if r.Topics == nil {
		r.Topics = []kmsg.OffsetFetchRequestTopic{} // none left, which is not "every topic"
	}
	return nil, func(resp kmsg.Response) {
		resp.(*kmsg.OffsetFetchResponse).Topics = append(resp.(*kmsg.OffsetFetchResponse).Topics, denied...)
	}
}
