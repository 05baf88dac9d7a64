package broker

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/tablet"
)

// ListOffsets and OffsetForLeaderEpoch: a partition's offsets by time and
// by leader epoch.

func init() {
	register(
		api{key: 2, min: 1, max: 10, handle: handler((*Broker).listOffsets),
			rule: ruleFor(ruleTopic, opDescribe, (*guard).authorizeListOffsets)},
		api{key: 23, min: 0, max: 4, handle: handler((*Broker).offsetForLeaderEpoch),
			rule: ruleFor(ruleTopic, opDescribe, (*guard).authorizeOffsetForLeaderEpoch)},
	)
}

func (b *Broker) listOffsets(ctx context.Context, _ header, r *kmsg.ListOffsetsRequest) *kmsg.ListOffsetsResponse {
	resp := r.ResponseKind().(*kmsg.ListOffsetsResponse)
	if r.GetVersion() >= 10 && r.TimeoutMillis > 0 {
		// KIP-1075: a lookup in the tier is bounded by the request's
		// timeout (REQUEST_TIMED_OUT past it).
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(r.TimeoutMillis)*time.Millisecond)
		defer cancel()
	}
	for _, rt := range r.Topics {
		st := kmsg.ListOffsetsResponseTopic{Topic: rt.Topic}
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			p, code := b.leaderReplica(rt.Topic, rp.Partition, rp.CurrentLeaderEpoch, true)
			if code != 0 {
				sp.ErrorCode = code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			t := p.Tablet()
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
					if found, err := t.OffsetForTimestampContext(ctx, maxTs); err == nil {
						sp.Offset, sp.Timestamp = found.Offset, found.Timestamp
					}
				}
			case -4: // the local log start (KIP-405), from v8
				sp.Offset, sp.Timestamp = o.LocalLogStartOffset, -1
			case -5: // the last offset in the tier (KIP-1005), from v9; -1 for none
				sp.Offset, sp.Timestamp = -1, -1
				if end, ok := t.TieredEnd(); ok && end > 0 {
					sp.Offset = end - 1
				}
			default:
				found, err := t.OffsetForTimestampContext(ctx, rp.Timestamp)
				switch {
				case errors.Is(err, tablet.ErrNoOffsetForTimestamp):
					sp.Offset, sp.Timestamp = -1, -1
				case err != nil && errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil:
					sp.ErrorCode = kerr.RequestTimedOut.Code
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

// offsetForLeaderEpoch answers, per partition, the end offset of the
// largest leader epoch at or below the one asked: the start of the next
// epoch, or the log end for the current one (tablet.EpochEnd, Kafka's
// LeaderEpochFileCache.endOffsetFor).
func (b *Broker) offsetForLeaderEpoch(_ context.Context, _ header, r *kmsg.OffsetForLeaderEpochRequest) *kmsg.OffsetForLeaderEpochResponse {
	resp := r.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	for _, rt := range r.Topics {
		st := kmsg.OffsetForLeaderEpochResponseTopic{Topic: rt.Topic}
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition, sp.LeaderEpoch, sp.EndOffset = rp.Partition, -1, -1
			p, code := b.leaderReplica(rt.Topic, rp.Partition, rp.CurrentLeaderEpoch, false)
			if code != 0 {
				sp.ErrorCode = code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			t := p.Tablet()
			epochs := t.LeaderEpochs()
			current := int32(0)
			if len(epochs) > 0 {
				current = epochs[len(epochs)-1].Epoch
			}
			switch {
			case rp.CurrentLeaderEpoch > current:
				sp.ErrorCode = kerr.UnknownLeaderEpoch.Code
			case rp.CurrentLeaderEpoch >= 0 && rp.CurrentLeaderEpoch < current:
				sp.ErrorCode = kerr.FencedLeaderEpoch.Code
			default:
				sp.LeaderEpoch, sp.EndOffset = t.EpochEnd(rp.LeaderEpoch)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// authorizeListOffsets: Describe on each topic.
func (g *guard) authorizeListOffsets(h header, r *kmsg.ListOffsetsRequest) (kmsg.Response, func(kmsg.Response)) {
	denied := takeOut(&r.Topics, func(t kmsg.ListOffsetsRequestTopic) int16 {
		return g.refusal(h, opDescribe, resTopic, t.Topic, topicRefused)
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
}

// authorizeOffsetForLeaderEpoch: Describe on each topic.
func (g *guard) authorizeOffsetForLeaderEpoch(h header, r *kmsg.OffsetForLeaderEpochRequest) (kmsg.Response, func(kmsg.Response)) {
	denied := takeOut(&r.Topics, func(t kmsg.OffsetForLeaderEpochRequestTopic) int16 {
		return g.refusal(h, opDescribe, resTopic, t.Topic, topicRefused)
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
}
