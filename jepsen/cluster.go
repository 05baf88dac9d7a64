package jepsen

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/seglog/seglog/internal/faultproxy"
)

// Cluster is the processes under test: etcd members and seglog brokers,
// each on fixed loopback ports (a process comes back where it was), with
// its log appended to a file of its own in the run's directory.
type Cluster struct {
	opts Options
	etcd []*etcdMember
	brk  []*brokerProc // brk[i] is node i+1
}

type etcdMember struct {
	name, dir    string
	client, peer string     // host:port
	mu           sync.Mutex // guards cmd and stopped
	cmd          *exec.Cmd
	stopped      bool
}

type brokerProc struct {
	id   int32
	dir  string
	port string
	// replPort is its inter-broker listener's (REPL); repl the proxy in
	// front of it that the others fetch through, etcd the proxies it
	// reaches each etcd member through: the network faults cut or slow
	// them (nil without Options.TB).
	replPort string
	repl     *faultproxy.Proxy
	etcd     []*faultproxy.Proxy
	mu       sync.Mutex // guards cmd, exited and stopped
	cmd      *exec.Cmd
	// exited is closed when the process ends.
	exited  chan struct{}
	stopped bool
}

// freePort is a loopback port free when asked for.
func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	_, port, err := net.SplitHostPort(l.Addr().String())
	return port, err
}

// startCluster starts the etcd members, then the brokers, and waits until
// every broker listens.
func startCluster(ctx context.Context, opts Options) (*Cluster, error) {
	c := &Cluster{opts: opts}
	var initial []string
	for i := range opts.EtcdMembers {
		cp, err := freePort()
		if err != nil {
			return nil, err
		}
		pp, err := freePort()
		if err != nil {
			return nil, err
		}
		m := &etcdMember{name: fmt.Sprintf("etcd%d", i+1), dir: filepath.Join(opts.Dir, fmt.Sprintf("etcd%d", i+1)),
			client: "127.0.0.1:" + cp, peer: "127.0.0.1:" + pp}
		c.etcd = append(c.etcd, m)
		initial = append(initial, m.name+"=http://"+m.peer)
	}
	for _, m := range c.etcd {
		if err := c.startEtcd(m, strings.Join(initial, ",")); err != nil {
			c.Close()
			return nil, err
		}
	}
	for i := range opts.Brokers {
		port, err := freePort()
		if err != nil {
			c.Close()
			return nil, err
		}
		b := &brokerProc{id: int32(i + 1), dir: filepath.Join(opts.Dir, fmt.Sprintf("broker%d", i+1)), port: port}
		if opts.TB != nil {
			if b.replPort, err = freePort(); err != nil {
				c.Close()
				return nil, err
			}
			b.repl = faultproxy.Start(opts.TB, "127.0.0.1:"+b.replPort)
			for _, m := range c.etcd {
				b.etcd = append(b.etcd, faultproxy.Start(opts.TB, m.client))
			}
		}
		c.brk = append(c.brk, b)
	}
	for _, b := range c.brk {
		err := c.StartBroker(ctx, b.id)
		for try := 0; err != nil && errors.Is(err, errPortTaken) && try < 3; try++ {
			// Its port, free when asked for, was taken before the broker
			// bound it (by a test beside): a first start moves to others.
			if err = c.movePorts(b); err == nil {
				err = c.StartBroker(ctx, b.id)
			}
		}
		if err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// errPortTaken is a broker that ended before it listened because its port
// was taken.
var errPortTaken = errors.New("its port was taken")

// movePorts gives a broker that never ran new ports (its client port, and
// its inter-broker one behind a new proxy).
func (c *Cluster) movePorts(b *brokerProc) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	b.port = port
	if b.repl != nil {
		if b.replPort, err = freePort(); err != nil {
			return err
		}
		b.repl = faultproxy.Start(c.opts.TB, "127.0.0.1:"+b.replPort)
	}
	return nil
}

// logTail is the last lines of a log file (what a broker said before it
// ended).
func logTail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// EtcdEndpoints are the members' client URLs.
func (c *Cluster) EtcdEndpoints() []string {
	var out []string
	for _, m := range c.etcd {
		out = append(out, "http://"+m.client)
	}
	return out
}

// Seeds are the brokers' addresses.
func (c *Cluster) Seeds() []string {
	var out []string
	for _, b := range c.brk {
		out = append(out, "127.0.0.1:"+b.port)
	}
	return out
}

// logFile opens (appending) the log of a process.
func (c *Cluster) logFile(name string) (*os.File, error) {
	return os.OpenFile(filepath.Join(c.opts.Dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
}

func (c *Cluster) startEtcd(m *etcdMember, initial string) error {
	state := "new"
	if _, err := os.Stat(filepath.Join(m.dir, "member")); err == nil {
		state = "existing"
	}
	cmd := exec.Command(c.opts.Etcd, "--name", m.name, "--data-dir", m.dir,
		"--listen-client-urls", "http://"+m.client, "--advertise-client-urls", "http://"+m.client,
		"--listen-peer-urls", "http://"+m.peer, "--initial-advertise-peer-urls", "http://"+m.peer,
		"--initial-cluster", initial, "--initial-cluster-state", state, "--initial-cluster-token", "jepsen",
		"--heartbeat-interval", "100", "--election-timeout", "1000")
	lf, err := c.logFile(m.name)
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		lf.Close()
		return fmt.Errorf("jepsen: starting %s: %w", c.opts.Etcd, err)
	}
	go func() { _ = cmd.Wait(); lf.Close() }()
	m.mu.Lock()
	m.cmd, m.stopped = cmd, false
	m.mu.Unlock()
	return nil
}

// KillEtcd SIGKILLs etcd member i (0-based).
func (c *Cluster) KillEtcd(i int) {
	m := c.etcd[i]
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd != nil {
		_ = m.cmd.Process.Kill()
		m.cmd = nil
	}
}

// RestartEtcd starts a killed member again (on its data).
func (c *Cluster) RestartEtcd(i int) error {
	m := c.etcd[i]
	m.mu.Lock()
	running := m.cmd != nil
	m.mu.Unlock()
	if running {
		return nil
	}
	var initial []string
	for _, o := range c.etcd {
		initial = append(initial, o.name+"=http://"+o.peer)
	}
	return c.startEtcd(m, strings.Join(initial, ","))
}

// PauseEtcd and ResumeEtcd SIGSTOP and SIGCONT member i.
func (c *Cluster) PauseEtcd(i int)  { c.signalEtcd(i, syscall.SIGSTOP) }
func (c *Cluster) ResumeEtcd(i int) { c.signalEtcd(i, syscall.SIGCONT) }

func (c *Cluster) signalEtcd(i int, s syscall.Signal) {
	m := c.etcd[i]
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd != nil {
		_ = m.cmd.Process.Signal(s)
		m.stopped = s == syscall.SIGSTOP
	}
}

// StartBrokerUntilListening starts broker id and returns as soon as its
// port accepts connections — before it has loaded its data and joined the
// cluster, as a client sees a restarted broker come back — and a channel
// that says when it serves (nil) or that it did not.
func (c *Cluster) StartBrokerUntilListening(ctx context.Context, id int32) (<-chan error, error) {
	served := make(chan error, 1)
	go func() { served <- c.StartBroker(ctx, id) }()
	addr := "127.0.0.1:" + c.brk[id-1].port
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			return served, nil
		}
		select {
		case err := <-served:
			served <- err
			return served, err
		case <-ctx.Done():
			return served, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// StartBroker starts broker id (again, on its data directory and port)
// and returns once it serves (it says so once it has joined the cluster).
func (c *Cluster) StartBroker(ctx context.Context, id int32) error {
	b := c.brk[id-1]
	o := c.opts
	endpoints := c.EtcdEndpoints()
	listeners := []string{"--config", "listeners=PLAINTEXT://127.0.0.1:" + b.port}
	if b.repl != nil {
		endpoints = endpoints[:0:0]
		for _, p := range b.etcd {
			endpoints = append(endpoints, "http://"+p.Addr())
		}
		listeners = []string{"--config", "listeners=PLAINTEXT://127.0.0.1:" + b.port + ",REPL://127.0.0.1:" + b.replPort,
			"--config", "advertised.listeners=PLAINTEXT://127.0.0.1:" + b.port + ",REPL://" + b.repl.Addr(),
			"--config", "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,REPL:PLAINTEXT",
			"--config", "inter.broker.listener.name=REPL"}
	}
	args := append([]string{"serve", "--simulated-disk", "--data-dir", b.dir}, listeners...)
	args = append(args,
		"--config", fmt.Sprintf("node.id=%d", id),
		"--config", "seglog.etcd.endpoints="+strings.Join(endpoints, ","),
		"--config", "seglog.etcd.prefix=/jepsen/",
		"--config", "broker.session.timeout.ms="+strconv.Itoa(int(o.SessionTimeout/time.Millisecond)),
		"--config", "broker.heartbeat.interval.ms="+strconv.Itoa(int(o.SessionTimeout/time.Millisecond/6)),
		"--config", fmt.Sprintf("default.replication.factor=%d", o.ReplicationFactor),
		"--config", fmt.Sprintf("min.insync.replicas=%d", o.MinISR),
		"--config", "offsets.topic.num.partitions=3",
		"--config", "transaction.state.log.num.partitions=3",
		"--config", "log.index.size.max.bytes=65536",
		"--config", "log.segment.bytes=4194304",
		"--config", "replica.fetch.wait.max.ms=100",
		"--config", "replica.fetch.backoff.ms=100",
		"--config", "replica.lag.time.max.ms="+strconv.Itoa(int(o.LagTime/time.Millisecond)),
		"--config", "log.level=info",
	)
	cmd := exec.Command(o.Seglog, args...)
	lf, err := c.logFile(fmt.Sprintf("broker%d", id))
	if err != nil {
		return err
	}
	fmt.Fprintf(lf, "=== jepsen: starting broker %d at %s\n", id, time.Now().Format(time.RFC3339Nano))
	cmd.Stderr = lf
	out, err := cmd.StdoutPipe()
	if err != nil {
		lf.Close()
		return err
	}
	if err := cmd.Start(); err != nil {
		lf.Close()
		return fmt.Errorf("jepsen: starting %s: %w", o.Seglog, err)
	}
	exited := make(chan struct{})
	listening := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		said := false
		for sc.Scan() {
			fmt.Fprintln(lf, sc.Text())
			if !said && strings.HasPrefix(sc.Text(), "serving the Kafka protocol on ") {
				said = true
				close(listening)
			}
		}
		_, _ = io.Copy(io.Discard, out)
		_ = cmd.Wait()
		fmt.Fprintf(lf, "=== jepsen: broker %d ended: %v\n", id, cmd.ProcessState)
		lf.Close()
		close(exited)
	}()
	b.mu.Lock()
	b.cmd, b.exited, b.stopped = cmd, exited, false
	b.mu.Unlock()
	select {
	case <-listening:
		return nil
	case <-exited:
		path := filepath.Join(o.Dir, fmt.Sprintf("broker%d.log", id))
		tail := logTail(path, 8)
		err := fmt.Errorf("jepsen: broker %d ended before it listened (its log: %s):\n%s", id, path, tail)
		if strings.Contains(tail, "address already in use") {
			err = fmt.Errorf("%w: %w", errPortTaken, err)
		}
		return err
	case <-ctx.Done():
		return fmt.Errorf("jepsen: broker %d did not listen: %w", id, ctx.Err())
	}
}

// Running reports whether broker id's process is running (stopped or
// not).
func (c *Cluster) Running(id int32) bool {
	b := c.brk[id-1]
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cmd != nil
}

// Crash ends broker id as a fault does: a power cut (only what fsync made
// durable survives) or a process crash (the page cache survives), and
// waits until the process is gone.
func (c *Cluster) Crash(id int32, powerCut bool) {
	b := c.brk[id-1]
	b.mu.Lock()
	cmd, exited := b.cmd, b.exited
	if cmd == nil {
		b.mu.Unlock()
		return
	}
	if b.stopped {
		_ = cmd.Process.Signal(syscall.SIGCONT) // (its handler must run)
	}
	sig := syscall.SIGUSR2
	if powerCut {
		sig = syscall.SIGUSR1
	}
	_ = cmd.Process.Signal(sig)
	b.cmd, b.stopped = nil, false
	b.mu.Unlock()
	<-exited
}

// Pause and Resume SIGSTOP and SIGCONT broker id.
func (c *Cluster) Pause(id int32)  { c.signalBroker(id, syscall.SIGSTOP) }
func (c *Cluster) Resume(id int32) { c.signalBroker(id, syscall.SIGCONT) }

func (c *Cluster) signalBroker(id int32, s syscall.Signal) {
	b := c.brk[id-1]
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd != nil {
		_ = b.cmd.Process.Signal(s)
		b.stopped = s == syscall.SIGSTOP
	}
}

// CutFromEtcd cuts (or heals) broker id's links to every etcd member: its
// session expires while it runs, and it must act as no leader.
func (c *Cluster) CutFromEtcd(id int32, cut bool) {
	for _, p := range c.brk[id-1].etcd {
		if cut {
			p.Cut()
		} else {
			p.Heal()
		}
	}
}

// CutReplication cuts (or heals) the link the other brokers fetch from
// broker id through.
func (c *Cluster) CutReplication(id int32, cut bool) {
	if p := c.brk[id-1].repl; p != nil {
		if cut {
			p.Cut()
		} else {
			p.Heal()
		}
	}
}

// SlowLinks delays every broker's links, to etcd and to the other
// brokers, by d (0: none).
func (c *Cluster) SlowLinks(d time.Duration) {
	for _, b := range c.brk {
		for _, p := range append([]*faultproxy.Proxy{b.repl}, b.etcd...) {
			if p != nil {
				p.Delay(d)
			}
		}
	}
}

// Networked reports whether the brokers' links go through fault proxies.
func (c *Cluster) Networked() bool { return len(c.brk) > 0 && c.brk[0].repl != nil }

// Close stops every process: brokers with SIGTERM (a clean stop writes
// their disks back), then etcd.
func (c *Cluster) Close() error {
	var errs []error
	for _, b := range c.brk {
		b.mu.Lock()
		cmd, exited := b.cmd, b.exited
		if cmd != nil && b.stopped {
			_ = cmd.Process.Signal(syscall.SIGCONT)
		}
		b.cmd = nil
		b.mu.Unlock()
		if cmd == nil {
			continue
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			errs = append(errs, fmt.Errorf("jepsen: broker %d did not stop in 30 s", b.id))
		}
	}
	for i, m := range c.etcd {
		c.ResumeEtcd(i)
		m.mu.Lock()
		if m.cmd != nil {
			_ = m.cmd.Process.Kill()
			m.cmd = nil
		}
		m.mu.Unlock()
	}
	return errors.Join(errs...)
}
