package broker

import (
	"context"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The consumer group protocol (KIP-848): ConsumerGroupHeartbeat and
// ConsumerGroupDescribe, answered by coordinator/group.

func init() {
	register(
		api{key: 68, min: 0, max: 1, handle: handler(func(b *Broker, _ context.Context, h header, r *kmsg.ConsumerGroupHeartbeatRequest) kmsg.Response {
			return b.groups.ConsumerGroupHeartbeat(b.grp.groupClient(h), r)
		}), rule: ruleFor(ruleGroup, opRead, (*guard).authorizeConsumerGroupHeartbeat)},
		api{key: 69, min: 0, max: 1, handle: onCall(groupsOf, (*groupAPIs).consumerGroupDescribe),
			rule: ruleFor(ruleGroup, opDescribe, (*guard).authorizeConsumerGroupDescribe)},
	)
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
