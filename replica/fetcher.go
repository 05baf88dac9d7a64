package replica

import (
	"context"
	"errors"
	"math"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/cluster"
	"github.com/seglog/seglog/leaderepoch"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/replica/state"
	"github.com/seglog/seglog/tablet"
)

// fetcher fetches, for every partition this broker follows on one
// leader, what the leader has beyond the local log end (Kafka's replica
// fetcher thread).
type fetcher struct {
	m      *Manager
	leader int32

	mu    sync.Mutex // guards parts
	parts map[checkpoint.TopicPartition]*fetchState
	wake  chan struct{}

	cl   *kgo.Client
	addr string
	// sess is the fetch session (KIP-227) on the leader; only run's
	// goroutine uses it, and unreachable (the leader had no address at the
	// last try: said once).
	sess        fetchSession
	unreachable bool
	// asked are the partitions of the fetch in flight, and names their
	// topics' names by id (a v13 answer names topics by id): maps kept
	// from one fetch to the next, emptied at each, as the fetches are
	// many and the partitions too.
	asked map[checkpoint.TopicPartition]*fetchState
	names map[cluster.TopicID]string
}

// fetchSession is a follower's incremental fetch session: the session id
// and the epoch of the next request, and what the leader's session holds
// for each partition (what was last sent for it). With one, a fetch names
// only the partitions whose fetch changed and forgets the ones no longer
// fetched, and the leader answers only the partitions with news: a
// follower of thousands of idle partitions sends and receives a few.
type fetchSession struct {
	id, epoch int32
	sent      map[checkpoint.TopicPartition]sentPart
	// gen counts the fetches: a partition of sent not fetched in this one
	// (its gen older) is forgotten.
	gen uint64
}

// sentPart is what a partition's last fetch in the session said.
type sentPart struct {
	offset, logStart int64
	epoch            int32
	id               cluster.TopicID // (a forgotten partition is named by it from v13)
	gen              uint64
}

// reset drops the session: the next fetch is a full one that opens
// another.
func (s *fetchSession) reset() { *s = fetchSession{} }

// fetchState is one followed partition.
type fetchState struct {
	p     *Partition
	epoch int32 // the leader epoch it follows at
	// truncate: it must truncate to the leader before fetching.
	truncate bool
	// pausedUntil: the leader refused it (not leader yet, an epoch ahead
	// or behind); it is fetched again after a backoff, or at the next
	// metadata change. refusals counts the refusals in a row: the backoff
	// starts short (a leader a moment behind the metadata — a new replica
	// of a reassignment, a leadership just moved — knows it soon) and
	// doubles up to replica.fetch.backoff.ms.
	pausedUntil time.Time
	refusals    int
}

func newFetcher(m *Manager, leader int32) *fetcher {
	return &fetcher{m: m, leader: leader, parts: map[checkpoint.TopicPartition]*fetchState{}, wake: make(chan struct{}, 1),
		asked: map[checkpoint.TopicPartition]*fetchState{}, names: map[cluster.TopicID]string{}}
}

func (f *fetcher) add(p *Partition, epoch int32) {
	f.mu.Lock()
	f.parts[p.tp] = &fetchState{p: p, epoch: epoch, truncate: true}
	f.mu.Unlock()
	f.poke()
}

func (f *fetcher) remove(tp checkpoint.TopicPartition) {
	f.mu.Lock()
	delete(f.parts, tp)
	f.mu.Unlock()
	f.poke()
}

func (f *fetcher) poke() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// run fetches until the manager closes.
func (f *fetcher) run() {
	defer func() {
		if f.cl != nil {
			f.cl.Close()
		}
	}()
	ctx := f.m.ctx
	backoff := func(d time.Duration) {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-f.wake:
		case <-ctx.Done():
		}
	}
	var copies []fetchState
	var active []*fetchState
	for ctx.Err() == nil {
		changed := f.m.opts.Member.Changed()
		now := f.m.opts.Now()
		var next time.Time
		f.mu.Lock()
		// Copies of the states, in buffers kept from one fetch to the
		// next (a follower of thousands of partitions fetches often).
		copies, active = copies[:0], active[:0]
		held := f.m.followerQuota.exceeded(now)
		for _, fs := range f.parts {
			switch {
			case fs.pausedUntil.After(now):
				if next.IsZero() || fs.pausedUntil.Before(next) {
					next = fs.pausedUntil
				}
			case held && fs.p.followerThrottled():
				// Over the follower throttle: left out (forgotten by the
				// session) until the rate is back under it.
				if t := now.Add(throttleCheck); next.IsZero() || t.Before(next) {
					next = t
				}
			default:
				copies = append(copies, *fs)
			}
		}
		f.mu.Unlock()
		for i := range copies {
			active = append(active, &copies[i])
		}
		if len(active) == 0 {
			var timer <-chan time.Time
			var t *time.Timer
			if !next.IsZero() {
				t = time.NewTimer(next.Sub(now))
				timer = t.C
			}
			select {
			case <-f.wake:
			case <-changed:
				f.resume()
			case <-timer:
			case <-ctx.Done():
			}
			if t != nil {
				t.Stop()
			}
			continue
		}
		if err := f.connect(); err != nil {
			// Said once while the leader stays out of reach; tried again
			// at the next metadata change (it registers again, or its
			// partitions move), or after a second.
			if !f.unreachable {
				f.m.log.Warn("replica: no address for the leader", "leader", f.leader, "err", err)
				f.unreachable = true
			}
			t := time.NewTimer(time.Second)
			select {
			case <-t.C:
			case <-changed:
			case <-f.wake:
			case <-ctx.Done():
			}
			t.Stop()
			continue
		}
		if f.unreachable {
			f.m.log.Info("replica: the leader has an address again", "leader", f.leader, "addr", f.addr)
			f.unreachable = false
		}
		if err := f.truncate(ctx, active); err != nil {
			if ctx.Err() == nil {
				f.m.log.Warn("replica: truncating to the leader failed", "leader", f.leader, "err", err)
			}
			backoff(200 * time.Millisecond)
			continue
		}
		if err := f.fetch(ctx, active); err != nil {
			if ctx.Err() == nil {
				f.m.log.Warn("replica: fetching from the leader failed", "leader", f.leader, "err", err)
			}
			backoff(200 * time.Millisecond)
		}
	}
}

// resume unpauses every partition (the metadata changed).
func (f *fetcher) resume() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, fs := range f.parts {
		fs.pausedUntil = time.Time{}
	}
}

// set updates a followed partition's fetch state if it is still the one
// followed at that epoch.
func (f *fetcher) set(fs *fetchState, change func(*fetchState)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if cur, ok := f.parts[fs.p.tp]; ok && cur.p == fs.p && cur.epoch == fs.epoch {
		change(cur)
	}
}

// connect makes the client for the leader's inter-broker endpoint.
func (f *fetcher) connect() error {
	addr, err := f.m.endpoint(f.leader)
	if err != nil {
		return err
	}
	if f.cl != nil && f.addr == addr {
		return nil
	}
	if f.cl != nil {
		f.cl.Close()
	}
	f.sess.reset()
	cl, err := f.m.client(addr, "replica-fetcher")
	if err != nil {
		return err
	}
	f.cl, f.addr = cl, addr
	return nil
}

func (f *fetcher) request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	return send(ctx, f.cl, req)
}

// truncate brings each partition that must truncate to where its log
// agrees with the leader's (KIP-101, KIP-279): it asks the leader where
// its own latest epoch ends, and truncates to the lower of that and
// where that epoch ends locally.
func (f *fetcher) truncate(ctx context.Context, active []*fetchState) error {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.ReplicaID = f.m.me
	byTopic := map[string]int{}
	var asked []*fetchState
	for _, fs := range active {
		if !fs.truncate {
			continue
		}
		epochs := fs.p.t.LeaderEpochs()
		o := fs.p.t.Offsets()
		if len(epochs) == 0 || o.LogEndOffset == o.LogStartOffset {
			// Nothing to disagree on; but an epoch of its own with no
			// record (it led, appending nothing) goes, as truncateTo.
			if unlock, ok := f.hold(fs); ok {
				err := fs.p.t.TruncateTo(o.LogEndOffset)
				unlock()
				if err != nil {
					return err
				}
			}
			f.set(fs, func(c *fetchState) { c.truncate = false })
			fs.truncate = false
			continue
		}
		i, ok := byTopic[fs.p.tp.Topic]
		if !ok {
			i = len(req.Topics)
			byTopic[fs.p.tp.Topic] = i
			req.Topics = append(req.Topics, kmsg.OffsetForLeaderEpochRequestTopic{Topic: fs.p.tp.Topic})
		}
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = fs.p.tp.Partition, fs.epoch, epochs[len(epochs)-1].Epoch
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
		asked = append(asked, fs)
	}
	if len(asked) == 0 {
		return nil
	}
	kr, err := f.request(ctx, req)
	if err != nil {
		return err
	}
	resp := kr.(*kmsg.OffsetForLeaderEpochResponse)
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			fs := find(asked, rt.Topic, rp.Partition)
			if fs == nil {
				continue
			}
			if rp.ErrorCode != 0 {
				f.refused(fs, rp.ErrorCode)
				continue
			}
			unlock, ok := f.hold(fs)
			if !ok {
				continue
			}
			err := truncateTo(fs.p, rp.LeaderEpoch, rp.EndOffset)
			unlock()
			if err != nil {
				return err
			}
			f.set(fs, func(c *fetchState) { c.truncate = false })
			fs.truncate = false
		}
	}
	return nil
}

func find(in []*fetchState, topic string, p int32) *fetchState {
	for _, fs := range in {
		if fs.p.tp.Topic == topic && fs.p.tp.Partition == p {
			return fs
		}
	}
	return nil
}

// truncateTo truncates a follower's log given the leader's answer for
// its latest epoch, (epoch, end), to state.TruncationTarget: where its
// log stops agreeing with the leader's, or its high watermark when the
// leader knows no epoch as old. At or past the log end nothing goes but
// an epoch of its own with no record (tablet.TruncateTo), so the epoch
// cache says the epoch of every record fetched next.
func truncateTo(p *Partition, epoch int32, end int64) error {
	o := p.t.Offsets()
	var epochs []state.EpochStart
	for _, e := range p.t.LeaderEpochs() {
		epochs = append(epochs, state.EpochStart{Epoch: e.Epoch, Start: e.StartOffset})
	}
	target := state.TruncationTarget(epochs, o.LogEndOffset, o.HighWatermark, epoch, end)
	if target < o.LogEndOffset {
		p.m.log.Info("replica: truncating to the leader", "partition", p.tp.String(), "from", o.LogEndOffset, "to", target)
	}
	return p.t.TruncateTo(min(target, o.LogEndOffset))
}

// hold takes the partition's append lock for a change from a fetched
// answer and reports whether this fetcher still follows the partition's
// leader at the epoch fs was fetched at (and the broker does not lead
// it): an answer of a leader this broker no longer follows — it may lead
// now — changes nothing (docs/cluster.md §2).
func (f *fetcher) hold(fs *fetchState) (unlock func(), ok bool) {
	p := fs.p
	p.appendMu.Lock()
	p.mu.Lock()
	ok = p.s.Follows(f.leader, fs.epoch)
	p.mu.Unlock()
	if !ok {
		p.appendMu.Unlock()
		return nil, false
	}
	return p.appendMu.Unlock, true
}

// refused handles a leader's error for a partition: a stale or future
// epoch, or a broker that does not lead it (yet), pauses it until the
// metadata changes; a fetch offset out of range truncates.
func (f *fetcher) refused(fs *fetchState, code int16) {
	switch code {
	case kerr.OffsetOutOfRange.Code:
		f.set(fs, func(c *fetchState) { c.truncate = true })
	default:
		f.set(fs, func(c *fetchState) {
			c.pausedUntil = f.m.opts.Now().Add(min(firstBackoff<<min(c.refusals, 16), f.m.opts.FetchBackoff))
			c.refusals++
		})
	}
}

// firstBackoff is a refused partition's first backoff.
const firstBackoff = 25 * time.Millisecond

// fetch sends one fetch for the partitions and appends what comes back.
// In a session it names only the partitions whose fetch changed since the
// last one (and forgets those no longer fetched); the first, or one after
// the session is lost, names them all and opens a session.
func (f *fetcher) fetch(ctx context.Context, active []*fetchState) error {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = f.m.me
	req.ReplicaState.ID, req.ReplicaState.Epoch = f.m.me, f.m.opts.Member.Epoch()
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = int32(f.m.opts.FetchWait/time.Millisecond), 1, f.m.opts.FetchResponseMaxBytes
	incremental := f.sess.id != 0
	req.SessionID, req.SessionEpoch = f.sess.id, f.sess.epoch
	if !incremental || f.sess.sent == nil {
		f.sess.sent = map[checkpoint.TopicPartition]sentPart{}
	}
	// The session's state is updated as the request is made: a request
	// that fails resets the session (the leader's is unknown then).
	f.sess.gen++
	gen := f.sess.gen
	byTopic := map[string]int{}
	clear(f.asked)
	clear(f.names)
	for _, fs := range active {
		if fs.truncate {
			continue
		}
		f.asked[fs.p.tp] = fs
		if _, ok := f.names[fs.p.id]; !ok {
			f.names[fs.p.id] = fs.p.tp.Topic
		}
		o := fs.p.t.Offsets()
		now := sentPart{offset: o.LogEndOffset, logStart: o.LogStartOffset, epoch: fs.epoch, id: fs.p.id, gen: gen}
		last, ok := f.sess.sent[fs.p.tp]
		f.sess.sent[fs.p.tp] = now
		if last.gen = gen; incremental && ok && last == now {
			continue // (the leader's session has it as it is)
		}
		i, ok := byTopic[fs.p.tp.Topic]
		if !ok {
			i = len(req.Topics)
			byTopic[fs.p.tp.Topic] = i
			req.Topics = append(req.Topics, kmsg.FetchRequestTopic{Topic: fs.p.tp.Topic, TopicID: fs.p.id})
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.FetchOffset = fs.p.tp.Partition, fs.epoch, o.LogEndOffset
		rp.LogStartOffset, rp.PartitionMaxBytes = o.LogStartOffset, f.m.opts.FetchMaxBytes
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	if incremental {
		forgotten := map[string]int{}
		for tp, last := range f.sess.sent {
			if last.gen == gen {
				continue
			}
			delete(f.sess.sent, tp)
			i, ok := forgotten[tp.Topic]
			if !ok {
				i = len(req.ForgottenTopics)
				forgotten[tp.Topic] = i
				req.ForgottenTopics = append(req.ForgottenTopics, kmsg.FetchRequestForgottenTopic{Topic: tp.Topic, TopicID: last.id})
			}
			req.ForgottenTopics[i].Partitions = append(req.ForgottenTopics[i].Partitions, tp.Partition)
		}
	}
	if len(f.asked) == 0 {
		f.sess.reset() // (nothing to fetch: the leader's session lapses)
		return nil
	}
	kr, err := f.request(ctx, req)
	if err != nil {
		f.sess.reset()
		return err
	}
	resp := kr.(*kmsg.FetchResponse)
	if resp.ErrorCode != 0 {
		f.sess.reset() // (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH: a full fetch next)
		if resp.ErrorCode == kerr.FetchSessionIDNotFound.Code || resp.ErrorCode == kerr.InvalidFetchSessionEpoch.Code {
			return nil
		}
		return kerr.ErrorForCode(resp.ErrorCode)
	}
	switch {
	case resp.SessionID == 0: // the leader keeps no session (no slot): full fetches
		f.sess.reset()
	case incremental:
		f.sess.epoch = nextSessionEpoch(f.sess.epoch)
	default:
		f.sess.id, f.sess.epoch = resp.SessionID, 1
	}
	for _, rt := range resp.Topics {
		topic := rt.Topic
		if topic == "" { // (named by id, v13 on)
			topic = f.names[cluster.TopicID(rt.TopicID)]
		}
		for _, rp := range rt.Partitions {
			fs := f.asked[checkpoint.TopicPartition{Topic: topic, Partition: rp.Partition}]
			if fs == nil {
				continue
			}
			if rp.ErrorCode != 0 {
				if rp.ErrorCode == kerr.OffsetOutOfRange.Code && rp.LogStartOffset > fs.p.t.Offsets().LogEndOffset {
					// Behind the leader's log start: start over from it.
					if unlock, ok := f.hold(fs); ok {
						err := fs.p.t.TruncateFullyAndStartAt(rp.LogStartOffset)
						unlock()
						if err != nil {
							return err
						}
					}
					continue
				}
				if rp.ErrorCode == kerr.OffsetMovedToTieredStorage.Code {
					f.fromTier(ctx, fs)
					continue
				}
				f.refused(fs, rp.ErrorCode)
				continue
			}
			if err := f.appendFetched(fs, rp); err != nil {
				return err
			}
			if fs.refusals > 0 {
				f.set(fs, func(c *fetchState) { c.refusals = 0 })
			}
			if fs.p.followerThrottled() {
				f.m.followerQuota.record(int64(len(rp.RecordBatches)), f.m.opts.Now())
			}
		}
	}
	return nil
}

// fromTier starts a partition from the tier at its leader's local log
// start (KIP-405), asked with ListOffsets (EARLIEST_LOCAL_TIMESTAMP); a
// failure pauses it as a refusal does.
func (f *fetcher) fromTier(ctx context.Context, fs *fetchState) {
	err := errors.New("this broker has no tier (serve --store) to start the replica from")
	if f.m.opts.StartFromTier != nil {
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = f.m.me
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.Timestamp = fs.p.tp.Partition, fs.epoch, -4
		req.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: fs.p.tp.Topic, Partitions: []kmsg.ListOffsetsRequestTopicPartition{rp}}}
		var kr kmsg.Response
		if kr, err = f.request(ctx, req); err == nil {
			resp := kr.(*kmsg.ListOffsetsResponse)
			if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
				err = errors.New("a ListOffsets answer without the partition")
			} else if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 {
				err = kerr.ErrorForCode(p.ErrorCode)
			} else {
				err = f.m.opts.StartFromTier(ctx, fs.p.t, p.Offset)
			}
		}
	}
	if err != nil {
		f.m.log.Warn("replica: starting a replica from the tier failed; retrying", "partition", fs.p.tp.String(), "err", err)
		f.refused(fs, kerr.OffsetMovedToTieredStorage.Code)
	}
}

// nextSessionEpoch is the epoch after e: it wraps to 1 (0 opens a session).
func nextSessionEpoch(e int32) int32 {
	if e == math.MaxInt32 {
		return 1
	}
	return e + 1
}

// appendFetched appends a partition's fetched batches as they are (their
// offsets and leader epochs kept), then moves the high watermark to the
// leader's (not past the local log end) and the log start to the
// leader's.
func (f *fetcher) appendFetched(fs *fetchState, rp kmsg.FetchResponseTopicPartition) error {
	unlock, ok := f.hold(fs)
	if !ok {
		return nil // (no longer following that leader at that epoch: the answer is stale)
	}
	defer unlock()
	t := fs.p.t
	data := rp.RecordBatches
	for len(data) > 0 {
		h, n, err := record.ParseHeader(data)
		if err != nil || n > int64(len(data)) {
			break // (a partial batch at the end of the response)
		}
		_, err = t.Append(data[:n], tablet.AppendOptions{Origin: record.OriginReplication})
		if errors.Is(err, tablet.ErrUnexpectedAppendOffset) {
			last := h.BaseOffset + int64(h.LastOffsetDelta)
			if !state.RestartAt(h.BaseOffset, last, localOf(t.Offsets())) {
				f.set(fs, func(c *fetchState) { c.truncate = true })
				return nil
			}
			f.m.log.Info("replica: starting the log at the base of the leader's first batch", "partition", fs.p.tp.String(), "at", h.BaseOffset)
			if err = t.TruncateFullyAndStartAt(h.BaseOffset); err == nil {
				_, err = t.Append(data[:n], tablet.AppendOptions{Origin: record.OriginReplication})
			}
		}
		if err != nil {
			return err
		}
		data = data[n:]
	}
	l := localOf(t.Offsets())
	if hw, ok := state.FollowerHW(rp.HighWatermark, l); ok {
		if err := t.SetHighWatermark(hw); err != nil {
			return err
		}
		l.HW = hw
		fs.p.mu.Lock()
		fs.p.notifyLocked()
		fs.p.mu.Unlock()
	}
	if start, ok := state.FollowerLogStart(rp.LogStartOffset, l); ok {
		if _, err := t.DeleteRecordsBefore(start); err != nil {
			return err
		}
	}
	return nil
}

type leaderEpoch = leaderepoch.Entry

// localOf is what the rules read of a log's offsets.
func localOf(o tablet.Offsets) state.Local {
	return state.Local{LogStart: o.LogStartOffset, LogEnd: o.LogEndOffset, HW: o.HighWatermark}
}
