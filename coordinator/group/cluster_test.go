package group

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

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
