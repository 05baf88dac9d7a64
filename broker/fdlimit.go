package broker

import "syscall"

// defaultMaxConnections is max.connections' default: half the process's
// descriptor limit, the other half left to segments, indexes and
// checkpoints, and at least 64.
func defaultMaxConnections() int {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil || l.Cur > 1<<30 {
		return 1 << 20
	}
	return max(int(l.Cur/2), 64)
}
