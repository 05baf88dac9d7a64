package recovery

import (
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/seglog/seglog/logfile"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/segment"
	"github.com/seglog/seglog/vfs"
	"github.com/seglog/seglog/writerstate"
)

// Options configure loading.
type Options struct {
	// Segment and WriterState configure the segments and writer states
	// loaded. Their defaults are those packages' defaults.
	Segment     segment.Options
	WriterState writerstate.Options
	// SegmentOptions, when set, gives each tablet its own segment options
	// (its topic config) instead of Segment. The default is nil.
	SegmentOptions func(tp checkpoint.TopicPartition, dir string) (segment.Options, error)
	// Parallelism is how many tablets load at once. The default is 2
	// (Kafka 4's num.recovery.threads.per.data.dir).
	Parallelism int
	// Progress, when set, is told how far segment recovery is when it has
	// at least ProgressThreshold bytes to read: done bytes of an estimated
	// total, as they are read. Calls are serialized (tablets load in
	// parallel) and the last one has done == total. The command draws a
	// progress bar with it; the engine draws nothing. The default is none.
	Progress func(done, total int64)
	// ProgressThreshold is the size of a recovery that shows progress. The
	// default is 256 MiB.
	ProgressThreshold int64
	// Now is the clock. The default is time.Now.
	Now func() time.Time
}

// EnsureDefaults fills zero fields with their defaults.
func (o *Options) EnsureDefaults() {
	o.Segment.EnsureDefaults()
	o.WriterState.EnsureDefaults()
	if o.Parallelism <= 0 {
		o.Parallelism = min(2, runtime.GOMAXPROCS(0))
	}
	if o.ProgressThreshold == 0 {
		o.ProgressThreshold = 256 << 20
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// tabletJob is a tablet directory to load.
type tabletJob struct {
	tp   checkpoint.TopicPartition
	path string
}

// Result is a loaded data directory.
type Result struct {
	Dir           string
	CleanShutdown bool
	BrokerEpoch   int64 // from the clean-shutdown marker, -1 if none
	// Tablets are sorted by topic and partition.
	Tablets []*Tablet
	// Report lists what loading changed at the data directory's level;
	// each tablet has its own.
	Report   []Change
	Duration time.Duration

	fsys vfs.FS
}

// Close closes every tablet.
func (r *Result) Close() error {
	var errs []error
	for _, t := range r.Tablets {
		errs = append(errs, t.Close())
	}
	return errors.Join(errs...)
}

// CloseClean shuts the data directory down as Kafka's LogManager does, so
// that the next Load skips recovery: every tablet is flushed, snapshots its
// writer state at the log end and closes; the recovery-point and log-start
// checkpoints are written; the clean-shutdown marker (with brokerEpoch) is
// written last.
func (r *Result) CloseClean(brokerEpoch int64) error {
	recoveryPoints, logStarts := checkpoint.Offsets{}, checkpoint.Offsets{}
	var errs []error
	for _, t := range r.Tablets {
		err := t.flush()
		if err == nil {
			err = t.State.TakeSnapshot(true)
		}
		if err == nil {
			err = t.State.SyncSnapshots() // those recovery wrote
		}
		if err = errors.Join(err, t.Close()); err != nil {
			errs = append(errs, fmt.Errorf("recovery: closing %s: %w", t.Dir, err))
			continue
		}
		recoveryPoints[t.TopicPartition] = t.LogEndOffset
		logStarts[t.TopicPartition] = t.LogStartOffset
	}
	if err := errors.Join(errs...); err != nil {
		return err // no checkpoint and no marker: the next Load recovers
	}
	if err := checkpoint.WriteOffsets(r.fsys, filepath.Join(r.Dir, checkpoint.RecoveryPointFile), recoveryPoints); err != nil {
		return err
	}
	if err := checkpoint.WriteOffsets(r.fsys, filepath.Join(r.Dir, checkpoint.LogStartOffsetFile), logStarts); err != nil {
		return err
	}
	return checkpoint.WriteCleanShutdown(r.fsys, r.Dir, brokerEpoch)
}

// RecoveredBytes is the bytes of .log recovery scanned across tablets.
func (r *Result) RecoveredBytes() int64 {
	var n int64
	for _, t := range r.Tablets {
		n += t.RecoveredBytes
	}
	return n
}

// Load loads every tablet of a data directory (docs/format.md §4.1). A tablet that
// fails to load fails the whole directory, as a Kafka log directory goes
// offline; everything loaded so far is closed then.
func Load(fsys vfs.FS, dataDir string, opts Options) (*Result, error) {
	fsys = vfs.OrOS(fsys)
	opts.EnsureDefaults()
	start := opts.Now()
	r := &Result{Dir: dataDir, fsys: fsys}
	var err error
	if r.CleanShutdown, r.BrokerEpoch, err = checkpoint.TakeCleanShutdown(fsys, dataDir); err != nil {
		return nil, fmt.Errorf("recovery: %w", err)
	}
	recoveryPoints := r.readOffsets(fsys, checkpoint.RecoveryPointFile)
	logStarts := r.readOffsets(fsys, checkpoint.LogStartOffsetFile)
	cleaned := r.readOffsets(fsys, checkpoint.CleanerOffsetFile)

	names, err := fsys.List(dataDir)
	if err != nil {
		return nil, fmt.Errorf("recovery: listing %s: %w", dataDir, err)
	}
	var jobs []tabletJob
	for _, name := range names {
		path := filepath.Join(dataDir, name)
		info, err := fsys.Stat(path)
		if err == nil && !info.IsDir() && strings.HasSuffix(name, vfs.TempSuffix) {
			if !slices.Contains(dataDirFiles, strings.TrimSuffix(name, vfs.TempSuffix)) {
				continue // not a name seglog or Kafka writes: not ours to delete
			}
			if err := fsys.Remove(path); err != nil {
				return nil, fmt.Errorf("recovery: %w", err)
			}
			r.Report = append(r.Report, Change{File: path, Action: Deleted, Why: "left over from an interrupted atomic write"})
			continue
		}
		if err != nil || !info.IsDir() {
			continue
		}
		tp, suffix, err := checkpoint.ParseDirName(name)
		switch {
		case err != nil:
			continue // not a tablet
		case !IsTabletDir(fsys, path):
			// A topic-partition name is not enough: only a directory with
			// a tablet's marks is one (and anything in it ours to change).
			r.Report = append(r.Report, Change{File: path, Action: Ignored,
				Why: "named like a tablet but holding files and no partition.metadata or segment file: not a tablet, left alone"})
		case suffix == checkpoint.DeleteDirSuffix:
			if err := removeAll(fsys, path); err != nil {
				return nil, err
			}
			r.Report = append(r.Report, Change{File: path, Action: Deleted, Why: "a tablet directory marked for deletion"})
		case suffix != "":
			r.Report = append(r.Report, Change{File: path, Action: Ignored, Why: "a " + strings.TrimPrefix(suffix, "-") + " tablet directory"})
		default:
			jobs = append(jobs, tabletJob{tp, path})
		}
	}

	progress, done := r.progress(opts, fsys, jobs, recoveryPoints)
	defer done()
	tablets := make([]*Tablet, len(jobs))
	errs := make([]error, len(jobs))
	sem := make(chan struct{}, opts.Parallelism)
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			_, wasCleaned := cleaned[j.tp]
			tablets[i], errs[i] = loadTablet(fsys, j.path, j.tp, r.CleanShutdown, recoveryPoints[j.tp], logStarts[j.tp], wasCleaned, &opts, progress)
		}()
	}
	wg.Wait()
	for _, t := range tablets {
		if t != nil {
			r.Tablets = append(r.Tablets, t)
		}
	}
	if err := errors.Join(errs...); err != nil {
		r.Close()
		return nil, err
	}
	slices.SortFunc(r.Tablets, func(a, b *Tablet) int { return a.TopicPartition.Compare(b.TopicPartition) })
	r.Duration = opts.Now().Sub(start)
	return r, nil
}

// dataDirFiles are the files seglog and Kafka write at the top of a data
// directory: only their temporary files are removed by recovery.
var dataDirFiles = []string{checkpoint.MetaPropertiesFile, checkpoint.RecoveryPointFile, checkpoint.LogStartOffsetFile,
	checkpoint.ReplicationOffsetFile, checkpoint.CleanerOffsetFile, checkpoint.CleanShutdownFile, checkpoint.ProducerIDBlockFile,
	checkpoint.ScramCredentialsFile, checkpoint.ACLFile, checkpoint.ClientQuotasFile, checkpoint.DynamicBrokerConfigFile}

// tabletFiles are the files besides segment files that seglog and Kafka
// write in a tablet directory (seglog.properties is the tablet's config).
var tabletFiles = []string{checkpoint.PartitionMetadataFile, checkpoint.LeaderEpochFile, "seglog.properties"}

// IsTabletDir reports whether dir has a tablet's marks: partition.metadata
// or a segment file, or nothing at all (a tablet whose creation a crash cut
// short). A directory named topic-partition holding anything else is not a
// tablet, and recovery neither loads nor changes it.
func IsTabletDir(fsys vfs.FS, dir string) bool {
	names, err := vfs.OrOS(fsys).List(dir)
	if err != nil {
		return false
	}
	if len(names) == 0 {
		return true
	}
	for _, n := range names {
		if n == checkpoint.PartitionMetadataFile {
			return true
		}
		if _, err := logfile.ParseFilename(n); err == nil {
			return true
		}
	}
	return false
}

// ours reports whether a name in a tablet directory is one seglog or Kafka
// writes (a segment file, with or without a temporary suffix, or a tablet
// file), so that recovery may delete it.
func ours(name string) bool {
	if _, err := logfile.ParseFilename(name); err == nil {
		return true
	}
	return slices.Contains(tabletFiles, strings.TrimSuffix(name, vfs.TempSuffix))
}

// readOffsets reads a checkpoint of the data directory; one that cannot be
// read counts as empty (as in Kafka) and is reported.
func (r *Result) readOffsets(fsys vfs.FS, name string) checkpoint.Offsets {
	path := filepath.Join(r.Dir, name)
	o, err := checkpoint.ReadOffsets(fsys, path)
	if err != nil {
		r.Report = append(r.Report, Change{File: path, Action: CheckpointBad, Why: err.Error() + "; every tablet starts from 0"})
		return checkpoint.Offsets{}
	}
	return o
}

// progress returns the function recovery reports scanned bytes to: a
// report to Options.Progress when the data to recover is large, nothing
// otherwise.
func (r *Result) progress(opts Options, fsys vfs.FS, jobs []tabletJob, recoveryPoints checkpoint.Offsets) (func(int64), func()) {
	noop := func(int64) {}
	if opts.Progress == nil || r.CleanShutdown {
		return noop, func() {}
	}
	var total int64
	for _, j := range jobs {
		total += unflushedBytes(fsys, j.path, recoveryPoints[j.tp])
	}
	if total < opts.ProgressThreshold {
		return noop, func() {}
	}
	var (
		mu   sync.Mutex
		done int64
	)
	return func(n int64) {
			mu.Lock()
			// The total is an estimate (the files as listed before
			// loading): never report past it.
			done = min(done+n, total)
			opts.Progress(done, total)
			mu.Unlock()
		}, func() {
			mu.Lock()
			if done < total {
				done = total
				opts.Progress(done, total)
			}
			mu.Unlock()
		}
}

// unflushedBytes estimates the bytes recovery will read in a tablet: the
// .log files from the one holding the recovery point.
func unflushedBytes(fsys vfs.FS, dir string, recoveryPoint int64) int64 {
	names, err := fsys.List(dir)
	if err != nil {
		return 0
	}
	type seg struct{ base, size int64 }
	var segs []seg
	for _, name := range names {
		if n, err := logfile.ParseFilename(name); err == nil && n.Kind == logfile.Log && n.Suffix == "" {
			if info, err := fsys.Stat(filepath.Join(dir, name)); err == nil {
				segs = append(segs, seg{n.Base, info.Size()})
			}
		}
	}
	var total int64
	for i, s := range segs {
		if i+1 < len(segs) && segs[i+1].base <= recoveryPoint {
			continue
		}
		total += s.size
	}
	return total
}

// removeAll deletes a directory tree through fsys.
func removeAll(fsys vfs.FS, path string) error {
	info, err := fsys.Stat(path)
	if err != nil {
		return nil
	}
	if info.IsDir() {
		names, err := fsys.List(path)
		if err != nil {
			return err
		}
		for _, n := range names {
			if err := removeAll(fsys, filepath.Join(path, n)); err != nil {
				return err
			}
		}
	}
	if err := fsys.Remove(path); err != nil {
		return fmt.Errorf("recovery: deleting %s: %w", path, err)
	}
	return nil
}
