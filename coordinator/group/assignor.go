package group

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/seglog/seglog/checkpoint"
)

// assignment is a member's partitions by topic id, each list sorted. An
// assignment is never changed once made: operations return new ones.
type assignment map[checkpoint.TopicID][]int32

type tpKey struct {
	id checkpoint.TopicID
	p  int32
}

func (a assignment) count() int {
	n := 0
	for _, ps := range a {
		n += len(ps)
	}
	return n
}

func (a assignment) has(id checkpoint.TopicID, p int32) bool {
	_, ok := slices.BinarySearch(a[id], p)
	return ok
}

// keys lists the assignment's partitions, by topic id and partition.
func (a assignment) keys() []tpKey {
	var out []tpKey
	for id, ps := range a {
		for _, p := range ps {
			out = append(out, tpKey{id, p})
		}
	}
	slices.SortFunc(out, compareTP)
	return out
}

func compareTP(a, b tpKey) int {
	if c := slices.Compare(a.id[:], b.id[:]); c != 0 {
		return c
	}
	return cmp.Compare(a.p, b.p)
}

// filter returns the partitions of a for which keep is true.
func (a assignment) filter(keep func(id checkpoint.TopicID, p int32) bool) assignment {
	out := assignment{}
	for id, ps := range a {
		for _, p := range ps {
			if keep(id, p) {
				out[id] = append(out[id], p)
			}
		}
	}
	return out
}

func (a assignment) equal(b assignment) bool {
	if a.count() != b.count() {
		return false
	}
	for id, ps := range a {
		if !slices.Equal(ps, b[id]) {
			return false
		}
	}
	return true
}

// union returns a's and b's partitions.
func (a assignment) union(b assignment) assignment {
	out := assignment{}
	for _, x := range []assignment{a, b} {
		for id, ps := range x {
			out[id] = append(out[id], ps...)
		}
	}
	for id, ps := range out {
		slices.Sort(ps)
		out[id] = slices.Compact(ps)
	}
	return out
}

func fromKeys(keys []tpKey) assignment {
	out := assignment{}
	for _, k := range keys {
		out[k.id] = append(out[k.id], k.p)
	}
	for _, ps := range out {
		slices.Sort(ps)
	}
	return out
}

// assignTopic is a subscribed topic for the assignors.
type assignTopic struct {
	name       string
	id         checkpoint.TopicID
	partitions int32
}

// assignInput is what an assignor works from: the members (sorted), each
// one's subscribed topics, the topics, and the previous target.
type assignInput struct {
	members    []string
	subscribed map[string]map[string]bool // member → topic names
	topics     []assignTopic              // sorted by name
	previous   map[string]assignment
}

// assignors are the server-side assignors, by Kafka's names.
var assignors = map[string]func(assignInput) map[string]assignment{
	"uniform": assignUniform,
	"range":   assignRange,
}

// assignRange is Kafka's range assignor: each topic's partitions are split
// into contiguous ranges over the members subscribed to it, in member id
// order, the first ones taking one more when it does not divide evenly —
// so co-partitioned topics are assigned alike.
func assignRange(in assignInput) map[string]assignment {
	out := map[string]assignment{}
	for _, m := range in.members {
		out[m] = assignment{}
	}
	for _, t := range in.topics {
		var subs []string
		for _, m := range in.members {
			if in.subscribed[m][t.name] {
				subs = append(subs, m)
			}
		}
		if len(subs) == 0 {
			continue
		}
		n := int32(len(subs))
		per, extra := t.partitions/n, t.partitions%n
		next := int32(0)
		for i, m := range subs {
			k := per
			if int32(i) < extra {
				k++
			}
			for p := next; p < next+k; p++ {
				out[m][t.id] = append(out[m][t.id], p)
			}
			next += k
		}
	}
	return out
}

// assignUniform is Kafka's uniform assignor: every subscribed partition to
// one of its subscribers, the counts as even as the subscriptions allow,
// and as few partitions moved from the previous target as that permits.
// It keeps each member's previous partitions it still subscribes to, gives
// the rest (those with the fewest candidates first) to the candidate with
// the fewest, then moves partitions from a member to a candidate with at
// least two fewer until none can move.
func assignUniform(in assignInput) map[string]assignment {
	owned := map[string][]tpKey{}
	owner := map[tpKey]string{}
	exists := map[checkpoint.TopicID]assignTopic{}
	for _, t := range in.topics {
		exists[t.id] = t
	}
	for _, m := range in.members {
		for _, k := range in.previous[m].keys() {
			t, ok := exists[k.id]
			if ok && k.p < t.partitions && in.subscribed[m][t.name] && owner[k] == "" {
				owner[k] = m
				owned[m] = append(owned[m], k)
			}
		}
	}
	candidates := func(t assignTopic) []string {
		var out []string
		for _, m := range in.members {
			if in.subscribed[m][t.name] {
				out = append(out, m)
			}
		}
		return out
	}
	type free struct {
		k    tpKey
		subs []string
	}
	var unassigned []free
	for _, t := range in.topics {
		subs := candidates(t)
		for p := range t.partitions {
			k := tpKey{t.id, p}
			if owner[k] == "" && len(subs) > 0 {
				unassigned = append(unassigned, free{k, subs})
			}
		}
	}
	slices.SortStableFunc(unassigned, func(a, b free) int { return cmp.Compare(len(a.subs), len(b.subs)) })
	fewest := func(subs []string) string {
		best := subs[0]
		for _, m := range subs[1:] {
			if len(owned[m]) < len(owned[best]) {
				best = m
			}
		}
		return best
	}
	for _, f := range unassigned {
		m := fewest(f.subs)
		owner[f.k] = m
		owned[m] = append(owned[m], f.k)
	}
	subsOf := map[checkpoint.TopicID][]string{}
	for _, t := range in.topics {
		subsOf[t.id] = candidates(t)
	}
	for moved := true; moved; {
		moved = false
		order := slices.Clone(in.members)
		slices.SortStableFunc(order, func(a, b string) int { return cmp.Compare(len(owned[b]), len(owned[a])) })
		for _, from := range order {
			ks := slices.Clone(owned[from])
			slices.SortFunc(ks, compareTP)
			for i := len(ks) - 1; i >= 0 && !moved; i-- {
				k := ks[i]
				to := fewest(subsOf[k.id])
				if len(owned[from]) > len(owned[to])+1 {
					owned[from] = slices.DeleteFunc(owned[from], func(x tpKey) bool { return x == k })
					owned[to] = append(owned[to], k)
					moved = true
				}
			}
			if moved {
				break
			}
		}
	}
	out := map[string]assignment{}
	for _, m := range in.members {
		out[m] = fromKeys(owned[m])
	}
	return out
}

// ParseAssignors parses group.consumer.assignors: a comma-separated list
// of the assignors' names (uniform, range) or Kafka's class names of them.
func ParseAssignors(v string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(v, ",") {
		name := strings.TrimSpace(f)
		switch name {
		case "org.apache.kafka.coordinator.group.assignor.UniformAssignor":
			name = "uniform"
		case "org.apache.kafka.coordinator.group.assignor.RangeAssignor":
			name = "range"
		}
		if _, ok := assignors[name]; !ok {
			return nil, fmt.Errorf("group.consumer.assignors: %q is not an assignor (uniform, range)", f)
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out, nil
}
