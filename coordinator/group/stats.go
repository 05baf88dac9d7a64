package group

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seglog/seglog/checkpoint"
)

// stats count what the coordinator did, for the collectors.
type stats struct {
	joins, rebalances, expired, commits atomic.Int64
}

var (
	descGroups     = prometheus.NewDesc("seglog_groups", "Consumer groups, by state.", []string{"state"}, nil)
	descMembers    = prometheus.NewDesc("seglog_group_members", "Members of each group.", []string{"group"}, nil)
	descLag        = prometheus.NewDesc("seglog_group_lag", "Records between each group's committed offsets and the log end (high watermark), summed over its partitions.", []string{"group"}, nil)
	descRebalances = prometheus.NewDesc("seglog_group_rebalances_total", "Rebalances started.", nil, nil)
	descJoins      = prometheus.NewDesc("seglog_group_joins_total", "JoinGroup requests answered without error.", nil, nil)
	descExpired    = prometheus.NewDesc("seglog_group_members_expired_total", "Members removed by their session timeout.", nil, nil)
	descCommits    = prometheus.NewDesc("seglog_group_offset_commits_total", "Partition offsets committed.", nil, nil)
)

// Collector returns the coordinator's Prometheus collector: groups by
// state, members and lag per group, rebalances, joins, expiries, commits.
func (c *Coordinator) Collector() prometheus.Collector { return collector{c} }

type collector struct{ c *Coordinator }

func (collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descGroups, descMembers, descLag, descRebalances, descJoins, descExpired, descCommits} {
		ch <- d
	}
}

func (k collector) Collect(ch chan<- prometheus.Metric) {
	c := k.c
	byState := map[State]int{}
	for _, g := range c.sortedGroups() {
		g.mu.Lock()
		byState[g.state]++
		members := len(g.members)
		var lag int64
		for tp, o := range g.offsets {
			if t, ok := c.m.Get(checkpoint.TopicPartition{Topic: tp.topic, Partition: tp.partition}); ok {
				lag += max(0, t.Offsets().HighWatermark-o.Offset)
			}
		}
		g.mu.Unlock()
		ch <- prometheus.MustNewConstMetric(descMembers, prometheus.GaugeValue, float64(members), g.id)
		ch <- prometheus.MustNewConstMetric(descLag, prometheus.GaugeValue, float64(lag), g.id)
	}
	for s := Empty; s <= Dead; s++ {
		ch <- prometheus.MustNewConstMetric(descGroups, prometheus.GaugeValue, float64(byState[s]), s.String())
	}
	for d, v := range map[*prometheus.Desc]int64{descRebalances: c.stats.rebalances.Load(), descJoins: c.stats.joins.Load(),
		descExpired: c.stats.expired.Load(), descCommits: c.stats.commits.Load()} {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
}

// Stats are the coordinator's counts since it started.
type Stats struct {
	// Joins counts JoinGroup requests answered without error, Rebalances
	// the rebalances started, Expired the members removed by their session
	// timeout, Commits the partition offsets committed.
	Joins, Rebalances, Expired, Commits int64
}

// Stats returns the coordinator's counts.
func (c *Coordinator) Stats() Stats {
	return Stats{Joins: c.stats.joins.Load(), Rebalances: c.stats.rebalances.Load(), Expired: c.stats.expired.Load(),
		Commits: c.stats.commits.Load()}
}
