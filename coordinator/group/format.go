package group

import (
	"encoding/json"
	"fmt"
)

// Format prints a __consumer_offsets record as Kafka's DumpLogSegments
// --offsets-decoder does: the key as {"type":"<record type>","data":{…}},
// the value as {"version":"<version>","data":{…}} with Kafka's field
// names (bytes in base64), or <DELETE> for a tombstone.
func Format(key, value []byte) (string, string, error) {
	d, err := Decode(key, value)
	if err != nil {
		return "", "", err
	}
	type keyJSON struct {
		Type string `json:"type"`
		Data any    `json:"data"`
	}
	type valueJSON struct {
		Version string `json:"version"`
		Data    any    `json:"data"`
	}
	var k keyJSON
	payload := any(nil)
	if rec := d.Consumer; rec != nil {
		key := map[string]string{"groupId": d.Group}
		switch rec.Type {
		case keyConsumerMember, keyConsumerTargetMember, keyConsumerCurrentAssigment:
			key["memberId"] = rec.MemberID
		case keyConsumerRegex:
			key["regularExpression"] = rec.Regex
		}
		k = keyJSON{Type: fmt.Sprint(rec.Type), Data: key}
		if rec.Value {
			payload = valueJSON{Version: "0", Data: consumerJSON(rec)}
		}
	} else if d.IsOffset {
		k = keyJSON{Type: fmt.Sprint(int16(key[0])<<8 | int16(key[1])), Data: struct {
			Group     string `json:"group"`
			Topic     string `json:"topic"`
			Partition int32  `json:"partition"`
		}{d.Group, d.Topic, d.Partition}}
		if v := d.Offset; v != nil {
			data := struct {
				Offset          int64  `json:"offset"`
				LeaderEpoch     *int32 `json:"leaderEpoch,omitempty"`
				Metadata        string `json:"metadata"`
				CommitTimestamp int64  `json:"commitTimestamp"`
				ExpireTimestamp *int64 `json:"expireTimestamp,omitempty"`
			}{Offset: v.Offset, Metadata: v.Metadata, CommitTimestamp: v.CommitTimestamp}
			if v.Version >= 3 {
				data.LeaderEpoch = &v.LeaderEpoch
			}
			if v.Version == 1 {
				data.ExpireTimestamp = &v.ExpireTimestamp
			}
			payload = valueJSON{Version: fmt.Sprint(v.Version), Data: data}
		}
	} else {
		k = keyJSON{Type: fmt.Sprint(keyGroup), Data: struct {
			Group string `json:"group"`
		}{d.Group}}
		if v := d.Metadata; v != nil {
			type memberJSON struct {
				MemberID         string  `json:"memberId"`
				GroupInstanceID  *string `json:"groupInstanceId"`
				ClientID         string  `json:"clientId"`
				ClientHost       string  `json:"clientHost"`
				RebalanceTimeout int32   `json:"rebalanceTimeout"`
				SessionTimeout   int32   `json:"sessionTimeout"`
				Subscription     []byte  `json:"subscription"`
				Assignment       []byte  `json:"assignment"`
			}
			data := struct {
				ProtocolType          string       `json:"protocolType"`
				Generation            int32        `json:"generation"`
				Protocol              *string      `json:"protocol"`
				Leader                *string      `json:"leader"`
				CurrentStateTimestamp int64        `json:"currentStateTimestamp"`
				Members               []memberJSON `json:"members"`
			}{ProtocolType: v.ProtocolType, Generation: v.Generation, Protocol: v.Protocol, Leader: v.Leader,
				CurrentStateTimestamp: v.CurrentStateTimestamp, Members: []memberJSON{}}
			for _, m := range v.Members {
				data.Members = append(data.Members, memberJSON{m.MemberID, m.InstanceID, m.ClientID, m.ClientHost,
					m.RebalanceTimeoutMillis, m.SessionTimeoutMillis, m.Subscription, m.Assignment})
			}
			payload = valueJSON{Version: fmt.Sprint(v.Version), Data: data}
		}
	}
	kb, err := json.Marshal(k)
	if err != nil {
		return "", "", err
	}
	if payload == nil {
		return string(kb), "<DELETE>", nil
	}
	vb, err := json.Marshal(payload)
	return string(kb), string(vb), err
}

// consumerJSON is a consumer group record's value with Kafka's field
// names: the fields of its type.
func consumerJSON(rec *ConsumerRecord) any {
	tps := func(ts []TopicPartitions) []map[string]any {
		out := []map[string]any{}
		for _, t := range ts {
			m := map[string]any{"topicId": t.TopicID.String(), "partitions": t.Partitions}
			if t.AssignmentEpochs != nil {
				m["assignmentEpochs"] = t.AssignmentEpochs
			}
			out = append(out, m)
		}
		return out
	}
	switch rec.Type {
	case keyConsumerGroup:
		return map[string]any{"epoch": rec.Epoch, "metadataHash": rec.MetadataHash, "creationTimeMs": rec.CreationTimeMs}
	case keyConsumerMember:
		m := map[string]any{"instanceId": rec.InstanceID, "rackId": rec.RackID, "clientId": rec.ClientID,
			"clientHost": rec.ClientHost, "subscribedTopicNames": rec.SubscribedTopicNames,
			"subscribedTopicRegex": rec.SubscribedTopicRegex, "rebalanceTimeoutMs": rec.RebalanceTimeoutMs,
			"serverAssignor": rec.ServerAssignor}
		if rec.Classic != nil {
			m["classicMemberMetadata"] = rec.Classic
		}
		return m
	case keyConsumerTargetEpoch:
		return map[string]any{"assignmentEpoch": rec.AssignmentEpoch}
	case keyConsumerTargetMember:
		return map[string]any{"topicPartitions": tps(rec.TopicPartitions)}
	case keyConsumerCurrentAssigment:
		return map[string]any{"memberEpoch": rec.MemberEpoch, "previousMemberEpoch": rec.PreviousMemberEpoch,
			"state": rec.State, "assignedPartitions": tps(rec.AssignedPartitions),
			"partitionsPendingRevocation": tps(rec.PartitionsPendingRevocation)}
	case keyConsumerRegex:
		return map[string]any{"topics": rec.Topics, "version": rec.Version, "timestamp": rec.Timestamp}
	}
	return map[string]any{} // ConsumerGroupPartitionMetadata: not decoded
}
