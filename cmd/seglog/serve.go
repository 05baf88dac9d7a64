package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/seglog/seglog/broker"
	"github.com/seglog/seglog/tablet"
	"github.com/seglog/seglog/vfs"
)

// serveKeys are the broker configs serve takes, under Kafka's names.
var serveKeys = []string{"listeners", "advertised.listeners", "node.id", "num.partitions", "auto.create.topics.enable",
	"socket.request.max.bytes", "connections.max.idle.ms", "max.connections", "seglog.durable.acks"}

func newServeCmd() *cobra.Command {
	var (
		dataDir     string
		configs     []string
		metricsAddr string
	)
	cmd := &cobra.Command{
		Use:   "serve --data-dir D [--config key=value]...",
		Short: "Serve the Kafka protocol on a data directory (a single-node broker)",
		Long: `serve opens the data directory as a writer and serves the Kafka protocol, so
that unmodified Kafka clients (kcat, franz-go, sarama, kafkajs, the Python
client) produce to it and consume from it: ApiVersions, Metadata (topics
auto-created), Produce (acks 0, 1, -1; idempotent producers), Fetch (long
polling woken by appends; read_uncommitted and read_committed), ListOffsets,
InitProducerId for idempotent producers.

--config takes Kafka's broker config names: listeners (default
PLAINTEXT://127.0.0.1:9092: loopback only unless told otherwise),
advertised.listeners, node.id, num.partitions (1), auto.create.topics.enable
(true), socket.request.max.bytes (104857600), connections.max.idle.ms
(600000), max.connections (none), and seglog.durable.acks (false: with true
an acks=-1 produce is answered only after the fsync that covers it, beyond
Kafka). --metrics-addr serves the engine's Prometheus collectors on /metrics.

SIGTERM or SIGINT stops accepting, answers the requests in flight and closes
the data directory cleanly.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			cfg := map[string]string{"listeners": "PLAINTEXT://127.0.0.1:9092"}
			for _, kv := range configs {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || !contains(serveKeys, k) {
					return fmt.Errorf("--config %q: the broker configs are %s", kv, strings.Join(serveKeys, ", "))
				}
				cfg[k] = v
			}
			addr, err := listenerAddr(cfg["listeners"])
			if err != nil {
				return err
			}
			logger := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelInfo}))
			opts := broker.Options{Logger: logger}
			for k, v := range cfg {
				if err := setServeConfig(&opts, k, v); err != nil {
					return err
				}
			}
			if dataDir == "" {
				return errors.New("--data-dir is required")
			}
			m, err := tablet.OpenManager(vfs.OS, dataDir, tablet.ManagerOptions{NodeID: opts.NodeID,
				Tablet: tablet.Options{Logger: logger}})
			if err != nil {
				return err
			}
			printLoadChanges(cmd.ErrOrStderr(), m, false)
			defer func() { err = errors.Join(err, m.Close()) }()
			b, err := broker.New(m, opts)
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return err
			}
			if metricsAddr != "" {
				// The engine's collectors on /metrics (Prometheus).
				reg := prometheus.NewRegistry()
				if err := reg.Register(m.Collector()); err != nil {
					return err
				}
				mln, err := net.Listen("tcp", metricsAddr)
				if err != nil {
					return err
				}
				mux := http.NewServeMux()
				mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
				srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
				go func() { _ = srv.Serve(mln) }()
				defer srv.Close()
				fmt.Fprintf(cmd.OutOrStdout(), "metrics on http://%s/metrics\n", mln.Addr())
			}
			sig := make(chan os.Signal, 1)
			signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
			defer signal.Stop(sig)
			served := make(chan error, 1)
			go func() { served <- b.Serve(ln) }()
			fmt.Fprintf(cmd.OutOrStdout(), "serving the Kafka protocol on %s (data directory %s)\n", ln.Addr(), dataDir)
			select {
			case s := <-sig:
				logger.Info("shutting down", "signal", s.String())
				err = b.Close()
				<-served
				return err
			case err := <-served:
				return errors.Join(err, b.Close())
			}
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", "", "the data directory (created if missing)")
	cmd.Flags().StringArrayVar(&configs, "config", nil, "a broker config as key=value, repeatable: "+strings.Join(serveKeys, ", "))
	cmd.Flags().StringVar(&metricsAddr, "metrics-addr", "", "serve the Prometheus collectors on http://ADDR/metrics (loopback unless told otherwise, e.g. 127.0.0.1:9308)")
	return cmd
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// listenerAddr is the host:port of a Kafka listener ("PLAINTEXT://h:p";
// one listener for now).
func listenerAddr(listeners string) (string, error) {
	if strings.Contains(listeners, ",") {
		return "", fmt.Errorf("listeners=%q: one listener for now", listeners)
	}
	u, err := url.Parse(listeners)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("listeners=%q is not NAME://host:port", listeners)
	}
	if !strings.EqualFold(u.Scheme, "PLAINTEXT") {
		return "", fmt.Errorf("listeners=%q: only PLAINTEXT is served for now (TLS and SASL come with issue 22)", listeners)
	}
	return u.Host, nil
}

func setServeConfig(o *broker.Options, k, v string) error {
	bad := func(err error) error { return fmt.Errorf("--config %s=%s: %w", k, v, err) }
	switch k {
	case "listeners":
		return nil
	case "advertised.listeners":
		addr, err := listenerAddr(v)
		if err != nil {
			return bad(err)
		}
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return bad(err)
		}
		p, err := strconv.Atoi(port)
		if err != nil {
			return bad(err)
		}
		o.AdvertisedHost, o.AdvertisedPort = host, int32(p)
	case "max.connections":
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return bad(fmt.Errorf("not a positive number"))
		}
		o.MaxConnections = n
	case "node.id", "num.partitions", "socket.request.max.bytes":
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 0 {
			return bad(fmt.Errorf("not a non-negative number"))
		}
		switch k {
		case "node.id":
			o.NodeID = int32(n)
		case "num.partitions":
			o.NumPartitions = int32(n)
		default:
			o.MaxRequestBytes = int32(n)
		}
	case "connections.max.idle.ms":
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return bad(fmt.Errorf("not a positive number"))
		}
		o.IdleTimeout = time.Duration(n) * time.Millisecond
	case "auto.create.topics.enable", "seglog.durable.acks":
		if v != "true" && v != "false" {
			return bad(fmt.Errorf("not true or false"))
		}
		if k == "auto.create.topics.enable" {
			o.NoAutoCreate = v == "false"
		} else {
			o.DurableAcks = v == "true"
		}
	}
	return nil
}
