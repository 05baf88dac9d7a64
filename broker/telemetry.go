package broker

import (
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/seglog/seglog/record"
)

// Client telemetry (KIP-714): a client asks what to push
// (GetTelemetrySubscriptions) and pushes its metrics (PushTelemetry, an
// OTLP MetricsData message); the broker exports them on /metrics as
// seglog_client_* series labelled with the client's instance id. What a
// client can make the broker keep is bounded: telemetryMaxSeries series a
// client, telemetryMaxClients clients, a client's series dropped once it
// has not pushed for telemetryExpiry pushes. Off
// (seglog.client.telemetry.enable=false), the subscription requests no
// metric, so clients push none.

const (
	telemetryPushInterval = 30 * time.Second
	telemetryMaxBytes     = 1 << 20 // Kafka's telemetry.max.bytes
	telemetryMaxSeries    = 500
	telemetryMaxClients   = 1000
	telemetryExpiry       = 3 // push intervals without a push
	// telemetrySubscription is the id of the one subscription served:
	// every metric.
	telemetrySubscription = 1
)

// telemetryCodecs are the codecs a push may be compressed with (besides
// none), in the order clients are told to prefer them.
var telemetryCodecs = []record.Compression{record.Zstd, record.LZ4, record.Gzip, record.Snappy}

func init() {
	register(
		api{key: 71, min: 0, max: 0, handle: on(telemetryOf, (*telemetry).getTelemetrySubscriptions),
			rule: ruleFor(ruleCluster, opDescribe, (*guard).authorizeTelemetry71)},
		api{key: 72, min: 0, max: 0, handle: on(telemetryOf, (*telemetry).pushTelemetry),
			rule: ruleFor(ruleCluster, opDescribe, (*guard).authorizeTelemetry72)},
	)
}

// authorizeTelemetry71 and authorizeTelemetry72 refuse nothing: Kafka
// answers the telemetry APIs for any authenticated client, which learns
// and changes nothing of any resource through them.
func (g *guard) authorizeTelemetry71(header, *kmsg.GetTelemetrySubscriptionsRequest) (kmsg.Response, func(kmsg.Response)) {
	return nil, nil
}

func (g *guard) authorizeTelemetry72(header, *kmsg.PushTelemetryRequest) (kmsg.Response, func(kmsg.Response)) {
	return nil, nil
}

// telemetry holds the clients' pushed metrics.
type telemetry struct {
	off     bool
	now     func() time.Time
	mu      sync.Mutex // guards clients
	clients map[[16]byte]*clientMetrics
}

// clientMetrics are one client instance's last pushed values.
type clientMetrics struct {
	lastPush time.Time
	series   map[string]*pushedSeries // by name and labels
}

// pushedSeries is one data point's latest value.
type pushedSeries struct {
	name    string
	labels  []string // keys, sorted
	values  []string
	value   float64
	counter bool
}

func newTelemetry(off bool, now func() time.Time) *telemetry {
	return &telemetry{off: off, now: now, clients: map[[16]byte]*clientMetrics{}}
}

func (t *telemetry) getTelemetrySubscriptions(r *kmsg.GetTelemetrySubscriptionsRequest) *kmsg.GetTelemetrySubscriptionsResponse {
	resp := r.ResponseKind().(*kmsg.GetTelemetrySubscriptionsResponse)
	resp.ClientInstanceID = r.ClientInstanceID
	if resp.ClientInstanceID == [16]byte{} {
		_, _ = rand.Read(resp.ClientInstanceID[:])
		resp.ClientInstanceID[6] = resp.ClientInstanceID[6]&0x0f | 0x40 // a version-4 UUID
		resp.ClientInstanceID[8] = resp.ClientInstanceID[8]&0x3f | 0x80
	}
	resp.SubscriptionID = telemetrySubscription
	for _, c := range telemetryCodecs {
		resp.AcceptedCompressionTypes = append(resp.AcceptedCompressionTypes, int8(c))
	}
	resp.PushIntervalMillis, resp.TelemetryMaxBytes = int32(telemetryPushInterval.Milliseconds()), telemetryMaxBytes
	resp.DeltaTemporality = false
	resp.RequestedMetrics = []string{""} // every metric (KIP-714: one empty prefix)
	if t.off {
		resp.RequestedMetrics = []string{} // none: nothing is pushed
	}
	return resp
}

func (t *telemetry) pushTelemetry(r *kmsg.PushTelemetryRequest) *kmsg.PushTelemetryResponse {
	resp := r.ResponseKind().(*kmsg.PushTelemetryResponse)
	switch {
	case t.off:
		resp.ErrorCode = kerr.UnknownSubscriptionID.Code // (no subscription asks for metrics)
		return resp
	case r.ClientInstanceID == [16]byte{}:
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp
	case r.SubscriptionID != telemetrySubscription:
		resp.ErrorCode = kerr.UnknownSubscriptionID.Code
		return resp
	case len(r.Metrics) > telemetryMaxBytes:
		resp.ErrorCode = kerr.TelemetryTooLarge.Code
		return resp
	case r.CompressionType != int8(record.None) && !slices.Contains(telemetryCodecs, record.Compression(r.CompressionType)):
		resp.ErrorCode = kerr.UnsupportedCompressionType.Code
		return resp
	}
	now := t.now()
	t.mu.Lock()
	c := t.clients[r.ClientInstanceID]
	if c != nil && !r.Terminating && now.Sub(c.lastPush) < telemetryPushInterval/2 {
		t.mu.Unlock()
		resp.ErrorCode = kerr.ThrottlingQuotaExceeded.Code // pushed before its interval
		return resp
	}
	t.mu.Unlock()
	data, err := record.Decompress(nil, record.Compression(r.CompressionType), r.Metrics, 8*telemetryMaxBytes)
	var points []*pushedSeries
	if err == nil {
		points, err = decodeOTLP(data)
	}
	if err != nil {
		resp.ErrorCode = kerr.InvalidRecord.Code
		return resp
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.expireLocked(now)
	if r.Terminating {
		delete(t.clients, r.ClientInstanceID) // its last push: nothing more to export
		return resp
	}
	if c = t.clients[r.ClientInstanceID]; c == nil {
		if len(t.clients) >= telemetryMaxClients {
			return resp // (its metrics are not kept)
		}
		c = &clientMetrics{series: map[string]*pushedSeries{}}
		t.clients[r.ClientInstanceID] = c
	}
	c.lastPush = now
	for _, p := range points {
		key := p.name + "\x00" + strings.Join(p.labels, "\x00") + "\x00" + strings.Join(p.values, "\x00")
		if c.series[key] == nil && len(c.series) >= telemetryMaxSeries {
			continue
		}
		c.series[key] = p
	}
	return resp
}

// expireLocked drops the clients that stopped pushing.
func (t *telemetry) expireLocked(now time.Time) {
	for id, c := range t.clients {
		if now.Sub(c.lastPush) > telemetryExpiry*telemetryPushInterval {
			delete(t.clients, id)
		}
	}
}

// telemetryName is an OTLP metric name as a Prometheus one:
// seglog_client_ and the name, sanitized.
func telemetryName(name string) string { return "seglog_client_" + sanitized(name) }

// sanitized is s with every character outside [a-zA-Z0-9_] an underscore.
func sanitized(s string) string {
	var sb strings.Builder
	for _, r := range s {
		if r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_') {
			sb.WriteRune(r)
		} else {
			sb.WriteByte('_')
		}
	}
	return sb.String()
}

// Describe and Collect make the pushed metrics a Prometheus collector. A
// family is what its first series makes it — gauge or counter, its label
// names — and a series that does not fit it, or repeats one (two pushed
// names become one Prometheus name), is left out: a client cannot make a
// scrape fail.
func (t *telemetry) Describe(chan<- *prometheus.Desc) {} // unchecked: the families come and go

func (t *telemetry) Collect(ch chan<- prometheus.Metric) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.expireLocked(t.now())
	type family struct {
		desc    *prometheus.Desc
		keys    []string
		counter bool
	}
	families := map[string]family{}
	seen := map[string]bool{}
	for id, c := range t.clients {
		instance := uuidString(id)
		for _, s := range c.series {
			name := telemetryName(s.name)
			keys := append([]string{"client_instance_id"}, sanitizedKeys(s.labels)...)
			f, ok := families[name]
			if !ok {
				f = family{desc: prometheus.NewDesc(name, "Pushed by clients (KIP-714).", keys, nil), keys: keys, counter: s.counter}
				families[name] = f
			}
			values := append([]string{instance}, s.values...)
			series := name + "\x00" + strings.Join(values, "\x00")
			if !slices.Equal(f.keys, keys) || f.counter != s.counter || seen[series] {
				continue
			}
			seen[series] = true
			typ := prometheus.GaugeValue
			if s.counter {
				typ = prometheus.CounterValue
			}
			if m, err := prometheus.NewConstMetric(f.desc, typ, s.value, values...); err == nil {
				ch <- m
			}
		}
	}
}

func sanitizedKeys(keys []string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = sanitized(k)
	}
	return out
}

func uuidString(id [16]byte) string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", id[0:4], id[4:6], id[6:8], id[8:10], id[10:16])
}

// errOTLP is a MetricsData that does not decode.
var errOTLP = errors.New("broker: pushed metrics are not an OTLP MetricsData")

// decodeOTLP reads an OTLP MetricsData (opentelemetry-proto's
// metrics.proto): every Gauge and Sum data point, with its attributes and
// the resource's, as series. Histograms and summaries are left out.
func decodeOTLP(b []byte) ([]*pushedSeries, error) {
	var out []*pushedSeries
	err := eachField(b, func(num protowire.Number, v []byte) error {
		if num != 1 { // resource_metrics
			return nil
		}
		var resource map[string]string
		return eachField(v, func(num protowire.Number, v []byte) error {
			switch num {
			case 1: // resource
				return eachField(v, func(num protowire.Number, v []byte) error {
					if num == 1 { // attributes
						if resource == nil {
							resource = map[string]string{}
						}
						return keyValue(v, resource)
					}
					return nil
				})
			case 2: // scope_metrics
				return eachField(v, func(num protowire.Number, v []byte) error {
					if num != 2 { // metrics
						return nil
					}
					return decodeMetric(v, resource, &out)
				})
			}
			return nil
		})
	})
	return out, err
}

// decodeMetric reads one Metric's gauge or sum data points.
func decodeMetric(b []byte, resource map[string]string, out *[]*pushedSeries) error {
	var name string
	var points [][]byte
	counter := false
	err := eachField(b, func(num protowire.Number, v []byte) error {
		switch num {
		case 1:
			name = string(v)
		case 5, 7: // gauge, sum: their data points, and a sum's is_monotonic
			return eachFieldWire(v, func(n protowire.Number, typ protowire.Type, pv []byte, x uint64) error {
				switch {
				case n == 1 && typ == protowire.BytesType:
					points = append(points, pv)
				case num == 7 && n == 3 && typ == protowire.VarintType:
					counter = x != 0
				}
				return nil
			})
		}
		return nil
	})
	if err != nil || name == "" {
		return err
	}
	for _, p := range points {
		attrs := maps.Clone(resource)
		if attrs == nil {
			attrs = map[string]string{}
		}
		var value float64
		var has bool
		err := eachFieldWire(p, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
			switch {
			case num == 7 && typ == protowire.BytesType: // attributes
				return keyValue(v, attrs)
			case num == 4 && typ == protowire.Fixed64Type: // as_double
				value, has = math.Float64frombits(x), true
			case num == 6 && typ == protowire.Fixed64Type: // as_int
				value, has = float64(int64(x)), true
			}
			return nil
		})
		if err != nil {
			return err
		}
		if !has {
			continue
		}
		s := &pushedSeries{name: name, value: value, counter: counter}
		for _, k := range slices.Sorted(maps.Keys(attrs)) {
			s.labels, s.values = append(s.labels, k), append(s.values, attrs[k])
		}
		*out = append(*out, s)
	}
	return nil
}

// keyValue reads a KeyValue into m: the key and its value as a string.
func keyValue(b []byte, m map[string]string) error {
	var key, val string
	err := eachField(b, func(num protowire.Number, v []byte) error {
		switch num {
		case 1:
			key = string(v)
		case 2: // AnyValue
			return eachFieldWire(v, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
				switch {
				case num == 1 && typ == protowire.BytesType:
					val = string(v)
				case num == 2 && typ == protowire.VarintType:
					val = fmt.Sprint(x != 0)
				case num == 3 && typ == protowire.VarintType:
					val = fmt.Sprint(int64(x))
				case num == 4 && typ == protowire.Fixed64Type:
					val = fmt.Sprint(math.Float64frombits(x))
				}
				return nil
			})
		}
		return nil
	})
	if err == nil && key != "" {
		m[key] = val
	}
	return err
}

// eachField calls fn with every length-delimited field of a message.
func eachField(b []byte, fn func(protowire.Number, []byte) error) error {
	return eachFieldWire(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if typ == protowire.BytesType {
			return fn(num, v)
		}
		return nil
	})
}

// eachFieldWire walks a message's fields: fn gets each with its bytes
// (length-delimited) or its number (varint, fixed).
func eachFieldWire(b []byte, fn func(protowire.Number, protowire.Type, []byte, uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errOTLP
		}
		b = b[n:]
		var v []byte
		var x uint64
		switch typ {
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		case protowire.Fixed64Type:
			x, n = protowire.ConsumeFixed64(b)
		case protowire.Fixed32Type:
			var x32 uint32
			x32, n = protowire.ConsumeFixed32(b)
			x = uint64(x32)
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return errOTLP
		}
		b = b[n:]
		if err := fn(num, typ, v, x); err != nil {
			return err
		}
	}
	return nil
}
