package group

import (
	"fmt"
	"slices"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/checkpoint"
)

// Info describes a group, for commands and tools.
type Info struct {
	ID           string       `json:"group"`
	Type         string       `json:"type"` // classic or consumer (KIP-848)
	State        string       `json:"state"`
	ProtocolType string       `json:"protocolType"`
	Protocol     string       `json:"protocol"`
	Generation   int32        `json:"generation"`
	Leader       string       `json:"leader,omitempty"`
	Members      []MemberInfo `json:"members"`
	Offsets      []OffsetInfo `json:"offsets"`
	Partition    int32        `json:"offsetsPartition"` // of __consumer_offsets
}

// MemberInfo is one member of a group, with the partitions its consumer
// assignment gives it.
type MemberInfo struct {
	ID         string                      `json:"memberId"`
	InstanceID string                      `json:"groupInstanceId,omitempty"`
	ClientID   string                      `json:"clientId"`
	Epoch      int32                       `json:"memberEpoch,omitempty"` // a consumer group member's
	Host       string                      `json:"host"`
	Assigned   []checkpoint.TopicPartition `json:"assigned"`
}

// OffsetInfo is one committed offset.
type OffsetInfo struct {
	checkpoint.TopicPartition
	Offset
}

// Groups describes every group, by id.
func (c *Coordinator) Groups() []Info {
	var out []Info
	for _, g := range c.sortedGroups() {
		g.mu.Lock()
		if g.state != Dead {
			out = append(out, c.info(g))
		}
		g.mu.Unlock()
	}
	return out
}

// Describe describes one group.
func (c *Coordinator) Describe(id string) (Info, bool) {
	g := c.lookup(id, false)
	if g == nil {
		return Info{}, false
	}
	defer g.mu.Unlock()
	return c.info(g), true
}

func (c *Coordinator) info(g *group) Info {
	if g.cg != nil {
		return c.consumerInfo(g)
	}
	in := Info{ID: g.id, Type: "classic", State: g.state.String(), ProtocolType: g.protocolType, Protocol: g.protocol,
		Generation: g.generation, Leader: g.leader, Partition: g.partition, Members: []MemberInfo{}, Offsets: []OffsetInfo{}}
	for _, id := range g.order {
		m := g.members[id]
		mi := MemberInfo{ID: m.id, InstanceID: m.instanceID, ClientID: m.clientID, Host: m.clientHost, Assigned: []checkpoint.TopicPartition{}}
		var a kmsg.ConsumerMemberAssignment
		if g.protocolType == "consumer" && len(m.assignment) > 0 && a.ReadFrom(m.assignment) == nil {
			for _, t := range a.Topics {
				for _, p := range t.Partitions {
					mi.Assigned = append(mi.Assigned, checkpoint.TopicPartition{Topic: t.Topic, Partition: p})
				}
			}
		}
		in.Members = append(in.Members, mi)
	}
	in.Offsets = g.offsetInfo()
	return in
}

// consumerInfo describes a consumer group: its epoch as the generation,
// its assignor as the protocol.
func (c *Coordinator) consumerInfo(g *group) Info {
	cg := g.cg
	in := Info{ID: g.id, Type: "consumer", State: cg.stateName(), ProtocolType: "consumer", Protocol: c.assignorOf(cg),
		Generation: cg.epoch, Partition: g.partition, Members: []MemberInfo{}}
	for _, id := range sortedKeys(cg.members) {
		m := cg.members[id]
		in.Members = append(in.Members, MemberInfo{ID: m.id, InstanceID: m.instanceID, ClientID: m.clientID, Host: m.clientHost,
			Epoch: m.epoch, Assigned: c.assignedPartitions(m.assigned)})
	}
	in.Offsets = g.offsetInfo()
	return in
}

// offsetInfo lists the group's committed offsets, by topic and partition.
func (g *group) offsetInfo() []OffsetInfo {
	out := []OffsetInfo{}
	for tp, o := range g.offsets {
		out = append(out, OffsetInfo{checkpoint.TopicPartition{Topic: tp.topic, Partition: tp.partition}, o})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
	})
	return out
}

// ErrGroupNotFound and ErrGroupNotEmpty are DeleteGroup's and
// ResetOffsets' refusals.
var (
	ErrGroupNotFound = seglog.NewKafkaError("group: no such group", 69)
	ErrGroupNotEmpty = seglog.NewKafkaError("group: the group has members (it is not empty)", 68)
)

// DeleteGroup deletes an empty group: tombstones for its offsets and
// metadata.
func (c *Coordinator) DeleteGroup(id string) error {
	switch code := c.deleteGroup(id); code {
	case 0:
		return nil
	case kerr.GroupIDNotFound.Code:
		return fmt.Errorf("%w: %q", ErrGroupNotFound, id)
	case kerr.NonEmptyGroup.Code:
		return fmt.Errorf("%w: %q", ErrGroupNotEmpty, id)
	default:
		return fmt.Errorf("group: deleting %q: %w", id, kerr.ErrorForCode(code))
	}
}

// ResetOffsets commits offsets for an empty group (or a new one), as
// kafka-consumer-groups.sh --reset-offsets --execute does: a group with
// members is refused, since its consumers would overwrite them.
func (c *Coordinator) ResetOffsets(id string, offsets map[checkpoint.TopicPartition]int64) error {
	if g := c.lookup(id, false); g != nil {
		empty := g.state == Empty
		g.mu.Unlock()
		if !empty {
			return fmt.Errorf("%w: %q is %s", ErrGroupNotEmpty, id, g.state)
		}
	}
	r := kmsg.NewPtrOffsetCommitRequest()
	r.SetVersion(8)
	r.Group = id
	byTopic := map[string][]kmsg.OffsetCommitRequestTopicPartition{}
	for tp, o := range offsets {
		p := kmsg.NewOffsetCommitRequestTopicPartition()
		p.Partition, p.Offset, p.LeaderEpoch = tp.Partition, o, -1
		byTopic[tp.Topic] = append(byTopic[tp.Topic], p)
	}
	for _, topic := range sortedKeys(byTopic) {
		ps := byTopic[topic]
		slices.SortFunc(ps, func(a, b kmsg.OffsetCommitRequestTopicPartition) int { return int(a.Partition - b.Partition) })
		r.Topics = append(r.Topics, kmsg.OffsetCommitRequestTopic{Topic: topic, Partitions: ps})
	}
	resp := c.OffsetCommit(r)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				return fmt.Errorf("group: resetting %q's offset of %s-%d: %w", id, t.Topic, p.Partition, kerr.ErrorForCode(p.ErrorCode))
			}
		}
	}
	return nil
}
