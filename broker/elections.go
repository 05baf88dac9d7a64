package broker

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/cluster"
)

// ElectLeaders (KIP-460): preferred and unclean leader elections, behind
// Alter on the cluster, as kafka-leader-election.sh asks for them.

func init() {
	register(api{key: 43, min: 0, max: 2, handle: handler((*Broker).electLeaders),
		rule: clusterRule(opAlter, func(r *kmsg.ElectLeadersRequest) kmsg.Response {
			return electionAnswer(r, nil, kerr.ClusterAuthorizationFailed.Code)
		})})
}

// electLeaders answers ElectLeaders: the catalog holds the elections (a
// single node's partitions need none, their only replica leads them).
func (b *Broker) electLeaders(ctx context.Context, _ header, r *kmsg.ElectLeadersRequest) *kmsg.ElectLeadersResponse {
	typ := cluster.ElectionType(r.ElectionType)
	if typ != cluster.PreferredElection && typ != cluster.UncleanElection {
		return electionAnswer(r, nil, kerr.InvalidRequest.Code)
	}
	var asked []cluster.TopicPartition
	if r.Topics != nil {
		asked = []cluster.TopicPartition{}
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				asked = append(asked, cluster.TopicPartition{Topic: t.Topic, Partition: p})
			}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(max(r.TimeoutMillis, 1))*time.Millisecond)
	defer cancel()
	out, err := b.cat.electLeaders(ctx, typ, asked)
	if err != nil {
		return electionAnswer(r, nil, clusterCode(err))
	}
	return electionAnswer(r, out, 0)
}

// electionAnswer is the response: each asked partition's outcome from out
// (or code, when the request failed as a whole: every named partition
// gets it, and v1+ its top-level error code), or, asked for every
// partition, each partition out names.
func electionAnswer(r *kmsg.ElectLeadersRequest, out map[cluster.TopicPartition]error, code int16) *kmsg.ElectLeadersResponse {
	resp := r.ResponseKind().(*kmsg.ElectLeadersResponse)
	if code != 0 {
		if r.Version >= 1 {
			resp.ErrorCode = code
		}
		for _, t := range r.Topics {
			rt := kmsg.NewElectLeadersResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rt.Partitions = append(rt.Partitions, kmsg.ElectLeadersResponseTopicPartition{Partition: p, ErrorCode: code})
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	byTopic := map[string]int{}
	add := func(tp cluster.TopicPartition, err error) {
		rt := topicEntry(&resp.Topics, byTopic, tp.Topic, func() kmsg.ElectLeadersResponseTopic {
			return kmsg.ElectLeadersResponseTopic{Topic: tp.Topic}
		})
		rp := kmsg.ElectLeadersResponseTopicPartition{Partition: tp.Partition}
		if err != nil {
			rp.ErrorCode, rp.ErrorMessage = errorCode(err), errMessage(err)
		}
		rt.Partitions = append(rt.Partitions, rp)
	}
	if r.Topics != nil {
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				tp := cluster.TopicPartition{Topic: t.Topic, Partition: p}
				add(tp, out[tp])
			}
		}
		return resp
	}
	for _, tp := range sortedPartitions(out) {
		add(tp, out[tp])
	}
	return resp
}

// sortedPartitions lists out's partitions by topic, then partition.
func sortedPartitions(out map[cluster.TopicPartition]error) []cluster.TopicPartition {
	tps := slices.Collect(maps.Keys(out))
	slices.SortFunc(tps, func(a, b cluster.TopicPartition) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return tps
}

// topicEntry is topic's entry of a response's list, appended (mk) the
// first time; byTopic indexes the list by topic. The pointer holds until
// the list grows again.
func topicEntry[T any](list *[]T, byTopic map[string]int, topic string, mk func() T) *T {
	i, ok := byTopic[topic]
	if !ok {
		i = len(*list)
		byTopic[topic] = i
		*list = append(*list, mk())
	}
	return &(*list)[i]
}
