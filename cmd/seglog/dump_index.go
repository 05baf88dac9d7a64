package main

import (
	"fmt"
	"path/filepath"
	"sort"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/internal/vfs"
	"github.com/seglog/seglog/offsetindex"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/segment"
	"github.com/seglog/seglog/timeindex"
	"github.com/seglog/seglog/txnindex"
)

type offsetLine struct {
	Kind     string `json:"kind"`
	Offset   int64  `json:"offset"`
	Position int32  `json:"position"`
}

func (l *offsetLine) String() string {
	return fmt.Sprintf("offset: %d position: %d", l.Offset, l.Position)
}

type timeLine struct {
	Kind      string `json:"kind"`
	Timestamp int64  `json:"timestamp"`
	Offset    int64  `json:"offset"`
}

func (l *timeLine) String() string {
	return fmt.Sprintf("timestamp: %d offset: %d", l.Timestamp, l.Offset)
}

type txnLine struct {
	Kind             string `json:"kind"`
	Version          int    `json:"version"`
	ProducerID       int64  `json:"producerId"`
	FirstOffset      int64  `json:"firstOffset"`
	LastOffset       int64  `json:"lastOffset"`
	LastStableOffset int64  `json:"lastStableOffset"`
}

func (l *txnLine) String() string {
	return fmt.Sprintf("version: %d producerId: %d firstOffset: %d lastOffset: %d lastStableOffset: %d",
		l.Version, l.ProducerID, l.FirstOffset, l.LastOffset, l.LastStableOffset)
}

type noteLine struct {
	Kind string `json:"kind"`
	Note string `json:"note"`
}

func (l *noteLine) String() string { return l.Note }

func (d *dumper) note(format string, args ...any) {
	d.emit(&noteLine{Kind: "note", Note: fmt.Sprintf(format, args...)})
}

// slotProblem reports a defect of an index entry.
func (d *dumper) slotProblem(pos int64, entrySize int, reason string) {
	d.problems++
	slot := int(pos / int64(entrySize))
	d.emit(&problemLine{Kind: "error", Position: pos, Slot: &slot, Reason: reason})
}

func (d *dumper) reportChecks(path string, entrySize int, problems []*seglog.CorruptionError, err error) error {
	if err != nil {
		return err
	}
	for _, p := range problems {
		d.slotProblem(p.Offset, entrySize, p.Reason)
	}
	if len(problems) == 0 {
		d.note("%s passed sanity check.", path)
	}
	return nil
}

func (d *dumper) dumpIndex(fsys vfs.FS, path string, name segment.Name) error {
	var log *logSummary
	if d.opts.verifyIndex {
		logPath := filepath.Join(filepath.Dir(path), segment.FilenameWithSuffix(name.Base, segment.Log, name.Suffix))
		var err error
		if log, err = summarizeLog(fsys, logPath); err != nil {
			return fmt.Errorf("--verify-index-only needs the log beside the index: %w", err)
		}
	}
	printEntries := !d.opts.sanityCheck && !d.opts.verifyIndex
	switch name.Kind {
	case segment.Index:
		return d.dumpOffsetIndex(fsys, path, name.Base, log, printEntries)
	case segment.TimeIndex:
		return d.dumpTimeIndex(fsys, path, name.Base, log, printEntries)
	default:
		return d.dumpTxnIndex(fsys, path, name.Base, log, printEntries)
	}
}

func (d *dumper) dumpOffsetIndex(fsys vfs.FS, path string, base int64, log *logSummary, print bool) error {
	x, err := offsetindex.Open(fsys, path, base, offsetindex.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	defer x.Close()
	opened, err := x.Open()
	if err != nil {
		return err
	}
	if d.opts.sanityCheck {
		problems, err := x.Check()
		if err := d.reportChecks(path, offsetindex.EntrySize, problems, err); err != nil {
			return err
		}
	}
	for i := range opened.Entries {
		e, err := x.Entry(i)
		if err != nil {
			return err
		}
		if print {
			d.emit(&offsetLine{Kind: "index", Offset: e.Offset, Position: e.Position})
		}
		if log != nil {
			if reason := log.checkOffsetEntry(e); reason != "" {
				d.slotProblem(int64(i)*offsetindex.EntrySize, offsetindex.EntrySize, reason)
			}
		}
	}
	if print && opened.Untrimmed() {
		d.note("(%d slots after the valid entries were not read: the file was not trimmed)", opened.Slots-opened.Entries)
	}
	return nil
}

func (d *dumper) dumpTimeIndex(fsys vfs.FS, path string, base int64, log *logSummary, print bool) error {
	x, err := timeindex.Open(fsys, path, base, timeindex.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	defer x.Close()
	opened, err := x.Open()
	if err != nil {
		return err
	}
	if d.opts.sanityCheck {
		problems, err := x.Check()
		if err := d.reportChecks(path, timeindex.EntrySize, problems, err); err != nil {
			return err
		}
	}
	for i := range opened.Entries {
		e, err := x.Entry(i)
		if err != nil {
			return err
		}
		if print {
			d.emit(&timeLine{Kind: "timeindex", Timestamp: e.Timestamp, Offset: e.Offset})
		}
		if log != nil {
			if reason := log.checkTimeEntry(e); reason != "" {
				d.slotProblem(int64(i)*timeindex.EntrySize, timeindex.EntrySize, reason)
			}
		}
	}
	if print && opened.Untrimmed() {
		d.note("(%d slots after the valid entries were not read: the file was not trimmed)", opened.Slots-opened.Entries)
	}
	return nil
}

func (d *dumper) dumpTxnIndex(fsys vfs.FS, path string, base int64, log *logSummary, print bool) error {
	x := txnindex.Open(fsys, path, base, txnindex.Options{ReadOnly: true})
	defer x.Close()
	if _, err := fsys.Stat(path); err != nil {
		return err
	}
	if d.opts.sanityCheck {
		problems, err := x.Check()
		if err := d.reportChecks(path, txnindex.EntrySize, problems, err); err != nil {
			return err
		}
	}
	return x.Scan(func(t txnindex.AbortedTxn, pos int64) bool {
		if print {
			d.emit(&txnLine{Kind: "txnindex", Version: txnindex.Version, ProducerID: t.ProducerID,
				FirstOffset: t.FirstOffset, LastOffset: t.LastOffset, LastStableOffset: t.LastStableOffset})
		}
		if log != nil {
			if reason := log.checkAbortedTxn(t); reason != "" {
				d.slotProblem(pos, txnindex.EntrySize, reason)
			}
		}
		return true
	})
}

// logSummary is what index verification needs from a .log: each batch's
// position, last offset and max timestamp, the running maximum, and the
// markers.
type logSummary struct {
	path       string
	batches    []batchSummary
	end        int64 // where the valid batches end
	firstReach map[int64]int64
	aborts     map[int64]int64 // marker offset → producer id
}

type batchSummary struct {
	pos, lastOffset, maxTimestamp int64
}

func summarizeLog(fsys vfs.FS, path string) (*logSummary, error) {
	f, err := fsys.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	l := &logSummary{path: path, firstReach: map[int64]int64{}, aborts: map[int64]int64{}}
	running := record.NoTimestamp
	s := record.NewScanner(f, 0, size)
	for s.Next() {
		h := s.Header()
		last := h.BaseOffset + int64(h.LastOffsetDelta)
		l.batches = append(l.batches, batchSummary{pos: s.Pos(), lastOffset: last, maxTimestamp: h.MaxTimestamp})
		if h.MaxTimestamp > running {
			running = h.MaxTimestamp
			l.firstReach[last] = running
		}
		if h.Attributes.IsControl() {
			if b, err := s.Batch(); err == nil {
				if m, err := b.EndTxnMarker(); err == nil && m.Type == record.ControlAbort {
					l.aborts[last] = m.ProducerID
				}
			}
		}
	}
	if s.Stop() == record.ReadFailed {
		return nil, s.Err()
	}
	l.end = s.Pos()
	return l, nil
}

// checkOffsetEntry returns why e does not match the log, or "".
func (l *logSummary) checkOffsetEntry(e offsetindex.Entry) string {
	i := sort.Search(len(l.batches), func(i int) bool { return l.batches[i].pos >= int64(e.Position) })
	switch {
	case int64(e.Position) >= l.end:
		return fmt.Sprintf("offset %d position %d: beyond the last batch of %s (which ends at %d)",
			e.Offset, e.Position, filepath.Base(l.path), l.end)
	case l.batches[i].pos != int64(e.Position):
		return fmt.Sprintf("offset %d position %d: not the start of a batch (inside the batch at %d)",
			e.Offset, e.Position, l.batches[i-1].pos)
	case l.batches[i].lastOffset != e.Offset:
		return fmt.Sprintf("offset %d position %d: the batch there ends at offset %d",
			e.Offset, e.Position, l.batches[i].lastOffset)
	}
	return ""
}

// checkTimeEntry returns why e does not match the log, or "".
func (l *logSummary) checkTimeEntry(e timeindex.Entry) string {
	reached, ok := l.firstReach[e.Offset]
	switch {
	case !ok:
		return fmt.Sprintf("timestamp %d offset %d: no batch ending at offset %d raised the maximum timestamp",
			e.Timestamp, e.Offset, e.Offset)
	case reached != e.Timestamp:
		return fmt.Sprintf("timestamp %d offset %d: the batch ending at offset %d raised the maximum to %d",
			e.Timestamp, e.Offset, e.Offset, reached)
	}
	return ""
}

// checkAbortedTxn returns why t does not match the log, or "".
func (l *logSummary) checkAbortedTxn(t txnindex.AbortedTxn) string {
	pid, ok := l.aborts[t.LastOffset]
	switch {
	case !ok:
		return fmt.Sprintf("aborted transaction of producer %d: no ABORT marker at offset %d", t.ProducerID, t.LastOffset)
	case pid != t.ProducerID:
		return fmt.Sprintf("aborted transaction of producer %d: the ABORT marker at offset %d is producer %d's",
			t.ProducerID, t.LastOffset, pid)
	}
	return ""
}
