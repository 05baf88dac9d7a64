package broker

import (
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/broker/auth"
	"github.com/seglog/seglog/record"
)

// nullLog is what a null broker keeps: each partition's next offset.
type nullLog struct {
	topics map[string]int32
	mu     sync.Mutex
	next   map[string][]int64
	pid    int64
}

// NewNull returns a broker that speaks the protocol and stores nothing:
// the same connections, framing, pipelining and kmsg decoding as a broker
// on a data directory, but a Produce is answered at once with offsets
// counted in memory (each batch's header is still parsed), Metadata lists
// the given topics, InitProducerId counts, and a Fetch returns no records.
// It is the protocol floor a benchmark compares the broker with (seglog
// bench serve), not a log store.
func NewNull(topics map[string]int32, opts Options) *Broker {
	opts.ensureDefaults()
	nl := &nullLog{topics: topics, next: map[string][]int64{}}
	for t, n := range topics {
		nl.next[t] = make([]int64, n)
	}
	b := &Broker{opts: opts, null: nl, metrics: newMetrics(), conns: map[net.Conn]struct{}{}, stop: make(chan struct{}), clock: time.Now, perIP: map[string]int{},
		quotas: &auth.Quotas{}}
	b.ctx = b.stopContext()
	return b
}

// handleNull answers what a null broker serves.
func (b *Broker) handleNull(req kmsg.Request) kmsg.Response {
	nl := b.null
	switch r := req.(type) {
	case *kmsg.MetadataRequest:
		resp := r.ResponseKind().(*kmsg.MetadataResponse)
		resp.Brokers = []kmsg.MetadataResponseBroker{{NodeID: b.opts.NodeID, Host: b.opts.AdvertisedHost, Port: b.opts.AdvertisedPort}}
		resp.ControllerID = b.opts.NodeID
		for name, n := range nl.topics {
			topic := kmsg.MetadataResponseTopic{Topic: kmsg.StringPtr(name)}
			for p := range n {
				mp := kmsg.NewMetadataResponseTopicPartition()
				mp.Partition, mp.Leader = p, b.opts.NodeID
				mp.Replicas, mp.ISR = []int32{b.opts.NodeID}, []int32{b.opts.NodeID}
				topic.Partitions = append(topic.Partitions, mp)
			}
			resp.Topics = append(resp.Topics, topic)
		}
		return resp
	case *kmsg.ProduceRequest:
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
	case *kmsg.InitProducerIDRequest:
		resp := r.ResponseKind().(*kmsg.InitProducerIDResponse)
		nl.mu.Lock()
		nl.pid++
		resp.ProducerID, resp.ProducerEpoch = nl.pid, 0
		nl.mu.Unlock()
		return resp
	case *kmsg.FetchRequest:
		resp := r.ResponseKind().(*kmsg.FetchResponse)
		for _, rt := range r.Topics {
			st := kmsg.FetchResponseTopic{Topic: rt.Topic}
			for _, rp := range rt.Partitions {
				sp := kmsg.NewFetchResponseTopicPartition()
				sp.Partition, sp.RecordBatches = rp.Partition, []byte{}
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	}
	resp := req.ResponseKind()
	return resp // every other served request: an empty (successful) answer
}
