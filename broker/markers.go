package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/cluster"
	"github.com/seglog/seglog/coordinator/group"
	"github.com/seglog/seglog/coordinator/txn"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/tablet"
)

// Transaction markers: WriteTxnMarkers (a transaction coordinator's
// request to a partition's leader, and kafka-transactions.sh's abort of a
// hanging transaction), and, in a cluster, the coordinator's side that
// sends it to each partition's leader.

func init() {
	register(api{key: 27, min: 0, max: 1, handle: handler((*Broker).writeTxnMarkers),
		rule: clusterRule(kmsg.ACLOperationClusterAction, func(r *kmsg.WriteTxnMarkersRequest) kmsg.Response {
			return answerMarkers(r, func(string, int32) int16 { return kerr.ClusterAuthorizationFailed.Code })
		})})
}

// answerMarkers is the response to r with every partition's code.
func answerMarkers(r *kmsg.WriteTxnMarkersRequest, code func(topic string, p int32) int16) *kmsg.WriteTxnMarkersResponse {
	resp := r.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	for _, m := range r.Markers {
		rm := kmsg.WriteTxnMarkersResponseMarker{ProducerID: m.ProducerID}
		for _, t := range m.Topics {
			rt := kmsg.WriteTxnMarkersResponseMarkerTopic{Topic: t.Topic}
			for _, p := range t.Partitions {
				rt.Partitions = append(rt.Partitions, kmsg.WriteTxnMarkersResponseMarkerTopicPartition{Partition: p, ErrorCode: code(t.Topic, p)})
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
	}
	return resp
}

// writeTxnMarkers writes each marker to its partitions, as their leader:
// appended as the coordinator's (a coordinator epoch older than the last
// one the partition took is TRANSACTION_COORDINATOR_FENCED), answered once
// durable (in a cluster: once the ISR has it, as Kafka appends markers
// with acks=all). A marker on a __consumer_offsets partition settles the
// producer's pending transactional offsets.
func (b *Broker) writeTxnMarkers(ctx context.Context, _ header, r *kmsg.WriteTxnMarkersRequest) *kmsg.WriteTxnMarkersResponse {
	type job struct {
		m    kmsg.WriteTxnMarkersRequestMarker
		tp   checkpoint.TopicPartition
		code int16
	}
	var jobs []*job
	for _, m := range r.Markers {
		for _, t := range m.Topics {
			for _, p := range t.Partitions {
				jobs = append(jobs, &job{m: m, tp: checkpoint.TopicPartition{Topic: t.Topic, Partition: p}})
			}
		}
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, markerWriters)
	for _, j := range jobs {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			j.code = b.writeMarker(ctx, j.tp, j.m.ProducerID, j.m.ProducerEpoch, j.m.CoordinatorEpoch, j.m.Committed)
		}()
	}
	wg.Wait()
	i := 0
	return answerMarkers(r, func(string, int32) int16 { i++; return jobs[i-1].code })
}

// markerWriters bounds the markers one request writes at once.
const markerWriters = 16

// writeMarker writes one transaction marker to partition tp, as its
// leader, and returns Kafka's code.
func (b *Broker) writeMarker(ctx context.Context, tp checkpoint.TopicPartition, pid int64, epoch int16, coordinatorEpoch int32, commit bool) int16 {
	p, code := b.leaderReplica(tp.Topic, tp.Partition, -1, false)
	if code != 0 {
		return code
	}
	if tp.Topic == group.Topic {
		// The marker settles the producer's pending offsets in the
		// partition's groups: not before they are loaded (the coordinator
		// of the transaction tries again), as Kafka's group coordinator
		// refuses it while loading.
		if code := b.groups.OwnsPartition(tp.Partition); code != 0 {
			return code
		}
	}
	marker, err := record.EndTxnMarker{Type: record.MarkerType(commit), ProducerID: pid, ProducerEpoch: epoch, CoordinatorEpoch: coordinatorEpoch,
		Timestamp: time.Now().UnixMilli()}.AppendTo(nil)
	if err != nil {
		return kerr.InvalidRequest.Code
	}
	res, err := p.AppendAsLeader(marker, tablet.AppendOptions{Origin: record.OriginCoordinator, Sync: true})
	if err != nil {
		b.opts.Logger.Warn("writing a transaction marker", "partition", tp.String(), "producer_id", pid, "err", err)
		return errorCode(err)
	}
	if code := awaitISR(ctx, p, res.LastOffset+1); code != 0 { // (at once on a single node)
		return code
	}
	if tp.Topic == group.Topic {
		b.groups.OnMarker(tp, pid, commit)
	}
	return 0
}

// clusterMarkers writes a cluster's transaction markers for the
// coordinator (txn.ClusterHooks.WriteMarkers); b is set once the broker
// is made.
type clusterMarkers struct{ b *Broker }

// markerAttempt bounds one EndTxn's attempt to write its markers; what is
// left after it the coordinator retries in the background.
const markerAttempt = 5 * time.Second

// write sends a transaction's markers to the leaders of its partitions
// (this broker's own appended here), again while a leader is missing,
// moving or behind on replicas, until they are written or markerAttempt
// has passed; a fenced coordinator stops at once.
func (cm *clusterMarkers) write(m txn.Markers) []error {
	b := cm.b
	errs := make([]error, len(m.Partitions))
	pending := make([]int, len(m.Partitions))
	for i := range pending {
		pending[i] = i
	}
	ctx, cancel := context.WithTimeout(b.ctx, markerAttempt)
	defer cancel()
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		changed := b.opts.Cluster.Member.Changed()
		s := b.opts.Cluster.Member.Snapshot()
		byLeader := map[int32][]int{}
		for _, i := range pending {
			tp := m.Partitions[i]
			st, ok := s.Partition(tp.Topic, tp.Partition)
			switch {
			case !ok:
				errs[i] = nil // the topic is gone: its marker is dropped, as Kafka does
			case st.Leader == cluster.NoLeader:
				errs[i] = fmt.Errorf("broker: the marker of producer %d on %s: the partition has no leader", m.ProducerID, tp)
			default:
				byLeader[st.Leader] = append(byLeader[st.Leader], i)
			}
		}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for leader, idx := range byLeader {
			wg.Add(1)
			go func() {
				defer wg.Done()
				codes, err := cm.send(ctx, leader, m, idx)
				mu.Lock()
				defer mu.Unlock()
				for k, i := range idx {
					switch {
					case err != nil:
						errs[i] = fmt.Errorf("broker: the marker of producer %d on %s (leader %d): %w", m.ProducerID, m.Partitions[i], leader, err)
					case codes[k] != 0:
						errs[i] = fmt.Errorf("broker: the marker of producer %d on %s (leader %d): %w", m.ProducerID, m.Partitions[i], leader, kerr.ErrorForCode(codes[k]))
					default:
						errs[i] = nil
					}
				}
			}()
		}
		wg.Wait()
		pending = pending[:0]
		for i, err := range errs {
			if err == nil {
				continue
			}
			if errors.Is(err, kerr.TransactionCoordinatorFenced) {
				return errs // a newer coordinator has the transaction
			}
			pending = append(pending, i)
		}
		if len(pending) == 0 {
			return errs
		}
		select {
		case <-ctx.Done():
			return errs
		case <-changed:
		case <-time.After(wait):
		}
	}
}

// send writes the markers of m's partitions idx, all led by leader:
// here, or by WriteTxnMarkers to it. It returns their codes in idx's
// order.
func (cm *clusterMarkers) send(ctx context.Context, leader int32, m txn.Markers, idx []int) ([]int16, error) {
	b := cm.b
	codes := make([]int16, len(idx))
	if leader == b.opts.NodeID {
		for k, i := range idx {
			codes[k] = b.writeMarker(ctx, m.Partitions[i], m.ProducerID, m.ProducerEpoch, m.CoordinatorEpoch, m.Commit)
		}
		return codes, nil
	}
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.SetVersion(1)
	wm := kmsg.WriteTxnMarkersRequestMarker{ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch,
		Committed: m.Commit, CoordinatorEpoch: m.CoordinatorEpoch}
	for _, i := range idx {
		tp := m.Partitions[i]
		if n := len(wm.Topics); n == 0 || wm.Topics[n-1].Topic != tp.Topic {
			wm.Topics = append(wm.Topics, kmsg.WriteTxnMarkersRequestMarkerTopic{Topic: tp.Topic})
		}
		last := &wm.Topics[len(wm.Topics)-1]
		last.Partitions = append(last.Partitions, tp.Partition)
	}
	req.Markers = []kmsg.WriteTxnMarkersRequestMarker{wm}
	kresp, err := b.replicas.Send(ctx, leader, req)
	if err != nil {
		return nil, err
	}
	got := map[checkpoint.TopicPartition]int16{}
	for _, rm := range kresp.(*kmsg.WriteTxnMarkersResponse).Markers {
		for _, rt := range rm.Topics {
			for _, rp := range rt.Partitions {
				got[checkpoint.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}] = rp.ErrorCode
			}
		}
	}
	for k, i := range idx {
		code, ok := got[m.Partitions[i]]
		if !ok {
			code = kerr.UnknownServerError.Code // (an answer without the partition)
		}
		codes[k] = code
	}
	return codes, nil
}
