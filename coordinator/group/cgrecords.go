package group

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/seglog/seglog/checkpoint"
)

// The records of a consumer group (KIP-848) in __consumer_offsets, in
// Kafka's schemas: a key is its record type (int16) and then its fields
// (not flexible); a value is its version (int16, 0 for all of these) and
// then its fields, flexible (compact strings and arrays, tagged fields).
const (
	keyConsumerGroup            = 3  // ConsumerGroupMetadata: the group epoch
	keyConsumerPartitions       = 4  // ConsumerGroupPartitionMetadata: read and ignored (Kafka 4.1 keeps a hash instead)
	keyConsumerMember           = 5  // ConsumerGroupMemberMetadata
	keyConsumerTargetEpoch      = 6  // ConsumerGroupTargetAssignmentMetadata
	keyConsumerTargetMember     = 7  // ConsumerGroupTargetAssignmentMember
	keyConsumerCurrentAssigment = 8  // ConsumerGroupCurrentMemberAssignment
	keyConsumerRegex            = 16 // ConsumerGroupRegularExpression
)

// TopicPartitions is one topic's partitions in a consumer group record;
// AssignmentEpochs, when set, are the epochs each was assigned at
// (KIP-1251), aligned with Partitions.
type TopicPartitions struct {
	TopicID          checkpoint.TopicID `json:"topicId"`
	Partitions       []int32            `json:"partitions"`
	AssignmentEpochs []int32            `json:"assignmentEpochs,omitempty"`
}

// ClassicProtocol is a classic member's supported protocol.
type ClassicProtocol struct {
	Name     string `json:"name"`
	Metadata []byte `json:"metadata"`
}

// ClassicMemberMetadata is a classic protocol member's part of a consumer
// group (a group migrating between the protocols).
type ClassicMemberMetadata struct {
	SessionTimeoutMs   int32             `json:"sessionTimeoutMs"`
	SupportedProtocols []ClassicProtocol `json:"supportedProtocols"`
}

// ConsumerRecord is one decoded consumer group record: Type says which,
// and the fields of that type are set. Value is false for a tombstone.
type ConsumerRecord struct {
	Type     int16
	MemberID string // 5, 7, 8
	Regex    string // 16
	Value    bool

	// 3
	Epoch          int32
	MetadataHash   int64
	CreationTimeMs int64
	// 5
	InstanceID           *string
	RackID               *string
	ClientID             string
	ClientHost           string
	SubscribedTopicNames []string
	SubscribedTopicRegex *string
	RebalanceTimeoutMs   int32
	ServerAssignor       *string
	Classic              *ClassicMemberMetadata
	// 6
	AssignmentEpoch int32
	// 7
	TopicPartitions []TopicPartitions
	// 8
	MemberEpoch                 int32
	PreviousMemberEpoch         int32
	State                       int8
	AssignedPartitions          []TopicPartitions
	PartitionsPendingRevocation []TopicPartitions
	// 16
	Topics    []string
	Version   int64
	Timestamp int64
}

// wire is an encoder of Kafka's primitive types.
type wire []byte

func (w wire) i8(v int8) wire   { return append(w, byte(v)) }
func (w wire) i16(v int16) wire { return binary.BigEndian.AppendUint16(w, uint16(v)) }
func (w wire) i32(v int32) wire { return binary.BigEndian.AppendUint32(w, uint32(v)) }
func (w wire) i64(v int64) wire { return binary.BigEndian.AppendUint64(w, uint64(v)) }
func (w wire) uv(v int) wire    { return binary.AppendUvarint(w, uint64(v)) }

// str is a non-flexible string (int16 length).
func (w wire) str(s string) wire { return append(w.i16(int16(len(s))), s...) }

// cstr is a compact string; cnstr a compact nullable one.
func (w wire) cstr(s string) wire { return append(w.uv(len(s)+1), s...) }
func (w wire) cnstr(s *string) wire {
	if s == nil {
		return w.uv(0)
	}
	return w.cstr(*s)
}
func (w wire) cbytes(b []byte) wire { return append(w.uv(len(b)+1), b...) }
func (w wire) cstrs(ss []string) wire {
	w = w.uv(len(ss) + 1)
	for _, s := range ss {
		w = w.cstr(s)
	}
	return w
}
func (w wire) ci32s(vs []int32) wire {
	w = w.uv(len(vs) + 1)
	for _, v := range vs {
		w = w.i32(v)
	}
	return w
}

// tag appends one tagged field of the encoded body.
func (w wire) tag(n int, body []byte) wire { return append(w.uv(n).uv(len(body)), body...) }

func (w wire) tps(ts []TopicPartitions) wire {
	w = w.uv(len(ts) + 1)
	for _, t := range ts {
		w = append(w, t.TopicID[:]...)
		w = w.ci32s(t.Partitions)
		if t.AssignmentEpochs != nil {
			w = w.uv(1).tag(0, wire(nil).ci32s(t.AssignmentEpochs))
		} else {
			w = w.uv(0)
		}
	}
	return w
}

// reader decodes Kafka's primitive types; the first error sticks.
type reader struct {
	b   []byte
	err error
}

var errShort = errors.New("record too short")

func (r *reader) take(n int) []byte {
	if r.err != nil || n < 0 || len(r.b) < n {
		if r.err == nil {
			r.err = errShort
		}
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}
func (r *reader) i8() int8 {
	if b := r.take(1); b != nil {
		return int8(b[0])
	}
	return 0
}
func (r *reader) i16() int16 {
	if b := r.take(2); b != nil {
		return int16(binary.BigEndian.Uint16(b))
	}
	return 0
}
func (r *reader) i32() int32 {
	if b := r.take(4); b != nil {
		return int32(binary.BigEndian.Uint32(b))
	}
	return 0
}
func (r *reader) i64() int64 {
	if b := r.take(8); b != nil {
		return int64(binary.BigEndian.Uint64(b))
	}
	return 0
}
func (r *reader) uv() int {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 || v > 1<<30 {
		r.err = errors.New("bad varint")
		return 0
	}
	r.b = r.b[n:]
	return int(v)
}
func (r *reader) str() string { return string(r.take(int(r.i16()))) }

// clen is a compact length: -1 for null.
func (r *reader) clen() int { return r.uv() - 1 }
func (r *reader) cstr() string {
	n := r.clen()
	if n < 0 {
		if r.err == nil {
			r.err = errors.New("null string")
		}
		return ""
	}
	return string(r.take(n))
}
func (r *reader) cnstr() *string {
	n := r.clen()
	if n < 0 {
		return nil
	}
	s := string(r.take(n))
	return &s
}
func (r *reader) cbytes() []byte { return slices.Clone(r.take(max(r.clen(), 0))) }

// carray reads a compact array's length, bounded by what is left (every
// element takes at least a byte).
func (r *reader) carray() int {
	n := r.clen()
	if n > len(r.b) {
		r.err = errShort
		return 0
	}
	return max(n, 0)
}
func (r *reader) cstrs() []string {
	out := []string{}
	for range r.carray() {
		out = append(out, r.cstr())
	}
	return out
}
func (r *reader) ci32s() []int32 {
	out := []int32{}
	for range r.carray() {
		out = append(out, r.i32())
	}
	return out
}

// tags reads tagged fields, handing each known one to f (with a reader of
// its body) and skipping the rest.
func (r *reader) tags(f func(tag int, body *reader)) {
	for range r.uv() {
		tag, size := r.uv(), r.uv()
		body := r.take(size)
		if r.err == nil && f != nil {
			br := &reader{b: body}
			f(tag, br)
			if br.err != nil {
				r.err = br.err
			}
		}
	}
}

func (r *reader) tps() []TopicPartitions {
	var out []TopicPartitions
	for range r.carray() {
		var t TopicPartitions
		copy(t.TopicID[:], r.take(16))
		t.Partitions = r.ci32s()
		r.tags(func(tag int, b *reader) {
			if tag == 0 {
				t.AssignmentEpochs = b.ci32s()
			}
		})
		out = append(out, t)
	}
	return out
}

// consumerKey encodes a consumer group record's key.
func consumerKey(typ int16, group string, more ...string) []byte {
	w := wire(nil).i16(typ).str(group)
	for _, s := range more {
		w = w.str(s)
	}
	return w
}

// consumerValue encodes a consumer group record's value (version 0).
func consumerValue(rec *ConsumerRecord) []byte {
	w := wire(nil).i16(0)
	var tags [][2]any
	switch rec.Type {
	case keyConsumerGroup:
		w = w.i32(rec.Epoch)
		if rec.MetadataHash != 0 {
			tags = append(tags, [2]any{0, wire(nil).i64(rec.MetadataHash)})
		}
		if rec.CreationTimeMs != -1 && rec.CreationTimeMs != 0 {
			tags = append(tags, [2]any{1, wire(nil).i64(rec.CreationTimeMs)})
		}
	case keyConsumerMember:
		w = w.cnstr(rec.InstanceID).cnstr(rec.RackID).cstr(rec.ClientID).cstr(rec.ClientHost).
			cstrs(rec.SubscribedTopicNames).cnstr(rec.SubscribedTopicRegex).i32(rec.RebalanceTimeoutMs).cnstr(rec.ServerAssignor)
		if c := rec.Classic; c != nil {
			// A nullable struct starts with a presence byte (1).
			body := wire(nil).i8(1).i32(c.SessionTimeoutMs).uv(len(c.SupportedProtocols) + 1)
			for _, p := range c.SupportedProtocols {
				body = body.cstr(p.Name).cbytes(p.Metadata).uv(0)
			}
			tags = append(tags, [2]any{0, body.uv(0)})
		}
	case keyConsumerTargetEpoch:
		w = w.i32(rec.AssignmentEpoch)
	case keyConsumerTargetMember:
		w = w.tps(rec.TopicPartitions)
	case keyConsumerCurrentAssigment:
		w = w.i32(rec.MemberEpoch).i32(rec.PreviousMemberEpoch).i8(rec.State).tps(rec.AssignedPartitions).tps(rec.PartitionsPendingRevocation)
	case keyConsumerRegex:
		w = w.cstrs(rec.Topics).i64(rec.Version).i64(rec.Timestamp)
	}
	w = w.uv(len(tags))
	for _, t := range tags {
		w = w.tag(t[0].(int), t[1].(wire))
	}
	return w
}

// record returns the key and value (nil for a tombstone) of rec in group.
func (rec *ConsumerRecord) record(group string) (key, value []byte) {
	switch rec.Type {
	case keyConsumerMember, keyConsumerTargetMember, keyConsumerCurrentAssigment:
		key = consumerKey(rec.Type, group, rec.MemberID)
	case keyConsumerRegex:
		key = consumerKey(rec.Type, group, rec.Regex)
	default:
		key = consumerKey(rec.Type, group)
	}
	if rec.Value {
		value = consumerValue(rec)
	}
	return key, value
}

// decodeConsumer decodes a consumer group record of type typ: the group
// id, and the record (nil value: a tombstone).
func decodeConsumer(typ int16, key, value []byte) (string, *ConsumerRecord, error) {
	kr := &reader{b: key[2:]}
	group := kr.str()
	rec := &ConsumerRecord{Type: typ, Value: value != nil, CreationTimeMs: -1}
	switch typ {
	case keyConsumerMember, keyConsumerTargetMember, keyConsumerCurrentAssigment:
		rec.MemberID = kr.str()
	case keyConsumerRegex:
		rec.Regex = kr.str()
	}
	if kr.err != nil || len(kr.b) != 0 {
		return "", nil, fmt.Errorf("group: consumer group record key of type %d does not parse", typ)
	}
	if value == nil {
		return group, rec, nil
	}
	r := &reader{b: value}
	if v := r.i16(); r.err == nil && v != 0 {
		return "", nil, fmt.Errorf("group: consumer group record of type %d has version %d; seglog reads version 0", typ, v)
	}
	var tagf func(int, *reader)
	switch typ {
	case keyConsumerGroup:
		rec.Epoch = r.i32()
		tagf = func(tag int, b *reader) {
			switch tag {
			case 0:
				rec.MetadataHash = b.i64()
			case 1:
				rec.CreationTimeMs = b.i64()
			}
		}
	case keyConsumerPartitions:
		r.b = nil // not used: skipped whole
	case keyConsumerMember:
		rec.InstanceID, rec.RackID, rec.ClientID, rec.ClientHost = r.cnstr(), r.cnstr(), r.cstr(), r.cstr()
		rec.SubscribedTopicNames, rec.SubscribedTopicRegex = r.cstrs(), r.cnstr()
		rec.RebalanceTimeoutMs, rec.ServerAssignor = r.i32(), r.cnstr()
		tagf = func(tag int, b *reader) {
			if tag != 0 || b.i8() < 0 { // a nullable struct's presence byte: -1 is null
				return
			}
			c := &ClassicMemberMetadata{SessionTimeoutMs: b.i32()}
			for range b.carray() {
				c.SupportedProtocols = append(c.SupportedProtocols, ClassicProtocol{Name: b.cstr(), Metadata: b.cbytes()})
				b.tags(nil)
			}
			b.tags(nil)
			rec.Classic = c
		}
	case keyConsumerTargetEpoch:
		rec.AssignmentEpoch = r.i32()
	case keyConsumerTargetMember:
		rec.TopicPartitions = r.tps()
	case keyConsumerCurrentAssigment:
		rec.MemberEpoch, rec.PreviousMemberEpoch, rec.State = r.i32(), r.i32(), r.i8()
		rec.AssignedPartitions, rec.PartitionsPendingRevocation = r.tps(), r.tps()
	case keyConsumerRegex:
		rec.Topics, rec.Version, rec.Timestamp = r.cstrs(), r.i64(), r.i64()
	}
	if typ != keyConsumerPartitions {
		r.tags(tagf)
	}
	if r.err != nil {
		return "", nil, fmt.Errorf("group: consumer group record of type %d of group %s: %w", typ, group, r.err)
	}
	return group, rec, nil
}
