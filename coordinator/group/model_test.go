package group

import (
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/tablet"
	"github.com/seglog/seglog/vfs"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// testEnv is a coordinator on an in-memory data directory, with a fake
// clock.
type testEnv struct {
	t     *testing.T
	m     *tablet.Manager
	clock *fakeClock
	opts  Options
	c     *Coordinator
}

func newTestEnv(t *testing.T, opts Options) *testEnv {
	m, err := tablet.OpenManager(vfs.NewMem(), "/data", tablet.ManagerOptions{Tablet: tablet.Options{Logger: quiet}})
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	for p := range int32(3) {
		_, err := m.GetOrCreate(checkpoint.TopicPartition{Topic: "t", Partition: p}, nil)
		require.NoError(t, err)
	}
	e := &testEnv{t: t, m: m, clock: newFakeClock()}
	opts.Logger, opts.clock = quiet, e.clock
	if opts.Partitions == 0 {
		opts.Partitions = 4
	}
	e.opts = opts
	e.c, err = New(m, opts)
	require.NoError(t, err)
	return e
}

// restart is a coordinator restart: a new one loads the same directory.
func (e *testEnv) restart() {
	require.NoError(e.t, e.c.Close())
	var err error
	e.c, err = New(e.m, e.opts)
	require.NoError(e.t, err)
}

// simMember is a simulated client of a group: it joins (rejoining with the
// id MEMBER_ID_REQUIRED gives it), syncs when its join completes (the
// leader assigns), heartbeats, commits, leaves.
type simMember struct {
	name       string
	instance   string // static when set
	id         string
	generation int32
	joining    chan *kmsg.JoinGroupResponse
	syncing    chan *kmsg.SyncGroupResponse
	members    []string // the leader's join response
	leader     bool
	stable     bool
	assignment string
	fresh      bool // joining with the id MEMBER_ID_REQUIRED just gave
}

const sessionMs, rebalanceMs = 10_000, 10_000

func (s *simMember) joinRequest() *kmsg.JoinGroupRequest {
	r := kmsg.NewPtrJoinGroupRequest()
	r.SetVersion(7)
	r.Group, r.MemberID, r.ProtocolType = "g", s.id, "consumer"
	r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = sessionMs, rebalanceMs
	if s.instance != "" {
		r.InstanceID = kmsg.StringPtr(s.instance)
	}
	r.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte("meta")}}
	return r
}

// model drives random members against one group and checks the state
// machine's invariants after every step.
type model struct {
	t       *testing.T
	e       *testEnv
	rng     *rand.Rand
	members []*simMember
	lastGen int32
	// committed is what the model expects the group's offsets to be.
	committed map[int32]int64
	log       []string
	counts    map[bool]int // join responses, without error or with
	stables   int          // syncs answered with an assignment
}

func (md *model) step(format string, args ...any) {
	md.log = append(md.log, fmt.Sprintf(format, args...))
	if len(md.log) > 40 {
		md.log = md.log[1:]
	}
}

func (md *model) fail(format string, args ...any) {
	md.t.Helper()
	md.t.Fatalf("%s\nlast steps:\n%s", fmt.Sprintf(format, args...), joinLines(md.log))
}

func joinLines(l []string) string {
	out := ""
	for _, s := range l {
		out += "  " + s + "\n"
	}
	return out
}

func (md *model) join(s *simMember) {
	resp, ch := md.e.c.join(Client{ID: s.name, Host: "/127.0.0.1"}, s.joinRequest())
	s.stable, s.syncing = false, nil
	if ch != nil {
		s.joining = ch
		md.step("%s joins as %q: waits", s.name, s.id)
		return
	}
	md.step("%s joins as %q: %s", s.name, s.id, kerr.ErrorForCode(resp.ErrorCode))
	md.onJoin(s, resp)
}

// onJoin takes a join response.
func (md *model) onJoin(s *simMember, resp *kmsg.JoinGroupResponse) {
	s.joining = nil
	md.counts[kerr.ErrorForCode(resp.ErrorCode) == nil]++
	switch resp.ErrorCode {
	case 0:
		if resp.Generation < md.lastGen {
			md.fail("%s: generation %d went back from %d", s.name, resp.Generation, md.lastGen)
		}
		md.lastGen = resp.Generation
		s.id, s.generation, s.leader = resp.MemberID, resp.Generation, resp.LeaderID == resp.MemberID
		s.members = nil
		for _, m := range resp.Members {
			s.members = append(s.members, m.MemberID)
		}
		if s.leader && len(s.members) == 0 && s.instance == "" {
			md.fail("%s leads generation %d with no members", s.name, resp.Generation)
		}
		md.sync(s)
	case kerr.MemberIDRequired.Code:
		if resp.MemberID == "" {
			md.fail("MEMBER_ID_REQUIRED without an id")
		}
		s.id, s.fresh = resp.MemberID, true
		md.join(s)
		s.fresh = false
	case kerr.UnknownMemberID.Code, kerr.FencedInstanceID.Code:
		if s.fresh {
			md.fail("%s: UNKNOWN_MEMBER_ID for the id the coordinator just gave it", s.name)
		}
		s.id = ""
	case kerr.RebalanceInProgress.Code, kerr.CoordinatorNotAvailable.Code:
	default:
		md.fail("%s: join answered %s", s.name, kerr.ErrorForCode(resp.ErrorCode))
	}
}

func (md *model) sync(s *simMember) {
	r := kmsg.NewPtrSyncGroupRequest()
	r.SetVersion(5)
	r.Group, r.MemberID, r.Generation = "g", s.id, s.generation
	r.ProtocolType, r.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
	if s.instance != "" {
		r.InstanceID = kmsg.StringPtr(s.instance)
	}
	if s.leader {
		for _, m := range s.members {
			r.GroupAssignment = append(r.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: m,
				MemberAssignment: fmt.Appendf(nil, "gen %d for %s", s.generation, m)})
		}
	}
	resp, ch := md.e.c.sync(r)
	if ch != nil {
		s.syncing = ch
		md.step("%s syncs generation %d: waits", s.name, s.generation)
		return
	}
	md.step("%s syncs generation %d: %s", s.name, s.generation, kerr.ErrorForCode(resp.ErrorCode))
	md.onSync(s, resp)
}

func (md *model) onSync(s *simMember, resp *kmsg.SyncGroupResponse) {
	s.syncing = nil
	switch resp.ErrorCode {
	case 0:
		md.stables++
		s.stable, s.assignment = true, string(resp.MemberAssignment)
		if want := fmt.Sprintf("gen %d for %s", s.generation, s.id); s.assignment != want && s.assignment != "" {
			// A static member that came back keeps its old assignment.
			if s.instance == "" {
				md.fail("%s got assignment %q, want %q", s.name, s.assignment, want)
			}
		}
	case kerr.RebalanceInProgress.Code, kerr.IllegalGeneration.Code:
		md.join(s)
	case kerr.UnknownMemberID.Code, kerr.FencedInstanceID.Code:
		s.id = ""
	default:
		md.fail("%s: sync answered %s", s.name, kerr.ErrorForCode(resp.ErrorCode))
	}
}

func (md *model) heartbeat(s *simMember) {
	r := kmsg.NewPtrHeartbeatRequest()
	r.SetVersion(4)
	r.Group, r.MemberID, r.Generation = "g", s.id, s.generation
	if s.instance != "" {
		r.InstanceID = kmsg.StringPtr(s.instance)
	}
	resp := md.e.c.Heartbeat(r)
	md.step("%s heartbeats generation %d: %s", s.name, s.generation, kerr.ErrorForCode(resp.ErrorCode))
	switch resp.ErrorCode {
	case 0:
	case kerr.RebalanceInProgress.Code, kerr.IllegalGeneration.Code:
		md.join(s)
	case kerr.UnknownMemberID.Code, kerr.FencedInstanceID.Code:
		s.id, s.stable = "", false
	default:
		md.fail("%s: heartbeat answered %s", s.name, kerr.ErrorForCode(resp.ErrorCode))
	}
}

func (md *model) leave(s *simMember) {
	r := kmsg.NewPtrLeaveGroupRequest()
	r.SetVersion(4)
	r.Group = "g"
	r.Members = []kmsg.LeaveGroupRequestMember{{MemberID: s.id}}
	if s.instance != "" {
		r.Members[0].InstanceID = kmsg.StringPtr(s.instance)
	}
	resp := md.e.c.LeaveGroup(r)
	md.step("%s leaves as %q: %v", s.name, s.id, resp.Members)
	s.id, s.stable, s.joining, s.syncing = "", false, nil, nil
}

func (md *model) commit(s *simMember) {
	r := kmsg.NewPtrOffsetCommitRequest()
	r.SetVersion(8)
	r.Group, r.MemberID, r.Generation = "g", s.id, s.generation
	p := int32(md.rng.IntN(3))
	off := md.rng.Int64N(1000)
	r.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: p, Offset: off, LeaderEpoch: -1}}}}
	resp := md.e.c.OffsetCommit(r)
	code := resp.Topics[0].Partitions[0].ErrorCode
	md.step("%s commits t-%d at %d (generation %d): %s", s.name, p, off, s.generation, kerr.ErrorForCode(code))
	switch code {
	case 0:
		md.committed[p] = off
	case kerr.RebalanceInProgress.Code, kerr.IllegalGeneration.Code, kerr.UnknownMemberID.Code:
	default:
		md.fail("%s: commit answered %s", s.name, kerr.ErrorForCode(code))
	}
}

// deliver takes the responses of completed joins and syncs.
func (md *model) deliver() {
	for progress := true; progress; {
		progress = false
		for _, s := range md.members {
			if s.joining != nil {
				select {
				case resp := <-s.joining:
					md.step("%s's join completes: %s gen %d", s.name, kerr.ErrorForCode(resp.ErrorCode), resp.Generation)
					md.onJoin(s, resp)
					progress = true
				default:
				}
			}
			if s.syncing != nil {
				select {
				case resp := <-s.syncing:
					md.step("%s's sync completes: %s", s.name, kerr.ErrorForCode(resp.ErrorCode))
					md.onSync(s, resp)
					progress = true
				default:
				}
			}
		}
	}
}

// groupView is what a restart must keep of a stable group.
type groupView struct {
	state      State
	generation int32
	leader     string
	protocol   string
	members    []string // id and assignment
}

func (v groupView) String() string {
	return fmt.Sprintf("%+v", []any{v.state, v.generation, v.leader, v.protocol, v.members})
}

func (md *model) snapshot() groupView {
	md.e.c.mu.Lock()
	g := md.e.c.groups["g"]
	md.e.c.mu.Unlock()
	if g == nil {
		return groupView{state: Dead}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	v := groupView{state: g.state, generation: g.generation, leader: g.leader, protocol: g.protocol}
	for _, id := range g.order {
		v.members = append(v.members, id+"="+string(g.members[id].assignment))
	}
	return v
}

// check asserts the group's invariants.
func (md *model) check() {
	md.t.Helper()
	md.e.c.mu.Lock()
	g := md.e.c.groups["g"]
	md.e.c.mu.Unlock()
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.order) != len(g.members) {
		md.fail("order %v and members %d differ", g.order, len(g.members))
	}
	switch g.state {
	case Empty:
		if len(g.members) > 0 {
			md.fail("Empty with %d members", len(g.members))
		}
	case Stable, CompletingRebalance:
		if len(g.members) == 0 || g.members[g.leader] == nil || g.protocol != "range" {
			md.fail("%s with %d members, leader %q, protocol %q", g.state, len(g.members), g.leader, g.protocol)
		}
	case PreparingRebalance:
		if g.joinTimer == nil {
			md.fail("PreparingRebalance without a timer")
		}
	}
	for id, m := range g.members {
		if m.instanceID != "" && g.static[m.instanceID] != id {
			md.fail("static %s maps to %q, not %q", m.instanceID, g.static[m.instanceID], id)
		}
		if g.state == Stable && m.syncWait != nil {
			md.fail("Stable with %s waiting for its sync", id)
		}
		if g.state != PreparingRebalance && m.joinWait != nil {
			md.fail("%s with %s waiting for its join", g.state, id)
		}
	}
	for tp, o := range g.offsets {
		if md.committed[tp.partition] != o.Offset {
			md.fail("t-%d committed at %d, the model says %d", tp.partition, o.Offset, md.committed[tp.partition])
		}
	}
}

// The state machine against random joins, syncs, heartbeats, leaves,
// commits, clock moves (expiries, timeouts) and restarts: its invariants
// hold at every step, no member that keeps its session gets
// UNKNOWN_MEMBER_ID from a join, every waiting join and sync is answered,
// and a restart keeps the group and its offsets.
func TestGroupModel(t *testing.T) {
	for seed := range uint64(40) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			opts := Options{NoInitialDelay: seed%3 != 0}
			e := newTestEnv(t, opts)
			md := &model{t: t, e: e, rng: rand.New(rand.NewPCG(seed, 7)), committed: map[int32]int64{}, counts: map[bool]int{}}
			for i := range 4 {
				s := &simMember{name: fmt.Sprintf("m%d", i)}
				if i == 3 {
					s.instance = "static-3"
				}
				md.members = append(md.members, s)
			}
			for range 300 {
				s := md.members[md.rng.IntN(len(md.members))]
				switch op := md.rng.IntN(10); {
				case op < 3 && s.joining == nil && s.syncing == nil:
					md.join(s)
				case op < 5 && s.stable:
					md.heartbeat(s)
				case op < 6 && s.stable:
					md.commit(s)
				case op < 7 && s.id != "" && md.rng.IntN(3) == 0:
					md.leave(s)
				case op < 9:
					d := time.Duration(md.rng.IntN(4000)) * time.Millisecond
					if md.rng.IntN(10) == 0 {
						d = 3 * sessionMs * time.Millisecond
					}
					md.step("the clock moves %v", d)
					// Members that keep heartbeating do so while time passes.
					for left := d; left > 0; left -= time.Second {
						e.clock.Advance(min(left, time.Second))
						md.deliver()
						for _, o := range md.members {
							if o.stable && d < 3*sessionMs*time.Millisecond {
								md.heartbeat(o)
							}
						}
					}
				case op == 9 && md.rng.IntN(4) == 0:
					md.step("restart")
					before := md.snapshot()
					e.restart()
					if after := md.snapshot(); before.state == Stable && before.String() != after.String() {
						md.fail("a restart changed the stable group:\n%v\n%v", before, after)
					}
					for _, o := range md.members {
						o.joining, o.syncing = nil, nil // their connections broke
					}
				}
				md.deliver()
				md.check()
			}
			// Everyone still waiting is answered within the timeouts.
			e.clock.Advance(10 * rebalanceMs * time.Millisecond)
			md.deliver()
			e.clock.Advance(10 * rebalanceMs * time.Millisecond)
			md.deliver()
			for _, s := range md.members {
				if s.joining != nil || s.syncing != nil {
					md.fail("%s still waits for its join or sync", s.name)
				}
			}
			md.check()
			// A restart keeps the offsets.
			e.restart()
			md.check()
			require.Positive(t, md.counts[true], "joins completed")
			require.Positive(t, md.stables, "syncs completed")
			t.Logf("joins %d (errors %d), syncs %d, generation %d, offsets %d", md.counts[true], md.counts[false], md.stables, md.lastGen, len(md.committed))
		})
	}
}

func tpOf(topic string, p int32) checkpoint.TopicPartition {
	return checkpoint.TopicPartition{Topic: topic, Partition: p}
}
