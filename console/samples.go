package console

import (
	"context"
	"math"
	"net/http"
	"slices"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/seglog/seglog/broker"
)

// The console keeps its own samples, in memory, for its charts: no
// time-series database. A sample every SampleInterval (10 s by default)
// of the broker's counters, of each topic's log end and of each group's
// lag; the last samplesKept of each (an hour at the default).
const (
	defaultSampleInterval = 10 * time.Second
	samplesKept           = 360
	// maxSampledGroups bounds the groups whose lag is sampled (the first
	// by name).
	maxSampledGroups = 256
)

// brokerSample is the broker's rates over one interval.
type brokerSample struct {
	At                time.Time
	BytesIn, BytesOut float64 // per second
	Requests          float64 // per second
	// ProduceP50 and ProduceP99 are Produce's request time quantiles
	// over the interval, in seconds (NaN: no produce in it).
	ProduceP50, ProduceP99 float64
}

// lagSample is a group's total lag at one time.
type lagSample struct {
	At  time.Time
	Lag int64
}

// counters are the broker's counter values at a sample.
type counters struct {
	at                          time.Time
	bytesIn, bytesOut, requests float64
	produce                     *dto.Histogram
	ends                        map[string]int64
}

// sampler holds the samples.
type sampler struct {
	mu         sync.Mutex // guards prev, brokers, topicRates and lags
	prev       *counters
	brokers    []brokerSample
	topicRates map[string]float64 // records per second over the last interval
	lags       map[string][]lagSample
}

// push appends x to s, dropping the oldest past n.
func push[T any](s []T, x T, n int) []T {
	if len(s) >= n {
		s = append(s[:0], s[len(s)-n+1:]...)
	}
	return append(s, x)
}

// Sample takes one sample now: the broker's counters, the topics' log
// ends and the groups' lag. The console takes one every SampleInterval
// by itself (see Run).
func (c *Console) Sample(ctx context.Context) {
	now := time.Now()
	cur := &counters{at: now, ends: c.b.LogEnds()}
	if c.opts.Metrics != nil {
		if mfs, err := c.opts.Metrics.Gather(); err == nil {
			cur.read(mfs)
		} else {
			c.opts.Logger.Debug("console: gathering the broker's metrics failed", "err", err)
		}
	}
	lags := c.sampleLags(ctx)

	s := &c.samples
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.prev; p != nil {
		if dt := now.Sub(p.at).Seconds(); dt > 0 {
			b := brokerSample{At: now, BytesIn: rate(cur.bytesIn, p.bytesIn, dt), BytesOut: rate(cur.bytesOut, p.bytesOut, dt),
				Requests: rate(cur.requests, p.requests, dt)}
			b.ProduceP50, b.ProduceP99 = quantile(p.produce, cur.produce, 0.5), quantile(p.produce, cur.produce, 0.99)
			s.brokers = push(s.brokers, b, samplesKept)
			s.topicRates = map[string]float64{}
			for topic, end := range cur.ends {
				if was, ok := p.ends[topic]; ok {
					s.topicRates[topic] = rate(float64(end), float64(was), dt)
				}
			}
		}
	}
	s.prev = cur
	if lags != nil {
		for g := range s.lags {
			if _, ok := lags[g]; !ok {
				delete(s.lags, g) // gone, or no longer sampled
			}
		}
		for g, lag := range lags {
			s.lags[g] = push(s.lags[g], lagSample{At: now, Lag: lag}, samplesKept)
		}
	}
}

// rate is a counter's growth per second (0 when it went back: a topic
// deleted and made again).
func rate(cur, prev, dt float64) float64 { return max(cur-prev, 0) / dt }

// read takes the counters the charts need from the broker's metrics.
func (cs *counters) read(mfs []*dto.MetricFamily) {
	for _, mf := range mfs {
		switch mf.GetName() {
		case "seglog_broker_bytes_in_total":
			cs.bytesIn = sumCounters(mf)
		case "seglog_broker_bytes_out_total":
			cs.bytesOut = sumCounters(mf)
		case "seglog_broker_requests_total":
			cs.requests = sumCounters(mf)
		case "seglog_broker_request_duration_seconds":
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "api" && l.GetValue() == "Produce" {
						cs.produce = m.GetHistogram()
					}
				}
			}
		}
	}
}

func sumCounters(mf *dto.MetricFamily) (n float64) {
	for _, m := range mf.GetMetric() {
		n += m.GetCounter().GetValue()
	}
	return n
}

// quantile estimates the q quantile of the observations a cumulative
// histogram gained from prev to cur, as Prometheus' histogram_quantile
// does (linear within the bucket); NaN when it gained none.
func quantile(prev, cur *dto.Histogram, q float64) float64 {
	if cur == nil {
		return math.NaN()
	}
	count := func(h *dto.Histogram, i int) float64 {
		if h == nil || i >= len(h.GetBucket()) {
			return 0
		}
		return float64(h.GetBucket()[i].GetCumulativeCount())
	}
	total := float64(cur.GetSampleCount())
	if prev != nil {
		total -= float64(prev.GetSampleCount())
	}
	if total <= 0 {
		return math.NaN()
	}
	rank, lower, below := q*total, 0.0, 0.0
	for i, b := range cur.GetBucket() {
		n := count(cur, i) - count(prev, i)
		if n >= rank {
			if n == below {
				return b.GetUpperBound()
			}
			return lower + (b.GetUpperBound()-lower)*(rank-below)/(n-below)
		}
		lower, below = b.GetUpperBound(), n
	}
	return lower // past the last bucket: its bound is what is known
}

// sampleLags reads every group's total lag (the first maxSampledGroups
// by name) as the groups page computes it, as the broker's own principal;
// nil when listing them failed (the groups of a broker that did not
// answer are left out, their charts a gap).
func (c *Console) sampleLags(ctx context.Context) map[string]int64 {
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	r := internalRequest(ctx)
	listed, missed, err := c.listGroups(ctx, r)
	if err != nil {
		c.opts.Logger.Debug("console: listing the groups to sample failed", "err", err)
		return nil
	}
	if len(missed) > 0 {
		c.opts.Logger.Debug("console: sampling the groups of the brokers that answered", "missed", missed)
	}
	var groups []groupRow
	for _, g := range listed {
		groups = append(groups, groupRow{ID: g.Group})
	}
	groups = groups[:min(len(groups), maxSampledGroups)]
	if err := c.fillGroupOffsets(ctx, r, groups); err != nil {
		return nil
	}
	if err := c.fillLag(ctx, r, groups); err != nil {
		return nil
	}
	out := make(map[string]int64, len(groups))
	for _, g := range groups {
		if g.Error == "" {
			out[g.ID] = g.Lag
		}
	}
	return out
}

// internalRequest stands for a request of the broker's own principal
// (broker.Internal): what the sampler reads as.
func internalRequest(ctx context.Context) *http.Request {
	return (&http.Request{RemoteAddr: "127.0.0.1:0"}).WithContext(context.WithValue(ctx, principalKey{}, &consoleSession{principal: broker.Internal}))
}

// Run samples every SampleInterval until ctx ends (not at all with a
// negative interval).
func (c *Console) Run(ctx context.Context) {
	if c.opts.SampleInterval < 0 {
		return
	}
	c.Sample(ctx)
	tick := time.NewTicker(c.opts.SampleInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			c.Sample(ctx)
		}
	}
}

// brokerSamples returns the broker's samples, oldest first.
func (c *Console) brokerSamples() []brokerSample {
	c.samples.mu.Lock()
	defer c.samples.mu.Unlock()
	return slices.Clone(c.samples.brokers)
}

// topicRate is a topic's records per second over the last interval;
// false before two samples of it.
func (c *Console) topicRate(topic string) (float64, bool) {
	c.samples.mu.Lock()
	defer c.samples.mu.Unlock()
	r, ok := c.samples.topicRates[topic]
	return r, ok
}

// lagSamples returns a group's lag samples, oldest first.
func (c *Console) lagSamples(group string) []lagSample {
	c.samples.mu.Lock()
	defer c.samples.mu.Unlock()
	return slices.Clone(c.samples.lags[group])
}

// brokerCharts are the broker's throughput, request rate and Produce
// latency over the samples kept.
func (c *Console) brokerCharts() []chart {
	bs := c.brokerSamples()
	times := make([]time.Time, len(bs))
	col := func(f func(brokerSample) float64) []float64 {
		out := make([]float64, len(bs))
		for i, b := range bs {
			out[i] = f(b)
		}
		return out
	}
	for i, b := range bs {
		times[i] = b.At
	}
	return []chart{
		{ID: "throughput", Title: "Throughput", Times: times, Unit: perSecond(humanBytes), Series: []series{
			{"in", col(func(b brokerSample) float64 { return b.BytesIn })},
			{"out", col(func(b brokerSample) float64 { return b.BytesOut })}}},
		{ID: "requests", Title: "Requests per second", Times: times, Unit: func(v float64) string { return count(v) + "/s" },
			Series: []series{{"requests", col(func(b brokerSample) float64 { return b.Requests })}}},
		{ID: "produce-latency", Title: "Produce request time", Times: times, Unit: seconds, Series: []series{
			{"p50", col(func(b brokerSample) float64 { return b.ProduceP50 })},
			{"p99", col(func(b brokerSample) float64 { return b.ProduceP99 })}}},
	}
}

// lagChart is a group's total lag over the samples kept.
func (c *Console) lagChart(group string) chart {
	ls := c.lagSamples(group)
	ch := chart{ID: "lag-chart", Title: "Lag", Times: make([]time.Time, len(ls)), Unit: count,
		Series: []series{{Name: "lag", Values: make([]float64, len(ls))}}}
	for i, l := range ls {
		ch.Times[i], ch.Series[0].Values[i] = l.At, float64(l.Lag)
	}
	return ch
}
