package group

import (
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/coordinator/internal/store"
)

// DescribeGroups describes groups: their state, protocol and members (a
// stable group's with their subscription and assignment). An unknown group
// is Dead, as Kafka answers.
func (c *Coordinator) DescribeGroups(r *kmsg.DescribeGroupsRequest) *kmsg.DescribeGroupsResponse {
	resp := r.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, id := range r.Groups {
		dg := kmsg.NewDescribeGroupsResponseGroup()
		dg.Group, dg.State = id, Dead.String()
		var g *group
		owner := c.Owns(id)
		if id != "" && owner == 0 {
			g = c.lookup(id, false) // locked
		}
		switch {
		case id == "":
			dg.ErrorCode = kerr.InvalidGroupID.Code
		case owner != 0:
			dg.ErrorCode = owner
		case g == nil && r.GetVersion() >= 6:
			// KIP-1043: from v6 a group that does not exist is an error,
			// not a Dead group.
			dg.ErrorCode = kerr.GroupIDNotFound.Code
			dg.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("Group %s not found.", id))
		case g != nil && g.cg != nil:
			// A consumer group, in the classic shape (as Kafka shows it).
			dg.State, dg.ProtocolType, dg.Protocol = g.cg.stateName(), "consumer", c.assignorOf(g.cg)
			for _, mid := range sortedKeys(g.cg.members) {
				m := g.cg.members[mid]
				dm := kmsg.DescribeGroupsResponseGroupMember{MemberID: m.id, InstanceID: optional(m.instanceID), ClientID: m.clientID, ClientHost: m.clientHost}
				dm.ProtocolMetadata, dm.MemberAssignment = c.classicView(g.cg, m)
				dg.Members = append(dg.Members, dm)
			}
			g.mu.Unlock()
		case g != nil:
			dg.State, dg.ProtocolType = g.state.String(), g.protocolType
			stable := g.state == Stable
			if stable {
				dg.Protocol = g.protocol
			}
			for _, mid := range g.order {
				m := g.members[mid]
				dm := kmsg.DescribeGroupsResponseGroupMember{MemberID: m.id, ClientID: m.clientID, ClientHost: m.clientHost,
					ProtocolMetadata: []byte{}, MemberAssignment: []byte{}}
				if m.instanceID != "" {
					dm.InstanceID = kmsg.StringPtr(m.instanceID)
				}
				if stable {
					dm.ProtocolMetadata, dm.MemberAssignment = m.metadataFor(g.protocol), m.assignment
				}
				dg.Members = append(dg.Members, dm)
			}
			g.mu.Unlock()
		}
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}

// ListGroups lists the groups, those in the given states from v4 and of
// the given types (classic, consumer) from v5.
func (c *Coordinator) ListGroups(r *kmsg.ListGroupsRequest) *kmsg.ListGroupsResponse {
	resp := r.ResponseKind().(*kmsg.ListGroupsResponse)
	// Kafka's answer while partitions load: the groups of those loaded,
	// and COORDINATOR_LOAD_IN_PROGRESS (an admin client retries).
	c.mu.Lock()
	for _, state := range c.ownedParts {
		if state == store.Loading {
			resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
		}
	}
	c.mu.Unlock()
	for _, g := range c.sortedGroups() {
		g.mu.Lock()
		dead, state, protocolType, kind := g.state == Dead, g.state.String(), g.protocolType, "classic"
		if g.cg != nil {
			state, kind = g.cg.stateName(), "consumer"
		}
		g.mu.Unlock()
		if dead || len(r.StatesFilter) > 0 && !containsFold(r.StatesFilter, state) ||
			len(r.TypesFilter) > 0 && !containsFold(r.TypesFilter, kind) {
			continue
		}
		resp.Groups = append(resp.Groups, kmsg.ListGroupsResponseGroup{Group: g.id, ProtocolType: protocolType, GroupState: state, GroupType: kind})
	}
	return resp
}

func containsFold(list []string, s string) bool {
	for _, l := range list {
		if strings.EqualFold(l, s) {
			return true
		}
	}
	return false
}

// DeleteGroups deletes empty groups: their offsets and metadata get
// tombstones and the group is gone.
func (c *Coordinator) DeleteGroups(r *kmsg.DeleteGroupsRequest) *kmsg.DeleteGroupsResponse {
	resp := r.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, id := range r.Groups {
		dg := kmsg.DeleteGroupsResponseGroup{Group: id}
		if dg.ErrorCode = c.Owns(id); dg.ErrorCode == 0 {
			dg.ErrorCode = c.deleteGroup(id)
		}
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}

func (c *Coordinator) deleteGroup(id string) int16 {
	if id == "" {
		return kerr.InvalidGroupID.Code
	}
	g := c.lookup(id, false)
	if g == nil {
		return kerr.GroupIDNotFound.Code
	}
	defer g.mu.Unlock()
	if g.state != Empty {
		return kerr.NonEmptyGroup.Code
	}
	if err := c.removeGroup(g); err != nil {
		c.opts.Logger.Error("deleting a group", "group", id, "err", err)
		return storeErrorCode(err)
	}
	return 0
}

// removeGroup writes the tombstones of an empty group's offsets and
// metadata, and makes it dead.
func (c *Coordinator) removeGroup(g *group) error {
	var recs []store.KV
	for tp := range g.offsets {
		recs = append(recs, store.KV{Key: offsetKey(g.id, tp.topic, tp.partition), Value: nil})
	}
	recs = append(recs, store.KV{Key: groupKey(g.id), Value: nil})
	if g.cg != nil {
		recs = append(recs, consumerTombstones(g.id, g.cg)...)
	}
	if err := c.log.Append(g.partition, c.opts.clock.Now(), recs...); err != nil {
		return err
	}
	clear(g.offsets)
	g.transition(Dead, c.opts.clock.Now())
	c.forget(g)
	return nil
}
