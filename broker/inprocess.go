package broker

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/broker/auth"
	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/tablet"
)

// Caller is who sends an in-process request: the principal its ACLs are
// checked for (User:name, or Anonymous) and the host it comes from (what
// host-scoped ACLs and a group member's host see). It comes through no
// listener: Metadata gives the broker's default endpoints (its first
// listener's).
type Caller struct {
	Principal string
	Host      string
	ClientID  string
}

// Internal is the principal of the broker's own in-process requests (the
// console's sampler): every ACL allows it. No client can have it —
// authentication gives User: principals — only a Caller inside the
// process, and another broker's envelope for its sampler (envelope.go).
const Internal = "Internal:seglog"

// ErrNotServed is an in-process request of an API the broker does not
// serve (Kafka's UNSUPPORTED_VERSION).
var ErrNotServed = seglog.NewKafkaError("broker: the API is not served", 35)

// Request handles req inside the process as if caller had sent it on a
// connection: the same registry, session rules, ACLs, quotas and handlers,
// at the highest version both the broker and kmsg know (the request's
// Version is set to it). It is how the console reads and acts: never
// around what a Kafka client may see or do. The request is encoded and
// read back, so that a handler sees exactly what a client's would.
func (b *Broker) Request(ctx context.Context, caller Caller, req kmsg.Request) (kmsg.Response, error) {
	v, err := setVersion(req)
	if err != nil {
		return nil, err
	}
	h := callerHeader(caller)
	h.key, h.version = req.Key(), v
	fresh := kmsg.RequestForKey(req.Key())
	fresh.SetVersion(v)
	body := req.AppendTo(nil)
	resp, err := b.handleRecovering(ctx, h, fresh, body, b.opts.Logger)
	if err != nil {
		return nil, err
	}
	if resp == nil {
		return nil, fmt.Errorf("broker: %s v%d has no response", kmsg.NameForKey(req.Key()), v)
	}
	if fr, ok := resp.(*fetchReply); ok {
		return fr.materialize(h)
	}
	// As a client reads it: what the version does not carry (a topic's
	// name where it names topics by id) is not there.
	resp.SetVersion(v)
	read := req.ResponseKind()
	read.SetVersion(v)
	if err := read.ReadFrom(resp.AppendTo(nil)); err != nil {
		return nil, fmt.Errorf("broker: reading back %s v%d: %w", kmsg.NameForKey(req.Key()), v, err)
	}
	return read, nil
}

// setVersion sets req's version to the highest both kmsg and the
// registry know.
func setVersion(req kmsg.Request) (int16, error) {
	a := apiFor(req.Key())
	if a == nil {
		return 0, fmt.Errorf("%w: %s", ErrNotServed, kmsg.NameForKey(req.Key()))
	}
	v := min(a.max, req.MaxVersion())
	if v < a.min {
		return 0, fmt.Errorf("%w: %s v%d–v%d (kmsg knows up to v%d)", ErrNotServed, kmsg.NameForKey(req.Key()), a.min, a.max, req.MaxVersion())
	}
	req.SetVersion(v)
	return v, nil
}

// materialize is a fetch's answer as a client reads it: the records the
// reply would send from the segment files, in memory (the caller's fetch
// bounds them with its MaxBytes).
func (fr *fetchReply) materialize(h header) (kmsg.Response, error) {
	defer fr.close()
	chunks, _ := fr.encode(h)
	var buf bytes.Buffer
	if err := fr.writeTo(&buf, chunks); err != nil {
		return nil, err
	}
	body := buf.Bytes()[8:] // the size and the correlation id
	if fr.IsFlexible() {
		body = body[1:] // the header's empty tag buffer
	}
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(h.version)
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("broker: reading back a fetch's answer: %w", err)
	}
	return resp, nil
}

// Authorizes reports whether ACLs are on (authorizer.class.name): the
// console then shows nothing before a login.
func (b *Broker) Authorizes() bool { return b.guard.authz != nil }

// Login checks a user's password against its SCRAM credentials as SASL/PLAIN
// checks it, for the console's login form, and returns the principal
// (User:name). A refusal counts toward the same failed-authentication rate
// as SASL's (by the host it came from), is logged without the password,
// and waits connection.failed.authentication.delay.ms; an address past the
// rate is refused unchecked until it falls back.
func (b *Broker) Login(host, user, password string) (string, error) {
	if err := b.authn.refuseGuesser(strings.TrimPrefix(host, "/")); err != nil {
		return "", err
	}
	if b.creds == nil || user == "" || !b.creds.VerifyPassword(user, password) {
		err := fmt.Errorf("%w: unknown user or wrong password", auth.ErrBadCredentials)
		b.authn.authFailed(header{host: host}, "console", user, err.Error(), true)
		b.authn.failedAuthPause()
		return "", err
	}
	b.metrics.authentications.WithLabelValues("console", "ok").Inc()
	return "User:" + user, nil
}

// PartitionDetail is what this broker's replica of a partition holds, as
// the console's partition page shows it.
type PartitionDetail struct {
	Offsets ReplicaOffsets
	// Segments are the newest local segments (at most the number asked
	// for), oldest first; SegmentCount is how many there are in all.
	Segments     []SegmentDetail
	SegmentCount int
	// Tiered reports a tier attached; TierObjects are its objects.
	Tiered      bool
	TierObjects []TierObject
	// Leading reports that this broker leads the partition (always on a
	// single node); Followers are the other replicas' progress then.
	Leading   bool
	Followers []FollowerDetail
}

// ReplicaOffsets are a replica's offsets: its log start (and local log
// start, with a tier), high watermark, last stable offset, log end, and
// what is durable (the recovery point: records, indexes and writer
// snapshots; the durable offset: records).
type ReplicaOffsets struct {
	LogStartOffset, LocalLogStartOffset, HighWatermark, LastStableOffset, LogEndOffset int64
	RecoveryPoint, DurableOffset                                                       int64
}

// SegmentDetail is a local segment as an operator looks at it: its
// offsets, size and file, its largest and first timestamps (-1: none),
// and its offset index's fill (IndexFull: either index is full).
type SegmentDetail struct {
	BaseOffset, NextOffset, Size int64
	Path                         string
	MaxTimestamp, FirstTimestamp int64
	IndexEntries, IndexSlots     int
	IndexFull                    bool
}

// TierObject is one of a tier's objects: its key, the offsets it holds,
// its size and its largest timestamp.
type TierObject struct {
	Key                                        string
	BaseOffset, NextOffset, Size, MaxTimestamp int64
}

// FollowerDetail is a follower's progress as its leader sees it: the
// offset it fetches next (-1: not yet fetched in this leadership), and
// when it last had the leader's log end.
type FollowerDetail struct {
	Replica      int32
	LogEnd       int64
	LastCaughtUp time.Time
}

// Authorized reports whether caller may do op on the resource (always
// without ACLs): what the console asks before it shows what no single
// Kafka request answers, such as the broker's own charts.
func (b *Broker) Authorized(caller Caller, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	return b.guard.may(callerHeader(caller), op, rt, name)
}

func callerHeader(caller Caller) header {
	return header{clientID: caller.ClientID, host: caller.Host, sess: &session{principal: cmp.Or(caller.Principal, Anonymous), authed: true}}
}

// LogEnds sums the log end offsets of this broker's replicas by topic:
// its growth is the records appended (on a leader) or replicated (on a
// follower) since.
func (b *Broker) LogEnds() map[string]int64 {
	out := map[string]int64{}
	for _, t := range b.m.Tablets() {
		out[t.TopicPartition().Topic] += t.Offsets().LogEndOffset
	}
	return out
}

// ErrNoReplica is a partition this broker holds no replica of.
var ErrNoReplica = seglog.NewKafkaError("broker: this broker holds no replica of the partition", kerr.UnknownTopicOrPartition.Code)

// ErrNotAuthorized is a caller without Describe on the topic.
var ErrNotAuthorized = seglog.NewKafkaError("broker: not authorized to describe the topic", kerr.TopicAuthorizationFailed.Code)

// DescribePartition describes this broker's replica of a partition —
// offsets, its newest segments (at most newest of them), its tier's
// objects, its followers' progress while it leads — for a caller that may
// Describe the topic. It reads the tablet's published view, never the
// directory.
func (b *Broker) DescribePartition(caller Caller, topic string, partition int32, newest int) (PartitionDetail, error) {
	if !b.guard.may(callerHeader(caller), opDescribe, resTopic, topic) {
		return PartitionDetail{}, ErrNotAuthorized
	}
	tp := checkpoint.TopicPartition{Topic: topic, Partition: partition}
	t, ok := b.m.Get(tp)
	if !ok {
		return PartitionDetail{}, ErrNoReplica
	}
	d := PartitionDetail{Offsets: ReplicaOffsets(t.Offsets())}
	var segs []tablet.SegmentDetail
	d.SegmentCount, segs = t.SegmentDetails(newest)
	for _, g := range segs {
		d.Segments = append(d.Segments, SegmentDetail{BaseOffset: g.BaseOffset, NextOffset: g.NextOffset, Size: g.Size, Path: g.Path,
			MaxTimestamp: g.MaxTimestamp, FirstTimestamp: g.FirstTimestamp, IndexEntries: g.IndexEntries, IndexSlots: g.IndexSlots, IndexFull: g.IndexFull})
	}
	objs, tiered := t.TierObjects()
	d.Tiered = tiered
	for _, o := range objs {
		d.TierObjects = append(d.TierObjects, TierObject{Key: o.Key, BaseOffset: o.BaseOffset, NextOffset: o.NextOffset, Size: o.Size, MaxTimestamp: o.MaxTimestamp})
	}
	d.Leading = false
	if p, ok := b.replicas.Get(tp); ok {
		d.Leading = p.Leads()
		for _, f := range p.Followers() {
			d.Followers = append(d.Followers, FollowerDetail(f))
		}
	}
	return d, nil
}
