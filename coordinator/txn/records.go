package txn

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/checkpoint"
)

// Topic is Kafka's internal topic of transaction state.
const Topic = "__transaction_state"

// key encodes a transaction's key (TransactionLogKey v0).
func key(id string) []byte {
	k := kmsg.TxnMetadataKey{Version: 0, TransactionalID: id}
	return k.AppendTo(nil)
}

// value encodes a transaction's state as Kafka writes it: the partitions
// only while the transaction holds them. After a transactions-v2 EndTxn it
// is TransactionLogValue v1, whose tagged fields carry what a retry of
// that EndTxn is recognised by after a restart: ClientTransactionVersion 2
// (the epoch before is the current one less one) and PreviousProducerId
// when the producer moved to a new id; v0 otherwise.
func (t *txnMeta) value() []byte {
	v := kmsg.NewTxnMetadataValue()
	v.Version = 0
	if t.prevEpoch >= 0 {
		v.Version, v.ClientTransactionVersion = 1, 2
		if t.prevPID != t.pid {
			v.PreviousProducerID = t.prevPID
		}
	}
	v.ProducerID, v.ProducerEpoch = t.pid, t.epoch
	v.TimeoutMillis = int32(t.timeout.Milliseconds())
	v.State = t.state
	v.LastUpdateTimestamp, v.StartTimestamp = t.updated, t.start
	byTopic := map[string][]int32{}
	for tp := range t.parts {
		byTopic[tp.Topic] = append(byTopic[tp.Topic], tp.Partition)
	}
	topics := make([]string, 0, len(byTopic))
	for topic := range byTopic {
		topics = append(topics, topic)
	}
	slices.Sort(topics)
	for _, topic := range topics {
		ps := byTopic[topic]
		slices.Sort(ps)
		v.Topics = append(v.Topics, kmsg.TxnMetadataValueTopic{Topic: topic, Partitions: ps})
	}
	return v.AppendTo(nil)
}

// Decoded is one __transaction_state record, decoded; Value is nil for a
// tombstone.
type Decoded struct {
	TransactionalID string
	Value           *kmsg.TxnMetadataValue
}

// Decode decodes a __transaction_state record.
func Decode(k, v []byte) (Decoded, error) {
	if len(k) < 2 {
		return Decoded{}, fmt.Errorf("txn: a %d-byte key has no version", len(k))
	}
	if ver := int16(binary.BigEndian.Uint16(k)); ver != 0 {
		return Decoded{}, fmt.Errorf("txn: unknown key version %d", ver)
	}
	var dk kmsg.TxnMetadataKey
	if err := dk.ReadFrom(k); err != nil {
		return Decoded{}, fmt.Errorf("txn: key: %w", err)
	}
	d := Decoded{TransactionalID: dk.TransactionalID}
	if v != nil {
		dv := kmsg.NewTxnMetadataValue()
		if err := dv.ReadFrom(v); err != nil {
			return Decoded{}, fmt.Errorf("txn: value of %q: %w", dk.TransactionalID, err)
		}
		d.Value = &dv
	}
	return d, nil
}

func partitionsOf(v *kmsg.TxnMetadataValue) map[checkpoint.TopicPartition]bool {
	out := map[checkpoint.TopicPartition]bool{}
	for _, t := range v.Topics {
		for _, p := range t.Partitions {
			out[checkpoint.TopicPartition{Topic: t.Topic, Partition: p}] = true
		}
	}
	return out
}
