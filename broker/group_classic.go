package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/coordinator/group"
)

// The classic group protocol: JoinGroup, SyncGroup, Heartbeat and
// LeaveGroup, answered by coordinator/group. A JoinGroup or SyncGroup
// waits for its rebalance, until the connection or the broker ends.

func init() {
	register(
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
	)
}

// groupContext bounds a wait for a rebalance by the fuzz test's groupWait,
// if set.
func (a *groupAPIs) groupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if a.wait > 0 {
		return context.WithTimeout(ctx, a.wait)
	}
	return ctx, func() {}
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
