package group

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/tablet"
)

// In a cluster, a group of a __consumer_offsets partition the metadata
// names this broker the leader of, but whose leadership it has not taken
// up and loaded yet, is COORDINATOR_LOAD_IN_PROGRESS (clients retry it)
// — FindCoordinator already names this broker — not NOT_COORDINATOR
// (librdkafka hands that to the application); a partition another broker
// leads is NOT_COORDINATOR.
func TestNotYetLoadedIsLoadInProgress(t *testing.T) {
	elected := map[int32]bool{}
	e := newTestEnv(t, Options{Cluster: &ClusterHooks{Hooks: Hooks{
		Tablet:     func(int32) (*tablet.Tablet, error) { return nil, errors.New("not the leader") },
		Partitions: func() int32 { return 4 },
		Elected:    func(p int32) bool { return elected[p] },
	}}})
	p := PartitionFor("g", 4)
	require.Equal(t, kerr.NotCoordinator.Code, e.c.Owns("g"))
	elected[p] = true
	require.Equal(t, kerr.CoordinatorLoadInProgress.Code, e.c.Owns("g"))
}

// A coordinator whose broker's session is not certainly alive (a process
// paused past its session and resumed, before it has seen its lease go)
// answers NOT_COORDINATOR for the groups it loaded: another broker may
// coordinate them and have taken commits since. (The fault checker's
// txn workload read a group's offsets from such a zombie, older than
// transactions the new coordinator had committed.)
func TestUnleasedCoordinatorIsNotCoordinator(t *testing.T) {
	leased := true
	var e *testEnv
	e = newTestEnv(t, Options{Cluster: &ClusterHooks{Hooks: Hooks{
		Tablet: func(p int32) (*tablet.Tablet, error) {
			return e.m.GetOrCreate(checkpoint.TopicPartition{Topic: Topic, Partition: p}, nil)
		},
		Replicated: func(*tablet.Tablet, int64) error { return nil }, // (an ISR of the leader alone)
		Partitions: func() int32 { return 4 },
		Elected:    func(int32) bool { return leased },
		Leased:     func() bool { return leased },
	}}})
	p := PartitionFor("g", 4)
	tb, err := e.m.GetOrCreate(checkpoint.TopicPartition{Topic: Topic, Partition: p}, nil)
	require.NoError(t, err)
	require.NoError(t, e.c.Load(p, tb)())
	require.Zero(t, e.c.Owns("g"))
	require.Zero(t, commitOne(e, "g", "", -1, "t", 7, ""))
	require.Equal(t, int64(7), fetchOne(e, "g"))

	leased = false
	require.Equal(t, kerr.NotCoordinator.Code, e.c.Owns("g"))
	require.Equal(t, kerr.NotCoordinator.Code, commitOne(e, "g", "", -1, "t", 8, ""))
	f := kmsg.NewPtrOffsetFetchRequest()
	f.SetVersion(7)
	f.Group = "g"
	require.Equal(t, kerr.NotCoordinator.Code, e.c.OffsetFetch(f).ErrorCode, "no offsets read from a coordinator that may be deposed")

	leased = true
	require.Equal(t, int64(7), fetchOne(e, "g"))
}
