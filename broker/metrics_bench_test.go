package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkResponseErrorCodes is what the collectors' walk over a
// response's error codes costs per request: a fetch of 16 partitions.
func BenchmarkResponseErrorCodes(b *testing.B) {
	resp := kmsg.NewPtrFetchResponse()
	st := kmsg.NewFetchResponseTopic()
	for p := range int32(16) {
		sp := kmsg.NewFetchResponseTopicPartition()
		sp.Partition = p
		st.Partitions = append(st.Partitions, sp)
	}
	resp.Topics = append(resp.Topics, st)
	m := newMetrics()
	b.ReportAllocs()
	for b.Loop() {
		m.answered(header{key: 1, version: 12}, resp, 100, 1000)
	}
}

// BenchmarkRequestCounted is what counting a request by API and version
// costs, from many connections at once (the per-request path of every
// API).
func BenchmarkRequestCounted(b *testing.B) {
	m := newMetrics()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.answered(header{key: 0, version: 11}, nil, 100, 0)
		}
	})
}
