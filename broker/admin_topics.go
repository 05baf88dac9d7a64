package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/tablet"
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
		partitions := rt.NumPartitions
		if len(rt.ReplicaAssignment) > 0 {
			if rt.NumPartitions != -1 || rt.ReplicationFactor != -1 {
				fail(kerr.InvalidRequest.Code, errText("a replica assignment comes with partitions and replication factor -1"))
				continue
			}
			if msg := b.checkAssignment(rt.ReplicaAssignment); msg != nil && !b.clustered() {
				fail(kerr.InvalidReplicaAssignment.Code, msg)
				continue
			}
			partitions = int32(len(rt.ReplicaAssignment))
		}
		if partitions == -1 {
			partitions = b.opts.NumPartitions
		}
		if partitions <= 0 || partitions > b.opts.MaxTopicPartitions {
			fail(kerr.InvalidPartitions.Code, errText("number of partitions %d is not in [1, %d]", partitions, b.opts.MaxTopicPartitions))
			continue
		}
		if rf := rt.ReplicationFactor; rf != -1 && rf != 1 && len(rt.ReplicaAssignment) == 0 && !b.clustered() {
			fail(kerr.InvalidReplicationFactor.Code, errText("replication factor %d is larger than the 1 broker available", rf))
			continue
		}
		cfg := b.m.DefaultConfig()
		var cfgErr error
		for _, c := range rt.Configs {
			if b.clustered() && replicationConfigs[c.Name] != nil {
				if cfgErr = replicationConfigs[c.Name](c.Value); cfgErr != nil {
					break
				}
				continue
			}
			if cfgErr = setTopicConfig(&cfg, c.Name, c.Value); cfgErr != nil {
				break
			}
		}
		if cfgErr != nil {
			fail(kerr.InvalidConfig.Code, errText("%v", cfgErr))
			continue
		}
		create := func() (int16, *string) { return b.createTopicChecked(rt.Topic, partitions, &cfg, r.ValidateOnly, mut) }
		wait := time.Duration(r.TimeoutMillis) * time.Millisecond
		rf := int16(1)
		if b.clustered() {
			if rf = rt.ReplicationFactor; rf == -1 {
				rf = b.opts.Cluster.DefaultReplicationFactor
			}
			var assignment [][]int32
			for _, a := range rt.ReplicaAssignment {
				assignment = append(assignment, a.Replicas)
				rf = int16(len(a.Replicas))
			}
			configs := map[string]string{}
			for _, c := range rt.Configs {
				configs[c.Name] = *c.Value // (set above: a nil value failed)
			}
			create = func() (int16, *string) {
				return b.clusterCreateTopic(rt.Topic, partitions, rf, assignment, configs, r.ValidateOnly, mut, wait)
			}
		}
		if code, msg := create(); code != 0 {
			fail(code, msg)
			continue
		}
		st.NumPartitions, st.ReplicationFactor = partitions, rf
		if id, ok := b.topics.id(rt.Topic); ok {
			st.TopicID = id
		}
		for _, d := range b.describeTopicConfig(rt.Topic, cfg) {
			c := kmsg.NewCreateTopicsResponseTopicConfig()
			c.Name, c.Value, c.ReadOnly, c.Source = d.name, kmsg.StringPtr(d.value), d.readOnly, int8(d.source)
			st.Configs = append(st.Configs, c)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// checkAssignment accepts a manual assignment only of every partition, in
// order, to this broker alone.
func (b *Broker) checkAssignment(as []kmsg.CreateTopicsRequestTopicReplicaAssignment) *string {
	for i, a := range as {
		if a.Partition != int32(i) {
			return errText("the assignment must list partitions 0 to %d in order", len(as)-1)
		}
		if len(a.Replicas) != 1 || a.Replicas[0] != b.opts.NodeID {
			return errText("partition %d: the only broker is %d", a.Partition, b.opts.NodeID)
		}
	}
	return nil
}

// createTopicChecked creates a topic that must not exist, its partitions
// drawn from the request's mutation quota; a failure part way deletes the
// partitions it made (no half-created topic).
func (b *Broker) createTopicChecked(topic string, partitions int32, cfg *tablet.Config, validateOnly bool,
	mut *mutations) (int16, *string) {
	if b.clustered() { // (auto-creation: the defaults)
		return b.clusterCreateTopic(topic, partitions, -1, nil, nil, validateOnly, mut, metadataWriteTimeout)
	}
	b.createMu.Lock()
	defer b.createMu.Unlock()
	if len(b.partitionsOf(topic)) > 0 {
		return kerr.TopicAlreadyExists.Code, errText("topic %q already exists", topic)
	}
	if validateOnly {
		return 0, nil
	}
	if !mut.take(int(partitions)) {
		return kerr.ThrottlingQuotaExceeded.Code, mut.refusal()
	}
	for p := range partitions {
		if _, err := b.m.Create(checkpoint.TopicPartition{Topic: topic, Partition: p}, cfg); err != nil {
			for q := range p {
				_ = b.m.Delete(checkpoint.TopicPartition{Topic: topic, Partition: q})
			}
			b.opts.Logger.Warn("creating a topic", "topic", topic, "err", err)
			return errorCode(err), errMessage(err)
		}
	}
	b.opts.Logger.Info("created a topic", "topic", topic, "partitions", partitions)
	return 0, nil
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

// deleteTopic deletes every partition of a topic, drawn from the
// request's mutation quota.
func (b *Broker) deleteTopic(topic string, mut *mutations, wait time.Duration) (int16, *string) {
	if internalTopics[topic] {
		// The coordinators' own log: deleting it would drop every group.
		return kerr.InvalidTopicException.Code, errText("%s is an internal topic", topic)
	}
	if b.clustered() {
		return b.clusterDeleteTopic(topic, mut, wait)
	}
	b.createMu.Lock()
	defer b.createMu.Unlock()
	parts := b.partitionsOf(topic)
	if len(parts) == 0 {
		return kerr.UnknownTopicOrPartition.Code, errText("topic %q does not exist", topic)
	}
	if !mut.take(len(parts)) {
		return kerr.ThrottlingQuotaExceeded.Code, mut.refusal()
	}
	for _, t := range parts {
		if err := b.m.Delete(t.TopicPartition()); err != nil {
			b.opts.Logger.Warn("deleting a topic", "topic", topic, "err", err)
			return errorCode(err), errMessage(err)
		}
		b.replicas.Forget(t.TopicPartition())
	}
	b.opts.Logger.Info("deleted a topic", "topic", topic, "partitions", len(parts))
	b.metrics.topicIn.DeleteLabelValues(topic)
	b.metrics.topicOut.DeleteLabelValues(topic)
	if b.groups != nil {
		// As Kafka: the groups' offsets of a deleted topic go too.
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
		st.ErrorCode, st.ErrorMessage = b.growTopic(rt, r.ValidateOnly, mut)
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// growTopic adds partitions to a topic, with its config, drawn from the
// request's mutation quota.
func (b *Broker) growTopic(rt kmsg.CreatePartitionsRequestTopic, validateOnly bool, mut *mutations) (int16, *string) {
	if b.clustered() {
		return b.clusterGrowTopic(rt, validateOnly, mut)
	}
	b.createMu.Lock()
	defer b.createMu.Unlock()
	parts := b.partitionsOf(rt.Topic)
	if len(parts) == 0 {
		return kerr.UnknownTopicOrPartition.Code, errText("topic %q does not exist", rt.Topic)
	}
	have := int32(len(parts))
	if rt.Count <= have || rt.Count > b.opts.MaxTopicPartitions {
		return kerr.InvalidPartitions.Code, errText("topic %q has %d partitions; the count must grow, to at most %d", rt.Topic,
			have, b.opts.MaxTopicPartitions)
	}
	if rt.Assignment != nil && int32(len(rt.Assignment)) != rt.Count-have {
		return kerr.InvalidReplicaAssignment.Code, errText("%d new partitions, %d assignments", rt.Count-have, len(rt.Assignment))
	}
	for _, a := range rt.Assignment {
		if len(a.Replicas) != 1 || a.Replicas[0] != b.opts.NodeID {
			return kerr.InvalidReplicaAssignment.Code, errText("the only broker is %d", b.opts.NodeID)
		}
	}
	if validateOnly {
		return 0, nil
	}
	if !mut.take(int(rt.Count - have)) {
		return kerr.ThrottlingQuotaExceeded.Code, mut.refusal()
	}
	cfg := parts[0].Config()
	for p := have; p < rt.Count; p++ {
		if _, err := b.m.Create(checkpoint.TopicPartition{Topic: rt.Topic, Partition: p}, &cfg); err != nil {
			b.opts.Logger.Warn("adding partitions", "topic", rt.Topic, "err", err)
			return errorCode(err), errMessage(err)
		}
	}
	b.opts.Logger.Info("added partitions", "topic", rt.Topic, "from", have, "to", rt.Count)
	return 0, nil
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
