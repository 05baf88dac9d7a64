package group

import (
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/tablet"
	"github.com/seglog/seglog/writerstate"

	"github.com/seglog/seglog/coordinator/internal/store"
)

// storeGroup appends the group's metadata (members, generation,
// assignments) durably.
func (c *Coordinator) storeGroup(g *group) error {
	return c.log.Append(g.partition, c.opts.clock.Now(), store.KV{Key: groupKey(g.id), Value: groupValue(g)})
}

// storeErrorCode is the Kafka error a client gets when a group's record
// could not be written: one it retries (Kafka maps a failed append to
// NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE), or the message too large.
func storeErrorCode(err error) int16 {
	switch {
	case errors.Is(err, tablet.ErrRecordBatchTooLarge):
		return kerr.UnknownServerError.Code
	case errors.Is(err, ErrClosed):
		return kerr.CoordinatorNotAvailable.Code
	}
	return kerr.NotCoordinator.Code
}

// OffsetCommit stores a group's committed offsets, after checking that
// the committer is a member of the group's current generation (or that the
// group is a standalone consumer's: generation -1 on an empty group).
func (c *Coordinator) OffsetCommit(r *kmsg.OffsetCommitRequest) *kmsg.OffsetCommitResponse {
	resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
	if r.Group == "" {
		return RefuseOffsetCommit(r, kerr.InvalidGroupID.Code)
	}
	if code := c.Owns(r.Group); code != 0 {
		return RefuseOffsetCommit(r, code)
	}
	simple := r.GetVersion() == 0 || r.Generation < 0
	g := c.lookup(r.Group, simple)
	if g == nil {
		if simple {
			return RefuseOffsetCommit(r, kerr.CoordinatorNotAvailable.Code)
		}
		return RefuseOffsetCommit(r, kerr.IllegalGeneration.Code)
	}
	defer g.mu.Unlock()
	var stale map[topicPartition]bool
	if g.cg != nil {
		var code int16
		if code, stale = c.validateConsumerCommit(g.cg, r.MemberID, r.Generation, r.GetVersion() < 9, offsetCommitTPs(r)); code != 0 {
			return RefuseOffsetCommit(r, code)
		}
		if r.MemberID != "" {
			c.consumerHeartbeat(g, r.MemberID)
		}
	} else if !simple || g.state != Empty {
		if code := g.validate(r.MemberID, deref(r.InstanceID), r.Generation); code != 0 {
			return RefuseOffsetCommit(r, code)
		}
		if g.state == CompletingRebalance {
			return RefuseOffsetCommit(r, kerr.RebalanceInProgress.Code)
		}
		c.heartbeat(g, g.members[r.MemberID])
	}
	now := c.opts.clock.Now()
	var recs []store.KV
	var keep []func(first int64)
	for _, t := range r.Topics {
		rt := kmsg.OffsetCommitResponseTopic{Topic: t.Topic}
		for _, p := range t.Partitions {
			rp := kmsg.OffsetCommitResponseTopicPartition{Partition: p.Partition}
			o := Offset{Offset: p.Offset, LeaderEpoch: -1, Metadata: deref(p.Metadata), CommitTimestamp: now.UnixMilli(), ExpireTimestamp: -1}
			if r.GetVersion() >= 6 {
				o.LeaderEpoch = p.LeaderEpoch
			}
			if r.GetVersion() == 1 && p.Timestamp != -1 {
				o.CommitTimestamp = p.Timestamp
			}
			if r.GetVersion() >= 2 && r.GetVersion() <= 4 && r.RetentionTimeMillis != -1 {
				o.ExpireTimestamp = o.CommitTimestamp + r.RetentionTimeMillis
			}
			switch {
			case !c.opts.TopicExists(t.Topic, p.Partition):
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case len(o.Metadata) > c.opts.MaxMetadataBytes:
				rp.ErrorCode = kerr.OffsetMetadataTooLarge.Code
			case stale[topicPartition{t.Topic, p.Partition}]:
				rp.ErrorCode = kerr.StaleMemberEpoch.Code
			default:
				tp := topicPartition{t.Topic, p.Partition}
				i := int64(len(recs))
				recs = append(recs, store.KV{Key: offsetKey(g.id, t.Topic, p.Partition), Value: offsetValue(o)})
				keep = append(keep, func(first int64) {
					o.at = first + i
					g.offsets[tp] = o
				})
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	first, err := c.log.AppendAs(g.partition, now, store.Producer{}, recs...)
	if err != nil {
		c.opts.Logger.Error("storing committed offsets", "group", g.id, "err", err)
		code := storeErrorCode(err)
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				if p := &resp.Topics[i].Partitions[j]; p.ErrorCode == 0 {
					p.ErrorCode = code
				}
			}
		}
		return resp
	}
	for _, k := range keep {
		k(first)
	}
	c.stats.commits.Add(int64(len(keep)))
	return resp
}

// TxnOffsetCommit stores a transaction's offsets: written to
// __consumer_offsets as the producer's transactional records, and applied
// only when the transaction commits (OnMarker); until then OffsetFetch
// with require_stable answers UNSTABLE_OFFSET_COMMIT for them. A member
// and generation given (v3+) are checked as OffsetCommit checks them.
func (c *Coordinator) TxnOffsetCommit(r *kmsg.TxnOffsetCommitRequest) *kmsg.TxnOffsetCommitResponse {
	resp := r.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	fail := func(code int16) *kmsg.TxnOffsetCommitResponse { return RefuseTxnOffsetCommit(r, code) }
	if r.Group == "" {
		return fail(kerr.InvalidGroupID.Code)
	}
	if code := c.Owns(r.Group); code != 0 {
		return fail(code)
	}
	g := c.lookup(r.Group, true)
	if g == nil {
		return fail(kerr.CoordinatorNotAvailable.Code)
	}
	defer g.mu.Unlock()
	var stale map[topicPartition]bool
	switch {
	case g.cg != nil && r.GetVersion() >= 3:
		var tps []topicPartition
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				tps = append(tps, topicPartition{t.Topic, p.Partition})
			}
		}
		var code int16
		if code, stale = c.validateConsumerCommit(g.cg, r.MemberID, r.Generation, false, tps); code != 0 {
			return fail(code)
		}
	case r.GetVersion() >= 3 && (r.MemberID != "" || r.Generation >= 0):
		if code := g.validate(r.MemberID, deref(r.InstanceID), r.Generation); code != 0 {
			return fail(code)
		}
	}
	now := c.opts.clock.Now()
	var recs []store.KV
	var tps []topicPartition
	var offs []Offset
	for _, t := range r.Topics {
		rt := kmsg.TxnOffsetCommitResponseTopic{Topic: t.Topic}
		for _, p := range t.Partitions {
			rp := kmsg.TxnOffsetCommitResponseTopicPartition{Partition: p.Partition}
			o := Offset{Offset: p.Offset, LeaderEpoch: -1, Metadata: deref(p.Metadata), CommitTimestamp: now.UnixMilli(), ExpireTimestamp: -1}
			if r.GetVersion() >= 2 {
				o.LeaderEpoch = p.LeaderEpoch
			}
			switch {
			case !c.opts.TopicExists(t.Topic, p.Partition):
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case len(o.Metadata) > c.opts.MaxMetadataBytes:
				rp.ErrorCode = kerr.OffsetMetadataTooLarge.Code
			case stale[topicPartition{t.Topic, p.Partition}]:
				rp.ErrorCode = kerr.StaleMemberEpoch.Code
			default:
				recs = append(recs, store.KV{Key: offsetKey(g.id, t.Topic, p.Partition), Value: offsetValue(o)})
				tps, offs = append(tps, topicPartition{t.Topic, p.Partition}), append(offs, o)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	first, err := c.log.AppendAs(g.partition, now, store.Producer{ID: r.ProducerID, Epoch: r.ProducerEpoch}, recs...)
	if err != nil {
		c.opts.Logger.Error("storing transactional offsets", "group", g.id, "err", err)
		code := storeErrorCode(err)
		if errors.Is(err, writerstate.ErrInvalidProducerEpoch) {
			code = kerr.InvalidProducerEpoch.Code
		}
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				if p := &resp.Topics[i].Partitions[j]; p.ErrorCode == 0 {
					p.ErrorCode = code
				}
			}
		}
		return resp
	}
	pending := g.pendingTxn[r.ProducerID]
	if pending == nil {
		pending = map[topicPartition]Offset{}
		put(&g.pendingTxn, r.ProducerID, pending)
		c.notePending(r.ProducerID, g)
	}
	for i, tp := range tps {
		o := offs[i]
		o.at = first + int64(i)
		pending[tp] = o
	}
	return resp
}

// RefuseOffsetCommit answers an OffsetCommit with code for every
// partition (the coordinator's refusals, and the broker's authorization).
func RefuseOffsetCommit(r *kmsg.OffsetCommitRequest, code int16) *kmsg.OffsetCommitResponse {
	resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
	for _, t := range r.Topics {
		rt := kmsg.OffsetCommitResponseTopic{Topic: t.Topic}
		for _, p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, kmsg.OffsetCommitResponseTopicPartition{Partition: p.Partition, ErrorCode: code})
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// RefuseTxnOffsetCommit answers a TxnOffsetCommit with code for every
// partition (the broker's, when the transaction did not add the group).
func RefuseTxnOffsetCommit(r *kmsg.TxnOffsetCommitRequest, code int16) *kmsg.TxnOffsetCommitResponse {
	resp := r.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	for _, t := range r.Topics {
		rt := kmsg.TxnOffsetCommitResponseTopic{Topic: t.Topic}
		for _, p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, kmsg.TxnOffsetCommitResponseTopicPartition{Partition: p.Partition, ErrorCode: code})
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// OnMarker takes a transaction's end on a __consumer_offsets partition
// (the transaction coordinator's marker, durable): a commit applies the
// producer's pending offsets of every group in the partition, unless a
// later commit is already there; an abort drops them.
func (c *Coordinator) OnMarker(tp checkpoint.TopicPartition, producerID int64, commit bool) {
	if tp.Topic != Topic {
		return
	}
	c.mu.Lock()
	if c.ownedParts.Code(tp.Partition) == kerr.CoordinatorLoadInProgress.Code {
		// The partition's groups are being loaded (in the background, on
		// a single node): the marker applies once they are installed.
		put(&c.deferred, tp.Partition, append(c.deferred[tp.Partition], deferredMarker{producerID, commit}))
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	c.settle(tp.Partition, producerID, commit)
}

// settle applies (commit) or drops a producer's pending offsets in the
// groups of partition p.
func (c *Coordinator) settle(p int32, producerID int64, commit bool) {
	for _, g := range c.takePending(producerID, p) {
		g.mu.Lock()
		if pending := g.pendingTxn[producerID]; pending != nil {
			if commit {
				applyPending(g.offsets, pending)
				c.stats.commits.Add(int64(len(pending)))
			}
			delete(g.pendingTxn, producerID)
		}
		g.mu.Unlock()
	}
}

// deferredMarker is a transaction marker written to a partition whose
// groups were loading.
type deferredMarker struct {
	producerID int64
	commit     bool
}

// ownLoaded makes partition p, whose groups are installed, owned — after
// applying the markers written to it while it loaded, in their order and
// before any request for its groups is taken. A marker the replay read
// already found the producer's pending offsets settled: it changes
// nothing.
func (c *Coordinator) ownLoaded(p int32) {
	for {
		c.mu.Lock()
		ms := c.deferred[p]
		delete(c.deferred, p)
		if len(ms) == 0 {
			c.ownedParts[p] = store.Owned
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		for _, m := range ms {
			c.settle(p, m.producerID, m.commit)
		}
	}
}

// notePending records that producer pid has transactional offsets pending
// in g, so its marker finds g without a walk over every group. Called with
// g.mu held (g's lock comes before c.mu).
func (c *Coordinator) notePending(pid int64, g *group) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.txnGroups[pid] == nil {
		c.txnGroups[pid] = map[*group]bool{}
	}
	c.txnGroups[pid][g] = true
}

// takePending returns, and forgets, the groups in __consumer_offsets
// partition p where producer pid has offsets pending.
func (c *Coordinator) takePending(pid int64, p int32) []*group {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*group
	for g := range c.txnGroups[pid] {
		if g.partition == p {
			out = append(out, g)
			delete(c.txnGroups[pid], g)
		}
	}
	if len(c.txnGroups[pid]) == 0 {
		delete(c.txnGroups, pid)
	}
	return out
}

// applyPending applies a committed transaction's offsets, each unless a
// later record already holds its partition.
func applyPending(offsets, pending map[topicPartition]Offset) {
	for tp, o := range pending {
		if cur, ok := offsets[tp]; !ok || cur.at < o.at {
			offsets[tp] = o
		}
	}
}

// OffsetFetch returns a group's committed offsets: the partitions asked
// for (-1 where none is committed), or every one (topics null, v2+).
func (c *Coordinator) OffsetFetch(r *kmsg.OffsetFetchRequest) *kmsg.OffsetFetchResponse {
	resp := r.ResponseKind().(*kmsg.OffsetFetchResponse)
	if code := c.Owns(r.Group); code != 0 {
		resp.ErrorCode = code
		for _, t := range r.Topics { // (the code per partition before v2)
			rt := kmsg.OffsetFetchResponseTopic{Topic: t.Topic}
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.ErrorCode = p, -1, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	offsets := map[topicPartition]Offset{}
	unstable := map[topicPartition]bool{}
	if g := c.lookup(r.Group, false); g != nil {
		for tp, o := range g.offsets {
			offsets[tp] = o
		}
		for _, pending := range g.pendingTxn {
			for tp := range pending {
				unstable[tp] = true
			}
		}
		g.mu.Unlock()
	}
	// A partition a pending transaction commits is answered, under
	// require_stable, with UNSTABLE_OFFSET_COMMIT and no offset (the
	// client retries until the markers land) — asked for by name or as
	// one of every partition; without it, with its last stable offset.
	part := func(tp topicPartition) kmsg.OffsetFetchResponseTopicPartition {
		rp := kmsg.NewOffsetFetchResponseTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = tp.partition, -1, -1, kmsg.StringPtr("")
		if r.RequireStable && unstable[tp] {
			rp.ErrorCode = kerr.UnstableOffsetCommit.Code
		} else if o, ok := offsets[tp]; ok {
			rp.Offset, rp.LeaderEpoch, rp.Metadata = o.Offset, o.LeaderEpoch, kmsg.StringPtr(o.Metadata)
		}
		return rp
	}
	if r.Topics == nil && r.GetVersion() >= 2 {
		byTopic := map[string][]int32{}
		for tp := range offsets {
			byTopic[tp.topic] = append(byTopic[tp.topic], tp.partition)
		}
		if r.RequireStable {
			for tp := range unstable {
				if _, ok := offsets[tp]; !ok {
					byTopic[tp.topic] = append(byTopic[tp.topic], tp.partition)
				}
			}
		}
		for _, topic := range sortedKeys(byTopic) {
			rt := kmsg.OffsetFetchResponseTopic{Topic: topic}
			ps := byTopic[topic]
			slices.Sort(ps)
			for _, p := range ps {
				rt.Partitions = append(rt.Partitions, part(topicPartition{topic, p}))
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	for _, t := range r.Topics {
		rt := kmsg.OffsetFetchResponseTopic{Topic: t.Topic}
		for _, p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, part(topicPartition{t.Topic, p}))
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// OffsetDelete deletes a group's committed offsets (tombstones): of an
// empty group, or of topics its consumers do not subscribe to.
func (c *Coordinator) OffsetDelete(r *kmsg.OffsetDeleteRequest) *kmsg.OffsetDeleteResponse {
	resp := r.ResponseKind().(*kmsg.OffsetDeleteResponse)
	if resp.ErrorCode = c.Owns(r.Group); resp.ErrorCode != 0 {
		return resp
	}
	g := c.lookup(r.Group, false)
	if g == nil {
		resp.ErrorCode = kerr.GroupIDNotFound.Code
		return resp
	}
	defer g.mu.Unlock()
	var subscribed map[string]bool
	if g.state != Empty {
		if g.protocolType != "consumer" {
			resp.ErrorCode = kerr.NonEmptyGroup.Code
			return resp
		}
		subscribed = g.subscribedTopics()
	}
	var recs []store.KV
	var gone []topicPartition
	for _, t := range r.Topics {
		rt := kmsg.OffsetDeleteResponseTopic{Topic: t.Topic}
		for _, p := range t.Partitions {
			rp := kmsg.OffsetDeleteResponseTopicPartition{Partition: p.Partition}
			tp := topicPartition{t.Topic, p.Partition}
			switch {
			case subscribed[t.Topic]:
				rp.ErrorCode = kerr.GroupSubscribedToTopic.Code
			default:
				if _, ok := g.offsets[tp]; ok {
					recs = append(recs, store.KV{Key: offsetKey(g.id, t.Topic, p.Partition), Value: nil})
					gone = append(gone, tp)
				}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if err := c.log.Append(g.partition, c.opts.clock.Now(), recs...); err != nil {
		c.opts.Logger.Error("deleting committed offsets", "group", g.id, "err", err)
		resp.Topics, resp.ErrorCode = nil, storeErrorCode(err)
		return resp
	}
	for _, tp := range gone {
		delete(g.offsets, tp)
	}
	return resp
}

// subscribedTopics are the topics the members of a consumer group
// subscribe to, from their metadata for the group's protocol.
func (g *group) subscribedTopics() map[string]bool {
	if g.cg != nil {
		return g.cg.subscribedTopics()
	}
	out := map[string]bool{}
	for _, m := range g.members {
		var meta kmsg.ConsumerMemberMetadata
		if err := meta.ReadFrom(m.metadataFor(g.protocol)); err != nil {
			continue
		}
		for _, t := range meta.Topics {
			out[t] = true
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// RemoveTopicOffsets deletes every group's committed offsets of a topic
// (tombstones), as Kafka does when the topic is deleted; an empty group
// left without offsets is deleted too.
func (c *Coordinator) RemoveTopicOffsets(topic string) error {
	var errs []error
	for _, g := range c.sortedGroups() {
		g.mu.Lock()
		var recs []store.KV
		var gone []topicPartition
		for tp := range g.offsets {
			if tp.topic == topic {
				recs = append(recs, store.KV{Key: offsetKey(g.id, tp.topic, tp.partition), Value: nil})
				gone = append(gone, tp)
			}
		}
		if len(recs) > 0 && g.state != Dead {
			if err := c.log.Append(g.partition, c.opts.clock.Now(), recs...); err != nil {
				errs = append(errs, fmt.Errorf("group %q: %w", g.id, err))
			} else {
				for _, tp := range gone {
					delete(g.offsets, tp)
				}
				if g.state == Empty && len(g.offsets) == 0 {
					errs = append(errs, c.removeGroup(g))
				}
			}
		}
		g.mu.Unlock()
	}
	return errors.Join(errs...)
}

func offsetCommitTPs(r *kmsg.OffsetCommitRequest) []topicPartition {
	var out []topicPartition
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			out = append(out, topicPartition{t.Topic, p.Partition})
		}
	}
	return out
}
