package recovery

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/seglog/seglog/logfile"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/segment"
	"github.com/seglog/seglog/vfs"
	"github.com/seglog/seglog/writerstate"
)

// Problem is an invariant a file breaks: the file, the byte position in it
// (-1 when it is about the file as a whole) and what is wrong.
type Problem struct {
	File   string `json:"file"`
	Offset int64  `json:"offset"`
	Reason string `json:"reason"`
}

func (p Problem) String() string {
	if p.Offset < 0 {
		return fmt.Sprintf("%s: %s", p.File, p.Reason)
	}
	return fmt.Sprintf("%s at byte %d: %s", p.File, p.Offset, p.Reason)
}

// VerifyReport is what Verify found.
type VerifyReport struct {
	Dir string `json:"dir"`
	// Problems are the data directory's own (its checkpoints and files);
	// each tablet has its own.
	Problems  []Problem       `json:"problems"`
	Tablets   []*TabletReport `json:"tablets"`
	BytesRead int64           `json:"bytesRead"`
	Duration  time.Duration   `json:"durationNs"`
}

// TabletReport is what Verify found in one tablet.
type TabletReport struct {
	TopicPartition checkpoint.TopicPartition `json:"-"`
	Tablet         string                    `json:"tablet"`
	LogStartOffset int64                     `json:"logStartOffset"`
	LogEndOffset   int64                     `json:"logEndOffset"`
	Segments       int                       `json:"segments"`
	Batches        int64                     `json:"batches"`
	Records        int64                     `json:"records"`
	Problems       []Problem                 `json:"problems"`
	// Notes are what is worth knowing but breaks nothing: gaps in the
	// offsets.
	Notes []Problem `json:"notes"`
}

// OK reports whether nothing was found.
func (r *VerifyReport) OK() bool {
	if len(r.Problems) > 0 {
		return false
	}
	for _, t := range r.Tablets {
		if len(t.Problems) > 0 {
			return false
		}
	}
	return true
}

// VerifyOptions configure Verify.
type VerifyOptions struct {
	// Only, when set, verifies that tablet alone (the data directory's
	// checkpoints are still read, for its offsets). The default is nil.
	Only *checkpoint.TopicPartition
}

// Verify checks every invariant of a data directory without changing any
// file, reading each once: every batch CRC-valid and the offsets
// contiguous within and across segments; each index against the batches
// (and sealed ones trimmed); the transaction index equal to what a replay
// of the markers gives; each writer-state snapshot equal to a replay at its
// offset; the leader-epoch cache against the batches' epochs; the
// checkpoints against the log ends (the recovery point at the log end when
// the clean-shutdown marker is there); and no leftover, orphan or unknown
// file. A problem is reported, not returned; the error is for a directory
// that cannot be read at all.
func Verify(fsys vfs.FS, dataDir string, opts VerifyOptions) (*VerifyReport, error) {
	fsys = vfs.OrOS(fsys)
	start := time.Now()
	r := &VerifyReport{Dir: dataDir, Problems: []Problem{}, Tablets: []*TabletReport{}}
	problem := func(file string, off int64, format string, args ...any) {
		r.Problems = append(r.Problems, Problem{File: file, Offset: off, Reason: fmt.Sprintf(format, args...)})
	}
	names, err := fsys.List(dataDir)
	if err != nil {
		return nil, fmt.Errorf("recovery: verifying %s: %w", dataDir, err)
	}
	clean := false
	offsets := map[string]checkpoint.Offsets{}
	var tablets []tabletJob
	for _, name := range names {
		path := filepath.Join(dataDir, name)
		switch name {
		case checkpoint.RecoveryPointFile, checkpoint.LogStartOffsetFile, checkpoint.ReplicationOffsetFile,
			checkpoint.CleanerOffsetFile:
			o, err := checkpoint.ReadOffsets(fsys, path)
			if err != nil {
				problem(path, errOffset(err), "%v", errReason(err))
			}
			offsets[name] = o
			continue
		case checkpoint.MetaPropertiesFile:
			if _, _, err := checkpoint.ReadMetaProperties(fsys, path); err != nil {
				problem(path, errOffset(err), "%v", errReason(err))
			}
			continue
		case checkpoint.CleanShutdownFile:
			data, err := vfs.ReadFile(fsys, path)
			if err == nil {
				_, err = checkpoint.ParseCleanShutdown(path, data)
			}
			if err != nil {
				problem(path, errOffset(err), "%v", errReason(err))
			}
			clean = true
			continue
		case ".lock":
			continue
		case checkpoint.ScramCredentialsFile, checkpoint.ACLFile, checkpoint.ClientQuotasFile, checkpoint.DynamicBrokerConfigFile:
			// The broker's security state and dynamic configs (the broker
			// checks them as it loads).
			if data, err := vfs.ReadFile(fsys, path); err != nil {
				problem(path, -1, "%v", err)
			} else if !json.Valid(data) {
				problem(path, 0, "not JSON")
			}
			continue
		case checkpoint.ProducerIDBlockFile:
			if data, err := vfs.ReadFile(fsys, path); err != nil {
				problem(path, -1, "%v", err)
			} else if n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64); err != nil || n < 0 {
				problem(path, 0, "%q is not a producer id", strings.TrimSpace(string(data)))
			}
			continue
		}
		info, err := fsys.Stat(path)
		if err != nil {
			return nil, err
		}
		if !info.IsDir() {
			if !strings.HasSuffix(name, vfs.TempSuffix) {
				problem(path, -1, "a file Kafka does not write in a data directory")
			} else {
				problem(path, -1, "left over from an interrupted checkpoint write")
			}
			continue
		}
		tp, suffix, err := checkpoint.ParseDirName(name)
		switch {
		case err != nil:
			problem(path, -1, "a directory that is not a tablet")
		case suffix != "":
			problem(path, -1, "a %s tablet directory left over", strings.TrimPrefix(suffix, "-"))
		case opts.Only == nil || *opts.Only == tp:
			tablets = append(tablets, tabletJob{tp: tp, path: path})
		}
	}
	if !slices.Contains(names, checkpoint.MetaPropertiesFile) {
		problem(filepath.Join(dataDir, checkpoint.MetaPropertiesFile), -1, "missing")
	}
	for _, j := range tablets {
		tr, read, err := verifyTablet(fsys, j, offsets, clean)
		if err != nil {
			return nil, err
		}
		r.Tablets = append(r.Tablets, tr)
		r.BytesRead += read
	}
	// Checkpoint entries for tablets that are not there.
	if opts.Only == nil {
		for name, o := range offsets {
			for tp := range o {
				if !slices.ContainsFunc(tablets, func(j tabletJob) bool { return j.tp == tp }) {
					problem(filepath.Join(dataDir, name), -1, "names %s, which has no directory", tp)
				}
			}
		}
	}
	slices.SortFunc(r.Problems, func(a, b Problem) int { return strings.Compare(a.String(), b.String()) })
	r.Duration = time.Since(start)
	return r, nil
}

func errOffset(err error) int64 {
	var ce *seglog.CorruptionError
	if errors.As(err, &ce) {
		return ce.Offset
	}
	return -1
}

func errReason(err error) string {
	var ce *seglog.CorruptionError
	if errors.As(err, &ce) {
		return ce.Reason
	}
	return err.Error()
}

// tabletVerifier carries one tablet's verification.
type tabletVerifier struct {
	fsys vfs.FS
	dir  string
	r    *TabletReport
	// logStart is the checkpointed log start: offsets below it are
	// deleted records, whose gaps lose nothing.
	logStart int64
	// The replay: writer state, the epochs the batches carry, and the
	// snapshots still to compare.
	state      *writerstate.State
	epochs     []checkpoint.EpochEntry
	epochLasts []int64 // the last offset of each epoch's batches
	snapshots  []int64
	bases      []int64 // the segments'
	next       int64   // the offset the next batch must start at, or -1 before the first
	// broken is set when a segment could not be read to its end: the
	// replay has missed batches, so the next segment restarts it from
	// its snapshot, or goes on blind (no comparison with the replay)
	// when there is none. damaged stays set once anything was missed.
	broken, blind, damaged bool
	// durable is the recovery point: every offset below it was made
	// durable, so a gap below it is damage, not a power cut's loss.
	durable int64
	// compacted: the cleaner removes records, so gaps are expected, the
	// writer-state snapshots remember batches it removed (they are not
	// compared with the replay), and a transaction index may keep entries
	// whose records it removed.
	compacted bool
}

// restart begins the replay afresh at base, from the snapshot there if
// there is one (reported by the bool; a damaged snapshot counts as none).
func (v *tabletVerifier) restart(base int64) (bool, error) {
	mem := vfs.NewMem()
	if err := mem.MkdirAll("/replay", 0o755); err != nil {
		return false, err
	}
	var err error
	if v.state, err = writerstate.Open(mem, "/replay", writerstate.Options{}); err != nil {
		return false, err
	}
	found := false
	if slices.Contains(v.snapshots, base) {
		entries, err := writerstate.ReadSnapshotFile(v.fsys, filepath.Join(v.dir, logfile.Filename(base, logfile.Snapshot)))
		if err == nil {
			v.state.LoadEntries(entries)
			found = true
		}
	}
	v.state.UpdateMapEndOffset(base)
	return found, nil
}

func (v *tabletVerifier) problem(file string, off int64, format string, args ...any) {
	v.r.Problems = append(v.r.Problems, Problem{File: file, Offset: off, Reason: fmt.Sprintf(format, args...)})
}

// gap reports offsets [from, to) that no batch holds. Below the recovery
// point (everything, after a clean close) it is damage: those offsets were
// made durable, so a file was cut or lost. Above it, a power cut may take
// a segment's unacknowledged tail while the next segment's creation
// survived (recovery reports it), and a replica of a compacted log has
// gaps: a note, not a problem.
func (v *tabletVerifier) gap(file string, off, from, to int64, where string) {
	if v.compacted {
		return // the cleaner's
	}
	if to <= v.logStart {
		v.r.Notes = append(v.r.Notes, Problem{File: file, Offset: off,
			Reason: fmt.Sprintf("offsets %d to %d are missing %s, below the log start %d (deleted records not yet synced)", from, to-1, where, v.logStart)})
		return
	}
	if from < v.durable {
		below := fmt.Sprintf("the recovery point %d", v.durable)
		if v.durable == math.MaxInt64 {
			below = "the log end of a directory closed cleanly"
		}
		v.r.Problems = append(v.r.Problems, Problem{File: file, Offset: off,
			Reason: fmt.Sprintf("offsets %d to %d are missing %s, below %s: they had been made durable, so a file was cut or lost", from, to-1, where, below)})
		v.damaged = true
		return
	}
	v.r.Notes = append(v.r.Notes, Problem{File: file, Offset: off,
		Reason: fmt.Sprintf("offsets %d to %d are missing %s (unacknowledged records lost in a power cut, or a replica's gap)", from, to-1, where)})
}

func (v *tabletVerifier) corruption(ce *seglog.CorruptionError) {
	v.r.Problems = append(v.r.Problems, Problem{File: ce.Path, Offset: ce.Offset, Reason: ce.Reason})
}

// verifyTablet checks one tablet directory; it returns the bytes of .log
// it read.
func verifyTablet(fsys vfs.FS, j tabletJob, offsets map[string]checkpoint.Offsets, clean bool) (*TabletReport, int64, error) {
	r := &TabletReport{TopicPartition: j.tp, Tablet: j.tp.String(), Problems: []Problem{}, Notes: []Problem{}}
	_, cleaned := offsets[checkpoint.CleanerOffsetFile][j.tp]
	v := &tabletVerifier{fsys: fsys, dir: j.path, r: r, next: -1, durable: offsets[checkpoint.RecoveryPointFile][j.tp],
		logStart: offsets[checkpoint.LogStartOffsetFile][j.tp], compacted: Compacted(fsys, j.path, cleaned)}
	if clean {
		v.durable = math.MaxInt64 // a clean close made everything durable
	}
	if v.compacted {
		r.Notes = append(r.Notes, Problem{File: j.path, Offset: -1, Reason: "a compacted log: gaps in its offsets are the cleaner's, " +
			"its writer-state snapshots are not compared with a replay (they remember batches the cleaner removed), " +
			"and its transaction indexes may keep transactions whose records it removed"})
	}
	names, err := fsys.List(j.path)
	if err != nil {
		return nil, 0, err
	}
	have := map[string]bool{}
	var bases []int64
	for _, name := range names {
		have[name] = true
		path := filepath.Join(j.path, name)
		n, err := logfile.ParseFilename(name)
		switch {
		case err == nil && n.Suffix != "":
			v.problem(path, -1, "left over from an interrupted %s", map[string]string{
				logfile.DeletedSuffix: "deletion", logfile.CleanedSuffix: "replacement", logfile.SwapSuffix: "replacement"}[n.Suffix])
		case err == nil && n.Kind == logfile.Log:
			bases = append(bases, n.Base)
		case err == nil && n.Kind == logfile.Snapshot:
			v.snapshots = append(v.snapshots, n.Base)
		case err == nil:
		case name == checkpoint.LeaderEpochFile || name == "seglog.properties" || name == "tier":
		case name == checkpoint.PartitionMetadataFile:
			if _, _, err := checkpoint.ReadPartitionMetadata(fsys, path); err != nil {
				v.problem(path, errOffset(err), "%v", errReason(err))
			}
		case strings.HasSuffix(name, vfs.TempSuffix):
			v.problem(path, -1, "left over from an interrupted checkpoint write")
		default:
			v.problem(path, -1, "a file Kafka does not write in a tablet directory")
		}
	}
	for _, name := range names { // indexes without their .log
		if n, err := logfile.ParseFilename(name); err == nil && n.Suffix == "" && n.Kind != logfile.Log &&
			n.Kind != logfile.Snapshot && !have[logfile.Filename(n.Base, logfile.Log)] {
			v.problem(filepath.Join(j.path, name), -1, "an index without its .log")
		}
	}
	if !have[checkpoint.PartitionMetadataFile] {
		v.problem(filepath.Join(j.path, checkpoint.PartitionMetadataFile), -1, "missing")
	}
	if len(bases) == 0 {
		v.problem(j.path, -1, "no segment")
		return r, 0, nil
	}
	v.bases = bases
	// The replay starts where the log does, from the snapshot there if any.
	if _, err := v.restart(bases[0]); err != nil {
		return nil, 0, err
	}
	var read int64
	for i, base := range bases {
		n, err := v.segment(base, i == len(bases)-1)
		if err != nil {
			return nil, 0, err
		}
		read += n
		r.Segments++
	}
	end := v.next
	if end < 0 || (v.compacted && end < bases[len(bases)-1]) {
		end = bases[len(bases)-1] // (a compacted log's last batches may be gone: it ends where its last segment starts)
	}
	v.checkSnapshotsUpTo(end, true)
	r.LogEndOffset = end
	r.LogStartOffset = max(bases[0], offsets[checkpoint.LogStartOffsetFile][j.tp])
	v.checkEpochs(end, r.LogStartOffset)
	dataDir := filepath.Dir(j.path)
	check := func(name string, ok func(o int64) bool, want string) {
		if o, found := offsets[name][j.tp]; found && !ok(o) {
			v.problem(filepath.Join(dataDir, name), -1, "%s: %d, %s (the log ends at %d)", j.tp, o, want, end)
		}
	}
	check(checkpoint.RecoveryPointFile, func(o int64) bool { return o <= end }, "past the log end")
	check(checkpoint.LogStartOffsetFile, func(o int64) bool { return o <= end }, "past the log end")
	check(checkpoint.ReplicationOffsetFile, func(o int64) bool { return o <= end }, "past the log end")
	if clean {
		check(checkpoint.RecoveryPointFile, func(o int64) bool { return o == end },
			"not the log end though the directory was closed cleanly")
		if _, found := offsets[checkpoint.RecoveryPointFile][j.tp]; !found {
			v.problem(filepath.Join(dataDir, checkpoint.RecoveryPointFile), -1,
				"%s is missing though the directory was closed cleanly", j.tp)
		}
	}
	return r, read, nil
}

// segment checks one segment: its batches, indexes and transaction index,
// and replays it. It returns the bytes of .log read.
func (v *tabletVerifier) segment(base int64, active bool) (int64, error) {
	seg, err := segment.Open(v.fsys, v.dir, base, segment.Options{ReadOnly: true})
	if err != nil {
		return 0, err
	}
	defer seg.Close()
	if v.next >= 0 && base > v.next {
		// A gap: the batches a power cut took may have changed the
		// writer state; the replay restarts here as after damage.
		v.gap(seg.LogPath(), -1, v.next, base, "between segments")
		if v.compacted {
			v.state.UpdateMapEndOffset(base) // removed by the cleaner: nothing was missed
		} else {
			v.broken = true
		}
	}
	if v.broken {
		found, err := v.restart(base)
		if err != nil {
			return 0, err
		}
		v.broken, v.blind, v.next = false, !found, base
	}
	if v.next >= 0 && base < v.next {
		v.problem(seg.LogPath(), -1, "starts at offset %d, inside the segment before (which ends at %d)", base, v.next)
	}
	if !active { // before Check maps them: a mapped index hides its untrimmed tail
		for _, err := range unjoin(seg.QuickCheckIndexes()) {
			v.corruptionOrError(err)
		}
	}
	var aborted []record.AbortedTxn
	tail, problems, err := seg.Check(func(b record.Batch, pos int64) error {
		switch expected := max(v.next, base); {
		case b.BaseOffset() < expected:
			v.problem(seg.LogPath(), pos, "the batch holds offsets %d to %d, but offsets below %d are behind it",
				b.BaseOffset(), b.LastOffset(), expected)
		case b.BaseOffset() > expected:
			v.gap(seg.LogPath(), pos, expected, b.BaseOffset(), "before this batch")
			v.state.UpdateMapEndOffset(b.BaseOffset())
		}
		v.checkSnapshotsUpTo(b.BaseOffset(), false)
		if e := b.PartitionLeaderEpoch(); e >= 0 && (len(v.epochs) == 0 || e > v.epochs[len(v.epochs)-1].Epoch) {
			v.epochs = append(v.epochs, checkpoint.EpochEntry{Epoch: e, StartOffset: b.BaseOffset()})
			v.epochLasts = append(v.epochLasts, b.LastOffset())
		} else if len(v.epochLasts) > 0 {
			v.epochLasts[len(v.epochLasts)-1] = b.LastOffset()
		}
		a, err := v.state.Replay(b)
		if err != nil {
			v.problem(seg.LogPath(), pos, "the batch at offset %d cannot be replayed: %v", b.BaseOffset(), err)
		}
		aborted = append(aborted, a...)
		v.r.Batches++
		v.r.Records += int64(b.NumRecords())
		v.next = b.NextOffset()
		return nil
	})
	if err != nil {
		var ce *seglog.CorruptionError
		if errors.As(err, &ce) {
			v.corruption(ce)
		} else if errors.Is(err, segment.ErrOffsetOverflow) {
			v.problem(seg.LogPath(), -1, "%v", err)
		} else {
			return 0, err
		}
		v.broken, v.damaged = true, true
		return seg.FileLength(), nil
	}
	if v.next < 0 {
		v.next = base
	}
	if tail.Kind != segment.CleanEnd {
		v.broken, v.damaged = true, true
	}
	switch tail.Kind {
	case segment.CleanEnd:
	case segment.Corrupt:
		var ce *seglog.CorruptionError
		if errors.As(tail.Err, &ce) {
			v.corruption(ce)
		} else {
			v.problem(seg.LogPath(), tail.Position, "%v", tail)
		}
	default:
		v.problem(seg.LogPath(), tail.Position, "%v", tail)
	}
	for _, p := range problems {
		v.corruption(p)
	}
	indexed, err := seg.AbortedTxns()
	if err != nil {
		v.corruptionOrError(err)
	}
	if !v.blind && !v.compacted && !slices.Equal(indexed, aborted) {
		v.problem(seg.Path(logfile.TxnIndex), -1, "holds %v; the markers in %s give %v", indexed,
			filepath.Base(seg.LogPath()), aborted)
	}
	if v.compacted && !v.blind {
		// Every transaction the markers abort must be indexed (its
		// records, if any survive, are skipped by read_committed through
		// it); an entry may cover more, its removed records.
		for _, a := range aborted {
			if !slices.ContainsFunc(indexed, func(i record.AbortedTxn) bool {
				return i.ProducerID == a.ProducerID && i.LastOffset == a.LastOffset && i.FirstOffset <= a.FirstOffset
			}) {
				v.problem(seg.Path(logfile.TxnIndex), -1, "lacks the aborted transaction %v that the markers in %s give (it holds %v)",
					a, filepath.Base(seg.LogPath()), indexed)
			}
		}
	}
	return tail.Length, nil
}

func (v *tabletVerifier) corruptionOrError(err error) {
	var ce *seglog.CorruptionError
	if errors.As(err, &ce) {
		v.corruption(ce)
		return
	}
	v.problem(v.dir, -1, "%v", err)
}

// checkSnapshotsUpTo compares the snapshots at offsets up to o with the
// replayed state, which has reached o (a batch boundary, or the log end
// when atEnd). A snapshot must sit at a batch boundary (usually a segment
// base or a log end at a clean close; Kafka keeps the newest other one).
func (v *tabletVerifier) checkSnapshotsUpTo(o int64, atEnd bool) {
	for len(v.snapshots) > 0 && v.snapshots[0] <= o {
		s := v.snapshots[0]
		v.snapshots = v.snapshots[1:]
		path := filepath.Join(v.dir, logfile.Filename(s, logfile.Snapshot))
		switch {
		case s < v.bases[0]:
			v.problem(path, -1, "a snapshot below the first segment (%d)", v.bases[0])
			continue
		// (In a compacted log, anywhere in the gap the cleaner left after
		// the last batch is a boundary.)
		case s != v.state.MapEndOffset() && !(v.compacted && s >= v.next && s <= v.state.MapEndOffset()):
			v.problem(path, -1, "a snapshot at %d, where no batch boundary is", s)
			continue
		}
		entries, err := writerstate.ReadSnapshotFile(v.fsys, path)
		if err != nil {
			v.corruptionOrError(err)
			continue
		}
		if v.blind || v.compacted {
			continue // the replay missed batches (or the cleaner removed them): nothing to compare with
		}
		for _, e := range entries {
			got, ok := v.state.Producer(e.ProducerID)
			if !ok || !sameProducer(e, got) {
				v.problem(path, -1, "producer %d: the snapshot has %s, the replay %s", e.ProducerID, describe(e), describeOK(got, ok))
			}
		}
	}
	if atEnd {
		for _, s := range v.snapshots {
			v.problem(filepath.Join(v.dir, logfile.Filename(s, logfile.Snapshot)), -1, "a snapshot past the log end %d", o)
		}
		v.snapshots = nil
	}
}

// sameProducer compares what a snapshot keeps of a producer.
func sameProducer(a, b writerstate.Entry) bool {
	if a.Epoch != b.Epoch || a.CoordinatorEpoch != b.CoordinatorEpoch || a.CurrentTxnFirstOffset != b.CurrentTxnFirstOffset ||
		len(a.Batches) == 0 != (len(b.Batches) == 0) {
		return false
	}
	if len(a.Batches) == 0 {
		return true
	}
	x, y := a.Batches[len(a.Batches)-1], b.Batches[len(b.Batches)-1]
	return x.LastSeq == y.LastSeq && x.LastOffset == y.LastOffset && x.OffsetDelta == y.OffsetDelta
}

func describe(e writerstate.Entry) string {
	s := fmt.Sprintf("epoch %d, coordinator epoch %d, open transaction at %d", e.Epoch, e.CoordinatorEpoch, e.CurrentTxnFirstOffset)
	if n := len(e.Batches); n > 0 {
		b := e.Batches[n-1]
		s += fmt.Sprintf(", last batch sequence %d at offset %d", b.LastSeq, b.LastOffset)
	}
	return s
}

func describeOK(e writerstate.Entry, ok bool) string {
	if !ok {
		return "no such producer"
	}
	return describe(e)
}

// checkEpochs compares the leader-epoch cache with the epochs the batches
// carry (from the log start on).
func (v *tabletVerifier) checkEpochs(end, logStart int64) {
	path := filepath.Join(v.dir, checkpoint.LeaderEpochFile)
	cache, err := checkpoint.ReadEpochs(v.fsys, path)
	if err != nil {
		v.corruptionOrError(err)
		return
	}
	if v.damaged {
		return // batches were missed: their epochs are unknown
	}
	// The cache may hold, from the log start on, either the epochs of the
	// batches left at or above it, or those and the epoch in force at the
	// log start (Kafka's truncateFromStart keeps it, beginning at the log
	// start, even when no batch of it is left).
	var left, inForce []checkpoint.EpochEntry
	for i, e := range v.epochs {
		if v.epochLasts[i] >= logStart {
			left = append(left, e)
		}
		if i+1 == len(v.epochs) || v.epochs[i+1].StartOffset > logStart {
			inForce = append(inForce, e)
		}
	}
	if len(v.epochs) == 0 && len(cache) <= 1 {
		return // no batch left to say which epoch is in force
	}
	if len(v.epochs) == 0 && len(cache) > 0 && cache[len(cache)-1].StartOffset == end {
		// (an empty log whose leaders were elected at its end)
		ok := true
		for _, e := range cache {
			ok = ok && e.StartOffset == end
		}
		if ok {
			return
		}
	}
	// The epochs that begin at or above the recovery point may be missing
	// after an unclean shutdown: the tablet writes a batch's new epoch
	// lazily, before the recovery point passes it, and recovery finds it
	// again in the batch.
	lazy := func(es []checkpoint.EpochEntry) []checkpoint.EpochEntry {
		for i, e := range es {
			if e.StartOffset >= v.durable {
				return slices.Clone(es[:i])
			}
		}
		return nil
	}
	candidates := [][]checkpoint.EpochEntry{left, inForce}
	for _, es := range [][]checkpoint.EpochEntry{left, inForce} {
		if l := lazy(es); l != nil {
			candidates = append(candidates, l)
		}
	}
	// A leader elected at the log end records its epoch there before any
	// batch of it (as Kafka's new leader does): entries at the log end,
	// of epochs above every batch's, are the cache's own and compared
	// without.
	batchless := cache
	for len(batchless) > 0 {
		e := batchless[len(batchless)-1]
		if e.StartOffset != end || len(v.epochs) > 0 && e.Epoch <= v.epochs[len(v.epochs)-1].Epoch {
			break
		}
		batchless = batchless[:len(batchless)-1]
	}
	for _, c := range [][]checkpoint.EpochEntry{cache, batchless} {
		for _, want := range candidates {
			want = slices.Clone(want)
			if len(want) > 0 {
				want[0].StartOffset = max(want[0].StartOffset, logStart)
			}
			// The first epoch may begin anywhere before the next: earlier,
			// where the cache still has it begin (it began before the oldest
			// batch left), or later, where a log start that a crash then
			// undid had moved it (the epoch file is written at once, the
			// log-start checkpoint every minute, as in Kafka).
			if len(want) > 0 && len(c) > 0 && c[0].Epoch == want[0].Epoch &&
				(len(want) == 1 || c[0].StartOffset < want[1].StartOffset) && c[0].StartOffset <= end {
				want[0].StartOffset = c[0].StartOffset
			}
			if slices.Equal(c, want) {
				return
			}
		}
	}
	if len(cache) == 0 {
		v.problem(path, -1, "missing or empty, but the batches from %d to %d carry epochs %v", logStart, end, left)
		return
	}
	v.problem(path, -1, "holds %v; the batches from %d to %d carry %v", cache, logStart, end, left)
}

// unjoin returns the errors errors.Join joined, or err alone.
func unjoin(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
