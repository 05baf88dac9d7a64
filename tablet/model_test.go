package tablet

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog/internal/testenv"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/vfs"
)

// model is what a tablet should hold: the value of every offset ever
// appended and not truncated (deleted ones too: a crash may bring back a
// deletion that was not yet durable), and the log start.
type model struct {
	start  int64
	values []string // values[o] is offset o; "" for one a crash took
	acked  int64    // offsets below it were made durable
}

func (m *model) end() int64 { return int64(len(m.values)) }

func (m *model) truncate(end int64) {
	if end < m.end() {
		m.values = m.values[:end]
	}
	m.acked = min(m.acked, end)
	m.start = min(m.start, end)
}

func (m *model) deleteBefore(o int64) { m.start = max(m.start, o) }

// A tablet against the model over random appends, reads, rolls,
// truncations, retention, deletions, clean reopens and crashes through the
// simulator. The seed is logged; SEGLOG_SEED replays it.
func TestTabletAgainstModel(t *testing.T) {
	seed := testenv.Seed(t)
	rng := rand.New(rand.NewPCG(seed, 9))
	mem := vfs.NewMem()
	e := newEnv(t, mem, "/data")
	cfg := DefaultConfig()
	cfg.SegmentBytes = 600
	cfg.SegmentIndexBytes = 4096
	cfg.IndexIntervalBytes = 100
	cfg.FileDeleteDelayMs = 0
	tab := e.create(cfg)
	m := &model{}
	next := 0
	check := func(step int, what string) {
		msg := fmt.Sprintf("seed %d step %d (%s)", seed, step, what)
		o := tab.Offsets()
		require.Equal(t, m.end(), o.LogEndOffset, msg)
		require.Equal(t, m.start, o.LogStartOffset, msg)
		from := m.start + rng.Int64N(m.end()-m.start+1)
		var got []string
		for _, r := range readAll(t, tab, from, ReadLogEnd) {
			got = append(got, string(r.Value))
		}
		var want []string
		for _, v := range m.values[from:] {
			if v != "" {
				want = append(want, v)
			}
		}
		require.Equal(t, want, got, "%s: reading from %d", msg, from)
	}
	for step := range 400 {
		var what string
		switch op := rng.IntN(100); {
		case op < 55:
			n := 1 + rng.IntN(4)
			b := record.NewBuilder(record.None)
			var vals []string
			for range n {
				next++
				v := fmt.Sprintf("v%d-%s", next, string(make([]byte, rng.IntN(60))))
				vals = append(vals, v)
				require.NoError(t, b.Append(record.Record{Timestamp: e.clock.Now().UnixMilli(), Value: []byte(v)}))
			}
			batch, err := b.Build()
			require.NoError(t, err)
			sync := rng.IntN(4) == 0
			res, err := tab.Append(batch.Bytes(), AppendOptions{Sync: sync})
			require.NoError(t, err)
			require.Equal(t, m.end(), res.FirstOffset)
			m.values = append(m.values, vals...)
			if sync {
				m.acked = m.end()
			}
			what = "append"
		case op < 62:
			if m.end() > m.start {
				to := m.start + rng.Int64N(m.end()-m.start)
				require.NoError(t, tab.TruncateTo(to))
				m.truncate(tab.Offsets().LogEndOffset) // whole batches go
				what = fmt.Sprintf("truncate to %d", to)
			}
		case op < 68:
			to := m.start + rng.Int64N(m.end()-m.start+1)
			_, err := tab.DeleteRecordsBefore(to)
			require.NoError(t, err)
			m.deleteBefore(to)
			what = fmt.Sprintf("delete records before %d", to)
		case op < 72:
			c := tab.Config()
			c.RetentionBytes = int64(rng.IntN(3000))
			require.NoError(t, tab.SetConfig(c))
			_, err := tab.ApplyRetention()
			require.NoError(t, err)
			m.deleteBefore(tab.Offsets().LogStartOffset)
			c.RetentionBytes = -1
			require.NoError(t, tab.SetConfig(c))
			what = "retention"
		case op < 78:
			require.NoError(t, tab.Flush())
			m.acked = m.end()
			what = "flush"
		case op < 84:
			e.reopen()
			tab = e.tablet()
			m.acked = m.end()
			what = "clean reopen"
		case op < 92:
			mode := []vfs.CrashMode{vfs.CrashKeepAll, vfs.CrashDropAll}[rng.IntN(2)]
			after := mem.Crash(mode, rng.Uint64())
			if testing.Verbose() {
				names, _ := after.List(tab.Dir())
				for _, n := range names {
					st, _ := after.Stat(tab.Dir() + "/" + n)
					t.Logf("  after crash: %s %d", n, st.Size())
				}
			}
			e.m.Close() // the crashed image is taken; what the old manager does now does not matter
			mem = after
			e.fsys = mem
			e.open()
			tab = e.tablet()
			if testing.Verbose() {
				for _, rt := range e.m.Loaded.Tablets {
					for _, c := range rt.Report {
						t.Logf("  recovery: %v", c)
					}
				}
			}
			end := tab.Offsets().LogEndOffset
			require.GreaterOrEqual(t, end, m.acked, "seed %d step %d: a durable record was lost (%v)", seed, step, mode)
			if mode == vfs.CrashKeepAll {
				require.Equal(t, m.end(), end, "seed %d step %d: nothing is lost without a power cut", seed, step)
			}
			m.truncate(end)
			m.start = tab.Offsets().LogStartOffset // a deletion not yet durable may be undone
			// Unacknowledged records may be gone from a segment's tail while
			// a later segment's survived (recovery reports the gap).
			present := map[int64]bool{}
			for _, r := range readAll(t, tab, m.start, ReadLogEnd) {
				present[r.Offset] = true
			}
			for o := max(m.start, m.acked); o < end; o++ {
				if !present[o] {
					m.values[o] = ""
				}
			}
			m.acked = end
			what = fmt.Sprintf("crash (%v)", mode)
		default:
			e.clock.Advance(1000)
			what = "time passes"
		}
		logStep(t, tab, step, what)
		check(step, what)
	}
}

// Readers never see a torn or foreign batch while a writer appends and
// rolls and old segments are deleted under them.
func TestConcurrentReadsDuringAppendsRollsAndDeletes(t *testing.T) {
	// Readers and Segments (the largest timestamp of the active segment
	// included) run beside the appends, rolls and deletions.
	e := newEnv(t, vfs.NewMem(), "/data")
	cfg := DefaultConfig()
	cfg.SegmentBytes = 2000
	cfg.SegmentIndexBytes = 4096
	cfg.FileDeleteDelayMs = 0
	tab := e.create(cfg)
	const appends = 600
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for r := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(r), 1))
			for {
				select {
				case <-stop:
					return
				default:
				}
				o := tab.Offsets()
				from := o.LogStartOffset + rng.Int64N(o.LogEndOffset-o.LogStartOffset+1)
				iso := []Isolation{ReadHighWatermark, ReadCommitted, ReadLogEnd}[rng.IntN(3)]
				res, err := tab.Read(from, ReadOptions{MaxBytes: 1 + rng.IntN(3000), Isolation: iso, MinOneMessage: true})
				if errors.Is(err, ErrOffsetOutOfRange) {
					continue // the log start moved past it
				}
				if !assertNoError(t, err) {
					return
				}
				data, err := res.Records.AppendTo(nil)
				res.Close()
				if !assertNoError(t, err) {
					return
				}
				prev := int64(-1)
				for len(data) > 0 {
					b, rest, err := record.ParseBatch(data)
					if !assertNoError(t, err) || !assertNoError(t, b.Verify()) {
						return
					}
					if b.BaseOffset() <= prev || b.NextOffset() > res.LogEndOffset {
						t.Errorf("batch [%d, %d] after %d, log end %d", b.BaseOffset(), b.LastOffset(), prev, res.LogEndOffset)
						return
					}
					prev, data = b.LastOffset(), rest
				}
			}
		}()
	}
	wg.Add(1)
	go func() { // what a tier service and ListOffsets ask while appends run
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, g := range tab.Segments() {
				if g.NextOffset < g.BaseOffset {
					t.Errorf("segment %d ends at %d", g.BaseOffset, g.NextOffset)
					return
				}
			}
		}
	}()
	for i := range appends {
		_, err := tab.Append(batch(t, 1+i%5, 1, 50), AppendOptions{Sync: i%50 == 0})
		require.NoError(t, err)
		if i%40 == 39 { // delete the older half under the readers
			o := tab.Offsets()
			_, err := tab.DeleteRecordsBefore(o.LogStartOffset + (o.HighWatermark-o.LogStartOffset)/2)
			require.NoError(t, err)
		}
	}
	close(stop)
	wg.Wait()
	require.Greater(t, tab.Offsets().LogStartOffset, int64(0))
}

func assertNoError(t *testing.T, err error) bool {
	if err != nil {
		t.Error(err)
		return false
	}
	return true
}
