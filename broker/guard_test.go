package broker

import (
	"maps"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/broker/auth"
	"github.com/seglog/seglog/checkpoint"
)

// The guard alone: the rules read only the authorizer and the two topic
// lookups they are given. Metadata asks Create only of a topic that does
// not exist — wherever it exists: a cluster's topic with no replica on
// this broker is one (the rule read the data directory, and refused a
// describer of such a topic when auto-creation was asked) — and a
// topic asked by id is answered UNKNOWN_TOPIC_ID to a principal who may
// not describe it, so that its existence does not show. DeleteTopics by
// id is checked on the name the id resolves to.
func TestGuardRules(t *testing.T) {
	acls, err := auth.OpenACLs(nil, filepath.Join(t.TempDir(), "acls.json"))
	require.NoError(t, err)
	allow := func(op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) auth.ACL {
		return auth.ACL{ResourceType: rt, Name: name, Pattern: kmsg.ACLResourcePatternTypeLiteral, Principal: "User:alice",
			Host: "*", Operation: op, Permission: kmsg.ACLPermissionTypeAllow}
	}
	errs, err := acls.Create([]auth.ACL{allow(opDescribe, resTopic, "remote"), allow(opDescribe, resTopic, "gone"),
		allow(opDelete, resTopic, "remote")})
	require.NoError(t, err)
	for _, e := range errs {
		require.NoError(t, e)
	}
	g := &guard{authz: &auth.Authorizer{ACLs: acls}, topics: topicView{someTopics{"remote": {1}, "secret": {2}}}}
	h := header{host: "/127.0.0.1", sess: &session{principal: "User:alice"}}

	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	req.AllowAutoTopicCreation = true
	for _, name := range []string{"remote", "gone", "secret"} {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
	}
	byID := kmsg.NewMetadataRequestTopic()
	byID.TopicID = [16]byte{2}
	req.Topics = append(req.Topics, byID)
	refused, after := g.authorizeMetadata(h, req)
	require.Nil(t, refused)
	var left []string
	for _, rt := range req.Topics {
		left = append(left, *rt.Topic)
	}
	require.Equal(t, []string{"remote"}, left, "remote exists (Describe is enough); gone would be created (Create needed); secret is not describable")
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	after(resp)
	codes := map[string]int16{}
	for _, rt := range resp.Topics {
		name := "by id"
		if rt.Topic != nil {
			name = *rt.Topic
		}
		codes[name] = rt.ErrorCode
	}
	require.Equal(t, map[string]int16{"gone": kerr.TopicAuthorizationFailed.Code, "secret": kerr.TopicAuthorizationFailed.Code,
		"by id": kerr.UnknownTopicID.Code}, codes)

	del := kmsg.NewPtrDeleteTopicsRequest()
	del.SetVersion(6)
	for _, id := range [][16]byte{{1}, {2}, {3}} {
		dt := kmsg.NewDeleteTopicsRequestTopic()
		dt.TopicID = id
		del.Topics = append(del.Topics, dt)
	}
	refused, _ = g.authorizeDeleteTopics(h, del)
	require.Nil(t, refused)
	var kept [][16]byte
	for _, dt := range del.Topics {
		kept = append(kept, dt.TopicID)
	}
	require.Equal(t, [][16]byte{{1}, {3}}, kept, "remote may be deleted; secret may not; an unknown id is the handler's UNKNOWN_TOPIC_ID")
}

// someTopics are topics by name, with their ids, one partition each (a
// group.Topics).
type someTopics map[string]checkpoint.TopicID

func (st someTopics) TopicPartitions(name string) (checkpoint.TopicID, int32, bool) {
	id, ok := st[name]
	return id, 1, ok
}

func (st someTopics) TopicsVersion() uint64 { return 0 }

func (st someTopics) TopicNames() []string { return slices.Sorted(maps.Keys(st)) }

func (st someTopics) TopicByID(id checkpoint.TopicID) (string, bool) {
	for name, tid := range st {
		if tid == id {
			return name, true
		}
	}
	return "", false
}
