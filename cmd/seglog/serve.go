package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/seglog/seglog/broker"
	"github.com/seglog/seglog/broker/auth"
	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/coordinator/group"
	"github.com/seglog/seglog/internal/nearest"
	"github.com/seglog/seglog/server"
	"github.com/seglog/seglog/tablet"
)

// serveSettings is what serve's configs set: the broker's options, the
// data directory and its manager, and the default config of topics.
type serveSettings struct {
	broker     broker.Options
	manager    tablet.ManagerOptions
	topic      tablet.Config
	dataDir    string
	listener   string
	protocols  map[string]string // listener.security.protocol.map
	advertised map[string]string // advertised.listeners: name → host:port
	tls        broker.TLSOptions
	level      slog.Level
	tierStep   time.Duration
	// nodeIDSet says node.id was given: it must match meta.properties.
	nodeIDSet bool
	// cluster is the cluster settings (seglog.etcd.endpoints and the
	// replication configs); it is used once endpoints are given.
	cluster server.ClusterConfig
}

// serveConfig is one broker config serve takes, under Kafka's name.
type serveConfig struct {
	name, doc string
	set       func(s *serveSettings, v string) error
}

// topicDefault is a broker config that is the default of a topic config
// (log.segment.bytes → segment.bytes), scaled (hours to ms) as
// tablet.BrokerSynonyms says.
func topicDefault(broker string) serveConfig {
	syn, ok := tablet.BrokerSynonymOf(broker)
	if !ok {
		panic("serve: " + broker + " is not a topic default") // a programming error, at init
	}
	return serveConfig{name: broker, doc: "the default " + syn.Topic, set: func(s *serveSettings, v string) error {
		return syn.SetFrom(&s.topic, v)
	}}
}

// intConfig is a config of a number in [lo, hi].
func intConfig(name, doc string, lo, hi int64, set func(s *serveSettings, n int64)) serveConfig {
	return serveConfig{name: name, doc: doc, set: func(s *serveSettings, v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < lo || n > hi {
			return fmt.Errorf("not a number in [%d, %d]", lo, hi)
		}
		set(s, n)
		return nil
	}}
}

// rateConfig is a rate a second, 0 or more, where 0 is no bound (set
// receives -1, the broker's "none").
func rateConfig(name, doc string, set func(s *serveSettings, n float64)) serveConfig {
	return serveConfig{name: name, doc: doc, set: func(s *serveSettings, v string) error {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil || n < 0 || math.IsNaN(n) || math.IsInf(n, 0) {
			return fmt.Errorf("%q: a rate, 0 or more", v)
		}
		if n == 0 {
			n = -1
		}
		set(s, n)
		return nil
	}}
}

// boolConfig is a config of true or false.
func boolConfig(name, doc string, set func(s *serveSettings, b bool)) serveConfig {
	return serveConfig{name: name, doc: doc, set: func(s *serveSettings, v string) error {
		if v != "true" && v != "false" {
			return fmt.Errorf("not true or false")
		}
		set(s, v == "true")
		return nil
	}}
}

// msConfig is a config of milliseconds (positive).
func msConfig(name, doc string, set func(s *serveSettings, d time.Duration)) serveConfig {
	return intConfig(name, doc, 1, math.MaxInt64/int64(time.Millisecond), func(s *serveSettings, n int64) {
		set(s, time.Duration(n)*time.Millisecond)
	})
}

// serveConfigs are the broker configs serve takes. Later ones win: a
// config file's lines in order, then each --config.
var serveConfigs = []serveConfig{
	{name: "listeners", doc: "the listeners, NAME://host:port,... (default PLAINTEXT://127.0.0.1:9092); a name's protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL) is listener.security.protocol.map's", set: func(s *serveSettings, v string) error {
		if _, err := parseListeners(v, nil); err != nil {
			return err
		}
		s.listener = v
		return nil
	}},
	{name: "listener.security.protocol.map", doc: "NAME:PROTOCOL,... (default PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL)", set: func(s *serveSettings, v string) error {
		m, err := parseProtocolMap(v)
		s.protocols = m
		return err
	}},
	{name: "advertised.listeners", doc: "what Metadata tells the clients of each listener, NAME://host:port,... (default: the listener's address)", set: func(s *serveSettings, v string) error {
		ls, err := parseListeners(v, nil)
		if err != nil {
			return err
		}
		s.advertised = map[string]string{}
		for _, l := range ls {
			s.advertised[l.name] = l.addr
		}
		return nil
	}},
	{name: "ssl.certificate.location", doc: "the TLS listeners' certificate chain (PEM)", set: func(s *serveSettings, v string) error {
		s.tls.CertFile = v
		return nil
	}},
	{name: "ssl.key.location", doc: "the TLS listeners' private key (PEM, unencrypted; a file, never a value)", set: func(s *serveSettings, v string) error {
		s.tls.KeyFile = v
		return nil
	}},
	{name: "ssl.ca.location", doc: "the CA certificates client certificates must chain to (PEM)", set: func(s *serveSettings, v string) error {
		s.tls.CAFile = v
		return nil
	}},
	{name: "ssl.client.auth", doc: "none (default), requested or required: client certificates on TLS listeners", set: func(s *serveSettings, v string) error {
		switch v {
		case "none", "requested", "required":
			s.tls.ClientAuth = v
			return nil
		}
		return fmt.Errorf("%q: none, requested or required", v)
	}},
	{name: "sasl.enabled.mechanisms", doc: "what SASL listeners accept, of SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN (default SCRAM-SHA-256,SCRAM-SHA-512); users: seglog users", set: func(s *serveSettings, v string) error {
		var mechs []string
		for _, m := range strings.Split(v, ",") {
			m = strings.ToUpper(strings.TrimSpace(m))
			if !slices.Contains(auth.SASLMechanisms, m) {
				return fmt.Errorf("%q: SCRAM-SHA-256, SCRAM-SHA-512 or PLAIN", m)
			}
			mechs = append(mechs, m)
		}
		s.broker.SASLMechanisms = mechs
		return nil
	}},
	intConfig("connections.max.reauth.ms", "how long a SASL session lasts before the client must authenticate again (default 0: for ever)", 0, math.MaxInt32, func(s *serveSettings, n int64) {
		s.broker.ReauthInterval = time.Duration(n) * time.Millisecond
	}),
	intConfig("connection.failed.authentication.delay.ms", "how long a failed authentication waits before its answer and the close (default 100)", 0, math.MaxInt32, func(s *serveSettings, n int64) {
		s.broker.FailedAuthDelay = time.Duration(n) * time.Millisecond
		if n == 0 {
			s.broker.FailedAuthDelay = -1
		}
	}),
	{name: "ssl.principal.mapping.rules", doc: "how a client certificate's subject becomes a principal: RULE:pattern/replacement/[LU],...,DEFAULT (default DEFAULT)", set: func(s *serveSettings, v string) error {
		r, err := auth.ParsePrincipalRules(v)
		s.broker.PrincipalRules = r
		return err
	}},
	rateConfig("seglog.failed.authentication.max.rate", "failed logins a second an address may make (over ten seconds) before its logins are refused unchecked (default 1; 0: no bound)", func(s *serveSettings, n float64) {
		s.broker.MaxFailedAuthRate = n
	}),
	rateConfig("seglog.auto.create.partitions.max.rate", "partitions auto-creation may make a second, broker wide, with a burst of eleven seconds' worth (default 100; 0: no bound)", func(s *serveSettings, n float64) {
		s.broker.AutoCreateMaxRate = n
	}),
	intConfig("seglog.auto.create.max.topics.per.request", "topics one Metadata or Produce request may auto-create; the others are UNKNOWN_TOPIC_OR_PARTITION, which clients retry (default 100)", 1, math.MaxInt32, func(s *serveSettings, n int64) {
		s.broker.AutoCreateMaxTopicsPerRequest = int(n)
	}),
	{name: "authorizer.class.name", doc: "turns ACLs on: org.apache.kafka.metadata.authorizer.StandardAuthorizer, kafka.security.authorizer.AclAuthorizer or seglog (default none); ACLs: seglog acls", set: func(s *serveSettings, v string) error {
		switch v {
		case "":
			s.broker.Authorizer = false
		case "org.apache.kafka.metadata.authorizer.StandardAuthorizer", "kafka.security.authorizer.AclAuthorizer", "seglog":
			s.broker.Authorizer = true
		default:
			return fmt.Errorf("%q: seglog's authorizer is Kafka's ACL model: StandardAuthorizer, AclAuthorizer or seglog", v)
		}
		return nil
	}},
	{name: "super.users", doc: "principals that may do anything, User:name;User:name (default none)", set: func(s *serveSettings, v string) error {
		s.broker.SuperUsers = nil
		for _, p := range strings.Split(v, ";") {
			if p = strings.TrimSpace(p); p == "" {
				continue
			}
			if typ, name, ok := strings.Cut(p, ":"); !ok || typ == "" || name == "" {
				return fmt.Errorf("%q: a principal is Type:name (User:admin)", p)
			}
			s.broker.SuperUsers = append(s.broker.SuperUsers, p)
		}
		return nil
	}},
	boolConfig("allow.everyone.if.no.acl.found", "with an authorizer, a resource no ACL names is open to everyone (default false)", func(s *serveSettings, b bool) {
		s.broker.AllowEveryoneIfNoACL = b
	}),
	{name: "log.dirs", doc: "the data directory (one for now; --data-dir wins)", set: func(s *serveSettings, v string) error {
		if strings.Contains(v, ",") {
			return fmt.Errorf("one data directory for now")
		}
		s.dataDir = v
		return nil
	}},
	{name: "log.dir", doc: "the data directory when log.dirs is not set", set: func(s *serveSettings, v string) error {
		if s.dataDir == "" {
			s.dataDir = v
		}
		return nil
	}},
	intConfig("node.id", "the node id of a new data directory (default 0); an existing one's must match its meta.properties", 0,
		math.MaxInt32, func(s *serveSettings, n int64) {
			s.manager.NodeID, s.nodeIDSet = int32(n), true
		}),
	intConfig("broker.id", "Kafka's older name of node.id (the same rules)", 0, math.MaxInt32, func(s *serveSettings, n int64) {
		s.manager.NodeID, s.nodeIDSet = int32(n), true
	}),
	{name: "seglog.etcd.endpoints", doc: "etcd's client URLs, http://h1:2379,...: the broker joins the cluster whose metadata is there (docs/cluster.md); absent, a single node", set: func(s *serveSettings, v string) error {
		s.cluster.Endpoints = nil
		for _, e := range strings.Split(v, ",") {
			if e = strings.TrimSpace(e); e != "" {
				s.cluster.Endpoints = append(s.cluster.Endpoints, e)
			}
		}
		return nil
	}},
	{name: "seglog.etcd.prefix", doc: "the cluster's etcd prefix (default /seglog/: brokers given the same etcd form one cluster); a new data directory takes the cluster id stored there", set: func(s *serveSettings, v string) error {
		s.cluster.Prefix = v
		return nil
	}},
	{name: "seglog.etcd.ssl.ca.location", doc: "the CA certificates that verify etcd (PEM), for https endpoints", set: func(s *serveSettings, v string) error {
		s.cluster.EtcdTLS.CAFile = v
		return nil
	}},
	{name: "seglog.etcd.ssl.certificate.location", doc: "the broker's client certificate for etcd (PEM), with seglog.etcd.ssl.key.location", set: func(s *serveSettings, v string) error {
		s.cluster.EtcdTLS.CertFile = v
		return nil
	}},
	{name: "seglog.etcd.ssl.key.location", doc: "the key of seglog.etcd.ssl.certificate.location (PEM)", set: func(s *serveSettings, v string) error {
		s.cluster.EtcdTLS.KeyFile = v
		return nil
	}},
	{name: "seglog.etcd.username", doc: "etcd's user, when etcd's authentication is on (its password: seglog.etcd.password.file)", set: func(s *serveSettings, v string) error {
		s.cluster.EtcdUsername = v
		return nil
	}},
	{name: "seglog.etcd.password.file", doc: "a file whose first line is the password of seglog.etcd.username (never the password itself)", set: func(s *serveSettings, v string) error {
		var err error
		s.cluster.EtcdPassword, err = passwordFromFile(v)
		return err
	}},
	{name: "sasl.mechanism.inter.broker.protocol", doc: "how the broker logs in to the others on a SASL inter-broker listener: SCRAM-SHA-512 (default), SCRAM-SHA-256 or PLAIN", set: func(s *serveSettings, v string) error {
		s.cluster.InterBrokerSASL.Mechanism = v
		return nil
	}},
	{name: "seglog.inter.broker.sasl.username", doc: "the broker's own user on a SASL inter-broker listener (a user of seglog users, a super user or one granted ClusterAction)", set: func(s *serveSettings, v string) error {
		s.cluster.InterBrokerSASL.Username = v
		return nil
	}},
	{name: "seglog.inter.broker.sasl.password.file", doc: "a file whose first line is that user's password (never the password itself)", set: func(s *serveSettings, v string) error {
		var err error
		s.cluster.InterBrokerSASL.Password, err = passwordFromFile(v)
		return err
	}},
	{name: "broker.rack", doc: "the broker's rack, for the placement of replicas", set: func(s *serveSettings, v string) error {
		s.cluster.Rack = v
		return nil
	}},
	{name: "inter.broker.listener.name", doc: "the listener followers fetch from their leaders on (default the first)", set: func(s *serveSettings, v string) error {
		s.cluster.InterBrokerListener = v
		return nil
	}},
	intConfig("default.replication.factor", "the replicas of a topic created without a replication factor (default 1)", 1, math.MaxInt16, func(s *serveSettings, n int64) {
		s.cluster.DefaultReplicationFactor = int16(n)
	}),
	intConfig("offsets.topic.replication.factor", "the replicas of __consumer_offsets in a cluster (default 3, or every live broker when fewer)", 1, math.MaxInt16, func(s *serveSettings, n int64) {
		s.cluster.OffsetsReplicationFactor = int16(n)
	}),
	intConfig("transaction.state.log.replication.factor", "the replicas of __transaction_state in a cluster (default 3, or every live broker when fewer)", 1, math.MaxInt16, func(s *serveSettings, n int64) {
		s.cluster.TransactionsReplicationFactor = int16(n)
	}),
	intConfig("transaction.state.log.min.isr", "min.insync.replicas of __transaction_state in a cluster (default 2, never above its replicas)", 1, math.MaxInt16, func(s *serveSettings, n int64) {
		s.cluster.TransactionsMinISR = int16(n)
	}),
	intConfig("min.insync.replicas", "the ISR size an acks=all produce needs (default 1), of topics that do not set it", 1, math.MaxInt16, func(s *serveSettings, n int64) {
		s.cluster.MinInsyncReplicas = int(n)
	}),
	msConfig("replica.lag.time.max.ms", "a follower not caught up for this long leaves the ISR (default 30000)", func(s *serveSettings, d time.Duration) {
		s.cluster.LagTime = d
	}),
	msConfig("broker.session.timeout.ms", "a broker silent this long is taken as dead (default 9000)", func(s *serveSettings, d time.Duration) {
		s.cluster.SessionTimeout = d
	}),
	msConfig("broker.heartbeat.interval.ms", "how often a broker renews its session (default 2000)", func(s *serveSettings, d time.Duration) {
		s.cluster.HeartbeatInterval = d
	}),
	boolConfig("unclean.leader.election.enable", "elect a replica outside the ISR when the whole ISR is gone (default false: may lose acknowledged records)", func(s *serveSettings, b bool) {
		s.cluster.UncleanLeaderElection = b
	}),
	{name: "replica.selector.class", doc: "org.apache.kafka.common.replica.RackAwareReplicaSelector sends a consumer that names its rack (client.rack) to a follower in it (KIP-392); org.apache.kafka.common.replica.LeaderSelector (the default) reads from leaders", set: func(s *serveSettings, v string) error {
		switch v {
		case "org.apache.kafka.common.replica.RackAwareReplicaSelector":
			s.cluster.RackAwareReplicaSelector = true
		case "", "org.apache.kafka.common.replica.LeaderSelector":
			s.cluster.RackAwareReplicaSelector = false
		default:
			return fmt.Errorf("replica.selector.class=%s: org.apache.kafka.common.replica.RackAwareReplicaSelector or org.apache.kafka.common.replica.LeaderSelector", v)
		}
		return nil
	}},
	boolConfig("auto.leader.rebalance.enable", "move leaderships back to their preferred replicas when a broker's share of partitions led by another is above leader.imbalance.per.broker.percentage (default true)", func(s *serveSettings, b bool) {
		s.cluster.NoAutoLeaderRebalance = !b
	}),
	intConfig("leader.imbalance.check.interval.seconds", "how often the controller checks the leaders' balance (default 300)", 1, math.MaxInt32, func(s *serveSettings, n int64) {
		s.cluster.LeaderImbalanceCheckInterval = time.Duration(n) * time.Second
	}),
	intConfig("leader.imbalance.per.broker.percentage", "a broker's share, in percent, of the partitions it is the preferred replica of but does not lead above which they are moved back (default 10)", 1, 100, func(s *serveSettings, n int64) {
		s.cluster.LeaderImbalancePercentage = int(n)
	}),
	intConfig("replica.fetch.max.bytes", "a partition's bytes in a follower's fetch (default 1048576)", 1, math.MaxInt32, func(s *serveSettings, n int64) {
		s.cluster.FetchMaxBytes = int32(n)
	}),
	msConfig("replica.fetch.wait.max.ms", "how long a follower's fetch waits for records (default 500)", func(s *serveSettings, d time.Duration) {
		s.cluster.FetchWait = d
	}),
	msConfig("replica.fetch.backoff.ms", "the longest a partition its leader refused waits before it is fetched again: 25 ms first, doubling (default 1000)", func(s *serveSettings, d time.Duration) {
		s.cluster.FetchBackoff = d
	}),
	intConfig("num.replica.fetchers", "fetchers per leader a follower runs, each with its connection, sharing the partitions by Kafka's hash (default 1)", 1, 1<<10, func(s *serveSettings, n int64) {
		s.cluster.ReplicaFetchers = int(n)
	}),
	intConfig("num.partitions", "the partitions of an auto-created topic (default 1)", 1, math.MaxInt32, func(s *serveSettings, n int64) {
		s.broker.NumPartitions = int32(n)
	}),
	boolConfig("seglog.client.telemetry.enable", "ask clients for their metrics (KIP-714) and export them on /metrics as seglog_client_* (default true)", func(s *serveSettings, b bool) {
		s.broker.NoClientTelemetry = !b
	}),
	boolConfig("auto.create.topics.enable", "create a topic on its first Metadata or Produce (default true)", func(s *serveSettings, b bool) {
		s.broker.NoAutoCreate = !b
	}),
	intConfig("queued.max.request.bytes", "the memory all connections' requests may hold, read and not yet answered; past it reading pauses (default 536870912, at least socket.request.max.bytes; -1: no bound)", -1, math.MaxInt64, func(s *serveSettings, n int64) {
		s.broker.QueuedMaxRequestBytes = n
	}),
	intConfig("fetch.max.bytes", "the most record bytes one fetch response carries, whatever the fetch asks (default 57671680)", 1024, math.MaxInt32, func(s *serveSettings, n int64) {
		s.broker.FetchMaxBytes = int32(n)
	}),
	intConfig("socket.request.max.bytes", "the largest request frame (default 104857600)", 1, math.MaxInt32, func(s *serveSettings, n int64) {
		s.broker.MaxRequestBytes = int32(n)
	}),
	msConfig("connections.max.idle.ms", "close a connection idle this long (default 600000)", func(s *serveSettings, d time.Duration) {
		s.broker.IdleTimeout = d
	}),
	intConfig("max.connections", "refuse connections beyond this many (default half the descriptor limit, RLIMIT_NOFILE, at least 64)", 1, math.MaxInt32, func(s *serveSettings, n int64) {
		s.broker.MaxConnections = int(n)
	}),
	intConfig("max.incremental.fetch.session.cache.slots", "the most incremental fetch sessions (KIP-227) kept at once (default 1000; 0: none, every fetch a full one)", 0, math.MaxInt32, func(s *serveSettings, n int64) {
		s.broker.FetchSessionSlots = int(n)
		if n == 0 {
			s.broker.FetchSessionSlots = -1
		}
	}),
	intConfig("max.connections.per.ip", "refuse connections from an address beyond this many open (default none)", 1, math.MaxInt32, func(s *serveSettings, n int64) {
		s.broker.MaxConnectionsPerIP = int(n)
	}),
	{name: "max.connections.per.ip.overrides", doc: "ip:n,ip:n — max.connections.per.ip for those addresses", set: func(s *serveSettings, v string) error {
		m := map[string]int{}
		for _, kv := range strings.Split(v, ",") {
			if kv = strings.TrimSpace(kv); kv == "" {
				continue
			}
			i := strings.LastIndex(kv, ":")
			n, err := strconv.Atoi(kv[i+1:])
			if i < 0 || err != nil || n < 0 || net.ParseIP(kv[:i]) == nil {
				return fmt.Errorf("%q: ip:n with an IP address (no host names)", kv)
			}
			m[net.ParseIP(kv[:i]).String()] = n
		}
		s.broker.MaxConnectionsPerIPOverrides = m
		return nil
	}},
	msConfig("remote.fetch.max.wait.ms", "how long a fetch's read from the tier's store may take at least, beyond the fetch's own wait (default 500)", func(s *serveSettings, d time.Duration) {
		s.broker.RemoteFetchMaxWait = d
	}),
	boolConfig("seglog.durable.acks", "answer every acks=-1 produce after the fsync that covers it (default false; the topic config of the same name does it per topic)", func(s *serveSettings, b bool) {
		s.broker.DurableAcks = b
	}),
	topicDefault("log.segment.bytes"),
	topicDefault("log.roll.ms"),
	topicDefault("log.roll.hours"),
	topicDefault("log.roll.jitter.ms"),
	topicDefault("log.index.size.max.bytes"),
	topicDefault("log.index.interval.bytes"),
	topicDefault("log.retention.ms"),
	topicDefault("log.retention.minutes"),
	topicDefault("log.retention.hours"),
	topicDefault("log.retention.bytes"),
	topicDefault("log.flush.interval.messages"),
	topicDefault("log.flush.interval.ms"),
	topicDefault("message.max.bytes"),
	topicDefault("log.message.timestamp.type"),
	topicDefault("log.preallocate"),
	topicDefault("log.segment.delete.delay.ms"),
	topicDefault("log.cleanup.policy"),
	topicDefault("log.cleaner.min.cleanable.ratio"),
	topicDefault("log.cleaner.min.compaction.lag.ms"),
	topicDefault("log.cleaner.max.compaction.lag.ms"),
	topicDefault("log.cleaner.delete.retention.ms"),
	boolConfig("log.cleaner.enable", "run the log cleaner of compacted topics (default true)", func(s *serveSettings, b bool) {
		s.manager.Cleaner.Disable = !b
	}),
	intConfig("log.cleaner.threads", "how many tablets are cleaned at once (default 1)", 1, 64, func(s *serveSettings, n int64) {
		s.manager.Cleaner.Threads = int(n)
	}),
	intConfig("log.cleaner.dedupe.buffer.size", "the memory of the cleaners' offset maps, 24 bytes a key (default 134217728)", 1<<10, 1<<40, func(s *serveSettings, n int64) {
		s.manager.Cleaner.DedupeBufferBytes = n
	}),
	{name: "log.cleaner.io.max.bytes.per.second", doc: "bound each cleaner's reads and writes (default none)", set: func(s *serveSettings, v string) error {
		r, err := strconv.ParseFloat(v, 64)
		if err != nil || r <= 0 || math.IsNaN(r) {
			return fmt.Errorf("not a positive number")
		}
		s.manager.Cleaner.IOMaxBytesPerSecond = r
		return nil
	}},
	msConfig("log.cleaner.backoff.ms", "how long a cleaner waits when nothing needs cleaning (default 15000)", func(s *serveSettings, d time.Duration) {
		s.manager.Cleaner.Backoff = d
	}),
	msConfig("log.retention.check.interval.ms", "how often retention runs (default 300000)", func(s *serveSettings, d time.Duration) {
		s.manager.RetentionCheckInterval = d
	}),
	msConfig("log.flush.offset.checkpoint.interval.ms", "how often the checkpoints are written (default 60000)", func(s *serveSettings, d time.Duration) {
		s.manager.CheckpointInterval = d
	}),
	msConfig("log.flush.scheduler.interval.ms", "how often flush.ms is checked (default 1000)", func(s *serveSettings, d time.Duration) {
		s.manager.FlushCheckInterval = d
	}),
	msConfig("remote.log.manager.task.interval.ms", "how often --store's tiering steps each tablet (default 30000)", func(s *serveSettings, d time.Duration) {
		s.tierStep = d
	}),
	intConfig("offsets.topic.num.partitions", "the partitions of __consumer_offsets when it is created (default 50)", 1, 10000, func(s *serveSettings, n int64) {
		s.broker.Groups.Partitions = int32(n)
	}),
	intConfig("offsets.topic.segment.bytes", "segment.bytes of __consumer_offsets (default 104857600)", 1<<20, math.MaxInt32, func(s *serveSettings, n int64) {
		s.broker.Groups.SegmentBytes = n
	}),
	intConfig("group.initial.rebalance.delay.ms", "how long an empty group's first rebalance waits for more members (default 3000)", 0, math.MaxInt32, func(s *serveSettings, n int64) {
		s.broker.Groups.InitialRebalanceDelay, s.broker.Groups.NoInitialDelay = time.Duration(n)*time.Millisecond, n == 0
	}),
	msConfig("group.min.session.timeout.ms", "the shortest session timeout a member may ask for (default 6000)", func(s *serveSettings, d time.Duration) {
		s.broker.Groups.MinSessionTimeout = d
	}),
	msConfig("group.max.session.timeout.ms", "the longest session timeout a member may ask for (default 1800000)", func(s *serveSettings, d time.Duration) {
		s.broker.Groups.MaxSessionTimeout = d
	}),
	intConfig("group.max.size", "the most members a group may have (default 2147483647)", 1, math.MaxInt32, func(s *serveSettings, n int64) {
		s.broker.Groups.MaxSize = int(n)
	}),
	msConfig("group.consumer.session.timeout.ms", "how long a consumer group (KIP-848) member may go without a heartbeat (default 45000)", func(s *serveSettings, d time.Duration) {
		s.broker.Groups.ConsumerSessionTimeout = d
	}),
	msConfig("group.consumer.heartbeat.interval.ms", "how often consumer group (KIP-848) members are told to heartbeat (default 5000)", func(s *serveSettings, d time.Duration) {
		s.broker.Groups.ConsumerHeartbeatInterval = d
	}),
	{name: "group.consumer.assignors", doc: "the server-side assignors of consumer groups (KIP-848), the first the default: uniform, range (default uniform,range)", set: func(s *serveSettings, v string) error {
		names, err := group.ParseAssignors(v)
		s.broker.Groups.ConsumerAssignors = names
		return err
	}},
	{name: "group.consumer.migration.policy", doc: "whether groups move between the classic and consumer protocols as their members upgrade or downgrade: bidirectional, upgrade, downgrade, disabled (default bidirectional)", set: func(s *serveSettings, v string) error {
		switch p := strings.ToLower(v); p {
		case group.MigrationBidirectional, group.MigrationUpgrade, group.MigrationDowngrade, group.MigrationDisabled:
			s.broker.Groups.MigrationPolicy = p
			return nil
		}
		return fmt.Errorf("group.consumer.migration.policy: %q is not bidirectional, upgrade, downgrade or disabled", v)
	}},
	intConfig("group.consumer.max.size", "the most members a consumer group (KIP-848) may have (default 2147483647)", 1, math.MaxInt32, func(s *serveSettings, n int64) {
		s.broker.Groups.ConsumerMaxSize = int(n)
	}),
	intConfig("offsets.retention.minutes", "how long an empty group keeps its committed offsets (default 10080, 7 days)", 1, math.MaxInt32, func(s *serveSettings, n int64) {
		s.broker.Groups.Retention = time.Duration(n) * time.Minute
	}),
	msConfig("offsets.retention.check.interval.ms", "how often expired offsets are deleted (default 600000)", func(s *serveSettings, d time.Duration) {
		s.broker.Groups.RetentionCheckInterval = d
	}),
	intConfig("offset.metadata.max.bytes", "the largest metadata of a committed offset (default 4096)", 1, math.MaxInt32, func(s *serveSettings, n int64) {
		s.broker.Groups.MaxMetadataBytes = int(n)
	}),
	intConfig("transaction.state.log.num.partitions", "the partitions of __transaction_state when it is created (default 50)", 1, 10000, func(s *serveSettings, n int64) {
		s.broker.Transactions.Partitions = int32(n)
	}),
	intConfig("transaction.state.log.segment.bytes", "segment.bytes of __transaction_state (default 104857600)", 1<<20, math.MaxInt32, func(s *serveSettings, n int64) {
		s.broker.Transactions.SegmentBytes = n
	}),
	msConfig("transaction.max.timeout.ms", "the longest transaction.timeout.ms a producer may ask for (default 900000)", func(s *serveSettings, d time.Duration) {
		s.broker.Transactions.MaxTimeout = d
	}),
	msConfig("transaction.abort.timed.out.transaction.cleanup.interval.ms", "how often transactions past their timeout are aborted (default 10000)", func(s *serveSettings, d time.Duration) {
		s.broker.Transactions.AbortInterval = d
	}),
	{name: "log.level", doc: "debug, info, warn or error (default info; seglog's own)", set: func(s *serveSettings, v string) error {
		return s.level.UnmarshalText([]byte(v))
	}},
}

// applyServeConfig sets one config; unknown is false for a name serve
// does not take.
func applyServeConfig(s *serveSettings, k, v string) (known bool, err error) {
	for _, c := range serveConfigs {
		if c.name == k {
			if err := c.set(s, strings.TrimSpace(v)); err != nil {
				return true, fmt.Errorf("%s=%s: %w", k, v, err)
			}
			if s.broker.Configs == nil {
				s.broker.Configs = map[string]string{}
			}
			s.broker.Configs[k] = strings.TrimSpace(v) // DescribeConfigs lists what the operator set
			return true, nil
		}
	}
	return false, nil
}

// nearestConfig is the config serve takes that k is most likely a typo
// of, else "".
func nearestConfig(k string) string {
	names := make([]string, len(serveConfigs))
	for i, c := range serveConfigs {
		names[i] = c.name
	}
	return nearest.Name(k, names)
}

// unknownConfig is the error of a config serve does not take.
func unknownConfig(k string) error {
	if near := nearestConfig(k); near != "" {
		return fmt.Errorf("unknown broker config %q: did you mean %q? (seglog serve --help lists them)", k, near)
	}
	return fmt.Errorf("unknown broker config %q (seglog serve --help lists the ones it takes)", k)
}

// serveConfigHelp is the help's table of configs.
func serveConfigHelp() string {
	var sb strings.Builder
	for _, c := range serveConfigs {
		fmt.Fprintf(&sb, "  %-40s %s\n", c.name, c.doc)
	}
	return sb.String()
}

func newServeCmd() *cobra.Command {
	var (
		dataDir    string
		configFile string
		configs    []string
		httpAddr   string
		httpTLS    bool
		store      string
		creds      s3Flags
		simulated  bool
	)
	cmd := &cobra.Command{
		Use:   "serve --data-dir D [--config-file server.properties] [--config key=value]...",
		Short: "Serve the Kafka protocol on a data directory (a single-node broker)",
		Long: `serve opens the data directory as a writer and serves the Kafka protocol, so
that unmodified Kafka clients (kcat, franz-go, sarama, kafkajs, the Python
client) produce to it and consume from it: ApiVersions, Metadata (topics
auto-created), Produce (acks 0, 1, -1; idempotent producers), Fetch (long
polling woken by appends; read_uncommitted and read_committed), ListOffsets,
OffsetForLeaderEpoch, InitProducerId for idempotent producers, consumer
groups (FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
OffsetCommit, OffsetFetch, OffsetDelete, DescribeGroups, ListGroups,
DeleteGroups; the classic protocol, with committed offsets and group metadata
in __consumer_offsets), transactions (InitProducerId with a transactional id,
AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn,
DescribeTransactions, ListTransactions, DescribeProducers; the state in
__transaction_state), and the admin APIs: CreateTopics, DeleteTopics,
CreatePartitions, DeleteRecords, DescribeConfigs, AlterConfigs,
IncrementalAlterConfigs.

--config-file reads a Kafka server.properties (a config serve does not take
is logged and ignored, as Kafka does); each --config key=value comes after it
and must be one of these, under Kafka's broker config names:

` + serveConfigHelp() + `
The default listener is PLAINTEXT://127.0.0.1:9092: loopback only unless
told otherwise. --http-addr (or its older name --metrics-addr) serves the
web console on / (a login first when ACLs are on), the Prometheus collectors
(the engine's, the broker's, the tier's, the Go runtime's and the process's)
on /metrics and the Go profiler on /debug/pprof/ (keep it on loopback);
--http-tls serves it over https with the listeners' ssl.* certificate.

--store URL runs the tiering service inside the broker (as seglog tier does):
the sealed segments of topics with remote.storage.enable=true go to the store,
and fetches below the local log start are served from it. Without --store,
tablets tiered before are attached to their own stores for those reads.

SIGTERM or SIGINT stops accepting, answers the requests in flight and closes
the data directory cleanly.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			set := serveSettings{listener: "PLAINTEXT://127.0.0.1:9092", topic: tablet.DefaultConfig(), level: slog.LevelInfo}
			var ignored []string
			if configFile != "" {
				data, err := os.ReadFile(configFile)
				if err != nil {
					return err
				}
				props := checkpoint.ParseProperties(data)
				for _, k := range slices.Sorted(maps.Keys(props)) {
					known, err := applyServeConfig(&set, k, props[k])
					if err != nil {
						return fmt.Errorf("%s: %w", configFile, err)
					}
					switch {
					case known:
					case nearestConfig(k) != "":
						// A typo of a config serve takes, not one of
						// Kafka's it leaves: an error, not the default.
						return fmt.Errorf("%s: %w", configFile, unknownConfig(k))
					default:
						ignored = append(ignored, k)
					}
				}
			}
			for _, kv := range configs {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					return fmt.Errorf("--config %q is not key=value", kv)
				}
				known, err := applyServeConfig(&set, k, v)
				if err != nil {
					return fmt.Errorf("--config %w", err)
				}
				if !known {
					return fmt.Errorf("--config %q: %w", kv, unknownConfig(k))
				}
			}
			if dataDir != "" {
				set.dataDir = dataDir
			}
			if set.dataDir == "" {
				return errors.New("--data-dir (or log.dirs) is required")
			}
			cfg, err := set.serverConfig()
			if err != nil {
				return err
			}
			logger := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: set.level}))
			if len(ignored) > 0 {
				logger.Warn("configs not used by seglog serve", "file", configFile, "keys", strings.Join(ignored, ","))
			}
			cfg.Logger, cfg.Store, cfg.MetricsAddr, cfg.HTTPTLS = logger, store, httpAddr, httpTLS
			if httpTLS && httpAddr == "" {
				return errors.New("--http-tls needs --http-addr")
			}
			if store != "" {
				if cfg.S3, err = creds.options(); err != nil {
					return err
				}
			}
			if !simulated {
				return runServer(cmd, cfg, logger)
			}
			disk, err := openSimDisk(cfg.DataDir, logger)
			if err != nil {
				return err
			}
			cfg.FS, cfg.DataDir = disk.mem, disk.dir
			disk.watch()
			return errors.Join(runServer(cmd, cfg, logger), disk.close())
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", "", "the data directory (created if missing, said in the first log line; a serve that fails to start leaves none); log.dirs otherwise")
	cmd.Flags().StringVar(&configFile, "config-file", "", "a Kafka server.properties to read the broker configs from")
	cmd.Flags().StringArrayVar(&configs, "config", nil, "a broker config as key=value, repeatable, after --config-file (see the list above)")
	cmd.Flags().StringVar(&store, "store", "", "run the tiering service to this object store: file:///dir or s3://bucket/prefix?endpoint=…")
	creds.register(cmd)
	cmd.Flags().StringVar(&httpAddr, "http-addr", "", "serve the web console on http://ADDR/ and the Prometheus collectors on /metrics (loopback unless told otherwise, e.g. 127.0.0.1:9308)")
	cmd.Flags().StringVar(&httpAddr, "metrics-addr", "", "the older name of --http-addr")
	_ = cmd.Flags().MarkHidden("metrics-addr") // (kept working, not offered)
	cmd.Flags().BoolVar(&simulated, "simulated-disk", false, "run on the crash simulator loaded from --data-dir: SIGUSR1 is a power cut, SIGUSR2 a crash (the fault checker's)")
	_ = cmd.Flags().MarkHidden("simulated-disk") // (a test's tool, not an operator's)
	cmd.Flags().BoolVar(&httpTLS, "http-tls", false, "serve --http-addr over TLS (https) with the ssl.* certificate, key and CA")
	return cmd
}

// listenerSpec is one of listeners: its name, protocol and address.
type listenerSpec struct {
	name, protocol, addr string
}

var defaultProtocols = map[string]string{"PLAINTEXT": "PLAINTEXT", "SSL": "SSL", "SASL_PLAINTEXT": "SASL_PLAINTEXT", "SASL_SSL": "SASL_SSL"}

// parseProtocolMap reads listener.security.protocol.map.
func parseProtocolMap(v string) (map[string]string, error) {
	m := map[string]string{}
	for _, kv := range strings.Split(v, ",") {
		name, proto, ok := strings.Cut(strings.TrimSpace(kv), ":")
		if !ok || name == "" || defaultProtocols[strings.ToUpper(proto)] == "" {
			return nil, fmt.Errorf("listener.security.protocol.map=%q: NAME:PROTOCOL,... with PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", v)
		}
		m[strings.ToUpper(name)] = strings.ToUpper(proto)
	}
	return m, nil
}

// parseListeners reads listeners (or advertised.listeners):
// NAME://host:port,..., each name once, its protocol from the map (nil:
// the syntax only, as a config is set; the map may come after it).
func parseListeners(v string, protocols map[string]string) ([]listenerSpec, error) {
	var out []listenerSpec
	seen := map[string]bool{}
	for _, one := range strings.Split(v, ",") {
		// Not url.Parse: a listener's name may hold underscores (SASL_SSL).
		name, addr, ok := strings.Cut(strings.TrimSpace(one), "://")
		if _, _, err := net.SplitHostPort(addr); !ok || name == "" || err != nil {
			return nil, fmt.Errorf("listeners=%q: %q is not NAME://host:port", v, one)
		}
		name = strings.ToUpper(name)
		if seen[name] {
			return nil, fmt.Errorf("listeners=%q: %s twice", v, name)
		}
		seen[name] = true
		if protocols == nil {
			out = append(out, listenerSpec{name: name, addr: addr})
			continue
		}
		proto, ok := protocols[name]
		switch {
		case !ok:
			return nil, fmt.Errorf("listeners=%q: %s is not in listener.security.protocol.map", v, name)
		}
		out = append(out, listenerSpec{name: name, protocol: proto, addr: addr})
	}
	return out, nil
}

// splitHostPort splits an advertised host:port.
func splitHostPort(addr string) (string, int32, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return "", 0, err
	}
	return host, int32(p), nil
}

// serverConfig turns the settings into the server's Config.
func (set *serveSettings) serverConfig() (server.Config, error) {
	protocols := set.protocols
	if protocols == nil {
		protocols = defaultProtocols
	}
	listeners, err := parseListeners(set.listener, protocols)
	if err != nil {
		return server.Config{}, err
	}
	cfg := server.Config{DataDir: set.dataDir, Manager: set.manager, TopicDefaults: &set.topic, Broker: set.broker,
		TLS: set.tls, TierInterval: set.tierStep}
	if set.nodeIDSet {
		cfg.NodeID = &set.manager.NodeID
	}
	if len(set.cluster.Endpoints) > 0 {
		c := set.cluster
		cfg.Cluster = &c
	}
	for _, l := range listeners {
		sl := server.Listener{Name: l.name, SecurityProtocol: l.protocol, Address: l.addr}
		if adv, ok := set.advertised[l.name]; ok {
			if sl.AdvertisedHost, sl.AdvertisedPort, err = splitHostPort(adv); err != nil {
				return server.Config{}, fmt.Errorf("advertised.listeners %s: %w", l.name, err)
			}
			if ip := net.ParseIP(sl.AdvertisedHost); sl.AdvertisedHost == "" || ip != nil && ip.IsUnspecified() {
				// Kafka's refusal: clients would connect to themselves.
				return server.Config{}, fmt.Errorf("advertised.listeners %s: %q is not an address a client can connect to (the meta-address of every interface); give a routable host name or IP address",
					l.name, adv)
			}
		}
		cfg.Listeners = append(cfg.Listeners, sl)
	}
	return cfg, nil
}

// runServer runs the server until SIGTERM or SIGINT; SIGHUP reloads the
// TLS files. It prints the addresses served, a line each.
func runServer(cmd *cobra.Command, cfg server.Config, logger *slog.Logger) error {
	ctx, cancel := context.WithCancel(ctxOf(cmd))
	defer cancel()
	// The signals are caught from the start: one sent as soon as the
	// serving lines are printed (or while the directory loads) waits for
	// the handler below instead of killing the process.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt, syscall.SIGHUP)
	defer signal.Stop(sig)
	srv, err := server.New(ctx, cfg)
	if srv != nil {
		printLoadChanges(cmd.ErrOrStderr(), srv.Manager(), false)
	}
	if err != nil {
		return err
	}
	if a := srv.MetricsAddr(); a != nil {
		scheme := "http"
		if cfg.HTTPTLS {
			scheme = "https"
		}
		fmt.Fprintf(cmd.OutOrStdout(), "metrics on %s://%s/metrics (the console on %[1]s://%[2]s/)\n", scheme, a)
	}
	for _, l := range srv.Listeners() {
		fmt.Fprintf(cmd.OutOrStdout(), "serving the Kafka protocol on %s (%s, %s; data directory %s)\n", l.Addr, l.Name,
			l.SecurityProtocol, cfg.DataDir)
	}
	go func() {
		for {
			select {
			case s := <-sig:
				if s != syscall.SIGHUP {
					logger.Info("shutting down", "signal", s.String())
					cancel()
					return
				}
				// The TLS certificate and CA files again; a failure keeps
				// the ones in use.
				if err := srv.ReloadTLS(); err != nil {
					logger.Error("reloading the TLS files", "err", err)
				} else {
					logger.Info("reloaded the TLS files")
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	err = srv.Run(ctx)
	if onlyFailedTablets(err) {
		// Everything else closed cleanly; the failed tablets were reported
		// when they failed and are recovered at the next start.
		logger.Warn("shut down with failed tablets", "err", err)
		return nil
	}
	return err
}

// onlyFailedTablets reports whether err is nothing but the data
// directory's *tablet.FailedTabletsError.
func onlyFailedTablets(err error) bool {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		some := false
		for _, e := range j.Unwrap() {
			if e != nil && !onlyFailedTablets(e) {
				return false
			}
			some = some || e != nil
		}
		return some
	}
	_, ok := err.(*tablet.FailedTabletsError)
	return ok
}

// passwordFromFile is the first line of a password file.
func passwordFromFile(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	line, _, _ := strings.Cut(string(data), "\n")
	if line = strings.TrimRight(line, "\r"); line == "" {
		return "", fmt.Errorf("%s: the first line is empty", path)
	}
	return line, nil
}
