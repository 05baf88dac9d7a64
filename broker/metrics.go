package broker

import (
	"errors"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// metrics are the broker's Prometheus collectors: requests by API and
// version, the errors their responses carry by API and Kafka error name,
// each request's time split as Kafka's RequestMetrics splits it (queued,
// handled, sent, and the total), bytes (all, and record bytes by topic)
// and connections.
type metrics struct {
	requests *prometheus.CounterVec
	errors   *prometheus.CounterVec
	total    *prometheus.HistogramVec
	queue    *prometheus.HistogramVec
	handle   *prometheus.HistogramVec
	send     *prometheus.HistogramVec
	bytesIn  prometheus.Counter
	bytesOut prometheus.Counter
	// topicIn and topicOut are record bytes produced to and fetched from
	// each topic (Kafka's BytesInPerSec and BytesOutPerSec by topic).
	topicIn  *prometheus.CounterVec
	topicOut *prometheus.CounterVec
	open     prometheus.Gauge
	accepted prometheus.Counter
	refused  prometheus.Counter
	// acceptErrors counts failed accepts (out of descriptors, …), each
	// retried after a backoff.
	acceptErrors prometheus.Counter
	closedBad    prometheus.Counter
	closedIdle   prometheus.Counter
	closedAuth   prometheus.Counter
	// authentications counts SASL exchanges by mechanism and result (ok,
	// failed).
	authentications *prometheus.CounterVec
	// throttled counts throttled responses by quota; refusedRate the
	// connections over an IP's connection_creation_rate.
	throttled   *prometheus.CounterVec
	refusedRate prometheus.Counter
	// autoCreateRefused counts topics not auto-created for a bound
	// (per request, AutoCreateMaxRate, controller_mutation_rate).
	autoCreateRefused prometheus.Counter
	// memoryWaits counts frame reads that waited for request memory
	// (queued.max.request.bytes).
	memoryWaits prometheus.Counter
	// fetchesWaiting are the fetches in a long poll (Kafka's fetch
	// purgatory size).
	fetchesWaiting prometheus.Gauge
	all            []prometheus.Collector

	// byAPI caches each API's collectors, made on its first request: the
	// request path looks up no label.
	byAPI [maxAPIKey + 1]atomic.Pointer[apiMetrics]
}

// apiMetrics are one API's collectors.
type apiMetrics struct {
	name                       string
	total, queue, handle, send prometheus.Observer
	mu                         sync.Mutex // guards versions
	versions                   map[int16]prometheus.Counter
}

// requestBuckets are the request time histograms' buckets: 50 µs to 26 s.
var requestBuckets = prometheus.ExponentialBuckets(50e-6, 2, 20)

func newMetrics() *metrics {
	hist := func(name, help string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: requestBuckets}, []string{"api"})
	}
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "seglog_broker_requests_total",
			Help: "Requests answered, by API and version."}, []string{"api", "version"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "seglog_broker_request_errors_total",
			Help: "Error codes in responses (each topic, partition or resource), by API and Kafka error name."}, []string{"api", "error"}),
		total: hist("seglog_broker_request_duration_seconds",
			"Time from a request's frame read to its response written, by API (a fetch's long poll included): Kafka's TotalTimeMs."),
		queue: hist("seglog_broker_request_queue_seconds",
			"Time a request waited behind the connection's earlier requests (and a quota's throttle) before its handler began, by API: Kafka's RequestQueueTimeMs."),
		handle: hist("seglog_broker_request_handle_seconds",
			"Time in the handler (authorization, the engine, a fetch's long poll, a group's rebalance wait), by API: Kafka's LocalTimeMs and RemoteTimeMs."),
		send: hist("seglog_broker_response_send_seconds",
			"Time encoding and writing the response, by API: Kafka's ResponseSendTimeMs."),
		bytesIn:  prometheus.NewCounter(prometheus.CounterOpts{Name: "seglog_broker_bytes_in_total", Help: "Request bytes read, frames included."}),
		bytesOut: prometheus.NewCounter(prometheus.CounterOpts{Name: "seglog_broker_bytes_out_total", Help: "Response bytes written, frames included."}),
		topicIn: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "seglog_broker_topic_bytes_in_total",
			Help: "Record bytes appended by Produce, by topic."}, []string{"topic"}),
		topicOut: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "seglog_broker_topic_bytes_out_total",
			Help: "Record bytes answered to Fetch, by topic."}, []string{"topic"}),
		open:         prometheus.NewGauge(prometheus.GaugeOpts{Name: "seglog_broker_connections", Help: "Connections open."}),
		accepted:     prometheus.NewCounter(prometheus.CounterOpts{Name: "seglog_broker_connections_accepted_total", Help: "Connections accepted."}),
		refused:      prometheus.NewCounter(prometheus.CounterOpts{Name: "seglog_broker_connections_refused_total", Help: "Connections refused by max.connections."}),
		acceptErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "seglog_broker_accept_errors_total", Help: "Accepts that failed (out of descriptors, …) and were retried after a backoff."}),
		closedBad:    prometheus.NewCounter(prometheus.CounterOpts{Name: "seglog_broker_connections_closed_malformed_total", Help: "Connections closed for an oversized frame or a malformed request."}),
		closedIdle:   prometheus.NewCounter(prometheus.CounterOpts{Name: "seglog_broker_connections_closed_idle_total", Help: "Connections closed after connections.max.idle.ms without a request."}),
		closedAuth: prometheus.NewCounter(prometheus.CounterOpts{Name: "seglog_broker_connections_closed_unauthenticated_total",
			Help: "Connections closed for a failed SASL exchange, a request before authentication, or an expired session."}),
		authentications: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "seglog_broker_authentications_total",
			Help: "SASL authentications, by mechanism and result (ok, failed)."}, []string{"mechanism", "result"}),
		throttled: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "seglog_broker_throttled_total",
			Help: "Responses throttled for a client quota, by quota (producer_byte_rate, consumer_byte_rate, request_percentage, controller_mutation_rate)."}, []string{"quota"}),
		memoryWaits: prometheus.NewCounter(prometheus.CounterOpts{Name: "seglog_broker_request_memory_waits_total",
			Help: "Frame reads that waited for request memory (queued.max.request.bytes): reading paused."}),
		autoCreateRefused: prometheus.NewCounter(prometheus.CounterOpts{Name: "seglog_broker_auto_create_refused_total",
			Help: "Topics not auto-created for a bound: the topics a request may create, seglog.auto.create.partitions.max.rate, controller_mutation_rate."}),
		refusedRate: prometheus.NewCounter(prometheus.CounterOpts{Name: "seglog_broker_connections_refused_rate_total",
			Help: "Connections refused for their IP's connection_creation_rate quota."}),
		fetchesWaiting: prometheus.NewGauge(prometheus.GaugeOpts{Name: "seglog_broker_fetches_waiting",
			Help: "Fetches waiting in a long poll for records (Kafka's fetch purgatory size)."}),
	}
	m.all = []prometheus.Collector{m.requests, m.errors, m.total, m.queue, m.handle, m.send, m.bytesIn, m.bytesOut, m.topicIn, m.topicOut,
		m.open, m.accepted, m.refused, m.acceptErrors, m.closedBad, m.closedIdle, m.closedAuth, m.authentications, m.throttled, m.refusedRate, m.autoCreateRefused, m.memoryWaits, m.fetchesWaiting}
	return m
}

// forAPI returns an API's collectors.
func (m *metrics) forAPI(key int16) *apiMetrics {
	if key < 0 || key > maxAPIKey {
		key = maxAPIKey // not served: its request closed the connection
	}
	if a := m.byAPI[key].Load(); a != nil {
		return a
	}
	name := kmsg.NameForKey(key)
	a := &apiMetrics{name: name, total: m.total.WithLabelValues(name), queue: m.queue.WithLabelValues(name),
		handle: m.handle.WithLabelValues(name), send: m.send.WithLabelValues(name), versions: map[int16]prometheus.Counter{}}
	if m.byAPI[key].CompareAndSwap(nil, a) {
		return a
	}
	return m.byAPI[key].Load()
}

// request counts a request of the API at its version.
func (m *metrics) request(a *apiMetrics, version int16) {
	a.mu.Lock()
	c, ok := a.versions[version]
	if !ok {
		c = m.requests.WithLabelValues(a.name, strconv.Itoa(int(version)))
		a.versions[version] = c
	}
	a.mu.Unlock()
	c.Inc()
}

// timed records a request's times: read at start, handled from begin to
// handled, its response written at sent.
func (a *apiMetrics) timed(start, begin, handled, sent time.Time) {
	a.queue.Observe(begin.Sub(start).Seconds())
	a.handle.Observe(handled.Sub(begin).Seconds())
	a.send.Observe(sent.Sub(handled).Seconds())
	a.total.Observe(sent.Sub(start).Seconds())
}

// Collector returns the broker's Prometheus collectors.
func (b *Broker) Collector() prometheus.Collector {
	mem := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "seglog_broker_request_memory_bytes",
		Help: "Request memory reserved now: frames read or being read and not yet answered (bounded by queued.max.request.bytes)."},
		func() float64 { return float64(b.reqMem.inUse()) })
	sessions := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "seglog_broker_fetch_sessions",
		Help: "Incremental fetch sessions (KIP-227) open now (at most max.incremental.fetch.session.cache.slots)."},
		func() float64 { return float64(b.sessions.count()) })
	cs := append(collectors{mem, sessions, b.telemetry}, b.metrics.all...)
	if b.groups == nil {
		return cs
	}
	return append(cs, b.groups.Collector(), b.txns.Collector())
}

type collectors []prometheus.Collector

func (cs collectors) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range cs {
		c.Describe(ch)
	}
}

func (cs collectors) Collect(ch chan<- prometheus.Metric) {
	for _, c := range cs {
		c.Collect(ch)
	}
}

// answered counts one request, its bytes (frames included) and the errors
// its response carries, before the response is written.
func (m *metrics) answered(h header, resp kmsg.Response, in, out int) {
	a := m.forAPI(h.key)
	m.request(a, h.version)
	m.bytesIn.Add(float64(in))
	m.bytesOut.Add(float64(out))
	if resp == nil {
		return
	}
	m.eachErrorCode(reflect.ValueOf(resp).Elem(), func(code int16) {
		m.errors.WithLabelValues(a.name, errorName(code)).Inc()
	})
}

// unknownCodes counts the codes a handler set that Kafka does not define,
// which answered sent as UNKNOWN_SERVER_ERROR instead (the broker's tests
// fail if any was).
var unknownCodes atomic.Int64

// knownCodes rewrites every error code in a response that Kafka does not
// define to UNKNOWN_SERVER_ERROR (-1): a client never reads an invented
// number. It runs before the response is encoded.
func (m *metrics) knownCodes(resp kmsg.Response) {
	m.eachErrorField(reflect.ValueOf(resp).Elem(), func(f reflect.Value) {
		if !kafkaDefines(int16(f.Int())) {
			unknownCodes.Add(1)
			f.SetInt(int64(kerr.UnknownServerError.Code))
		}
	})
}

// errorName is Kafka's name of an error code.
func errorName(code int16) string {
	var ke *kerr.Error
	if errors.As(kerr.ErrorForCode(code), &ke) {
		return ke.Message
	}
	return "UNKNOWN"
}

// kafkaDefines reports whether Kafka defines an error code (kerr's table,
// which answers UNKNOWN_SERVER_ERROR for any other).
func kafkaDefines(code int16) bool {
	var ke *kerr.Error
	return errors.As(kerr.ErrorForCode(code), &ke) && ke.Code == code
}

var int16Type = reflect.TypeFor[int16]()

// errorPlan is where a struct type keeps its error codes: its ErrorCode
// field (-1 if none) and the fields — structs or slices of them — that
// hold more. It is worked out once per type: a response's walk visits only
// those fields.
type errorPlan struct {
	code   int
	fields []int
}

var errorPlans sync.Map // reflect.Type → *errorPlan

// planFor returns the plan of a struct type.
func planFor(t reflect.Type) *errorPlan {
	if p, ok := errorPlans.Load(t); ok {
		return p.(*errorPlan)
	}
	p := &errorPlan{code: -1}
	for i := range t.NumField() {
		f := t.Field(i)
		ft := f.Type
		if ft.Kind() == reflect.Slice {
			ft = ft.Elem()
		}
		switch {
		case f.Name == "ErrorCode" && f.Type == int16Type:
			p.code = i
		case ft.Kind() == reflect.Struct && f.IsExported():
			if sub := planFor(ft); sub.code >= 0 || len(sub.fields) > 0 {
				p.fields = append(p.fields, i)
			}
		}
	}
	errorPlans.Store(t, p)
	return p
}

// eachErrorCode calls fn with every non-zero ErrorCode field in a response
// struct (at any depth: topics, partitions, resources). Record bytes and
// tagged fields are not walked.
func (m *metrics) eachErrorCode(v reflect.Value, fn func(int16)) {
	m.eachErrorField(v, func(f reflect.Value) { fn(int16(f.Int())) })
}

// eachErrorField calls fn with every non-zero ErrorCode field, settable
// when v is.
func (m *metrics) eachErrorField(v reflect.Value, fn func(reflect.Value)) {
	p := planFor(v.Type())
	if p.code >= 0 {
		if f := v.Field(p.code); f.Int() != 0 {
			fn(f)
		}
	}
	for _, i := range p.fields {
		f := v.Field(i)
		if f.Kind() != reflect.Slice {
			m.eachErrorField(f, fn)
			continue
		}
		for j := range f.Len() {
			m.eachErrorField(f.Index(j), fn)
		}
	}
}
