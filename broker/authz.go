package broker

import (
	"math"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
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

// may reports whether the request's principal may do op on the resource.
func (b *Broker) may(h header, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	if b.authz == nil {
		return true
	}
	return b.authz.Authorize(principalOf(h), strings.TrimPrefix(h.host, "/"), op, rt, name)
}

// mayAny reports whether the principal may do op on some resource of the
// type.
func (b *Broker) mayAny(h header, op kmsg.ACLOperation, rt kmsg.ACLResourceType) bool {
	if b.authz == nil {
		return true
	}
	return b.authz.AuthorizeAny(principalOf(h), strings.TrimPrefix(h.host, "/"), op, rt)
}

func principalOf(h header) string {
	if h.sess == nil {
		return Anonymous
	}
	return h.sess.principal
}

// mayCluster is may on the cluster.
func (b *Broker) mayCluster(h header, op kmsg.ACLOperation) bool {
	return b.may(h, op, resCluster, auth.ClusterName)
}

// mayTxn is Write on a transactional id (nil: not transactional).
func (b *Broker) mayTxn(h header, id *string) bool {
	return id == nil || b.may(h, opWrite, resTxnID, *id)
}

// refusal is code if the principal may not do op on the resource, 0 if it
// may.
func (b *Broker) refusal(h header, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string, code int16) int16 {
	if b.may(h, op, rt, name) {
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

const topicRefused = 29 // TOPIC_AUTHORIZATION_FAILED

// authorize checks a request. A non-nil refused is the whole answer; a
// non-nil after merges the refusals into the handler's response.
func (b *Broker) authorize(h header, req kmsg.Request) (refused kmsg.Response, after func(kmsg.Response)) {
	if b.authz == nil {
		return nil, nil
	}
	switch r := req.(type) {
	case *kmsg.MetadataRequest:
		return nil, b.authorizeMetadata(h, r)
	case *kmsg.ProduceRequest:
		return nil, b.authorizeProduce(h, r)
	case *kmsg.FetchRequest:
		return nil, b.authorizeFetch(h, r)
	case *kmsg.ListOffsetsRequest:
		denied := takeOut(&r.Topics, func(t kmsg.ListOffsetsRequestTopic) int16 {
			return b.refusal(h, opDescribe, resTopic, t.Topic, topicRefused)
		}, func(t kmsg.ListOffsetsRequestTopic, code int16) kmsg.ListOffsetsResponseTopic {
			rt := kmsg.ListOffsetsResponseTopic{Topic: t.Topic}
			for _, p := range t.Partitions {
				rp := kmsg.NewListOffsetsResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			return rt
		})
		return nil, func(resp kmsg.Response) {
			l := resp.(*kmsg.ListOffsetsResponse)
			l.Topics = append(l.Topics, denied...)
		}
	case *kmsg.OffsetForLeaderEpochRequest:
		denied := takeOut(&r.Topics, func(t kmsg.OffsetForLeaderEpochRequestTopic) int16 {
			return b.refusal(h, opDescribe, resTopic, t.Topic, topicRefused)
		}, func(t kmsg.OffsetForLeaderEpochRequestTopic, code int16) kmsg.OffsetForLeaderEpochResponseTopic {
			rt := kmsg.OffsetForLeaderEpochResponseTopic{Topic: t.Topic}
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			return rt
		})
		return nil, func(resp kmsg.Response) {
			o := resp.(*kmsg.OffsetForLeaderEpochResponse)
			o.Topics = append(o.Topics, denied...)
		}
	case *kmsg.CreateTopicsRequest:
		cluster := b.mayCluster(h, opCreate)
		denied := takeOut(&r.Topics, func(t kmsg.CreateTopicsRequestTopic) int16 {
			if cluster {
				return 0
			}
			return b.refusal(h, opCreate, resTopic, t.Topic, topicRefused)
		}, func(t kmsg.CreateTopicsRequestTopic, code int16) kmsg.CreateTopicsResponseTopic {
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic, rt.ErrorCode = t.Topic, code
			return rt
		})
		return nil, func(resp kmsg.Response) {
			c := resp.(*kmsg.CreateTopicsResponse)
			for i := range c.Topics {
				// A created topic's configs (v5+) only for a principal that
				// may describe them, as Kafka answers.
				if c.Topics[i].Configs != nil && !b.may(h, opDescribeConfigs, resTopic, c.Topics[i].Topic) {
					c.Topics[i].Configs, c.Topics[i].ConfigErrorCode = nil, kerr.TopicAuthorizationFailed.Code
				}
			}
			c.Topics = append(c.Topics, denied...)
		}
	case *kmsg.DeleteTopicsRequest:
		answer := func(name string, code int16) kmsg.DeleteTopicsResponseTopic {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic, rt.ErrorCode = kmsg.StringPtr(name), code
			return rt
		}
		denied := takeOut(&r.TopicNames, func(name string) int16 { return b.refusal(h, opDelete, resTopic, name, topicRefused) }, answer)
		name := func(t kmsg.DeleteTopicsRequestTopic) (string, bool) { // v6: by name or by id
			if t.Topic != nil {
				return *t.Topic, true
			}
			return b.topicByID(t.TopicID)
		}
		denied = append(denied, takeOut(&r.Topics, func(t kmsg.DeleteTopicsRequestTopic) int16 {
			n, ok := name(t)
			if !ok {
				return 0 // an unknown id: the handler answers UNKNOWN_TOPIC_ID
			}
			return b.refusal(h, opDelete, resTopic, n, topicRefused)
		}, func(t kmsg.DeleteTopicsRequestTopic, code int16) kmsg.DeleteTopicsResponseTopic {
			n, _ := name(t)
			rt := answer(n, code)
			rt.TopicID = t.TopicID
			return rt
		})...)
		return nil, func(resp kmsg.Response) {
			d := resp.(*kmsg.DeleteTopicsResponse)
			d.Topics = append(d.Topics, denied...)
		}
	case *kmsg.CreatePartitionsRequest:
		denied := takeOut(&r.Topics, func(t kmsg.CreatePartitionsRequestTopic) int16 {
			return b.refusal(h, opAlter, resTopic, t.Topic, topicRefused)
		}, func(t kmsg.CreatePartitionsRequestTopic, code int16) kmsg.CreatePartitionsResponseTopic {
			rt := kmsg.NewCreatePartitionsResponseTopic()
			rt.Topic, rt.ErrorCode = t.Topic, code
			return rt
		})
		return nil, func(resp kmsg.Response) {
			c := resp.(*kmsg.CreatePartitionsResponse)
			c.Topics = append(c.Topics, denied...)
		}
	case *kmsg.DeleteRecordsRequest:
		denied := takeOut(&r.Topics, func(t kmsg.DeleteRecordsRequestTopic) int16 {
			return b.refusal(h, opDelete, resTopic, t.Topic, topicRefused)
		}, func(t kmsg.DeleteRecordsRequestTopic, code int16) kmsg.DeleteRecordsResponseTopic {
			rt := kmsg.DeleteRecordsResponseTopic{Topic: t.Topic}
			for _, p := range t.Partitions {
				rp := kmsg.NewDeleteRecordsResponseTopicPartition()
				rp.Partition, rp.LowWatermark, rp.ErrorCode = p.Partition, -1, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			return rt
		})
		return nil, func(resp kmsg.Response) {
			d := resp.(*kmsg.DeleteRecordsResponse)
			d.Topics = append(d.Topics, denied...)
		}
	case *kmsg.DescribeConfigsRequest:
		denied := takeOut(&r.Resources, func(res kmsg.DescribeConfigsRequestResource) int16 {
			return b.configAuthorization(h, opDescribeConfigs, res.ResourceType, res.ResourceName)
		}, func(res kmsg.DescribeConfigsRequestResource, code int16) kmsg.DescribeConfigsResponseResource {
			rr := kmsg.NewDescribeConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode = res.ResourceType, res.ResourceName, code
			return rr
		})
		return nil, func(resp kmsg.Response) {
			d := resp.(*kmsg.DescribeConfigsResponse)
			d.Resources = append(d.Resources, denied...)
		}
	case *kmsg.AlterConfigsRequest:
		denied := takeOut(&r.Resources, func(res kmsg.AlterConfigsRequestResource) int16 {
			return b.configAuthorization(h, opAlterConfigs, res.ResourceType, res.ResourceName)
		}, func(res kmsg.AlterConfigsRequestResource, code int16) kmsg.AlterConfigsResponseResource {
			rr := kmsg.NewAlterConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode = res.ResourceType, res.ResourceName, code
			return rr
		})
		return nil, func(resp kmsg.Response) {
			a := resp.(*kmsg.AlterConfigsResponse)
			a.Resources = append(a.Resources, denied...)
		}
	case *kmsg.IncrementalAlterConfigsRequest:
		denied := takeOut(&r.Resources, func(res kmsg.IncrementalAlterConfigsRequestResource) int16 {
			return b.configAuthorization(h, opAlterConfigs, res.ResourceType, res.ResourceName)
		}, func(res kmsg.IncrementalAlterConfigsRequestResource, code int16) kmsg.IncrementalAlterConfigsResponseResource {
			rr := kmsg.NewIncrementalAlterConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode = res.ResourceType, res.ResourceName, code
			return rr
		})
		return nil, func(resp kmsg.Response) {
			a := resp.(*kmsg.IncrementalAlterConfigsResponse)
			a.Resources = append(a.Resources, denied...)
		}
	case *kmsg.InitProducerIDRequest:
		resp := r.ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ProducerID, resp.ProducerEpoch = -1, -1
		switch {
		case r.TransactionalID != nil && !b.may(h, opWrite, resTxnID, *r.TransactionalID):
			resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
			return resp, nil
		case r.TransactionalID == nil && !b.mayCluster(h, opIdempotentWrite) && !b.mayAny(h, opWrite, resTopic):
			resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
			return resp, nil
		}
	case *kmsg.DescribeUserSCRAMCredentialsRequest:
		if !b.mayCluster(h, opDescribe) {
			resp := r.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
			resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
			return resp, nil
		}
	case *kmsg.AlterUserSCRAMCredentialsRequest:
		if !b.mayCluster(h, opAlter) {
			resp := r.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
			seen := map[string]bool{}
			add := func(user string) {
				if !seen[user] {
					seen[user] = true
					resp.Results = append(resp.Results, kmsg.AlterUserSCRAMCredentialsResponseResult{User: user,
						ErrorCode: kerr.ClusterAuthorizationFailed.Code})
				}
			}
			for _, d := range r.Deletions {
				add(d.Name)
			}
			for _, u := range r.Upsertions {
				add(u.Name)
			}
			return resp, nil
		}
	case *kmsg.DescribeClientQuotasRequest:
		if !b.mayCluster(h, opDescribeConfigs) {
			resp := r.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
			resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
			return resp, nil
		}
	case *kmsg.AlterClientQuotasRequest:
		if !b.mayCluster(h, opAlterConfigs) {
			resp := r.ResponseKind().(*kmsg.AlterClientQuotasResponse)
			for _, e := range r.Entries {
				res := kmsg.AlterClientQuotasResponseEntry{ErrorCode: kerr.ClusterAuthorizationFailed.Code}
				for _, c := range e.Entity {
					res.Entity = append(res.Entity, kmsg.AlterClientQuotasResponseEntryEntity{Type: c.Type, Name: c.Name})
				}
				resp.Entries = append(resp.Entries, res)
			}
			return resp, nil
		}
	case *kmsg.CreateACLsRequest, *kmsg.DeleteACLsRequest, *kmsg.DescribeACLsRequest:
		return b.authorizeACLAdmin(h, req), nil
	default:
		return b.authorizeGroupsAndTxns(h, req)
	}
	return nil, nil
}

// configAuthorization is the error for a config resource the principal
// may not describe or alter (the cluster's for a broker's configs), 0 if
// it may.
func (b *Broker) configAuthorization(h header, op kmsg.ACLOperation, rt kmsg.ConfigResourceType, name string) int16 {
	switch rt {
	case kmsg.ConfigResourceTypeTopic:
		if !b.may(h, op, resTopic, name) {
			return kerr.TopicAuthorizationFailed.Code
		}
	default: // broker and broker-logger configs: the cluster's
		if !b.mayCluster(h, op) {
			return kerr.ClusterAuthorizationFailed.Code
		}
	}
	return 0
}

// authorizeMetadata: a topic the principal may not describe is
// TOPIC_AUTHORIZATION_FAILED when asked for by name, and left out of a
// listing of every topic; a topic that would be auto-created needs Create
// on the cluster or the topic, else TOPIC_AUTHORIZATION_FAILED.
func (b *Broker) authorizeMetadata(h header, r *kmsg.MetadataRequest) func(kmsg.Response) {
	all := r.Topics == nil || (r.GetVersion() == 0 && len(r.Topics) == 0)
	if all {
		return func(resp kmsg.Response) {
			m := resp.(*kmsg.MetadataResponse)
			m.Topics = slices.DeleteFunc(m.Topics, func(t kmsg.MetadataResponseTopic) bool {
				return t.Topic == nil || !b.may(h, opDescribe, resTopic, *t.Topic)
			})
		}
	}
	createCluster := b.mayCluster(h, opCreate)
	denied := takeOut(&r.Topics, func(t kmsg.MetadataRequestTopic) int16 {
		if t.Topic == nil {
			return 0
		}
		name := *t.Topic
		ok := b.may(h, opDescribe, resTopic, name)
		if ok && len(b.partitionsOf(name)) == 0 && !internalTopics[name] && (r.GetVersion() < 4 || r.AllowAutoTopicCreation) {
			ok = createCluster || b.may(h, opCreate, resTopic, name)
		}
		if ok {
			return 0
		}
		return topicRefused
	}, func(t kmsg.MetadataRequestTopic, code int16) kmsg.MetadataResponseTopic {
		rt := kmsg.NewMetadataResponseTopic()
		rt.Topic, rt.ErrorCode, rt.IsInternal = t.Topic, code, internalTopics[*t.Topic]
		return rt
	})
	return func(resp kmsg.Response) {
		m := resp.(*kmsg.MetadataResponse)
		m.Topics = append(m.Topics, denied...)
	}
}

// authorizeProduce: a transactional produce needs Write on its
// transactional id (else every partition is
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED), each topic Write.
func (b *Broker) authorizeProduce(h header, r *kmsg.ProduceRequest) func(kmsg.Response) {
	txnOK := b.mayTxn(h, r.TransactionID)
	denied := takeOut(&r.Topics, func(t kmsg.ProduceRequestTopic) int16 {
		if !txnOK {
			return kerr.TransactionalIDAuthorizationFailed.Code
		}
		return b.refusal(h, opWrite, resTopic, t.Topic, topicRefused)
	}, func(t kmsg.ProduceRequestTopic, code int16) kmsg.ProduceResponseTopic {
		rt := kmsg.ProduceResponseTopic{Topic: t.Topic}
		for _, p := range t.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition, rp.ErrorCode, rp.BaseOffset = p.Partition, code, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		return rt
	})
	return func(resp kmsg.Response) {
		if resp != nil { // acks=0 has none
			resp.(*kmsg.ProduceResponse).Topics = append(resp.(*kmsg.ProduceResponse).Topics, denied...)
		}
	}
}

// authorizeFetch: each topic needs Read; a fetch with refusals is
// answered at once (no long poll), as Kafka answers a fetch with errors.
func (b *Broker) authorizeFetch(h header, r *kmsg.FetchRequest) func(kmsg.Response) {
	denied := takeOut(&r.Topics, func(t kmsg.FetchRequestTopic) int16 {
		return b.refusal(h, opRead, resTopic, t.Topic, topicRefused)
	}, func(t kmsg.FetchRequestTopic, code int16) kmsg.FetchResponseTopic {
		rt := kmsg.FetchResponseTopic{Topic: t.Topic, TopicID: t.TopicID}
		for _, p := range t.Partitions {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		return rt
	})
	if len(denied) > 0 {
		r.MaxWaitMillis = 0
	}
	return func(resp kmsg.Response) {
		fr := resp.(*fetchReply)
		fr.Topics = append(fr.Topics, denied...)
	}
}

// authorizeACLAdmin: CreateAcls and DeleteAcls need Alter on the cluster,
// DescribeAcls Describe; nil if allowed.
func (b *Broker) authorizeACLAdmin(h header, req kmsg.Request) kmsg.Response {
	code := kerr.ClusterAuthorizationFailed.Code
	msg := kmsg.StringPtr("the principal may not manage ACLs (Alter on the cluster) or describe them (Describe on the cluster)")
	switch r := req.(type) {
	case *kmsg.CreateACLsRequest:
		if b.mayCluster(h, opAlter) {
			return nil
		}
		resp := r.ResponseKind().(*kmsg.CreateACLsResponse)
		for range r.Creations {
			resp.Results = append(resp.Results, kmsg.CreateACLsResponseResult{ErrorCode: code, ErrorMessage: msg})
		}
		return resp
	case *kmsg.DeleteACLsRequest:
		if b.mayCluster(h, opAlter) {
			return nil
		}
		resp := r.ResponseKind().(*kmsg.DeleteACLsResponse)
		for range r.Filters {
			resp.Results = append(resp.Results, kmsg.DeleteACLsResponseResult{ErrorCode: code, ErrorMessage: msg})
		}
		return resp
	case *kmsg.DescribeACLsRequest:
		if b.mayCluster(h, opDescribe) {
			return nil
		}
		resp := r.ResponseKind().(*kmsg.DescribeACLsResponse)
		resp.ErrorCode, resp.ErrorMessage = code, msg
		return resp
	}
	return nil
}

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
func (b *Broker) authorizedOps(h header, rt kmsg.ACLResourceType, name string) int32 {
	ops := map[kmsg.ACLResourceType][]kmsg.ACLOperation{resTopic: topicOps, resCluster: clusterOps, resGroup: groupOps}[rt]
	var v int32
	for _, op := range ops {
		if b.may(h, op, rt, name) {
			v |= 1 << op
		}
	}
	return v
}

// fillAuthorizedOps sets the AuthorizedOperations Metadata and
// DescribeGroups carry: computed when asked for, notRequested otherwise.
func (b *Broker) fillAuthorizedOps(h header, req kmsg.Request, resp kmsg.Response) {
	switch r := req.(type) {
	case *kmsg.MetadataRequest:
		m := resp.(*kmsg.MetadataResponse)
		m.AuthorizedOperations = notRequested
		if r.IncludeClusterAuthorizedOperations {
			m.AuthorizedOperations = b.authorizedOps(h, resCluster, auth.ClusterName)
		}
		for i := range m.Topics {
			m.Topics[i].AuthorizedOperations = notRequested
			if r.IncludeTopicAuthorizedOperations && m.Topics[i].Topic != nil && m.Topics[i].ErrorCode == 0 {
				m.Topics[i].AuthorizedOperations = b.authorizedOps(h, resTopic, *m.Topics[i].Topic)
			}
		}
	case *kmsg.DescribeGroupsRequest:
		d := resp.(*kmsg.DescribeGroupsResponse)
		for i := range d.Groups {
			d.Groups[i].AuthorizedOperations = notRequested
			if r.IncludeAuthorizedOperations && d.Groups[i].ErrorCode == 0 {
				d.Groups[i].AuthorizedOperations = b.authorizedOps(h, resGroup, d.Groups[i].Group)
			}
		}
	}
}
