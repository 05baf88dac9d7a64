package broker

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/replica"
	"github.com/seglog/seglog/tablet"
)

// Produce: each partition's batches appended to its tablet.

func init() {
	register(api{key: 0, min: 3, max: 13, // RecordBatch v2 only; v13 names topics by id
		listedFromV0: true, topicIDs: produceTopicIDs,
		handle: handler((*Broker).produce), null: nullProduce, quota: quotaProduce,
		rule: ruleFor(ruleTopic, opWrite, (*guard).authorizeProduce)})
}

// produceTopicIDs names the topics of a Produce v13+ by their ids.
func produceTopicIDs(b *Broker, h header, req kmsg.Request) {
	if h.version < 13 {
		return
	}
	r := req.(*kmsg.ProduceRequest)
	for i := range r.Topics {
		r.Topics[i].Topic, _ = b.topics.name(r.Topics[i].TopicID)
	}
}

// unknownTopicID: a request by topic id (version 13 and later of Produce
// and Fetch) named no topic this broker has, or the zero id.
func unknownTopicID(version int16, name string) bool { return version >= 13 && name == "" }

// nullProduce counts offsets in memory: each batch's header is parsed,
// nothing is stored.
func nullProduce(b *Broker, _ header, req kmsg.Request) kmsg.Response {
	r := req.(*kmsg.ProduceRequest)
	nl := b.null
	resp := r.ResponseKind().(*kmsg.ProduceResponse)
	nl.mu.Lock()
	for _, rt := range r.Topics {
		st := kmsg.ProduceResponseTopic{Topic: rt.Topic}
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition, sp.LogAppendTime = rp.Partition, -1
			offs := nl.next[rt.Topic]
			if rp.Partition < 0 || int(rp.Partition) >= len(offs) {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			} else {
				sp.BaseOffset = offs[rp.Partition]
				for data := rp.Records; len(data) > 0; {
					h, n, err := record.ParseHeader(data)
					if err != nil || n > int64(len(data)) {
						sp.ErrorCode = kerr.CorruptMessage.Code
						break
					}
					offs[rp.Partition] += int64(h.LastOffsetDelta) + 1
					data = data[n:]
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	nl.mu.Unlock()
	if r.Acks == 0 {
		return nil
	}
	return resp
}

func (b *Broker) produce(ctx context.Context, h header, r *kmsg.ProduceRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.ProduceResponse)
	ac := b.autoCreation(h)
	defer ac.finish(resp)
	opts := tablet.AppendOptions{Sync: r.Acks == -1 && b.opts.DurableAcks}
	var jobs []appendJob
	seen := map[checkpoint.TopicPartition]bool{}
	parallel, total := true, 0
	resp.Topics = make([]kmsg.ProduceResponseTopic, len(r.Topics))
	for i, rt := range r.Topics {
		st := &resp.Topics[i]
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		st.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		for j, rp := range rt.Partitions {
			sp := &st.Partitions[j]
			sp.Default()
			sp.Partition = rp.Partition
			sp.BaseOffset, sp.LogAppendTime = -1, -1
			if unknownTopicID(h.version, rt.Topic) {
				sp.ErrorCode = kerr.UnknownTopicID.Code
				continue
			}
			if internalTopics[rt.Topic] {
				sp.ErrorCode = kerr.InvalidTopicException.Code // Kafka: no client appends to an internal topic
				continue
			}
			p, code := b.replicaFor(rt.Topic, rp.Partition, &ac)
			if code == 0 {
				code = p.CheckAppend(r.Acks) // (acks=all with an ISR below min.insync.replicas is refused)
			}
			if code != 0 {
				sp.ErrorCode = code
				continue
			}
			t := p.Tablet()
			tp := t.TopicPartition()
			parallel = parallel && !seen[tp] // a partition twice: its batches in order, one by one
			seen[tp] = true
			o := opts
			o.Sync = o.Sync || r.Acks == -1 && t.Config().DurableAcks
			jobs = append(jobs, appendJob{p: p, data: rp.Records, opts: o, sp: sp, end: ptrTo(int64(-1))})
			total += len(rp.Records)
		}
	}
	if b.txns != nil {
		b.verifyProduce(ctx, r, jobs, h.version >= 12)
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
				b.appendPartition(jb)
			}()
		}
		wg.Wait()
	} else {
		for _, jb := range jobs {
			b.appendPartition(jb)
		}
	}
	b.awaitAcks(ctx, r.Acks, r.TimeoutMillis, jobs)
	for _, mb := range b.leaderHints(h, func(hint func(int16, string, int32, *int32, *int32)) {
		for i := range resp.Topics {
			rt := &resp.Topics[i]
			for j := range rt.Partitions {
				rp := &rt.Partitions[j]
				hint(rp.ErrorCode, rt.Topic, rp.Partition, &rp.CurrentLeader.LeaderID, &rp.CurrentLeader.LeaderEpoch)
			}
		}
	}) {
		resp.Brokers = append(resp.Brokers, kmsg.ProduceResponseBroker{NodeID: mb.NodeID, Host: mb.Host, Port: mb.Port, Rack: mb.Rack})
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
	p    *replica.Partition // its replica, which appends
	data []byte
	opts tablet.AppendOptions
	sp   *kmsg.ProduceResponseTopicPartition
	// end is set to the offset after the last batch appended.
	end *int64
}

// appendPartition appends a partition's batches, one by one (a client
// sends one; Kafka's magic check comes first).
func (b *Broker) appendPartition(jb appendJob) {
	data, opts, sp := jb.data, jb.opts, jb.sp
	if sp.ErrorCode != 0 {
		return // (refused by its transaction's coordinator)
	}
	first := true
	for len(data) > 0 {
		_, n, err := record.ParseHeader(data)
		if err != nil || n > int64(len(data)) {
			if len(data) >= 17 && data[16] != 2 {
				sp.ErrorCode = kerr.UnsupportedForMessageFormat.Code // magic 0 or 1: RecordBatch v2 only
			} else {
				sp.ErrorCode = kerr.CorruptMessage.Code
			}
			return
		}
		res, err := jb.p.AppendAsLeader(data[:n], opts)
		if err != nil {
			sp.ErrorCode = errorCode(err)
			sp.ErrorMessage = errMessage(err)
			var re *record.Error
			if errors.As(err, &re) {
				for _, r := range re.Records { // Kafka's record errors: each refused record's index in its batch
					sp.ErrorRecords = append(sp.ErrorRecords, kmsg.ProduceResponseTopicPartitionErrorRecord{
						RelativeOffset: int32(r.Index), ErrorMessage: kmsg.StringPtr(r.Message)})
				}
			}
			return
		}
		b.metrics.topicIn.WithLabelValues(jb.p.TopicPartition().Topic).Add(float64(n))
		*jb.end = res.LastOffset + 1
		if first {
			sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = res.FirstOffset, res.LogAppendTime, res.LogStartOffset
			first = false
		}
		data = data[n:]
	}
}

// verifyProduce has the partitions of a request's transactional batches
// verified by their transaction's coordinator before anything is appended
// (KIP-890's defence: a transactional batch only for a partition its
// transaction added). From Produce v12 (transactions v2, KIP-890 part 2)
// the producer sends no AddPartitionsToTxn: its batch adds the partition.
// Batches of more than one producer id and epoch are
// INVALID_PRODUCER_ID_MAPPING, as Kafka refuses them.
func (b *Broker) verifyProduce(ctx context.Context, r *kmsg.ProduceRequest, jobs []appendJob, v2 bool) {
	var idx []int
	var tps []checkpoint.TopicPartition
	pid, epoch, mixed := int64(-1), int16(-1), false
	for i, jb := range jobs {
		for data := jb.data; len(data) > 0; {
			h, n, err := record.ParseHeader(data)
			if err != nil || n > int64(len(data)) {
				break // (refused by the append)
			}
			data = data[n:]
			if !h.Attributes.IsTransactional() {
				continue
			}
			if pid >= 0 && (h.ProducerID != pid || h.ProducerEpoch != epoch) {
				mixed = true
			}
			pid, epoch = h.ProducerID, h.ProducerEpoch
			if len(idx) == 0 || idx[len(idx)-1] != i {
				idx, tps = append(idx, i), append(tps, jb.p.TopicPartition())
			}
		}
	}
	if len(idx) == 0 {
		return
	}
	var codes []int16
	if mixed {
		codes = make([]int16, len(idx))
		for k := range codes {
			codes[k] = kerr.InvalidProducerIDMapping.Code
		}
	} else {
		id := ""
		if r.TransactionID != nil {
			id = *r.TransactionID
		}
		codes = b.verifyTxn(ctx, id, pid, epoch, tps, v2)
	}
	for k, i := range idx {
		if codes[k] != 0 {
			jobs[i].sp.ErrorCode = produceVerifyCode(codes[k])
		}
	}
}

// authorizeProduce: a transactional produce needs Write on its
// transactional id (else every partition is
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED), each topic Write.
func (g *guard) authorizeProduce(h header, r *kmsg.ProduceRequest) (kmsg.Response, func(kmsg.Response)) {
	txnOK := g.mayTxn(h, r.TransactionID)
	denied := takeOut(&r.Topics, func(t kmsg.ProduceRequestTopic) int16 {
		if !txnOK {
			return kerr.TransactionalIDAuthorizationFailed.Code
		}
		if unknownTopicID(h.version, t.Topic) {
			return 0 // UNKNOWN_TOPIC_ID, from the handler
		}
		return g.refusal(h, opWrite, resTopic, t.Topic, topicRefused)
	}, func(t kmsg.ProduceRequestTopic, code int16) kmsg.ProduceResponseTopic {
		rt := kmsg.ProduceResponseTopic{Topic: t.Topic, TopicID: t.TopicID}
		for _, p := range t.Partitions {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition, rp.ErrorCode, rp.BaseOffset = p.Partition, code, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		return rt
	})
	return nil, func(resp kmsg.Response) {
		if resp != nil { // acks=0 has none
			resp.(*kmsg.ProduceResponse).Topics = append(resp.(*kmsg.ProduceResponse).Topics, denied...)
		}
	}
}

func ptrTo[T any](v T) *T { return &v }

// awaitAcks completes a produce (a single node's at once): acks=all waits
// for the high watermark to cover what each partition appended, within
// the request's timeout; acks=1 is answered only by a broker still
// certain it leads.
func (b *Broker) awaitAcks(ctx context.Context, acks int16, timeoutMs int32, jobs []appendJob) {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(max(timeoutMs, 0))*time.Millisecond)
	defer cancel()
	for _, jb := range jobs {
		if jb.sp.ErrorCode != 0 || *jb.end < 0 {
			continue
		}
		p := jb.p
		switch {
		case acks == 0:
		case acks == -1:
			jb.sp.ErrorCode = p.AwaitAcks(ctx, *jb.end)
		case !p.Leads():
			jb.sp.ErrorCode = kerr.NotLeaderForPartition.Code
		}
	}
}
