package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/seglog/seglog"
)

var (
	// ErrTopicExists is returned by CreateTopic for a name taken.
	ErrTopicExists = seglog.NewKafkaError("cluster: topic already exists", 36) // TOPIC_ALREADY_EXISTS
	// ErrUnknownTopic is returned for a topic (or id) the metadata lacks.
	ErrUnknownTopic = seglog.NewKafkaError("cluster: unknown topic", 3) // UNKNOWN_TOPIC_OR_PARTITION
	// ErrInvalidAssignment is returned for an explicit assignment that
	// names an unregistered broker, a broker twice, or partitions of
	// different sizes.
	ErrInvalidAssignment = seglog.NewKafkaError("cluster: invalid replica assignment", 39) // INVALID_REPLICA_ASSIGNMENT
	// ErrStaleState is returned by AlterPartition when the partition's
	// state is not the one the caller read (another change won), or the
	// caller's session is not the one registered.
	ErrStaleState = seglog.NewKafkaError("cluster: the partition state changed", 95) // INVALID_UPDATE_VERSION
)

// TopicSpec is a topic to create.
type TopicSpec struct {
	Name string
	// Partitions and ReplicationFactor are used when Assignment is nil.
	Partitions        int
	ReplicationFactor int
	// Assignment, if set, is each partition's replicas, the first the
	// preferred leader.
	Assignment [][]int32
	Configs    map[string]string
}

// Placement returns where the spec's replicas go: its assignment,
// checked, or Kafka's placement over the live brokers.
func (s *Snapshot) Placement(spec TopicSpec, firstPartition int, start int) ([][]int32, error) {
	if spec.Assignment != nil {
		rf := -1
		for p, rs := range spec.Assignment {
			if len(rs) == 0 || rf >= 0 && len(rs) != rf {
				return nil, fmt.Errorf("%w: partition %d has %d replicas", ErrInvalidAssignment, p, len(rs))
			}
			rf = len(rs)
			for i, r := range rs {
				if _, ok := s.Brokers[r]; !ok {
					return nil, fmt.Errorf("%w: broker %d of partition %d is not registered", ErrInvalidAssignment, r, p)
				}
				if slices.Contains(rs[:i], r) {
					return nil, fmt.Errorf("%w: broker %d twice in partition %d", ErrInvalidAssignment, r, p)
				}
			}
		}
		return spec.Assignment, nil
	}
	var brokers []Placed
	for _, id := range s.BrokerIDs() {
		if b := s.Brokers[id]; !b.ShuttingDown {
			brokers = append(brokers, Placed{ID: id, Rack: b.Rack})
		}
	}
	return Place(brokers, spec.Partitions, spec.ReplicationFactor, firstPartition, start, nil)
}

// initialState is a new partition's state: its first live replica leads,
// its live replicas are the ISR.
func initialState(s *Snapshot, replicas []int32) PartitionState {
	st := PartitionState{Leader: NoLeader}
	for _, r := range replicas {
		if s.Live(r) {
			st.ISR = append(st.ISR, r)
			if st.Leader == NoLeader {
				st.Leader = r
			}
		}
	}
	if st.ISR == nil {
		st.ISR = slices.Clone(replicas)
	}
	return st
}

// creationOps are the puts that create t's partitions from first on
// (their initial states) with t itself: a key each, or, when they are
// more than one etcd transaction holds (etcd's --max-txn-ops), their
// states in t.Initial and no keys (each gets its key at its first change).
func (m *Member) creationOps(snap *Snapshot, t *Topic, first int) ([]clientv3.Op, error) {
	var keys []clientv3.Op
	if added := len(t.Replicas) - first; added+1 > maxTxnOps-1 { // (a compare too)
		t.Initial = append(t.Initial, make([]PartitionState, max(0, first-len(t.Initial)))...)[:first]
		for _, rs := range t.Replicas[first:] {
			t.Initial = append(t.Initial, initialState(snap, rs))
		}
	} else {
		for p := first; p < len(t.Replicas); p++ {
			st, err := json.Marshal(initialState(snap, t.Replicas[p]))
			if err != nil {
				return nil, err
			}
			keys = append(keys, clientv3.OpPut(m.prefix+partitionKey(t.Name, int32(p)), string(st)))
		}
	}
	put, err := m.topicPut(t)
	if err != nil {
		return nil, err
	}
	return append([]clientv3.Op{put}, keys...), nil
}

// topicPut is the put of t's key.
func (m *Member) topicPut(t *Topic) (clientv3.Op, error) {
	val, err := json.Marshal(t)
	if err != nil {
		return clientv3.Op{}, err
	}
	return clientv3.OpPut(m.prefix+keyTopics+t.Name, string(val)), nil
}

// rewriteTopic writes topic name's key again with ops, which write gives
// from the snapshot and the topic's state in it, in a transaction
// comparing that state and whatever else write asks to compare (read
// again after a race); it returns once this broker's snapshot has the
// write.
func (m *Member) rewriteTopic(ctx context.Context, name, doing string, write func(s *Snapshot, t *TopicState) ([]clientv3.Op, []clientv3.Cmp, error)) (*TopicState, error) {
	for {
		snap := m.Snapshot()
		t, ok := snap.Topics[name]
		if !ok {
			return nil, fmt.Errorf("%w: %s", ErrUnknownTopic, name)
		}
		ops, cmps, err := write(snap, t)
		if err != nil {
			return nil, err
		}
		key := m.prefix + keyTopics + name
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(key), "=", t.rev))
		resp, err := m.cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
		if err != nil {
			return nil, fmt.Errorf("cluster: %s %s: %w", doing, name, err)
		}
		if err := m.Await(ctx, resp.Header.Revision); err != nil {
			return nil, err
		}
		if resp.Succeeded {
			return m.Snapshot().Topics[name], nil
		}
	}
}

// CreateTopic creates a topic with a new id, placing its replicas, in one
// transaction that fails if the name is taken; it returns once this
// broker's snapshot shows the topic.
func (m *Member) CreateTopic(ctx context.Context, spec TopicSpec) (*TopicState, error) {
	snap := m.Snapshot()
	replicas, err := snap.Placement(spec, 0, -1)
	if err != nil {
		return nil, err
	}
	t := Topic{Name: spec.Name, ID: NewTopicID(), Replicas: replicas, Configs: spec.Configs}
	key := m.prefix + keyTopics + spec.Name
	ops, err := m.creationOps(snap, &t, 0)
	if err != nil {
		return nil, err
	}
	resp, err := m.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).Then(ops...).Commit()
	if err != nil {
		return nil, fmt.Errorf("cluster: creating topic %s: %w", spec.Name, err)
	}
	if !resp.Succeeded {
		return nil, fmt.Errorf("%w: %s", ErrTopicExists, spec.Name)
	}
	if err := m.Await(ctx, resp.Header.Revision); err != nil {
		return nil, err
	}
	ts, ok := m.Snapshot().Topics[spec.Name]
	if !ok || ts.ID != t.ID {
		return nil, fmt.Errorf("%w: %s was deleted at once", ErrUnknownTopic, spec.Name)
	}
	return ts, nil
}

// DeleteTopic deletes a topic and its partitions' states, if its id is
// id (any id when id is zero).
func (m *Member) DeleteTopic(ctx context.Context, name string, id TopicID) error {
	for {
		t, ok := m.Snapshot().Topics[name]
		if !ok || id != (TopicID{}) && t.ID != id {
			return fmt.Errorf("%w: %s", ErrUnknownTopic, name)
		}
		key := m.prefix + keyTopics + name
		resp, err := m.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", t.rev)).
			Then(clientv3.OpDelete(key), clientv3.OpDelete(m.prefix+keyPartitions+name+"/", clientv3.WithPrefix()),
				clientv3.OpDelete(m.prefix+keyTiers+name+"/", clientv3.WithPrefix())).
			Else(clientv3.OpGet(key)).Commit()
		if err != nil {
			return fmt.Errorf("cluster: deleting topic %s: %w", name, err)
		}
		if resp.Succeeded {
			return m.Await(ctx, resp.Header.Revision)
		}
		// Changed since the snapshot: look again once the snapshot has it.
		if err := m.Await(ctx, resp.Header.Revision); err != nil {
			return err
		}
	}
}

// CreatePartitions grows a topic to count partitions, the new ones placed
// by assignment (or Kafka's placement, starting where partition 0's
// leader is in the broker list, as Kafka does).
func (m *Member) CreatePartitions(ctx context.Context, name string, count int, assignment [][]int32) (*TopicState, error) {
	return m.rewriteTopic(ctx, name, "creating partitions of", func(snap *Snapshot, t *TopicState) ([]clientv3.Op, []clientv3.Cmp, error) {
		have := len(t.Replicas)
		if count <= have {
			return nil, nil, fmt.Errorf("%w: topic %s has %d partitions, not fewer than %d", ErrInvalidAssignment, name, have, count)
		}
		start := 0
		if ids := snap.BrokerIDs(); len(t.Replicas) > 0 {
			start = max(0, slices.IndexFunc(ids, func(id int32) bool { return id >= t.Replicas[0][0] }))
		}
		spec := TopicSpec{Name: name, Partitions: count - have, ReplicationFactor: len(t.Replicas[0]), Assignment: assignment}
		if assignment != nil && len(assignment) != count-have {
			return nil, nil, fmt.Errorf("%w: %d partitions assigned for %d new ones", ErrInvalidAssignment, len(assignment), count-have)
		}
		added, err := snap.Placement(spec, have, start)
		if err != nil {
			return nil, nil, err
		}
		nt := t.Topic
		nt.Replicas = append(slices.Clone(t.Replicas), added...)
		nt.Configs, nt.Initial = maps.Clone(t.Configs), slices.Clone(t.Initial)
		ops, err := m.creationOps(snap, &nt, have)
		return ops, nil, err
	})
}

// AlterTopicConfigs sets a topic's configs in the cluster (the keys
// set explicitly; what is not there takes the brokers' defaults); it
// returns once this broker's snapshot has them. Every broker's replicas
// take them from there.
func (m *Member) AlterTopicConfigs(ctx context.Context, name string, configs map[string]string) (*TopicState, error) {
	return m.rewriteTopic(ctx, name, "altering the configs of", func(_ *Snapshot, t *TopicState) ([]clientv3.Op, []clientv3.Cmp, error) {
		nt := t.Topic
		nt.Configs = maps.Clone(configs)
		put, err := m.topicPut(&nt)
		return []clientv3.Op{put}, nil, err
	})
}

// AlterPartition writes a partition's new ISR as its leader (Kafka's
// AlterPartition): it must be this broker, leased, with the state from
// the snapshot; the write compares that state and this broker's
// registration, so a deposed leader or a stale state gets ErrStaleState.
func (m *Member) AlterPartition(ctx context.Context, topic string, p int32, from PartitionState, isr []int32, minISR int) (PartitionState, error) {
	if from.Leader != m.opts.NodeID || !m.Leased() {
		return from, fmt.Errorf("%w: %s-%d is not led by node %d in a live session", ErrStaleState, topic, p, m.opts.NodeID)
	}
	if !slices.Contains(isr, from.Leader) {
		return from, fmt.Errorf("%w: the ISR %v leaves out its leader", ErrInvalidAssignment, isr)
	}
	snap := m.Snapshot()
	for _, r := range isr {
		if !from.InISR(r) && !snap.Live(r) {
			return from, fmt.Errorf("%w: broker %d is not live and may not join the ISR", ErrInvalidAssignment, r)
		}
	}
	to := from.next()
	var replicas []int32
	if t, ok := snap.Topics[topic]; ok && int(p) < len(t.Replicas) {
		replicas = t.Replicas[p]
	}
	setISR(snap, replicas, from, &to, isr, minISR)
	val, err := json.Marshal(to)
	if err != nil {
		return from, err
	}
	key := m.prefix + partitionKey(topic, p)
	me := m.prefix + keyBrokers + strconv.Itoa(int(m.opts.NodeID))
	resp, err := m.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", from.rev),
		clientv3.Compare(clientv3.LeaseValue(me), "=", m.lease.Load())).
		Then(clientv3.OpPut(key, string(val))).Commit()
	if err != nil {
		return from, fmt.Errorf("cluster: altering %s-%d: %w", topic, p, err)
	}
	if !resp.Succeeded {
		return from, fmt.Errorf("%w: %s-%d at partition epoch %d", ErrStaleState, topic, p, from.PartitionEpoch)
	}
	if err := m.Await(ctx, resp.Header.Revision); err != nil {
		return from, err
	}
	to.rev, to.written = resp.Header.Revision, resp.Header.Revision
	return to, nil
}

// ProducerIDs reserves a block of n producer ids no other broker is
// given, and returns its first.
func (m *Member) ProducerIDs(ctx context.Context, n int64) (int64, error) {
	key := m.prefix + keyProducerIDs
	for {
		resp, err := m.cli.Get(ctx, key)
		if err != nil {
			return 0, fmt.Errorf("cluster: reading the producer ids: %w", err)
		}
		next, rev := int64(0), int64(0)
		if len(resp.Kvs) == 1 {
			if next, err = strconv.ParseInt(string(resp.Kvs[0].Value), 10, 64); err != nil {
				return 0, fmt.Errorf("cluster: key %s: %w", key, err)
			}
			rev = resp.Kvs[0].ModRevision
		}
		tr, err := m.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
			Then(clientv3.OpPut(key, strconv.FormatInt(next+n, 10))).Commit()
		if err != nil {
			return 0, fmt.Errorf("cluster: reserving producer ids: %w", err)
		}
		if tr.Succeeded {
			return next, nil
		}
	}
}
