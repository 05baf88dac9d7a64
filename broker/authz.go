package broker

import (
	"log/slog"
	"math"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/broker/auth"
)

// Authorization, before a request touches the engine, as Kafka's
// KafkaApis checks each API: the resources a principal may not act on are
// taken out of the request and answered with the API's authorization
// error (TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED,
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED);
// the rest is handled as usual and the refusals are merged into its
// response. A request refused as a whole is answered without the handler.

// Short names for the ACL operations and resource types used below.
const (
	opRead            = kmsg.ACLOperationRead
	opWrite           = kmsg.ACLOperationWrite
	opCreate          = kmsg.ACLOperationCreate
	opDelete          = kmsg.ACLOperationDelete
	opAlter           = kmsg.ACLOperationAlter
	opDescribe        = kmsg.ACLOperationDescribe
	opDescribeConfigs = kmsg.ACLOperationDescribeConfigs
	opAlterConfigs    = kmsg.ACLOperationAlterConfigs
	opIdempotentWrite = kmsg.ACLOperationIdempotentWrite

	resTopic   = kmsg.ACLResourceTypeTopic
	resGroup   = kmsg.ACLResourceTypeGroup
	resCluster = kmsg.ACLResourceTypeCluster
	resTxnID   = kmsg.ACLResourceTypeTransactionalId
)

// A guard is the broker's authorization: every API's rule (the
// registry's rule.check), the checks the handlers make and the ACL APIs,
// over the authorizer (nil: every principal may do everything; its ACLs
// are the ones the APIs change) and the broker's topic view (ids resolved,
// topics that exist). It holds nothing else of the broker.
type guard struct {
	authz  *auth.Authorizer
	topics topicView
	logger *slog.Logger // (the ACL APIs' failures to save)
}

// may reports whether the request's principal may do op on the resource.
func (g *guard) may(h header, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	if g.authz == nil || principalOf(h) == Internal {
		return true
	}
	return g.authz.Authorize(principalOf(h), strings.TrimPrefix(h.host, "/"), op, rt, name)
}

// mayAny reports whether the principal may do op on some resource of the
// type.
func (g *guard) mayAny(h header, op kmsg.ACLOperation, rt kmsg.ACLResourceType) bool {
	if g.authz == nil || principalOf(h) == Internal {
		return true
	}
	return g.authz.AuthorizeAny(principalOf(h), strings.TrimPrefix(h.host, "/"), op, rt)
}

func principalOf(h header) string {
	if h.sess == nil {
		return Anonymous
	}
	return h.sess.principal
}

// mayCluster is may on the cluster.
func (g *guard) mayCluster(h header, op kmsg.ACLOperation) bool {
	return g.may(h, op, resCluster, auth.ClusterName)
}

// mayTxn is Write on a transactional id (nil: not transactional).
func (g *guard) mayTxn(h header, id *string) bool {
	return id == nil || g.may(h, opWrite, resTxnID, *id)
}

// refusal is code if the principal may not do op on the resource, 0 if it
// may.
func (g *guard) refusal(h header, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string, code int16) int16 {
	if g.may(h, op, rt, name) {
		return 0
	}
	return code
}

// takeOut takes out of *items those refused gives an error code for (0:
// the principal may) and returns, for each, answer's response entry: what
// the handler does not see and the response gets.
func takeOut[T, R any](items *[]T, refused func(T) int16, answer func(T, int16) R) []R {
	var out []R
	*items = slices.DeleteFunc(*items, func(it T) bool {
		code := refused(it)
		if code != 0 {
			out = append(out, answer(it, code))
		}
		return code != 0
	})
	return out
}

// The authorization errors of topics, groups and transactional ids.
const (
	topicRefused = 29 // TOPIC_AUTHORIZATION_FAILED
	groupErr     = 30 // GROUP_AUTHORIZATION_FAILED
	txnErr       = 53 // TRANSACTIONAL_ID_AUTHORIZATION_FAILED
)

// The operations Kafka reports in AuthorizedOperations bitfields, by
// resource type (bit n is the operation numbered n).
var (
	topicOps   = []kmsg.ACLOperation{opRead, opWrite, opCreate, opDelete, opAlter, opDescribe, opDescribeConfigs, opAlterConfigs}
	clusterOps = []kmsg.ACLOperation{opCreate, opAlter, opDescribe, kmsg.ACLOperationClusterAction, opDescribeConfigs,
		opAlterConfigs, opIdempotentWrite}
	groupOps = []kmsg.ACLOperation{opRead, opDescribe, opDelete}
)

// notRequested is an AuthorizedOperations the client did not ask for.
const notRequested = math.MinInt32

// authorizedOps is the bitfield of the operations the principal may do on
// the resource (every one without an authorizer, as Kafka answers).
func (g *guard) authorizedOps(h header, rt kmsg.ACLResourceType, name string) int32 {
	ops := map[kmsg.ACLResourceType][]kmsg.ACLOperation{resTopic: topicOps, resCluster: clusterOps, resGroup: groupOps}[rt]
	var v int32
	for _, op := range ops {
		if g.may(h, op, rt, name) {
			v |= 1 << op
		}
	}
	return v
}

// authorizedOpsIf is authorizedOps when asked for, notRequested
// otherwise: the AuthorizedOperations that Metadata and DescribeGroups
// carry.
func (g *guard) authorizedOpsIf(asked bool, h header, rt kmsg.ACLResourceType, name string) int32 {
	if !asked {
		return notRequested
	}
	return g.authorizedOps(h, rt, name)
}
