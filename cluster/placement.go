package cluster

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"

	"github.com/seglog/seglog"
)

// ErrPlacement is returned when replicas cannot be placed: a replication
// factor above the live brokers, or racks on some brokers but not all.
var ErrPlacement = seglog.NewKafkaError("cluster: cannot place replicas", 38) // INVALID_REPLICATION_FACTOR

// Placed is one broker as the placement sees it.
type Placed struct {
	ID   int32
	Rack string // "" when the broker has none
}

// Place assigns replicationFactor replicas to each of partitions
// partitions numbered from firstPartition, over brokers, with Kafka's
// round robin (AdminUtils.assignReplicasToBrokers): the first replica of
// partition p is broker (p+start) of the list, the others follow at a
// shift that grows each time the partitions wrap around the brokers, so
// leaders and followers spread evenly. When the brokers have racks the
// list alternates racks and each partition's replicas go to as many racks
// as there are, then to as many brokers. start and shift are the random
// starting points Kafka draws; pass -1 for random (rnd, or the global
// source when nil).
func Place(brokers []Placed, partitions, replicationFactor, firstPartition int, start int, rnd *rand.Rand) ([][]int32, error) {
	switch {
	case partitions <= 0:
		return nil, fmt.Errorf("%w: the number of partitions must be larger than 0", ErrPlacement)
	case replicationFactor <= 0:
		return nil, fmt.Errorf("%w: the replication factor must be larger than 0", ErrPlacement)
	case replicationFactor > len(brokers):
		return nil, fmt.Errorf("%w: replication factor: %d larger than available brokers: %d", ErrPlacement, replicationFactor, len(brokers))
	}
	racks := map[string][]int32{}
	withRack := 0
	for _, b := range brokers {
		if b.Rack != "" {
			withRack++
		}
		racks[b.Rack] = append(racks[b.Rack], b.ID)
	}
	if withRack > 0 && withRack < len(brokers) {
		return nil, fmt.Errorf("%w: not all brokers have rack information for replica rack aware assignment", ErrPlacement)
	}
	var list []int32
	rackOf := map[int32]string{}
	if withRack == 0 {
		for _, b := range brokers {
			list = append(list, b.ID)
		}
		slices.Sort(list)
	} else {
		list = rackAlternated(racks)
		for _, b := range brokers {
			rackOf[b.ID] = b.Rack
		}
	}
	n := len(list)
	intn := rand.IntN
	if rnd != nil {
		intn = rnd.IntN
	}
	startIndex, shift := start, start
	if start < 0 {
		startIndex, shift = intn(n), intn(n)
	}
	out := make([][]int32, 0, partitions)
	for p := max(0, firstPartition); len(out) < partitions; p++ {
		if p > 0 && p%n == 0 {
			shift++
		}
		first := (p + startIndex) % n
		replicas := []int32{list[first]}
		if withRack == 0 {
			for j := range replicationFactor - 1 {
				replicas = append(replicas, list[replicaIndex(first, shift, j, n)])
			}
		} else {
			replicas = placeRackAware(list, rackOf, len(racks), first, shift, replicationFactor)
		}
		out = append(out, replicas)
	}
	return out, nil
}

// placeRackAware picks the replicas of one partition whose first replica
// is list[first]: it skips a broker whose rack already has a replica
// while a rack has none, and a broker already chosen while one is not.
func placeRackAware(list []int32, rackOf map[int32]string, numRacks, first, shift, replicationFactor int) []int32 {
	leader := list[first]
	replicas := []int32{leader}
	racks := map[string]bool{rackOf[leader]: true}
	chosen := map[int32]bool{leader: true}
	k := 0
	for range replicationFactor - 1 {
		for {
			b := list[replicaIndex(first, shift*numRacks, k, len(list))]
			k++
			r := rackOf[b]
			if (!racks[r] || len(racks) == numRacks) && (!chosen[b] || len(chosen) == len(list)) {
				replicas = append(replicas, b)
				racks[r], chosen[b] = true, true
				break
			}
		}
	}
	return replicas
}

// rackAlternated lists the brokers taking one from each rack in turn
// (racks sorted by name, brokers in a rack by id).
func rackAlternated(racks map[string][]int32) []int32 {
	names := make([]string, 0, len(racks))
	total := 0
	for r, ids := range racks {
		names = append(names, r)
		slices.Sort(ids)
		total += len(ids)
	}
	sort.Strings(names)
	next := make([]int, len(names))
	var out []int32
	for i := 0; len(out) < total; i = (i + 1) % len(names) {
		if ids := racks[names[i]]; next[i] < len(ids) {
			out = append(out, ids[next[i]])
			next[i]++
		}
	}
	return out
}

func replicaIndex(first, shift, j, n int) int {
	return (first + 1 + (shift+j)%(n-1)) % n
}
