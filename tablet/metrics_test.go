package tablet

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/vfs"
	"github.com/seglog/seglog/writerstate"
)

// gather returns each metric's value by name and label values.
func gather(t *testing.T, c prometheus.Collector) map[string]float64 {
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				key += "|" + l.GetName() + "=" + l.GetValue()
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				out[key] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[key] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[key+"|count"] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

func TestCollector(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/data")
	tab := e.create(DefaultConfig())
	for i := range 3 {
		_, err := tab.Append(producerBatch(t, 9, 0, int32(i), 1, false, 1), AppendOptions{Sync: i == 2})
		require.NoError(t, err)
	}
	res, err := tab.Append(producerBatch(t, 9, 0, 2, 1, false, 1), AppendOptions{})
	require.NoError(t, err)
	require.True(t, res.Duplicate)
	_, err = tab.Append(producerBatch(t, 9, 0, 7, 1, false, 1), AppendOptions{})
	require.ErrorIs(t, err, writerstate.ErrOutOfOrderSequence)
	_, err = tab.Append([]byte("not a batch"), AppendOptions{})
	require.ErrorIs(t, err, record.ErrCorruptBatch)

	got := gather(t, e.m.Collector())
	l := "|partition=0|topic=events"
	require.Equal(t, 3.0, got["seglog_appends_total"+l])
	require.Equal(t, 3.0, got["seglog_append_records_total"+l])
	require.Equal(t, 1.0, got["seglog_duplicates_total"+l])
	require.Equal(t, 1.0, got["seglog_rejections_total|error=OUT_OF_ORDER_SEQUENCE_NUMBER"+l])
	require.Equal(t, 1.0, got["seglog_rejections_total|error=CORRUPT_MESSAGE"+l])
	require.Equal(t, 3.0, got["seglog_offset|kind=log_end"+l])
	require.Equal(t, 0.0, got["seglog_offset|kind=recovery_point"+l], "Sync appends leave the recovery point")
	require.Equal(t, 3.0, got["seglog_offset|kind=durable"+l], "the Sync append made all three durable")
	require.Equal(t, 1.0, got["seglog_segments"+l])
	require.Positive(t, got["seglog_flushes_total"+l])
	require.Equal(t, got["seglog_flushes_total"+l], got["seglog_flush_seconds"+l+"|count"])
	require.Equal(t, 0.0, got["seglog_clean_shutdown"], "a new directory")
	require.Equal(t, float64(tab.OpenFiles()), got["seglog_open_files"+l])
	require.GreaterOrEqual(t, got["seglog_open_files"+l], 1.0, "the active segment's .log at least")
}

// A compacted tablet's cleanings are counted.
func TestCollectorCleaner(t *testing.T) {
	e := newEnv(t, vfs.NewMem(), "/data")
	tab := e.create(compactConfig())
	for i := range 10 {
		_, err := tab.Append(kvBatch(t, 1, kv{key: "k", value: fmt.Sprint(i)}), AppendOptions{})
		require.NoError(t, err)
	}
	rollAndFlush(t, tab)
	res, err := tab.Clean(CleanOptions{})
	require.NoError(t, err)
	got := gather(t, e.m.Collector())
	l := "|partition=0|topic=events"
	require.Equal(t, 1.0, got["seglog_cleaner_cleanings_total"+l])
	require.Equal(t, 9.0, got["seglog_cleaner_removed_records_total"+l])
	require.Equal(t, float64(res.MapBytesRead+res.BytesRead), got["seglog_cleaner_read_bytes_total"+l])
	require.Equal(t, float64(res.BytesWritten), got["seglog_cleaner_written_bytes_total"+l])
}
