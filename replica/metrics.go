package replica

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seglog/seglog/cluster"
	"github.com/seglog/seglog/replica/state"
)

// Metrics are the replication counters.
type Metrics struct {
	// LeaderElections counts the leaderships this broker took.
	LeaderElections atomic.Int64
	ISRShrinks      atomic.Int64
	ISRExpands      atomic.Int64
}

// Metrics returns the counters.
func (m *Manager) Metrics() *Metrics { return &m.metrics }

func (mt *Metrics) isrChange(why string) {
	if why == "shrink" {
		mt.ISRShrinks.Add(1)
	} else {
		mt.ISRExpands.Add(1)
	}
}

var (
	descUnderReplicated = prometheus.NewDesc("seglog_cluster_under_replicated_partitions",
		"Partitions this broker leads whose ISR is smaller than their replicas.", nil, nil)
	descUnderMinISR = prometheus.NewDesc("seglog_cluster_under_min_isr_partitions",
		"Partitions this broker leads whose ISR is below min.insync.replicas (acks=all is refused).", nil, nil)
	descOffline = prometheus.NewDesc("seglog_cluster_offline_partitions",
		"Partitions without a leader, as the controller counts them (0 on other brokers).", nil, nil)
	descLeaders = prometheus.NewDesc("seglog_cluster_leader_partitions",
		"Partitions this broker leads.", nil, nil)
	descActiveController = prometheus.NewDesc("seglog_cluster_active_controller",
		"1 if this broker is the controller.", nil, nil)
	descControllerChanges = prometheus.NewDesc("seglog_cluster_controller_changes_total",
		"Changes of the controller this broker has seen.", nil, nil)
	descElections = prometheus.NewDesc("seglog_cluster_leader_elections_total",
		"Leaderships this broker has taken.", nil, nil)
	descShrinks = prometheus.NewDesc("seglog_cluster_isr_shrinks_total",
		"Followers this broker, as leader, took out of an ISR.", nil, nil)
	descExpands = prometheus.NewDesc("seglog_cluster_isr_expands_total",
		"Followers this broker, as leader, added to an ISR.", nil, nil)
	descMaxLag = prometheus.NewDesc("seglog_cluster_replica_max_lag",
		"The most records a follower of a partition this broker leads is behind its log end.", nil, nil)
)

// Collector returns the replication metrics' Prometheus collector.
func (m *Manager) Collector() prometheus.Collector { return collector{m} }

type collector struct{ m *Manager }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descUnderReplicated, descUnderMinISR, descOffline, descLeaders, descActiveController,
		descControllerChanges, descElections, descShrinks, descExpands, descMaxLag} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	m := c.m
	m.mu.Lock()
	parts := make([]*Partition, 0, len(m.parts))
	for _, p := range m.parts {
		parts = append(parts, p)
	}
	m.mu.Unlock()
	var under, underMin, leaders int
	var maxLag int64
	for _, p := range parts {
		p.mu.Lock()
		if md := p.s.Meta(); p.s.Role() == state.Leader {
			leaders++
			if len(md.ISR) < len(md.Replicas) {
				under++
			}
			if len(md.ISR) < md.MinISR {
				underMin++
			}
			leo := p.t.Offsets().LogEndOffset
			for _, f := range p.s.Followers() {
				if f.LogEnd >= 0 {
					maxLag = max(maxLag, leo-f.LogEnd)
				}
			}
		}
		p.mu.Unlock()
	}
	member := m.opts.Member
	offline, active := 0, 0
	if member != nil && member.IsController() {
		active = 1
		for _, t := range member.Snapshot().Topics {
			for _, st := range t.Partitions {
				if st.Leader == cluster.NoLeader {
					offline++
				}
			}
		}
	}
	gauge := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	counter := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	gauge(descUnderReplicated, float64(under))
	gauge(descUnderMinISR, float64(underMin))
	gauge(descOffline, float64(offline))
	gauge(descLeaders, float64(leaders))
	gauge(descActiveController, float64(active))
	gauge(descMaxLag, float64(maxLag))
	changes := int64(0)
	if member != nil {
		changes = member.ControllerChanges()
	}
	counter(descControllerChanges, changes)
	counter(descElections, m.metrics.LeaderElections.Load())
	counter(descShrinks, m.metrics.ISRShrinks.Load())
	counter(descExpands, m.metrics.ISRExpands.Load())
}
