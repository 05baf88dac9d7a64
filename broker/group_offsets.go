package broker

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/coordinator/group"
)

// A group's committed offsets: OffsetCommit, OffsetFetch and
// OffsetDelete, answered by coordinator/group. Versions as Kafka 4.1's:
// OffsetCommit v9 is v8 for a classic group, OffsetFetch v9's member id
// and epoch are a consumer group's (KIP-848), and v10 of both names
// topics by id.

func init() {
	register(
		api{key: 8, min: 0, max: 10, handle: onCall(groupsOf, (*groupAPIs).offsetCommit), topicIDs: offsetCommitTopicIDs,
			rule: ruleFor(ruleGroup, opRead, (*guard).authorizeOffsetCommit)},
		api{key: 9, min: 0, max: 10, handle: onCall(groupsOf, (*groupAPIs).offsetFetch),
			rule: ruleFor(ruleGroup, opDescribe, (*guard).authorizeOffsetFetch)},
		api{key: 47, min: 0, max: 0, handle: handler(func(b *Broker, _ context.Context, _ header, r *kmsg.OffsetDeleteRequest) kmsg.Response {
			return b.groups.OffsetDelete(r)
		}), rule: ruleFor(ruleGroup, opDelete, (*guard).authorizeOffsetDelete)},
	)
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

// offsetsPartition is the __consumer_offsets partition of a group.
func (a *groupAPIs) offsetsPartition(groupID string) checkpoint.TopicPartition {
	return checkpoint.TopicPartition{Topic: group.Topic, Partition: group.PartitionFor(groupID, a.groups.Partitions())}
}
