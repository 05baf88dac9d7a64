package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// A partition's tier in a cluster (docs/cluster.md): the key
// tiers/<topic>/<partition> names the newest manifest its leader
// published, written only by the partition's leader, comparing the
// partition's state it leads in, so a deposed leader's never lands.

// TierPointer is a partition's published tier manifest: its mirror's key
// in the store and what it says of the log.
type TierPointer struct {
	Seq         int64  `json:"seq"`
	Mirror      string `json:"mirror"`
	TieredEnd   int64  `json:"tiered_end"`
	LeaderEpoch int32  `json:"leader_epoch"`
}

const keyTiers = "tiers/"

func tierKey(topic string, p int32) string { return keyTiers + topic + "/" + strconv.Itoa(int(p)) }

// Tier returns a partition's published tier manifest, if any.
func (s *Snapshot) Tier(topic string, p int32) (TierPointer, bool) {
	ptr, ok := s.Tiers[TopicPartition{topic, p}]
	return ptr, ok
}

// PublishTier makes ptr the partition's published tier manifest if this
// broker leads it at leaderEpoch in a live session; ErrStaleState if not
// (a deposed leader). The write compares the partition's state and this
// broker's registration; it returns once this broker's snapshot has it.
func (m *Member) PublishTier(ctx context.Context, topic string, p int32, leaderEpoch int32, ptr TierPointer) error {
	val, err := json.Marshal(ptr)
	if err != nil {
		return err
	}
	me := m.prefix + keyBrokers + strconv.Itoa(int(m.opts.NodeID))
	for range changeRounds {
		st, ok := m.Snapshot().Partition(topic, p)
		if !ok || st.Leader != m.opts.NodeID || st.LeaderEpoch != leaderEpoch || !m.Leased() {
			return fmt.Errorf("%w: %s-%d is not led by node %d at leader epoch %d", ErrStaleState, topic, p, m.opts.NodeID, leaderEpoch)
		}
		resp, err := m.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(m.prefix+partitionKey(topic, p)), "=", st.rev),
			clientv3.Compare(clientv3.LeaseValue(me), "=", m.lease.Load())).
			Then(clientv3.OpPut(m.prefix+tierKey(topic, p), string(val))).Commit()
		if err != nil {
			return fmt.Errorf("cluster: publishing the tier of %s-%d: %w", topic, p, err)
		}
		if err := m.Await(ctx, resp.Header.Revision); err != nil {
			return err
		}
		if resp.Succeeded {
			return nil
		}
	}
	return fmt.Errorf("%w: %s-%d changed too often while its tier was published", ErrStaleState, topic, p)
}

// applyTier takes a tiers/ key's event.
func (n *Snapshot) applyTier(key string, e event, touch func(string) bool) error {
	rest := strings.TrimPrefix(key, keyTiers)
	i := strings.LastIndexByte(rest, '/')
	if i < 0 {
		return fmt.Errorf("no partition number")
	}
	p, err := strconv.ParseInt(rest[i+1:], 10, 32)
	if err != nil {
		return err
	}
	touch(keyTiers)
	tp := TopicPartition{rest[:i], int32(p)}
	if e.delete {
		delete(n.Tiers, tp)
		return nil
	}
	var ptr TierPointer
	if err := json.Unmarshal(e.kv.Value, &ptr); err != nil {
		return err
	}
	n.Tiers[tp] = ptr
	return nil
}
