package broker

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io"
	"reflect"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/tablet"
)

// Fetch: records read from the tablets' segment files, long polls woken
// by appends.

func init() {
	register(api{key: 1, min: 4, max: 17, // sessions from v7 (fetchsession.go); v13 names topics by id
		topicIDs: fetchTopicIDs, session: fetchSessionStep,
		handle: handler((*Broker).fetch), null: nullFetch, quota: quotaFetch,
		rule: ruleFor(ruleTopic, opRead, (*guard).authorizeFetch)})
}

// fetchTopicIDs names the topics of a Fetch v13+ by their ids.
func fetchTopicIDs(b *Broker, h header, req kmsg.Request) {
	if h.version < 13 {
		return
	}
	r := req.(*kmsg.FetchRequest)
	for i := range r.Topics {
		r.Topics[i].Topic, _ = b.topics.name(r.Topics[i].TopicID)
	}
}

// nullFetch answers every partition with no records.
func nullFetch(_ *Broker, _ header, req kmsg.Request) kmsg.Response {
	r := req.(*kmsg.FetchRequest)
	resp := r.ResponseKind().(*kmsg.FetchResponse)
	resp.Topics = slices.Grow(resp.Topics, len(r.Topics))
	for _, rt := range r.Topics {
		st := kmsg.FetchResponseTopic{Topic: rt.Topic, TopicID: rt.TopicID,
			Partitions: make([]kmsg.FetchResponseTopicPartition, 0, len(rt.Partitions))}
		for _, rp := range rt.Partitions {
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.Partition, sp.RecordBatches = rp.Partition, []byte{}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// fetchReply is a fetch response whose record bytes stay in their segment
// files until written: each partition with records carries a marker in
// place of them (a random nonce and its index), which encode replaces with
// the records' length; writeTo sends the encoded chunks and, between them,
// the records from the file (sendfile) or, when small, copied in.
type fetchReply struct {
	*kmsg.FetchResponse
	// urgent: a partition's answer is an error or a preferred read
	// replica, which Kafka sends at once rather than after the wait.
	urgent  bool
	nonce   [12]byte
	results []*tablet.FetchResult // by marker index
	topics  []string              // each result's topic
}

const markerSize = 16

// smallRecords are copied into the response's chunks instead of sent on
// their own: a write per partition costs more than the copy.
const smallRecords = 32 << 10

func newFetchReply(r *kmsg.FetchRequest) *fetchReply {
	fr := &fetchReply{FetchResponse: r.ResponseKind().(*kmsg.FetchResponse)}
	_, _ = rand.Read(fr.nonce[:])
	return fr
}

// attach keeps a partition's records and returns its marker.
func (fr *fetchReply) attach(topic string, res *tablet.FetchResult) []byte {
	m := make([]byte, markerSize)
	copy(m, fr.nonce[:])
	binary.BigEndian.PutUint32(m[12:], uint32(len(fr.results)))
	fr.results = append(fr.results, res)
	fr.topics = append(fr.topics, topic)
	return m
}

// countOut adds the records answered to their topics' bytes out.
func (fr *fetchReply) countOut(m *metrics) {
	for i, res := range fr.results {
		m.topicOut.WithLabelValues(fr.topics[i]).Add(float64(res.Records.Size()))
	}
}

func (fr *fetchReply) close() {
	for _, res := range fr.results {
		res.Close()
	}
	fr.results, fr.topics = nil, nil
}

// encode frames the response with each marker (and its length prefix)
// cut out: chunks[i] ends with the length prefix of results[i]'s records,
// which follow it; the last chunk is the rest. size is the frame's whole
// size, prefix included.
func (fr *fetchReply) encode(h header) ([][]byte, int) {
	enc := encodeResponse(h, fr.FetchResponse)
	flexible := fr.IsFlexible()
	prefix := 4 // int32 length, or a compact length's one byte (17)
	if flexible {
		prefix = 1
	}
	var chunks [][]byte
	from, size := 0, len(enc)
	marker := make([]byte, markerSize)
	copy(marker, fr.nonce[:])
	for i, res := range fr.results {
		binary.BigEndian.PutUint32(marker[12:], uint32(i))
		at := from + bytes.Index(enc[from:], marker)
		n := res.Records.Size()
		chunk := enc[from : at-prefix : at-prefix]
		if flexible {
			chunk = binary.AppendUvarint(chunk, uint64(n)+1)
		} else {
			chunk = binary.BigEndian.AppendUint32(chunk, uint32(n))
		}
		size += len(chunk) - (at - from) - markerSize + int(n)
		chunks = append(chunks, chunk)
		from = at + markerSize
	}
	chunks = append(chunks, enc[from:])
	binary.BigEndian.PutUint32(chunks[0], uint32(size-4))
	return chunks, size
}

// writeTo writes the chunks and the records between them.
func (fr *fetchReply) writeTo(w io.Writer, chunks [][]byte) error {
	var pending []byte // chunks and small records not yet written
	for i, res := range fr.results {
		pending = append(pending, chunks[i]...)
		if res.Records.Size() < smallRecords || res.Records.InMemory() {
			var err error
			if pending, err = res.Records.AppendTo(pending); err != nil {
				return err
			}
			continue
		}
		if _, err := w.Write(pending); err != nil {
			return err
		}
		pending = pending[:0]
		if _, err := res.Records.WriteTo(w); err != nil {
			return err
		}
	}
	pending = append(pending, chunks[len(chunks)-1]...)
	_, err := w.Write(pending)
	return err
}

// fetch answers a fetch, long-polling until MinBytes are there, MaxWaitMs
// passes (at most MaxFetchWait), the client goes or the broker closes
// (ctx); appends to any of its partitions wake it. A read from the tier's
// store is bounded by the fetch's own wait, and at least
// remote.fetch.max.wait.ms.
func (b *Broker) fetch(ctx context.Context, h header, r *kmsg.FetchRequest) *fetchReply {
	iso := tablet.ReadHighWatermark
	switch {
	case fetchReplica(r) >= 0:
		iso = tablet.ReadLogEnd // a follower's: everything the leader has
	case r.IsolationLevel == 1:
		iso = tablet.ReadCommitted
	}
	wait := min(time.Duration(max(r.MaxWaitMillis, 0))*time.Millisecond, b.opts.MaxFetchWait)
	deadline := time.Now().Add(wait)
	remote, cancel := context.WithTimeout(ctx, max(wait, b.opts.RemoteFetchMaxWait))
	defer cancel()
	for {
		// The channels are taken before the read: a change after it
		// closes them, and the wait below wakes — for a follower an
		// append, for a consumer the high watermark's (or the last stable
		// offset's) move: what each may read.
		var waits []<-chan struct{}
		for _, rt := range r.Topics {
			for _, rp := range rt.Partitions {
				if t, ok := b.m.Get(checkpoint.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}); ok {
					waits = append(waits, t.ChangedFor(iso))
				}
			}
		}
		reply, n := b.fetchOnce(remote, r, iso)
		for _, mb := range b.leaderHints(h, func(hint func(int16, string, int32, *int32, *int32)) {
			for i := range reply.Topics {
				rt := &reply.Topics[i]
				for j := range rt.Partitions {
					rp := &rt.Partitions[j]
					hint(rp.ErrorCode, rt.Topic, rp.Partition, &rp.CurrentLeader.LeaderID, &rp.CurrentLeader.LeaderEpoch)
				}
			}
		}) {
			reply.Brokers = append(reply.Brokers, kmsg.FetchResponseBroker{NodeID: mb.NodeID, Host: mb.Host, Port: mb.Port, Rack: mb.Rack})
		}
		if n >= int64(r.MinBytes) || n > 0 && r.MinBytes <= 0 || r.MaxWaitMillis <= 0 || len(waits) == 0 && len(r.Topics) > 0 || reply.urgent {
			// (A fetch of no partition — all refused, or an incremental
			// session's with nothing changed — waits out its wait, as in
			// Kafka; one of unknown partitions is answered at once, and so
			// is one with an error or a preferred read replica: the client
			// acts on them.)
			return reply
		}
		left := time.Until(deadline)
		if left <= 0 {
			return reply
		}
		b.metrics.fetchesWaiting.Inc()
		if b.hooks.fetchWaiting != nil {
			b.hooks.fetchWaiting()
		}
		woken := waitAny(waits, left, ctx.Done(), b.stop)
		b.metrics.fetchesWaiting.Dec()
		if !woken {
			return reply
		}
		reply.close()
	}
}

// waitAny waits for any channel to close, or d, or done or stop; it
// reports a close of one of chs. One select over all of them: no goroutine
// per partition.
func waitAny(chs []<-chan struct{}, d time.Duration, done <-chan struct{}, stop <-chan struct{}) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	cases := make([]reflect.SelectCase, 0, len(chs)+3)
	cases = append(cases,
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(timer.C)},
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(done)},
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(stop)})
	for _, ch := range chs {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)})
	}
	chosen, _, _ := reflect.Select(cases)
	return chosen >= 3
}

// fetchOnce reads every partition once, within MaxBytes and each
// partition's own bound (the first batch whole even when larger, as
// Kafka), and returns the reply and its record bytes.
func (b *Broker) fetchOnce(ctx context.Context, r *kmsg.FetchRequest, iso tablet.Isolation) (*fetchReply, int64) {
	reply := newFetchReply(r)
	var total int64
	// The request's max_bytes, within fetch.max.bytes (as Kafka: a client
	// asking for 2 GiB gets at most 55 MiB of records).
	maxBytes := int64(r.MaxBytes)
	if maxBytes <= 0 || maxBytes > int64(b.opts.FetchMaxBytes) {
		maxBytes = int64(b.opts.FetchMaxBytes)
	}
	reply.Topics = slices.Grow(reply.Topics, len(r.Topics))
	for _, rt := range r.Topics {
		st := kmsg.FetchResponseTopic{Topic: rt.Topic, TopicID: rt.TopicID,
			Partitions: make([]kmsg.FetchResponseTopicPartition, 0, len(rt.Partitions))}
		for _, rp := range rt.Partitions {
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = -1, -1, -1
			sp.RecordBatches = []byte{} // empty, not null: Kafka sends no records as a 0-length set (librdkafka rejects null)
			src := b.fetchTablet(r, rt.Topic, rp)
			t := src.t
			if src.code != 0 {
				reply.urgent = true
				sp.ErrorCode = src.code
				if unknownTopicID(r.GetVersion(), rt.Topic) {
					sp.ErrorCode = kerr.UnknownTopicID.Code
				}
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			o := t.Offsets()
			if src.follower && rp.FetchOffset < o.LocalLogStartOffset && rp.FetchOffset >= o.LogStartOffset {
				// Below the local log, in the tier (KIP-405): a follower
				// starts from the tier and copies the local tail only.
				sp.ErrorCode, reply.urgent = kerr.OffsetMovedToTieredStorage.Code, true
				sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = o.HighWatermark, o.LastStableOffset, o.LogStartOffset
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			sp.PreferredReadReplica = src.preferred
			reply.urgent = reply.urgent || src.preferred >= 0
			if src.held || src.preferred >= 0 || rp.FetchOffset == readBound(o, iso) && rp.FetchOffset >= o.LocalLogStartOffset {
				// Caught up (an idle partition of a follower's or a
				// consumer's fetch), held back by the replication
				// throttle, or to be read from another replica: nothing
				// to read, no read made.
				sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = o.HighWatermark, o.LastStableOffset, o.LogStartOffset
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			limit := min(int64(rp.PartitionMaxBytes), maxBytes-total)
			res := new(tablet.FetchResult)
			err := t.ReadIntoContext(ctx, res, rp.FetchOffset, tablet.ReadOptions{MaxBytes: int(max(limit, 0)), Isolation: iso,
				MinOneMessage: total == 0})
			o = t.Offsets()
			sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = o.HighWatermark, o.LastStableOffset, o.LogStartOffset
			if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
				// The tier's store did not answer within the fetch's wait,
				// or the client went: no records and no error, as Kafka
				// answers a remote fetch past remote.fetch.max.wait.ms.
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			if err != nil {
				sp.ErrorCode, reply.urgent = errorCode(err), true
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			for _, a := range res.AbortedTxns {
				sp.AbortedTransactions = append(sp.AbortedTransactions,
					kmsg.FetchResponseTopicPartitionAbortedTransaction{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset})
			}
			if n := res.Records.Size(); n > 0 {
				sp.RecordBatches = reply.attach(rt.Topic, res)
				total += n
				if src.throttled {
					b.replicas.LeaderThrottled(n)
				}
			} else {
				res.Close()
			}
			st.Partitions = append(st.Partitions, sp)
		}
		reply.Topics = append(reply.Topics, st)
	}
	return reply, total
}

// readBound is where a read at iso ends: the log end, the high watermark
// or the last stable offset.
func readBound(o tablet.Offsets, iso tablet.Isolation) int64 {
	switch iso {
	case tablet.ReadLogEnd:
		return o.LogEndOffset
	case tablet.ReadCommitted:
		return o.LastStableOffset
	}
	return o.HighWatermark
}

// authorizeFetch: each topic needs Read. The refused topics are taken out
// and answered with the rest, as Kafka's KafkaApis does: the fetch waits
// for the allowed ones as usual, and one with none allowed waits out its
// max wait like any fetch with nothing to read (a client retrying at once
// cannot make the broker answer thousands of refusals a second).
func (g *guard) authorizeFetch(h header, r *kmsg.FetchRequest) (kmsg.Response, func(kmsg.Response)) {
	if fetchReplica(r) >= 0 && !g.mayCluster(h, kmsg.ACLOperationClusterAction) {
		// A follower's fetch is replication: ClusterAction, as Kafka.
		resp := r.ResponseKind().(*kmsg.FetchResponse)
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	denied := takeOut(&r.Topics, func(t kmsg.FetchRequestTopic) int16 {
		if unknownTopicID(h.version, t.Topic) {
			return 0 // UNKNOWN_TOPIC_ID, from the handler
		}
		return g.refusal(h, opRead, resTopic, t.Topic, topicRefused)
	}, func(t kmsg.FetchRequestTopic, code int16) kmsg.FetchResponseTopic {
		rt := kmsg.FetchResponseTopic{Topic: t.Topic, TopicID: t.TopicID}
		for _, p := range t.Partitions {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
			rp.RecordBatches = []byte{} // empty, not null (librdkafka fails to parse a null set)
			rt.Partitions = append(rt.Partitions, rp)
		}
		return rt
	})
	return nil, func(resp kmsg.Response) {
		fr := resp.(*fetchReply)
		fr.Topics = append(fr.Topics, denied...)
	}
}

// fetchSource is where a fetch reads a partition.
type fetchSource struct {
	t    *tablet.Tablet
	code int16 // Kafka's error instead (no tablet)
	// throttled: a follower's fetch whose bytes the leader's replication
	// throttle counts; held: the throttle holds them back now.
	throttled, held bool
	// preferred is KIP-392's replica the consumer should read from
	// instead (-1: this broker).
	preferred int32
	// follower: a follower's fetch.
	follower bool
}

// fetchTablet finds where a fetch reads a partition: on a leader, for a
// consumer at its current leader epoch (or, KIP-392, the follower in the
// consumer's rack it should read from), or for a follower (whose fetch
// offset is its progress, under the replication throttle); on a
// follower, for a consumer's Fetch v11+ (KIP-392: up to the follower's
// high watermark).
func (b *Broker) fetchTablet(r *kmsg.FetchRequest, topic string, rp kmsg.FetchRequestTopicPartition) fetchSource {
	p, code := b.replicaOf(topic, rp.Partition)
	if p == nil {
		return fetchSource{code: code, preferred: -1}
	}
	if id := fetchReplica(r); id >= 0 {
		code, throttled := p.FollowerFetch(id, rp.CurrentLeaderEpoch, rp.FetchOffset, rp.LogStartOffset)
		if code != 0 {
			return fetchSource{code: code, preferred: -1}
		}
		held := throttled && b.replicas.LeaderThrottleHeld()
		return fetchSource{t: p.Tablet(), throttled: throttled, held: held, preferred: -1, follower: true}
	}
	code = p.CheckLeader(rp.CurrentLeaderEpoch)
	if code == kerr.NotLeaderForPartition.Code && r.GetVersion() >= 11 {
		if code := p.CheckFollowerRead(rp.CurrentLeaderEpoch); code != 0 {
			return fetchSource{code: code, preferred: -1}
		}
		return fetchSource{t: p.Tablet(), preferred: -1}
	}
	if code := cmp.Or(code, p.CheckHighWatermark()); code != 0 {
		return fetchSource{code: code, preferred: -1}
	}
	src := fetchSource{t: p.Tablet(), preferred: -1}
	if b.rackAware && r.GetVersion() >= 11 {
		snap := b.cat.snapshot()
		src.preferred = p.PreferredReadReplica(r.Rack, rp.FetchOffset, func(id int32) string { return snap.Brokers[id].Rack })
	}
	return src
}

// fetchReplica is the replica id of a follower's fetch (-1: a consumer's).
func fetchReplica(r *kmsg.FetchRequest) int32 {
	if r.GetVersion() >= 15 {
		return r.ReplicaState.ID
	}
	return r.ReplicaID
}
