package jepsen

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The faults the nemesis knows.
const (
	// FaultPowerCut cuts a broker's power: only what fsync made durable is
	// kept; it restarts at once.
	FaultPowerCut = "power-cut"
	// FaultCrash crashes a broker (its page cache kept, as SIGKILL); it
	// restarts after a while.
	FaultCrash = "crash"
	// FaultCrashLeader crashes a partition's leader.
	FaultCrashLeader = "crash-leader"
	// FaultCrashController crashes the controller.
	FaultCrashController = "crash-controller"
	// FaultPause SIGSTOPs a leader past its session (a zombie), then
	// SIGCONTs it.
	FaultPause = "pause"
	// FaultCutThenController cuts a broker's power, restarts it and, as
	// soon as it listens, crashes the controller.
	FaultCutThenController = "cut+controller"
	// FaultCutThenLeader cuts a broker's power, restarts it and, as soon
	// as it listens, crashes another partition's leader.
	FaultCutThenLeader = "cut+leader"
	// FaultPauseThenController pauses a leader past its session, then
	// crashes the controller before it resumes.
	FaultPauseThenController = "pause+controller"
	// FaultPauseCoordinator pauses the txn workload's group coordinator
	// past its session (a zombie coordinator), then resumes it.
	FaultPauseCoordinator = "pause-coordinator"
	// FaultEtcdKill SIGKILLs an etcd member, restarted after a while.
	FaultEtcdKill = "etcd-kill"
	// FaultEtcdQuorum SIGSTOPs a majority of etcd's members for a while.
	FaultEtcdQuorum = "etcd-quorum"

	// FaultPartitionEtcd cuts a leader off from etcd (its session
	// expires while it runs and clients still reach it), then heals.
	FaultPartitionEtcd = "partition-etcd"
	// FaultPartitionReplication cuts a leader off from its followers
	// (their fetches), not from etcd, then heals.
	FaultPartitionReplication = "partition-replication"
	// FaultIsolate cuts a leader off from etcd and from its followers.
	FaultIsolate = "isolate"
	// FaultSlowNetwork delays every broker's links by 50 ms.
	FaultSlowNetwork = "slow-network"
)

// NetworkFaults need the fault proxies (Options.TB).
var NetworkFaults = []string{FaultPartitionEtcd, FaultPartitionReplication, FaultIsolate, FaultSlowNetwork}

// AllFaults is every fault, what `make jepsen` chooses from.
var AllFaults = []string{FaultPowerCut, FaultCrash, FaultCrashLeader, FaultCrashController, FaultPause,
	FaultCutThenController, FaultCutThenLeader, FaultPauseThenController, FaultPauseCoordinator, FaultEtcdKill, FaultEtcdQuorum,
	FaultPartitionEtcd, FaultPartitionReplication, FaultIsolate, FaultSlowNetwork}

// Step is one fault of the schedule and the quiet time before it.
type Step struct {
	Fault string
	Quiet time.Duration
	// Pick chooses among the candidates (brokers, members) when the fault
	// runs: the same seed makes the same choices.
	Pick uint64
}

// Schedule makes n steps from the seed, each fault drawn from kinds (in
// turn when cycle is set, so every kind is run).
func Schedule(seed int64, n int, kinds []string, cycle bool) []Step {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x6a657073656e))
	out := make([]Step, n)
	for i := range out {
		k := kinds[rng.IntN(len(kinds))]
		if cycle {
			k = kinds[i%len(kinds)]
		}
		out[i] = Step{Fault: k, Quiet: time.Duration(1000+rng.IntN(2000)) * time.Millisecond, Pick: rng.Uint64()}
	}
	return out
}

// nemesis runs the schedule's faults on the cluster.
type nemesis struct {
	c     *Cluster
	h     *History
	opts  Options
	topic string
	group string // (the txn workload's)
	log   func(string, ...any)
}

// metadata asks the brokers that run for the controller and each
// partition's leader and ISR.
func (n *nemesis) metadata(ctx context.Context) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr(n.topic)
	req.Topics = append(req.Topics, t)
	resp, err := n.request(ctx, req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.MetadataResponse), nil
}

// request sends req to the brokers that run.
func (n *nemesis) request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	var seeds []string
	for i, s := range n.c.Seeds() {
		if n.c.Running(int32(i + 1)) {
			seeds = append(seeds, s)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RequestRetries(2))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return cl.Request(rctx, req)
}

// coordinator is the txn workload's group's coordinator, or -1.
func (n *nemesis) coordinator(ctx context.Context) int32 {
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey, req.CoordinatorKeys = n.group, []string{n.group}
	resp, err := n.request(ctx, req)
	if err != nil {
		return -1
	}
	r := resp.(*kmsg.FindCoordinatorResponse)
	for _, c := range r.Coordinators {
		if c.ErrorCode == 0 {
			return c.NodeID
		}
	}
	if r.ErrorCode == 0 && len(r.Coordinators) == 0 {
		return r.NodeID
	}
	return -1
}

// controller is the controller's id, or -1.
func (n *nemesis) controller(ctx context.Context) int32 {
	m, err := n.metadata(ctx)
	if err != nil {
		return -1
	}
	return m.ControllerID
}

// leaders are the topic's partitions' leaders, in partition order.
func (n *nemesis) leaders(ctx context.Context) []int32 {
	m, err := n.metadata(ctx)
	if err != nil || len(m.Topics) != 1 {
		return nil
	}
	var out []int32
	for _, p := range m.Topics[0].Partitions {
		if p.Leader >= 0 && !slices.Contains(out, p.Leader) {
			out = append(out, p.Leader)
		}
	}
	slices.Sort(out)
	return out
}

// stable waits until every broker is listed and every partition of the
// topic has a leader and a full ISR, at most d; it says whether it got
// there.
func (n *nemesis) stable(ctx context.Context, d time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for ctx.Err() == nil {
		if m, err := n.metadata(ctx); err == nil && len(m.Brokers) == n.opts.Brokers && len(m.Topics) == 1 && m.Topics[0].ErrorCode == 0 {
			ok := len(m.Topics[0].Partitions) == n.opts.Partitions
			for _, p := range m.Topics[0].Partitions {
				ok = ok && p.Leader >= 0 && len(p.ISR) == n.opts.ReplicationFactor
			}
			if ok {
				return true
			}
		}
		pause(ctx, 250*time.Millisecond)
	}
	return false
}

// pick chooses one of the brokers 1..n, not those in not.
func pick(s Step, n int, not ...int32) int32 {
	var c []int32
	for id := int32(1); id <= int32(n); id++ {
		if !slices.Contains(not, id) {
			c = append(c, id)
		}
	}
	if len(c) == 0 {
		return 1
	}
	return c[s.Pick%uint64(len(c))]
}

// run performs one step's fault and heals it.
func (n *nemesis) run(ctx context.Context, s Step) error {
	o := n.opts
	note := func(f, format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		n.h.Add(Op{Process: "nemesis", Type: Info, F: f, Note: msg})
		n.log("nemesis: %s: %s", f, msg)
	}
	restart := func(id int32) error {
		if n.c.Running(id) {
			return nil
		}
		sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		return n.c.StartBroker(sctx, id)
	}
	leaderOrAny := func(not ...int32) int32 {
		var c []int32
		for _, l := range n.leaders(ctx) {
			if !slices.Contains(not, l) {
				c = append(c, l)
			}
		}
		if len(c) == 0 {
			return pick(s, o.Brokers, not...)
		}
		return c[s.Pick%uint64(len(c))]
	}
	down := o.SessionTimeout + time.Second
	if slices.Contains(NetworkFaults, s.Fault) && !n.c.Networked() {
		return fmt.Errorf("jepsen: %s needs the fault proxies (Options.TB)", s.Fault)
	}
	switch s.Fault {
	case FaultPowerCut:
		id := pick(s, o.Brokers)
		note(s.Fault, "broker %d loses power", id)
		n.c.Crash(id, true)
		if err := restart(id); err != nil {
			return err
		}
		note("heal", "broker %d restarted", id)
	case FaultCrash, FaultCrashLeader, FaultCrashController:
		id := pick(s, o.Brokers)
		switch s.Fault {
		case FaultCrashLeader:
			id = leaderOrAny()
		case FaultCrashController:
			if c := n.controller(ctx); c > 0 {
				id = c
			}
		}
		note(s.Fault, "broker %d crashes", id)
		n.c.Crash(id, false)
		pause(ctx, down)
		if err := restart(id); err != nil {
			return err
		}
		note("heal", "broker %d restarted", id)
	case FaultPause, FaultPauseCoordinator:
		id := leaderOrAny()
		if s.Fault == FaultPauseCoordinator {
			if c := n.coordinator(ctx); c > 0 {
				id = c
			}
		}
		note(s.Fault, "broker %d paused", id)
		n.c.Pause(id)
		pause(ctx, down+o.SessionTimeout)
		n.c.Resume(id)
		note("heal", "broker %d resumed", id)
	case FaultCutThenController, FaultCutThenLeader:
		ctrl := n.controller(ctx)
		id := pick(s, o.Brokers, ctrl)
		note(s.Fault, "broker %d loses power", id)
		n.c.Crash(id, true)
		served, err := n.c.StartBrokerUntilListening(ctx, id)
		if err != nil {
			return err
		}
		second := ctrl
		if s.Fault == FaultCutThenLeader || second <= 0 || second == id {
			second = leaderOrAny(id)
		}
		note(s.Fault, "broker %d listening again; broker %d crashes", id, second)
		n.c.Crash(second, false)
		if err := <-served; err != nil {
			return err
		}
		note("heal", "broker %d serves", id)
		pause(ctx, down)
		if err := restart(second); err != nil {
			return err
		}
		note("heal", "broker %d restarted", second)
	case FaultPauseThenController:
		id := leaderOrAny()
		note(s.Fault, "broker %d paused", id)
		n.c.Pause(id)
		pause(ctx, down)
		ctrl := n.controller(ctx)
		if ctrl > 0 && ctrl != id {
			note(s.Fault, "broker %d (the controller) crashes", ctrl)
			n.c.Crash(ctrl, false)
		}
		pause(ctx, o.SessionTimeout)
		n.c.Resume(id)
		note("heal", "broker %d resumed", id)
		if ctrl > 0 && ctrl != id {
			if err := restart(ctrl); err != nil {
				return err
			}
			note("heal", "broker %d restarted", ctrl)
		}
	case FaultEtcdKill:
		i := int(s.Pick % uint64(len(n.c.etcd)))
		note(s.Fault, "etcd member %d killed", i+1)
		n.c.KillEtcd(i)
		pause(ctx, down)
		if err := n.c.RestartEtcd(i); err != nil {
			return err
		}
		note("heal", "etcd member %d restarted", i+1)
	case FaultEtcdQuorum:
		k := len(n.c.etcd)/2 + 1
		first := int(s.Pick % uint64(len(n.c.etcd)))
		var ms []int
		for j := range k {
			ms = append(ms, (first+j)%len(n.c.etcd))
		}
		note(s.Fault, "etcd members %v paused (a majority)", ms)
		for _, i := range ms {
			n.c.PauseEtcd(i)
		}
		pause(ctx, down)
		for _, i := range ms {
			n.c.ResumeEtcd(i)
		}
		note("heal", "etcd members resumed")
	case FaultPartitionEtcd, FaultPartitionReplication, FaultIsolate:
		id := leaderOrAny()
		etcd, repl := s.Fault != FaultPartitionReplication, s.Fault != FaultPartitionEtcd
		note(s.Fault, "broker %d cut off (from etcd %v, from its followers %v)", id, etcd, repl)
		if etcd {
			n.c.CutFromEtcd(id, true)
		}
		if repl {
			n.c.CutReplication(id, true)
		}
		pause(ctx, down+o.SessionTimeout)
		n.c.CutFromEtcd(id, false)
		n.c.CutReplication(id, false)
		note("heal", "broker %d's links healed", id)
	case FaultSlowNetwork:
		note(s.Fault, "every link delayed 50 ms")
		n.c.SlowLinks(50 * time.Millisecond)
		pause(ctx, down)
		n.c.SlowLinks(0)
		note("heal", "links at full speed")
	default:
		return fmt.Errorf("jepsen: no fault %q", s.Fault)
	}
	return nil
}
