package cluster

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func placed(racks map[int32]string) []Placed {
	var out []Placed
	for id, r := range racks {
		out = append(out, Placed{ID: id, Rack: r})
	}
	return out
}

// The table of AdminUtils' comment: five brokers, ten partitions, three
// replicas, start 0.
func TestPlaceRoundRobin(t *testing.T) {
	got, err := Place(placed(map[int32]string{0: "", 1: "", 2: "", 3: "", 4: ""}), 10, 3, 0, 0, nil)
	require.NoError(t, err)
	require.Equal(t, [][]int32{
		{0, 1, 2}, {1, 2, 3}, {2, 3, 4}, {3, 4, 0}, {4, 0, 1},
		{0, 2, 3}, {1, 3, 4}, {2, 4, 0}, {3, 0, 1}, {4, 1, 2},
	}, got)
}

// Kafka's AdminRackAwareTest: the rack-alternated list and the placement
// of seven partitions.
func TestPlaceRackAware(t *testing.T) {
	racks := map[int32]string{0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
	byRack := map[string][]int32{}
	for id, r := range racks {
		byRack[r] = append(byRack[r], id)
	}
	require.Equal(t, []int32{0, 3, 1, 5, 4, 2}, rackAlternated(byRack))
	got, err := Place(placed(racks), 7, 3, 0, 0, nil)
	require.NoError(t, err)
	require.Equal(t, [][]int32{{0, 3, 1}, {3, 1, 5}, {1, 5, 4}, {5, 4, 2}, {4, 2, 0}, {2, 0, 3}, {0, 4, 2}}, got)
}

// With random starting points, every partition's replicas are distinct
// brokers on distinct racks (as many racks as there are), and leaders
// and replicas are spread evenly.
func TestPlaceSpreads(t *testing.T) {
	racks := map[int32]string{0: "a", 1: "b", 2: "b", 3: "c", 4: "c", 5: "a"}
	rnd := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		got, err := Place(placed(racks), 12, 3, 0, -1, rnd)
		require.NoError(t, err)
		leaders, replicas := map[int32]int{}, map[int32]int{}
		for _, rs := range got {
			seenRack, seenBroker := map[string]bool{}, map[int32]bool{}
			for _, b := range rs {
				require.False(t, seenBroker[b], "%v", rs)
				require.False(t, seenRack[racks[b]], "%v", rs)
				seenBroker[b], seenRack[racks[b]] = true, true
				replicas[b]++
			}
			leaders[rs[0]]++
		}
		for b := range racks {
			require.Equal(t, 2, leaders[b], "%v", got)
			require.Equal(t, 6, replicas[b], "%v", got)
		}
	}
}

func TestPlaceRefuses(t *testing.T) {
	_, err := Place(placed(map[int32]string{0: "", 1: ""}), 1, 3, 0, -1, nil)
	require.ErrorIs(t, err, ErrPlacement)
	require.ErrorContains(t, err, "larger than available brokers: 2")
	_, err = Place(placed(map[int32]string{0: "a", 1: ""}), 1, 1, 0, -1, nil)
	require.ErrorContains(t, err, "not all brokers have rack information")
	_, err = Place(placed(map[int32]string{0: ""}), 0, 1, 0, -1, nil)
	require.ErrorIs(t, err, ErrPlacement)
}
