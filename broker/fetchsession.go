package broker

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Incremental fetch sessions (KIP-227), as Kafka serves them: a client
// sends its partitions once (epoch 0) and the broker keeps them under a
// session id; each later fetch (epoch 1, 2, …) sends only the partitions
// whose offsets changed and the ones to forget, and the answer holds only
// the partitions with something new (records, an error, a moved high
// watermark, stable offset or log start). A consumer of thousands of
// partitions, and in a cluster a follower, then sends and gets what
// changed instead of every partition every time.
//
// The session layer turns an incremental fetch into the whole one before
// authorization and the handler, and takes out of the answer what did not
// change: authorization, quotas and the handler see full fetches.

const (
	// defaultFetchSessionSlots is max.incremental.fetch.session.cache.slots.
	defaultFetchSessionSlots = 1000
	// fetchSessionStale is how long an unused session keeps its slot
	// against a new one (Kafka's eviction time for sessions).
	fetchSessionStale = 2 * time.Minute
)

// fetchSessions are the broker's sessions, at most slots of them.
type fetchSessions struct {
	mu    sync.Mutex // guards byID
	slots int
	byID  map[int32]*fetchSession
	now   func() time.Time
}

// fetchSession is one client's partitions and what it was last told.
type fetchSession struct {
	id       int32
	epoch    int32 // the epoch its next fetch must carry
	lastUsed time.Time
	parts    map[sessionKey]*sessionPart
	order    []sessionKey // the order partitions were added, as Kafka keeps them
	byID     bool         // v13+: topics by id
}

// sessionKey names a partition: by topic id from Fetch v13, else by name.
type sessionKey struct {
	topic     string
	id        [16]byte
	partition int32
}

// sessionPart is a partition of a session: what the client fetches and
// what it was last told (hw -1 before anything, as no partition answered
// without an error has: Kafka's INVALID_HIGH_WATERMARK).
type sessionPart struct {
	req               kmsg.FetchRequestTopicPartition
	hw, lso, logStart int64
}

func newFetchSessions(slots int, now func() time.Time) *fetchSessions {
	if slots == 0 {
		slots = defaultFetchSessionSlots
	}
	return &fetchSessions{slots: max(slots, 0), byID: map[int32]*fetchSession{}, now: now}
}

// nextEpoch is the epoch after e: 1 after the largest (0 and -1 mean
// "new" and "final").
func nextEpoch(e int32) int32 {
	if e == math.MaxInt32 {
		return 1
	}
	return e + 1
}

func keyOf(byID bool, topic string, id [16]byte, p int32) sessionKey {
	if byID {
		return sessionKey{id: id, partition: p}
	}
	return sessionKey{topic: topic, partition: p}
}

// fetchSessionStep is the registry's session step for Fetch: it answers a
// fetch of a session that does not exist or with the wrong epoch, makes an
// incremental fetch whole, and returns what takes the unchanged
// partitions out of the answer and tells the session id.
func fetchSessionStep(b *Broker, h header, req kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	r := req.(*kmsg.FetchRequest)
	if h.version < 7 || b.sessions.slots == 0 && r.SessionID == 0 {
		return nil, nil
	}
	s := b.sessions
	byID := h.version >= 13
	switch {
	case r.SessionEpoch == -1: // a full fetch without a session; one named is closed
		if r.SessionID != 0 {
			s.remove(r.SessionID)
		}
		return nil, nil
	case r.SessionEpoch == 0: // a full fetch that opens a session (closing one named)
		if r.SessionID != 0 {
			s.remove(r.SessionID)
		}
		sent := wholeParts(r, byID)
		return nil, func(resp kmsg.Response) {
			fr := fetchResponseOf(resp)
			if fr == nil || fr.ErrorCode != 0 {
				return
			}
			sess := s.open(sent, byID)
			if sess == nil {
				return // no slot: the client goes on with full fetches
			}
			fr.SessionID = sess.id
			s.mu.Lock()
			defer s.mu.Unlock()
			sess.filter(fr)
		}
	}
	s.mu.Lock()
	sess := s.byID[r.SessionID]
	resp := r.ResponseKind().(*kmsg.FetchResponse)
	switch {
	case sess == nil:
		s.mu.Unlock()
		resp.ErrorCode = kerr.FetchSessionIDNotFound.Code
		return resp, nil
	case sess.epoch != r.SessionEpoch:
		s.mu.Unlock()
		resp.ErrorCode = kerr.InvalidFetchSessionEpoch.Code
		return resp, nil
	}
	sess.epoch, sess.lastUsed = nextEpoch(sess.epoch), s.now()
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			k := keyOf(byID, t.Topic, t.TopicID, p.Partition)
			sp := sess.parts[k]
			if sp == nil {
				sp = &sessionPart{hw: -1, lso: -1, logStart: -1}
				sess.parts[k] = sp
				sess.order = append(sess.order, k)
			}
			sp.req = p
		}
	}
	for _, t := range r.ForgottenTopics {
		for _, p := range t.Partitions {
			k := keyOf(byID, t.Topic, t.TopicID, p)
			if sess.parts[k] != nil {
				delete(sess.parts, k)
				sess.order = slices.DeleteFunc(sess.order, func(x sessionKey) bool { return x == k })
			}
		}
	}
	// The whole fetch: every partition of the session, in its order, with
	// the offsets last sent for it.
	r.Topics, r.ForgottenTopics = nil, nil
	var last sessionKey
	for i, k := range sess.order {
		p := sess.parts[k].req
		if n := len(r.Topics); i > 0 && k.topic == last.topic && k.id == last.id {
			r.Topics[n-1].Partitions = append(r.Topics[n-1].Partitions, p)
			continue
		}
		last = k
		name := k.topic
		if byID { // named once per topic, as it is now (a topic made again has another id)
			name, _ = b.topics.name(k.id)
		}
		r.Topics = append(r.Topics, kmsg.FetchRequestTopic{Topic: name, TopicID: k.id, Partitions: []kmsg.FetchRequestTopicPartition{p}})
	}
	s.mu.Unlock()
	return nil, func(resp kmsg.Response) {
		fr := fetchResponseOf(resp)
		if fr == nil {
			return
		}
		fr.SessionID = sess.id
		s.mu.Lock()
		defer s.mu.Unlock()
		sess.filter(fr)
	}
}

// wholeParts are a full fetch's partitions, kept before authorization
// takes the refused ones out of the request.
func wholeParts(r *kmsg.FetchRequest, byID bool) []sessionEntry {
	var out []sessionEntry
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			out = append(out, sessionEntry{keyOf(byID, t.Topic, t.TopicID, p.Partition), p})
		}
	}
	return out
}

type sessionEntry struct {
	key sessionKey
	req kmsg.FetchRequestTopicPartition
}

// fetchResponseOf is the FetchResponse of the handler's answer.
func fetchResponseOf(resp kmsg.Response) *kmsg.FetchResponse {
	switch r := resp.(type) {
	case *fetchReply:
		return r.FetchResponse
	case *kmsg.FetchResponse:
		return r
	}
	return nil
}

// filter takes out of an answer the partitions with nothing new for the
// session (no records, no error, the same high watermark, stable offset
// and log start as last told) and remembers what it tells; the caller
// holds the sessions' lock.
func (sess *fetchSession) filter(fr *kmsg.FetchResponse) {
	topics := fr.Topics[:0]
	for _, t := range fr.Topics {
		parts := t.Partitions[:0]
		for _, p := range t.Partitions {
			sp := sess.parts[keyOf(sess.byID, t.Topic, t.TopicID, p.Partition)]
			if sp == nil { // (not one of the session's: answered as it is)
				parts = append(parts, p)
				continue
			}
			changed := len(p.RecordBatches) > 0 || p.ErrorCode != 0 || p.PreferredReadReplica >= 0 ||
				p.HighWatermark != sp.hw || p.LastStableOffset != sp.lso || p.LogStartOffset != sp.logStart
			if !changed {
				continue
			}
			sp.hw, sp.lso, sp.logStart = p.HighWatermark, p.LastStableOffset, p.LogStartOffset
			parts = append(parts, p)
		}
		if len(parts) > 0 {
			t.Partitions = parts
			topics = append(topics, t)
		}
	}
	fr.Topics = topics
}

// open makes a session of a full fetch's partitions, evicting a stale one
// or a smaller one when every slot is taken; nil when there is no room.
func (s *fetchSessions) open(parts []sessionEntry, byID bool) *fetchSession {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if len(s.byID) >= s.slots && !s.evictLocked(now, len(parts)) {
		return nil
	}
	sess := &fetchSession{epoch: 1, lastUsed: now, parts: map[sessionKey]*sessionPart{}, byID: byID}
	for sess.id == 0 || s.byID[sess.id] != nil {
		sess.id = rand.Int32N(math.MaxInt32-1) + 1
	}
	for _, e := range parts {
		if sess.parts[e.key] == nil {
			sess.order = append(sess.order, e.key)
		}
		sess.parts[e.key] = &sessionPart{req: e.req, hw: -1, lso: -1, logStart: -1}
	}
	s.byID[sess.id] = sess
	return sess
}

// evictLocked frees a slot as Kafka's session cache does: the least
// recently used session if it is stale, else the smallest one if the new
// session has more partitions. It reports whether a slot is free.
func (s *fetchSessions) evictLocked(now time.Time, size int) bool {
	var lru, smallest *fetchSession
	for _, sess := range s.byID {
		if lru == nil || sess.lastUsed.Before(lru.lastUsed) {
			lru = sess
		}
		if smallest == nil || len(sess.parts) < len(smallest.parts) {
			smallest = sess
		}
	}
	switch {
	case lru != nil && now.Sub(lru.lastUsed) > fetchSessionStale:
		delete(s.byID, lru.id)
	case smallest != nil && len(smallest.parts) < size:
		delete(s.byID, smallest.id)
	default:
		return false
	}
	return true
}

func (s *fetchSessions) remove(id int32) {
	s.mu.Lock()
	delete(s.byID, id)
	s.mu.Unlock()
}

// count is the number of open sessions.
// FetchSessions is how many incremental fetch sessions (KIP-227) are
// open on the broker: its consumers' and its followers'.
func (b *Broker) FetchSessions() int { return b.sessions.count() }

func (s *fetchSessions) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byID)
}
