// Package broker serves the Kafka protocol on a seglog data directory, so
// that unmodified Kafka clients produce to and consume from it, alone (a
// single node: every partition's only replica and leader) or as one of a
// cluster.
//
//	client ──TCP──► connection (reader, answerer) ──► registry: decode, authorize, quotas
//	                                                     │
//	           handler (one file per API family) ──► catalog (metadata), replica manager,
//	                                                 coordinators, the broker's parts
//
// Every request and response body is encoded and decoded by franz-go's
// kmsg (generated from Kafka's own message schemas); only the frame and the
// request header are read here. Responses go out in request order.
//
// Served: every API in the registry (registry.go), each entry in its
// family's file beside its handler, with the versions served: Produce,
// Fetch (long polls, KIP-227 sessions), ListOffsets, OffsetForLeaderEpoch,
// Metadata, the topic admin and config APIs, FindCoordinator, the group
// protocols (group_*.go), InitProducerId and the transactions (txn*.go),
// SASL, SCRAM credentials, ACLs, client quotas, elections, reassignments.
// What is not in the registry is absent from ApiVersions' list; a request
// for it closes the connection. With an authorizer on, an API without an
// authorization rule is refused.
//
// A broker is made by a composition root (package server's Compose) over
// its Foundation and Services; New makes none of them.
package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/broker/auth"
	"github.com/seglog/seglog/cluster"
	"github.com/seglog/seglog/coordinator/group"
	"github.com/seglog/seglog/coordinator/txn"
	"github.com/seglog/seglog/internal/ratelog"
	"github.com/seglog/seglog/replica"
	"github.com/seglog/seglog/tablet"
)

// Options configure a broker, under Kafka's broker config names where they
// have one.
type Options struct {
	// Cluster, if set, makes the broker one of a cluster
	// (docs/cluster.md). The default is nil: a single node.
	Cluster *ClusterOptions
	// NodeID is node.id, for NewNull: New takes the data directory's
	// (meta.properties), as Kafka refuses a node.id other than the one
	// stored.
	NodeID int32
	// AdvertisedHost and AdvertisedPort are what Metadata tells clients to
	// connect to (advertised.listeners). The defaults are the listener's
	// address.
	AdvertisedHost string
	AdvertisedPort int32
	// MaxRequestBytes is socket.request.max.bytes: a larger frame closes
	// its connection. The default is 104857600 (100 MiB).
	MaxRequestBytes int32
	// FetchMaxBytes is fetch.max.bytes: the most record bytes a fetch
	// response carries, whatever its max_bytes asks (the first batch whole
	// even when larger, as Kafka). The default is 57671680 (55 MiB).
	FetchMaxBytes int32
	// QueuedMaxRequestBytes is queued.max.request.bytes: the memory every
	// connection's requests may hold at once, read and not yet answered.
	// A frame's memory is reserved before it is read (as its bytes
	// arrive); at the bound, reading from connections pauses until
	// requests are answered. The default is 512 MiB, and at least
	// MaxRequestBytes (Kafka's is no bound); negative is no bound.
	QueuedMaxRequestBytes int64
	// AutoCreateTopics is auto.create.topics.enable. The default is true
	// (the zero value is taken as the default; set NoAutoCreate to refuse).
	NoAutoCreate bool
	// NumPartitions is num.partitions, of an auto-created topic. The
	// default is 1.
	NumPartitions int32
	// AutoCreateMaxTopicsPerRequest (seglog.auto.create.max.topics.per.request,
	// beyond Kafka) bounds the topics one Metadata or Produce request
	// auto-creates; the others are UNKNOWN_TOPIC_OR_PARTITION, which a
	// client retries. The default is 100.
	AutoCreateMaxTopicsPerRequest int
	// AutoCreateMaxRate (seglog.auto.create.partitions.max.rate, beyond
	// Kafka) bounds the partitions auto-creation makes a second, broker
	// wide, as a token bucket with controller_mutation_rate's burst (the
	// rate × 11 one-second windows): past it auto-creation answers
	// UNKNOWN_TOPIC_OR_PARTITION and creates nothing. A client's
	// controller_mutation_rate quota bounds its auto-creation too. The
	// default is 100; negative is no bound.
	AutoCreateMaxRate float64
	// DurableAcks answers an acks=-1 produce only after the group-commit
	// fsync that covers it (beyond Kafka, which acknowledges from the page
	// cache with one replica). The default is false.
	DurableAcks bool
	// IdleTimeout is connections.max.idle.ms. The default is 10 minutes.
	IdleTimeout time.Duration
	// MaxConnections is max.connections: a connection beyond it is closed
	// at once (logged). The default leaves room under the process's
	// descriptor limit (RLIMIT_NOFILE) for the data directory's segments
	// and indexes: half of it, at least 64 (Kafka's is no limit, and a
	// broker out of descriptors cannot open a segment); negative is no
	// limit.
	MaxConnections int
	// MaxConnectionsPerIP is max.connections.per.ip: a connection from an
	// address that has this many open is closed at once (logged), unless
	// MaxConnectionsPerIPOverrides (max.connections.per.ip.overrides, by
	// IP address) says otherwise. The default is 0, no limit.
	MaxConnectionsPerIP          int
	MaxConnectionsPerIPOverrides map[string]int
	// MaxFetchWait bounds how long a fetch long-polls, whatever its
	// MaxWaitMs asks (a client fetches again). The default is 1 minute.
	MaxFetchWait time.Duration
	// RemoteFetchMaxWait is remote.fetch.max.wait.ms: a fetch's read from
	// the tier's store may take the fetch's own wait (MaxWaitMs), and at
	// least this long; past it the partition is answered with no records.
	// The default is 500 ms.
	RemoteFetchMaxWait time.Duration
	// MaxTopicPartitions bounds the partitions of one topic that
	// CreateTopics and CreatePartitions make (seglog's guard: each is a
	// directory and an open .log): more is INVALID_PARTITIONS. The
	// default is 10000.
	MaxTopicPartitions int32

	// SASLMechanisms is sasl.enabled.mechanisms: what SASL_PLAINTEXT and
	// SASL_SSL listeners accept, of PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512
	// (users and their credentials: the data directory's
	// seglog-scram-credentials, see Credentials). The default is
	// SCRAM-SHA-256 and SCRAM-SHA-512 (Kafka's is GSSAPI, not served; PLAIN
	// sends the password itself, so it is only for TLS listeners and only
	// when asked for).
	SASLMechanisms []string
	// ReauthInterval is connections.max.reauth.ms: a SASL session lasts
	// this long (told to the client in SaslAuthenticate v1+), then the
	// client must authenticate again on the connection or it is closed at
	// its next request. The default is 0, sessions that never expire.
	ReauthInterval time.Duration
	// NoClientTelemetry is seglog.client.telemetry.enable=false: clients
	// are asked to push no metrics (KIP-714). By default they push every
	// metric, exported on /metrics as seglog_client_*.
	NoClientTelemetry bool
	// FetchSessionSlots is max.incremental.fetch.session.cache.slots: the
	// most incremental fetch sessions (KIP-227) kept at once, a stale or
	// smaller one evicted for a new one past it. The default is 1000;
	// negative keeps none (every fetch is a full one).
	FetchSessionSlots int
	// Configs are the broker configs the operator set (seglog serve's
	// server.properties and --config), by Kafka name: DescribeConfigs on
	// the broker lists each as STATIC_BROKER_CONFIG beside the ones it
	// always lists, a password's value hidden (sensitive).
	Configs map[string]string
	// FailedAuthDelay is connection.failed.authentication.delay.ms: how
	// long a failed authentication waits before its answer and the close
	// of its connection. The default is 100 ms; negative is none.
	FailedAuthDelay time.Duration
	// MaxFailedAuthRate (seglog.failed.authentication.max.rate, beyond
	// Kafka) bounds the failed authentications an address may make a
	// second, over the quotas' windows (at least ten seconds): past it,
	// its logins fail without their passwords being checked until its
	// rate falls below, so guessing gains nothing and costs the broker no
	// PBKDF2 (a PLAIN check's). The default is 1 (ten failures in ten
	// seconds); negative is no bound.
	MaxFailedAuthRate float64

	// PrincipalRules are ssl.principal.mapping.rules: how a client
	// certificate's subject becomes the user of its principal. The
	// default is DEFAULT, the subject as it is.
	PrincipalRules *auth.PrincipalRules
	// Authorizer turns ACLs on (authorizer.class.name): every request is
	// checked against the data directory's seglog-acls (managed with
	// CreateAcls, DescribeAcls, DeleteAcls) before it touches the engine.
	// The default is false: every principal may do anything, and the ACL
	// APIs answer SECURITY_DISABLED.
	Authorizer bool
	// SuperUsers (super.users) may do anything, whatever the ACLs say:
	// principals such as User:admin. The default is none.
	SuperUsers []string
	// AllowEveryoneIfNoACL is allow.everyone.if.no.acl.found: a resource
	// no ACL applies to is open to every principal. The default is false.
	AllowEveryoneIfNoACL bool

	// Groups configure the group coordinator (offsets.topic.*, group.*,
	// offsets.retention.*); its Logger defaults to Logger.
	Groups group.Options
	// Transactions configure the transaction coordinator
	// (transaction.state.log.*, transaction.max.timeout.ms, …); its
	// producer ids come from the broker's allocator, its Logger defaults to
	// Logger.
	Transactions txn.Options

	// Logger receives connection and request failures. The default is
	// slog.Default(). The broker writes to it through a rate limit
	// (internal/ratelog): at most ten lines a second of each message, the
	// next line let through counting those dropped ("dropped"), so no
	// client can make it write a line per connection or per request.
	Logger *slog.Logger
}

func (o *Options) ensureDefaults() {
	if o.MaxRequestBytes <= 0 {
		o.MaxRequestBytes = 100 << 20
	}
	if o.NumPartitions <= 0 {
		o.NumPartitions = 1
	}
	if o.FetchMaxBytes <= 0 {
		o.FetchMaxBytes = 55 << 20
	}
	if o.QueuedMaxRequestBytes == 0 {
		o.QueuedMaxRequestBytes = 512 << 20
	}
	if o.QueuedMaxRequestBytes > 0 {
		o.QueuedMaxRequestBytes = max(o.QueuedMaxRequestBytes, int64(o.MaxRequestBytes))
	}
	if o.MaxConnections == 0 {
		o.MaxConnections = defaultMaxConnections()
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 10 * time.Minute
	}
	if o.MaxFetchWait <= 0 {
		o.MaxFetchWait = time.Minute
	}
	if o.RemoteFetchMaxWait <= 0 {
		o.RemoteFetchMaxWait = 500 * time.Millisecond
	}
	if o.MaxTopicPartitions <= 0 {
		o.MaxTopicPartitions = 10000
	}
	if o.AutoCreateMaxTopicsPerRequest <= 0 {
		o.AutoCreateMaxTopicsPerRequest = 100
	}
	if o.AutoCreateMaxRate == 0 {
		o.AutoCreateMaxRate = 100
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	o.Logger = slog.New(ratelog.New(o.Logger.Handler(), ratelog.Options{}))
	if o.SASLMechanisms == nil {
		o.SASLMechanisms = []string{auth.SHA256, auth.SHA512}
	}
	if o.FailedAuthDelay == 0 {
		o.FailedAuthDelay = 100 * time.Millisecond
	}
	if o.FailedAuthDelay < 0 {
		o.FailedAuthDelay = 0
	}
	if o.MaxFailedAuthRate == 0 {
		o.MaxFailedAuthRate = 1
	}
}

// Broker serves the Kafka protocol on a data directory's tablets.
type Broker struct {
	m       *tablet.Manager
	dyn     *dynamicConfigs // the dynamic broker configs
	opts    Options
	pids    *producerIDs
	metrics *metrics
	null    *nullLog // NewNull's: answers without storing
	groups  *group.Coordinator
	txns    *txn.Coordinator
	ctx     context.Context // ends at Close: requests waiting for a rebalance stop
	grp     *groupAPIs      // the group coordinator's APIs
	configs *configAPIs     // the config APIs
	txnAPI  *txnAPIs        // the transaction coordinator's APIs
	// hooks, if set, are told of events a test waits for.
	hooks struct {
		fetchWaiting func() // a fetch begins a long poll
		connDone     func() // a connection's goroutines have ended
	}
	// clusterID is the data directory's cluster.id, for Metadata.
	clusterID string
	// creds are the SCRAM credentials (nil for NewNull's broker).
	creds *auth.Credentials
	acls  *auth.ACLs
	// cat is the metadata: the cluster's, or a single node's data
	// directory as a cluster of one; topics its name and id lookups.
	cat     catalog
	topics  topicView
	guard   *guard         // the APIs' authorization
	authn   *authenticator // who each connection is
	limits  *limits        // the client quotas enforced
	quotas  *auth.Quotas
	sensors sensors
	// autoCreate is the broker-wide bucket of AutoCreateMaxRate.
	autoCreate rate
	// reqMem bounds request memory (QueuedMaxRequestBytes).
	reqMem *memBudget
	// clock is the time SASL sessions expire by (a test's own).
	clock func() time.Time
	// sessions are the incremental fetch sessions (KIP-227).
	sessions *fetchSessions
	// telemetry are the metrics clients push (KIP-714).
	telemetry *telemetry

	// replicas is the replica manager, a cluster's (ClusterOptions) or a
	// single node's (its own, over the data directory): produce acks,
	// fetches and high watermarks go through it in both.
	replicas *replica.Manager
	// closeServices is the composition root's closer of the services,
	// run by Close after the connections (Services.Close).
	closeServices func() error
	// rackAware: a consumer naming its rack is sent to a follower in it
	// (ClusterOptions.RackAwareReplicaSelector).
	rackAware bool

	// stop is closed by Close: long polls end at once.
	stop chan struct{}
	// docsFollowed is the cluster revision followDocs has taken.
	docsFollowed cluster.Progress

	mu     sync.Mutex // guards ln, conns, perIP and closed
	ln     []net.Listener
	conns  map[net.Conn]struct{}
	perIP  map[string]int // open connections by peer address
	closed bool
	wg     sync.WaitGroup
}

// A Foundation is what a broker's services are made over, opened first:
// the data directory's (or the cluster's) security documents and dynamic
// broker configs — the dynamic topic defaults applied before any topic,
// the coordinators' included, is made — and the producer ids. A
// composition root (package server's Compose) opens it, makes the
// services with its options (GroupOptions, TxnOptions), then the broker
// (New).
type Foundation struct {
	m       *tablet.Manager
	opts    Options
	docs    *stateDocs
	pids    *producerIDs
	markers *clusterMarkers // a cluster's transaction markers (their broker set by New)
}

// Open opens the foundation of a broker on the manager's data directory.
func Open(m *tablet.Manager, opts Options) (*Foundation, error) {
	opts.ensureDefaults()
	for _, mech := range opts.SASLMechanisms {
		if !slices.Contains(auth.SASLMechanisms, mech) {
			return nil, fmt.Errorf("broker: sasl.enabled.mechanisms: %q is not one of %v", mech, auth.SASLMechanisms)
		}
	}
	if c := opts.Cluster; c != nil && (c.Member == nil || c.Replicas == nil) {
		return nil, errors.New("broker: a cluster's broker needs its member and its replica manager")
	}
	pids, err := openProducerIDs(m.FS(), filepath.Join(m.Dir(), producerIDFile))
	if err != nil {
		return nil, err
	}
	if c := opts.Cluster; c != nil {
		// The cluster's blocks: no two brokers hand out one id.
		pids.next, pids.end = 0, 0
		pids.reserve = func(n int64) (int64, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			return c.Member.ProducerIDs(ctx, n)
		}
	}
	docs, err := openStateDocs(m, opts)
	if err != nil {
		return nil, err
	}
	if c := opts.Cluster; c != nil {
		docs.dyn.rates = c.Replicas.SetThrottleRates
	}
	if c, b := docs.dyn.levels(); len(c)+len(b) > 0 {
		docs.dyn.apply(m, opts.Logger)
	}
	opts.NodeID = m.Meta().NodeID
	return &Foundation{m: m, opts: opts, docs: docs, pids: pids, markers: &clusterMarkers{}}, nil
}

// Logger is the broker's logger (rate-limited), for its services.
func (f *Foundation) Logger() *slog.Logger { return f.opts.Logger }

// GroupOptions are the group coordinator's options: Options.Groups, and
// in a cluster the hooks that make it a cluster's (its topic's
// partitions' leaders coordinate their groups).
func (f *Foundation) GroupOptions() group.Options {
	gopts := f.opts.Groups
	if gopts.Logger == nil {
		gopts.Logger = f.opts.Logger
	}
	// A single node serves at once and loads its groups behind
	// (COORDINATOR_LOAD_IN_PROGRESS until each partition is in), as Kafka's
	// coordinator does; a cluster's load as their leadership comes.
	gopts.LoadInBackground = !gopts.ReadOnly
	if c := f.opts.Cluster; c != nil {
		gopts.Cluster = clusterGroupHooks(c, gopts, f.opts.Logger)
		gopts.TopicExists = partitionExists(c)
	}
	return gopts
}

// TxnOptions are the transaction coordinator's options:
// Options.Transactions, its producer ids from the broker's allocator, a
// committed transaction's offsets applied by groups, and in a cluster the
// hooks that make it a cluster's (its markers sent to each partition's
// leader).
func (f *Foundation) TxnOptions(groups *group.Coordinator) txn.Options {
	topts := f.opts.Transactions
	if topts.Logger == nil {
		topts.Logger = f.opts.Logger
	}
	topts.AllocateProducerID = f.pids.allocate
	topts.OnMarker = groups.OnMarker // a transaction's offsets apply when it commits
	if c := f.opts.Cluster; c != nil {
		topts.Cluster = clusterTxnHooks(c, topts, f.markers)
		topts.TopicExists = partitionExists(c)
	}
	return topts
}

// partitionExists reports whether a partition exists in the cluster's
// metadata (the coordinators' check of a topic named in a request).
func partitionExists(c *ClusterOptions) func(topic string, partition int32) bool {
	return func(topic string, partition int32) bool {
		_, ok := c.Member.Snapshot().Partition(topic, partition)
		return ok
	}
}

// Services are what a broker answers with besides its data directory,
// made by the composition root over its Foundation: the replica manager
// (a single node's over its tablets, or the cluster's) and the
// coordinators. Close, if set, is the root's: the broker's Close runs it
// once its connections are done (the services stop after the requests
// that use them).
type Services struct {
	Replicas *replica.Manager
	Groups   *group.Coordinator
	Txns     *txn.Coordinator
	Close    func() error
}

// New returns a broker over its foundation and services; it makes none
// of them.
func New(f *Foundation, s Services) (*Broker, error) {
	m, opts := f.m, f.opts
	if s.Replicas == nil || s.Groups == nil || s.Txns == nil {
		return nil, errors.New("broker: the replica manager and the coordinators are required")
	}
	if c := opts.Cluster; c != nil && c.Replicas != s.Replicas {
		return nil, errors.New("broker: the services' replica manager is not the cluster's")
	}
	docs := f.docs
	var authz *auth.Authorizer
	if opts.Authorizer {
		authz = &auth.Authorizer{ACLs: docs.acls, SuperUsers: opts.SuperUsers, AllowIfNoACL: opts.AllowEveryoneIfNoACL}
	}
	b := &Broker{m: m, opts: opts, pids: f.pids, dyn: docs.dyn, clusterID: m.Meta().ClusterID, metrics: newMetrics(), conns: map[net.Conn]struct{}{},
		stop: make(chan struct{}), groups: s.Groups, txns: s.Txns, creds: docs.creds, acls: docs.acls, quotas: docs.quotas, clock: time.Now,
		perIP: map[string]int{}, reqMem: &memBudget{limit: opts.QueuedMaxRequestBytes}, sessions: newFetchSessions(opts.FetchSessionSlots, time.Now),
		telemetry: newTelemetry(opts.NoClientTelemetry, time.Now), replicas: s.Replicas, closeServices: s.Close}
	b.ctx = b.stopContext()
	if c := opts.Cluster; c != nil {
		b.cat = &clusterCatalog{clusterTopics: clusterTopics{c.Member}, c: c, defaults: m.DefaultConfig, ctx: b.ctx, log: opts.Logger,
			maxPartitions: opts.MaxTopicPartitions}
		b.rackAware = c.RackAwareReplicaSelector
	} else {
		b.cat = &localCatalog{Manager: m, replicas: s.Replicas, node: opts.NodeID, advertised: b.advertised, log: opts.Logger,
			maxPartitions: opts.MaxTopicPartitions}
	}
	b.topics = topicView{b.cat}
	b.configs = &configAPIs{cat: b.cat, dyn: docs.dyn, m: m, opts: &b.opts}
	b.guard = &guard{authz: authz, topics: b.topics, logger: opts.Logger}
	b.authn = newAuthenticator(b)
	b.limits = newLimits(b)
	b.grp = &groupAPIs{groups: s.Groups, guard: b.guard, topics: b.topics}
	b.txnAPI = &txnAPIs{txns: s.Txns, pids: f.pids, grp: b.grp, verify: b.verifyTxn, logger: opts.Logger}
	f.markers.b = b
	if c := opts.Cluster; c != nil {
		// The coordinators follow the leadership of their topics'
		// partitions.
		watchCoordinated(c.Replicas, group.Topic, func(p int32, t *tablet.Tablet, _ int32) func() error {
			return s.Groups.Load(p, t)
		}, s.Groups.Unload, opts.Logger)
		watchCoordinated(c.Replicas, txn.Topic, s.Txns.Load, s.Txns.Unload, opts.Logger)
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			b.followDocs(c.Member)
		}()
	}
	return b, nil
}

// ErrClosed is returned by Serve once the broker is closed.
var ErrClosed = seglog.NewKafkaError("broker: closed", -1)

// Listener is one of the broker's listeners, as Kafka's listeners and
// advertised.listeners name them: what Metadata and FindCoordinator tell a
// client that connected through it.
type Listener struct {
	// Name is the listener's name (PLAINTEXT, SSL, or one of
	// listener.security.protocol.map), for logs.
	Name string
	// SecurityProtocol is the listener's protocol: PLAINTEXT (the
	// default) or SSL, served as they come (ServeListener's caller wraps
	// an SSL listener in TLS), or SASL_PLAINTEXT or SASL_SSL, whose
	// connections must authenticate before any request but ApiVersions.
	SecurityProtocol string
	// AdvertisedHost and AdvertisedPort are the address clients are told.
	// The defaults are Options.AdvertisedHost and AdvertisedPort, or the
	// listener's own address.
	AdvertisedHost string
	AdvertisedPort int32
}

// Serve accepts connections on ln until Close, each served by its own
// goroutine, advertising Options.AdvertisedHost and AdvertisedPort (the
// listener's address by default). It returns ErrClosed after Close.
func (b *Broker) Serve(ln net.Listener) error {
	b.mu.Lock()
	if b.opts.AdvertisedHost == "" {
		b.opts.AdvertisedHost, b.opts.AdvertisedPort = advertisedFor(ln.Addr())
	}
	l := Listener{Name: "PLAINTEXT", AdvertisedHost: b.opts.AdvertisedHost, AdvertisedPort: b.opts.AdvertisedPort}
	b.mu.Unlock()
	return b.ServeListener(ln, l)
}

// advertisedFor is the address a listener bound to addr tells its
// clients by default: its own, or — bound to every interface (0.0.0.0,
// ::), an address no client can connect to — the machine's host name, as
// Kafka advertises its canonical host name.
func advertisedFor(addr net.Addr) (string, int32) {
	a, ok := addr.(*net.TCPAddr)
	if !ok {
		return "", 0
	}
	host := a.IP.String()
	if a.IP.IsUnspecified() {
		if name, err := os.Hostname(); err == nil && name != "" {
			host = name
		}
	}
	return host, int32(a.Port)
}

// ServeListener accepts connections on ln, a listener of its own (several
// may be served at once: plaintext and TLS, each with its advertised
// address), until Close. It returns ErrClosed after Close.
func (b *Broker) ServeListener(ln net.Listener, l Listener) error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return ErrClosed
	}
	b.ln = append(b.ln, ln)
	if l.AdvertisedHost == "" {
		l.AdvertisedHost, l.AdvertisedPort = advertisedFor(ln.Addr())
	}
	if b.opts.AdvertisedHost == "" { // the first listener's, for what has no connection
		b.opts.AdvertisedHost, b.opts.AdvertisedPort = l.AdvertisedHost, l.AdvertisedPort
	}
	b.mu.Unlock()
	var backoff time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			b.mu.Lock()
			closed := b.closed
			b.mu.Unlock()
			if closed {
				return ErrClosed
			}
			if errors.Is(err, net.ErrClosed) { // closed by its owner, not by Close
				return fmt.Errorf("broker: accepting: %w", err)
			}
			// Out of descriptors (EMFILE, ENFILE), a connection reset
			// before it was accepted (ECONNABORTED), out of memory: the
			// broker keeps serving the clients it has and tries again.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			b.metrics.acceptErrors.Inc()
			b.opts.Logger.Warn("accepting a connection failed; retrying", "listener", l.Name, "err", err, "retry_in", backoff)
			select {
			case <-time.After(backoff):
			case <-b.stop:
				return ErrClosed
			}
			continue
		}
		backoff = 0
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			c.Close()
			return ErrClosed
		}
		if b.opts.MaxConnections >= 0 && len(b.conns) >= b.opts.MaxConnections {
			b.mu.Unlock()
			b.opts.Logger.Warn("refusing a connection: max.connections reached", "remote", c.RemoteAddr().String(),
				"max", b.opts.MaxConnections)
			b.metrics.refused.Inc()
			c.Close()
			continue
		}
		ip := clientIP(c.RemoteAddr())
		if max := b.maxConnectionsOf(ip); max >= 0 && b.perIP[ip] >= max {
			b.mu.Unlock()
			b.opts.Logger.Warn("refusing a connection: max.connections.per.ip reached", "remote", c.RemoteAddr().String(), "max", max)
			b.metrics.refused.Inc()
			c.Close()
			continue
		}
		if !b.limits.connectionAllowed(ip) {
			b.mu.Unlock()
			b.opts.Logger.Warn("refusing a connection: over its IP's connection_creation_rate quota", "remote", c.RemoteAddr().String())
			b.metrics.refusedRate.Inc()
			c.Close()
			continue
		}
		b.metrics.accepted.Inc()
		b.metrics.open.Inc()
		b.conns[c] = struct{}{}
		b.perIP[ip]++
		b.wg.Add(1)
		b.mu.Unlock()
		go func() {
			defer b.wg.Done()
			serveConn(b, c, &l)
			b.metrics.open.Dec()
			b.mu.Lock()
			delete(b.conns, c)
			if b.perIP[ip]--; b.perIP[ip] == 0 {
				delete(b.perIP, ip)
			}
			b.mu.Unlock()
			if b.hooks.connDone != nil {
				b.hooks.connDone()
			}
		}()
	}
}

// maxConnectionsOf is an address's max.connections.per.ip, -1 for none.
func (b *Broker) maxConnectionsOf(ip string) int {
	if n, ok := b.opts.MaxConnectionsPerIPOverrides[ip]; ok {
		return n
	}
	if b.opts.MaxConnectionsPerIP > 0 {
		return b.opts.MaxConnectionsPerIP
	}
	return -1
}

// Close stops accepting, closes every connection once its request in
// flight is answered, waits for them, then closes the services (by
// Services.Close). The manager is the caller's to close after.
func (b *Broker) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	close(b.stop)
	var errs []error
	for _, ln := range b.ln {
		errs = append(errs, ln.Close())
	}
	for c := range b.conns {
		// Reads end at once; a request being handled finishes and its
		// response is written before the connection goes.
		if cr, ok := c.(interface{ CloseRead() error }); ok {
			_ = cr.CloseRead()
		} else {
			_ = c.Close()
		}
	}
	b.mu.Unlock()
	b.wg.Wait()
	if b.closeServices != nil {
		errs = append(errs, b.closeServices())
	}
	return errors.Join(errs...)
}

var _ io.Closer = (*Broker)(nil)

// stopContext ends when the broker closes: JoinGroup and SyncGroup stop
// waiting for a rebalance.
func (b *Broker) stopContext() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-b.stop
		cancel()
	}()
	return ctx
}
