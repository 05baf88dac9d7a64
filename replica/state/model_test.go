package state

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/seglog/seglog/leaderepoch"
	"github.com/seglog/seglog/vfs"
)

var (
	modelSeeds = flag.Int("model.seeds", 300, "the randomized model's runs (seeds 1..N)")
	modelSteps = flag.Int("model.steps", 1000, "events in each run of the randomized model")
)

// A randomized model of one partition on three brokers: each broker's
// rules (Partition) over a log of its own (records of a leader epoch and
// a produce id, its real leader-epoch cache, what fsync made durable),
// a controller applying Elect and the ISR writes as etcd does (comparing
// the partition epoch, the writer's session), registrations (incarnations,
// fenced until the controller's pass, clean or not), and a network that
// holds each follower's answer until a later event delivers it — while
// the leadership, the epoch or the follower's role may have changed. The
// events come in a seeded random order: produces, fetch requests and
// answers, ticks, ISR writes, controller passes, metadata reaching a
// broker, fsyncs, crashes (clean, SIGKILL, power cut), sessions lost
// (zombies), restarts, and preferred elections (the leadership moved away
// from a live leader, which acts as leader until it learns so). After each: every acknowledged record is at its
// offset in the log of every broker that may act as leader; the high
// watermark a consumer can read never goes back; no two logs differ below
// both their high watermarks. At the end the brokers all come back, heal,
// and each holds every acknowledged record.
//
// A broker fails (crashes or loses power) only while the others are up
// and none lost data it has not fetched again: the premise of Kafka's
// promise (and seglog's) is a majority of replicas surviving.
func TestModel(t *testing.T) {
	runs, unavailable, acked := 0, map[int]int{}, 0
	seeds := uint64(*modelSeeds)
	if raceEnabled && !flagSet("model.seeds") {
		seeds = 20 // (the whole model runs in make test's lane without the race detector)
	}
	for seed := range seeds {
		for _, minISR := range []int{1, 2} {
			m := newModel(t, seed+1, minISR)
			if err := m.run(*modelSteps); err != nil {
				t.Fatalf("seed %d min ISR %d: %v\n%s", seed+1, minISR, err, m.trace())
			}
			runs++
			acked += len(m.acked)
			if m.unavailable {
				unavailable[minISR]++
			}
		}
	}
	t.Logf("%d runs of %d events: %d records acknowledged; unavailable at the end (every eligible replica back unclean): %d at min ISR 1, %d at 2",
		runs, *modelSteps, acked, unavailable[1], unavailable[2])
	require.Less(t, unavailable[1]+unavailable[2], runs/4, "most runs heal (the invariants are checked on available partitions)")
	require.Greater(t, acked, runs*10, "the runs acknowledge records")
}

// flagSet reports whether the test's command line set the flag.
func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

type mrec struct {
	epoch int32
	id    int
}

type mnode struct {
	id  int32
	up  bool
	inc int64 // incarnation (its session lease)
	p   *Partition
	now time.Time

	recs              []mrec
	hw, start         int64
	epochs            *leaderepoch.Cache
	flushed, hwSynced int64 // what a power cut keeps

	fetch    *mfetch   // the leader it fetches from, while following
	answer   *manswer  // a fetch's or truncation's answer on its way back
	proposal *Proposal // an ISR change on its way to etcd
	acks     map[uint64]mack
	damaged  bool // a power cut took records: until it is in the ISR again
	stopped  bool // it shut down cleanly
	seen     int64
}

type mfetch struct {
	leader, epoch int32
	truncate      bool
}

type manswer struct {
	leader, epoch int32
	code          int16
	truncate      bool
	endEpoch      int32
	endOffset     int64
	base          int64
	recs          []mrec
	hw            int64
}

type mack struct {
	id     int
	offset int64
}

type mreg struct {
	inc, registered int64
	fenced, clean   bool
}

type model struct {
	t      *testing.T
	rng    *rand.Rand
	minISR int
	nodes  map[int32]*mnode
	regs   map[int32]*mreg
	// The partition's state in etcd: its leadership, partition epoch,
	// and the revision it was written at; rev is etcd's revision.
	st       Leadership
	pe       int32
	written  int64
	rev      int64
	nextID   int
	nextAck  uint64
	acked    map[int]int64 // produce id → offset acknowledged
	hwSeen   int64         // the greatest high watermark a consumer read
	log      []string
	replicas []int32
	// unavailable: the run ended without a leader, as KIP-966 leaves a
	// partition whose every eligible replica restarted uncleanly.
	unavailable bool
}

func newModel(t *testing.T, seed uint64, minISR int) *model {
	m := &model{t: t, rng: rand.New(rand.NewPCG(seed, uint64(minISR))), minISR: minISR, nodes: map[int32]*mnode{},
		regs: map[int32]*mreg{}, acked: map[int]int64{}, replicas: []int32{1, 2, 3}}
	fs := vfs.NewMem()
	for _, id := range m.replicas {
		dir := path.Join("/", fmt.Sprint(id))
		if err := fs.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		c, err := leaderepoch.Open(fs, path.Join(dir, "leader-epoch-checkpoint"))
		if err != nil {
			t.Fatal(err)
		}
		n := &mnode{id: id, up: true, inc: 1, p: New(id, lag), now: t0, epochs: c, acks: map[uint64]mack{}}
		m.nodes[id] = n
		m.rev++
		m.regs[id] = &mreg{inc: 1, registered: m.rev, clean: true}
	}
	m.st = Leadership{Leader: 1, LeaderEpoch: 0, ISR: []int32{1, 2, 3}}
	m.rev++
	m.written = m.rev
	return m
}

func (m *model) logf(format string, args ...any) {
	m.log = append(m.log, fmt.Sprintf(format, args...))
}

func (m *model) trace() string {
	from := max(0, len(m.log)-60)
	out := strings.Join(m.log[from:], "\n")
	for _, id := range m.replicas {
		n := m.nodes[id]
		out += fmt.Sprintf("\nbroker %d: up %v leased %v %s at epoch %d, log end %d, high watermark %d, epochs %v",
			id, n.up, m.leased(n), n.p.Role(), n.p.Meta().LeaderEpoch, len(n.recs), n.hw, m.entries(n))
	}
	return out
}

// Brokers, as the controller reads etcd.
func (m *model) Live(id int32) bool {
	r := m.regs[id]
	return r != nil && !r.fenced
}
func (m *model) UncleanRestart(id int32) bool {
	r := m.regs[id]
	return r != nil && r.fenced && !r.clean
}
func (m *model) ShuttingDown(int32) bool { return false }

func (m *model) leased(n *mnode) bool {
	r := m.regs[n.id]
	return n.up && r != nil && r.inc == n.inc
}

// session is the broker's session while it is certainly alive, else 0.
func (m *model) session(n *mnode) int64 {
	if m.leased(n) {
		return n.inc
	}
	return 0
}

func (m *model) local(n *mnode) Local {
	return Local{LogStart: n.start, LogEnd: int64(len(n.recs)), HW: n.hw, Now: n.now, Session: m.session(n)}
}

func (m *model) entries(n *mnode) []EpochStart {
	var out []EpochStart
	for _, e := range n.epochs.Entries() {
		out = append(out, EpochStart{Epoch: e.Epoch, Start: e.StartOffset})
	}
	return out
}

// apply carries out a broker's actions as package replica does.
func (m *model) apply(n *mnode, a Actions) error {
	if a.StopFetching {
		n.fetch = nil
	}
	if a.BecomeLeader {
		epoch := n.p.Meta().LeaderEpoch
		if err := n.epochs.Assign(epoch, int64(len(n.recs))); err != nil {
			return err
		}
		start := int64(len(n.recs))
		for _, e := range n.epochs.Entries() {
			if e.Epoch == epoch {
				start = e.StartOffset
			}
		}
		m.logf("  %d leads at epoch %d from %d", n.id, epoch, start)
		return m.apply(n, n.p.Led(start, m.local(n)))
	}
	if a.Fetch {
		n.fetch = &mfetch{leader: a.FetchLeader, epoch: a.FetchEpoch, truncate: true}
	}
	if a.SetHW {
		if a.HW < n.hw || a.HW > int64(len(n.recs)) {
			return fmt.Errorf("broker %d: high watermark %d set with the log at [%d, %d)", n.id, a.HW, n.hw, len(n.recs))
		}
		n.hw = a.HW
	}
	if a.Propose != nil {
		n.proposal = a.Propose
	}
	for _, c := range a.Completed {
		k, ok := n.acks[c.ID]
		if !ok {
			return fmt.Errorf("broker %d: ack %d completed twice or never asked", n.id, c.ID)
		}
		delete(n.acks, c.ID)
		if c.Code != 0 {
			continue
		}
		if !n.p.Leads(m.session(n)) {
			return fmt.Errorf("broker %d acknowledged record %d without leading in a live session", n.id, k.id)
		}
		m.logf("  %d acks record %d at %d", n.id, k.id, k.offset)
		m.acked[k.id] = k.offset
	}
	return nil
}

func (m *model) run(steps int) error {
	for range steps {
		if err := m.step(); err != nil {
			return err
		}
		if err := m.check(); err != nil {
			return err
		}
	}
	return m.heal()
}

func (m *model) pick() *mnode { return m.nodes[m.replicas[m.rng.IntN(3)]] }

// others reports whether every broker but n is up and undamaged.
func (m *model) othersIntact(n *mnode) bool {
	for _, o := range m.nodes {
		if o != n && (!o.up || o.damaged) {
			return false
		}
	}
	return true
}

func (m *model) step() error {
	n := m.pick()
	switch k := m.rng.IntN(100); {
	case k < 15:
		return m.produce(n)
	case k < 37:
		return m.fetchRequest(n)
	case k < 59:
		return m.deliver(n)
	case k < 65:
		return m.tick(n)
	case k < 71:
		return m.alter(n)
	case k < 77:
		return m.control()
	case k < 89:
		return m.metadata(n)
	case k < 94:
		if n.up {
			n.flushed, n.hwSynced = int64(len(n.recs)), n.hw
		}
	case k < 96:
		return m.fail(n)
	case k < 97:
		if r := m.regs[n.id]; r != nil && (!n.up || m.rng.IntN(4) == 0) {
			m.logf("%d's session expires (up %v)", n.id, n.up)
			delete(m.regs, n.id)
			m.rev++
		}
	default:
		return m.restart(n)
	}
	return nil
}

func (m *model) produce(n *mnode) error {
	if !n.up || n.p.CheckAppend(-1, m.session(n)) != 0 {
		return nil
	}
	m.nextID++
	m.nextAck++
	off := int64(len(n.recs))
	n.recs = append(n.recs, mrec{epoch: n.p.Meta().LeaderEpoch, id: m.nextID})
	n.acks[m.nextAck] = mack{id: m.nextID, offset: off}
	m.logf("%d appends record %d at %d (epoch %d)", n.id, m.nextID, off, n.p.Meta().LeaderEpoch)
	if err := m.apply(n, n.p.Appended(m.local(n))); err != nil {
		return err
	}
	return m.apply(n, n.p.AwaitAck(m.nextAck, off+1, m.local(n)))
}

// fetchRequest sends a follower's request (a truncation's
// OffsetForLeaderEpoch first) to its leader, which answers at once; the
// answer travels until deliver.
func (m *model) fetchRequest(n *mnode) error {
	if !n.up || n.fetch == nil || n.answer != nil {
		return nil
	}
	f := n.fetch
	l := m.nodes[f.leader]
	if !l.up {
		return nil
	}
	ans := &manswer{leader: f.leader, epoch: f.epoch}
	if f.truncate {
		es := m.entries(n)
		if len(es) == 0 || len(n.recs) == 0 {
			m.truncate(n, int64(len(n.recs))) // (nothing to disagree on: an epoch with no record goes)
			f.truncate = false
			return nil
		}
		if ans.code = l.p.CheckLeader(f.epoch, m.session(l)); ans.code == 0 {
			ans.truncate = true
			ans.endEpoch, ans.endOffset = l.epochs.EndOffsetFor(es[len(es)-1].Epoch, int64(len(l.recs)))
		}
		n.answer = ans
		return nil
	}
	off := int64(len(n.recs))
	code, a := l.p.FollowerFetch(n.id, f.epoch, off, n.start, m.local(l))
	if err := m.apply(l, a); err != nil {
		return err
	}
	ans.code, ans.base, ans.hw = code, off, l.hw
	if code == 0 {
		end := min(int64(len(l.recs)), off+int64(1+m.rng.IntN(3)))
		ans.recs = slices.Clone(l.recs[off:end])
	}
	n.answer = ans
	return nil
}

// deliver hands a follower its answer: it changes the log only while the
// follower still follows that leader at that epoch (the fetcher's answer
// in flight is handled even after the partition left it, as package
// replica's is: Follows alone guards the log).
func (m *model) deliver(n *mnode) error {
	ans := n.answer
	if ans == nil {
		return nil
	}
	n.answer = nil
	if !n.up || !n.p.Follows(ans.leader, ans.epoch) {
		return nil
	}
	set := func(truncate bool) { // (the fetch state, if it is still the one asked for)
		if f := n.fetch; f != nil && f.leader == ans.leader && f.epoch == ans.epoch {
			f.truncate = truncate
		}
	}
	switch {
	case ans.code == 0 && ans.truncate:
		target := TruncationTarget(m.entries(n), int64(len(n.recs)), n.hw, ans.endEpoch, ans.endOffset)
		if target < int64(len(n.recs)) {
			m.logf("%d truncates from %d to %d", n.id, len(n.recs), target)
		}
		// (At or past the log end, the tablet's TruncateTo still drops
		// the epochs starting at the end: a leadership of this replica
		// that appended nothing, whose entry would claim the records it
		// fetches next.)
		m.truncate(n, min(target, int64(len(n.recs))))
		set(false)
	case ans.code == 0:
		if ans.base != int64(len(n.recs)) {
			set(true)
			return nil
		}
		for _, r := range ans.recs {
			if latest, ok := n.epochs.LatestEpoch(); !ok || r.epoch > latest {
				if err := n.epochs.Assign(r.epoch, int64(len(n.recs))); err != nil {
					return err
				}
			}
			n.recs = append(n.recs, r)
		}
		if hw, ok := FollowerHW(ans.hw, m.local(n)); ok {
			n.hw = hw
		}
	case ans.code == kerr.OffsetOutOfRange.Code:
		set(true)
	}
	return nil
}

func (m *model) truncate(n *mnode, target int64) {
	n.recs = n.recs[:target]
	n.hw = min(n.hw, target)
	n.flushed, n.hwSynced = min(n.flushed, target), min(n.hwSynced, target)
	if err := n.epochs.TruncateFromEnd(target); err != nil {
		m.t.Fatal(err)
	}
}

func (m *model) tick(n *mnode) error {
	if !n.up {
		return nil
	}
	n.now = n.now.Add(time.Duration(m.rng.IntN(20)) * time.Second)
	return m.apply(n, n.p.Tick(m.local(n)))
}

// alter is the leader's ISR change reaching etcd: written only over the
// partition epoch it read, by the leader in its current session, with
// every new member live (AlterPartition).
func (m *model) alter(n *mnode) error {
	pr := n.proposal
	if pr == nil {
		return nil
	}
	n.proposal = nil
	ok := n.up && m.leased(n) && m.st.Leader == n.id && pr.PartitionEpoch == m.pe && slices.Contains(pr.ISR, n.id)
	for _, r := range pr.ISR {
		ok = ok && (slices.Contains(m.st.ISR, r) || m.Live(r))
	}
	if !ok {
		return m.apply(n, n.p.ISRFailed(m.local(n)))
	}
	m.st = SetISR(m, m.replicas, m.st, pr.ISR, m.minISR)
	m.pe++
	m.rev++
	m.written = m.rev
	m.logf("%d writes ISR %v (%s) at partition epoch %d, ELR %v", n.id, m.st.ISR, pr.Why, m.pe, m.st.ELR)
	for _, r := range m.st.ISR {
		m.nodes[r].damaged = false
	}
	return m.apply(n, n.p.ISRWritten(m.st.ISR, m.pe, m.local(n)))
}

// control is a pass of the controller: its election, then the fenced
// brokers unfenced.
func (m *model) control() error {
	if to, _, ok := ElectPreferred(m, m.replicas, m.st); ok && m.rng.IntN(4) == 0 {
		m.st = to
		m.pe++
		m.rev++
		m.written = m.rev
		m.logf("controller: preferred leader %d epoch %d", to.Leader, to.LeaderEpoch)
	}
	if to, ok := Elect(m, m.replicas, m.st, m.minISR, false); ok {
		m.st = to
		m.pe++
		m.rev++
		m.written = m.rev
		m.logf("controller: leader %d epoch %d ISR %v ELR %v (partition epoch %d)", to.Leader, to.LeaderEpoch, to.ISR, to.ELR, m.pe)
	}
	for id, r := range m.regs {
		if r.fenced {
			r.fenced = false
			m.rev++
			m.logf("controller: unfences %d", id)
		}
	}
	return nil
}

// metadata is etcd's latest state reaching a broker.
func (m *model) metadata(n *mnode) error {
	if !n.up || n.seen == m.rev {
		return nil
	}
	n.seen = m.rev
	r := m.regs[n.id]
	may := m.st.Leader == n.id && r != nil && !r.fenced && r.inc == n.inc && m.written >= r.registered
	md := Meta{Leader: m.st.Leader, LeaderEpoch: m.st.LeaderEpoch, PartitionEpoch: m.pe, ISR: slices.Clone(m.st.ISR),
		Replicas: m.replicas, MinISR: m.minISR, MayLead: may, Session: n.inc}
	a := n.p.SetMeta(md, m.local(n))
	return m.apply(n, a)
}

func (m *model) fail(n *mnode) error {
	if !n.up || !m.othersIntact(n) {
		return nil
	}
	n.up, n.fetch, n.answer, n.proposal = false, nil, nil, nil
	clear(n.acks) // (never answered: the client sees its connection go)
	switch m.rng.IntN(3) {
	case 0:
		m.logf("%d shuts down cleanly", n.id)
		n.flushed, n.hwSynced = int64(len(n.recs)), n.hw
		n.stopped = true
	case 1:
		m.logf("%d is killed", n.id)
	default:
		m.logf("%d loses power: its log back to %d of %d, high watermark %d", n.id, n.flushed, len(n.recs), n.hwSynced)
		if n.flushed < int64(len(n.recs)) {
			n.damaged = true
		}
		hw := n.hwSynced
		m.truncate(n, n.flushed)
		n.hw = min(hw, int64(len(n.recs)))
	}
	return nil
}

// restart brings a broker back as a new incarnation, registered fenced
// (clean or not), once its previous session is gone.
func (m *model) restart(n *mnode) error {
	if n.up || m.regs[n.id] != nil {
		if n.up && m.regs[n.id] == nil {
			// Its session lost while it ran (a zombie): it registers
			// again, its log intact.
			n.inc++
			m.rev++
			m.regs[n.id] = &mreg{inc: n.inc, registered: m.rev, fenced: true, clean: true}
			m.logf("%d registers again (incarnation %d)", n.id, n.inc)
		}
		return nil
	}
	clean := n.stopped
	n.stopped = false
	n.inc++
	n.up, n.p, n.seen = true, New(n.id, lag), 0
	m.rev++
	m.regs[n.id] = &mreg{inc: n.inc, registered: m.rev, fenced: true, clean: clean}
	m.logf("%d restarts (incarnation %d, clean %v) with log end %d, high watermark %d", n.id, n.inc, clean, len(n.recs), n.hw)
	return nil
}

// check holds the invariants after each step.
func (m *model) check() error {
	for _, n := range m.nodes {
		if !n.up || !n.p.Leads(m.session(n)) {
			continue
		}
		for id, off := range m.acked {
			if off >= int64(len(n.recs)) || n.recs[off].id != id {
				return fmt.Errorf("leader %d lacks acknowledged record %d at offset %d (log end %d)", n.id, id, off, len(n.recs))
			}
		}
		if n.p.CheckHighWatermark(n.hw) == 0 {
			if n.hw < m.hwSeen {
				return fmt.Errorf("leader %d serves high watermark %d, below %d a consumer read", n.id, n.hw, m.hwSeen)
			}
			m.hwSeen = n.hw
		}
	}
	for _, n := range m.nodes {
		// The epoch cache describes the log: truncation (where an epoch
		// ends) relies on it.
		es := m.entries(n)
		for o, r := range n.recs {
			i := len(es) - 1
			for i >= 0 && es[i].Start > int64(o) {
				i--
			}
			if i < 0 || es[i].Epoch != r.epoch {
				return fmt.Errorf("broker %d: record at offset %d of epoch %d, its epoch cache %v", n.id, o, r.epoch, es)
			}
		}
	}
	for _, a := range m.nodes {
		for _, b := range m.nodes {
			if a.id >= b.id || !a.up || !b.up {
				continue
			}
			for o := range min(a.hw, b.hw) {
				if a.recs[o] != b.recs[o] {
					return fmt.Errorf("brokers %d and %d differ at offset %d below their high watermarks (%d, %d): %v, %v",
						a.id, b.id, o, a.hw, b.hw, a.recs[o], b.recs[o])
				}
			}
		}
	}
	return nil
}

// heal brings every broker back and lets the partition settle: then each
// holds every acknowledged record.
func (m *model) heal() error {
	m.logf("heal")
	for _, n := range m.nodes {
		if !n.up && m.regs[n.id] != nil {
			delete(m.regs, n.id)
			m.rev++
		}
		if err := m.restart(n); err != nil {
			return err
		}
	}
	for range 200 {
		if err := m.control(); err != nil {
			return err
		}
		for _, n := range m.nodes {
			n.now = n.now.Add(time.Second)
			for _, f := range []func(*mnode) error{m.metadata, m.fetchRequest, m.deliver, m.alter} {
				if err := f(n); err != nil {
					return err
				}
			}
		}
		if err := m.check(); err != nil {
			return err
		}
	}
	if m.st.Leader == NoLeader && len(m.st.ISR) == 0 && len(m.st.ELR) == 0 {
		// Every replica that held the acknowledged records came back from
		// an unclean shutdown (min ISR 1: the ISR had shrunk to one): no
		// clean election is possible, and no unclean one is allowed
		// (KIP-966). Unavailable, which is not a loss.
		m.unavailable = true
		return nil
	}
	for _, n := range m.nodes {
		if m.st.Leader == NoLeader || !slices.Contains(m.st.ISR, n.id) {
			return fmt.Errorf("after healing, broker %d is not in the ISR %v (leader %d)", n.id, m.st.ISR, m.st.Leader)
		}
		for id, off := range m.acked {
			if off >= int64(len(n.recs)) || n.recs[off].id != id {
				return fmt.Errorf("after healing, broker %d lacks acknowledged record %d at offset %d", n.id, id, off)
			}
		}
	}
	return nil
}
