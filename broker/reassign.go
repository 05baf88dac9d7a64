package broker

import (
	"context"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog"
)

// Partition reassignments (KIP-455): AlterPartitionReassignments behind
// Alter on the cluster, ListPartitionReassignments behind Describe, as
// kafka-reassign-partitions.sh uses them.

func init() {
	register(
		api{key: 45, min: 0, max: 1, handle: handler((*Broker).alterReassignments),
			rule: clusterRule(opAlter, func(r *kmsg.AlterPartitionAssignmentsRequest) kmsg.Response {
				resp := r.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
				resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
				return resp
			})},
		api{key: 46, min: 0, max: 0, handle: handler((*Broker).listReassignments),
			rule: clusterRule[*kmsg.ListPartitionReassignmentsRequest](opDescribe, nil)},
	)
}

// ErrReplicationFactorChange is a reassignment changing the number of
// replicas when the request does not allow it (KIP-860).
var ErrReplicationFactorChange = seglog.NewKafkaError("broker: the reassignment changes the replication factor", 38) // INVALID_REPLICATION_FACTOR

// alterReassignments answers AlterPartitionReassignments: each partition's
// reassignment started (or, with no replicas, cancelled) in etcd, in
// order; a single node has nothing to move (its one replica stays).
func (b *Broker) alterReassignments(ctx context.Context, _ header, r *kmsg.AlterPartitionAssignmentsRequest) *kmsg.AlterPartitionAssignmentsResponse {
	resp := r.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	resp.AllowReplicationFactorChange = r.Version < 1 || r.AllowReplicationFactorChange
	ctx, cancel := context.WithTimeout(ctx, time.Duration(max(r.TimeoutMillis, 1))*time.Millisecond)
	defer cancel()
	for _, t := range r.Topics {
		rt := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			rp.Partition = p.Partition
			if err := b.cat.reassign(ctx, t.Topic, p.Partition, p.Replicas, resp.AllowReplicationFactorChange); err != nil {
				rp.ErrorCode, rp.ErrorMessage = clusterCode(err), errMessage(err)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// listReassignments answers ListPartitionReassignments: the partitions
// being reassigned, of every topic or of those named.
func (b *Broker) listReassignments(_ context.Context, _ header, r *kmsg.ListPartitionReassignmentsRequest) *kmsg.ListPartitionReassignmentsResponse {
	resp := r.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	var asked map[string][]int32
	if r.Topics != nil {
		asked = map[string][]int32{}
		for _, t := range r.Topics {
			asked[t.Topic] = append(asked[t.Topic], t.Partitions...)
		}
	}
	byTopic := map[string]int{}
	for _, ra := range b.cat.snapshot().Reassignments() {
		if ps, ok := asked[ra.Topic]; asked != nil && (!ok || !slices.Contains(ps, ra.Partition)) {
			continue
		}
		rt := topicEntry(&resp.Topics, byTopic, ra.Topic, func() kmsg.ListPartitionReassignmentsResponseTopic {
			return kmsg.ListPartitionReassignmentsResponseTopic{Topic: ra.Topic}
		})
		rp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
		rp.Partition, rp.Replicas = ra.Partition, ra.Replicas
		rp.AddingReplicas, rp.RemovingReplicas = nonNil(ra.Adding), nonNil(ra.Removing)
		rt.Partitions = append(rt.Partitions, rp)
	}
	return resp
}

// nonNil is s, or an empty list (the wire's arrays are not nullable).
func nonNil(s []int32) []int32 {
	if s == nil {
		return []int32{}
	}
	return s
}
