package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/seglog/seglog/server"
)

// newPlaygroundCmd is make cluster's command: a cluster to try on one
// machine, everything in this process on loopback.
func newPlaygroundCmd() *cobra.Command {
	var (
		dir     string
		brokers int
		members int
	)
	cmd := &cobra.Command{
		Use:   "playground [--dir D] [--brokers 3] [--etcd-members 3]",
		Short: "Run a cluster on this machine to try: etcd members and brokers in one process, on loopback",
		Long: `playground runs a whole cluster in this process, on loopback: --etcd-members
etcd members (etcd's own server, embedded) and --brokers brokers over them,
each with its data directory under --dir, which must be new or empty (the
default is a temporary directory, removed when the playground stops). It prints the bootstrap servers and each broker's web console,
and stops everything on Ctrl-C (SIGINT) or SIGTERM. Topics are created with
replication factor 3 (or the brokers' count) and min.insync.replicas 2 (or 1
with one broker). For a real deployment run seglog serve on each machine.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if brokers < 1 || members < 1 {
				return errors.New("--brokers and --etcd-members must be 1 or more")
			}
			if dir == "" {
				tmp, err := os.MkdirTemp("", "seglog-playground-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(tmp)
				dir = tmp
			} else if names, err := os.ReadDir(dir); err == nil && len(names) > 0 {
				return fmt.Errorf("--dir %s is not empty: a playground starts new", dir)
			}
			ctx, stop := signal.NotifyContext(ctxOf(cmd), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runPlayground(ctx, cmd, dir, brokers, members)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "where the members' and brokers' data directories go (new or empty; default a temporary directory, removed at the end)")
	cmd.Flags().IntVar(&brokers, "brokers", 3, "how many brokers")
	cmd.Flags().IntVar(&members, "etcd-members", 3, "how many etcd members")
	return cmd
}

func runPlayground(ctx context.Context, cmd *cobra.Command, dir string, brokers, members int) error {
	out := cmd.OutOrStdout()
	log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	etcds, endpoints, err := startEtcdMembers(dir, members)
	for _, e := range etcds {
		defer e.Close()
	}
	if err != nil {
		return err
	}
	var servers []*server.Server
	done := make(chan error, brokers)
	defer func() {
		for _, s := range servers {
			_ = s.Close()
		}
	}()
	for id := 1; id <= brokers; id++ {
		cfg := server.Config{DataDir: filepath.Join(dir, fmt.Sprintf("broker%d", id)), Logger: log, MetricsAddr: "127.0.0.1:0",
			Listeners: []server.Listener{{Name: "PLAINTEXT", Address: "127.0.0.1:0"}},
			Cluster: &server.ClusterConfig{Endpoints: endpoints, DefaultReplicationFactor: int16(min(brokers, 3)),
				MinInsyncReplicas: max(min(brokers-1, 2), 1), ShutdownTimeout: 5 * time.Second}}
		cfg.Manager.NodeID = int32(id)
		cfg.Manager.Tablet.Logger = log
		s, err := server.New(ctx, cfg)
		if err != nil {
			return fmt.Errorf("broker %d: %w", id, err)
		}
		servers = append(servers, s)
		go func() { done <- s.Run(ctx) }()
	}
	var seeds []string
	for _, s := range servers {
		seeds = append(seeds, s.Listeners()[0].Addr.String())
	}
	fmt.Fprintf(out, "a cluster of %d brokers over %d etcd members (data in %s)\n", brokers, members, dir)
	fmt.Fprintf(out, "bootstrap servers: %s\n", strings.Join(seeds, ","))
	for i, s := range servers {
		fmt.Fprintf(out, "broker %d: %s, console http://%s/\n", i+1, seeds[i], s.MetricsAddr())
	}
	fmt.Fprintf(out, "try: kcat -b %s -L   (Ctrl-C stops the cluster)\n", seeds[0])
	select {
	case <-ctx.Done():
	case err := <-done:
		return err
	}
	fmt.Fprintln(out, "stopping")
	return nil
}

// startEtcdMembers starts n etcd members forming one cluster, each on
// loopback ports with its data in dir/etcdN, and returns their client
// endpoints once they serve.
func startEtcdMembers(dir string, n int) ([]*embed.Etcd, []string, error) {
	free := func() (url.URL, error) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return url.URL{}, err
		}
		defer ln.Close()
		return url.URL{Scheme: "http", Host: ln.Addr().String()}, nil
	}
	type member struct {
		name         string
		client, peer url.URL
	}
	var ms []member
	var initial []string
	for i := range n {
		c, err := free()
		if err != nil {
			return nil, nil, err
		}
		p, err := free()
		if err != nil {
			return nil, nil, err
		}
		m := member{fmt.Sprintf("etcd%d", i+1), c, p}
		ms = append(ms, m)
		initial = append(initial, m.name+"="+p.String())
	}
	var out []*embed.Etcd
	var endpoints []string
	for _, m := range ms {
		cfg := embed.NewConfig()
		cfg.Name, cfg.Dir = m.name, filepath.Join(dir, m.name)
		cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{m.client}, []url.URL{m.client}
		cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{m.peer}, []url.URL{m.peer}
		cfg.InitialCluster = strings.Join(initial, ",")
		cfg.InitialClusterToken = "seglog-playground"
		cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
		e, err := embed.StartEtcd(cfg)
		if err != nil {
			return out, nil, fmt.Errorf("etcd member %s: %w", m.name, err)
		}
		out = append(out, e)
		endpoints = append(endpoints, m.client.String())
	}
	for _, e := range out {
		select {
		case <-e.Server.ReadyNotify():
		case <-time.After(time.Minute):
			return out, nil, errors.New("etcd did not serve in a minute")
		}
	}
	return out, endpoints, nil
}
