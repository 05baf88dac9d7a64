package group

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/checkpoint"
)

// sim848 is a simulated consumer group (KIP-848) client: it heartbeats with
// what it owns, drops what the coordinator's assignment leaves out (so it
// reports it revoked on its next heartbeat), takes what it gains, and
// rejoins from nothing when fenced.
type sim848 struct {
	name     string
	id       string
	instance string
	epoch    int32
	topics   []string
	regex    string
	owned    assignment // what it holds: until its next beat, that includes what it is revoking
	keep     assignment // the last assignment it got: what it holds once its revocation is done
	sent     assignment // what it last reported owning
	joined   bool
	gone     bool // crashed: no more heartbeats
	last     time.Time
	version  int16
}

func newSim848(name string, topics []string) *sim848 {
	return &sim848{name: name, id: "member-" + name, topics: topics, owned: assignment{}, version: 1}
}

func (s *sim848) request(epoch int32, full bool) *kmsg.ConsumerGroupHeartbeatRequest {
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.SetVersion(s.version)
	r.Group, r.MemberID, r.MemberEpoch = "g", s.id, epoch
	if s.version == 0 && epoch == joinEpoch {
		r.MemberID = "" // v0: the coordinator names the member
	}
	if s.instance != "" {
		r.InstanceID = kmsg.StringPtr(s.instance)
	}
	if full || epoch == joinEpoch {
		r.RebalanceTimeoutMillis = rebalanceMs
		if s.regex != "" {
			r.SubscribedTopicRegex = kmsg.StringPtr(s.regex)
		} else {
			r.SubscribedTopicNames = slices.Clone(s.topics)
			if r.SubscribedTopicNames == nil {
				r.SubscribedTopicNames = []string{}
			}
		}
	}
	// As real clients do, it reports what it owns when that changed (a
	// revocation done), besides in full heartbeats.
	if full || epoch == joinEpoch || !s.owned.equal(s.sent) {
		r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		if epoch != joinEpoch {
			for _, t := range tpsOf(s.owned, nil) {
				r.Topics = append(r.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: t.TopicID, Partitions: t.Partitions})
			}
		}
		s.sent = s.owned
	}
	return r
}

// beat sends one heartbeat (joining first if it must) and applies the
// answer; it returns the error code.
func (s *sim848) beat(t *testing.T, c *Coordinator, full bool) int16 {
	epoch := s.epoch
	if !s.joined {
		epoch, s.owned = joinEpoch, assignment{}
	} else if s.keep != nil {
		s.owned = s.keep // revoked, as the coordinator asked
	}
	resp := c.ConsumerGroupHeartbeat(Client{ID: s.name, Host: "/127.0.0.1"}, s.request(epoch, full))
	s.last = c.opts.clock.Now()
	switch resp.ErrorCode {
	case 0:
	case kerr.FencedMemberEpoch.Code, kerr.UnknownMemberID.Code:
		s.joined, s.owned, s.keep, s.epoch = false, assignment{}, nil, 0
		return resp.ErrorCode
	default:
		return resp.ErrorCode
	}
	require.NotNil(t, resp.MemberID)
	s.id = *resp.MemberID
	if s.joined {
		require.GreaterOrEqual(t, resp.MemberEpoch, s.epoch, "%s: the member epoch went back", s.name)
	}
	s.joined, s.epoch = true, resp.MemberEpoch
	if a := resp.Assignment; a != nil {
		next := assignment{}
		for _, tp := range a.Topics {
			next[checkpoint.TopicID(tp.TopicID)] = slices.Sorted(slices.Values(tp.Partitions))
		}
		// Gains are owned at once; what the assignment leaves out is
		// revoked by the next beat.
		s.owned, s.keep = s.owned.union(next), next
	}
	return 0
}

func (s *sim848) leave(t *testing.T, c *Coordinator, epoch int32) {
	resp := c.ConsumerGroupHeartbeat(Client{ID: s.name, Host: "/127.0.0.1"}, s.request(epoch, false))
	require.Zero(t, resp.ErrorCode, "%s leaving", s.name)
	require.Equal(t, epoch, resp.MemberEpoch)
	s.joined, s.owned, s.keep, s.epoch = false, assignment{}, nil, 0
}

// checkOwnership fails if two live clients own one partition, or two of
// the coordinator's members hold one.
func checkOwnership(t *testing.T, e *testEnv, sims []*sim848, step int) {
	t.Helper()
	owner := map[tpKey]string{}
	for _, s := range sims {
		if s.gone || !s.joined {
			continue
		}
		for _, k := range s.owned.keys() {
			require.Empty(t, owner[k], "step %d: %v owned by %s and %s", step, k, owner[k], s.name)
			owner[k] = s.name
		}
	}
	g := e.c.lookup("g", false)
	if g == nil {
		return
	}
	defer g.mu.Unlock()
	if g.cg == nil {
		return
	}
	held := map[tpKey]string{}
	for _, m := range g.cg.members {
		for _, a := range []assignment{m.assigned, m.revoking} {
			for _, k := range a.keys() {
				require.Empty(t, held[k], "step %d: %v held by members %s and %s", step, k, held[k], m.id)
				held[k] = m.id
			}
		}
	}
	require.LessOrEqual(t, g.cg.assignmentEpoch, g.cg.epoch)
}

// describe848 is the group as ConsumerGroupDescribe shows it.
func describe848(e *testEnv) kmsg.ConsumerGroupDescribeResponseGroup {
	r := kmsg.NewPtrConsumerGroupDescribeRequest()
	r.Groups = []string{"g"}
	return e.c.ConsumerGroupDescribe(r).Groups[0]
}

// A model test of the consumer group protocol: random joins, leaves,
// crashes, static members leaving and coming back as new members,
// subscription changes, new topics and coordinator restarts. At every
// step no partition is owned twice and no epoch goes back; whenever the
// members settle, every subscribed partition is owned exactly once, the
// counts are even, and the group is Stable.
func TestConsumerGroupModel(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 848))
			e := newTestEnv(t, Options{ConsumerSessionTimeout: sessionMs * time.Millisecond})
			e.topic("a", 4)
			e.topic("b", 5)
			subs := [][]string{{"a"}, {"a", "b"}, {"b"}, {"t", "a"}}
			var sims []*sim848
			epochs := map[string]int32{}
			for step := range 400 {
				live := slices.DeleteFunc(slices.Clone(sims), func(s *sim848) bool { return s.gone })
				switch op := rng.IntN(100); {
				case op < 12 && len(live) < 7:
					s := newSim848(fmt.Sprintf("m%d", len(sims)), subs[rng.IntN(len(subs))])
					if rng.IntN(3) == 0 {
						s.instance = "inst-" + s.name
					}
					if rng.IntN(4) == 0 {
						s.version = 0
					}
					if rng.IntN(5) == 0 {
						s.topics, s.regex = nil, "[ab]"
					}
					sims = append(sims, s)
				case op < 16 && len(live) > 0:
					s := live[rng.IntN(len(live))]
					if s.joined {
						s.leave(t, e.c, leaveEpoch)
					}
				case op < 19 && len(live) > 0:
					live[rng.IntN(len(live))].gone = true // its session will end
				case op < 23 && len(live) > 0:
					s := live[rng.IntN(len(live))]
					if s.instance != "" && s.joined {
						s.leave(t, e.c, staticLeaveEpoch)
						s.id = s.id + "'" // it comes back as a new incarnation
					}
				case op < 28 && len(live) > 0:
					s := live[rng.IntN(len(live))]
					if s.regex == "" {
						s.topics = subs[rng.IntN(len(subs))]
					}
				case op < 30:
					e.topic(fmt.Sprintf("b%d", step), int32(1+rng.IntN(3)))
				case op < 33:
					before := describe848(e)
					e.restart()
					after := describe848(e)
					require.Equal(t, before, after, "step %d: the group after a restart", step)
				case op < 45:
					e.clock.Advance(time.Duration(1+rng.IntN(3)) * time.Second)
				}
				rng.Shuffle(len(live), func(i, j int) { live[i], live[j] = live[j], live[i] })
				for _, s := range live {
					// Some skip a beat now and then (never so long that
					// their session or rebalance times out): the others
					// go on while they have not heard of a change yet.
					if !s.gone && (rng.IntN(5) > 0 || e.clock.Now().Sub(s.last) >= 4*time.Second) {
						s.beat(t, e.c, rng.IntN(3) == 0)
						checkOwnership(t, e, sims, step)
					}
				}
				if d := describe848(e); d.ErrorCode == 0 {
					require.GreaterOrEqual(t, d.Epoch, epochs["g"], "step %d: the group epoch went back", step)
					epochs["g"] = d.Epoch
				}
			}
			// Settle: crashed members' sessions end, the live ones
			// heartbeat until nothing changes.
			e.clock.Advance(2 * sessionMs * time.Millisecond)
			live := slices.DeleteFunc(slices.Clone(sims), func(s *sim848) bool { return s.gone })
			for range 10 {
				for _, s := range live {
					s.beat(t, e.c, true)
				}
			}
			checkOwnership(t, e, sims, -1)
			d := describe848(e)
			if len(live) == 0 {
				return
			}
			require.Equal(t, "Stable", d.State)
			require.Len(t, d.Members, len(live))
			want := map[tpKey]bool{}
			for _, s := range live {
				for _, topic := range s.subscribedTopics(e) {
					id, n, ok := e.m.TopicPartitions(topic)
					require.True(t, ok)
					for p := range n {
						want[tpKey{id, p}] = true
					}
				}
			}
			got := map[tpKey]bool{}
			for _, s := range live {
				for _, k := range s.owned.keys() {
					got[k] = true
				}
			}
			require.Equal(t, want, got, "every subscribed partition owned once")
		})
	}
}

func (s *sim848) subscribedTopics(e *testEnv) []string {
	if s.regex == "" {
		return s.topics
	}
	rx, err := compileRegex(s.regex)
	require.NoError(e.t, err)
	var out []string
	for _, t := range e.m.TopicNames() {
		if rx.MatchString(t) {
			out = append(out, t)
		}
	}
	return out
}

func (e *testEnv) topic(name string, partitions int32) {
	for p := range partitions {
		_, err := e.m.GetOrCreate(checkpoint.TopicPartition{Topic: name, Partition: p}, nil)
		require.NoError(e.t, err)
	}
}
