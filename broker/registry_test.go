package broker

import (
	"context"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/coordinator/group"
	"github.com/seglog/seglog/coordinator/txn"
	"github.com/seglog/seglog/tablet"
)

// Every served API has an authorization rule; the APIs any principal may
// call are the ones answered before authentication; every version range
// is one kmsg knows; the registry's entries are in ApiVersions.
func TestRegistryEveryAPIHasARule(t *testing.T) {
	apis := served()
	require.NotEmpty(t, apis)
	for _, a := range apis {
		name := kmsg.NameForKey(a.key)
		require.NotEqual(t, ruleMissing, a.rule.kind, "%s has no authorization rule", name)
		require.NotNil(t, a.rule.check, "%s has no authorization check", name)
		if a.rule.kind != ruleAnyone {
			require.NotZero(t, a.rule.op, "%s's rule names no operation", name)
		}
		require.Equal(t, a.beforeAuth, a.rule.kind == ruleAnyone,
			"%s: only what comes before authentication is open to anyone", name)
		req := kmsg.RequestForKey(a.key)
		require.NotNil(t, req, "%s is not a Kafka API", name)
		require.LessOrEqual(t, a.min, a.max, name)
		require.LessOrEqual(t, a.max, req.MaxVersion(), "%s v%d is beyond what kmsg knows", name, a.max)
	}
	keys := servedVersions()
	require.Len(t, keys, len(apis))
	for i, k := range keys {
		require.Equal(t, apis[i].key, k.ApiKey)
		require.Equal(t, apis[i].max, k.MaxVersion)
	}
}

// probe is a request whose resource a principal without ACLs may not
// touch, and how its refusal shows: an authorization error in the
// response, or (listed) nothing listed.
type probe struct {
	req    func() kmsg.Request
	listed func(kmsg.Response) int // nil: the refusal is an error code
}

// probes has one request for every served API with a rule other than
// anyone's; TestRegistryRefusesWithoutACLs fails for a served API missing
// here, so each new API brings its own proof.
var probes = map[int16]probe{
	0: {req: func() kmsg.Request {
		r := kmsg.NewPtrProduceRequest()
		r.Acks, r.TimeoutMillis = -1, 1000
		r.Topics = []kmsg.ProduceRequestTopic{{Topic: "secret", Partitions: []kmsg.ProduceRequestTopicPartition{{Records: []byte{}}}}}
		return r
	}},
	1: {req: func() kmsg.Request {
		r := kmsg.NewPtrFetchRequest()
		r.MaxBytes, r.SessionEpoch = 1<<20, -1
		r.Topics = []kmsg.FetchRequestTopic{{Topic: "secret", Partitions: []kmsg.FetchRequestTopicPartition{{PartitionMaxBytes: 1 << 20}}}}
		return r
	}},
	2: {req: func() kmsg.Request {
		r := kmsg.NewPtrListOffsetsRequest()
		r.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: "secret", Partitions: []kmsg.ListOffsetsRequestTopicPartition{{Timestamp: -1}}}}
		return r
	}},
	3: {req: func() kmsg.Request {
		r := kmsg.NewPtrMetadataRequest()
		r.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("secret")}}
		return r
	}},
	8: {req: func() kmsg.Request {
		r := kmsg.NewPtrOffsetCommitRequest()
		r.Group, r.Generation = "g", -1
		r.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "secret", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Offset: 1}}}}
		return r
	}},
	9: {req: func() kmsg.Request {
		r := kmsg.NewPtrOffsetFetchRequest()
		r.Group = "g"
		r.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "secret", Partitions: []int32{0}}}
		r.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g", // v8+
			Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "secret", Partitions: []int32{0}}}}}
		return r
	}},
	10: {req: func() kmsg.Request {
		r := kmsg.NewPtrFindCoordinatorRequest()
		r.CoordinatorKey, r.CoordinatorKeys = "g", []string{"g"}
		return r
	}},
	11: {req: func() kmsg.Request {
		r := kmsg.NewPtrJoinGroupRequest()
		r.Group, r.ProtocolType, r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = "g", "consumer", 10000, 10000
		r.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{}}}
		return r
	}},
	12: {req: func() kmsg.Request { r := kmsg.NewPtrHeartbeatRequest(); r.Group = "g"; return r }},
	13: {req: func() kmsg.Request { r := kmsg.NewPtrLeaveGroupRequest(); r.Group = "g"; return r }},
	14: {req: func() kmsg.Request { r := kmsg.NewPtrSyncGroupRequest(); r.Group = "g"; return r }},
	15: {req: func() kmsg.Request { r := kmsg.NewPtrDescribeGroupsRequest(); r.Groups = []string{"g"}; return r }},
	68: {req: func() kmsg.Request {
		r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		r.Group, r.MemberID, r.RebalanceTimeoutMillis = "g", "m", 10000
		r.SubscribedTopicNames, r.Topics = []string{"secret"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		return r
	}},
	69: {req: func() kmsg.Request {
		r := kmsg.NewPtrConsumerGroupDescribeRequest()
		r.Groups = []string{"g"}
		return r
	}},
	16: {req: func() kmsg.Request { return kmsg.NewPtrListGroupsRequest() }, listed: func(resp kmsg.Response) int {
		return len(resp.(*kmsg.ListGroupsResponse).Groups)
	}},
	19: {req: func() kmsg.Request {
		r := kmsg.NewPtrCreateTopicsRequest()
		r.Topics = []kmsg.CreateTopicsRequestTopic{{Topic: "new", NumPartitions: 1, ReplicationFactor: 1}}
		return r
	}},
	20: {req: func() kmsg.Request {
		r := kmsg.NewPtrDeleteTopicsRequest()
		r.TopicNames = []string{"secret"}
		r.Topics = []kmsg.DeleteTopicsRequestTopic{{Topic: kmsg.StringPtr("secret")}}
		return r
	}},
	21: {req: func() kmsg.Request {
		r := kmsg.NewPtrDeleteRecordsRequest()
		r.Topics = []kmsg.DeleteRecordsRequestTopic{{Topic: "secret", Partitions: []kmsg.DeleteRecordsRequestTopicPartition{{Offset: 1}}}}
		return r
	}},
	22: {req: func() kmsg.Request {
		r := kmsg.NewPtrInitProducerIDRequest()
		r.TransactionalID, r.TransactionTimeoutMillis = kmsg.StringPtr("tx"), 10000
		return r
	}},
	23: {req: func() kmsg.Request {
		r := kmsg.NewPtrOffsetForLeaderEpochRequest()
		r.Topics = []kmsg.OffsetForLeaderEpochRequestTopic{{Topic: "secret", Partitions: []kmsg.OffsetForLeaderEpochRequestTopicPartition{{}}}}
		return r
	}},
	24: {req: func() kmsg.Request {
		r := kmsg.NewPtrAddPartitionsToTxnRequest()
		r.TransactionalID = "tx"
		r.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "secret", Partitions: []int32{0}}}
		return r
	}},
	25: {req: func() kmsg.Request {
		r := kmsg.NewPtrAddOffsetsToTxnRequest()
		r.TransactionalID, r.Group = "tx", "g"
		return r
	}},
	26: {req: func() kmsg.Request { r := kmsg.NewPtrEndTxnRequest(); r.TransactionalID = "tx"; return r }},
	27: {req: func() kmsg.Request {
		r := kmsg.NewPtrWriteTxnMarkersRequest()
		r.Markers = []kmsg.WriteTxnMarkersRequestMarker{{ProducerID: 1, Committed: false,
			Topics: []kmsg.WriteTxnMarkersRequestMarkerTopic{{Topic: "secret", Partitions: []int32{0}}}}}
		return r
	}},
	28: {req: func() kmsg.Request {
		r := kmsg.NewPtrTxnOffsetCommitRequest()
		r.TransactionalID, r.Group = "tx", "g"
		r.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "secret", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Offset: 1}}}}
		return r
	}},
	29: {req: func() kmsg.Request {
		r := kmsg.NewPtrDescribeACLsRequest()
		r.ResourceType, r.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
		r.Operation, r.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		return r
	}},
	30: {req: func() kmsg.Request {
		r := kmsg.NewPtrCreateACLsRequest()
		r.Creations = []kmsg.CreateACLsRequestCreation{{ResourceType: resTopic, ResourceName: "secret",
			ResourcePatternType: kmsg.ACLResourcePatternTypeLiteral, Principal: "User:nobody", Host: "*",
			Operation: opRead, PermissionType: kmsg.ACLPermissionTypeAllow}}
		return r
	}},
	31: {req: func() kmsg.Request {
		r := kmsg.NewPtrDeleteACLsRequest()
		r.Filters = []kmsg.DeleteACLsRequestFilter{{ResourceType: kmsg.ACLResourceTypeAny, ResourcePatternType: kmsg.ACLResourcePatternTypeAny,
			Operation: kmsg.ACLOperationAny, PermissionType: kmsg.ACLPermissionTypeAny}}
		return r
	}},
	32: {req: func() kmsg.Request {
		r := kmsg.NewPtrDescribeConfigsRequest()
		r.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "secret"}}
		return r
	}},
	33: {req: func() kmsg.Request {
		r := kmsg.NewPtrAlterConfigsRequest()
		r.Resources = []kmsg.AlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "secret"}}
		return r
	}},
	35: {req: func() kmsg.Request {
		r := kmsg.NewPtrDescribeLogDirsRequest()
		r.Topics = []kmsg.DescribeLogDirsRequestTopic{{Topic: "secret", Partitions: []int32{0}}}
		return r
	}, listed: func(resp kmsg.Response) int { return len(resp.(*kmsg.DescribeLogDirsResponse).Dirs) }},
	37: {req: func() kmsg.Request {
		r := kmsg.NewPtrCreatePartitionsRequest()
		r.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: "secret", Count: 4}}
		return r
	}},
	42: {req: func() kmsg.Request { r := kmsg.NewPtrDeleteGroupsRequest(); r.Groups = []string{"g"}; return r }},
	43: {req: func() kmsg.Request {
		r := kmsg.NewPtrElectLeadersRequest()
		r.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: "secret", Partitions: []int32{0}}}
		return r
	}},
	45: {req: func() kmsg.Request {
		r := kmsg.NewPtrAlterPartitionAssignmentsRequest()
		r.Topics = []kmsg.AlterPartitionAssignmentsRequestTopic{{Topic: "secret", Partitions: []kmsg.AlterPartitionAssignmentsRequestTopicPartition{{Replicas: []int32{1}}}}}
		return r
	}},
	46: {req: func() kmsg.Request { return kmsg.NewPtrListPartitionReassignmentsRequest() }},
	44: {req: func() kmsg.Request {
		r := kmsg.NewPtrIncrementalAlterConfigsRequest()
		r.Resources = []kmsg.IncrementalAlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeBroker, ResourceName: "0"}}
		return r
	}},
	47: {req: func() kmsg.Request {
		r := kmsg.NewPtrOffsetDeleteRequest()
		r.Group = "g"
		r.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "secret", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{}}}}
		return r
	}},
	48: {req: func() kmsg.Request { return kmsg.NewPtrDescribeClientQuotasRequest() }},
	49: {req: func() kmsg.Request {
		r := kmsg.NewPtrAlterClientQuotasRequest()
		r.Entries = []kmsg.AlterClientQuotasRequestEntry{{Entity: []kmsg.AlterClientQuotasRequestEntryEntity{{Type: "user", Name: kmsg.StringPtr("x")}},
			Ops: []kmsg.AlterClientQuotasRequestEntryOp{{Key: "producer_byte_rate", Value: 1}}}}
		return r
	}},
	50: {req: func() kmsg.Request { return kmsg.NewPtrDescribeUserSCRAMCredentialsRequest() }},
	51: {req: func() kmsg.Request {
		r := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
		r.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestDeletion{{Name: "admin", Mechanism: 1}}
		return r
	}},
	58: {req: func() kmsg.Request {
		r := kmsg.NewPtrEnvelopeRequest()
		r.RequestPrincipal = []byte("User:admin")
		r.RequestData = []byte{0, 18, 0, 0, 0, 0, 0, 1, 0, 0} // ApiVersions v0
		return r
	}},
	60: {req: func() kmsg.Request {
		r := kmsg.NewPtrDescribeClusterRequest()
		r.IncludeClusterAuthorizedOperations = true
		return r
	}, listed: func(resp kmsg.Response) int {
		return max(int(resp.(*kmsg.DescribeClusterResponse).ClusterAuthorizedOperations), 0) // no operation revealed
	}},
	75: {req: func() kmsg.Request {
		r := kmsg.NewPtrDescribeTopicPartitionsRequest()
		r.Topics = []kmsg.DescribeTopicPartitionsRequestTopic{{Topic: "secret"}}
		return r
	}},
	71: {req: func() kmsg.Request { return kmsg.NewPtrGetTelemetrySubscriptionsRequest() },
		listed: func(kmsg.Response) int { return 0 }}, // answered to any client: it tells of no resource
	72: {req: func() kmsg.Request { return kmsg.NewPtrPushTelemetryRequest() },
		listed: func(kmsg.Response) int { return 0 }}, // (and changes none)
	61: {req: func() kmsg.Request {
		r := kmsg.NewPtrDescribeProducersRequest()
		r.Topics = []kmsg.DescribeProducersRequestTopic{{Topic: "secret", Partitions: []int32{0}}}
		return r
	}},
	65: {req: func() kmsg.Request {
		r := kmsg.NewPtrDescribeTransactionsRequest()
		r.TransactionalIDs = []string{"tx"}
		return r
	}},
	66: {req: func() kmsg.Request { return kmsg.NewPtrListTransactionsRequest() }, listed: func(resp kmsg.Response) int {
		return len(resp.(*kmsg.ListTransactionsResponse).TransactionStates)
	}},
}

// withTopicIDs sets the topic ids of a Produce or Fetch, which name their
// topics by id from version 13, as a client does from Metadata.
func withTopicIDs(m *tablet.Manager, req kmsg.Request) kmsg.Request {
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		for i := range r.Topics {
			id, _ := m.TopicID(r.Topics[i].Topic)
			r.Topics[i].TopicID = id
		}
	case *kmsg.FetchRequest:
		for i := range r.Topics {
			id, _ := m.TopicID(r.Topics[i].Topic)
			r.Topics[i].TopicID = id
		}
	case *kmsg.OffsetCommitRequest:
		for i := range r.Topics {
			id, _ := m.TopicID(r.Topics[i].Topic)
			r.Topics[i].TopicID = id
		}
	case *kmsg.OffsetFetchRequest:
		for i := range r.Groups {
			for j := range r.Groups[i].Topics {
				id, _ := m.TopicID(r.Groups[i].Topics[j].Topic)
				r.Groups[i].Topics[j].TopicID = id
			}
		}
	}
	return req
}

// authorizationErrors are the codes a refusal answers with.
var authorizationErrors = map[int16]bool{kerr.TopicAuthorizationFailed.Code: true, kerr.GroupAuthorizationFailed.Code: true,
	kerr.ClusterAuthorizationFailed.Code: true, kerr.TransactionalIDAuthorizationFailed.Code: true}

// handleAs encodes req at version v and hands it to the broker as
// principal would send it.
func handleAs(t *testing.T, b *Broker, principal string, req kmsg.Request, v int16) kmsg.Response {
	t.Helper()
	req.SetVersion(v)
	h := header{key: req.Key(), version: v, clientID: "probe", host: "/127.0.0.1",
		listener: &Listener{Name: "PLAINTEXT", AdvertisedHost: "127.0.0.1", AdvertisedPort: 9092},
		sess:     &session{principal: principal, authed: true}}
	r := kmsg.RequestForKey(req.Key())
	r.SetVersion(v)
	resp, err := b.handle(context.Background(), h, r, req.AppendTo(nil))
	require.NoError(t, err)
	return resp
}

// TestRegistryRefusesWithoutACLs: with the authorizer on, a principal
// without ACLs is refused by every served API, at its lowest and highest
// version, rule kind by rule kind; the resources exist (a topic with a
// record, a group with offsets, an open transaction), and nothing of
// theirs changes.
func TestRegistryRefusesWithoutACLs(t *testing.T) {
	b, m, _ := testBroker(t, Options{Authorizer: true, SuperUsers: []string{"User:admin"}})
	const admin, nobody = "User:admin", "User:nobody"
	// What there is to refuse: a topic, a group's offsets, a transaction.
	md := kmsg.NewPtrMetadataRequest()
	md.Topics, md.AllowAutoTopicCreation = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("secret")}}, true
	require.Zero(t, handleAs(t, b, admin, md, 12).(*kmsg.MetadataResponse).Topics[0].ErrorCode)
	oc := probes[8].req().(*kmsg.OffsetCommitRequest)
	require.Zero(t, handleAs(t, b, admin, oc, 8).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode)
	ip := probes[22].req()
	require.Zero(t, handleAs(t, b, admin, ip, 4).(*kmsg.InitProducerIDResponse).ErrorCode)
	topics := len(m.Tablets())

	byKind := map[ruleKind][]*api{}
	for _, a := range served() {
		if a.rule.kind == ruleAnyone {
			continue
		}
		_, ok := probes[a.key]
		require.True(t, ok, "%s is served but has no probe here: add one", kmsg.NameForKey(a.key))
		byKind[a.rule.kind] = append(byKind[a.rule.kind], a)
	}
	require.Len(t, byKind, 4, "topic, group, transactional-id and cluster rules")
	for kind, apis := range byKind {
		t.Run(kind.String(), func(t *testing.T) {
			for _, a := range apis {
				for _, v := range []int16{a.min, a.max} {
					p := probes[a.key]
					resp := handleAs(t, b, nobody, withTopicIDs(m, p.req()), v)
					name := kmsg.NameForKey(a.key)
					require.NotNil(t, resp, "%s v%d", name, v)
					if fr, ok := resp.(*fetchReply); ok {
						fr.close()
						resp = fr.FetchResponse
					}
					if p.listed != nil {
						require.Zero(t, p.listed(resp), "%s v%d lists nothing a principal may not describe", name, v)
						continue
					}
					var codes []int16
					b.metrics.eachErrorCode(reflect.ValueOf(resp).Elem(), func(c int16) { codes = append(codes, c) })
					require.NotEmpty(t, codes, "%s v%d is refused", name, v)
					for _, c := range codes {
						require.True(t, authorizationErrors[c], "%s v%d: %s is not an authorization error", name, v, errorName(c))
					}
				}
			}
		})
	}
	require.Len(t, m.Tablets(), topics, "no topic created or deleted")
	require.NotEmpty(t, partitionsOf(b, "secret"))
	require.NotEmpty(t, partitionsOf(b, group.Topic))
	require.NotEmpty(t, partitionsOf(b, txn.Topic))
}

// An API without an authorization rule is refused with an authorizer on
// (CLUSTER_AUTHORIZATION_FAILED, its handler never called) and served
// without one: the registry denies by default.
func TestRegistryDeniesByDefault(t *testing.T) {
	const key = 57 // UpdateFeatures: not served
	require.Nil(t, apiFor(key))
	called := 0
	registry[key] = &api{key: key, min: 0, max: 1, handle: func(_ *Broker, _ context.Context, _ header, req kmsg.Request) (kmsg.Response, error) {
		called++
		return req.ResponseKind(), nil
	}}
	t.Cleanup(func() { registry[key] = nil })

	b, _, _ := testBroker(t, Options{Authorizer: true, SuperUsers: []string{"User:admin"}})
	for _, who := range []string{"User:nobody", "User:admin"} {
		resp := handleAs(t, b, who, kmsg.NewPtrUpdateFeaturesRequest(), 0)
		require.Equal(t, kerr.ClusterAuthorizationFailed.Code, resp.(*kmsg.UpdateFeaturesResponse).ErrorCode, who)
	}
	require.Zero(t, called, "the handler is not reached")

	// An API whose response has no top-level error code: the connection
	// closes.
	const alterQuotas = 49
	kept := registry[alterQuotas]
	t.Cleanup(func() { registry[alterQuotas] = kept })
	unruled := *kept
	unruled.rule = rule{}
	registry[alterQuotas] = &unruled
	r := probes[alterQuotas].req()
	h := header{key: alterQuotas, sess: &session{principal: "User:admin", authed: true}}
	_, err := b.handle(context.Background(), h, kmsg.NewPtrAlterClientQuotasRequest(), r.AppendTo(nil))
	require.ErrorIs(t, err, errNoRule)
	registry[alterQuotas] = kept

	open, _, _ := testBroker(t, Options{})
	registry[key] = &api{key: key, min: 0, max: 1, handle: func(_ *Broker, _ context.Context, _ header, req kmsg.Request) (kmsg.Response, error) {
		called++
		return req.ResponseKind(), nil
	}}
	resp := handleAs(t, open, "User:nobody", kmsg.NewPtrUpdateFeaturesRequest(), 0)
	require.Zero(t, resp.(*kmsg.UpdateFeaturesResponse).ErrorCode)
	require.Equal(t, 1, called, "served without an authorizer")
}
