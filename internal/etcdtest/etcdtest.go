// Package etcdtest runs etcd members in the test's process, on loopback,
// for the cluster's tests: a real etcd (go.etcd.io/etcd/server/v3/embed),
// with its data in the test's temporary directory.
package etcdtest

import (
	"context"
	"fmt"
	"net/url"
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/seglog/seglog/internal/etcdbin"
)

// Cluster is a set of etcd members started by Start.
type Cluster struct {
	t       testing.TB
	secure  Secure
	members []*member
	// external is the etcd process of StartBinary (nil in process).
	external *exec.Cmd
}

type member struct {
	name         string
	dir          string
	client, peer url.URL
	e            *embed.Etcd
}

// Start starts n members forming one etcd cluster and waits until it
// serves; they are closed when the test ends. The members' ports are
// free when asked for; one taken meanwhile (by a test running beside)
// makes it start again on others, a few times.
func Start(t testing.TB, n int) *Cluster { return StartSecure(t, n, Secure{}) }

// Secure is a secured etcd: clients over TLS with a certificate of the CA
// (CertFile and KeyFile are the members' own), and with a user and
// password when User is set (etcd's authentication on, User its root).
type Secure struct {
	CertFile, KeyFile, CAFile string
	User, Password            string
}

// StartSecure is Start with the members secured as s says.
func StartSecure(t testing.TB, n int, s Secure) *Cluster {
	t.Helper()
	var err error
	for range 5 {
		var c *Cluster
		if c, err = start(t, n, s); err == nil {
			t.Cleanup(func() {
				for i := range c.members {
					c.Stop(i)
				}
			})
			return c
		}
		if !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	t.Fatal(err)
	return nil
}

func start(t testing.TB, n int, s Secure) (*Cluster, error) {
	c := &Cluster{t: t, secure: s}
	var initial []string
	for i := range n {
		m := &member{name: fmt.Sprintf("m%d", i), dir: t.TempDir(), client: freeURL(t), peer: freeURL(t)}
		if s.CertFile != "" {
			m.client.Scheme = "https"
		}
		c.members = append(c.members, m)
		initial = append(initial, m.name+"="+m.peer.String())
	}
	errs := make(chan error, n)
	for _, m := range c.members {
		go func() { errs <- c.start(m, strings.Join(initial, ","), embed.ClusterStateFlagNew) }()
	}
	var first error
	for range n {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first == nil && s.User != "" {
		first = c.enableAuth()
	}
	if first != nil {
		for i := range c.members {
			c.Stop(i)
		}
		return nil, first
	}
	return c, nil
}

// enableAuth makes the user etcd's root and turns authentication on.
func (c *Cluster) enableAuth() error {
	cfg := clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
	if c.secure.CertFile != "" {
		info := transport.TLSInfo{CertFile: c.secure.CertFile, KeyFile: c.secure.KeyFile, TrustedCAFile: c.secure.CAFile}
		tc, err := info.ClientConfig()
		if err != nil {
			return err
		}
		cfg.TLS = tc
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := cli.UserAdd(ctx, c.secure.User, c.secure.Password); err != nil {
		return err
	}
	if _, err := cli.RoleAdd(ctx, "root"); err != nil {
		return err
	}
	if _, err := cli.UserGrantRole(ctx, c.secure.User, "root"); err != nil {
		return err
	}
	_, err = cli.AuthEnable(ctx)
	return err
}

// freeURL is an http URL on a loopback port free when it was asked for.
func freeURL(t testing.TB) url.URL { return etcdbin.FreeURL(t) }

func (c *Cluster) start(m *member, initial, state string) error {
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir = m.name, m.dir
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{m.client}, []url.URL{m.client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{m.peer}, []url.URL{m.peer}
	cfg.InitialCluster, cfg.ClusterState = initial, state
	cfg.BcryptCost = 4 // (bcrypt's least: a test's logins need no strength, and the race detector slows each one)
	if s := c.secure; s.CertFile != "" {
		cfg.ClientTLSInfo = transport.TLSInfo{CertFile: s.CertFile, KeyFile: s.KeyFile, TrustedCAFile: s.CAFile, ClientCertAuth: true}
	}
	cfg.InitialClusterToken = "seglog-test"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop()) // (its close logs errors that are none)
	// Tests lose nothing by not syncing etcd's files (a member's crash is
	// Stop, which closes it), and gain its speed.
	cfg.UnsafeNoFsync = true
	cfg.TickMs, cfg.ElectionMs = 50, 500
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("etcdtest: starting %s: %w", m.name, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return fmt.Errorf("etcdtest: %s: %w", m.name, err)
	case <-time.After(time.Minute):
		e.Close()
		return fmt.Errorf("etcdtest: %s did not become ready in a minute", m.name)
	}
	m.e = e
	return nil
}

// Endpoints are the members' client URLs.
func (c *Cluster) Endpoints() []string {
	var out []string
	for _, m := range c.members {
		out = append(out, m.client.String())
	}
	return out
}

// Stop closes member i (a no-op if it is stopped).
func (c *Cluster) Stop(i int) {
	if c.external != nil {
		_ = c.external.Process.Kill()
		return
	}
	if m := c.members[i]; m.e != nil {
		m.e.Close()
		m.e = nil
	}
}

// Restart starts member i again on its data and ports.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	m := c.members[i]
	if m.e != nil {
		return
	}
	var initial []string
	for _, o := range c.members {
		initial = append(initial, o.name+"="+o.peer.String())
	}
	if err := c.start(m, strings.Join(initial, ","), embed.ClusterStateFlagExisting); err != nil {
		c.t.Fatal(err)
	}
}
