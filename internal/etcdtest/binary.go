package etcdtest

import (
	"os"
	"testing"

	"github.com/seglog/seglog/internal/etcdbin"
)

// FromEnv starts a one-member etcd: the binary SEGLOG_ETCD names (Debian's
// etcd-server, /usr/bin/etcd, in make crash), else in this process.
func FromEnv(t testing.TB) *Cluster {
	if bin := os.Getenv("SEGLOG_ETCD"); bin != "" {
		return StartBinary(t, bin)
	}
	return Start(t, 1)
}

// StartBinary runs an etcd binary as one member on loopback ports
// (etcdbin.Start), its data in the test's temporary directory, and waits
// until it serves; it is killed when the test ends.
func StartBinary(t testing.TB, bin string) *Cluster {
	t.Helper()
	b := etcdbin.Start(t, bin)
	m := &member{name: "m0", client: b.Client, peer: b.Peer}
	return &Cluster{t: t, members: []*member{m}, external: b.Cmd}
}
