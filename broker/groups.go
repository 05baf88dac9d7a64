package broker

import (
	"time"

	"github.com/seglog/seglog/coordinator/group"
)

// The group coordinator's APIs, one file for each family: FindCoordinator
// (find_coordinator.go), the classic protocol (group_classic.go), the
// consumer group protocol (group_consumer.go), committed offsets
// (group_offsets.go) and the groups' administration (group_admin.go);
// coordinator/group answers them, through groupAPIs.

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
