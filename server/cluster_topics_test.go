package server

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/cluster"
)

// A broker holding no replica of a topic knows it as the cluster does:
// CreateTopics answers the new topic's id, and DeleteTopics by id deletes
// it (both read the broker's data directory before, so the id was zero
// and the deletion UNKNOWN_TOPIC_ID on a broker without a replica).
func TestClusterTopicsWithoutAReplicaHere(t *testing.T) {
	c := newTestCluster(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.servers[2].Listeners()[0].Addr.String()))
	require.NoError(t, err)
	defer cl.Close()
	ask := func(req kmsg.Request) kmsg.Response { // (to broker 2 alone)
		resp, err := cl.SeedBrokers()[0].Request(ctx, req)
		require.NoError(t, err)
		return resp
	}

	create := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "elsewhere", -1, -1
	rt.ReplicaAssignment = []kmsg.CreateTopicsRequestTopicReplicaAssignment{{Partition: 0, Replicas: []int32{1}}}
	create.Topics = append(create.Topics, rt)
	created := ask(create).(*kmsg.CreateTopicsResponse)
	require.NoError(t, kerr.ErrorForCode(created.Topics[0].ErrorCode))
	snap := until(t, c.servers[2].Member(), "knows the topic", func(s *cluster.Snapshot) bool { _, ok := s.Topics["elsewhere"]; return ok })
	id := snap.Topics["elsewhere"].ID
	require.NotZero(t, id)
	require.Equal(t, [16]byte(id), created.Topics[0].TopicID, "the cluster's id, though broker 2 holds no replica")

	del := kmsg.NewPtrDeleteTopicsRequest()
	dt := kmsg.NewDeleteTopicsRequestTopic()
	dt.TopicID = id
	del.Topics = append(del.Topics, dt)
	deleted := ask(del).(*kmsg.DeleteTopicsResponse)
	require.Len(t, deleted.Topics, 1)
	require.NoError(t, kerr.ErrorForCode(deleted.Topics[0].ErrorCode))
	require.Equal(t, "elsewhere", *deleted.Topics[0].Topic)
	until(t, c.servers[1].Member(), "has deleted the topic", func(s *cluster.Snapshot) bool { _, ok := s.Topics["elsewhere"]; return !ok })
}
