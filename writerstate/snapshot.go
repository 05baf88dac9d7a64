package writerstate

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/seglog/seglog/logfile"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/vfs"
)

// Snapshot layout: part of the on-disk format; never change.
const (
	snapshotVersion   = 1
	snapshotCRCOff    = 2
	snapshotCountOff  = 6
	snapshotHeader    = 10
	snapshotEntrySize = 46
)

// ErrCorruptSnapshot is the cause of a snapshot file that cannot be read: a
// bad version, a bad CRC, or too few bytes (docs/format.md §5.5).
var ErrCorruptSnapshot = seglog.NewKafkaError("writerstate: corrupt snapshot", 56)

// AppendSnapshot appends the snapshot of entries (in producer id order) to
// dst: only each producer's last batch is kept.
func AppendSnapshot(dst []byte, entries []Entry) []byte {
	start := len(dst)
	dst = binary.BigEndian.AppendUint16(dst, snapshotVersion)
	dst = binary.BigEndian.AppendUint32(dst, 0) // the CRC, below
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(entries)))
	for i := range entries {
		e := &entries[i]
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.ProducerID))
		dst = binary.BigEndian.AppendUint16(dst, uint16(e.Epoch))
		dst = binary.BigEndian.AppendUint32(dst, uint32(e.LastSeq()))
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.LastDataOffset()))
		dst = binary.BigEndian.AppendUint32(dst, uint32(e.LastOffsetDelta()))
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.LastTimestamp))
		dst = binary.BigEndian.AppendUint32(dst, uint32(e.CoordinatorEpoch))
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.CurrentTxnFirstOffset))
	}
	binary.BigEndian.PutUint32(dst[start+snapshotCRCOff:], record.Checksum(dst[start+snapshotCountOff:]))
	return dst
}

// ParseSnapshot reads a snapshot's entries. A bad version, a CRC mismatch or
// too few bytes fail with an error wrapping ErrCorruptSnapshot, which says
// what and where.
func ParseSnapshot(b []byte) ([]Entry, error) {
	corrupt := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrCorruptSnapshot, fmt.Sprintf(format, args...))
	}
	if len(b) < snapshotHeader {
		return nil, corrupt("%d bytes, fewer than the %d-byte header", len(b), snapshotHeader)
	}
	if v := int16(binary.BigEndian.Uint16(b)); v != snapshotVersion {
		return nil, corrupt("unknown version %d", v)
	}
	n := int32(binary.BigEndian.Uint32(b[snapshotCountOff:]))
	if n < 0 {
		return nil, corrupt("negative entry count %d", n)
	}
	if rest := len(b) - snapshotHeader; int64(n)*snapshotEntrySize > int64(rest) {
		return nil, corrupt("%d entries need %d bytes, only %d remain", n, int64(n)*snapshotEntrySize, rest)
	}
	if stored, computed := binary.BigEndian.Uint32(b[snapshotCRCOff:]), record.Checksum(b[snapshotCountOff:]); stored != computed {
		return nil, corrupt("crc mismatch: stored %08x, computed %08x", stored, computed)
	}
	entries := make([]Entry, n)
	p := b[snapshotHeader:]
	for i := range entries {
		e := &entries[i]
		e.ProducerID = int64(binary.BigEndian.Uint64(p))
		e.Epoch = int16(binary.BigEndian.Uint16(p[8:]))
		lastSeq := int32(binary.BigEndian.Uint32(p[10:]))
		lastOffset := int64(binary.BigEndian.Uint64(p[14:]))
		offsetDelta := int32(binary.BigEndian.Uint32(p[22:]))
		e.LastTimestamp = int64(binary.BigEndian.Uint64(p[26:]))
		e.CoordinatorEpoch = int32(binary.BigEndian.Uint32(p[34:]))
		e.CurrentTxnFirstOffset = max(int64(binary.BigEndian.Uint64(p[38:])), -1)
		if lastOffset >= 0 {
			e.Batches = []BatchMetadata{{LastSeq: lastSeq, LastOffset: lastOffset, OffsetDelta: offsetDelta, Timestamp: e.LastTimestamp}}
		}
		p = p[snapshotEntrySize:]
	}
	return entries, nil
}

func (s *State) snapshotPath(offset int64) string {
	return filepath.Join(s.dir, logfile.Filename(offset, logfile.Snapshot))
}

// listSnapshots returns the offsets of the snapshot files in dir.
func listSnapshots(fsys vfs.FS, dir string) ([]int64, error) {
	names, err := fsys.List(dir)
	if err != nil {
		return nil, fmt.Errorf("writerstate: listing %s: %w", dir, err)
	}
	var out []int64
	for _, name := range names {
		if n, err := logfile.ParseFilename(name); err == nil && n.Kind == logfile.Snapshot && n.Suffix == "" {
			out = append(out, n.Base)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Snapshots returns the offsets of the snapshot files, ascending.
func (s *State) Snapshots() []int64 { return slices.Clone(s.snapshots) }

// LatestSnapshotOffset returns the offset of the newest snapshot file.
func (s *State) LatestSnapshotOffset() (int64, bool) {
	if len(s.snapshots) == 0 {
		return 0, false
	}
	return s.snapshots[len(s.snapshots)-1], true
}

// OldestSnapshotOffset returns the offset of the oldest snapshot file.
func (s *State) OldestSnapshotOffset() (int64, bool) {
	if len(s.snapshots) == 0 {
		return 0, false
	}
	return s.snapshots[0], true
}

// TakeSnapshot writes the state to <map end>.snapshot, unless the map end
// is not beyond the last snapshot. Like Kafka it writes in place, without a
// temporary file, rename or directory sync: a torn snapshot is found by its
// CRC and the next older one is used. It fsyncs if sync is set (or
// Options.SyncSnapshots).
func (s *State) TakeSnapshot(sync bool) error {
	if s.mapEnd <= s.snapEnd {
		return nil
	}
	path := s.snapshotPath(s.mapEnd)
	data := AppendSnapshot(nil, s.Producers())
	f, err := s.fsys.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("writerstate: writing %s: %w", path, err)
	}
	_, err = f.WriteAt(data, 0)
	if err == nil && (sync || s.opts.SyncSnapshots) {
		err = f.Sync()
	}
	if err = errors.Join(err, f.Close()); err != nil {
		// No torn snapshot is left behind (a full disk cuts writes short).
		_ = s.fsys.Remove(path)
		return fmt.Errorf("writerstate: writing %s: %w", path, err)
	}
	if _, found := slices.BinarySearch(s.snapshots, s.mapEnd); !found {
		s.snapshots = append(s.snapshots, s.mapEnd)
		slices.Sort(s.snapshots)
	}
	s.forgetUnsynced(s.mapEnd)
	if !sync && !s.opts.SyncSnapshots {
		s.unsynced = append(s.unsynced, s.mapEnd)
		slices.Sort(s.unsynced)
	}
	s.snapEnd = s.mapEnd
	return nil
}

func (s *State) forgetUnsynced(offset int64) {
	if i, found := slices.BinarySearch(s.unsynced, offset); found {
		s.unsynced = slices.Delete(s.unsynced, i, i+1)
	}
}

// UnsyncedSnapshots returns the offsets of the snapshots at or below
// through that were written without fsync (at rolls, by a rebuild, by
// recovery) and forgets them: the caller syncs each with SyncSnapshot
// before it moves the recovery point past it, and fails if one fails.
func (s *State) UnsyncedSnapshots(through int64) []int64 {
	i, _ := slices.BinarySearch(s.unsynced, through+1)
	out := slices.Clone(s.unsynced[:i])
	s.unsynced = slices.Delete(s.unsynced, 0, i)
	return out
}

// SyncSnapshots fsyncs every snapshot written without fsync (a clean
// shutdown's last step before its marker).
func (s *State) SyncSnapshots() error {
	var errs []error
	for _, o := range s.UnsyncedSnapshots(math.MaxInt64 - 1) {
		errs = append(errs, s.SyncSnapshot(o))
	}
	return errors.Join(errs...)
}

// SyncSnapshot fsyncs the snapshot at offset (if it exists), as the tablet
// does before moving the recovery point past it.
func (s *State) SyncSnapshot(offset int64) error {
	f, err := s.fsys.OpenFile(s.snapshotPath(offset), os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}

// removeSnapshot forgets and deletes the snapshot at offset.
func (s *State) removeSnapshot(offset int64) error {
	i, found := slices.BinarySearch(s.snapshots, offset)
	if !found {
		return nil
	}
	s.snapshots = slices.Delete(s.snapshots, i, i+1)
	s.forgetUnsynced(offset)
	if err := s.fsys.Remove(s.snapshotPath(offset)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("writerstate: deleting a snapshot: %w", err)
	}
	return nil
}

// removeSnapshotsIf deletes the snapshots whose offsets match.
func (s *State) removeSnapshotsIf(match func(offset int64) bool) error {
	var errs []error
	for _, off := range slices.Clone(s.snapshots) {
		if match(off) {
			errs = append(errs, s.removeSnapshot(off))
		}
	}
	return errors.Join(errs...)
}

// DeleteSnapshotsBefore deletes the snapshots at offsets below offset.
func (s *State) DeleteSnapshotsBefore(offset int64) error {
	return s.removeSnapshotsIf(func(o int64) bool { return o < offset })
}

// DeleteSnapshotsAfter deletes the snapshots at offsets above offset.
func (s *State) DeleteSnapshotsAfter(offset int64) error {
	return s.removeSnapshotsIf(func(o int64) bool { return o > offset })
}

// MarkSnapshotForDeletion forgets the snapshot at offset and renames it with
// logfile.DeletedSuffix, for removal with its segment. It reports false if
// there was no such snapshot (or its file was gone already).
func (s *State) MarkSnapshotForDeletion(offset int64) (bool, error) {
	i, found := slices.BinarySearch(s.snapshots, offset)
	if !found {
		return false, nil
	}
	s.snapshots = slices.Delete(s.snapshots, i, i+1)
	s.forgetUnsynced(offset)
	path := s.snapshotPath(offset)
	err := s.fsys.Rename(path, path+logfile.DeletedSuffix)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// RemoveStraySnapshots deletes the snapshots whose offsets are not segment
// bases, except the largest of them if it is above every base (the one a
// clean shutdown wrote at the log end).
func (s *State) RemoveStraySnapshots(segmentBases []int64) error {
	var err error
	if s.snapshots, err = listSnapshots(s.fsys, s.dir); err != nil {
		return err
	}
	s.unsynced = slices.DeleteFunc(s.unsynced, func(o int64) bool {
		_, found := slices.BinarySearch(s.snapshots, o)
		return !found
	})
	isBase := map[int64]bool{}
	maxBase := int64(-1)
	for _, b := range segmentBases {
		isBase[b], maxBase = true, max(maxBase, b)
	}
	var strays []int64
	for _, off := range s.snapshots {
		if !isBase[off] {
			strays = append(strays, off)
		}
	}
	if n := len(strays); n > 0 && (len(segmentBases) == 0 || strays[n-1] > maxBase) {
		strays = strays[:n-1] // the largest stray, above every segment, stays
	}
	return s.removeSnapshotsIf(func(o int64) bool { return slices.Contains(strays, o) })
}

// ReadSnapshotFile reads and parses the snapshot at path. A damaged file
// fails with a *seglog.CorruptionError wrapping ErrCorruptSnapshot.
func ReadSnapshotFile(fsys vfs.FS, path string) ([]Entry, error) {
	fsys = vfs.OrOS(fsys)
	data, err := vfs.ReadFile(fsys, path)
	if err != nil {
		return nil, err
	}
	entries, err := ParseSnapshot(data)
	if err != nil {
		return nil, &seglog.CorruptionError{Path: path, Err: err,
			Reason: "unreadable producer snapshot: " + strings.TrimPrefix(err.Error(), ErrCorruptSnapshot.Error()+": ")}
	}
	return entries, nil
}

// loadFromSnapshot loads the newest readable snapshot, dropping expired
// producers; a damaged snapshot is deleted and the next older one tried.
// With none left the state starts empty at logStart.
func (s *State) loadFromSnapshot(logStart, nowMs int64) error {
	for len(s.snapshots) > 0 {
		off := s.snapshots[len(s.snapshots)-1]
		entries, err := ReadSnapshotFile(s.fsys, s.snapshotPath(off))
		if errors.Is(err, ErrCorruptSnapshot) || errors.Is(err, fs.ErrNotExist) {
			if err := s.removeSnapshot(off); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		for i := range entries {
			if e := &entries[i]; !s.expired(nowMs, e) {
				s.loadEntry(e)
			}
		}
		s.snapEnd, s.mapEnd = off, off
		s.updateOldestTxnTimestamp()
		return nil
	}
	s.snapEnd, s.mapEnd = logStart, logStart
	return nil
}

// TruncateAndReload drops the snapshots outside (logStart, logEnd] and, if
// the map end is not logEnd, reloads the state from the newest remaining
// snapshot (or starts it empty at logStart). logEnd is assumed to be at or
// below the high watermark.
func (s *State) TruncateAndReload(logStart, logEnd, nowMs int64) error {
	if err := s.removeSnapshotsIf(func(o int64) bool { return o > logEnd || o <= logStart }); err != nil {
		return err
	}
	if logEnd == s.mapEnd {
		s.OnLogStartOffsetIncremented(logStart)
		return nil
	}
	clear(s.producers)
	s.ongoing, s.unreplicated = s.ongoing[:0], s.unreplicated[:0]
	s.updateOldestTxnTimestamp()
	return s.loadFromSnapshot(logStart, nowMs)
}

// TruncateFullyAndStartAt empties the state, deletes every snapshot, and
// starts again at offset.
func (s *State) TruncateFullyAndStartAt(offset int64) error {
	clear(s.producers)
	s.ongoing, s.unreplicated = s.ongoing[:0], s.unreplicated[:0]
	err := s.removeSnapshotsIf(func(int64) bool { return true })
	s.snapEnd, s.mapEnd = 0, offset
	s.updateOldestTxnTimestamp()
	return err
}

// ReloadSnapshots empties the state and lists the snapshot files again.
func (s *State) ReloadSnapshots() error {
	if err := s.TruncateFullyAndStartAt(0); err != nil {
		return err
	}
	var err error
	s.snapshots, err = listSnapshots(s.fsys, s.dir)
	return err
}

// Restore replaces the state with a snapshot's entries taken at offset
// (a tier's copy, when no local segment is left) and writes them as the
// snapshot there, synced.
func (s *State) Restore(offset int64, entries []Entry, nowMs int64) error {
	clear(s.producers)
	s.ongoing, s.unreplicated = s.ongoing[:0], s.unreplicated[:0]
	for i := range entries {
		if e := &entries[i]; !s.expired(nowMs, e) {
			s.loadEntry(e)
		}
	}
	s.snapEnd, s.mapEnd = offset, offset
	s.updateOldestTxnTimestamp()
	return s.TakeSnapshot(true)
}
