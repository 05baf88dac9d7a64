package txn

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var (
	descOpen     = prometheus.NewDesc("seglog_transactions_open", "Transactions open (Ongoing, or prepared and being completed).", nil, nil)
	descOldest   = prometheus.NewDesc("seglog_transaction_oldest_open_seconds", "Age of the oldest open transaction (0 without one).", nil, nil)
	descIDs      = prometheus.NewDesc("seglog_transactional_ids", "Transactional ids known to the coordinator.", nil, nil)
	descEnded    = prometheus.NewDesc("seglog_transactions_ended_total", "Transactions ended, by outcome (commit, abort).", []string{"outcome"}, nil)
	descTimedOut = prometheus.NewDesc("seglog_transactions_timed_out_total", "Transactions aborted by the coordinator past their transaction.timeout.ms.", nil, nil)
)

// Collector returns the coordinator's Prometheus collector: open
// transactions and the oldest one's age, transactional ids, ends by
// outcome, aborts by timeout.
func (c *Coordinator) Collector() prometheus.Collector { return collector{c} }

type collector struct{ c *Coordinator }

func (collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descOpen, descOldest, descIDs, descEnded, descTimedOut} {
		ch <- d
	}
}

func (k collector) Collect(ch chan<- prometheus.Metric) {
	c := k.c
	infos := c.Transactions()
	now := c.opts.Now().UnixMilli()
	open, oldest := 0, int64(0)
	for _, in := range infos {
		switch in.State {
		case kmsg.TransactionStateOngoing.String(), kmsg.TransactionStatePrepareCommit.String(), kmsg.TransactionStatePrepareAbort.String():
			open++
			if in.StartTimestamp >= 0 {
				oldest = max(oldest, now-in.StartTimestamp)
			}
		}
	}
	st := c.Stats()
	ch <- prometheus.MustNewConstMetric(descOpen, prometheus.GaugeValue, float64(open))
	ch <- prometheus.MustNewConstMetric(descOldest, prometheus.GaugeValue, float64(oldest)/1e3)
	ch <- prometheus.MustNewConstMetric(descIDs, prometheus.GaugeValue, float64(len(infos)))
	ch <- prometheus.MustNewConstMetric(descEnded, prometheus.CounterValue, float64(st.Commits), "commit")
	ch <- prometheus.MustNewConstMetric(descEnded, prometheus.CounterValue, float64(st.Aborts), "abort")
	ch <- prometheus.MustNewConstMetric(descTimedOut, prometheus.CounterValue, float64(st.TimedOut))
}
