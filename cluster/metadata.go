package cluster

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// Endpoint is one of a broker's listeners as clients reach it.
type Endpoint struct {
	Listener         string `json:"listener"`
	SecurityProtocol string `json:"security_protocol"`
	Host             string `json:"host"`
	Port             int32  `json:"port"`
}

// Broker is a registered broker: its key lives as long as its session
// lease, so a broker in the snapshot is a live one.
type Broker struct {
	ID        int32      `json:"id"`
	Rack      string     `json:"rack,omitempty"`
	Endpoints []Endpoint `json:"endpoints"`
	// Incarnation is random for each start of the broker.
	Incarnation string `json:"incarnation"`
	// ShuttingDown is set by a controlled shutdown: the controller moves
	// the broker's leaderships away and takes it out of every ISR.
	ShuttingDown bool `json:"shutting_down,omitempty"`
	// Fenced is set at registration: a new incarnation may not lead nor be
	// in an ISR until the controller has taken it in — re-elected every
	// partition its previous incarnation led at a new leader epoch and,
	// after an unclean shutdown, taken it out of every ISR and ELR — and
	// unfenced it (docs/cluster.md §2).
	Fenced bool `json:"fenced,omitempty"`
	// CleanShutdown says whether the broker's data directory was closed
	// cleanly before this incarnation opened it (KIP-966): a broker that
	// was not may have lost records it had acknowledged to its leader.
	CleanShutdown bool `json:"clean_shutdown,omitempty"`
	// Directory is the data directory's id (meta.properties directory.id):
	// a broker restarted on the same directory takes over its previous
	// incarnation's registration at once (the directory's lock says that
	// incarnation is gone); another directory under the same node id
	// waits for it to expire.
	Directory string `json:"directory,omitempty"`
	// Epoch is the broker's session lease, new at each registration
	// (Kafka's broker epoch); Registered the registration's etcd revision:
	// a partition state older than it was written for an earlier
	// incarnation.
	Epoch      int64 `json:"-"`
	Registered int64 `json:"-"`
}

// Endpoint returns the broker's endpoint on listener name.
func (b Broker) Endpoint(listener string) (Endpoint, bool) {
	for _, e := range b.Endpoints {
		if e.Listener == listener {
			return e, true
		}
	}
	return Endpoint{}, false
}

// TopicID is a topic's id, a Kafka Uuid.
type TopicID [16]byte

// NewTopicID returns a random id, never the zero one.
func NewTopicID() TopicID {
	for {
		var id TopicID
		_, _ = rand.Read(id[:])
		if id != (TopicID{}) {
			return id
		}
	}
}

// String is Kafka's form of a Uuid: URL-safe base64 without padding.
func (id TopicID) String() string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// MarshalText encodes the id as String does.
func (id TopicID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// UnmarshalText decodes String's form.
func (id *TopicID) UnmarshalText(b []byte) error {
	raw, err := base64.RawURLEncoding.DecodeString(string(b))
	if err != nil || len(raw) != len(id) {
		return fmt.Errorf("cluster: bad topic id %q", b)
	}
	copy(id[:], raw)
	return nil
}

// Topic is a topic's record: its id, replica assignment (the replicas of
// partition p are Replicas[p], the first the preferred leader) and the
// configs set on it.
type Topic struct {
	Name     string            `json:"name"`
	ID       TopicID           `json:"id"`
	Replicas [][]int32         `json:"replicas"`
	Configs  map[string]string `json:"configs,omitempty"`
	// Initial are the first states of partitions created without a key of
	// their own (more of them at once than one etcd transaction holds):
	// such a partition's state until its first change writes its key.
	Initial []PartitionState `json:"initial,omitempty"`
}

// NoLeader is the leader of a partition that has none.
const NoLeader int32 = -1

// PartitionState is a partition's leadership: written by the controller
// (elections) and by the leader (ISR changes), each write comparing the
// partition epoch it read.
type PartitionState struct {
	Leader      int32   `json:"leader"`
	LeaderEpoch int32   `json:"leader_epoch"`
	ISR         []int32 `json:"isr"`
	// PartitionEpoch goes up by one at every change of the state.
	PartitionEpoch int32 `json:"partition_epoch"`
	// Adding and Removing are a reassignment's replicas (KIP-455): while
	// one is in progress the topic's replicas of the partition are the
	// target's followed by those being removed; it completes once every
	// target replica is in the ISR.
	Adding   []int32 `json:"adding,omitempty"`
	Removing []int32 `json:"removing,omitempty"`
	// ELR are the Eligible Leader Replicas (KIP-966): while the ISR is
	// below min.insync.replicas, the replicas that left it since — each
	// holds every record below the high watermark, which does not move
	// while the ISR is that small — and may lead when the ISR is empty.
	// LastKnownELR is the last leader of a partition left without one
	// (shown by DescribeTopicPartitions; an unclean election prefers it).
	ELR          []int32 `json:"elr,omitempty"`
	LastKnownELR []int32 `json:"last_known_elr,omitempty"`
	// rev is the state's key's mod revision: a write compares it, which
	// is comparing the partition epoch (each write moves both); written is
	// the revision the state was written at (the topic key's for a state
	// of the topic's Initial).
	rev, written int64
}

// Written is the etcd revision the state was written at: a broker
// registered later (Broker.Registered) never acts on a leadership
// written before it.
func (s PartitionState) Written() int64 { return s.written }

// InELR reports whether broker id is an eligible leader replica.
func (s PartitionState) InELR(id int32) bool { return slices.Contains(s.ELR, id) }

// next is the state's next version: the same, at the next partition
// epoch (its slices its own).
func (s PartitionState) next() PartitionState {
	n := s
	n.ISR, n.Adding, n.Removing = slices.Clone(s.ISR), slices.Clone(s.Adding), slices.Clone(s.Removing)
	n.ELR, n.LastKnownELR = slices.Clone(s.ELR), slices.Clone(s.LastKnownELR)
	n.PartitionEpoch++
	n.rev, n.written = 0, 0
	return n
}

// Reassigning reports whether a reassignment of the partition is in
// progress.
func (s PartitionState) Reassigning() bool { return len(s.Adding) > 0 || len(s.Removing) > 0 }

// InISR reports whether broker id is in the ISR.
func (s PartitionState) InISR(id int32) bool { return slices.Contains(s.ISR, id) }

// TopicState is a topic with its partitions' states.
type TopicState struct {
	Topic
	// Partitions holds each partition's state, by partition.
	Partitions []PartitionState
	rev        int64
}

// Snapshot is the cluster's metadata at one etcd revision, as a broker's
// watch has seen it. It is never changed: a change makes a new one.
type Snapshot struct {
	// Revision is the etcd revision the snapshot reflects.
	Revision int64
	// Brokers are the registered (live) brokers.
	Brokers map[int32]Broker
	// Controller is the node id of the controller, or -1 while there is
	// none; ControllerEpoch goes up with each new controller.
	Controller      int32
	ControllerEpoch int64
	Topics          map[string]*TopicState
	byID            map[TopicID]string
	// candidates are the controller election's keys: create revision and
	// node id.
	candidates map[string]candidate
	// Docs are the cluster's documents (the SCRAM credentials, the ACLs,
	// the client quotas, the dynamic broker configs) by name.
	Docs map[string]Doc
	// Tiers are the partitions' published tier manifests (tiers.go).
	Tiers map[TopicPartition]TierPointer
}

// Doc is one of the cluster's documents: its bytes and its key's mod
// revision, which a change compares.
type Doc struct {
	Value []byte
	Rev   int64
}

type candidate struct {
	rev  int64
	node int32
}

// TopicByID returns the topic with the id.
func (s *Snapshot) TopicByID(id TopicID) (*TopicState, bool) {
	name, ok := s.byID[id]
	if !ok {
		return nil, false
	}
	return s.Topics[name], true
}

// Partition returns a partition's state.
func (s *Snapshot) Partition(topic string, p int32) (PartitionState, bool) {
	t, ok := s.Topics[topic]
	if !ok || p < 0 || int(p) >= len(t.Partitions) {
		return PartitionState{}, false
	}
	return t.Partitions[p], true
}

// Live reports whether broker id is registered, unfenced and not
// shutting down: a broker that may lead and be in an ISR.
func (s *Snapshot) Live(id int32) bool {
	b, ok := s.Brokers[id]
	return ok && !b.ShuttingDown && !b.Fenced
}

// BrokerIDs lists the registered brokers' ids, sorted.
func (s *Snapshot) BrokerIDs() []int32 {
	return slices.Sorted(maps.Keys(s.Brokers))
}

// SingleNode is the metadata of a cluster of one — a single node's, whose
// data directory holds it instead of etcd: broker node, registered and
// live, is the controller, and topics are its topics as they are (their
// replicas and ISR node alone, node their leader). rev is the version
// the topics are at.
func SingleNode(rev int64, node Broker, topics []*TopicState) *Snapshot {
	s := emptySnapshot()
	s.Revision, s.Controller = rev, node.ID
	s.Brokers[node.ID] = node
	for _, t := range topics {
		s.Topics[t.Name], s.byID[t.ID] = t, t.Name
	}
	return s
}

func emptySnapshot() *Snapshot {
	return &Snapshot{Brokers: map[int32]Broker{}, Controller: -1, Topics: map[string]*TopicState{},
		byID: map[TopicID]string{}, candidates: map[string]candidate{}, Docs: map[string]Doc{}, Tiers: map[TopicPartition]TierPointer{}}
}

// The keys under the prefix.
const (
	keyBrokers     = "brokers/"
	keyController  = "controller/"
	keyTopics      = "topics/"
	keyPartitions  = "partitions/"
	keyProducerIDs = "producer-ids"
	keyClusterID   = "cluster-id"
	keyDocs        = "docs/"
)

func partitionKey(topic string, p int32) string {
	return keyPartitions + topic + "/" + strconv.Itoa(int(p))
}

// apply returns the snapshot after the events (or, from an empty one,
// the keys a Get returned, as puts): topics first, so that a partition
// written with its topic in one transaction finds it.
func (s *Snapshot) apply(prefix string, rev int64, events []event) (*Snapshot, []error) {
	n := &Snapshot{Revision: rev, Brokers: s.Brokers, Controller: s.Controller, ControllerEpoch: s.ControllerEpoch,
		Topics: s.Topics, byID: s.byID, candidates: s.candidates, Docs: s.Docs, Tiers: s.Tiers}
	var errs []error
	cloned := map[string]bool{}
	// touch clones what the events change, once: a kind of key, or
	// (keyTopics+name) one topic's partitions; it reports whether it did.
	touch := func(which string) bool {
		if cloned[which] {
			return false
		}
		cloned[which] = true
		switch which {
		case keyBrokers:
			n.Brokers = maps.Clone(s.Brokers)
		case keyController:
			n.candidates = maps.Clone(s.candidates)
		case keyDocs:
			n.Docs = maps.Clone(s.Docs)
		case keyTiers:
			n.Tiers = maps.Clone(s.Tiers)
		case keyTopics:
			n.Topics, n.byID = maps.Clone(s.Topics), maps.Clone(s.byID)
		}
		return true
	}
	for pass := range 2 {
		for _, e := range events {
			key, ok := strings.CutPrefix(string(e.kv.Key), prefix)
			if !ok {
				continue
			}
			isPartition := strings.HasPrefix(key, keyPartitions)
			if isPartition != (pass == 1) {
				continue
			}
			if err := n.applyOne(key, e, touch); err != nil {
				errs = append(errs, fmt.Errorf("cluster: key %s%s at revision %d: %w", prefix, key, e.kv.ModRevision, err))
			}
		}
	}
	if cloned[keyController] {
		n.Controller, n.ControllerEpoch = -1, 0
		for _, c := range n.candidates {
			if n.Controller == -1 || c.rev < n.ControllerEpoch {
				n.Controller, n.ControllerEpoch = c.node, c.rev
			}
		}
	}
	return n, errs
}

// event is a put or delete of a key.
type event struct {
	delete bool
	kv     *mvccpb.KeyValue
}

func (n *Snapshot) applyOne(key string, e event, touch func(string) bool) error {
	switch {
	case strings.HasPrefix(key, keyBrokers):
		touch(keyBrokers)
		id, err := strconv.ParseInt(strings.TrimPrefix(key, keyBrokers), 10, 32)
		if err != nil {
			return err
		}
		if e.delete {
			delete(n.Brokers, int32(id))
			return nil
		}
		var b Broker
		if err := json.Unmarshal(e.kv.Value, &b); err != nil {
			return err
		}
		b.ID, b.Epoch, b.Registered = int32(id), e.kv.Lease, e.kv.CreateRevision
		n.Brokers[b.ID] = b
	case strings.HasPrefix(key, keyController):
		touch(keyController)
		if e.delete {
			delete(n.candidates, key)
			return nil
		}
		id, err := strconv.ParseInt(string(e.kv.Value), 10, 32)
		if err != nil {
			return err
		}
		n.candidates[key] = candidate{rev: e.kv.CreateRevision, node: int32(id)}
	case strings.HasPrefix(key, keyTiers):
		return n.applyTier(key, e, touch)
	case strings.HasPrefix(key, keyDocs):
		touch(keyDocs)
		name := strings.TrimPrefix(key, keyDocs)
		if e.delete {
			delete(n.Docs, name)
			return nil
		}
		n.Docs[name] = Doc{Value: e.kv.Value, Rev: e.kv.ModRevision}
	case strings.HasPrefix(key, keyTopics):
		touch(keyTopics)
		name := strings.TrimPrefix(key, keyTopics)
		if old, ok := n.Topics[name]; ok {
			delete(n.byID, old.ID)
		}
		if e.delete {
			delete(n.Topics, name)
			return nil
		}
		t := &TopicState{rev: e.kv.ModRevision}
		if err := json.Unmarshal(e.kv.Value, &t.Topic); err != nil {
			return err
		}
		t.Name = name
		t.Partitions = make([]PartitionState, len(t.Replicas))
		if old, ok := n.Topics[name]; ok && old.ID == t.ID {
			copy(t.Partitions, old.Partitions)
		}
		for i := range t.Partitions {
			switch {
			case t.Partitions[i].ISR != nil || t.Partitions[i].rev != 0:
			case i < len(t.Initial) && t.Initial[i].ISR != nil:
				t.Partitions[i] = t.Initial[i] // (rev 0: its key does not exist)
				t.Partitions[i].written = e.kv.ModRevision
			default:
				t.Partitions[i].Leader = NoLeader
			}
		}
		n.Topics[name], n.byID[t.ID] = t, name
		touch(keyTopics + name) // (new: its partitions are its own)
	case strings.HasPrefix(key, keyPartitions):
		rest := strings.TrimPrefix(key, keyPartitions)
		i := strings.LastIndexByte(rest, '/')
		if i < 0 {
			return fmt.Errorf("no partition number")
		}
		name := rest[:i]
		p, err := strconv.ParseInt(rest[i+1:], 10, 32)
		if err != nil {
			return err
		}
		t, ok := n.Topics[name]
		if e.delete || !ok || int(p) >= len(t.Partitions) {
			return nil // (deleted with its topic, in the same transaction)
		}
		var st PartitionState
		if err := json.Unmarshal(e.kv.Value, &st); err != nil {
			return err
		}
		st.rev, st.written = e.kv.ModRevision, e.kv.ModRevision
		touch(keyTopics)
		if touch(keyTopics + name) {
			c := *t
			c.Partitions = slices.Clone(t.Partitions)
			t = &c
			n.Topics[name] = t
		}
		t.Partitions[p] = st
	}
	return nil
}
