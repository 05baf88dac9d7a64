// Package cluster keeps a seglog cluster's metadata in etcd (docs/cluster.md):
// the registered brokers, bound to their session leases; the topics, their
// replica assignments and each partition's leadership; the controller,
// elected through etcd; producer-id blocks. Each broker holds a Member: a
// watched in-memory copy of the metadata (Snapshot), its registration and
// lease, and, while it holds the election, the controller's loop. It
// imports no engine package: it is metadata only.
package cluster

import (
	"context"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/seglog/seglog"
)

// Options configure a broker's membership, under Kafka's config names.
type Options struct {
	// Endpoints are etcd's client URLs (seglog.etcd.endpoints). Required.
	Endpoints []string
	// TLS, if set, is how etcd is reached over TLS (https endpoints): the
	// CAs that verify etcd, and a client certificate if etcd asks for
	// one. Username and Password are etcd's user, when its
	// authentication is on.
	TLS                *tls.Config
	Username, Password string
	// ClusterID names the cluster; Prefix defaults to /seglog/<ClusterID>/.
	ClusterID string
	// Prefix is where the cluster's keys live (seglog.etcd.prefix).
	Prefix string
	// NodeID is this broker's id (node.id); Rack its rack (broker.rack).
	NodeID int32
	Rack   string
	// Endpoints are the listeners clients reach this broker on
	// (advertised.listeners).
	Listeners []Endpoint
	// SessionTimeout is the lease's time to live
	// (broker.session.timeout.ms, default 9 s): a broker silent this long
	// is taken as dead. It is rounded up to whole seconds (etcd's leases).
	SessionTimeout time.Duration
	// HeartbeatInterval is how often the lease is renewed
	// (broker.heartbeat.interval.ms, default 2 s).
	HeartbeatInterval time.Duration
	// MinInsyncReplicas is min.insync.replicas for topics that do not set
	// it (default 1): below it the controller keeps the Eligible Leader
	// Replicas (KIP-966).
	MinInsyncReplicas int
	// CleanShutdown says whether the data directory was closed cleanly
	// before this broker opened it; Directory is its id. Both go into the
	// registration (Broker).
	CleanShutdown bool
	Directory     string
	// UncleanLeaderElection lets the controller elect a replica outside
	// the ISR when the ISR has no live broker
	// (unclean.leader.election.enable, default false), for topics that do
	// not set it.
	UncleanLeaderElection bool
	// AutoLeaderRebalance makes the controller move leaderships back to
	// preferred replicas (auto.leader.rebalance.enable; Kafka's default is
	// on, the zero value here off): every LeaderImbalanceCheckInterval
	// (leader.imbalance.check.interval.seconds, default 300 s), for each
	// broker whose share of partitions it is the preferred but not the
	// leader of is above LeaderImbalancePercentage
	// (leader.imbalance.per.broker.percentage, default 10), it runs a
	// preferred election of those partitions.
	AutoLeaderRebalance          bool
	LeaderImbalanceCheckInterval time.Duration
	LeaderImbalancePercentage    int
	// Logger receives the member's logs. The default is slog.Default().
	Logger *slog.Logger
	// Now is the clock (tests). The default is time.Now.
	Now func() time.Time
	// Observe makes a member that only watches the metadata: no
	// registration, no lease, no election (a command or a test looking at
	// the cluster).
	Observe bool
}

func (o *Options) defaults() error {
	if len(o.Endpoints) == 0 {
		return errors.New("cluster: no etcd endpoints (seglog.etcd.endpoints)")
	}
	if o.Prefix == "" {
		if o.ClusterID == "" {
			return errors.New("cluster: neither a prefix nor a cluster id")
		}
		o.Prefix = "/seglog/" + o.ClusterID + "/"
	}
	if o.Prefix[len(o.Prefix)-1] != '/' {
		o.Prefix += "/"
	}
	if o.SessionTimeout <= 0 {
		o.SessionTimeout = 9 * time.Second
	}
	if o.HeartbeatInterval <= 0 {
		o.HeartbeatInterval = 2 * time.Second
	}
	if o.HeartbeatInterval >= o.SessionTimeout {
		return fmt.Errorf("cluster: broker.heartbeat.interval.ms (%v) must be below broker.session.timeout.ms (%v)", o.HeartbeatInterval, o.SessionTimeout)
	}
	if o.LeaderImbalanceCheckInterval <= 0 {
		o.LeaderImbalanceCheckInterval = 300 * time.Second
	}
	if o.LeaderImbalancePercentage <= 0 {
		o.LeaderImbalancePercentage = 10
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return nil
}

// Member is one broker's membership in the cluster.
type Member struct {
	opts   Options
	cli    *clientv3.Client
	log    *slog.Logger
	prefix string
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	snap    atomic.Pointer[Snapshot]
	mu      sync.Mutex // guards changed
	changed chan struct{}

	// lease is the registration's lease; leaseUntil (unix nanoseconds)
	// is when it may have expired at the earliest, as this broker knows:
	// the send time of the last renewal etcd answered, plus its TTL.
	lease      atomic.Int64
	leaseUntil atomic.Int64
	// leaseLost is closed when the lease is found gone (a new one is
	// made by the next registration).
	leaseMu    sync.Mutex
	leaseLost  chan struct{}
	shutdown   atomic.Bool
	controller atomic.Pointer[concurrency.Election]
	stopped    chan struct{}
	// controllerChanges counts the changes of the controller seen.
	controllerChanges atomic.Int64
}

// ControllerChanges is how many times this member saw the controller
// change (Kafka's controller change count).
func (m *Member) ControllerChanges() int64 { return m.controllerChanges.Load() }

// ErrClosed is returned by a Member's calls after Close.
var ErrClosed = seglog.NewKafkaError("cluster: member closed", -1)

// Join connects to etcd, loads the metadata, registers this broker under
// a new session lease, fenced (an earlier incarnation's lease is ended at
// once when it is of the same data directory, else waited out), and
// starts the watch, the lease renewals and the controller election. It
// returns once a controller has unfenced the registration and the
// snapshot shows it.
func Join(ctx context.Context, opts Options) (*Member, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	cli, err := opts.client()
	if err != nil {
		return nil, err
	}
	m := &Member{opts: opts, cli: cli, log: opts.Logger.With("node", opts.NodeID), prefix: opts.Prefix,
		changed: make(chan struct{}), stopped: make(chan struct{})}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.snap.Store(emptySnapshot())
	loaded := make(chan error, 1)
	m.wg.Add(1)
	go func() { defer m.wg.Done(); m.watch(loaded) }()
	select {
	case err = <-loaded:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err == nil && opts.ClusterID != "" && !opts.Observe {
		err = m.claimClusterID(ctx)
	}
	if err == nil && !opts.Observe {
		err = m.register(ctx)
	}
	if err == nil && !opts.Observe {
		// As a KRaft broker waits to be unfenced before it serves: the
		// controller takes the new incarnation in first (docs/cluster.md
		// §2).
		lease := m.lease.Load()
		m.wg.Add(1)
		go func() { defer m.wg.Done(); m.keepAlive() }()
		_, err = m.Until(ctx, func(s *Snapshot) bool {
			b, ok := s.Brokers[opts.NodeID]
			return ok && b.Epoch == lease && !b.Fenced || m.lease.Load() != lease
		})
		if err != nil {
			err = fmt.Errorf("cluster: node %d was not unfenced by a controller: %w", opts.NodeID, err)
		}
	}
	if err != nil {
		m.cancel()
		m.wg.Wait()
		cli.Close()
		return nil, err
	}
	return m, nil
}

// ErrInconsistentClusterID is returned by Join for a broker whose data
// directory belongs to another cluster than the prefix's.
var ErrInconsistentClusterID = seglog.NewKafkaError("cluster: inconsistent cluster id", 104) // INCONSISTENT_CLUSTER_ID

// claimClusterID stores the cluster id under the prefix if none is there,
// and refuses a broker of another cluster.
func (m *Member) claimClusterID(ctx context.Context) error {
	key := m.prefix + keyClusterID
	resp, err := m.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, m.opts.ClusterID)).Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		return fmt.Errorf("cluster: storing the cluster id: %w", err)
	}
	if resp.Succeeded {
		return nil
	}
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 && string(kvs[0].Value) != m.opts.ClusterID {
		return fmt.Errorf("%w: the data directory is of cluster %s, %s holds cluster %s", ErrInconsistentClusterID,
			m.opts.ClusterID, m.prefix, kvs[0].Value)
	}
	return nil
}

// client is an etcd client as the options say.
func (o *Options) client() (*clientv3.Client, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: o.Endpoints, DialTimeout: 5 * time.Second, TLS: o.TLS,
		Username: o.Username, Password: o.Password, Logger: zap.NewNop(), Context: context.Background()})
	if err != nil {
		return nil, fmt.Errorf("cluster: etcd client: %w", err)
	}
	return cli, nil
}

// DefaultPrefix is seglog.etcd.prefix's default: brokers given the same
// etcd and no prefix form one cluster, whose id is stored under it.
const DefaultPrefix = "/seglog/"

// ClusterIDAt returns the cluster id stored under prefix ("" if none).
func ClusterIDAt(ctx context.Context, opts Options, prefix string) (string, error) {
	cli, err := opts.client()
	if err != nil {
		return "", err
	}
	defer cli.Close()
	if prefix != "" && prefix[len(prefix)-1] != '/' {
		prefix += "/"
	}
	resp, err := cli.Get(ctx, prefix+keyClusterID)
	if err != nil {
		return "", fmt.Errorf("cluster: reading the cluster id: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return "", nil
	}
	return string(resp.Kvs[0].Value), nil
}

// ClaimClusterIDAt returns the cluster id stored under the options'
// prefix (etcd reached as they say), storing candidate there first if
// none is: what a new data directory is made for. Brokers started at once
// on new data directories agree on one id (the first claim wins,
// atomically).
func ClaimClusterIDAt(ctx context.Context, opts Options, candidate string) (string, error) {
	cli, err := opts.client()
	if err != nil {
		return "", err
	}
	defer cli.Close()
	prefix := opts.Prefix
	if prefix != "" && prefix[len(prefix)-1] != '/' {
		prefix += "/"
	}
	key := prefix + keyClusterID
	resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, candidate)).Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		return "", fmt.Errorf("cluster: claiming the cluster id: %w", err)
	}
	if resp.Succeeded {
		return candidate, nil
	}
	return string(resp.Responses[0].GetResponseRange().Kvs[0].Value), nil
}

// ShutDown is the first half of Close, while the broker still serves: it
// marks the broker shutting down and waits, until ctx ends, for the
// controller to move its leaderships away (Kafka's controlled shutdown).
func (m *Member) ShutDown(ctx context.Context) error { return m.controlledShutdown(ctx) }

// NodeID is this broker's id.
func (m *Member) NodeID() int32 { return m.opts.NodeID }

// Snapshot returns the metadata as this broker last saw it.
func (m *Member) Snapshot() *Snapshot { return m.snap.Load() }

// Changed returns a channel closed at the next change of the snapshot
// or of IsController.
func (m *Member) Changed() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.changed
}

// publish installs s (nil: keeps the snapshot) and wakes Changed's
// waiters.
func (m *Member) publish(s *Snapshot) {
	m.mu.Lock()
	if s != nil {
		if old := m.snap.Load(); old != nil && old.Controller != s.Controller && s.Controller >= 0 {
			m.controllerChanges.Add(1)
		}
		m.snap.Store(s)
	}
	close(m.changed)
	m.changed = make(chan struct{})
	m.mu.Unlock()
}

// Await returns once the snapshot reflects etcd revision rev.
func (m *Member) Await(ctx context.Context, rev int64) error {
	_, err := m.Until(ctx, func(s *Snapshot) bool { return s.Revision >= rev })
	return err
}

// Sync returns once the snapshot reflects every write etcd had made when
// it was called — any broker's, under the prefix or not: a linearizable
// read of etcd's revision, then the watch's progress up to it (asked of
// etcd, which tells it once the watch has caught up). A read of the
// snapshot after Sync sees what another broker wrote before it.
func (m *Member) Sync(ctx context.Context) error {
	resp, err := m.cli.Get(ctx, m.prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return fmt.Errorf("cluster: reading etcd's revision: %w", err)
	}
	rev := resp.Header.Revision
	for m.Snapshot().Revision < rev {
		// The watch's stream is the one of its context's metadata.
		if err := m.cli.RequestProgress(clientv3.WithRequireLeader(ctx)); err != nil {
			return fmt.Errorf("cluster: asking the watch's progress: %w", err)
		}
		// etcd answers only a watch that has caught up: ask again
		// after a while if the answer did not come.
		wait, cancel := context.WithTimeout(ctx, syncRetry)
		err := m.Await(wait, rev)
		cancel()
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, ErrClosed):
			return err
		}
	}
	return nil
}

// syncRetry is how long Sync waits for the watch's progress before it
// asks again.
const syncRetry = 50 * time.Millisecond

// Until waits, on the snapshot's changes, until cond holds of it (or of
// IsController), and returns that snapshot.
func (m *Member) Until(ctx context.Context, cond func(*Snapshot) bool) (*Snapshot, error) {
	for {
		ch := m.Changed()
		if s := m.Snapshot(); cond(s) {
			return s, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-m.ctx.Done():
			return nil, ErrClosed
		}
	}
}

// watch keeps the snapshot: a Get of the prefix, then a watch from the
// revision after it; when the watch fails (its revision compacted, etcd
// gone), it loads again. The first load's result goes to loaded.
func (m *Member) watch(loaded chan<- error) {
	first := true
	for m.ctx.Err() == nil {
		resp, err := m.cli.Get(m.ctx, m.prefix, clientv3.WithPrefix())
		if err != nil {
			if first {
				loaded <- fmt.Errorf("cluster: loading %s from etcd: %w", m.prefix, err)
				return
			}
			m.log.Warn("cluster: loading the metadata failed", "err", err)
			m.pause(time.Second)
			continue
		}
		events := make([]event, len(resp.Kvs))
		for i, kv := range resp.Kvs {
			events[i] = event{kv: kv}
		}
		snap, errs := emptySnapshot().apply(m.prefix, resp.Header.Revision, events)
		m.logBad(errs)
		m.publish(snap)
		if first {
			loaded <- nil
			first = false
		}
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(m.ctx))
		for wr := range m.cli.Watch(wctx, m.prefix, clientv3.WithPrefix(), clientv3.WithRev(snap.Revision+1)) {
			if err := wr.Err(); err != nil {
				m.log.Warn("cluster: the metadata watch failed; loading again", "err", err)
				break
			}
			if wr.IsProgressNotify() { // asked by Sync: nothing more under the prefix up to here
				if rev := wr.Header.Revision; rev > snap.Revision {
					snap, _ = snap.apply(m.prefix, rev, nil)
					m.publish(snap)
				}
				continue
			}
			if len(wr.Events) == 0 {
				continue
			}
			events := make([]event, len(wr.Events))
			rev := snap.Revision
			for i, e := range wr.Events {
				events[i] = event{delete: e.Type == clientv3.EventTypeDelete, kv: e.Kv}
				rev = max(rev, e.Kv.ModRevision)
			}
			var errs []error
			snap, errs = snap.apply(m.prefix, rev, events)
			m.logBad(errs)
			m.publish(snap)
		}
		cancel()
	}
}

func (m *Member) logBad(errs []error) {
	for _, err := range errs {
		m.log.Error("cluster: a metadata key is not understood; it is ignored", "err", err)
	}
}

// pause waits d or until the member closes.
func (m *Member) pause(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-m.ctx.Done():
	}
}

// register grants a new lease and puts this broker's key under it, if no
// other registration holds the node id (an earlier incarnation's, until
// its lease expires: it is retried until ctx ends); then it starts the
// controller election on the lease.
func (m *Member) register(ctx context.Context) error {
	ttl := int64((m.opts.SessionTimeout + time.Second - 1) / time.Second)
	key := m.prefix + keyBrokers + strconv.Itoa(int(m.opts.NodeID))
	b := Broker{ID: m.opts.NodeID, Rack: m.opts.Rack, Endpoints: m.opts.Listeners, Incarnation: hex.EncodeToString(func() []byte { id := NewTopicID(); return id[:8] }()),
		Fenced: true, Directory: m.opts.Directory}
	for {
		sent := m.opts.Now()
		// (A registration after the first, in this process, is of a log
		// that lost nothing: only the session was lost.)
		b.CleanShutdown = m.opts.CleanShutdown || m.lease.Load() != 0
		val, err := json.Marshal(b)
		if err != nil {
			return err
		}
		g, err := m.cli.Grant(ctx, ttl)
		if err != nil {
			return fmt.Errorf("cluster: granting a lease: %w", err)
		}
		resp, err := m.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, string(val), clientv3.WithLease(g.ID))).Else(clientv3.OpGet(key)).Commit()
		if err != nil {
			return fmt.Errorf("cluster: registering node %d: %w", m.opts.NodeID, err)
		}
		if resp.Succeeded {
			m.lease.Store(int64(g.ID))
			m.leaseUntil.Store(sent.Add(time.Duration(g.TTL) * time.Second).UnixNano())
			m.leaseMu.Lock()
			m.leaseLost = make(chan struct{})
			lost := m.leaseLost
			m.leaseMu.Unlock()
			if err := m.Await(ctx, resp.Header.Revision); err != nil {
				return err
			}
			m.log.Info("cluster: registered", "lease", fmt.Sprintf("%x", g.ID), "ttl_s", g.TTL, "clean_shutdown", b.CleanShutdown)
			m.wg.Add(1)
			go func() { defer m.wg.Done(); m.campaign(clientv3.LeaseID(g.ID), lost) }()
			return nil
		}
		_, _ = m.cli.Revoke(ctx, g.ID)
		// Another registration holds the id: wait for its key to go.
		held := resp.Responses[0].GetResponseRange().Kvs
		if len(held) == 0 {
			continue
		}
		var old Broker
		if m.opts.Directory != "" && json.Unmarshal(held[0].Value, &old) == nil && old.Directory == m.opts.Directory && held[0].Lease != 0 {
			// The same data directory, whose lock this process holds: the
			// incarnation that registered is gone. Its lease is ended now
			// (its registration and any controller candidacy with it), not
			// waited out.
			m.log.Info("cluster: ending the session of this broker's previous incarnation", "lease", fmt.Sprintf("%x", held[0].Lease))
			if _, err := m.cli.Revoke(ctx, clientv3.LeaseID(held[0].Lease)); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
				return fmt.Errorf("cluster: ending the previous incarnation's session: %w", err)
			}
			continue
		}
		m.log.Info("cluster: node id registered by another incarnation; waiting for its session to end", "lease", fmt.Sprintf("%x", held[0].Lease))
		wctx, cancel := context.WithCancel(ctx)
		for wr := range m.cli.Watch(wctx, key, clientv3.WithRev(resp.Header.Revision+1)) {
			if wr.Err() != nil || len(wr.Events) > 0 && wr.Events[0].Type == clientv3.EventTypeDelete {
				break
			}
		}
		cancel()
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("cluster: node id %d is registered by another broker: %w", m.opts.NodeID, err)
		}
	}
}

// keepAlive renews the lease every heartbeat interval. A renewal answered
// moves leaseUntil; a lease found gone (this broker was silent past its
// session) closes leaseLost and registers again with a new lease.
func (m *Member) keepAlive() {
	t := time.NewTicker(m.opts.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-m.ctx.Done():
			return
		}
		id := clientv3.LeaseID(m.lease.Load())
		sent := m.opts.Now()
		rctx, cancel := context.WithTimeout(m.ctx, m.opts.HeartbeatInterval)
		resp, err := m.cli.KeepAliveOnce(rctx, id)
		cancel()
		switch {
		case err == nil:
			m.leaseUntil.Store(max(m.leaseUntil.Load(), sent.Add(time.Duration(resp.TTL)*time.Second).UnixNano()))
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			if m.shutdown.Load() {
				return
			}
			m.log.Warn("cluster: the session lease expired; registering again", "lease", fmt.Sprintf("%x", id))
			m.loseLease()
			for m.ctx.Err() == nil {
				rctx, cancel := context.WithTimeout(m.ctx, m.opts.SessionTimeout)
				err := m.register(rctx)
				cancel()
				if err == nil {
					break
				}
				m.log.Warn("cluster: registering again failed", "err", err)
				m.pause(m.opts.HeartbeatInterval)
			}
		default:
			if m.ctx.Err() == nil {
				m.log.Warn("cluster: renewing the session lease failed", "err", err, "valid_for", time.Until(time.Unix(0, m.leaseUntil.Load())))
			}
		}
	}
}

func (m *Member) loseLease() {
	m.leaseUntil.Store(0)
	m.leaseMu.Lock()
	if m.leaseLost != nil {
		close(m.leaseLost)
		m.leaseLost = nil
	}
	m.leaseMu.Unlock()
}

// Leased reports whether this broker's session is certainly alive: etcd
// answered a renewal sent less than its TTL ago. A broker that is not
// leased acts as no partition's leader (it fences itself), because its
// lease may have expired and its leaderships been given to others.
func (m *Member) Leased() bool {
	return m.opts.Now().UnixNano() < m.leaseUntil.Load()
}

// Epoch is this broker's epoch: its current session lease.
func (m *Member) Epoch() int64 { return m.lease.Load() }

// campaign runs for controller on the lease until the lease is lost or
// the member closes, running the controller while it wins. A campaign
// that fails (etcd without a leader, say) is run again on the same lease:
// while the lease lives its election key may stand, and other brokers
// take its holder for the controller, so the holder must act as one.
func (m *Member) campaign(lease clientv3.LeaseID, lost <-chan struct{}) {
	for {
		m.campaignOnce(lease, lost)
		select {
		case <-lost:
			return
		case <-m.ctx.Done():
			return
		default:
		}
		m.pause(m.opts.HeartbeatInterval)
	}
}

// campaignOnce is one campaign: it returns when the lease is lost, the
// member closes or the campaign fails. (It does not follow the election
// session's own renewals of the lease, which may fail while the lease
// lives: the registration's renewals say when it is lost.)
func (m *Member) campaignOnce(lease clientv3.LeaseID, lost <-chan struct{}) {
	sess, err := concurrency.NewSession(m.cli, concurrency.WithLease(lease), concurrency.WithContext(m.ctx))
	if err != nil {
		m.log.Warn("cluster: no election session", "err", err)
		return
	}
	defer sess.Orphan() // (the lease is the registration's: not revoked here)
	e := concurrency.NewElection(sess, m.prefix+keyController)
	cctx, cancel := context.WithCancel(m.ctx)
	defer cancel()
	go func() {
		select {
		case <-lost:
		case <-cctx.Done():
		}
		cancel()
	}()
	if err := e.Campaign(cctx, strconv.Itoa(int(m.opts.NodeID))); err != nil {
		if cctx.Err() == nil {
			m.log.Warn("cluster: controller election failed; campaigning again", "err", err)
		}
		return
	}
	m.log.Info("cluster: this broker is the controller", "epoch", e.Rev())
	m.controller.Store(e)
	m.publish(nil) // (wakes whoever waits for IsController)
	defer m.controller.Store(nil)
	m.runController(cctx, e)
}

// IsController reports whether this broker holds the controller election.
func (m *Member) IsController() bool { return m.controller.Load() != nil }

// Close ends the membership: with a controlled shutdown first (the broker
// marks itself shutting down and waits, until ctx ends, for the
// controller to move its leaderships away), then the lease is revoked,
// so its key goes at once.
func (m *Member) Close(ctx context.Context) error {
	if m.shutdown.Swap(true) {
		return nil
	}
	var errs []error
	if m.opts.Observe {
		m.cancel()
		m.wg.Wait()
		return m.cli.Close()
	}
	if err := m.controlledShutdown(ctx); err != nil {
		errs = append(errs, err)
	}
	if e := m.controller.Load(); e != nil {
		rctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = e.Resign(rctx)
		cancel()
	}
	m.cancel()
	m.wg.Wait()
	rctx, cancel := context.WithTimeout(context.Background(), time.Second)
	_, err := m.cli.Revoke(rctx, clientv3.LeaseID(m.lease.Load()))
	cancel()
	if err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		errs = append(errs, fmt.Errorf("cluster: revoking the session lease: %w", err))
	}
	m.loseLease()
	errs = append(errs, m.cli.Close())
	close(m.stopped)
	return errors.Join(errs...)
}

// halt stops the member as a crash would: no controlled shutdown, the
// lease left to expire (tests).
func (m *Member) halt() {
	if m.shutdown.Swap(true) {
		return
	}
	m.cancel()
	m.wg.Wait()
	m.leaseUntil.Store(0)
	m.cli.Close()
}

// controlledShutdown marks the broker shutting down and waits until no
// partition has it as leader or in its ISR with another live broker
// there (Kafka's controlled shutdown): its leaderships moved, and so
// that its leaving fails no acks=all produce, every ISR it must leave
// left before it stops fetching.
func (m *Member) controlledShutdown(ctx context.Context) error {
	key := m.prefix + keyBrokers + strconv.Itoa(int(m.opts.NodeID))
	lease := clientv3.LeaseID(m.lease.Load())
	if lease == 0 || !m.Leased() {
		return nil
	}
	b, ok := m.Snapshot().Brokers[m.opts.NodeID]
	if !ok {
		return nil
	}
	b.ShuttingDown = true
	val, err := json.Marshal(b)
	if err != nil {
		return err
	}
	resp, err := m.cli.Txn(ctx).If(clientv3.Compare(clientv3.LeaseValue(key), "=", lease)).
		Then(clientv3.OpPut(key, string(val), clientv3.WithLease(lease))).Commit()
	if err != nil || !resp.Succeeded {
		return err
	}
	for {
		ch := m.Changed()
		if !m.holdsAny(m.Snapshot()) {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil // (the lease's revocation moves the rest)
		}
	}
}

// holdsAny reports whether this broker still leads a partition, or is in
// its ISR, with another live broker in the ISR that could do without it.
func (m *Member) holdsAny(s *Snapshot) bool {
	for _, t := range s.Topics {
		for _, p := range t.Partitions {
			if p.Leader != m.opts.NodeID && !p.InISR(m.opts.NodeID) {
				continue
			}
			for _, r := range p.ISR {
				if r != m.opts.NodeID && s.Live(r) {
					return true
				}
			}
		}
	}
	return false
}
