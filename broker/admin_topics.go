package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/cluster"
)

// The topic admin APIs: topics created, deleted and grown, records
// deleted — all on the manager's tablets.

func init() {
	register(
		api{key: 19, min: 0, max: 7, handle: handler((*Broker).createTopics),
			rule: ruleFor(ruleTopic, opCreate, (*guard).authorizeCreateTopics)},
		api{key: 20, min: 0, max: 6, handle: handler((*Broker).deleteTopics),
			rule: ruleFor(ruleTopic, opDelete, (*guard).authorizeDeleteTopics)},
		api{key: 37, min: 0, max: 3, handle: handler((*Broker).createPartitions),
			rule: ruleFor(ruleTopic, opAlter, (*guard).authorizeCreatePartitions)},
		api{key: 21, min: 0, max: 2, handle: handler((*Broker).deleteRecords),
			rule: ruleFor(ruleTopic, opDelete, (*guard).authorizeDeleteRecords)},
	)
}

func (b *Broker) createTopics(_ context.Context, h header, r *kmsg.CreateTopicsRequest) *kmsg.CreateTopicsResponse {
	resp := r.ResponseKind().(*kmsg.CreateTopicsResponse)
	mut := b.limits.mutations(h, r.GetVersion() >= 6)
	defer mut.finish(resp)
	seen := map[string]int{}
	for _, rt := range r.Topics {
		seen[rt.Topic]++
	}
	for _, rt := range r.Topics {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		st.NumPartitions, st.ReplicationFactor = -1, -1
		fail := func(code int16, msg *string) {
			st.ErrorCode, st.ErrorMessage = code, msg
			resp.Topics = append(resp.Topics, st)
		}
		if seen[rt.Topic] > 1 {
			fail(kerr.InvalidRequest.Code, errText("topic %q is given %d times", rt.Topic, seen[rt.Topic]))
			continue
		}
		if err := checkpoint.ValidateTopic(rt.Topic); err != nil {
			fail(kerr.InvalidTopicException.Code, errMessage(err))
			continue
		}
		spec := cluster.TopicSpec{Name: rt.Topic, Partitions: int(rt.NumPartitions), ReplicationFactor: int(rt.ReplicationFactor)}
		if len(rt.ReplicaAssignment) > 0 {
			if rt.NumPartitions != -1 || rt.ReplicationFactor != -1 {
				fail(kerr.InvalidRequest.Code, errText("a replica assignment comes with partitions and replication factor -1"))
				continue
			}
			var msg *string
			if spec.Assignment, msg = assignmentOf(rt.ReplicaAssignment); msg != nil {
				fail(kerr.InvalidReplicaAssignment.Code, msg)
				continue
			}
			spec.Partitions, spec.ReplicationFactor = len(spec.Assignment), len(spec.Assignment[0])
		}
		if spec.Partitions == -1 {
			spec.Partitions = int(b.opts.NumPartitions)
		}
		if spec.Partitions <= 0 || spec.Partitions > int(b.opts.MaxTopicPartitions) {
			fail(kerr.InvalidPartitions.Code, errText("number of partitions %d is not in [1, %d]", spec.Partitions, b.opts.MaxTopicPartitions))
			continue
		}
		if spec.ReplicationFactor == -1 {
			spec.ReplicationFactor = int(b.cat.defaultReplicationFactor())
		}
		cfg := b.m.DefaultConfig()
		var cfgErr error
		for _, c := range rt.Configs {
			if cfgErr = b.cat.setConfig(&cfg, c.Name, c.Value); cfgErr != nil {
				break
			}
			if spec.Configs == nil {
				spec.Configs = map[string]string{}
			}
			spec.Configs[c.Name] = *c.Value // (a nil value failed)
		}
		if cfgErr != nil {
			fail(kerr.InvalidConfig.Code, errText("%v", cfgErr))
			continue
		}
		wait := time.Duration(r.TimeoutMillis) * time.Millisecond
		if code, msg := b.cat.createTopic(spec, cfg, r.ValidateOnly, mut, wait); code != 0 {
			fail(code, msg)
			continue
		}
		st.NumPartitions, st.ReplicationFactor = int32(spec.Partitions), int16(spec.ReplicationFactor)
		if id, ok := b.topics.id(rt.Topic); ok {
			st.TopicID = id
		}
		for _, d := range b.configs.describeTopicConfig(rt.Topic, cfg) {
			c := kmsg.NewCreateTopicsResponseTopicConfig()
			c.Name, c.Value, c.ReadOnly, c.Source = d.name, kmsg.StringPtr(d.value), d.readOnly, int8(d.source)
			st.Configs = append(st.Configs, c)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// assignmentOf is a CreateTopics replica assignment by partition: its
// partitions must be 0 to n-1 (in any order), as Kafka requires.
func assignmentOf(as []kmsg.CreateTopicsRequestTopicReplicaAssignment) ([][]int32, *string) {
	out := make([][]int32, len(as))
	for _, a := range as {
		if a.Partition < 0 || int(a.Partition) >= len(as) || out[a.Partition] != nil {
			return nil, errText("partitions should be a consecutive 0-based integer sequence")
		}
		out[a.Partition] = a.Replicas
		if out[a.Partition] == nil {
			out[a.Partition] = []int32{}
		}
	}
	return out, nil
}

func (b *Broker) deleteTopics(_ context.Context, h header, r *kmsg.DeleteTopicsRequest) *kmsg.DeleteTopicsResponse {
	resp := r.ResponseKind().(*kmsg.DeleteTopicsResponse)
	mut := b.limits.mutations(h, r.GetVersion() >= 5)
	defer mut.finish(resp)
	type target struct {
		name *string
		id   [16]byte
	}
	var targets []target
	for _, n := range r.TopicNames {
		targets = append(targets, target{name: kmsg.StringPtr(n)})
	}
	for _, t := range r.Topics {
		targets = append(targets, target{name: t.Topic, id: t.TopicID})
	}
	for _, tg := range targets {
		st := kmsg.NewDeleteTopicsResponseTopic()
		st.Topic, st.TopicID = tg.name, tg.id
		name := ""
		if tg.name != nil {
			name = *tg.name
		} else if n, ok := b.topics.name(tg.id); ok {
			name, st.Topic = n, kmsg.StringPtr(n)
		} else {
			st.ErrorCode, st.ErrorMessage = kerr.UnknownTopicID.Code, errText("no topic has that id")
			resp.Topics = append(resp.Topics, st)
			continue
		}
		st.ErrorCode, st.ErrorMessage = b.deleteTopic(name, mut, time.Duration(r.TimeoutMillis)*time.Millisecond)
		if st.ErrorCode == 0 {
			st.ErrorMessage = nil
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// deleteTopic deletes a topic, drawn from the request's mutation quota;
// as Kafka, the metrics of the topic and the groups' offsets of it go too.
func (b *Broker) deleteTopic(topic string, mut *mutations, wait time.Duration) (int16, *string) {
	if internalTopics[topic] {
		// The coordinators' own log: deleting it would drop every group.
		return kerr.InvalidTopicException.Code, errText("%s is an internal topic", topic)
	}
	code, msg := b.cat.deleteTopic(topic, mut, wait)
	if code != 0 {
		return code, msg
	}
	b.metrics.topicIn.DeleteLabelValues(topic)
	b.metrics.topicOut.DeleteLabelValues(topic)
	if b.groups != nil {
		// (Of the groups this broker coordinates.)
		if err := b.groups.RemoveTopicOffsets(topic); err != nil {
			b.opts.Logger.Warn("deleting the committed offsets of a deleted topic", "topic", topic, "err", err)
		}
	}
	return 0, nil
}

func (b *Broker) createPartitions(_ context.Context, h header, r *kmsg.CreatePartitionsRequest) *kmsg.CreatePartitionsResponse {
	resp := r.ResponseKind().(*kmsg.CreatePartitionsResponse)
	mut := b.limits.mutations(h, r.GetVersion() >= 3)
	defer mut.finish(resp)
	for _, rt := range r.Topics {
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic = rt.Topic
		var assignment [][]int32
		for _, a := range rt.Assignment {
			assignment = append(assignment, a.Replicas)
		}
		st.ErrorCode, st.ErrorMessage = b.cat.growTopic(rt.Topic, rt.Count, assignment, r.ValidateOnly, mut)
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

func (b *Broker) deleteRecords(ctx context.Context, _ header, r *kmsg.DeleteRecordsRequest) *kmsg.DeleteRecordsResponse {
	resp := r.ResponseKind().(*kmsg.DeleteRecordsResponse)
	ctx, cancel := context.WithTimeout(ctx, time.Duration(max(r.TimeoutMillis, 0))*time.Millisecond)
	defer cancel()
	for _, rt := range r.Topics {
		st := kmsg.DeleteRecordsResponseTopic{Topic: rt.Topic}
		for _, rp := range rt.Partitions {
			sp := kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition, sp.LowWatermark = rp.Partition, -1
			p, code := b.leaderReplica(rt.Topic, rp.Partition, -1, false)
			switch {
			case code != 0:
				sp.ErrorCode = code
			default:
				t := p.Tablet()
				o := t.Offsets()
				offset := rp.Offset
				if offset == -1 {
					offset = o.HighWatermark // -1: everything committed
				}
				if offset < 0 || offset > o.HighWatermark {
					sp.ErrorCode = kerr.OffsetOutOfRange.Code
					break
				}
				start, err := t.DeleteRecordsBefore(offset)
				sp.ErrorCode, sp.LowWatermark = errorCode(err), start
				if err != nil {
					sp.LowWatermark = -1
				} else {
					// It is answered once every in-sync replica has deleted
					// too (Kafka's delayed DeleteRecords; a single node's at
					// once), with their least log start.
					sp.LowWatermark, sp.ErrorCode = p.AwaitLowWatermark(ctx, start)
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// authorizeCreateTopics: Create on the cluster, or else on each topic.
func (g *guard) authorizeCreateTopics(h header, r *kmsg.CreateTopicsRequest) (kmsg.Response, func(kmsg.Response)) {
	cluster := g.mayCluster(h, opCreate)
	denied := takeOut(&r.Topics, func(t kmsg.CreateTopicsRequestTopic) int16 {
		if cluster {
			return 0
		}
		return g.refusal(h, opCreate, resTopic, t.Topic, topicRefused)
	}, func(t kmsg.CreateTopicsRequestTopic, code int16) kmsg.CreateTopicsResponseTopic {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic, rt.ErrorCode = t.Topic, code
		return rt
	})
	return nil, func(resp kmsg.Response) {
		c := resp.(*kmsg.CreateTopicsResponse)
		for i := range c.Topics {
			// A created topic's configs (v5+) only for a principal that
			// may describe them, as Kafka answers.
			if c.Topics[i].Configs != nil && !g.may(h, opDescribeConfigs, resTopic, c.Topics[i].Topic) {
				c.Topics[i].Configs, c.Topics[i].ConfigErrorCode = nil, kerr.TopicAuthorizationFailed.Code
			}
		}
		c.Topics = append(c.Topics, denied...)
	}
}

// authorizeDeleteTopics: Delete on each topic, named or (v6) by its id.
func (g *guard) authorizeDeleteTopics(h header, r *kmsg.DeleteTopicsRequest) (kmsg.Response, func(kmsg.Response)) {
	answer := func(name string, code int16) kmsg.DeleteTopicsResponseTopic {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic, rt.ErrorCode = kmsg.StringPtr(name), code
		return rt
	}
	denied := takeOut(&r.TopicNames, func(name string) int16 { return g.refusal(h, opDelete, resTopic, name, topicRefused) }, answer)
	name := func(t kmsg.DeleteTopicsRequestTopic) (string, bool) { // v6: by name or by id
		if t.Topic != nil {
			return *t.Topic, true
		}
		return g.topics.name(t.TopicID)
	}
	denied = append(denied, takeOut(&r.Topics, func(t kmsg.DeleteTopicsRequestTopic) int16 {
		n, ok := name(t)
		if !ok {
			return 0 // an unknown id: the handler answers UNKNOWN_TOPIC_ID
		}
		return g.refusal(h, opDelete, resTopic, n, topicRefused)
	}, func(t kmsg.DeleteTopicsRequestTopic, code int16) kmsg.DeleteTopicsResponseTopic {
		n, _ := name(t)
		rt := answer(n, code)
		rt.TopicID = t.TopicID
		return rt
	})...)
	return nil, func(resp kmsg.Response) {
		d := resp.(*kmsg.DeleteTopicsResponse)
		d.Topics = append(d.Topics, denied...)
	}
}

// authorizeCreatePartitions: Alter on each topic.
func (g *guard) authorizeCreatePartitions(h header, r *kmsg.CreatePartitionsRequest) (kmsg.Response, func(kmsg.Response)) {
	denied := takeOut(&r.Topics, func(t kmsg.CreatePartitionsRequestTopic) int16 {
		return g.refusal(h, opAlter, resTopic, t.Topic, topicRefused)
	}, func(t kmsg.CreatePartitionsRequestTopic, code int16) kmsg.CreatePartitionsResponseTopic {
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic, rt.ErrorCode = t.Topic, code
		return rt
	})
	return nil, func(resp kmsg.Response) {
		c := resp.(*kmsg.CreatePartitionsResponse)
		c.Topics = append(c.Topics, denied...)
	}
}

// authorizeDeleteRecords: Delete on each topic.
func (g *guard) authorizeDeleteRecords(h header, r *kmsg.DeleteRecordsRequest) (kmsg.Response, func(kmsg.Response)) {
	denied := takeOut(&r.Topics, func(t kmsg.DeleteRecordsRequestTopic) int16 {
		return g.refusal(h, opDelete, resTopic, t.Topic, topicRefused)
	}, func(t kmsg.DeleteRecordsRequestTopic, code int16) kmsg.DeleteRecordsResponseTopic {
		rt := kmsg.DeleteRecordsResponseTopic{Topic: t.Topic}
		for _, p := range t.Partitions {
			rp := kmsg.NewDeleteRecordsResponseTopicPartition()
			rp.Partition, rp.LowWatermark, rp.ErrorCode = p.Partition, -1, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		return rt
	})
	return nil, func(resp kmsg.Response) {
		d := resp.(*kmsg.DeleteRecordsResponse)
		d.Topics = append(d.Topics, denied...)
	}
}
