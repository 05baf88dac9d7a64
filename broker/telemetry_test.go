package broker

import (
	"bytes"
	"compress/gzip"
	"math"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/protobuf/encoding/protowire"
)

// otlpPoint is a data point of an OTLP metric: a value and attributes.
type otlpPoint struct {
	value float64
	attrs map[string]string
}

// otlpMetrics encodes an OTLP MetricsData of one resource (client_id)
// holding gauges and monotonic sums, as a KIP-714 client pushes it.
func otlpMetrics(gauges, sums map[string][]otlpPoint) []byte {
	kv := func(k, v string) []byte {
		var any []byte
		any = protowire.AppendTag(any, 1, protowire.BytesType)
		any = protowire.AppendString(any, v)
		var b []byte
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, k)
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		return protowire.AppendBytes(b, any)
	}
	point := func(p otlpPoint) []byte {
		var b []byte
		for k, v := range p.attrs {
			b = protowire.AppendTag(b, 7, protowire.BytesType)
			b = protowire.AppendBytes(b, kv(k, v))
		}
		b = protowire.AppendTag(b, 4, protowire.Fixed64Type)
		return protowire.AppendFixed64(b, math.Float64bits(p.value))
	}
	metric := func(name string, field protowire.Number, points []otlpPoint) []byte {
		var data []byte
		for _, p := range points {
			data = protowire.AppendTag(data, 1, protowire.BytesType)
			data = protowire.AppendBytes(data, point(p))
		}
		if field == 7 {
			data = protowire.AppendTag(data, 3, protowire.VarintType)
			data = protowire.AppendVarint(data, 1) // monotonic
		}
		var b []byte
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, name)
		b = protowire.AppendTag(b, field, protowire.BytesType)
		return protowire.AppendBytes(b, data)
	}
	var scope []byte
	for name, ps := range gauges {
		scope = protowire.AppendTag(scope, 2, protowire.BytesType)
		scope = protowire.AppendBytes(scope, metric(name, 5, ps))
	}
	for name, ps := range sums {
		scope = protowire.AppendTag(scope, 2, protowire.BytesType)
		scope = protowire.AppendBytes(scope, metric(name, 7, ps))
	}
	var resource []byte
	resource = protowire.AppendTag(resource, 1, protowire.BytesType)
	resource = protowire.AppendBytes(resource, kv("client_id", "app-1"))
	var rm []byte
	rm = protowire.AppendTag(rm, 1, protowire.BytesType)
	rm = protowire.AppendBytes(rm, resource)
	rm = protowire.AppendTag(rm, 2, protowire.BytesType)
	rm = protowire.AppendBytes(rm, scope)
	var out []byte
	out = protowire.AppendTag(out, 1, protowire.BytesType)
	return protowire.AppendBytes(out, rm)
}

// Client telemetry (KIP-714): a client gets an instance id and a
// subscription to every metric, pushes gzip-compressed OTLP metrics, and
// they are exported as seglog_client_* series with its instance id and
// attributes; a push too soon, for another subscription, or that does not
// decode is refused; a client's series are bounded; a terminating push
// ends its series; seglog.client.telemetry.enable=false asks for none.
func TestClientTelemetry(t *testing.T) {
	b, _, addr := testBroker(t, Options{})
	c := dialRaw(t, addr)
	sub := kmsg.NewPtrGetTelemetrySubscriptionsResponse()
	c.do(kmsg.NewPtrGetTelemetrySubscriptionsRequest(), 0, sub)
	require.Zero(t, sub.ErrorCode)
	require.NotEqual(t, [16]byte{}, sub.ClientInstanceID, "an instance id for the client")
	require.Equal(t, []string{""}, sub.RequestedMetrics, "every metric")
	require.Contains(t, sub.AcceptedCompressionTypes, int8(1))

	payload := otlpMetrics(map[string][]otlpPoint{
		"org.apache.kafka.producer.record.queue.time.avg": {{value: 2.5, attrs: map[string]string{"topic": "orders"}}},
	}, map[string][]otlpPoint{
		"org.apache.kafka.producer.request.rate": {{value: 42}},
	})
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	_, err := w.Write(payload)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	push := func(id [16]byte, subscription int32, codec int8, data []byte, terminating bool) int16 {
		r := kmsg.NewPtrPushTelemetryRequest()
		r.ClientInstanceID, r.SubscriptionID, r.CompressionType, r.Metrics, r.Terminating = id, subscription, codec, data, terminating
		resp := kmsg.NewPtrPushTelemetryResponse()
		c.do(r, 0, resp)
		return resp.ErrorCode
	}
	require.Zero(t, push(sub.ClientInstanceID, sub.SubscriptionID, 1, gz.Bytes(), false))
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(b.Collector()))
	families, err := reg.Gather()
	require.NoError(t, err)
	found := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			labels := ""
			for _, l := range m.GetLabel() {
				if l.GetName() != "client_instance_id" {
					labels += l.GetName() + "=" + l.GetValue() + ","
				} else {
					require.Equal(t, uuidString(sub.ClientInstanceID), l.GetValue())
				}
			}
			found[f.GetName()+"{"+labels+"}"] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	require.Equal(t, 2.5, found["seglog_client_org_apache_kafka_producer_record_queue_time_avg{client_id=app-1,topic=orders,}"])
	require.Equal(t, 42.0, found["seglog_client_org_apache_kafka_producer_request_rate{client_id=app-1,}"])

	require.Equal(t, kerr.ThrottlingQuotaExceeded.Code, push(sub.ClientInstanceID, sub.SubscriptionID, 1, gz.Bytes(), false), "before its interval")
	other := [16]byte{9}
	require.Equal(t, kerr.UnknownSubscriptionID.Code, push(other, 7, 0, payload, false))
	require.Equal(t, kerr.InvalidRecord.Code, push(other, sub.SubscriptionID, 0, []byte{0xff, 0xff, 0xff}, false))
	require.Equal(t, kerr.UnsupportedCompressionType.Code, push(other, sub.SubscriptionID, 9, payload, false))

	many := map[string][]otlpPoint{}
	for i := range 2 * telemetryMaxSeries {
		many["m"] = append(many["m"], otlpPoint{value: float64(i), attrs: map[string]string{"i": string(rune('a'+i%26)) + string(rune('a'+i/26))}})
	}
	require.Zero(t, push(other, sub.SubscriptionID, 0, otlpMetrics(many, nil), false))
	b.telemetry.mu.Lock()
	require.Len(t, b.telemetry.clients[other].series, telemetryMaxSeries, "bounded")
	b.telemetry.mu.Unlock()
	require.Zero(t, push(other, sub.SubscriptionID, 0, payload, true), "its last push")
	b.telemetry.mu.Lock()
	require.NotContains(t, b.telemetry.clients, other, "its series end with it")
	b.telemetry.mu.Unlock()

	_, _, offAddr := testBroker(t, Options{NoClientTelemetry: true})
	off := kmsg.NewPtrGetTelemetrySubscriptionsResponse()
	dialRaw(t, offAddr).do(kmsg.NewPtrGetTelemetrySubscriptionsRequest(), 0, off)
	require.Empty(t, off.RequestedMetrics, "no metric asked for")
}

// Pushed names that become one Prometheus name (a.b and a_b), or one name
// pushed as a gauge by a client and a counter by another, do not break a
// scrape: the family keeps its first kind and label names.
func TestClientTelemetryNamesThatCollide(t *testing.T) {
	b, _, addr := testBroker(t, Options{})
	c := dialRaw(t, addr)
	push := func(id byte, gauges, sums map[string][]otlpPoint) {
		r := kmsg.NewPtrPushTelemetryRequest()
		r.ClientInstanceID, r.SubscriptionID, r.Metrics = [16]byte{id}, telemetrySubscription, otlpMetrics(gauges, sums)
		resp := kmsg.NewPtrPushTelemetryResponse()
		c.do(r, 0, resp)
		require.Zero(t, resp.ErrorCode)
	}
	push(1, map[string][]otlpPoint{"a.b": {{value: 1}}, "a_b": {{value: 2}}}, nil)
	push(2, nil, map[string][]otlpPoint{"a.b": {{value: 3}}})
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(b.Collector()))
	families, err := reg.Gather()
	require.NoError(t, err, "a scrape succeeds")
	n := 0
	for _, f := range families {
		if f.GetName() == "seglog_client_a_b" {
			n += len(f.GetMetric())
		}
	}
	require.Positive(t, n)
}
