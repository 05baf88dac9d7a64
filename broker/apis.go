package broker

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/coordinator/group"
	"github.com/seglog/seglog/coordinator/txn"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/tablet"
)

// served are the APIs this broker answers and their version ranges: low
// enough for kafkajs, which never uses flexible versions and ignores the
// broker's minimum.
var served = map[int16][2]int16{
	18: {0, 3},  // ApiVersions
	3:  {0, 12}, // Metadata
	0:  {3, 11}, // Produce: RecordBatch v2 only
	1:  {4, 12}, // Fetch, without sessions
	2:  {1, 7},  // ListOffsets
	22: {0, 4},  // InitProducerId (idempotent and transactional producers)
	23: {0, 4},  // OffsetForLeaderEpoch
	19: {0, 7},  // CreateTopics
	20: {0, 6},  // DeleteTopics
	37: {0, 3},  // CreatePartitions
	21: {0, 2},  // DeleteRecords
	32: {0, 4},  // DescribeConfigs
	33: {0, 2},  // AlterConfigs
	44: {0, 1},  // IncrementalAlterConfigs
	10: {0, 4},  // FindCoordinator (groups)
	11: {0, 7},  // JoinGroup
	14: {0, 5},  // SyncGroup
	12: {0, 4},  // Heartbeat
	13: {0, 4},  // LeaveGroup
	8:  {0, 8},  // OffsetCommit
	9:  {0, 7},  // OffsetFetch
	47: {0, 0},  // OffsetDelete
	15: {0, 5},  // DescribeGroups
	16: {0, 4},  // ListGroups
	42: {0, 2},  // DeleteGroups
	24: {0, 3},  // AddPartitionsToTxn (v4+ is the brokers' verification)
	26: {0, 3},  // EndTxn
	25: {0, 3},  // AddOffsetsToTxn
	28: {0, 3},  // TxnOffsetCommit
	65: {0, 0},  // DescribeTransactions
	66: {0, 1},  // ListTransactions
	61: {0, 0},  // DescribeProducers
	17: {0, 1},  // SaslHandshake
	36: {0, 2},  // SaslAuthenticate
	50: {0, 0},  // DescribeUserScramCredentials
	51: {0, 0},  // AlterUserScramCredentials
	29: {0, 3},  // DescribeAcls
	30: {0, 3},  // CreateAcls
	31: {0, 3},  // DeleteAcls
	48: {0, 1},  // DescribeClientQuotas
	49: {0, 1},  // AlterClientQuotas
}

// The SASL APIs' keys: the only ones (with ApiVersions) a SASL listener
// answers before the client authenticates.
const (
	saslHandshakeKey    = 17
	saslAuthenticateKey = 36
)

// handle answers one request; a nil response is none (acks=0). An error
// closes the connection.
func (b *Broker) handle(h header, req kmsg.Request, body []byte) (kmsg.Response, error) {
	if h.key == 18 {
		return b.apiVersions(h, req, body)
	}
	if h.key != saslHandshakeKey && h.key != saslAuthenticateKey {
		if err := b.checkSession(h); err != nil {
			return nil, err
		}
	}
	v, ok := served[h.key]
	if !ok || h.version < v[0] || h.version > v[1] {
		return nil, fmt.Errorf("%w: %s v%d is not served", errMalformed, kmsg.NameForKey(h.key), h.version)
	}
	if err := req.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("%w: %s v%d: %v", errMalformed, kmsg.NameForKey(h.key), h.version, err)
	}
	switch r := req.(type) {
	case *kmsg.SASLHandshakeRequest:
		return b.saslHandshake(h, r), nil
	case *kmsg.SASLAuthenticateRequest:
		return b.saslAuthenticate(h, r), nil
	}
	if b.null != nil {
		return b.handleNull(req), nil
	}
	refused, after := b.authorize(h, req)
	if refused != nil {
		return refused, nil
	}
	quotas := b.quotas.Any() // without one, nothing to count or time
	if r, ok := req.(*kmsg.FetchRequest); ok && quotas {
		if resp := b.fetchThrottled(h, r); resp != nil {
			return resp, nil
		}
	}
	var start time.Time
	if quotas {
		start = time.Now()
	}
	resp, err := b.dispatch(h, req)
	if err != nil {
		return nil, err
	}
	if after != nil {
		after(resp)
	}
	b.fillAuthorizedOps(h, req, resp)
	if quotas {
		b.recordQuotas(h, req, resp, time.Since(start))
	}
	return resp, nil
}

// dispatch hands an authorized request to its handler.
func (b *Broker) dispatch(h header, req kmsg.Request) (kmsg.Response, error) {
	if resp, ok := b.handleGroup(h, req); ok {
		return resp, nil
	}
	switch r := req.(type) {
	case *kmsg.MetadataRequest:
		return b.metadata(h, r), nil
	case *kmsg.ProduceRequest:
		return b.produce(r), nil
	case *kmsg.FetchRequest:
		return b.fetch(r), nil // a *fetchReply
	case *kmsg.ListOffsetsRequest:
		return b.listOffsets(r), nil
	case *kmsg.InitProducerIDRequest:
		return b.initProducerID(r), nil
	case *kmsg.OffsetForLeaderEpochRequest:
		return b.offsetForLeaderEpoch(r), nil
	case *kmsg.CreateTopicsRequest:
		return b.createTopics(r), nil
	case *kmsg.DeleteTopicsRequest:
		return b.deleteTopics(r), nil
	case *kmsg.CreatePartitionsRequest:
		return b.createPartitions(r), nil
	case *kmsg.DeleteRecordsRequest:
		return b.deleteRecords(r), nil
	case *kmsg.DescribeConfigsRequest:
		return b.describeConfigs(r), nil
	case *kmsg.AlterConfigsRequest:
		return b.alterConfigs(r), nil
	case *kmsg.IncrementalAlterConfigsRequest:
		return b.incrementalAlterConfigs(r), nil
	case *kmsg.DescribeUserSCRAMCredentialsRequest:
		return b.describeUserSCRAM(r), nil
	case *kmsg.AlterUserSCRAMCredentialsRequest:
		return b.alterUserSCRAM(r), nil
	case *kmsg.CreateACLsRequest:
		return b.createACLs(r), nil
	case *kmsg.DescribeACLsRequest:
		return b.describeACLs(r), nil
	case *kmsg.DeleteACLsRequest:
		return b.deleteACLs(r), nil
	case *kmsg.DescribeClientQuotasRequest:
		return b.describeClientQuotas(r), nil
	case *kmsg.AlterClientQuotasRequest:
		return b.alterClientQuotas(r), nil
	}
	return nil, fmt.Errorf("%w: %s has no handler", errMalformed, kmsg.NameForKey(h.key))
}

// apiVersions lists the served APIs. A version this broker does not know
// is answered as Kafka does: a v0 body, UNSUPPORTED_VERSION and the list.
func (b *Broker) apiVersions(h header, req kmsg.Request, body []byte) (kmsg.Response, error) {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(h.version)
	if h.version > served[18][1] {
		resp.SetVersion(0)
		resp.ErrorCode = kerr.UnsupportedVersion.Code
	} else if err := req.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("%w: ApiVersions v%d: %v", errMalformed, h.version, err)
	} else if r := req.(*kmsg.ApiVersionsRequest); h.version >= 3 &&
		(!softwareName.MatchString(r.ClientSoftwareName) || !softwareName.MatchString(r.ClientSoftwareVersion)) {
		// Kafka validates the client's software name and version (KIP-511)
		// and answers INVALID_REQUEST without the list.
		resp.ErrorCode = kerr.InvalidRequest.Code
		b.opts.Logger.Warn("ApiVersions with an invalid client software name or version",
			"name", r.ClientSoftwareName, "version", r.ClientSoftwareVersion)
		return resp, nil
	}
	for _, key := range slices.Sorted(maps.Keys(served)) {
		r := served[key]
		resp.ApiKeys = append(resp.ApiKeys, kmsg.ApiVersionsResponseApiKey{ApiKey: key, MinVersion: r[0], MaxVersion: r[1]})
	}
	return resp, nil
}

// internalTopics are Kafka's internal topics, flagged in Metadata.
var internalTopics = map[string]bool{"__consumer_offsets": true, "__transaction_state": true}

// softwareName is what Kafka accepts as a client software name or version.
var softwareName = regexp.MustCompile(`^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$`)

// errorCode is the Kafka error code of an engine error.
func errorCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, tablet.ErrOffsetOutOfRange):
		return kerr.OffsetOutOfRange.Code
	case errors.Is(err, tablet.ErrNotFound):
		return kerr.UnknownTopicOrPartition.Code
	case errors.Is(err, tablet.ErrRecordBatchTooLarge):
		return kerr.MessageTooLarge.Code
	}
	if code, ok := codesByName[tablet.ErrorName(err)]; ok {
		return code
	}
	return kerr.UnknownServerError.Code
}

// codesByName maps Kafka's error names to their codes.
var codesByName = func() map[string]int16 {
	m := map[string]int16{}
	for code := int16(-1); code < 150; code++ {
		if e := kerr.ErrorForCode(code); e != nil {
			var ke *kerr.Error
			if errors.As(e, &ke) {
				m[ke.Message] = code
			}
		}
	}
	return m
}()

// tabletFor returns a partition's tablet, creating its topic (with
// num.partitions partitions) when auto-creation allows.
func (b *Broker) tabletFor(topic string, partition int32, create bool) (*tablet.Tablet, int16) {
	tp := checkpoint.TopicPartition{Topic: topic, Partition: partition}
	if t, ok := b.m.Get(tp); ok {
		return t, 0
	}
	if !create || b.opts.NoAutoCreate {
		return nil, kerr.UnknownTopicOrPartition.Code
	}
	if err := checkpoint.ValidateTopic(topic); err != nil {
		return nil, kerr.InvalidTopicException.Code
	}
	if len(b.partitionsOf(topic)) > 0 {
		return nil, kerr.UnknownTopicOrPartition.Code // the topic exists, not this partition
	}
	if err := b.createTopic(topic, b.opts.NumPartitions); err != nil {
		b.opts.Logger.Warn("auto-creating a topic", "topic", topic, "err", err)
		return nil, kerr.UnknownServerError.Code
	}
	if t, ok := b.m.Get(tp); ok {
		return t, 0
	}
	return nil, kerr.UnknownTopicOrPartition.Code
}

// createTopic creates the tablets of a topic that does not exist.
func (b *Broker) createTopic(topic string, partitions int32) error {
	b.createMu.Lock()
	defer b.createMu.Unlock()
	for p := range partitions {
		if _, err := b.m.GetOrCreate(checkpoint.TopicPartition{Topic: topic, Partition: p}, nil); err != nil {
			return err
		}
	}
	return nil
}

// partitionsOf returns a topic's tablets, by partition.
func (b *Broker) partitionsOf(topic string) []*tablet.Tablet {
	var out []*tablet.Tablet
	for _, t := range b.m.Tablets() {
		if t.TopicPartition().Topic == topic {
			out = append(out, t)
		}
	}
	return out
}

// advertised is the address a connection's clients are told: its
// listener's.
func (b *Broker) advertised(h header) (string, int32) {
	if h.listener != nil {
		return h.listener.AdvertisedHost, h.listener.AdvertisedPort
	}
	return b.opts.AdvertisedHost, b.opts.AdvertisedPort
}

func (b *Broker) metadata(h header, r *kmsg.MetadataRequest) *kmsg.MetadataResponse {
	resp := r.ResponseKind().(*kmsg.MetadataResponse)
	host, port := b.advertised(h)
	resp.Brokers = []kmsg.MetadataResponseBroker{{NodeID: b.opts.NodeID, Host: host, Port: port}}
	resp.ControllerID = b.opts.NodeID
	resp.ClusterID = kmsg.StringPtr(b.clusterID)
	var names []string
	all := r.Topics == nil || (r.GetVersion() == 0 && len(r.Topics) == 0)
	if all {
		seen := map[string]bool{}
		for _, t := range b.m.Tablets() {
			if n := t.TopicPartition().Topic; !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
	} else {
		for _, t := range r.Topics {
			if t.Topic != nil {
				names = append(names, *t.Topic)
			}
		}
	}
	autoCreate := r.GetVersion() < 4 || r.AllowAutoTopicCreation
	for _, name := range names {
		topic := kmsg.MetadataResponseTopic{Topic: kmsg.StringPtr(name), IsInternal: internalTopics[name]}
		parts := b.partitionsOf(name)
		if len(parts) == 0 && (name == group.Topic || name == txn.Topic) && b.groups != nil {
			ensure := b.groups.Ensure
			if name == txn.Topic {
				ensure = b.txns.Ensure
			}
			if err := ensure(); err != nil {
				b.opts.Logger.Error("creating "+name, "err", err)
			}
			parts = b.partitionsOf(name)
		}
		if len(parts) == 0 && !all && autoCreate && !b.opts.NoAutoCreate {
			if checkpoint.ValidateTopic(name) != nil {
				topic.ErrorCode = kerr.InvalidTopicException.Code
				resp.Topics = append(resp.Topics, topic)
				continue
			}
			if err := b.createTopic(name, b.opts.NumPartitions); err != nil {
				b.opts.Logger.Warn("auto-creating a topic", "topic", name, "err", err)
			}
			parts = b.partitionsOf(name)
		}
		if len(parts) == 0 {
			topic.ErrorCode = kerr.UnknownTopicOrPartition.Code
		} else if r.GetVersion() >= 10 {
			topic.TopicID, _ = b.m.TopicID(name)
		}
		for _, t := range parts {
			p := kmsg.NewMetadataResponseTopicPartition()
			p.Partition = t.TopicPartition().Partition
			p.Leader = b.opts.NodeID
			p.LeaderEpoch = 0
			p.Replicas = []int32{b.opts.NodeID}
			p.ISR = []int32{b.opts.NodeID}
			topic.Partitions = append(topic.Partitions, p)
		}
		resp.Topics = append(resp.Topics, topic)
	}
	return resp
}

func (b *Broker) produce(r *kmsg.ProduceRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.ProduceResponse)
	opts := tablet.AppendOptions{Sync: r.Acks == -1 && b.opts.DurableAcks}
	var jobs []appendJob
	seen := map[checkpoint.TopicPartition]bool{}
	parallel, total := true, 0
	resp.Topics = make([]kmsg.ProduceResponseTopic, len(r.Topics))
	for i, rt := range r.Topics {
		st := &resp.Topics[i]
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		for j, rp := range rt.Partitions {
			sp := &st.Partitions[j]
			sp.Default()
			sp.Partition = rp.Partition
			sp.BaseOffset, sp.LogAppendTime = -1, -1
			if internalTopics[rt.Topic] {
				sp.ErrorCode = kerr.InvalidTopicException.Code // Kafka: no client appends to an internal topic
				continue
			}
			t, code := b.tabletFor(rt.Topic, rp.Partition, true)
			if code != 0 {
				sp.ErrorCode = code
				continue
			}
			tp := t.TopicPartition()
			parallel = parallel && !seen[tp] // a partition twice: its batches in order, one by one
			seen[tp] = true
			o := opts
			o.Sync = o.Sync || r.Acks == -1 && t.Config().DurableAcks
			jobs = append(jobs, appendJob{t: t, data: rp.Records, opts: o, sp: sp})
			total += len(rp.Records)
		}
	}
	if parallel && len(jobs) > 1 && (total >= parallelAppendBytes || opts.Sync) {
		// Each partition is its own tablet: their appends (and fsyncs)
		// run at once, a few at a time.
		sem := make(chan struct{}, min(len(jobs), 2*runtime.GOMAXPROCS(0)))
		var wg sync.WaitGroup
		for _, jb := range jobs {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				b.appendPartition(jb.t, jb.data, jb.opts, jb.sp)
			}()
		}
		wg.Wait()
	} else {
		for _, jb := range jobs {
			b.appendPartition(jb.t, jb.data, jb.opts, jb.sp)
		}
	}
	if r.Acks == 0 {
		return nil
	}
	return resp
}

// parallelAppendBytes is the size of a produce request whose partitions
// are appended at once (below it, goroutines cost more than they save).
const parallelAppendBytes = 64 << 10

// appendJob is one partition's part of a produce request.
type appendJob struct {
	t    *tablet.Tablet
	data []byte
	opts tablet.AppendOptions
	sp   *kmsg.ProduceResponseTopicPartition
}

// appendPartition appends a partition's batches, one by one (a client
// sends one; Kafka's magic check comes first).
func (b *Broker) appendPartition(t *tablet.Tablet, data []byte, opts tablet.AppendOptions, sp *kmsg.ProduceResponseTopicPartition) {
	first := true
	for len(data) > 0 {
		hdr, n, err := record.ParseHeader(data)
		if err != nil || n > int64(len(data)) {
			if len(data) >= 17 && data[16] != 2 {
				sp.ErrorCode = kerr.UnsupportedForMessageFormat.Code // magic 0 or 1: RecordBatch v2 only
			} else {
				sp.ErrorCode = kerr.CorruptMessage.Code
			}
			return
		}
		if h := hdr; h.Attributes.IsTransactional() && b.txns != nil {
			// KIP-890's defence: a transactional batch only for a partition
			// its transaction added.
			if code := b.txns.Verify(h.ProducerID, h.ProducerEpoch, t.TopicPartition()); code != 0 {
				sp.ErrorCode = code
				return
			}
		}
		res, err := t.Append(data[:n], opts)
		if err != nil {
			sp.ErrorCode = errorCode(err)
			msg := err.Error()
			sp.ErrorMessage = &msg
			var re *record.Error
			if errors.As(err, &re) {
				for _, r := range re.Records { // Kafka's record errors: each refused record's index in its batch
					sp.ErrorRecords = append(sp.ErrorRecords, kmsg.ProduceResponseTopicPartitionErrorRecord{
						RelativeOffset: int32(r.Index), ErrorMessage: kmsg.StringPtr(r.Message)})
				}
			}
			return
		}
		if first {
			sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = res.FirstOffset, res.LogAppendTime, res.LogStartOffset
			first = false
		}
		data = data[n:]
	}
}

func (b *Broker) listOffsets(r *kmsg.ListOffsetsRequest) *kmsg.ListOffsetsResponse {
	resp := r.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, rt := range r.Topics {
		st := kmsg.ListOffsetsResponseTopic{Topic: rt.Topic}
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			t, ok := b.m.Get(checkpoint.TopicPartition{Topic: rt.Topic, Partition: rp.Partition})
			if !ok {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			o := t.Offsets()
			switch rp.Timestamp {
			case -1: // latest
				sp.Offset, sp.Timestamp = o.HighWatermark, -1
				if r.IsolationLevel == 1 {
					sp.Offset = o.LastStableOffset
				}
			case -2: // earliest
				sp.Offset, sp.Timestamp = o.LogStartOffset, -1
			case -3: // the first record with the largest timestamp (KIP-734)
				sp.Offset, sp.Timestamp = -1, -1
				maxTs := int64(-1)
				for _, g := range t.Segments() {
					maxTs = max(maxTs, g.MaxTimestamp)
				}
				if maxTs >= 0 {
					if found, err := t.OffsetForTimestamp(maxTs); err == nil {
						sp.Offset, sp.Timestamp = found.Offset, found.Timestamp
					}
				}
			default:
				found, err := t.OffsetForTimestamp(rp.Timestamp)
				switch {
				case errors.Is(err, tablet.ErrNoOffsetForTimestamp):
					sp.Offset, sp.Timestamp = -1, -1
				case err != nil:
					sp.ErrorCode = errorCode(err)
				default:
					sp.Offset, sp.Timestamp = found.Offset, found.Timestamp
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

func (b *Broker) initProducerID(r *kmsg.InitProducerIDRequest) *kmsg.InitProducerIDResponse {
	resp := r.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if r.TransactionalID != nil {
		return b.txns.InitProducerID(r)
	}
	id, err := b.pids.allocate()
	if err != nil {
		b.opts.Logger.Error("allocating a producer id", "err", err)
		resp.ErrorCode = kerr.KafkaStorageError.Code
		return resp
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return resp
}
