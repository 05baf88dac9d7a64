package broker

import (
	"bytes"
	"context"
	"encoding/binary"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/broker/auth"
	"github.com/seglog/seglog/coordinator/group"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/tablet"
)

// frameOf encodes a request as a client sends it, without the size.
func frameOf(req kmsg.Request, version int16) []byte {
	req.SetVersion(version)
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("fuzz"))
	out := f.AppendRequest(nil, req, 7)
	return out[4:]
}

// FuzzRequest feeds arbitrary frames to the request path — the header,
// kmsg's decoding, every handler — on a live data directory: it must never
// panic, whatever a client sends.
func FuzzRequest(f *testing.F) {
	batch := func() []byte {
		bl := record.NewBuilder(record.None)
		_ = bl.Append(record.Record{Timestamp: 1, Value: []byte("v")})
		out, _ := bl.Build()
		return out.Bytes()
	}()
	meta := kmsg.NewPtrMetadataRequest()
	meta.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("fz")}}
	meta.AllowAutoTopicCreation = true
	produce := kmsg.NewPtrProduceRequest()
	produce.Acks = -1
	produce.Topics = []kmsg.ProduceRequestTopic{{Topic: "fz", Partitions: []kmsg.ProduceRequestTopicPartition{{Records: batch}}}}
	fetch := kmsg.NewPtrFetchRequest()
	fetch.MaxBytes = 1 << 20
	fetch.Topics = []kmsg.FetchRequestTopic{{Topic: "fz", Partitions: []kmsg.FetchRequestTopicPartition{{PartitionMaxBytes: 1 << 20}}}}
	list := kmsg.NewPtrListOffsetsRequest()
	list.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: "fz", Partitions: []kmsg.ListOffsetsRequestTopicPartition{{Timestamp: -1}}}}
	create := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "fzc", 2, 1
	ct.Configs = []kmsg.CreateTopicsRequestTopicConfig{{Name: "retention.ms", Value: kmsg.StringPtr("1000")}}
	create.Topics = append(create.Topics, ct)
	describe := kmsg.NewPtrDescribeConfigsRequest()
	describe.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "fz"}}
	alter := kmsg.NewPtrIncrementalAlterConfigsRequest()
	alter.Resources = []kmsg.IncrementalAlterConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "fz",
		Configs: []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "retention.bytes", Value: kmsg.StringPtr("100000")}}}}
	grow := kmsg.NewPtrCreatePartitionsRequest()
	grow.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: "fzc", Count: 3}}
	deleteRecs := kmsg.NewPtrDeleteRecordsRequest()
	deleteRecs.Topics = []kmsg.DeleteRecordsRequestTopic{{Topic: "fz", Partitions: []kmsg.DeleteRecordsRequestTopicPartition{{Offset: 1}}}}
	epochs := kmsg.NewPtrOffsetForLeaderEpochRequest()
	epochs.Topics = []kmsg.OffsetForLeaderEpochRequestTopic{{Topic: "fz", Partitions: []kmsg.OffsetForLeaderEpochRequestTopicPartition{{CurrentLeaderEpoch: -1}}}}
	deleteTopics := kmsg.NewPtrDeleteTopicsRequest()
	deleteTopics.TopicNames = []string{"fzc"}
	find := kmsg.NewPtrFindCoordinatorRequest()
	find.CoordinatorKey, find.CoordinatorKeys = "fg", []string{"fg"}
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.ProtocolType, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = "fg", "consumer", 6000, 6000
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 0, 0, 0, 0, 1, 0, 2, 'f', 'z', 0, 0, 0, 0}}}
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Group, sync.MemberID, sync.Generation = "fg", "m", 1
	sync.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: "m", MemberAssignment: []byte{0, 0}}}
	heartbeat := kmsg.NewPtrHeartbeatRequest()
	heartbeat.Group, heartbeat.MemberID = "fg", "m"
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Group, leave.MemberID = "fg", "m"
	leave.Members = []kmsg.LeaveGroupRequestMember{{MemberID: "m"}}
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group = "fg"
	commit.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "fz", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Offset: 1, Metadata: kmsg.StringPtr("m")}}}}
	offsetFetch := kmsg.NewPtrOffsetFetchRequest()
	offsetFetch.Group = "fg"
	offsetDelete := kmsg.NewPtrOffsetDeleteRequest()
	offsetDelete.Group = "fg"
	offsetDelete.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "fz", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
	describeGroups := kmsg.NewPtrDescribeGroupsRequest()
	describeGroups.Groups = []string{"fg", ""}
	deleteGroups := kmsg.NewPtrDeleteGroupsRequest()
	deleteGroups.Groups = []string{"fg"}
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism = auth.SHA256
	sauth := kmsg.NewPtrSASLAuthenticateRequest()
	sauth.SASLAuthBytes = []byte("n,,n=fz,r=nonce")
	createACLs := kmsg.NewPtrCreateACLsRequest()
	createACLs.Creations = []kmsg.CreateACLsRequestCreation{{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: "fz",
		ResourcePatternType: kmsg.ACLResourcePatternTypePrefixed, Principal: "User:fz", Host: "*",
		Operation: kmsg.ACLOperationAll, PermissionType: kmsg.ACLPermissionTypeAllow}}
	describeACLs := kmsg.NewPtrDescribeACLsRequest()
	describeACLs.ResourceType, describeACLs.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeMatch
	describeACLs.Operation, describeACLs.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	deleteACLs := kmsg.NewPtrDeleteACLsRequest()
	deleteACLs.Filters = []kmsg.DeleteACLsRequestFilter{{ResourceType: kmsg.ACLResourceTypeTopic, ResourcePatternType: kmsg.ACLResourcePatternTypeAny,
		Operation: kmsg.ACLOperationAny, PermissionType: kmsg.ACLPermissionTypeDeny}}
	alterSCRAM := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	alterSCRAM.Upsertions = []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{{Name: "fz", Mechanism: 1, Iterations: 4096,
		Salt: []byte("salt"), SaltedPassword: make([]byte, 32)}}
	alterQuotas := kmsg.NewPtrAlterClientQuotasRequest()
	alterQuotas.Entries = []kmsg.AlterClientQuotasRequestEntry{{Entity: []kmsg.AlterClientQuotasRequestEntryEntity{{Type: "user"}},
		Ops: []kmsg.AlterClientQuotasRequestEntryOp{{Key: "producer_byte_rate", Value: 1e9}}}}
	describeQuotas := kmsg.NewPtrDescribeClientQuotasRequest()
	describeQuotas.Components = []kmsg.DescribeClientQuotasRequestComponent{{EntityType: "user", MatchType: 2}}
	for _, seed := range [][]byte{
		frameOf(hs, 1), frameOf(hs, 0), frameOf(sauth, 2), frameOf(sauth, 0), frameOf(createACLs, 3), frameOf(createACLs, 0),
		frameOf(describeACLs, 3), frameOf(deleteACLs, 2), frameOf(alterSCRAM, 0), frameOf(kmsg.NewPtrDescribeUserSCRAMCredentialsRequest(), 0),
		frameOf(alterQuotas, 1), frameOf(describeQuotas, 0),
		frameOf(create, 7), frameOf(create, 3), frameOf(describe, 4), frameOf(describe, 0), frameOf(alter, 1), frameOf(alter, 0),
		frameOf(grow, 3), frameOf(deleteRecs, 2), frameOf(epochs, 4), frameOf(deleteTopics, 6), frameOf(deleteTopics, 3),
		frameOf(kmsg.NewPtrApiVersionsRequest(), 4), frameOf(kmsg.NewPtrApiVersionsRequest(), 3), frameOf(kmsg.NewPtrApiVersionsRequest(), 0),
		frameOf(meta, 13), frameOf(meta, 12), frameOf(meta, 1), frameOf(produce, 13), frameOf(produce, 9), frameOf(produce, 3), frameOf(fetch, 17), frameOf(fetch, 12),
		frameOf(fetch, 4), frameOf(list, 10), frameOf(list, 7), frameOf(kmsg.NewPtrInitProducerIDRequest(), 4),
		frameOf(find, 6), frameOf(find, 4), frameOf(find, 1), frameOf(join, 9), frameOf(join, 7), frameOf(join, 3), frameOf(join, 0), frameOf(sync, 5), frameOf(sync, 0),
		frameOf(heartbeat, 4), frameOf(leave, 5), frameOf(leave, 4), frameOf(leave, 0), frameOf(commit, 9), frameOf(commit, 8), frameOf(commit, 1), frameOf(commit, 0),
		frameOf(offsetFetch, 9), frameOf(offsetFetch, 7), frameOf(offsetFetch, 1), frameOf(offsetDelete, 0), frameOf(describeGroups, 6), frameOf(describeGroups, 5),
		frameOf(kmsg.NewPtrListGroupsRequest(), 5), frameOf(kmsg.NewPtrListGroupsRequest(), 4), frameOf(deleteGroups, 2), {0, 0, 0}, nil,
	} {
		f.Add(seed)
	}
	dir := filepath.Join(f.TempDir(), "data")
	cfg := tablet.DefaultConfig()
	cfg.SegmentIndexBytes = 4096 // fuzzed produces auto-create many topics: small indexes
	m, err := tablet.OpenManager(nil, dir, tablet.ManagerOptions{Config: &cfg, Tablet: tablet.Options{Logger: quiet}})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { m.Close() })
	br, err := compose(m, Options{Logger: quiet, AdvertisedHost: "127.0.0.1", AdvertisedPort: 9092, MaxFetchWait: time.Millisecond,
		MaxTopicPartitions: 4, // fuzzed creates make few directories
		Groups:             group.Options{NoInitialDelay: true, Partitions: 2},
		// The authorizer on, open where no ACL names a resource: fuzzed
		// ACLs close and open the APIs' checks.
		// Sessions that expire: a fuzzed handshake re-authenticates.
		Authorizer: true, AllowEveryoneIfNoACL: true, SASLMechanisms: auth.SASLMechanisms, FailedAuthDelay: -1,
		ReauthInterval: time.Hour, MaxFailedAuthRate: -1})
	if err != nil {
		f.Fatal(err)
	}
	br.grp.wait = 20 * time.Millisecond
	f.Fuzz(func(t *testing.T, frame []byte) {
		h, req, body, err := parseHeader(frame)
		if err != nil {
			return // the connection would close: fine
		}
		// An authenticated SASL connection's session: a fuzzed handshake
		// starts a new exchange on it.
		h.sess = &session{sasl: true, authed: true, principal: "User:fz", mech: auth.SHA256}
		resp, err := br.handle(context.Background(), h, req, body)
		if err != nil {
			return
		}
		// The answer encodes, and is written as a connection writes it.
		var out bytes.Buffer
		n, err := writeReply(br.metrics, &out, h, resp, len(frame))
		if err != nil {
			t.Fatalf("writing the answer: %v", err)
		}
		if n != out.Len() || n > 0 && int(binary.BigEndian.Uint32(out.Bytes()))+4 != n {
			t.Fatalf("the frame says %d bytes, %d written", n, out.Len())
		}
	})
}
