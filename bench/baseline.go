package bench

import (
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/tablet"
	"github.com/seglog/seglog/vfs"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// buildBatch builds a plain batch of n records of size random
// (incompressible) bytes.
func buildBatch(n, size int, seed uint64) ([]byte, error) {
	rng := rand.New(rand.NewPCG(seed, 1))
	b := record.NewBuilder(record.None)
	for range n {
		v := make([]byte, size)
		for i := range v {
			v[i] = byte(rng.Uint32())
		}
		if err := b.Append(record.Record{Timestamp: 1_700_000_000_000, Value: v}); err != nil {
			return nil, err
		}
	}
	batch, err := b.Build()
	if err != nil {
		return nil, err
	}
	return batch.Bytes(), nil
}

// tp is the i-th tablet of a run.
func tp(i int) checkpoint.TopicPartition {
	return checkpoint.TopicPartition{Topic: "bench", Partition: int32(i)}
}

// openManager opens a data directory with the tablets, created with cfg.
func openManager(dir string, tablets int, cfg tablet.Config) (*tablet.Manager, []*tablet.Tablet, error) {
	m, err := tablet.OpenManager(vfs.OS, dir, tablet.ManagerOptions{Tablet: tablet.Options{Logger: quiet}})
	if err != nil {
		return nil, nil, err
	}
	var tabs []*tablet.Tablet
	for i := range tablets {
		t, err := m.GetOrCreate(tp(i), &cfg)
		if err != nil {
			m.Close()
			return nil, nil, err
		}
		tabs = append(tabs, t)
	}
	return m, tabs, nil
}

// rawAppend is the least an append does: CRC-32C of the chunk and one
// pwrite at the end of a file (and an fdatasync when sync), n chunks over
// producers goroutines with a file each. It returns the elapsed time.
func rawAppend(dir string, chunk []byte, n int64, producers int, syncEach bool) (time.Duration, error) {
	files := make([]*os.File, producers)
	for p := range files {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("raw-%d", p)))
		if err != nil {
			return 0, err
		}
		files[p] = f
	}
	defer func() {
		for _, f := range files {
			if f != nil {
				f.Close()
				os.Remove(f.Name())
			}
		}
	}()
	pos := make([]int64, producers)
	return spread(producers, n, func(p int, _ int64) error {
		if record.Checksum(chunk[21:]) == 0 {
			return fmt.Errorf("bench: a zero checksum")
		}
		if _, err := files[p].WriteAt(chunk, pos[p]); err != nil {
			return err
		}
		pos[p] += int64(len(chunk))
		if syncEach {
			return files[p].Sync()
		}
		return nil
	})
}

// spread runs n operations over producers goroutines — producer p does
// operations p, p+producers, … — and returns the elapsed time and the
// first error (a producer stops at its first).
func spread(producers int, n int64, op func(p int, i int64) error) (time.Duration, error) {
	errs := make([]error, producers)
	var wg sync.WaitGroup
	start := time.Now()
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int64(p); i < n; i += int64(producers) {
				if errs[p] = op(p, i); errs[p] != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	return time.Since(start), firstErr(errs)
}

// rawSharedSync is what producers without a group commit would do: each
// pwrites its chunks at the end of one shared file and fdatasyncs after
// every one (the kernel groups concurrent syncs as it can).
func rawSharedSync(dir string, chunk []byte, n int64, producers int) (time.Duration, error) {
	f, err := os.Create(filepath.Join(dir, "raw-shared"))
	if err != nil {
		return 0, err
	}
	defer func() { f.Close(); os.Remove(f.Name()) }()
	var next atomic.Int64
	return spread(producers, n, func(int, int64) error {
		pos := next.Add(int64(len(chunk))) - int64(len(chunk))
		if _, err := f.WriteAt(chunk, pos); err != nil {
			return err
		}
		return f.Sync()
	})
}

// rawPipelinedSync is the least a pipelined group commit does: producers
// CRC and pwrite their chunks one after another at the end of one file,
// and each waits for an fdatasync that started after its write; whoever
// waits while none runs starts the next at once.
func rawPipelinedSync(dir string, chunk []byte, n int64, producers int) (time.Duration, error) {
	f, err := os.Create(filepath.Join(dir, "raw-pipelined"))
	if err != nil {
		return 0, err
	}
	defer func() { f.Close(); os.Remove(f.Name()) }()
	var (
		write   sync.Mutex
		written atomic.Int64 // the end of the writes done
		mu      sync.Mutex
		cond    = sync.NewCond(&mu)
		synced  int64
		running bool
		failed  error
	)
	return spread(producers, n, func(int, int64) error {
		if record.Checksum(chunk[21:]) == 0 {
			return fmt.Errorf("bench: a zero checksum")
		}
		write.Lock()
		pos := written.Load()
		_, err := f.WriteAt(chunk, pos)
		written.Store(pos + int64(len(chunk)))
		write.Unlock()
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		for synced < pos+int64(len(chunk)) && failed == nil {
			if running {
				cond.Wait()
				continue
			}
			running = true
			target := written.Load()
			mu.Unlock()
			err := f.Sync()
			mu.Lock()
			running, synced, failed = false, max(synced, target), err
			cond.Broadcast()
		}
		return failed
	})
}

func firstErr(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// rawRead reads files whole with read(2) in chunks of len(buf).
func rawRead(paths []string, buf []byte) (int64, time.Duration, error) {
	return readFiles(paths, buf, func([]byte) {})
}

// rawReadCRC reads files whole and computes CRC-32C: the least recovery
// does.
func rawReadCRC(paths []string, buf []byte) (int64, time.Duration, error) {
	var sum uint32
	n, took, err := readFiles(paths, buf, func(b []byte) { sum = record.UpdateChecksum(sum, b) })
	sink.Store(sum)
	return n, took, err
}

// readFiles reads the files whole into buf, calling fn with each chunk.
func readFiles(paths []string, buf []byte, fn func([]byte)) (int64, time.Duration, error) {
	var total int64
	start := time.Now()
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return 0, 0, err
		}
		for {
			n, err := f.Read(buf)
			fn(buf[:n])
			total += int64(n)
			if err == io.EOF {
				break
			}
			if err != nil {
				f.Close()
				return 0, 0, err
			}
		}
		f.Close()
	}
	return total, time.Since(start), nil
}

// Baselines are the raw figures of the hardware, measured once per run.
type Baselines struct {
	WriteMBps       float64 `json:"writeMBps"`       // pwrite of 100 KiB chunks
	CRCMBps         float64 `json:"crc32cMBps"`      // CRC-32C over memory
	ReadMBps        float64 `json:"readMBps"`        // read(2) of a cached file
	MemcpyMBps      float64 `json:"memcpyMBps"`      // copy of 64 MiB
	Fsync4KiBMicros float64 `json:"fsync4KiBMicros"` // p50 of a 4 KiB write + fdatasync
	SearchNs        float64 `json:"binarySearchNs"`  // slices.BinarySearch over 1.31 M int64, random targets
}

// MeasureBaselines measures the raw hardware figures.
func MeasureBaselines(o Options) (Baselines, error) {
	o.EnsureDefaults()
	var b Baselines
	dir, err := scratch(o, "baseline")
	if err != nil {
		return b, err
	}
	defer os.RemoveAll(dir)
	chunk := make([]byte, 100<<10)
	for i := range chunk {
		chunk[i] = byte(i * 7)
	}
	// 256 MiB written and 64 MiB checksummed, copied and read: less for a
	// run of fewer bytes (a check of the harness), where they only need to
	// be there.
	total := int(min(256<<20, max(o.Bytes, 16<<20)))
	n := int64(total / len(chunk))
	elapsed, err := rawAppend(dir, chunk, n, 1, false)
	if err != nil {
		return b, err
	}
	b.WriteMBps = float64(n*int64(len(chunk))) / elapsed.Seconds() / 1e6

	big := make([]byte, total/4)
	for i := range big {
		big[i] = byte(i)
	}
	start := time.Now()
	sink.Store(record.Checksum(big))
	b.CRCMBps = float64(len(big)) / time.Since(start).Seconds() / 1e6
	dst := make([]byte, len(big))
	copy(dst, big) // its pages faulted in first
	start = time.Now()
	for range 4 {
		copy(dst, big)
	}
	b.MemcpyMBps = 4 * float64(len(big)) / time.Since(start).Seconds() / 1e6

	path := filepath.Join(dir, "read")
	if err := os.WriteFile(path, big, 0o644); err != nil {
		return b, err
	}
	buf := make([]byte, 1<<20)
	if _, _, err := rawRead([]string{path}, buf); err != nil { // warm the cache
		return b, err
	}
	read, took, err := rawRead([]string{path}, buf)
	if err != nil {
		return b, err
	}
	b.ReadMBps = float64(read) / took.Seconds() / 1e6

	f, err := os.Create(filepath.Join(dir, "fsync"))
	if err != nil {
		return b, err
	}
	defer f.Close()
	var lat []float64
	for i := range 50 {
		start := time.Now()
		if _, err := f.WriteAt(chunk[:4096], int64(i)*4096); err != nil {
			return b, err
		}
		if err := f.Sync(); err != nil {
			return b, err
		}
		lat = append(lat, float64(time.Since(start).Nanoseconds())/1e3)
	}
	slices.Sort(lat)
	b.Fsync4KiBMicros = percentile(lat, 50)

	keys := make([]int64, 1_310_720)
	for i := range keys {
		keys[i] = int64(i) * 100
	}
	rng := rand.New(rand.NewPCG(3, 4))
	targets := make([]int64, 1<<16)
	for i := range targets {
		targets[i] = rng.Int64N(int64(len(keys)) * 100)
	}
	start = time.Now()
	found := 0
	for i := range 1 << 20 {
		if _, ok := slices.BinarySearch(keys, targets[i&(len(targets)-1)]); ok {
			found++
		}
	}
	b.SearchNs = float64(time.Since(start).Nanoseconds()) / float64(1<<20)
	sink.Store(uint32(found))
	return b, nil
}
