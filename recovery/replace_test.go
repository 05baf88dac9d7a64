package recovery

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/seglog/seglog/logfile"

	"github.com/stretchr/testify/require"

	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/segment"
	"github.com/seglog/seglog/vfs"
)

// writeSegmentPart writes the batches of src whose base offset is in
// [from, to) to a new segment at base with the given file suffix, as a
// cleaner or a split writes its output, and closes it.
func writeSegmentPart(t *testing.T, fsys vfs.FS, src *segment.Segment, base, from, to int64, suffix string) {
	t.Helper()
	dst, err := segment.Create(fsys, filepath.Dir(src.LogPath()), base, segment.Options{FileSuffix: suffix, IndexIntervalBytes: 1})
	require.NoError(t, err)
	require.NoError(t, src.Batches(src.BaseOffset(), segment.NoMaxPosition, func(b record.Batch) error {
		if b.BaseOffset() < from || b.BaseOffset() >= to {
			return nil
		}
		return dst.Append(segment.AppendInfo{LargestOffset: b.LastOffset(), LargestTimestamp: b.MaxTimestamp(),
			ShallowOffsetOfMaxTimestamp: b.LastOffset()}, slices.Clone(b.Bytes()))
	}))
	require.NoError(t, dst.Seal())
	require.NoError(t, dst.Flush())
	require.NoError(t, dst.Close())
}

// renameSegment renames every file of the segment at base from one suffix
// to another.
func renameSegment(t *testing.T, dir string, base int64, from, to string) {
	t.Helper()
	for _, k := range []logfile.Kind{logfile.Log, logfile.Index, logfile.TimeIndex, logfile.TxnIndex} {
		err := os.Rename(filepath.Join(dir, logfile.FilenameWithSuffix(base, k, from)),
			filepath.Join(dir, logfile.FilenameWithSuffix(base, k, to)))
		if k != logfile.TxnIndex || !os.IsNotExist(err) {
			require.NoError(t, err, "%s %v", k, base)
		}
	}
}

// checkTablet asserts the invariants every loaded tablet must hold: each
// index agrees with its .log, every segment ends on a batch boundary, the
// segments do not overlap, and the last one ends at the log end.
func checkTablet(t *testing.T, tab *Tablet) {
	t.Helper()
	checkTabletOn(t, vfs.OS, tab, "")
}

func checkTabletOn(t *testing.T, fsys vfs.FS, tab *Tablet, msg string) {
	t.Helper()
	prevNext := int64(-1)
	for _, s := range tab.Segments {
		for _, k := range []logfile.Kind{logfile.Index, logfile.TimeIndex, logfile.TxnIndex} {
			problems, err := s.VerifyIndex(k)
			require.NoError(t, err)
			require.Empty(t, problems, "%s: %s of %s; report %v", msg, k, s.LogPath(), tab.Report)
		}
		tail, err := segment.ScanLogFile(fsys, s.LogPath(), nil)
		require.NoError(t, err)
		require.Equal(t, segment.CleanEnd, tail.Kind, "%s: %v", s.LogPath(), tail)
		require.GreaterOrEqual(t, s.BaseOffset(), prevNext, "segments overlap at %s", s.LogPath())
		next, err := s.ReadNextOffset()
		require.NoError(t, err)
		prevNext = next
	}
	require.Equal(t, tab.LogEndOffset, prevNext)
}

// Scenario 52: testRecoveryAfterCrashDuringSplitPhase1–5. seglog never
// splits a segment, but a cleaner replacing one segment by several writes
// the same files in the same order (docs/format.md §4.1 step 3), so a crash at each
// rename step must give back the same records: the old segment while the
// replacement is unfinished (phases 1–2), the new ones once every new file
// is a .swap (phases 3–5).
func TestRecoveryAfterCrashDuringSplit(t *testing.T) {
	for phase := 1; phase <= 5; phase++ {
		t.Run(string(rune('0'+phase)), func(t *testing.T) {
			d := dataDir(t)
			l := newTestLog(t, vfs.OS, d, segment.Options{SegmentBytes: 2000})
			for range 40 {
				l.now += 10
				l.records(2, 30)
			}
			l.closeClean()
			opened := openAll(t, l)
			before := offsetsOf(t, &Tablet{Segments: opened})
			oldCount := len(l.segs)
			next, err := opened[0].ReadNextOffset()
			require.NoError(t, err)
			third := next / 3 / 2 * 2 // batches hold two records
			parts := []int64{0, third, 2 * third}
			for i, base := range parts {
				to := next
				if i+1 < len(parts) {
					to = parts[i+1]
				}
				writeSegmentPart(t, vfs.OS, opened[0], base, base, to, logfile.CleanedSuffix)
			}
			// Phase 1 stops here: every new segment is .cleaned. The
			// replace protocol renames them to .swap in descending order.
			descending := slices.Clone(parts)
			slices.Reverse(descending)
			switch phase {
			case 2: // only the highest has become a .swap
				renameSegment(t, l.dir, descending[0], logfile.CleanedSuffix, logfile.SwapSuffix)
			case 3, 4, 5:
				for _, base := range descending {
					renameSegment(t, l.dir, base, logfile.CleanedSuffix, logfile.SwapSuffix)
				}
			}
			if phase >= 4 { // the old segment is marked for deletion
				renameSegment(t, l.dir, 0, "", logfile.DeletedSuffix)
			}
			if phase == 5 { // the first new segment is in place
				renameSegment(t, l.dir, 0, logfile.SwapSuffix, "")
			}
			r := l.load()
			tab := r.Tablets[0]
			require.Equal(t, before, offsetsOf(t, tab))
			want := oldCount
			if phase >= 3 {
				want = oldCount - 1 + len(parts)
			}
			require.Len(t, tab.Segments, want)
			checkTablet(t, tab)
			names, err := os.ReadDir(l.dir)
			require.NoError(t, err)
			for _, n := range names {
				for _, suffix := range []string{logfile.CleanedSuffix, logfile.SwapSuffix, logfile.DeletedSuffix} {
					require.False(t, strings.HasSuffix(n.Name(), suffix), n.Name())
				}
			}
		})
	}
}

// The acceptance case: a copy of a directory with a torn active
// segment, a corrupt sealed index, a missing .index, an orphan .timeindex
// and a leftover .swap (a cleaner's output for the first segment) recovers
// to exactly the expected tablet and report.
func TestRecoverDamagedCopy(t *testing.T) {
	d := dataDir(t)
	l := newTestLog(t, vfs.OS, d, segment.Options{SegmentBytes: 1500, IndexIntervalBytes: 200})
	for range 60 {
		l.now += 10
		l.records(1, 40)
	}
	l.flush() // the recovery point: everything so far
	recoveryPoint := l.next
	for range 3 {
		l.now += 10
		l.records(1, 40)
	}
	l.closeDirty()
	require.GreaterOrEqual(t, len(l.segs), 5)
	before := offsetsOf(t, &Tablet{Segments: openAll(t, l)})
	logEnd := l.next

	// Copy the directory and damage the copy.
	copyDir := dataDir(t)
	require.NoError(t, os.CopyFS(copyDir, os.DirFS(d)))
	dir := filepath.Join(copyDir, tp.DirName())
	name := func(base int64, k logfile.Kind) string { return filepath.Join(dir, logfile.Filename(base, k)) }
	bases := make([]int64, len(l.segs))
	for i, s := range l.segs {
		bases[i] = s.BaseOffset()
	}
	active := bases[len(bases)-1]

	// 1. A leftover .swap: a cleaner's output for the first segment
	// (every other batch) renamed to .swap before the old files went.
	first := openAll(t, &testLog{dir: dir, segs: l.segs[:1]})[0]
	firstNext, err := first.ReadNextOffset()
	require.NoError(t, err)
	cleaned, err := segment.Create(vfs.OS, dir, 0, segment.Options{FileSuffix: logfile.SwapSuffix})
	require.NoError(t, err)
	require.NoError(t, first.Batches(0, segment.NoMaxPosition, func(b record.Batch) error {
		if b.BaseOffset()%2 == 1 {
			return nil
		}
		return cleaned.Append(segment.AppendInfo{LargestOffset: b.LastOffset(), LargestTimestamp: b.MaxTimestamp(),
			ShallowOffsetOfMaxTimestamp: b.LastOffset()}, slices.Clone(b.Bytes()))
	}))
	require.NoError(t, cleaned.Seal())
	require.NoError(t, cleaned.Close())
	require.NoError(t, first.Close())
	for o := range before {
		if o < firstNext && o%2 == 1 {
			delete(before, o)
		}
	}
	// 2. A corrupt sealed index: the last entry of the second segment's
	// index points far beyond its .log.
	idx, err := os.ReadFile(name(bases[1], logfile.Index))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(idx), 16)
	copy(idx[len(idx)-4:], []byte{0x7f, 0, 0, 0})
	require.NoError(t, os.WriteFile(name(bases[1], logfile.Index), idx, 0o644))
	// 3. A missing .index on the third segment.
	require.NoError(t, os.Remove(name(bases[2], logfile.Index)))
	// 4. An orphan .timeindex.
	orphan := filepath.Join(dir, logfile.Filename(logEnd+1000, logfile.TimeIndex))
	require.NoError(t, os.WriteFile(orphan, make([]byte, 24), 0o644))
	// 5. A torn active segment: the first 100 bytes of a batch.
	b := record.NewBuilder(record.None)
	b.SetBaseOffset(logEnd)
	require.NoError(t, b.Append(record.Record{Timestamp: l.now, Value: make([]byte, 300)}))
	torn, err := b.Build()
	require.NoError(t, err)
	activeSize := l.active().Size()
	f, err := os.OpenFile(name(active, logfile.Log), os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.Write(torn.Bytes()[:100])
	require.NoError(t, err)
	require.NoError(t, f.Close())

	r := load(t, vfs.OS, copyDir, l.opts)
	tab := r.Tablets[0]
	require.False(t, r.CleanShutdown)
	require.Equal(t, logEnd, tab.LogEndOffset)
	require.Equal(t, recoveryPoint, tab.RecoveryPoint)
	require.Equal(t, int64(0), tab.LogStartOffset)
	require.Equal(t, bases, tabletBases(tab))
	require.Equal(t, before, offsetsOf(t, tab))
	checkTablet(t, tab)

	type change struct {
		file   string
		action Action
		bytes  int64
	}
	var got []change
	for _, c := range tab.Report {
		got = append(got, change{filepath.Base(c.File), c.Action, c.Bytes})
	}
	base := func(o int64, k logfile.Kind) string { return logfile.Filename(o, k) }
	size := func(k logfile.Kind) int64 {
		info, err := os.Stat(filepath.Join(l.dir, base(0, k)))
		require.NoError(t, err)
		return info.Size()
	}
	want := []change{
		// Step 4: the replaced segment's files go, then the .swap files
		// take their names.
		{base(0, logfile.Index), Deleted, size(logfile.Index)},
		{base(0, logfile.Log), Deleted, size(logfile.Log)},
		{base(0, logfile.TimeIndex), Deleted, size(logfile.TimeIndex)},
	}
	for _, k := range []logfile.Kind{logfile.Index, logfile.Log, logfile.TimeIndex} {
		want = append(want, change{base(0, k), Renamed, 0})
	}
	want = append(want,
		// Step 5: the orphan goes as the directory is read; then the
		// corrupt and the missing index are rebuilt, in offset order.
		change{filepath.Base(orphan), Deleted, 24},
		change{base(bases[1], logfile.Log), RebuiltIndex, 0},
		change{base(bases[2], logfile.Log), RebuiltIndex, 0},
	)
	// Step 6: every segment from the one holding the recovery point is
	// recovered (those rebuilt in step 5 are not scanned again); the torn
	// batch goes.
	holder := 0
	for i, o := range bases {
		if o <= recoveryPoint {
			holder = i
		}
	}
	for _, o := range bases[holder:] {
		if o != bases[1] && o != bases[2] {
			want = append(want, change{base(o, logfile.Log), RebuiltIndex, 0})
		}
	}
	want = append(want, change{base(active, logfile.Log), Truncated, 100})
	require.Equal(t, want, got, "%v", tab.Report)
	for _, c := range tab.Report {
		if c.Action == Truncated {
			require.Contains(t, c.Why, "at position "+strconv.FormatInt(activeSize, 10))
		}
	}
	// The original directory is untouched.
	_, err = os.Stat(filepath.Join(l.dir, base(0, logfile.Log)+logfile.SwapSuffix))
	require.ErrorIs(t, err, os.ErrNotExist)
	_, err = os.Stat(filepath.Join(l.dir, base(bases[2], logfile.Index)))
	require.NoError(t, err)
}

func tabletBases(tab *Tablet) []int64 {
	var out []int64
	for _, s := range tab.Segments {
		out = append(out, s.BaseOffset())
	}
	return out
}
