package tablet

import (
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/seglog/seglog"
)

// stats are a tablet's counters, read by the Manager's collector.
type stats struct {
	appends, bytes, records, duplicates, rolls atomic.Int64
	// The cleaner's, for a compacted tablet.
	cleanings, cleanedRead, cleanedWritten, cleanedRemoved atomic.Int64
	fsyncSeconds                                           histogram

	mu         sync.Mutex       // guards rejections
	rejections map[string]int64 // by Kafka error name
}

func (s *stats) reject(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rejections == nil {
		s.rejections = map[string]int64{}
	}
	s.rejections[ErrorName(err)]++
}

// fsyncBuckets are the upper bounds, in seconds, of the fsync latency
// histogram.
var fsyncBuckets = []float64{0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5}

// histogram is a fixed-bucket histogram of durations, updated without a
// lock.
type histogram struct {
	counts [11]atomic.Uint64 // per bucket, the last for +Inf
	sumNs  atomic.Int64
}

func (h *histogram) observe(d time.Duration) {
	s := d.Seconds()
	i := 0
	for i < len(fsyncBuckets) && s > fsyncBuckets[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sumNs.Add(int64(d))
}

func (h *histogram) snapshot() (count uint64, sum float64, buckets map[float64]uint64) {
	buckets = make(map[float64]uint64, len(fsyncBuckets))
	for i, ub := range fsyncBuckets {
		count += h.counts[i].Load()
		buckets[ub] = count
	}
	count += h.counts[len(fsyncBuckets)].Load()
	return count, float64(h.sumNs.Load()) / 1e9, buckets
}

// ErrorName returns the Kafka error name for an append's failure
// (OUT_OF_ORDER_SEQUENCE_NUMBER, CORRUPT_MESSAGE, …), or UNKNOWN_SERVER_ERROR.
func ErrorName(err error) string {
	var ke *kerr.Error
	if errors.As(kerr.ErrorForCode(seglog.KafkaCode(err)), &ke) {
		return ke.Message
	}
	return "UNKNOWN_SERVER_ERROR"
}

// collector exposes a Manager's tablets to Prometheus.
type collector struct {
	m *Manager
}

var (
	labels      = []string{"topic", "partition"}
	descAppends = prometheus.NewDesc("seglog_appends_total", "Appends that wrote a batch.", labels, nil)
	descBytes   = prometheus.NewDesc("seglog_append_bytes_total", "Bytes of batches appended.", labels, nil)
	descRecords = prometheus.NewDesc("seglog_append_records_total", "Records appended.", labels, nil)
	descDups    = prometheus.NewDesc("seglog_duplicates_total", "Retries answered with the original offsets.", labels, nil)
	descRejects = prometheus.NewDesc("seglog_rejections_total", "Appends refused, by Kafka error name.",
		append(labels, "error"), nil)
	descFsyncs   = prometheus.NewDesc("seglog_flushes_total", "Flushes run (each fsyncs the segments with new data).", labels, nil)
	descFsyncLat = prometheus.NewDesc("seglog_flush_seconds", "Flush latency.", labels, nil)
	descRolls    = prometheus.NewDesc("seglog_rolls_total", "Segments rolled.", labels, nil)
	descSegments = prometheus.NewDesc("seglog_segments", "Segments on disk.", labels, nil)
	descSize     = prometheus.NewDesc("seglog_size_bytes", "Bytes of segments on disk.", labels, nil)
	descOffset   = prometheus.NewDesc("seglog_offset", "The tablet's offsets (docs/architecture.md §4).",
		append(labels, "kind"), nil)
	descOpen       = prometheus.NewDesc("seglog_open_segments", "Sealed segments holding descriptors or mappings.", labels, nil)
	descFiles      = prometheus.NewDesc("seglog_open_files", "File descriptors the tablet's segments hold.", labels, nil)
	descRecovered  = prometheus.NewDesc("seglog_recovery_bytes", "Bytes of .log recovery read when the directory was opened.", nil, nil)
	descRecoverDur = prometheus.NewDesc("seglog_recovery_seconds", "How long opening the directory took.", nil, nil)
	descClean      = prometheus.NewDesc("seglog_clean_shutdown", "1 if the directory was closed cleanly before it was opened.", nil, nil)
	descCleanings  = prometheus.NewDesc("seglog_cleaner_cleanings_total", "Cleanings of a compacted tablet.", labels, nil)
	descCleanRead  = prometheus.NewDesc("seglog_cleaner_read_bytes_total", "Bytes of .log the cleaner read (the map and the recopy).", labels, nil)
	descCleanWrite = prometheus.NewDesc("seglog_cleaner_written_bytes_total", "Bytes of cleaned segments the cleaner wrote.", labels, nil)
	descCleanGone  = prometheus.NewDesc("seglog_cleaner_removed_records_total", "Records the cleaner removed.", labels, nil)
)

// Collector returns a prometheus.Collector over the manager's tablets, for
// the embedding program to register.
func (m *Manager) Collector() prometheus.Collector { return collector{m} }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descAppends, descBytes, descRecords, descDups, descRejects, descFsyncs,
		descFsyncLat, descRolls, descSegments, descSize, descOffset, descOpen, descFiles, descRecovered, descRecoverDur, descClean,
		descCleanings, descCleanRead, descCleanWrite, descCleanGone} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	if r := c.m.Loaded; r != nil {
		clean := 0.0
		if r.CleanShutdown {
			clean = 1
		}
		ch <- prometheus.MustNewConstMetric(descRecovered, prometheus.GaugeValue, float64(r.RecoveredBytes()))
		ch <- prometheus.MustNewConstMetric(descRecoverDur, prometheus.GaugeValue, r.Duration.Seconds())
		ch <- prometheus.MustNewConstMetric(descClean, prometheus.GaugeValue, clean)
	}
	for _, t := range c.m.Tablets() {
		lv := []string{t.tp.Topic, strconv.Itoa(int(t.tp.Partition))}
		counter := func(d *prometheus.Desc, v int64, extra ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), append(lv, extra...)...)
		}
		gauge := func(d *prometheus.Desc, v float64, extra ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append(lv, extra...)...)
		}
		s := &t.stats
		counter(descAppends, s.appends.Load())
		counter(descBytes, s.bytes.Load())
		counter(descRecords, s.records.Load())
		counter(descDups, s.duplicates.Load())
		counter(descRolls, s.rolls.Load())
		s.mu.Lock()
		for name, n := range s.rejections {
			counter(descRejects, n, name)
		}
		s.mu.Unlock()
		counter(descFsyncs, t.FsyncCount())
		count, sum, buckets := s.fsyncSeconds.snapshot()
		ch <- prometheus.MustNewConstHistogram(descFsyncLat, count, sum, buckets, lv...)
		v := t.view()
		var segs int
		var size int64
		v.segs.Ascend(func(g *seg) bool { segs++; size += g.Size(); return true })
		gauge(descSegments, float64(segs))
		gauge(descSize, float64(size))
		o := t.Offsets()
		for kind, off := range map[string]int64{"log_start": o.LogStartOffset, "local_log_start": o.LocalLogStartOffset,
			"high_watermark": o.HighWatermark, "last_stable": o.LastStableOffset, "log_end": o.LogEndOffset,
			"recovery_point": o.RecoveryPoint, "durable": o.DurableOffset} {
			gauge(descOffset, float64(off), kind)
		}
		open, _ := t.OpenSegments()
		gauge(descOpen, float64(open))
		gauge(descFiles, float64(t.OpenFiles()))
		if t.compacted.Load() {
			counter(descCleanings, s.cleanings.Load())
			counter(descCleanRead, s.cleanedRead.Load())
			counter(descCleanWrite, s.cleanedWritten.Load())
			counter(descCleanGone, s.cleanedRemoved.Load())
		}
	}
}
