package group

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/checkpoint"
)

// ConsumerGroupDescribe describes consumer groups: epochs, assignor, and
// each member's subscription, assignment and target. A group that does
// not exist, or is a classic one, is GROUP_ID_NOT_FOUND.
func (c *Coordinator) ConsumerGroupDescribe(r *kmsg.ConsumerGroupDescribeRequest) *kmsg.ConsumerGroupDescribeResponse {
	resp := r.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	for _, id := range r.Groups {
		dg := kmsg.NewConsumerGroupDescribeResponseGroup()
		dg.Group = id
		owner := c.Owns(id)
		var g *group
		if owner == 0 {
			g = c.lookup(id, false)
		}
		switch {
		case id == "":
			dg.ErrorCode = kerr.InvalidGroupID.Code
		case owner != 0:
			dg.ErrorCode = owner
		case g == nil:
			dg.ErrorCode, dg.ErrorMessage = kerr.GroupIDNotFound.Code, kmsg.StringPtr(fmt.Sprintf("Group %s not found.", id))
		case g.cg == nil:
			dg.ErrorCode, dg.ErrorMessage = kerr.GroupIDNotFound.Code, kmsg.StringPtr(fmt.Sprintf("Group %s is not a consumer group.", id))
		default:
			cg := g.cg
			dg.State, dg.Epoch, dg.AssignmentEpoch, dg.AssignorName = cg.stateName(), cg.epoch, cg.assignmentEpoch, c.assignorOf(cg)
			for _, mid := range sortedKeys(cg.members) {
				m := cg.members[mid]
				dm := kmsg.NewConsumerGroupDescribeResponseGroupMember()
				dm.MemberID, dm.InstanceID, dm.RackID, dm.MemberEpoch = m.id, optional(m.instanceID), optional(m.rackID), m.epoch
				dm.ClientID, dm.ClientHost, dm.SubscribedTopics, dm.SubscribedTopicRegex = m.clientID, m.clientHost, m.subscribed, optional(m.regex)
				if dm.SubscribedTopics == nil {
					dm.SubscribedTopics = []string{}
				}
				dm.Assignment, dm.TargetAssignment = c.describedAssignment(m.assigned), c.describedAssignment(cg.target[mid])
				dm.MemberType = 1 // the consumer protocol
				if m.classic != nil {
					dm.MemberType = 0 // the classic protocol, in a migrating group
				}
				dg.Members = append(dg.Members, dm)
			}
		}
		if g != nil {
			g.mu.Unlock()
		}
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}

func (c *Coordinator) describedAssignment(a assignment) kmsg.Assignment {
	out := kmsg.Assignment{TopicPartitions: []kmsg.AssignmentTopicPartition{}}
	for _, t := range tpsOf(a, nil) {
		name, _ := c.topics.TopicByID(t.TopicID)
		out.TopicPartitions = append(out.TopicPartitions, kmsg.AssignmentTopicPartition{TopicID: t.TopicID, Topic: name, Partitions: t.Partitions})
	}
	return out
}

// assignorOf is the assignor a consumer group's next target would use.
func (c *Coordinator) assignorOf(cg *consumerGroup) string {
	votes := map[string]int{}
	for _, m := range cg.members {
		if m.assignor != "" {
			votes[m.assignor]++
		}
	}
	name := c.opts.ConsumerAssignors[0]
	for _, a := range c.opts.ConsumerAssignors {
		if votes[a] > votes[name] {
			name = a
		}
	}
	return name
}

// classicView is a consumer group member as DescribeGroups shows it: its
// subscription and assignment in the classic consumer protocol's bytes.
func (c *Coordinator) classicView(cg *consumerGroup, m *cmember) (metadata, assigned []byte) {
	sub := kmsg.NewConsumerMemberMetadata()
	sub.Version = 0
	sub.Topics = sortedKeys(cg.memberTopics(m))
	as := kmsg.NewConsumerMemberAssignment()
	for _, t := range tpsOf(m.assigned, nil) {
		name, _ := c.topics.TopicByID(t.TopicID)
		as.Topics = append(as.Topics, kmsg.ConsumerMemberAssignmentTopic{Topic: name, Partitions: t.Partitions})
	}
	return sub.AppendTo(nil), as.AppendTo(nil)
}

// assignedPartitions lists a consumer group member's partitions by name.
func (c *Coordinator) assignedPartitions(a assignment) []checkpoint.TopicPartition {
	out := []checkpoint.TopicPartition{}
	for _, k := range a.keys() {
		if name, ok := c.topics.TopicByID(k.id); ok {
			out = append(out, checkpoint.TopicPartition{Topic: name, Partition: k.p})
		}
	}
	return out
}
