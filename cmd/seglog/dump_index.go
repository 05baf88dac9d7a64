package main

import (
	"fmt"
	"path/filepath"

	"github.com/seglog/seglog/record"

	"github.com/seglog/seglog/logfile"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/offsetindex"
	"github.com/seglog/seglog/segment"
	"github.com/seglog/seglog/timeindex"
	"github.com/seglog/seglog/txnindex"
	"github.com/seglog/seglog/vfs"
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

func (d *dumper) dumpIndex(fsys vfs.FS, path string, name logfile.Name) error {
	print := !d.opts.sanityCheck && !d.opts.verifyIndex
	var err error
	switch name.Kind {
	case logfile.Index:
		err = d.dumpOffsetIndex(fsys, path, name.Base, print)
	case logfile.TimeIndex:
		err = d.dumpTimeIndex(fsys, path, name.Base, print)
	default:
		err = d.dumpTxnIndex(fsys, path, name.Base, print)
	}
	if err != nil || !d.opts.verifyIndex {
		return err
	}
	return d.verifyIndex(fsys, path, name)
}

// verifyIndex checks an index against the .log beside it, through the
// segment code.
func (d *dumper) verifyIndex(fsys vfs.FS, path string, name logfile.Name) error {
	if name.Suffix != "" {
		return fmt.Errorf("%s: --verify-index-only reads segments under their final names", path)
	}
	seg, err := segment.Open(fsys, filepath.Dir(path), name.Base, segment.Options{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("--verify-index-only needs the log beside the index: %w", err)
	}
	defer seg.Close()
	problems, err := seg.VerifyIndex(name.Kind)
	if err != nil {
		return err
	}
	size := map[logfile.Kind]int{logfile.Index: offsetindex.EntrySize, logfile.TimeIndex: timeindex.EntrySize,
		logfile.TxnIndex: txnindex.EntrySize}[name.Kind]
	for _, p := range problems {
		d.slotProblem(p.Offset, size, p.Reason)
	}
	if len(problems) == 0 {
		d.note("%s: every entry matches the log.", path)
	}
	return nil
}

// mappedIndex is what dump needs of an .index or a .timeindex.
type mappedIndex interface {
	Open() (offsetindex.Opened, error)
	Check() ([]*seglog.CorruptionError, error)
	Close() error
}

// dumpMapped checks or prints a memory-mapped index; line returns entry i's
// line.
func (d *dumper) dumpMapped(path string, x mappedIndex, entrySize int, print bool, line func(i int) (fmt.Stringer, error)) error {
	defer x.Close()
	opened, err := x.Open()
	if err != nil {
		return err
	}
	if d.opts.sanityCheck {
		problems, err := x.Check()
		if err := d.reportChecks(path, entrySize, problems, err); err != nil {
			return err
		}
	}
	for i := 0; print && i < opened.Entries; i++ {
		l, err := line(i)
		if err != nil {
			return err
		}
		d.emit(l)
	}
	if print && opened.Untrimmed() {
		d.note("(%d slots after the valid entries were not read: the file was not trimmed)", opened.Slots-opened.Entries)
	}
	return nil
}

func (d *dumper) dumpOffsetIndex(fsys vfs.FS, path string, base int64, print bool) error {
	x, err := offsetindex.Open(fsys, path, base, offsetindex.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	return d.dumpMapped(path, x, offsetindex.EntrySize, print, func(i int) (fmt.Stringer, error) {
		e, err := x.Entry(i)
		return &offsetLine{Kind: "index", Offset: e.Offset, Position: e.Position}, err
	})
}

func (d *dumper) dumpTimeIndex(fsys vfs.FS, path string, base int64, print bool) error {
	x, err := timeindex.Open(fsys, path, base, timeindex.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	return d.dumpMapped(path, x, timeindex.EntrySize, print, func(i int) (fmt.Stringer, error) {
		e, err := x.Entry(i)
		return &timeLine{Kind: "timeindex", Timestamp: e.Timestamp, Offset: e.Offset}, err
	})
}

func (d *dumper) dumpTxnIndex(fsys vfs.FS, path string, base int64, print bool) error {
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
	if !print {
		return nil
	}
	return x.Scan(func(t record.AbortedTxn, _ int64) bool {
		d.emit(&txnLine{Kind: "txnindex", Version: txnindex.Version, ProducerID: t.ProducerID,
			FirstOffset: t.FirstOffset, LastOffset: t.LastOffset, LastStableOffset: t.LastStableOffset})
		return true
	})
}
