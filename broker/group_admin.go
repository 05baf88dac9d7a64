package broker

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The groups' administration: DescribeGroups, ListGroups and
// DeleteGroups (of every group type), answered by coordinator/group.

func init() {
	register(
		api{key: 15, min: 0, max: 6, handle: onCall(groupsOf, (*groupAPIs).describeGroups),
			rule: ruleFor(ruleGroup, opDescribe, (*guard).authorizeDescribeGroups)},
		api{key: 16, min: 0, max: 5, handle: handler(func(b *Broker, _ context.Context, _ header, r *kmsg.ListGroupsRequest) kmsg.Response {
			return b.groups.ListGroups(r)
		}), rule: ruleFor(ruleGroup, opDescribe, (*guard).authorizeListGroups)},
		api{key: 42, min: 0, max: 2, handle: handler(func(b *Broker, _ context.Context, _ header, r *kmsg.DeleteGroupsRequest) kmsg.Response {
			return b.groups.DeleteGroups(r)
		}), rule: ruleFor(ruleGroup, opDelete, (*guard).authorizeDeleteGroups)},
	)
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
