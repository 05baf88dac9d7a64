// Package server is the composition root of a seglog broker: it opens the
// data directory, attaches or runs the tier, starts the coordinators and
// the broker on its listeners, and serves the metrics — what `seglog
// serve` runs, and what a Go program runs to have a Kafka broker in its
// own process.
//
//	Config ──► New: data directory (tablet.Manager, its lock)
//	                 tier (tiering.Service with a store, or tiers attached for reads)
//	                 broker (coordinators, listeners bound)
//	                 metrics (/metrics, /debug/pprof/)
//	           Run(ctx): serves until ctx ends, then closes all in reverse
//
// Everything it opens it closes, in the reverse order: the broker (its
// requests in flight answered), the metrics, the tier, the data directory
// (cleanly, so the next start skips recovery).
package server

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/seglog/seglog/broker"
	"github.com/seglog/seglog/broker/auth"
	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/cluster"
	"github.com/seglog/seglog/console"
	"github.com/seglog/seglog/internal/ratelog"
	"github.com/seglog/seglog/replica"
	"github.com/seglog/seglog/tablet"
	"github.com/seglog/seglog/tiering"
	"github.com/seglog/seglog/vfs"
)

// Config is what a broker process needs, under Kafka's broker config
// names where they have one.
type Config struct {
	// DataDir is the data directory (log.dirs), created if missing. It is
	// required.
	DataDir string
	// FS is the data directory's filesystem (nil: the operating
	// system's); the power-cut tests give the crash simulator's.
	FS vfs.FS
	// Manager configures the data directory: the node id of a new one
	// (node.id), the cleaner, the tablets' options. Its Config, if nil, is
	// TopicDefaults. The default is tablet's defaults.
	Manager tablet.ManagerOptions
	// NodeID, if set, must be the data directory's (meta.properties), as
	// Kafka refuses a node.id other than the one stored. The default is
	// nil: any.
	NodeID *int32
	// TopicDefaults are the topics' default configs (log.segment.bytes,
	// log.retention.ms, …). The default is tablet.DefaultConfig().
	TopicDefaults *tablet.Config
	// Broker configures the broker and its coordinators; its Logger
	// defaults to Logger.
	Broker broker.Options
	// Listeners are the addresses the Kafka protocol is served on
	// (listeners, advertised.listeners). The default is one PLAINTEXT
	// listener on 127.0.0.1:9092.
	Listeners []Listener
	// TLS configures the SSL and SASL_SSL listeners (ssl.*); it is
	// required when there is one.
	TLS broker.TLSOptions
	// Store, if set, runs the tiering service to this object store
	// (file:///dir or s3://bucket/prefix?endpoint=…): the sealed
	// segments of topics with remote.storage.enable=true go to it, and
	// fetches below the local log start are served from it. The default
	// is "": tablets tiered before are attached to their own stores for
	// those reads.
	Store string
	// S3 are the store's credentials (nil: the standard AWS chain).
	S3 *tiering.S3Options
	// TierInterval is how often the tiering service looks for sealed
	// segments. The default is tiering's.
	TierInterval time.Duration
	// MetricsAddr, if set, serves the Prometheus collectors on
	// http://MetricsAddr/metrics (the engine's, the broker's and its
	// coordinators', the tier's, the Go runtime's and the process's) and
	// the Go profiler on /debug/pprof/, and the web console on / (package
	// console). The default is "": none.
	MetricsAddr string
	// HTTPTLS serves MetricsAddr over TLS (https) with the Kafka
	// listeners' certificate, key and CA (TLS, the ssl.* configs; an
	// ssl.client.auth=required asks browsers for a certificate too).
	HTTPTLS bool
	// ConsoleSampleInterval is how often the console samples the
	// broker's rates and the groups' lag for its charts (10 s by default;
	// negative: never by itself — a test calls Console().Sample).
	ConsoleSampleInterval time.Duration
	// Logger receives the server's logs, at most ten lines a second of
	// each message (internal/ratelog). The default is slog.Default().
	Logger *slog.Logger
	// Cluster, if set, makes the broker one of a cluster over etcd
	// (docs/cluster.md). The default is nil: a single node.
	Cluster *ClusterConfig
}

// ClusterConfig is a broker's cluster settings, under Kafka's names.
type ClusterConfig struct {
	// Endpoints are etcd's client URLs (seglog.etcd.endpoints).
	Endpoints []string
	// EtcdTLS, if any of its files is set, reaches etcd over TLS (https
	// endpoints): seglog.etcd.ssl.ca.location verifies etcd, and
	// seglog.etcd.ssl.certificate.location and .key.location are this
	// broker's client certificate. EtcdUsername and EtcdPassword are
	// etcd's user (seglog.etcd.username, seglog.etcd.password.file).
	EtcdTLS                    broker.TLSOptions
	EtcdUsername, EtcdPassword string
	// InterBrokerSASL is how this broker logs in to the others when the
	// inter-broker listener is SASL_PLAINTEXT or SASL_SSL
	// (sasl.mechanism.inter.broker.protocol and the broker's user).
	InterBrokerSASL InterBrokerSASL
	// Prefix is the cluster's etcd prefix (seglog.etcd.prefix): a new
	// data directory takes the cluster id stored under it (its own id
	// becomes the cluster's when it is the first). The default is
	// cluster.DefaultPrefix, /seglog/: brokers given the same etcd form one
	// cluster. (A data directory of a cluster kept under /seglog/<its
	// cluster id>/, the default before, keeps using that prefix.)
	Prefix string
	// Rack is broker.rack.
	Rack string
	// InterBrokerListener is inter.broker.listener.name: the listener
	// followers fetch on. The default is the first listener.
	InterBrokerListener string
	// SessionTimeout and HeartbeatInterval are broker.session.timeout.ms
	// and broker.heartbeat.interval.ms (cluster.Options' defaults).
	SessionTimeout, HeartbeatInterval time.Duration
	// DefaultReplicationFactor is default.replication.factor (default 1).
	DefaultReplicationFactor int16
	// OffsetsReplicationFactor is offsets.topic.replication.factor
	// (default 3, or every live broker when fewer).
	OffsetsReplicationFactor int16
	// TransactionsReplicationFactor is
	// transaction.state.log.replication.factor (default 3, or every live
	// broker when fewer); TransactionsMinISR is transaction.state.log.min.isr
	// (default 2, never above the replicas).
	TransactionsReplicationFactor, TransactionsMinISR int16
	// MinInsyncReplicas is min.insync.replicas (default 1).
	MinInsyncReplicas int
	// UncleanLeaderElection is unclean.leader.election.enable.
	UncleanLeaderElection bool
	// NoAutoLeaderRebalance is auto.leader.rebalance.enable=false (on by
	// default, as Kafka); LeaderImbalanceCheckInterval and
	// LeaderImbalancePercentage are leader.imbalance.check.interval.seconds
	// and leader.imbalance.per.broker.percentage (cluster.Options'
	// defaults).
	NoAutoLeaderRebalance        bool
	LeaderImbalanceCheckInterval time.Duration
	LeaderImbalancePercentage    int
	// RackAwareReplicaSelector is replica.selector.class
	// org.apache.kafka.common.replica.RackAwareReplicaSelector (KIP-392):
	// consumers that name their rack read from a follower in it.
	RackAwareReplicaSelector bool
	// LagTime is replica.lag.time.max.ms; FetchMaxBytes
	// replica.fetch.max.bytes; FetchWait replica.fetch.wait.max.ms
	// (replica.Options' defaults).
	LagTime       time.Duration
	FetchMaxBytes int32
	FetchWait     time.Duration
	// FetchBackoff is replica.fetch.backoff.ms.
	FetchBackoff time.Duration
	// ReplicaFetchers is num.replica.fetchers (default 1): fetchers (and
	// connections) per leader.
	ReplicaFetchers int
	// ShutdownTimeout bounds the controlled shutdown (default 30 s).
	ShutdownTimeout time.Duration
}

// InterBrokerSASL is the SASL login of a broker's own connections to
// the other brokers (followers' fetches, transaction markers).
type InterBrokerSASL struct {
	// Mechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (the default).
	Mechanism          string
	Username, Password string
}

// Listener is one listener of the Kafka protocol.
type Listener struct {
	// Name is the listener's name (PLAINTEXT, SSL, or a name of
	// listener.security.protocol.map).
	Name string
	// SecurityProtocol is PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL. The
	// default is PLAINTEXT.
	SecurityProtocol string
	// Address is host:port to listen on (port 0: any free one).
	Address string
	// AdvertisedHost and AdvertisedPort are what Metadata tells its
	// clients (advertised.listeners). The default is the address bound.
	AdvertisedHost string
	AdvertisedPort int32
}

// Server is a running broker with everything around it.
type Server struct {
	cfg       Config
	log       *slog.Logger
	m         *tablet.Manager
	b         *broker.Broker
	member    *cluster.Member
	replicas  *replica.Manager
	tier      atomic.Pointer[tiering.Service] // (set after the replicas start: they read it)
	tls       *broker.TLS
	listeners []bound
	metrics   *http.Server
	metricsLn net.Listener
	console   *console.Console
	// createdDir: New created the data directory (it removes it when it
	// fails).
	createdDir bool
	// closers close what New opened, in the reverse order.
	closers   []func() error
	closeOnce sync.Once
	closeErr  error
}

// bound is a listener bound to its address.
type bound struct {
	ln   net.Listener
	spec Listener
	l    broker.Listener
}

// Bound is a listener as it was bound.
type Bound struct {
	Name, SecurityProtocol string
	Addr                   net.Addr
}

// New opens the data directory, the tier and the broker, and binds the
// listeners and the metrics address: clients may connect once it returns,
// and are served once Run runs. On error, what it opened is closed.
func New(ctx context.Context, cfg Config) (_ *Server, err error) {
	if cfg.DataDir == "" {
		return nil, errors.New("server: DataDir (log.dirs) is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	// One budget for the whole server (the broker's, the engine's, the
	// tier's lines): no client can make it write without bound.
	cfg.Logger = slog.New(ratelog.New(cfg.Logger.Handler(), ratelog.Options{}))
	if len(cfg.Listeners) == 0 {
		cfg.Listeners = []Listener{{Name: "PLAINTEXT", Address: "127.0.0.1:9092"}}
	}
	for i := range cfg.Listeners {
		if cfg.Listeners[i].SecurityProtocol == "" {
			cfg.Listeners[i].SecurityProtocol = broker.ProtocolPlaintext
		}
	}
	s := &Server{cfg: cfg, log: cfg.Logger}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.Close())
			if s.createdDir && cfg.FS == nil {
				// A server that did not start leaves nothing behind.
				err = errors.Join(err, os.RemoveAll(cfg.DataDir))
			}
		}
	}()
	if err := s.openTLS(); err != nil {
		return nil, err
	}
	// The addresses first: a port in use fails the start before any file
	// is written.
	if err := s.bind(); err != nil { // closed after the broker, which closes them first
		return nil, err
	}
	if err := s.openDataDir(); err != nil {
		return nil, err
	}
	var tierCollector prometheus.Collector
	if cfg.Cluster == nil {
		if tierCollector, err = s.openTier(ctx, nil); err != nil {
			return nil, err
		}
	}
	bopts := cfg.Broker
	if bopts.Logger == nil {
		bopts.Logger = cfg.Logger
	}
	if cfg.Cluster != nil {
		if bopts.Cluster, err = s.joinCluster(ctx); err != nil {
			return nil, err
		}
		// Each replica's tier acts only while this broker leads its
		// partition (docs/cluster.md).
		if tierCollector, err = s.openTier(ctx, tierFences(s.member, s.replicas)); err != nil {
			return nil, err
		}
	}
	if s.b, err = Compose(s.m, bopts); err != nil {
		return nil, err
	}
	s.closers = append(s.closers, s.b.Close)
	if s.member != nil {
		// Closed first: the controlled shutdown moves the leaderships away
		// while the broker still serves its followers.
		s.closers = append(s.closers, func() error {
			ctx, cancel := context.WithTimeout(context.Background(), cmp.Or(cfg.Cluster.ShutdownTimeout, 30*time.Second))
			defer cancel()
			return s.member.ShutDown(ctx)
		})
	}
	if cfg.MetricsAddr != "" {
		if err := s.openMetrics(tierCollector); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// joinCluster joins the cluster as the data directory's node and starts
// following its metadata: the member and the replicas close after the
// broker (in Close's reverse order).
func (s *Server) joinCluster(ctx context.Context) (*broker.ClusterOptions, error) {
	c := s.cfg.Cluster
	meta := s.m.Meta()
	var listeners []cluster.Endpoint
	for _, l := range s.listeners {
		host, port := l.spec.AdvertisedHost, l.spec.AdvertisedPort
		if host == "" {
			if a, ok := l.ln.Addr().(*net.TCPAddr); ok {
				host, port = a.IP.String(), int32(a.Port)
			}
		}
		if port == 0 {
			if a, ok := l.ln.Addr().(*net.TCPAddr); ok {
				port = int32(a.Port)
			}
		}
		listeners = append(listeners, cluster.Endpoint{Listener: l.spec.Name, SecurityProtocol: l.spec.SecurityProtocol, Host: host, Port: port})
	}
	clientOpts, err := s.interBrokerClient()
	if err != nil {
		return nil, err
	}
	opts, err := s.etcdOptions()
	if err != nil {
		return nil, err
	}
	prefix, err := s.clusterPrefix(ctx, opts, meta.ClusterID)
	if err != nil {
		return nil, err
	}
	opts.Prefix, opts.ClusterID, opts.NodeID, opts.Rack, opts.Listeners = prefix, meta.ClusterID, meta.NodeID, c.Rack, listeners
	opts.SessionTimeout, opts.HeartbeatInterval, opts.UncleanLeaderElection, opts.Logger = c.SessionTimeout,
		c.HeartbeatInterval, c.UncleanLeaderElection, s.log
	opts.MinInsyncReplicas, opts.Directory = cmp.Or(c.MinInsyncReplicas, 1), meta.DirectoryID
	opts.CleanShutdown = s.m.Loaded != nil && s.m.Loaded.CleanShutdown
	opts.AutoLeaderRebalance, opts.LeaderImbalanceCheckInterval, opts.LeaderImbalancePercentage = !c.NoAutoLeaderRebalance,
		c.LeaderImbalanceCheckInterval, c.LeaderImbalancePercentage
	jctx, cancel := context.WithTimeout(ctx, max(2*cmp.Or(c.SessionTimeout, 9*time.Second), 30*time.Second))
	defer cancel()
	m, err := cluster.Join(jctx, opts)
	if err != nil {
		return nil, err
	}
	s.member = m
	s.closers = append(s.closers, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return m.Close(ctx)
	})
	defaults := s.m.DefaultConfig()
	r, err := replica.New(replica.Options{Member: m, Tablets: s.m, Listener: c.InterBrokerListener, LagTime: c.LagTime,
		FetchMaxBytes: c.FetchMaxBytes, FetchWait: c.FetchWait, FetchBackoff: c.FetchBackoff, MinInsyncReplicas: c.MinInsyncReplicas, Fetchers: c.ReplicaFetchers, Logger: s.log,
		ClientOpts: clientOpts,
		StartFromTier: func(ctx context.Context, t *tablet.Tablet, leaderLocalStart int64) error {
			svc := s.tier.Load()
			if svc == nil {
				return errors.New("this broker has no tier (serve --store) to start the replica from")
			}
			x, err := svc.Tier(ctx, t)
			if err != nil {
				return err
			}
			_, err = x.StartFollowerAt(ctx, leaderLocalStart)
			return err
		},
		Config: func(configs map[string]string) (*tablet.Config, error) {
			cfg := defaults
			for k, v := range configs {
				if broker.IsReplicationConfig(k) {
					continue // (the cluster's, not the tablet's)
				}
				if err := cfg.Set(k, v); err != nil {
					return nil, err
				}
			}
			return &cfg, nil
		}})
	if err != nil {
		return nil, err
	}
	s.replicas = r
	s.closers = append(s.closers, func() error { r.Close(); return nil })
	return &broker.ClusterOptions{Member: m, Replicas: r, DefaultReplicationFactor: cmp.Or(c.DefaultReplicationFactor, 1),
		MinInsyncReplicas: cmp.Or(c.MinInsyncReplicas, 1), UncleanLeaderElection: c.UncleanLeaderElection, RackAwareReplicaSelector: c.RackAwareReplicaSelector,
		OffsetsReplicationFactor: c.OffsetsReplicationFactor, TransactionsReplicationFactor: c.TransactionsReplicationFactor,
		TransactionsMinISR: c.TransactionsMinISR}, nil
}

// clusterPrefix is the cluster's etcd prefix: seglog.etcd.prefix, else
// cluster.DefaultPrefix — unless the data directory's cluster is kept
// under /seglog/<cluster id>/ (the default of earlier versions) and not
// under the default prefix, which it then keeps, saying so.
func (s *Server) clusterPrefix(ctx context.Context, opts cluster.Options, clusterID string) (string, error) {
	if p := s.cfg.Cluster.Prefix; p != "" {
		return p, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if id, err := cluster.ClusterIDAt(ctx, opts, cluster.DefaultPrefix); err != nil || id != "" || clusterID == "" {
		return cluster.DefaultPrefix, err
	}
	legacy := cluster.DefaultPrefix + clusterID + "/"
	id, err := cluster.ClusterIDAt(ctx, opts, legacy)
	if err != nil || id == "" {
		return cluster.DefaultPrefix, err
	}
	s.log.Warn("this cluster's metadata is under the prefix of earlier versions; set seglog.etcd.prefix to it to keep it so",
		"prefix", legacy)
	return legacy, nil
}

// etcdOptions are how the broker reaches etcd: its endpoints, TLS and
// user.
func (s *Server) etcdOptions() (cluster.Options, error) {
	c := s.cfg.Cluster
	o := cluster.Options{Endpoints: c.Endpoints, Username: c.EtcdUsername, Password: c.EtcdPassword}
	t := c.EtcdTLS
	if t.CAFile == "" && t.CertFile == "" && t.KeyFile == "" {
		return o, nil
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		return o, errors.New("seglog.etcd.ssl.certificate.location and seglog.etcd.ssl.key.location go together")
	}
	cfg, err := broker.ClientTLS(t.CAFile, t.CertFile, t.KeyFile)
	if err != nil {
		return o, fmt.Errorf("etcd's TLS (seglog.etcd.*): %w", err)
	}
	o.TLS = cfg
	return o, nil
}

// interBrokerClient is what this broker's clients of the other brokers
// need for the inter-broker listener's protocol: TLS that verifies the
// peer by ssl.ca.location (and shows this broker's certificate when the
// peer asks for one), and the SASL login.
func (s *Server) interBrokerClient() ([]kgo.Opt, error) {
	c := s.cfg.Cluster
	spec := s.listeners[0].spec
	for _, l := range s.listeners {
		if c.InterBrokerListener != "" && l.spec.Name == c.InterBrokerListener {
			spec = l.spec
		}
	}
	var opts []kgo.Opt
	switch spec.SecurityProtocol {
	case broker.ProtocolSSL, broker.ProtocolSASLSSL:
		if s.cfg.TLS.CAFile == "" {
			return nil, fmt.Errorf("the inter-broker listener %s is %s: ssl.ca.location must name the CAs that verify the other brokers",
				spec.Name, spec.SecurityProtocol)
		}
		opts = append(opts, kgo.DialTLSConfig(s.tls.ClientConfig()))
	}
	switch spec.SecurityProtocol {
	case broker.ProtocolSASLPlaintext, broker.ProtocolSASLSSL:
		sasl := c.InterBrokerSASL
		if sasl.Username == "" {
			return nil, fmt.Errorf("the inter-broker listener %s is %s: the broker needs a user of its own to log in to the others (seglog.inter.broker.sasl.username, .password.file)",
				spec.Name, spec.SecurityProtocol)
		}
		mech, err := auth.ClientMechanism(sasl.Mechanism, sasl.Username, sasl.Password)
		if err != nil {
			return nil, fmt.Errorf("sasl.mechanism.inter.broker.protocol=%w", err)
		}
		opts = append(opts, kgo.SASL(mech))
	}
	return opts, nil
}

// Member is the broker's cluster membership (nil for a single node).
func (s *Server) Member() *cluster.Member { return s.member }

// Replicas are the broker's replicas (nil for a single node).
func (s *Server) Replicas() *replica.Manager { return s.replicas }

// openTLS loads the TLS files if a listener or the HTTP listener needs
// them.
func (s *Server) openTLS() error {
	need := s.cfg.HTTPTLS && s.cfg.MetricsAddr != ""
	for _, l := range s.cfg.Listeners {
		need = need || l.SecurityProtocol == broker.ProtocolSSL || l.SecurityProtocol == broker.ProtocolSASLSSL
	}
	if !need {
		return nil
	}
	t, err := broker.NewTLS(s.cfg.TLS)
	if err != nil {
		return err
	}
	s.tls = t
	return nil
}

// openDataDir opens the data directory under its lock.
func (s *Server) openDataDir() error {
	mopts := s.cfg.Manager
	if mopts.Config == nil {
		mopts.Config = s.cfg.TopicDefaults
	}
	if mopts.Tablet.Logger == nil {
		mopts.Tablet.Logger = s.log
	}
	fsys := vfs.OrOS(s.cfg.FS)
	if _, err := fsys.Stat(s.cfg.DataDir); errors.Is(err, fs.ErrNotExist) && !mopts.ReadOnly {
		// As Kafka, a missing directory is created — and said, so that a
		// typo in its name does not pass for an empty broker.
		s.log.Info("creating the data directory: it does not exist", "dir", s.cfg.DataDir)
		s.createdDir = true
	}
	_, metaErr := fsys.Stat(filepath.Join(s.cfg.DataDir, "meta.properties"))
	if c := s.cfg.Cluster; c != nil && errors.Is(metaErr, fs.ErrNotExist) {
		// A new data directory joins its cluster under the cluster's id
		// (its own becomes the cluster's when it is the first).
		var b [16]byte
		_, _ = rand.Read(b[:])
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		etcd, err := s.etcdOptions()
		if err != nil {
			cancel()
			return err
		}
		etcd.Prefix = cmp.Or(c.Prefix, cluster.DefaultPrefix)
		id, err := cluster.ClaimClusterIDAt(ctx, etcd, checkpoint.TopicID(b).String())
		cancel()
		if err != nil {
			return err
		}
		mopts.ClusterID = id
	}
	m, err := tablet.OpenManager(fsys, s.cfg.DataDir, mopts)
	if err != nil {
		return err
	}
	s.m = m
	s.closers = append(s.closers, m.Close)
	if meta := m.Meta(); s.cfg.NodeID != nil && meta.NodeID != *s.cfg.NodeID {
		return fmt.Errorf("node.id=%d, but %s holds node %d (its meta.properties)", *s.cfg.NodeID, s.cfg.DataDir, meta.NodeID)
	}
	return nil
}

// openTier starts the tiering service to the configured store, or
// attaches the tablets tiered before to their own stores; a tier that
// cannot be attached (its store down) is logged and the local records are
// served.
func (s *Server) openTier(ctx context.Context, fences func(checkpoint.TopicPartition) tiering.Fence) (prometheus.Collector, error) {
	if s.cfg.Store == "" {
		tiers, err := tiering.Attach(ctx, s.m, nil, nil, &tiering.Options{Logger: s.log})
		if err != nil {
			s.log.Warn("a tier could not be attached: the local records are served, those below the local log start are not until its store answers",
				"err", err)
		}
		if tiers != nil {
			s.closers = append(s.closers, tiers.Close)
		}
		return nil, nil
	}
	if err := tiering.CheckStoreURL(s.cfg.Store); err != nil {
		return nil, err
	}
	for _, t := range s.m.Tablets() {
		if err := tiering.CheckBinding(s.m.FS(), t, s.cfg.Store); err != nil {
			return nil, err
		}
	}
	st, err := tiering.OpenStore(ctx, s.cfg.Store, s.cfg.S3)
	if err != nil {
		return nil, err
	}
	svc := tiering.NewService(s.m, st, &tiering.ServiceOptions{StoreURL: s.cfg.Store, Interval: s.cfg.TierInterval,
		Tier: tiering.Options{Logger: s.log}, Fence: fences})
	svc.Start()
	s.tier.Store(svc)
	s.closers = append(s.closers, svc.Close) // before the data directory closes
	s.log.Info("tiering", "store", tiering.RedactURL(s.cfg.Store))
	return svc.Collector(), nil
}

// bind listens on every listener's address, and the metrics address.
func (s *Server) bind() error {
	if s.cfg.MetricsAddr != "" {
		ln, err := net.Listen("tcp", s.cfg.MetricsAddr)
		if err != nil {
			return err
		}
		s.closers = append(s.closers, func() error { _ = ln.Close(); return nil }) // if Run never served it
		if s.cfg.HTTPTLS {
			ln = tls.NewListener(ln, s.tls.Config())
		}
		s.metricsLn = ln
	}
	for _, spec := range s.cfg.Listeners {
		ln, err := net.Listen("tcp", spec.Address)
		if err != nil {
			return err
		}
		s.closers = append(s.closers, func() error { _ = ln.Close(); return nil }) // if the broker did not
		if a, ok := ln.Addr().(*net.TCPAddr); ok && !a.IP.IsLoopback() && !authenticates(spec.SecurityProtocol, s.cfg.TLS.ClientAuth) {
			s.log.Warn("a listener beyond loopback lets clients in without authentication (SASL_SSL, or SSL with ssl.client.auth=required, would not)",
				"listener", spec.Name, "address", ln.Addr().String(), "authorizer", s.cfg.Broker.Authorizer)
		}
		b := bound{ln: ln, spec: spec, l: broker.Listener{Name: spec.Name, SecurityProtocol: spec.SecurityProtocol,
			AdvertisedHost: spec.AdvertisedHost, AdvertisedPort: spec.AdvertisedPort}}
		if spec.SecurityProtocol == broker.ProtocolSSL || spec.SecurityProtocol == broker.ProtocolSASLSSL {
			b.ln = tls.NewListener(ln, s.tls.Config())
		}
		s.listeners = append(s.listeners, b)
	}
	return nil
}

// authenticates reports whether a listener's clients must prove who they
// are: SASL, or TLS with a required client certificate.
func authenticates(protocol, clientAuth string) bool {
	return protocol == broker.ProtocolSASLPlaintext || protocol == broker.ProtocolSASLSSL ||
		protocol == broker.ProtocolSSL && clientAuth == "required"
}

// openMetrics binds the metrics address and registers every collector.
func (s *Server) openMetrics(tier prometheus.Collector) error {
	reg := prometheus.NewRegistry()
	cs := []prometheus.Collector{s.m.Collector(), s.b.Collector(), collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})}
	if tier != nil {
		cs = append(cs, tier)
	}
	if s.replicas != nil {
		cs = append(cs, s.replicas.Collector())
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	// The console's charts sample the broker's own metrics only.
	own := prometheus.NewRegistry()
	if err := own.Register(s.b.Collector()); err != nil {
		return err
	}
	con, err := console.New(s.b, console.Options{Logger: s.log, Metrics: own, SampleInterval: s.cfg.ConsoleSampleInterval})
	if err != nil {
		return err
	}
	s.console = con
	ctx, stop := context.WithCancel(context.Background())
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		con.Run(ctx)
	}()
	s.closers = append(s.closers, func() error {
		stop()
		<-sampled
		return nil
	})
	mux.Handle("/", con)
	s.metrics = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug)} // (a failed TLS handshake, say)
	s.closers = append(s.closers, s.metrics.Close) // closes ln once Run serves it
	return nil
}

// Console is the web console (nil without an HTTP listener).
func (s *Server) Console() *console.Console { return s.console }

// Manager is the data directory's manager.
func (s *Server) Manager() *tablet.Manager { return s.m }

// Broker is the broker.
func (s *Server) Broker() *broker.Broker { return s.b }

// Tiering returns the tiering service (nil without a store).
func (s *Server) Tiering() *tiering.Service { return s.tier.Load() }

// Listeners are the Kafka listeners as bound (a port 0 resolved).
func (s *Server) Listeners() []Bound {
	out := make([]Bound, len(s.listeners))
	for i, l := range s.listeners {
		out[i] = Bound{Name: l.spec.Name, SecurityProtocol: l.spec.SecurityProtocol, Addr: l.ln.Addr()}
	}
	return out
}

// MetricsAddr is the metrics listener's address, nil without one.
func (s *Server) MetricsAddr() net.Addr {
	if s.metricsLn == nil {
		return nil
	}
	return s.metricsLn.Addr()
}

// ReloadTLS reads the TLS certificate, key and CA files again (new
// connections use them); on error the ones in use stay. Without a TLS
// listener it does nothing.
func (s *Server) ReloadTLS() error {
	if s.tls == nil {
		return nil
	}
	return s.tls.Reload()
}

// Run serves the listeners and the metrics until ctx ends (or a listener
// fails), then closes everything: the requests in flight are answered and
// the data directory is closed cleanly. It returns the listener's failure
// and the errors of closing.
func (s *Server) Run(ctx context.Context) error {
	served := make(chan error, len(s.listeners))
	for _, l := range s.listeners {
		go func() { served <- s.b.ServeListener(l.ln, l.l) }()
	}
	if s.metrics != nil {
		go func() { _ = s.metrics.Serve(s.metricsLn) }()
	}
	var err error
	pending := len(s.listeners)
	select {
	case <-ctx.Done():
	case err = <-served:
		pending--
	}
	closeErr := s.Close()
	for range pending {
		<-served
	}
	if errors.Is(err, broker.ErrClosed) {
		err = nil
	}
	return errors.Join(err, closeErr)
}

// Close closes what New opened, in the reverse order, once; it returns
// the errors of closing.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		var errs []error
		for i := len(s.closers) - 1; i >= 0; i-- {
			errs = append(errs, s.closers[i]())
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}
