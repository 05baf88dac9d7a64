package broker

import (
	"context"
	"crypto/tls"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/seglog/seglog/broker/auth"
	"github.com/seglog/seglog/checkpoint"
)

// saslClient is a franz-go client logged in as user over SASL_PLAINTEXT.
func saslClient(t *testing.T, sb *secureBroker, user string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(sb.addrs[ProtocolSASLPlaintext]),
		kgo.SASL(scram.Auth{User: user, Pass: user + "-secret"}.AsSha512Mechanism()), kgo.RequestRetries(1)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl
}

// TestACLs: with the authorizer on, a principal without ACLs gets the
// authorization errors of every API family and sees no topic in Metadata;
// the ACLs a super user creates (a prefixed topic pattern, a group) let it
// produce, consume in its group and see only its topics; a DENY wins over
// an ALLOW; deleting them closes the doors again; the ACLs are durable.
func TestACLs(t *testing.T) {
	sb := serveSecure(t, Options{Authorizer: true, SuperUsers: []string{"User:admin"}}, TLSOptions{},
		map[string]string{"admin": "admin-secret", "bob": "bob-secret"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := saslClient(t, sb, "admin")
	adm := kadm.NewClient(admin)
	_, err := adm.CreateTopic(ctx, 2, 1, nil, "bob-topic")
	require.NoError(t, err)
	_, err = adm.CreateTopic(ctx, 1, 1, nil, "secret-topic")
	require.NoError(t, err)
	require.NoError(t, admin.ProduceSync(ctx, &kgo.Record{Topic: "secret-topic", Value: []byte("top secret")}).FirstErr())
	listed, err := adm.ListTopics(ctx, "secret-topic")
	require.NoError(t, err)
	secretID := [16]byte(listed["secret-topic"].ID) // Produce and Fetch v13+ name topics by id

	bob := saslClient(t, sb, "bob")
	bobAdm := kadm.NewClient(bob)
	refused := func(what string) {
		t.Helper()
		require.Empty(t, topicNames(t, ctx, bob), "%s: bob sees no topic", what)
		mreq := kmsg.NewPtrMetadataRequest()
		mreq.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("secret-topic")}, {Topic: kmsg.StringPtr("new-topic")}}
		mreq.AllowAutoTopicCreation = true
		mresp, err := mreq.RequestWith(ctx, bob)
		require.NoError(t, err)
		require.Len(t, mresp.Topics, 2)
		for _, topic := range mresp.Topics {
			require.Equal(t, kerr.TopicAuthorizationFailed.Code, topic.ErrorCode, "%s: %s", what, *topic.Topic)
		}

		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = -1, 5000
		req.Topics = []kmsg.ProduceRequestTopic{{Topic: "secret-topic", TopicID: secretID, Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: []byte{}}}}}
		presp, err := req.RequestWith(ctx, bob)
		require.NoError(t, err)
		require.Equal(t, kerr.TopicAuthorizationFailed.Code, presp.Topics[0].Partitions[0].ErrorCode, what)

		freq := kmsg.NewPtrFetchRequest()
		freq.MaxWaitMillis, freq.MaxBytes, freq.SessionEpoch = 0, 1<<20, -1
		freq.Topics = []kmsg.FetchRequestTopic{{Topic: "secret-topic", TopicID: secretID, Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 0, PartitionMaxBytes: 1 << 20}}}}
		fresp, err := freq.RequestWith(ctx, bob)
		require.NoError(t, err)
		require.Equal(t, kerr.TopicAuthorizationFailed.Code, fresp.Topics[0].Partitions[0].ErrorCode, what)
		require.NotNil(t, fresp.Topics[0].Partitions[0].RecordBatches, "an empty record set, not a null one (librdkafka cannot parse that)")

		offs, err := bobAdm.FetchOffsets(ctx, "bob-group")
		require.ErrorIs(t, err, kerr.GroupAuthorizationFailed, what)
		_ = offs
		_, err = bobAdm.DescribeTopicConfigs(ctx, "secret-topic")
		require.ErrorIs(t, err, kerr.TopicAuthorizationFailed, what)
		dreq := kmsg.NewPtrDescribeACLsRequest()
		dreq.ResourceType, dreq.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
		dreq.Operation, dreq.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
		dresp, err := dreq.RequestWith(ctx, bob)
		require.NoError(t, err)
		require.Equal(t, kerr.ClusterAuthorizationFailed.Code, dresp.ErrorCode, what)

		ireq := kmsg.NewPtrInitProducerIDRequest()
		ireq.TransactionalID, ireq.TransactionTimeoutMillis = kmsg.StringPtr("bob-txn"), 10000
		iresp, err := ireq.RequestWith(ctx, bob) // franz-go turns this one's error code into an error
		if err == nil {
			err = kerr.ErrorForCode(iresp.ErrorCode)
		}
		require.ErrorIs(t, err, kerr.TransactionalIDAuthorizationFailed, what)
	}
	refused("no ACLs")
	jreq := kmsg.NewPtrJoinGroupRequest()
	jreq.Group, jreq.ProtocolType, jreq.SessionTimeoutMillis, jreq.RebalanceTimeoutMillis = "bob-group", "consumer", 10000, 10000
	jreq.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{}}}
	jresp, err := jreq.RequestWith(ctx, bob)
	if err == nil {
		err = kerr.ErrorForCode(jresp.ErrorCode)
	}
	require.ErrorIs(t, err, kerr.GroupAuthorizationFailed)

	acls := kadm.NewACLs().Allow("User:bob").Topics("bob-").ResourcePatternType(kadm.ACLPatternPrefixed).
		Operations(kadm.OpRead, kadm.OpWrite)
	created, err := adm.CreateACLs(ctx, acls)
	require.NoError(t, err)
	for _, c := range created {
		require.NoError(t, c.Err)
	}
	created, err = adm.CreateACLs(ctx, kadm.NewACLs().Allow("User:bob").Groups("bob-group").Operations(kadm.OpRead))
	require.NoError(t, err)
	require.NoError(t, created[0].Err)

	require.Equal(t, []string{"bob-topic"}, topicNames(t, ctx, bob), "Describe is implied by Read and Write")
	mreq := kmsg.NewPtrMetadataRequest()
	mreq.IncludeTopicAuthorizedOperations = true
	mresp, err := mreq.RequestWith(ctx, bob)
	require.NoError(t, err)
	require.Len(t, mresp.Topics, 1)
	require.Equal(t, int32(1<<kmsg.ACLOperationRead|1<<kmsg.ACLOperationWrite|1<<kmsg.ACLOperationDescribe),
		mresp.Topics[0].AuthorizedOperations, "Kafka's bitfield of what bob may do")
	mresp, err = kmsg.NewPtrMetadataRequest().RequestWith(ctx, bob)
	require.NoError(t, err)
	require.Equal(t, int32(math.MinInt32), mresp.Topics[0].AuthorizedOperations, "not asked for")
	require.NoError(t, bob.ProduceSync(ctx, &kgo.Record{Topic: "bob-topic", Value: []byte("bob's")}).FirstErr())
	consumer := saslClient(t, sb, "bob", kgo.ConsumerGroup("bob-group"), kgo.ConsumeTopics("bob-topic"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	fs := consumer.PollFetches(ctx)
	require.NoError(t, ctx.Err())
	require.NoError(t, fs.Err())
	require.Equal(t, []string{"bob's"}, recordValues(fs.Records()))
	require.NoError(t, consumer.CommitUncommittedOffsets(ctx))
	require.ErrorIs(t, bob.ProduceSync(ctx, &kgo.Record{Topic: "secret-topic", Value: []byte("x")}).FirstErr(),
		kerr.TopicAuthorizationFailed, "only bob- topics")

	// A DENY wins over the prefixed ALLOW.
	created, err = adm.CreateACLs(ctx, kadm.NewACLs().Deny("User:bob").Topics("bob-topic").Operations(kadm.OpWrite))
	require.NoError(t, err)
	require.NoError(t, created[0].Err)
	require.ErrorIs(t, bob.ProduceSync(ctx, &kgo.Record{Topic: "bob-topic", Value: []byte("denied")}).FirstErr(),
		kerr.TopicAuthorizationFailed)

	described, err := adm.DescribeACLs(ctx, kadm.NewACLs().AnyResource().Allow("User:bob").Deny("User:bob").AllowHosts().DenyHosts().Operations(kadm.OpAny).
		ResourcePatternType(kadm.ACLPatternAny))
	require.NoError(t, err)
	n := 0
	for _, d := range described {
		require.NoError(t, d.Err)
		n += len(d.Described)
	}
	require.Equal(t, 4, n, "three ALLOWs and a DENY")
	stored, err := auth.OpenACLs(nil, filepath.Join(sb.b.m.Dir(), auth.ACLFile))
	require.NoError(t, err)
	require.Len(t, stored.List(auth.Filter{ResourceType: kmsg.ACLResourceTypeAny, Pattern: kmsg.ACLResourcePatternTypeAny,
		Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}), 4, "the ACLs are on disk")

	deleted, err := adm.DeleteACLs(ctx, kadm.NewACLs().AnyResource().Allow("User:bob").Deny("User:bob").AllowHosts().DenyHosts().Operations(kadm.OpAny).
		ResourcePatternType(kadm.ACLPatternAny))
	require.NoError(t, err)
	n = 0
	for _, d := range deleted {
		require.NoError(t, d.Err)
		n += len(d.Deleted)
	}
	require.Equal(t, 4, n)
	refused("the ACLs deleted")

	// CREATE alone: the topic is made, its configs are not shown.
	created, err = adm.CreateACLs(ctx, kadm.NewACLs().Allow("User:bob").Topics("bob-new").Operations(kadm.OpCreate))
	require.NoError(t, err)
	require.NoError(t, created[0].Err)
	ctreq := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = "bob-new", 1, 1
	ctreq.Topics = []kmsg.CreateTopicsRequestTopic{ct}
	ctresp, err := ctreq.RequestWith(ctx, bob)
	require.NoError(t, err)
	require.Zero(t, ctresp.Topics[0].ErrorCode)
	require.Nil(t, ctresp.Topics[0].Configs)
	require.Equal(t, kerr.TopicAuthorizationFailed.Code, ctresp.Topics[0].ConfigErrorCode, "no DESCRIBE_CONFIGS")

	// An invalid ACL is refused, with Kafka's reason.
	req := kmsg.NewPtrCreateACLsRequest()
	req.Creations = []kmsg.CreateACLsRequestCreation{{ResourceType: kmsg.ACLResourceTypeCluster, ResourceName: "other",
		ResourcePatternType: kmsg.ACLResourcePatternTypeLiteral, Principal: "User:bob", Host: "*",
		Operation: kmsg.ACLOperationAlter, PermissionType: kmsg.ACLPermissionTypeAllow}}
	cresp, err := req.RequestWith(ctx, admin)
	require.NoError(t, err)
	require.Equal(t, kerr.InvalidRequest.Code, cresp.Results[0].ErrorCode)
	require.Contains(t, *cresp.Results[0].ErrorMessage, "kafka-cluster")
}

// TestACLsNeedAnAuthorizer: without authorizer.class.name the ACL APIs
// answer SECURITY_DISABLED, as Kafka's do.
func TestACLsNeedAnAuthorizer(t *testing.T) {
	_, _, addr := testBroker(t, Options{})
	adm, _, ctx := adminClient(t, addr)
	res, err := adm.CreateACLs(ctx, kadm.NewACLs().Allow("User:bob").Topics("t").Operations(kadm.OpRead))
	require.NoError(t, err)
	require.ErrorIs(t, res[0].Err, kerr.SecurityDisabled)
}

// TestACLsByCertificate: on an SSL listener the principal is the client
// certificate's subject (User:CN=...); its ACLs let it in, another
// certificate's subject is refused, and allow.everyone.if.no.acl.found
// opens only resources no ACL names.
func TestACLsByCertificate(t *testing.T) {
	sb := serveSecure(t, Options{Authorizer: true, AllowEveryoneIfNoACL: true}, TLSOptions{ClientAuth: "required"}, nil)
	_, err := sb.b.acls.Create([]auth.ACL{{ResourceType: kmsg.ACLResourceTypeTopic, Name: "certs", Pattern: kmsg.ACLResourcePatternTypeLiteral,
		Principal: "User:CN=trusted", Host: "*", Operation: kmsg.ACLOperationAll, Permission: kmsg.ACLPermissionTypeAllow}})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := func(cn string) *kgo.Client {
		cert, key := sb.pki.Issue(t, cn, 30, cn, false)
		props, err := tlsClientConfig(sb, cert, key)
		require.NoError(t, err)
		cl, err := kgo.NewClient(kgo.SeedBrokers(sb.addrs[ProtocolSSL]), kgo.DialTLSConfig(props), kgo.RequestRetries(1),
			kgo.AllowAutoTopicCreation())
		require.NoError(t, err)
		t.Cleanup(cl.Close)
		return cl
	}
	trusted, other := client("trusted"), client("other")
	require.NoError(t, trusted.ProduceSync(ctx, &kgo.Record{Topic: "certs", Value: []byte("by certificate")}).FirstErr())
	require.ErrorIs(t, other.ProduceSync(ctx, &kgo.Record{Topic: "certs", Value: []byte("x")}).FirstErr(), kerr.TopicAuthorizationFailed)
	require.NoError(t, other.ProduceSync(ctx, &kgo.Record{Topic: "open", Value: []byte("no ACL names it")}).FirstErr())
}

// topicNames are the topics Metadata lists to the client (every topic
// asked for).
func topicNames(t *testing.T, ctx context.Context, cl *kgo.Client) []string {
	t.Helper()
	md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	require.NoError(t, err)
	var names []string
	for _, topic := range md.Topics {
		require.Zero(t, topic.ErrorCode)
		names = append(names, *topic.Topic)
	}
	return names
}

// tlsClientConfig trusts the broker's CA and presents a client
// certificate.
func tlsClientConfig(sb *secureBroker, cert, key string) (*tls.Config, error) {
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		return nil, err
	}
	return &tls.Config{RootCAs: sb.pki.Pool, Certificates: []tls.Certificate{pair}}, nil
}

// TestPrincipalMapping: ssl.principal.mapping.rules turn a certificate's
// subject into the user its ACLs name; a subject no rule maps is refused
// at the connection.
func TestPrincipalMapping(t *testing.T) {
	rules, err := auth.ParsePrincipalRules(`RULE:^CN=(.*)\.svc$/$1/L`)
	require.NoError(t, err)
	sb := serveSecure(t, Options{Authorizer: true, PrincipalRules: rules}, TLSOptions{ClientAuth: "required"}, nil)
	_, err = sb.b.acls.Create([]auth.ACL{{ResourceType: kmsg.ACLResourceTypeTopic, Name: "mapped", Pattern: kmsg.ACLResourcePatternTypeLiteral,
		Principal: "User:app", Host: "*", Operation: kmsg.ACLOperationAll, Permission: kmsg.ACLPermissionTypeAllow}})
	require.NoError(t, err)
	_, err = sb.b.m.Create(checkpoint.TopicPartition{Topic: "mapped"}, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := func(cn string) *kgo.Client {
		cert, key := sb.pki.Issue(t, cn, 40, cn, false)
		conf, err := tlsClientConfig(sb, cert, key)
		require.NoError(t, err)
		cl, err := kgo.NewClient(kgo.SeedBrokers(sb.addrs[ProtocolSSL]), kgo.DialTLSConfig(conf), kgo.RequestRetries(1))
		require.NoError(t, err)
		t.Cleanup(cl.Close)
		return cl
	}
	require.NoError(t, client("App.svc").ProduceSync(ctx, &kgo.Record{Topic: "mapped", Value: []byte("as User:app")}).FirstErr())
	short, cancelShort := context.WithTimeout(ctx, 10*time.Second)
	defer cancelShort()
	require.Error(t, client("rogue").Ping(short), "no rule maps CN=rogue")
	require.Positive(t, testutil.ToFloat64(sb.b.metrics.closedAuth))
}

// TestACLsBeforeTheEngine: a refused request does not reach what it
// would change — FindCoordinator does not create __consumer_offsets, a
// DeleteTopics by topic id (v6) is checked against the topic the id
// names, an OffsetCommit to a refused group writes nothing.
func TestACLsBeforeTheEngine(t *testing.T) {
	sb := serveSecure(t, Options{Authorizer: true, SASLMechanisms: []string{auth.SHA512, auth.PLAIN}}, TLSOptions{},
		map[string]string{"bob": "bob-secret"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := sb.b.m.Create(checkpoint.TopicPartition{Topic: "kept"}, nil)
	require.NoError(t, err)
	id, ok := sb.b.m.TopicID("kept")
	require.True(t, ok)
	bob := saslClient(t, sb, "bob")
	for _, v := range []int16{3, 4} {
		f := kmsg.NewPtrFindCoordinatorRequest()
		f.Version = v
		f.CoordinatorKey, f.CoordinatorKeys = "bob-group", []string{"bob-group"}
		resp, err := f.RequestWith(ctx, bob)
		require.NoError(t, err)
		code := resp.ErrorCode
		if v >= 4 {
			require.Len(t, resp.Coordinators, 1)
			code = resp.Coordinators[0].ErrorCode
		}
		require.Equal(t, kerr.GroupAuthorizationFailed.Code, code, "v%d", v)
	}
	require.Empty(t, partitionsOf(sb.b, "__consumer_offsets"), "a refused FindCoordinator creates nothing")

	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Group, oc.Generation = "bob-group", -1
	oc.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "kept", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}}}
	raw := dialRaw(t, sb.addrs[ProtocolSASLPlaintext]) // franz-go would look for the coordinator first
	require.Zero(t, handshake(raw, 1, auth.PLAIN).ErrorCode)
	require.Zero(t, authenticate(raw, 1, "\x00bob\x00bob-secret").ErrorCode)
	ocr := kmsg.NewPtrOffsetCommitResponse()
	raw.do(oc, 8, ocr)
	require.Equal(t, kerr.GroupAuthorizationFailed.Code, ocr.Topics[0].Partitions[0].ErrorCode)
	require.Empty(t, partitionsOf(sb.b, "__consumer_offsets"), "a refused OffsetCommit writes nothing")

	del := kmsg.NewPtrDeleteTopicsRequest()
	del.Version, del.TimeoutMillis = 6, 5000
	del.Topics = []kmsg.DeleteTopicsRequestTopic{{TopicID: id}}
	dresp, err := del.RequestWith(ctx, bob)
	require.NoError(t, err)
	require.Len(t, dresp.Topics, 1)
	require.Equal(t, kerr.TopicAuthorizationFailed.Code, dresp.Topics[0].ErrorCode, "by id, as by name")
	require.Equal(t, [16]byte(id), dresp.Topics[0].TopicID)
	require.NotEmpty(t, partitionsOf(sb.b, "kept"), "not deleted")
}

// A fetch whose every topic is refused is answered after its wait, like any
// fetch with nothing to read (Kafka's), not at once: a client that retries
// at once cannot make the broker answer refusals in a loop. Its refused
// partitions carry an empty record set, which librdkafka parses.
func TestRefusedFetchWaits(t *testing.T) {
	waited := make(chan struct{}, 1)
	sb := serveSecure(t, Options{Authorizer: true, SuperUsers: []string{"User:admin"}}, TLSOptions{},
		map[string]string{"admin": "admin-secret", "bob": "bob-secret"},
		func(b *Broker) { b.hooks.fetchWaiting = func() { waited <- struct{}{} } })
	ctx := context.Background()
	admin := saslClient(t, sb, "admin", kgo.AllowAutoTopicCreation())
	require.NoError(t, admin.ProduceSync(ctx, &kgo.Record{Topic: "secret-topic", Value: []byte("x")}).FirstErr())
	listed, err := kadm.NewClient(admin).ListTopics(ctx, "secret-topic")
	require.NoError(t, err)
	bob := saslClient(t, sb, "bob")
	freq := kmsg.NewPtrFetchRequest()
	freq.MaxWaitMillis, freq.MinBytes, freq.MaxBytes, freq.SessionEpoch = 100, 1, 1<<20, -1
	freq.Topics = []kmsg.FetchRequestTopic{{Topic: "secret-topic", TopicID: listed["secret-topic"].ID, Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 0, PartitionMaxBytes: 1 << 20}}}}
	fresp, err := freq.RequestWith(ctx, bob)
	require.NoError(t, err)
	p := fresp.Topics[0].Partitions[0]
	require.Equal(t, kerr.TopicAuthorizationFailed.Code, p.ErrorCode)
	require.NotNil(t, p.RecordBatches)
	select {
	case <-waited:
	default:
		t.Fatal("the refused fetch was answered without waiting")
	}
}

// The console's reads beside the Kafka API: DescribePartition needs
// Describe on the topic, as Metadata does; Authorized answers as the ACLs
// do; the broker's own principal (Internal, which no connection can have)
// passes every ACL.
func TestDescribePartitionAndTheInternalPrincipal(t *testing.T) {
	sb := serveSecure(t, Options{Authorizer: true, SuperUsers: []string{"User:admin"}}, TLSOptions{}, nil)
	ctx := context.Background()
	alice, admin, internal := Caller{Principal: "User:alice", Host: "127.0.0.1"}, Caller{Principal: "User:admin", Host: "127.0.0.1"},
		Caller{Principal: Internal, Host: "127.0.0.1"}
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "seen", 2, 1
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 10_000
	resp, err := sb.b.Request(ctx, alice, req)
	require.NoError(t, err)
	require.Equal(t, kerr.TopicAuthorizationFailed.Code, resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode, "alice has no ACL")
	resp, err = sb.b.Request(ctx, internal, req)
	require.NoError(t, err)
	require.Zero(t, resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode, "the broker's own principal passes every ACL")

	_, err = sb.b.DescribePartition(alice, "seen", 1, 10)
	require.ErrorIs(t, err, ErrNotAuthorized)
	d, err := sb.b.DescribePartition(admin, "seen", 1, 10)
	require.NoError(t, err)
	require.Equal(t, 1, d.SegmentCount)
	require.Len(t, d.Segments, 1)
	require.Equal(t, int64(0), d.Segments[0].BaseOffset)
	require.Equal(t, int64(-1), d.Segments[0].FirstTimestamp, "an empty segment has no first batch")
	require.True(t, d.Leading, "a single node leads its partitions")
	require.False(t, d.Tiered)
	_, err = sb.b.DescribePartition(admin, "seen", 2, 10)
	require.ErrorIs(t, err, ErrNoReplica)

	require.False(t, sb.b.Authorized(alice, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeCluster, auth.ClusterName))
	require.True(t, sb.b.Authorized(admin, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeCluster, auth.ClusterName))
	require.True(t, sb.b.Authorized(internal, kmsg.ACLOperationAlter, kmsg.ACLResourceTypeCluster, auth.ClusterName))
	require.Equal(t, map[string]int64{"seen": 0}, sb.b.LogEnds())
}
