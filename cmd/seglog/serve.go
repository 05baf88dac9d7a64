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
	"github.com/seglog/seglog/config"
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

// intSetter sets an integer config (its range checked by the table).
func intSetter(set func(s *serveSettings, n int64)) func(*serveSettings, string) error {
	return func(s *serveSettings, v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return err
		}
		set(s, n)
		return nil
	}
}

// msSetter sets a config of milliseconds.
func msSetter(set func(s *serveSettings, d time.Duration)) func(*serveSettings, string) error {
	return intSetter(func(s *serveSettings, n int64) { set(s, time.Duration(n)*time.Millisecond) })
}

// rateSetter sets a rate a second, 0 or more, where 0 is no bound (set
// receives -1, the broker's "none").
func rateSetter(set func(s *serveSettings, n float64)) func(*serveSettings, string) error {
	return func(s *serveSettings, v string) error {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return err
		}
		if n == 0 {
			n = -1
		}
		set(s, n)
		return nil
	}
}

// boolSetter sets a config of true or false.
func boolSetter(set func(s *serveSettings, b bool)) func(*serveSettings, string) error {
	return func(s *serveSettings, v string) error {
		set(s, v == "true")
		return nil
	}
}

// serveSetters apply the broker configs serve takes, by name: package
// config's table defines each (its type, bounds, values, default and doc
// line), and its Check has passed before the setter runs. The configs
// that are topic defaults (config.Def.Topic) set the default topic
// config, scaled, and have no entry here.
var serveSetters = map[string]func(s *serveSettings, v string) error{
	"listeners": func(s *serveSettings, v string) error {
		if _, err := parseListeners(v, nil); err != nil {
			return err
		}
		s.listener = v
		return nil
	},
	"listener.security.protocol.map": func(s *serveSettings, v string) error {
		m, err := parseProtocolMap(v)
		s.protocols = m
		return err
	},
	"advertised.listeners": func(s *serveSettings, v string) error {
		ls, err := parseListeners(v, nil)
		if err != nil {
			return err
		}
		s.advertised = map[string]string{}
		for _, l := range ls {
			s.advertised[l.name] = l.addr
		}
		return nil
	},
	"ssl.certificate.location": func(s *serveSettings, v string) error {
		s.tls.CertFile = v
		return nil
	},
	"ssl.key.location": func(s *serveSettings, v string) error {
		s.tls.KeyFile = v
		return nil
	},
	"ssl.ca.location": func(s *serveSettings, v string) error {
		s.tls.CAFile = v
		return nil
	},
	"ssl.client.auth": func(s *serveSettings, v string) error {
		switch v {
		case "none", "requested", "required":
			s.tls.ClientAuth = v
			return nil
		}
		return fmt.Errorf("%q: none, requested or required", v)
	},
	"sasl.enabled.mechanisms": func(s *serveSettings, v string) error {
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
	},
	"connections.max.reauth.ms": intSetter(func(s *serveSettings, n int64) {
		s.broker.ReauthInterval = time.Duration(n) * time.Millisecond
	}),
	"connection.failed.authentication.delay.ms": intSetter(func(s *serveSettings, n int64) {
		s.broker.FailedAuthDelay = time.Duration(n) * time.Millisecond
		if n == 0 {
			s.broker.FailedAuthDelay = -1
		}
	}),
	"ssl.principal.mapping.rules": func(s *serveSettings, v string) error {
		r, err := auth.ParsePrincipalRules(v)
		s.broker.PrincipalRules = r
		return err
	},
	"seglog.failed.authentication.max.rate": rateSetter(func(s *serveSettings, n float64) {
		s.broker.MaxFailedAuthRate = n
	}),
	"seglog.auto.create.partitions.max.rate": rateSetter(func(s *serveSettings, n float64) {
		s.broker.AutoCreateMaxRate = n
	}),
	"seglog.auto.create.max.topics.per.request": intSetter(func(s *serveSettings, n int64) {
		s.broker.AutoCreateMaxTopicsPerRequest = int(n)
	}),
	"authorizer.class.name": func(s *serveSettings, v string) error {
		switch v {
		case "":
			s.broker.Authorizer = false
		case "org.apache.kafka.metadata.authorizer.StandardAuthorizer", "kafka.security.authorizer.AclAuthorizer", "seglog":
			s.broker.Authorizer = true
		default:
			return fmt.Errorf("%q: seglog's authorizer is Kafka's ACL model: StandardAuthorizer, AclAuthorizer or seglog", v)
		}
		return nil
	},
	"super.users": func(s *serveSettings, v string) error {
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
	},
	"allow.everyone.if.no.acl.found": boolSetter(func(s *serveSettings, b bool) {
		s.broker.AllowEveryoneIfNoACL = b
	}),
	"log.dirs": func(s *serveSettings, v string) error {
		if strings.Contains(v, ",") {
			return fmt.Errorf("one data directory for now")
		}
		s.dataDir = v
		return nil
	},
	"log.dir": func(s *serveSettings, v string) error {
		if s.dataDir == "" {
			s.dataDir = v
		}
		return nil
	},
	"node.id": intSetter(func(s *serveSettings, n int64) {
		s.manager.NodeID, s.nodeIDSet = int32(n), true
	}),
	"broker.id": intSetter(func(s *serveSettings, n int64) {
		s.manager.NodeID, s.nodeIDSet = int32(n), true
	}),
	"seglog.etcd.endpoints": func(s *serveSettings, v string) error {
		s.cluster.Endpoints = nil
		for _, e := range strings.Split(v, ",") {
			if e = strings.TrimSpace(e); e != "" {
				s.cluster.Endpoints = append(s.cluster.Endpoints, e)
			}
		}
		return nil
	},
	"seglog.etcd.prefix": func(s *serveSettings, v string) error {
		s.cluster.Prefix = v
		return nil
	},
	"seglog.etcd.ssl.ca.location": func(s *serveSettings, v string) error {
		s.cluster.EtcdTLS.CAFile = v
		return nil
	},
	"seglog.etcd.ssl.certificate.location": func(s *serveSettings, v string) error {
		s.cluster.EtcdTLS.CertFile = v
		return nil
	},
	"seglog.etcd.ssl.key.location": func(s *serveSettings, v string) error {
		s.cluster.EtcdTLS.KeyFile = v
		return nil
	},
	"seglog.etcd.username": func(s *serveSettings, v string) error {
		s.cluster.EtcdUsername = v
		return nil
	},
	"seglog.etcd.password.file": func(s *serveSettings, v string) error {
		var err error
		s.cluster.EtcdPassword, err = passwordFromFile(v)
		return err
	},
	"sasl.mechanism.inter.broker.protocol": func(s *serveSettings, v string) error {
		s.cluster.InterBrokerSASL.Mechanism = v
		return nil
	},
	"seglog.inter.broker.sasl.username": func(s *serveSettings, v string) error {
		s.cluster.InterBrokerSASL.Username = v
		return nil
	},
	"seglog.inter.broker.sasl.password.file": func(s *serveSettings, v string) error {
		var err error
		s.cluster.InterBrokerSASL.Password, err = passwordFromFile(v)
		return err
	},
	"broker.rack": func(s *serveSettings, v string) error {
		s.cluster.Rack = v
		return nil
	},
	"inter.broker.listener.name": func(s *serveSettings, v string) error {
		s.cluster.InterBrokerListener = v
		return nil
	},
	"default.replication.factor": intSetter(func(s *serveSettings, n int64) {
		s.cluster.DefaultReplicationFactor = int16(n)
	}),
	"offsets.topic.replication.factor": intSetter(func(s *serveSettings, n int64) {
		s.cluster.OffsetsReplicationFactor = int16(n)
	}),
	"transaction.state.log.replication.factor": intSetter(func(s *serveSettings, n int64) {
		s.cluster.TransactionsReplicationFactor = int16(n)
	}),
	"transaction.state.log.min.isr": intSetter(func(s *serveSettings, n int64) {
		s.cluster.TransactionsMinISR = int16(n)
	}),
	"min.insync.replicas": intSetter(func(s *serveSettings, n int64) {
		s.cluster.MinInsyncReplicas = int(n)
	}),
	"replica.lag.time.max.ms": msSetter(func(s *serveSettings, d time.Duration) {
		s.cluster.LagTime = d
	}),
	"broker.session.timeout.ms": msSetter(func(s *serveSettings, d time.Duration) {
		s.cluster.SessionTimeout = d
	}),
	"broker.heartbeat.interval.ms": msSetter(func(s *serveSettings, d time.Duration) {
		s.cluster.HeartbeatInterval = d
	}),
	"unclean.leader.election.enable": boolSetter(func(s *serveSettings, b bool) {
		s.cluster.UncleanLeaderElection = b
	}),
	"replica.selector.class": func(s *serveSettings, v string) error {
		switch v {
		case "org.apache.kafka.common.replica.RackAwareReplicaSelector":
			s.cluster.RackAwareReplicaSelector = true
		case "", "org.apache.kafka.common.replica.LeaderSelector":
			s.cluster.RackAwareReplicaSelector = false
		default:
			return fmt.Errorf("replica.selector.class=%s: org.apache.kafka.common.replica.RackAwareReplicaSelector or org.apache.kafka.common.replica.LeaderSelector", v)
		}
		return nil
	},
	"auto.leader.rebalance.enable": boolSetter(func(s *serveSettings, b bool) {
		s.cluster.NoAutoLeaderRebalance = !b
	}),
	"leader.imbalance.check.interval.seconds": intSetter(func(s *serveSettings, n int64) {
		s.cluster.LeaderImbalanceCheckInterval = time.Duration(n) * time.Second
	}),
	"leader.imbalance.per.broker.percentage": intSetter(func(s *serveSettings, n int64) {
		s.cluster.LeaderImbalancePercentage = int(n)
	}),
	"replica.fetch.max.bytes": intSetter(func(s *serveSettings, n int64) {
		s.cluster.FetchMaxBytes = int32(n)
	}),
	"replica.fetch.wait.max.ms": msSetter(func(s *serveSettings, d time.Duration) {
		s.cluster.FetchWait = d
	}),
	"replica.fetch.backoff.ms": msSetter(func(s *serveSettings, d time.Duration) {
		s.cluster.FetchBackoff = d
	}),
	"num.replica.fetchers": intSetter(func(s *serveSettings, n int64) {
		s.cluster.ReplicaFetchers = int(n)
	}),
	"num.partitions": intSetter(func(s *serveSettings, n int64) {
		s.broker.NumPartitions = int32(n)
	}),
	"seglog.client.telemetry.enable": boolSetter(func(s *serveSettings, b bool) {
		s.broker.NoClientTelemetry = !b
	}),
	"auto.create.topics.enable": boolSetter(func(s *serveSettings, b bool) {
		s.broker.NoAutoCreate = !b
	}),
	"queued.max.request.bytes": intSetter(func(s *serveSettings, n int64) {
		s.broker.QueuedMaxRequestBytes = n
	}),
	"fetch.max.bytes": intSetter(func(s *serveSettings, n int64) {
		s.broker.FetchMaxBytes = int32(n)
	}),
	"socket.request.max.bytes": intSetter(func(s *serveSettings, n int64) {
		s.broker.MaxRequestBytes = int32(n)
	}),
	"connections.max.idle.ms": msSetter(func(s *serveSettings, d time.Duration) {
		s.broker.IdleTimeout = d
	}),
	"max.connections": intSetter(func(s *serveSettings, n int64) {
		s.broker.MaxConnections = int(n)
	}),
	"max.incremental.fetch.session.cache.slots": intSetter(func(s *serveSettings, n int64) {
		s.broker.FetchSessionSlots = int(n)
		if n == 0 {
			s.broker.FetchSessionSlots = -1
		}
	}),
	"max.connections.per.ip": intSetter(func(s *serveSettings, n int64) {
		s.broker.MaxConnectionsPerIP = int(n)
	}),
	"max.connections.per.ip.overrides": func(s *serveSettings, v string) error {
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
	},
	"remote.fetch.max.wait.ms": msSetter(func(s *serveSettings, d time.Duration) {
		s.broker.RemoteFetchMaxWait = d
	}),
	"seglog.durable.acks": boolSetter(func(s *serveSettings, b bool) {
		s.broker.DurableAcks = b
	}),
	"log.cleaner.enable": boolSetter(func(s *serveSettings, b bool) {
		s.manager.Cleaner.Disable = !b
	}),
	"log.cleaner.threads": intSetter(func(s *serveSettings, n int64) {
		s.manager.Cleaner.Threads = int(n)
	}),
	"log.cleaner.dedupe.buffer.size": intSetter(func(s *serveSettings, n int64) {
		s.manager.Cleaner.DedupeBufferBytes = n
	}),
	"log.cleaner.io.max.bytes.per.second": func(s *serveSettings, v string) error {
		r, err := strconv.ParseFloat(v, 64)
		if err != nil || r <= 0 || math.IsNaN(r) {
			return fmt.Errorf("not a positive number")
		}
		s.manager.Cleaner.IOMaxBytesPerSecond = r
		return nil
	},
	"log.cleaner.backoff.ms": msSetter(func(s *serveSettings, d time.Duration) {
		s.manager.Cleaner.Backoff = d
	}),
	"log.retention.check.interval.ms": msSetter(func(s *serveSettings, d time.Duration) {
		s.manager.RetentionCheckInterval = d
	}),
	"log.flush.offset.checkpoint.interval.ms": msSetter(func(s *serveSettings, d time.Duration) {
		s.manager.CheckpointInterval = d
	}),
	"log.flush.scheduler.interval.ms": msSetter(func(s *serveSettings, d time.Duration) {
		s.manager.FlushCheckInterval = d
	}),
	"remote.log.manager.task.interval.ms": msSetter(func(s *serveSettings, d time.Duration) {
		s.tierStep = d
	}),
	"offsets.topic.num.partitions": intSetter(func(s *serveSettings, n int64) {
		s.broker.Groups.Partitions = int32(n)
	}),
	"offsets.topic.segment.bytes": intSetter(func(s *serveSettings, n int64) {
		s.broker.Groups.SegmentBytes = n
	}),
	"group.initial.rebalance.delay.ms": intSetter(func(s *serveSettings, n int64) {
		s.broker.Groups.InitialRebalanceDelay, s.broker.Groups.NoInitialDelay = time.Duration(n)*time.Millisecond, n == 0
	}),
	"group.min.session.timeout.ms": msSetter(func(s *serveSettings, d time.Duration) {
		s.broker.Groups.MinSessionTimeout = d
	}),
	"group.max.session.timeout.ms": msSetter(func(s *serveSettings, d time.Duration) {
		s.broker.Groups.MaxSessionTimeout = d
	}),
	"group.max.size": intSetter(func(s *serveSettings, n int64) {
		s.broker.Groups.MaxSize = int(n)
	}),
	"group.consumer.session.timeout.ms": msSetter(func(s *serveSettings, d time.Duration) {
		s.broker.Groups.ConsumerSessionTimeout = d
	}),
	"group.consumer.heartbeat.interval.ms": msSetter(func(s *serveSettings, d time.Duration) {
		s.broker.Groups.ConsumerHeartbeatInterval = d
	}),
	"group.consumer.assignors": func(s *serveSettings, v string) error {
		names, err := group.ParseAssignors(v)
		s.broker.Groups.ConsumerAssignors = names
		return err
	},
	"group.consumer.migration.policy": func(s *serveSettings, v string) error {
		switch p := strings.ToLower(v); p {
		case group.MigrationBidirectional, group.MigrationUpgrade, group.MigrationDowngrade, group.MigrationDisabled:
			s.broker.Groups.MigrationPolicy = p
			return nil
		}
		return fmt.Errorf("group.consumer.migration.policy: %q is not bidirectional, upgrade, downgrade or disabled", v)
	},
	"group.consumer.max.size": intSetter(func(s *serveSettings, n int64) {
		s.broker.Groups.ConsumerMaxSize = int(n)
	}),
	"offsets.retention.minutes": intSetter(func(s *serveSettings, n int64) {
		s.broker.Groups.Retention = time.Duration(n) * time.Minute
	}),
	"offsets.retention.check.interval.ms": msSetter(func(s *serveSettings, d time.Duration) {
		s.broker.Groups.RetentionCheckInterval = d
	}),
	"offset.metadata.max.bytes": intSetter(func(s *serveSettings, n int64) {
		s.broker.Groups.MaxMetadataBytes = int(n)
	}),
	"transaction.state.log.num.partitions": intSetter(func(s *serveSettings, n int64) {
		s.broker.Transactions.Partitions = int32(n)
	}),
	"transaction.state.log.segment.bytes": intSetter(func(s *serveSettings, n int64) {
		s.broker.Transactions.SegmentBytes = n
	}),
	"transaction.max.timeout.ms": msSetter(func(s *serveSettings, d time.Duration) {
		s.broker.Transactions.MaxTimeout = d
	}),
	"transaction.abort.timed.out.transaction.cleanup.interval.ms": msSetter(func(s *serveSettings, d time.Duration) {
		s.broker.Transactions.AbortInterval = d
	}),
	"log.level": func(s *serveSettings, v string) error {
		return s.level.UnmarshalText([]byte(v))
	},
}

// applyServeConfig sets one config; unknown is false for a name serve
// does not take (not in package config's table). The table's check runs
// first; a topic default sets the default topic config.
func applyServeConfig(s *serveSettings, k, v string) (known bool, err error) {
	d, ok := config.BrokerDef(k)
	if !ok {
		return false, nil
	}
	v = strings.TrimSpace(v)
	switch {
	case d.RunTime:
		return true, fmt.Errorf("%s: %w", k, errRunTimeOnly)
	case d.Topic != "":
		syn, _ := tablet.BrokerSynonymOf(k)
		err = syn.SetFrom(&s.topic, v)
	default:
		if err = d.Check(v); err == nil {
			err = serveSetters[k](s, v)
		}
	}
	if err != nil {
		return true, fmt.Errorf("%s=%s: %w", k, v, err)
	}
	if s.broker.Configs == nil {
		s.broker.Configs = map[string]string{}
	}
	s.broker.Configs[k] = v // DescribeConfigs lists what the operator set
	return true, nil
}

// errRunTimeOnly is a config set at run time only (AlterConfigs): serve
// refuses it in --config, and ignores it in a config file (logged) as it
// does Kafka's configs it does not take.
var errRunTimeOnly = errors.New("set at run time only: seglog configs --entity-type brokers --alter")

// serveConfigNames are the configs serve takes.
func serveConfigNames() []string {
	var names []string
	for _, d := range config.Broker {
		if !d.RunTime {
			names = append(names, d.Name)
		}
	}
	return names
}

// nearestConfig is the config serve takes that k is most likely a typo
// of, else "".
func nearestConfig(k string) string { return nearest.Name(k, serveConfigNames()) }

// unknownConfig is the error of a config serve does not take.
func unknownConfig(k string) error {
	if near := nearestConfig(k); near != "" {
		return fmt.Errorf("unknown broker config %q: did you mean %q? (seglog serve --help lists them)", k, near)
	}
	return fmt.Errorf("unknown broker config %q (seglog serve --help lists the ones it takes)", k)
}

// serveConfigHelp is the help's table of configs (docs/configuration.md
// has them whole).
func serveConfigHelp() string {
	var sb strings.Builder
	for _, d := range config.Broker {
		if d.RunTime {
			continue
		}
		doc := d.Doc
		if d.Topic != "" {
			doc = "the default " + d.Topic
		}
		if d.Default != "" {
			doc += " (default " + d.Default + ")"
		}
		fmt.Fprintf(&sb, "  %-40s %s\n", d.Name, doc)
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
					if err != nil && !errors.Is(err, errRunTimeOnly) {
						return fmt.Errorf("%s: %w", configFile, err)
					}
					switch {
					case err != nil:
						ignored = append(ignored, k)
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
