package bench

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seglog/seglog/offsetindex"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/tablet"
	"github.com/seglog/seglog/timeindex"
	"github.com/seglog/seglog/vfs"
)

// filled writes bytes of batches (records of size, n to a batch) to one
// tablet in a fresh data directory, closes it cleanly and reopens it. It
// returns the manager, the tablet and the tablet's .log files.
func filled(dir string, bytes int64, n, size int, progress func(int64, int64)) (*tablet.Manager, *tablet.Tablet, []string, error) {
	return filledSegments(dir, bytes, n, size, 256<<20, progress)
}

// filledSegments is filled with segments of segBytes.
func filledSegments(dir string, bytes int64, n, size int, segBytes int64, progress func(int64, int64)) (*tablet.Manager, *tablet.Tablet, []string, error) {
	batch, err := buildBatch(n, size, 5)
	if err != nil {
		return nil, nil, nil, err
	}
	count := max(1, bytes/int64(len(batch)))
	cfg := tablet.DefaultConfig()
	cfg.SegmentBytes = segBytes
	m, tabs, err := openManager(dir, 1, cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	if _, err := tabletAppend(tabs, batch, count, 1, false, func(d int64) { progress(d, count) }); err != nil {
		m.Close()
		return nil, nil, nil, err
	}
	if err := m.Close(); err != nil {
		return nil, nil, nil, err
	}
	m, tabs, err = openManager(dir, 1, cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	var logs []string
	for _, s := range tabs[0].Segments() {
		logs = append(logs, s.Path)
	}
	return m, tabs[0], logs, nil
}

// readAll reads the tablet from its start through Read and ReaderAt into
// buf, walking batch headers for the next offset. It returns the bytes and
// batches read.
func readAll(t *tablet.Tablet, buf []byte) (int64, int64, error) {
	var total, batches int64
	res := new(tablet.FetchResult) // reused: a read allocates nothing
	for off := t.Offsets().LogStartOffset; ; {
		if err := t.ReadInto(res, off, tablet.ReadOptions{MaxBytes: len(buf), Isolation: tablet.ReadLogEnd, MinOneMessage: true}); err != nil {
			return 0, 0, err
		}
		size := int(res.Records.Size())
		if size == 0 {
			res.Close()
			return total, batches, nil
		}
		if size > len(buf) {
			res.Close()
			return 0, 0, fmt.Errorf("bench: a %d-byte batch does not fit the %d-byte buffer", size, len(buf))
		}
		_, err := res.Records.ReadAt(buf[:size], 0)
		res.Close()
		if err != nil && err != io.EOF {
			return 0, 0, err
		}
		for data := buf[:size]; len(data) > 0; {
			b, rest, err := record.ParseBatch(data)
			if err != nil {
				return 0, 0, err
			}
			off, data = b.NextOffset(), rest
			batches++
		}
		total += int64(size)
	}
}

// sendAll sends the tablet from its start to w through Slice.WriteTo
// (sendfile), reading only the batch headers for the next offset.
func sendAll(t *tablet.Tablet, w io.Writer, max int) (int64, error) {
	var total int64
	var hdr [record.HeaderSize]byte
	res := new(tablet.FetchResult)
	for off := t.Offsets().LogStartOffset; ; {
		if err := t.ReadInto(res, off, tablet.ReadOptions{MaxBytes: max, Isolation: tablet.ReadLogEnd, MinOneMessage: true}); err != nil {
			return 0, err
		}
		size := res.Records.Size()
		if size == 0 {
			res.Close()
			return total, nil
		}
		for pos := int64(0); pos < size; {
			_, err := res.Records.ReadAt(hdr[:], pos)
			h, n, herr := record.ParseHeader(hdr[:])
			if err = errors.Join(err, herr); err != nil {
				res.Close()
				return 0, err
			}
			off, pos = h.BaseOffset+int64(h.LastOffsetDelta)+1, pos+n
		}
		n, err := res.Records.WriteTo(w)
		res.Close()
		if err != nil {
			return 0, err
		}
		total += n
	}
}

// loopback returns a connected TCP socket on 127.0.0.1 whose peer
// discards everything, and a function that closes both.
func loopback() (net.Conn, func(), error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := l.Accept()
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, c)
		c.Close()
	}()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		l.Close()
		return nil, nil, err
	}
	return c, func() { c.Close(); l.Close(); <-done }, nil
}

// runRead: sequential reads of a tablet from the page cache, through
// ReaderAt into a buffer and through WriteTo a loopback socket, against
// read(2) of the same files and a raw sendfile of them.
func runRead(o Options) (*Result, error) {
	dir, err := scratch(o, "read")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	m, t, logs, err := filled(filepath.Join(dir, "data"), o.Bytes, o.BatchRecords, o.RecordSize,
		func(d, n int64) { o.Progress("read: writing", d, n) })
	if err != nil {
		return nil, err
	}
	defer m.Close()
	buf := make([]byte, 1<<20)
	if _, _, err := rawRead(logs, buf); err != nil { // into the page cache
		return nil, err
	}
	conn, closeConn, err := loopback()
	if err != nil {
		return nil, err
	}
	defer closeConn()
	var readerAt, raw, send, rawSend []float64
	var allocsPerBatch float64
	for rep := range o.Repeat {
		o.Progress("read", int64(rep), int64(o.Repeat))
		n, took, err := rawRead(logs, buf)
		if err != nil {
			return nil, err
		}
		raw = append(raw, float64(n)/took.Seconds()/1e6)

		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		n, batches, err := readAll(t, buf)
		took = time.Since(start)
		runtime.ReadMemStats(&after)
		if err != nil {
			return nil, err
		}
		readerAt = append(readerAt, float64(n)/took.Seconds()/1e6)
		allocsPerBatch = float64(after.Mallocs-before.Mallocs) / float64(max(batches, 1))

		start = time.Now()
		var sent int64
		for _, p := range logs {
			f, err := os.Open(p)
			if err != nil {
				return nil, err
			}
			k, err := io.Copy(conn, f) // sendfile
			f.Close()
			if err != nil {
				return nil, err
			}
			sent += k
		}
		rawSend = append(rawSend, float64(sent)/time.Since(start).Seconds()/1e6)
		start = time.Now()
		sent, err = sendAll(t, conn, 1<<20)
		if err != nil {
			return nil, err
		}
		send = append(send, float64(sent)/time.Since(start).Seconds()/1e6)
	}
	o.Progress("read", int64(o.Repeat), int64(o.Repeat))
	f := figure("read.throughput", "MB/s", readerAt, "read(2) of the same files", raw)
	f = f.target("≥ 0.9 × baseline", f.Ratio >= 0.9)
	allocs := Figure{Name: "read.allocs-per-batch", Value: allocsPerBatch, Unit: "allocs", Min: allocsPerBatch, Max: allocsPerBatch}
	allocs = allocs.target("0", allocsPerBatch < 0.5)
	w := figure("read.writeto", "MB/s", send, "sendfile of the same files to the socket", rawSend)
	return &Result{Workload: "read", Params: fmt.Sprintf("%d MiB in batches of %d × %d B, 1 MiB reads", o.Bytes>>20, o.BatchRecords, o.RecordSize),
		Figures: []Figure{f, allocs, w}}, nil
}

// dropCache asks the kernel to forget the cached pages of the files.
func dropCache(paths []string) error {
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		err = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// runRandomRead: one record (a batch of one) at a random offset, hot
// (page cache) and cold (its pages dropped before each read), against a
// pread of the same size at a random batch position of the same files.
func runRandomRead(o Options) (*Result, error) {
	dir, err := scratch(o, "random-read")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	bytes := min(o.Bytes, 256<<20)
	m, t, logs, err := filled(filepath.Join(dir, "data"), bytes, 1, o.RecordSize,
		func(d, n int64) { o.Progress("random-read: writing", d, n) })
	if err != nil {
		return nil, err
	}
	defer m.Close()
	end := t.Offsets().LogEndOffset
	files := make([]*os.File, len(logs))
	sizes := make([]int64, len(logs))
	for i, p := range logs {
		if files[i], err = os.Open(p); err != nil {
			return nil, err
		}
		defer files[i].Close()
		info, err := files[i].Stat()
		if err != nil {
			return nil, err
		}
		sizes[i] = info.Size()
	}
	batchSize := int64(o.RecordSize + 70)
	buf := make([]byte, 64<<10)
	rng := rand.New(rand.NewPCG(7, 8))
	res := new(tablet.FetchResult)
	ours := func() (float64, error) {
		off := rng.Int64N(end)
		start := time.Now()
		if err := t.ReadInto(res, off, tablet.ReadOptions{MaxBytes: 1, Isolation: tablet.ReadLogEnd, MinOneMessage: true}); err != nil {
			return 0, err
		}
		size := int(res.Records.Size())
		_, err = res.Records.ReadAt(buf[:size], 0)
		res.Close()
		took := time.Since(start)
		if err != nil && err != io.EOF {
			return 0, err
		}
		if b, _, err := record.ParseBatch(buf[:size]); err != nil || b.BaseOffset() != off {
			return 0, fmt.Errorf("bench: reading offset %d gave the batch at %d (%v)", off, b.BaseOffset(), err)
		}
		return float64(took.Nanoseconds()) / 1e3, nil
	}
	raw := func() (float64, error) {
		i := rng.IntN(len(files))
		pos := rng.Int64N(max(1, sizes[i]/batchSize)) * batchSize
		start := time.Now()
		_, err := files[i].ReadAt(buf[:batchSize], pos)
		took := time.Since(start)
		if err != nil && err != io.EOF {
			return 0, err
		}
		return float64(took.Nanoseconds()) / 1e3, nil
	}
	sample := func(step string, n int, cold bool) (a, b []float64, err error) {
		one := func(read func() (float64, error), into *[]float64) error {
			if cold {
				if err := dropCache(logs); err != nil {
					return err
				}
			}
			us, err := read()
			*into = append(*into, us)
			return err
		}
		for i := range n {
			if i%1024 == 0 {
				o.Progress(step, int64(i), int64(n))
			}
			if err := one(ours, &a); err != nil {
				return nil, nil, err
			}
			if err := one(raw, &b); err != nil {
				return nil, nil, err
			}
		}
		o.Progress(step, int64(n), int64(n))
		return a, b, nil
	}
	if _, _, err := rawRead(logs, make([]byte, 1<<20)); err != nil { // hot: all cached
		return nil, err
	}
	hot, hotRaw, err := sample("random-read hot", o.Ops, false)
	if err != nil {
		return nil, err
	}
	cold, coldRaw, err := sample("random-read cold", max(200, o.Ops/100), true)
	if err != nil {
		return nil, err
	}
	h := latency("random-read.hot", hot, fmt.Sprintf("pread of %d B", batchSize), hotRaw)
	h = h.target("p50 ≤ 3 µs, p99 ≤ 10 µs", h.P50 <= 3 && h.P99 <= 10)
	c := latency("random-read.cold", cold, fmt.Sprintf("cold pread of %d B", batchSize), coldRaw)
	c = c.target("p50 ≤ 1.3 × baseline", c.Ratio <= 1.3)
	return &Result{Workload: "random-read", Params: fmt.Sprintf("%d records of %d B (a batch each), %d hot and %d cold reads",
		end, o.RecordSize, len(hot), len(cold)), Figures: []Figure{h, c},
		Samples: map[string][]float64{"seglog hot": hot, "pread hot": hotRaw, "seglog cold": cold, "pread cold": coldRaw}}, nil
}

// runLookup: offset → position on a full 10 MiB offset index and
// timestamp → offset on a full time index, warm-tail and random targets,
// against slices.BinarySearch over as many int64 in memory.
func runLookup(o Options) (*Result, error) {
	dir, err := scratch(o, "lookup")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	const size = 10 << 20
	oi, err := offsetindex.Open(vfs.OS, filepath.Join(dir, "0.index"), 0, offsetindex.Options{MaxIndexSize: size})
	if err != nil {
		return nil, err
	}
	defer oi.Close()
	n := size / offsetindex.EntrySize
	for i := range n {
		if err := oi.Append(int64(2*i), int32(100*i)); err != nil {
			return nil, err
		}
	}
	ti, err := timeindex.Open(vfs.OS, filepath.Join(dir, "0.timeindex"), 0, timeindex.Options{MaxIndexSize: size})
	if err != nil {
		return nil, err
	}
	defer ti.Close()
	tn := size/timeindex.EntrySize - 1
	for i := range tn {
		if err := ti.MaybeAppend(int64(1_700_000_000_000+10*i), int64(2*i), false); err != nil {
			return nil, err
		}
	}
	keys := make([]int64, n)
	for i := range keys {
		keys[i] = int64(2 * i)
	}
	rng := rand.New(rand.NewPCG(9, 10))
	random := make([]int64, 1<<16)
	warm := make([]int64, 1<<12)
	for i := range random {
		random[i] = rng.Int64N(int64(2 * n))
	}
	for i := range warm {
		warm[i] = int64(2 * (n - 1 - rng.IntN(1000)))
	}
	ops := o.Ops
	timeIt := func(targets []int64, fn func(int64) bool) float64 {
		start := time.Now()
		ok := 0
		for i := range ops {
			if fn(targets[i&(len(targets)-1)]) {
				ok++
			}
		}
		sink.Store(uint32(ok))
		return float64(time.Since(start).Nanoseconds()) / float64(ops)
	}
	offsetLookup := func(t int64) bool { e, err := oi.Lookup(t); return err == nil && e.Offset <= t }
	timeLookup := func(t int64) bool {
		e, err := ti.Lookup(1_700_000_000_000 + 5*t)
		return err == nil && e.Offset >= 0
	}
	search := func(t int64) bool { _, found := slices.BinarySearch(keys, t); return found }
	var warmR, randR, timeR, base []float64
	for rep := range o.Repeat {
		o.Progress("lookup", int64(rep), int64(o.Repeat))
		base = append(base, timeIt(random, search))
		warmR = append(warmR, timeIt(warm, offsetLookup))
		randR = append(randR, timeIt(random, offsetLookup))
		timeR = append(timeR, timeIt(random, timeLookup))
	}
	o.Progress("lookup", int64(o.Repeat), int64(o.Repeat))
	baseline := fmt.Sprintf("slices.BinarySearch over %d int64", n)
	w := figure("lookup.offset.warm-tail", "ns", warmR, baseline, base)
	w = w.target("≤ 100 ns", w.Value <= 100)
	r := figure("lookup.offset.random", "ns", randR, baseline, base)
	tm := figure("lookup.time.random", "ns", timeR, baseline, base)
	return &Result{Workload: "lookup", Params: fmt.Sprintf("full 10 MiB indexes: %d offset entries, %d time entries; %d lookups each",
		n, tn, ops), Figures: []Figure{w, r, tm}}, nil
}

// openFDs counts the process's open descriptors.
func openFDs() int {
	names, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(names)
}
