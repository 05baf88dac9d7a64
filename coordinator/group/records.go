package group

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/coordinator/internal/store"
)

// Topic is Kafka's internal topic of committed offsets and group metadata.
const Topic = "__consumer_offsets"

// Record types: the int16 a __consumer_offsets key starts with (its
// version). 0 and 1 are offset commits, 2 is group metadata.
const (
	keyOffsetV0 = 0
	keyOffsetV1 = 1
	keyGroup    = 2
)

// PartitionFor is the __consumer_offsets partition holding a group, by
// Kafka's rule: abs(groupId.hashCode()) % partitions, with Java's String
// hash over UTF-16 code units and Kafka's abs (MinInt32 is 0).
func PartitionFor(groupID string, partitions int32) int32 {
	return store.PartitionFor(groupID, partitions)
}

// offsetKey encodes an offset commit's key (version 1, as Kafka writes it).
func offsetKey(group, topic string, partition int32) []byte {
	k := kmsg.OffsetCommitKey{Version: keyOffsetV1, Group: group, Topic: topic, Partition: partition}
	return k.AppendTo(nil)
}

// groupKey encodes a group metadata key.
func groupKey(group string) []byte {
	k := kmsg.GroupMetadataKey{Version: keyGroup, Group: group}
	return k.AppendTo(nil)
}

// offsetValue encodes a committed offset: version 3, or version 1 when the
// commit carries its own expiry (OffsetCommit v2–v4 with a retention
// time), as Kafka writes them.
func offsetValue(o Offset) []byte {
	v := kmsg.NewOffsetCommitValue()
	v.Version, v.Offset, v.LeaderEpoch, v.Metadata, v.CommitTimestamp = 3, o.Offset, o.LeaderEpoch, o.Metadata, o.CommitTimestamp
	if o.ExpireTimestamp >= 0 {
		v.Version, v.ExpireTimestamp = 1, o.ExpireTimestamp
	}
	return v.AppendTo(nil)
}

// groupValue encodes a group's metadata (version 3).
func groupValue(g *group) []byte {
	v := kmsg.NewGroupMetadataValue()
	v.Version = 3
	v.ProtocolType = g.protocolType
	v.Generation = g.generation
	if g.protocol != "" {
		v.Protocol = kmsg.StringPtr(g.protocol)
	}
	if g.leader != "" {
		v.Leader = kmsg.StringPtr(g.leader)
	}
	v.CurrentStateTimestamp = g.stateTime
	for _, id := range g.order {
		m := g.members[id]
		gm := kmsg.NewGroupMetadataValueMember()
		gm.MemberID, gm.ClientID, gm.ClientHost = m.id, m.clientID, m.clientHost
		if m.instanceID != "" {
			gm.InstanceID = kmsg.StringPtr(m.instanceID)
		}
		gm.RebalanceTimeoutMillis = int32(m.rebalanceTimeout.Milliseconds())
		gm.SessionTimeoutMillis = int32(m.sessionTimeout.Milliseconds())
		gm.Subscription = m.metadataFor(g.protocol)
		gm.Assignment = m.assignment
		if gm.Subscription == nil {
			gm.Subscription = []byte{}
		}
		if gm.Assignment == nil {
			gm.Assignment = []byte{}
		}
		v.Members = append(v.Members, gm)
	}
	return v.AppendTo(nil)
}

// Decoded is one __consumer_offsets record, decoded: an offset commit (or
// its deletion) or a group's metadata (or its deletion).
type Decoded struct {
	Group string
	// Offset commits: Topic, Partition, and Offset unless deleted.
	IsOffset  bool
	Topic     string
	Partition int32
	Offset    *kmsg.OffsetCommitValue
	// Group metadata, unless deleted.
	Metadata *kmsg.GroupMetadataValue
	// A consumer group's record (KIP-848), or its tombstone.
	Consumer *ConsumerRecord
}

// Decode decodes a __consumer_offsets record; a nil value is a deletion
// (tombstone). A key of an unknown type is an error, as are bytes that do
// not parse.
func Decode(key, value []byte) (Decoded, error) {
	if len(key) < 2 {
		return Decoded{}, fmt.Errorf("group: a %d-byte key has no record type", len(key))
	}
	switch typ := int16(binary.BigEndian.Uint16(key)); typ {
	case keyOffsetV0, keyOffsetV1:
		var k kmsg.OffsetCommitKey
		if err := k.ReadFrom(key); err != nil {
			return Decoded{}, fmt.Errorf("group: offset commit key: %w", err)
		}
		d := Decoded{Group: k.Group, IsOffset: true, Topic: k.Topic, Partition: k.Partition}
		if value != nil {
			v, err := readOffsetValue(value)
			if err != nil {
				return Decoded{}, fmt.Errorf("group: offset commit value of %s %s-%d: %w", k.Group, k.Topic, k.Partition, err)
			}
			d.Offset = &v
		}
		return d, nil
	case keyGroup:
		var k kmsg.GroupMetadataKey
		if err := k.ReadFrom(key); err != nil {
			return Decoded{}, fmt.Errorf("group: group metadata key: %w", err)
		}
		d := Decoded{Group: k.Group}
		if value != nil {
			v := kmsg.NewGroupMetadataValue()
			if err := v.ReadFrom(value); err != nil {
				return Decoded{}, fmt.Errorf("group: group metadata value of %s: %w", k.Group, err)
			}
			// The members' bytes alias value (kmsg's strings are
			// copies): a load keeps them past the read buffer's reuse.
			for i := range v.Members {
				m := &v.Members[i]
				m.Subscription, m.Assignment = bytes.Clone(m.Subscription), bytes.Clone(m.Assignment)
			}
			d.Metadata = &v
		}
		return d, nil
	case keyConsumerGroup, keyConsumerPartitions, keyConsumerMember, keyConsumerTargetEpoch, keyConsumerTargetMember,
		keyConsumerCurrentAssigment, keyConsumerRegex:
		group, rec, err := decodeConsumer(typ, key, value)
		if err != nil {
			return Decoded{}, err
		}
		return Decoded{Group: group, Consumer: rec}, nil
	default:
		return Decoded{}, fmt.Errorf("group: unknown record type %d", typ)
	}
}

// readOffsetValue reads an offset commit's value, of any version (the
// leader epoch -1 before version 3, which has none).
func readOffsetValue(value []byte) (kmsg.OffsetCommitValue, error) {
	v := kmsg.NewOffsetCommitValue()
	if err := v.ReadFrom(value); err != nil {
		return v, err
	}
	if v.Version < 3 {
		v.LeaderEpoch = -1
	}
	return v, nil
}

// OffsetRecord returns the __consumer_offsets record of a committed offset
// (key and value) as the coordinator writes it, in the group's partition
// PartitionFor gives: for tools and benchmarks that write the topic
// directly.
func OffsetRecord(group, topic string, partition int32, o Offset) (key, value []byte) {
	return offsetKey(group, topic, partition), offsetValue(o)
}

// EmptyGroupRecord returns the metadata record of an empty group of the
// protocol type, at its generation, empty since stateTime (ms).
func EmptyGroupRecord(id, protocolType string, generation int32, stateTime int64) (key, value []byte) {
	g := &group{id: id, protocolType: protocolType, generation: generation, stateTime: stateTime}
	return groupKey(id), groupValue(g)
}
