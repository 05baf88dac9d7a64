package replica

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"maps"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/cluster"
	"github.com/seglog/seglog/tablet"
)

// leaderEnd is the Kafka endpoint of a broker in this package's tests:
// the leader's half of replication, as the broker serves it, over a
// replica Manager — ApiVersions, a follower's Fetch (KIP-227 sessions,
// long polls) and OffsetForLeaderEpoch — so that a follower's Manager
// replicates from it through its real fetcher, with no broker package.
type leaderEnd struct {
	t  *testing.T
	ln net.Listener

	mu sync.Mutex // guards r, sessions, nextSession, fetches, refuse, told and noSessions
	r  *Manager
	// sessions are the fetch sessions open, by id.
	sessions    map[int32]*leaderSession
	nextSession int32
	// fetches are the fetch requests served, in order.
	fetches []fetchSeen
	// refuse answers the partition in the next answers with the code,
	// counting down.
	refuse map[checkpoint.TopicPartition]refusal
	// noSessions keeps no session (as a leader out of slots).
	noSessions bool
	// told is the high watermark and log start last answered, by
	// follower and partition.
	told map[int32]map[checkpoint.TopicPartition][2]int64
}

type refusal struct {
	code  int16
	times int
}

// A leaderSession is a follower's fetch session: what it last named of
// each partition.
type leaderSession struct {
	epoch int32 // the next epoch expected
	parts map[checkpoint.TopicPartition]kmsg.FetchRequestTopicPartition
}

// fetchSeen is one fetch request as it came.
type fetchSeen struct {
	sessionID, sessionEpoch int32
	parts, forgotten        int
}

// listen opens the endpoint's listener (its port is registered before
// its Manager exists).
func listen(t *testing.T) *leaderEnd {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	l := &leaderEnd{t: t, ln: ln, sessions: map[int32]*leaderSession{}, refuse: map[checkpoint.TopicPartition]refusal{},
		told: map[int32]map[checkpoint.TopicPartition][2]int64{}}
	t.Cleanup(func() { _ = ln.Close() })
	return l
}

func (l *leaderEnd) port() int32 { return int32(l.ln.Addr().(*net.TCPAddr).Port) }

// serve answers with r's replicas from now on.
func (l *leaderEnd) serve(r *Manager) {
	l.mu.Lock()
	first := l.r == nil
	l.r = r
	l.mu.Unlock()
	if !first {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	l.t.Cleanup(func() { cancel(); _ = l.ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := l.ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				<-ctx.Done()
				_ = c.Close()
			})
			wg.Go(func() { l.conn(ctx, c) })
		}
	})
}

func (l *leaderEnd) manager() *Manager {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r
}

// conn answers one connection's requests in order.
func (l *leaderEnd) conn(ctx context.Context, c net.Conn) {
	defer c.Close()
	for {
		var size [4]byte
		if _, err := io.ReadFull(c, size[:]); err != nil {
			return
		}
		frame := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(c, frame); err != nil {
			return
		}
		out, err := l.answer(ctx, frame)
		if err != nil {
			l.t.Logf("leader endpoint: %v", err)
			return
		}
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}

// answer decodes a request frame (header v1 or v2) and encodes the
// answer's frame.
func (l *leaderEnd) answer(ctx context.Context, frame []byte) ([]byte, error) {
	if len(frame) < 10 {
		return nil, errors.New("short request header")
	}
	key, version := int16(binary.BigEndian.Uint16(frame)), int16(binary.BigEndian.Uint16(frame[2:]))
	corr := binary.BigEndian.Uint32(frame[4:])
	rest := frame[8:]
	n := int16(binary.BigEndian.Uint16(rest)) // the client id's length (-1: null)
	rest = rest[2:]
	if n > 0 {
		rest = rest[n:]
	}
	req := kmsg.RequestForKey(key)
	if req == nil {
		return nil, errors.New("unknown API key")
	}
	req.SetVersion(version)
	if req.IsFlexible() {
		rest = rest[1:] // (no tagged field in the header)
	}
	if err := req.ReadFrom(rest); err != nil {
		return nil, err
	}
	var resp kmsg.Response
	switch r := req.(type) {
	case *kmsg.ApiVersionsRequest:
		resp = l.apiVersions(r)
	case *kmsg.FetchRequest:
		resp = l.fetch(ctx, r)
	case *kmsg.OffsetForLeaderEpochRequest:
		resp = l.epochEnds(r)
	default:
		return nil, errors.New("an API the leader endpoint does not serve")
	}
	resp.SetVersion(version)
	out := binary.BigEndian.AppendUint32(make([]byte, 4, 64), corr)
	if resp.IsFlexible() && key != kmsg.ApiVersions.Int16() {
		out = append(out, 0)
	}
	out = resp.AppendTo(out)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	return out, nil
}

func (l *leaderEnd) apiVersions(r *kmsg.ApiVersionsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.ApiVersionsResponse)
	for _, k := range []kmsg.Request{kmsg.NewPtrApiVersionsRequest(), kmsg.NewPtrFetchRequest(), kmsg.NewPtrOffsetForLeaderEpochRequest()} {
		resp.ApiKeys = append(resp.ApiKeys, kmsg.ApiVersionsResponseApiKey{ApiKey: k.Key(), MinVersion: 0, MaxVersion: k.MaxVersion()})
	}
	return resp
}

// epochEnds answers OffsetForLeaderEpoch as the broker does: from the
// leader's tablet (tablet.EpochEnd), fenced at another current epoch.
func (l *leaderEnd) epochEnds(r *kmsg.OffsetForLeaderEpochRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	for _, rt := range r.Topics {
		st := kmsg.OffsetForLeaderEpochResponseTopic{Topic: rt.Topic}
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition, sp.LeaderEpoch, sp.EndOffset = rp.Partition, -1, -1
			p, ok := l.manager().Get(checkpoint.TopicPartition{Topic: rt.Topic, Partition: rp.Partition})
			switch {
			case !ok:
				sp.ErrorCode = kerr.NotLeaderForPartition.Code
			default:
				if sp.ErrorCode = p.CheckLeader(rp.CurrentLeaderEpoch); sp.ErrorCode == 0 {
					sp.LeaderEpoch, sp.EndOffset = p.Tablet().EpochEnd(rp.LeaderEpoch)
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// fetch answers a follower's fetch: each partition of the request (or of
// its session) is a FollowerFetch on the leader's replica and a read to
// the log end. With nothing new to say — no records, no refusal, the
// high watermark and log start as last told — it waits for a change, up
// to the request's wait; an incremental answer leaves out the partitions
// with nothing new.
func (l *leaderEnd) fetch(ctx context.Context, r *kmsg.FetchRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.FetchResponse)
	replica := r.ReplicaID
	if r.GetVersion() >= 15 {
		replica = r.ReplicaState.ID
	}
	snap := l.manager().opts.Member.Snapshot()
	name := func(topic string, id [16]byte) string {
		if topic == "" {
			if t, ok := snap.TopicByID(cluster.TopicID(id)); ok {
				return t.Name
			}
		}
		return topic
	}
	l.mu.Lock()
	seen := fetchSeen{sessionID: r.SessionID, sessionEpoch: r.SessionEpoch}
	parts := map[checkpoint.TopicPartition]kmsg.FetchRequestTopicPartition{}
	for _, rt := range r.Topics {
		for _, rp := range rt.Partitions {
			parts[checkpoint.TopicPartition{Topic: name(rt.Topic, rt.TopicID), Partition: rp.Partition}] = rp
			seen.parts++
		}
	}
	for _, ft := range r.ForgottenTopics {
		seen.forgotten += len(ft.Partitions)
	}
	l.fetches = append(l.fetches, seen)
	incremental := false
	switch {
	case r.SessionEpoch == 0 && !l.noSessions: // a full fetch, opening a session
		l.nextSession++
		l.sessions[l.nextSession] = &leaderSession{epoch: 1, parts: maps.Clone(parts)}
		resp.SessionID = l.nextSession
	case r.SessionEpoch == 0 || r.SessionEpoch == -1: // full, no session
	default:
		sess := l.sessions[r.SessionID]
		switch {
		case sess == nil:
			resp.ErrorCode = kerr.FetchSessionIDNotFound.Code
		case sess.epoch != r.SessionEpoch:
			resp.ErrorCode = kerr.InvalidFetchSessionEpoch.Code
		}
		if resp.ErrorCode != 0 {
			l.mu.Unlock()
			return resp
		}
		sess.epoch++
		resp.SessionID, incremental = r.SessionID, true
		maps.Copy(sess.parts, parts)
		for _, ft := range r.ForgottenTopics {
			for _, p := range ft.Partitions {
				delete(sess.parts, checkpoint.TopicPartition{Topic: name(ft.Topic, ft.TopicID), Partition: p})
			}
		}
		parts = maps.Clone(sess.parts)
	}
	if l.told[replica] == nil {
		l.told[replica] = map[checkpoint.TopicPartition][2]int64{}
	}
	told := l.told[replica]
	l.mu.Unlock()

	wait := time.NewTimer(time.Duration(r.MaxWaitMillis) * time.Millisecond)
	defer wait.Stop()
	for {
		resp.Topics = resp.Topics[:0]
		var changed []<-chan struct{}
		news := false
		byTopic := map[string]int{}
		for tp, rp := range parts {
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.Partition = tp.Partition
			p, ok := l.manager().Get(tp)
			switch {
			case !ok:
				sp.ErrorCode = kerr.NotLeaderForPartition.Code
			default:
				changed = append(changed, p.Tablet().Changed())
				sp.ErrorCode, _ = p.FollowerFetch(replica, rp.CurrentLeaderEpoch, rp.FetchOffset, rp.LogStartOffset)
				if sp.ErrorCode == 0 {
					l.read(p.Tablet(), rp, &sp)
				}
			}
			l.mu.Lock()
			now := [2]int64{sp.HighWatermark, sp.LogStartOffset}
			fresh := sp.ErrorCode != 0 || len(sp.RecordBatches) > 0 || told[tp] != now || l.refuse[tp].times > 0
			l.mu.Unlock()
			news = news || fresh
			if incremental && !fresh {
				continue
			}
			i, ok := byTopic[tp.Topic]
			if !ok {
				i = len(resp.Topics)
				byTopic[tp.Topic] = i
				rt := kmsg.FetchResponseTopic{Topic: tp.Topic}
				if ts, ok := snap.Topics[tp.Topic]; ok {
					rt.TopicID = ts.ID
				}
				resp.Topics = append(resp.Topics, rt)
			}
			resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, sp)
		}
		if news || len(changed) == 0 || !awaitAny(ctx, wait.C, changed) {
			break
		}
	}
	l.mu.Lock()
	for _, rt := range resp.Topics {
		for i := range rt.Partitions {
			sp := &rt.Partitions[i]
			tp := checkpoint.TopicPartition{Topic: rt.Topic, Partition: sp.Partition}
			if rf := l.refuse[tp]; rf.times > 0 { // (as the answer goes: a fetch long-polling before is refused too)
				sp.ErrorCode, sp.RecordBatches = rf.code, nil
				rf.times--
				l.refuse[tp] = rf
			}
			if sp.ErrorCode == 0 {
				told[checkpoint.TopicPartition{Topic: rt.Topic, Partition: sp.Partition}] = [2]int64{sp.HighWatermark, sp.LogStartOffset}
			}
		}
	}
	l.mu.Unlock()
	return resp
}

// read fills a partition's answer from the leader's log, to its end.
func (l *leaderEnd) read(t *tablet.Tablet, rp kmsg.FetchRequestTopicPartition, sp *kmsg.FetchResponseTopicPartition) {
	o := t.Offsets()
	sp.HighWatermark, sp.LastStableOffset, sp.LogStartOffset = o.HighWatermark, o.LastStableOffset, o.LogStartOffset
	if rp.FetchOffset < o.LogStartOffset || rp.FetchOffset > o.LogEndOffset {
		sp.ErrorCode = kerr.OffsetOutOfRange.Code
		return
	}
	res, err := t.Read(rp.FetchOffset, tablet.ReadOptions{MaxBytes: int(rp.PartitionMaxBytes), Isolation: tablet.ReadLogEnd, MinOneMessage: true})
	if err != nil {
		sp.ErrorCode = kerr.UnknownServerError.Code
		return
	}
	defer res.Close()
	if sp.RecordBatches, err = res.Records.AppendTo(nil); err != nil {
		sp.ErrorCode = kerr.UnknownServerError.Code
	}
}

// awaitAny waits for one of chs to close (true), or for done or ctx (false).
func awaitAny(ctx context.Context, done <-chan time.Time, chs []<-chan struct{}) bool {
	woke := make(chan struct{})
	stop := make(chan struct{})
	defer close(stop)
	for _, ch := range chs {
		go func() {
			select {
			case <-ch:
				select {
				case woke <- struct{}{}:
				case <-stop:
				}
			case <-stop:
			}
		}()
	}
	select {
	case <-woke:
		return true
	case <-done:
	case <-ctx.Done():
	}
	return false
}

// refuseNext answers the partition's next n fetches with code.
func (l *leaderEnd) refuseNext(tp checkpoint.TopicPartition, code int16, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refuse[tp] = refusal{code: code, times: n}
}

// seen returns the fetch requests served so far.
func (l *leaderEnd) seen() []fetchSeen {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]fetchSeen(nil), l.fetches...)
}

// dropSessions forgets every session (as a restarted leader).
func (l *leaderEnd) dropSessions() {
	l.mu.Lock()
	defer l.mu.Unlock()
	clear(l.sessions)
}
