package console

import (
	"math"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
)

func histogram(count uint64, cumulative ...uint64) *dto.Histogram {
	h := &dto.Histogram{SampleCount: &count}
	for i, c := range cumulative {
		upper, c := float64(i+1), c
		h.Bucket = append(h.Bucket, &dto.Bucket{UpperBound: &upper, CumulativeCount: &c})
	}
	return h
}

// The latency quantiles are of what a histogram gained over the interval,
// interpolated within the bucket, as Prometheus' histogram_quantile.
func TestQuantile(t *testing.T) {
	prev := histogram(10, 10, 10, 10)  // ten observations at or below 1 before
	cur := histogram(110, 10, 60, 110) // then fifty in (1,2], fifty in (2,3]
	require.InDelta(t, 2.0, quantile(prev, cur, 0.5), 1e-9)
	require.InDelta(t, 2.98, quantile(prev, cur, 0.99), 1e-9)
	require.InDelta(t, 1.5, quantile(nil, histogram(2, 0, 2, 2), 0.5), 1e-9, "no previous sample: all of it")
	require.True(t, math.IsNaN(quantile(cur, cur, 0.5)), "nothing observed in the interval")
	require.True(t, math.IsNaN(quantile(nil, nil, 0.5)))
	require.Equal(t, 3.0, quantile(nil, histogram(5, 0, 0, 1), 0.99), "past the last bucket: its bound")
}

// A chart is SVG with its texts escaped, a gap where a sample has no
// value, and each series' latest value in the legend.
func TestChartSVG(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	c := chart{ID: "c<1>", Title: `a "b" <c>`, Times: []time.Time{t0, t0.Add(10 * time.Second), t0.Add(20 * time.Second), t0.Add(30 * time.Second)},
		Unit: count, Series: []series{{"x<y>", []float64{1, 2, math.NaN(), 4}}}}
	svg := string(c.SVG())
	require.NotContains(t, svg, "<1>")
	require.NotContains(t, svg, "<c>")
	require.NotContains(t, svg, "x<y>")
	require.Contains(t, svg, `data-samples="4"`)
	require.Equal(t, 1, strings.Count(svg, "<polyline"), "the first two samples joined")
	require.Equal(t, 1, strings.Count(svg, "<circle"), "the last one alone after the gap")
	require.Contains(t, svg, `data-last="4">x&lt;y&gt; 4</text>`)
	require.Contains(t, svg, ">10:00:00<")
	require.Contains(t, svg, ">10:00:30 UTC<")
	empty := string(chart{ID: "e", Title: "e", Unit: count, Series: []series{{"s", nil}}}.SVG())
	require.Contains(t, empty, `data-samples="0"`)
	require.Contains(t, empty, `>s –</text>`)
}

// A partition is under its minimum in-sync replicas when its ISR is
// smaller (an offline one is counted as offline instead).
func TestUnderMinISR(t *testing.T) {
	row := topicRow{Partitions: []partitionRow{
		{Leader: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1}, MinISR: 2},
		{Leader: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}, MinISR: 2},
		{Leader: -1, Replicas: []int32{1, 2, 3}, MinISR: 2},
		{Leader: 1, Replicas: []int32{1}, ISR: []int32{1}}, // min.insync.replicas unknown
	}}
	require.Equal(t, 1, row.UnderMinISR())
	require.Equal(t, 3, row.UnderReplicated())
	require.Equal(t, 1, row.Offline())
}

// push keeps the newest n.
func TestPush(t *testing.T) {
	var s []int
	for i := range 10 {
		s = push(s, i, 3)
	}
	require.Equal(t, []int{7, 8, 9}, s)
}
