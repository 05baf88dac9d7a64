package tiering

import (
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// tierStats are a tier's counters.
type tierStats struct {
	readRequests, readBytes, readErrors atomic.Int64
}

// Metrics are what a tier did and holds, as an operator watches it
// (Kafka's remote-storage metrics, KIP-405).
type Metrics struct {
	// RemoteFetchRequests, RemoteFetchBytes and RemoteFetchErrors count the
	// reads served from the store (Kafka's RemoteFetchRequestsPerSec,
	// RemoteFetchBytesPerSec, RemoteFetchErrorsPerSec).
	RemoteFetchRequests, RemoteFetchBytes, RemoteFetchErrors int64
	// RemoteLogSizeBytes and RemoteObjects are the committed objects' bytes
	// and count (RemoteLogSizeBytes).
	RemoteLogSizeBytes int64
	RemoteObjects      int
	// CopyLagBytes and CopyLagSegments are the sealed local segments that
	// could be uploaded and are not yet (RemoteCopyLagBytes,
	// RemoteCopyLagSegments).
	CopyLagBytes    int64
	CopyLagSegments int
	// CacheHits and CacheMisses count block lookups in the read cache.
	CacheHits, CacheMisses int64
}

// Metrics returns the tier's metrics now.
func (x *Tier) Metrics() Metrics {
	m := Metrics{RemoteFetchRequests: x.stats.readRequests.Load(), RemoteFetchBytes: x.stats.readBytes.Load(),
		RemoteFetchErrors: x.stats.readErrors.Load()}
	for _, e := range x.m.Visible() {
		if e.Key != "" {
			m.RemoteLogSizeBytes += e.Size
			m.RemoteObjects++
		}
	}
	end := x.m.TieredEnd()
	off := x.t.Offsets()
	segs := x.t.Segments()
	for i, s := range segs {
		if s.BaseOffset >= end && i < len(segs)-1 && x.sealedBelowBound(s, off) {
			m.CopyLagBytes += s.Size
			m.CopyLagSegments++
		}
	}
	x.cache.mu.Lock()
	m.CacheHits, m.CacheMisses = x.cache.hits, x.cache.misses
	x.cache.mu.Unlock()
	return m
}

var (
	descFetchRequests = prometheus.NewDesc("seglog_tier_remote_fetch_requests_total", "Reads served from the object store.", tierLabels, nil)
	descFetchBytes    = prometheus.NewDesc("seglog_tier_remote_fetch_bytes_total", "Bytes of batches read from the object store.", tierLabels, nil)
	descFetchErrors   = prometheus.NewDesc("seglog_tier_remote_fetch_errors_total", "Reads from the object store that failed.", tierLabels, nil)
	descRemoteSize    = prometheus.NewDesc("seglog_tier_remote_log_size_bytes", "Bytes of the committed objects.", tierLabels, nil)
	descCopyLagBytes  = prometheus.NewDesc("seglog_tier_copy_lag_bytes", "Bytes of sealed segments that could be uploaded and are not yet.", tierLabels, nil)
	descCopyLagSegs   = prometheus.NewDesc("seglog_tier_copy_lag_segments", "Sealed segments that could be uploaded and are not yet.", tierLabels, nil)
	descCacheHits     = prometheus.NewDesc("seglog_tier_cache_hits_total", "Block lookups the read cache answered.", tierLabels, nil)
	descCacheMisses   = prometheus.NewDesc("seglog_tier_cache_misses_total", "Block lookups the read cache missed.", tierLabels, nil)
)

// tiersCollector exports the metrics of the tiers it is given.
type tiersCollector struct{ tiers func() []*Tier }

// Collector returns a prometheus.Collector of the attached tiers' metrics.
func (a *Attached) Collector() prometheus.Collector {
	return tiersCollector{func() []*Tier { return a.Tiers }}
}

func (c tiersCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descFetchRequests, descFetchBytes, descFetchErrors, descRemoteSize, descObjects,
		descCopyLagBytes, descCopyLagSegs, descCacheHits, descCacheMisses} {
		ch <- d
	}
}

func (c tiersCollector) Collect(ch chan<- prometheus.Metric) {
	for _, x := range c.tiers() {
		collectTier(ch, x)
	}
}

// collectTier sends one tier's metrics.
func collectTier(ch chan<- prometheus.Metric, x *Tier) {
	lv := []string{x.topic, strconv.Itoa(int(x.partition))}
	m := x.Metrics()
	for _, v := range []struct {
		d *prometheus.Desc
		t prometheus.ValueType
		v float64
	}{
		{descFetchRequests, prometheus.CounterValue, float64(m.RemoteFetchRequests)},
		{descFetchBytes, prometheus.CounterValue, float64(m.RemoteFetchBytes)},
		{descFetchErrors, prometheus.CounterValue, float64(m.RemoteFetchErrors)},
		{descRemoteSize, prometheus.GaugeValue, float64(m.RemoteLogSizeBytes)},
		{descObjects, prometheus.GaugeValue, float64(m.RemoteObjects)},
		{descCopyLagBytes, prometheus.GaugeValue, float64(m.CopyLagBytes)},
		{descCopyLagSegs, prometheus.GaugeValue, float64(m.CopyLagSegments)},
		{descCacheHits, prometheus.CounterValue, float64(m.CacheHits)},
		{descCacheMisses, prometheus.CounterValue, float64(m.CacheMisses)},
	} {
		ch <- prometheus.MustNewConstMetric(v.d, v.t, v.v, lv...)
	}
}
