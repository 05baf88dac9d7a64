package main

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/logfile"
	"github.com/seglog/seglog/tablet"
	"github.com/seglog/seglog/tiering"

	"github.com/spf13/cobra"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/coordinator/group"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/segment"
	"github.com/seglog/seglog/vfs"
)

type dumpOptions struct {
	printData   bool
	offsets     bool
	deep        bool
	json        bool
	sanityCheck bool
	verifyIndex bool
}

func newDumpCmd() *cobra.Command {
	var o dumpOptions
	cmd := &cobra.Command{
		Use:   "dump FILE...",
		Short: "Print segment, snapshot and checkpoint files, like Kafka's dump tool",
		Long: `dump prints the contents of segment files in the format of Kafka's
DumpLogSegments tool.

A .log file gives one line per batch; with --deep-iteration, a line for every
record under its batch; with --print-data-log, its key and value too; with
--offsets-decoder, a __consumer_offsets record's key and value decoded, as
Kafka's dump tool prints them (a record that does not decode is an error). A batch
whose CRC does not match is shown with isvalid: false. Then the file is read
as recovery would read it, and a torn tail, a zero tail or damage is reported
with its position and the bytes recovery would cut.

A .snapshot file gives one line per producer; a damaged one (bad version,
CRC or length) is reported.

The checkpoint files — recovery-point-offset-checkpoint, log-start-offset-
checkpoint, replication-offset-checkpoint, cleaner-offset-checkpoint (one line
per tablet), leader-epoch-checkpoint (one line per epoch) — and
partition.metadata, meta.properties and .kafka_cleanshutdown (one line per
field) are read strictly; a malformed one is reported at the byte where it
goes wrong.

An .index, .timeindex or .txnindex file gives one line per entry. The file's
name must carry the segment's base offset. --index-sanity-check checks the
entries instead of printing them (order, bounds, a zero tail left by a
crash); --verify-index-only checks them against the .log beside the index
(every offset entry at the start of a batch ending at that offset, every time
entry the running maximum first reached by the batch ending at its offset,
every aborted transaction ending at an ABORT marker of its producer).

A stream object of the tier (docs/tiering.md) — a .seg path, file:///path, or
s3://bucket/key?endpoint=…&region=…&path-style=true (credentials from the AWS
chain) — gives its metadata line, then each block (its CRC checked) and the
batches in it; a damaged footer, index or block is reported at its position.

The exit status is 1 if anything was wrong. dump never changes a file.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			d := &dumper{w: cmd.OutOrStdout(), opts: o}
			ctx := ctxOf(cmd)
			unlock, err := lockDataDirsOf(args)
			if err != nil {
				return err
			}
			defer unlock()
			for _, path := range args {
				if isObjectArg(path) {
					if !o.json {
						fmt.Fprintf(d.w, "Dumping %s\n", tiering.RedactURL(path))
					}
					if err := d.dumpObject(ctx, path); err != nil {
						return err
					}
					continue
				}
				if err := d.dumpFile(vfs.OS, path); err != nil {
					return err
				}
			}
			if d.problems > 0 {
				return &exitError{code: 1, msg: fmt.Sprintf("%d problem(s) found", d.problems)}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&o.printData, "print-data-log", false, "print every record, with its key and value")
	cmd.Flags().BoolVar(&o.deep, "deep-iteration", false, "print every record (without its key and value)")
	cmd.Flags().BoolVar(&o.offsets, "offsets-decoder", false, "print every record of a __consumer_offsets segment decoded: its key and value as Kafka's dump tool does")
	cmd.Flags().BoolVar(&o.json, "json", false, "print one JSON object per line instead of text")
	cmd.Flags().BoolVar(&o.sanityCheck, "index-sanity-check", false, "check index files instead of printing their entries")
	cmd.Flags().BoolVar(&o.verifyIndex, "verify-index-only", false, "check index files against the .log beside them")
	return cmd
}

type dumper struct {
	w        io.Writer
	opts     dumpOptions
	problems int
	it       record.Iter
}

func (d *dumper) dumpFile(fsys vfs.FS, path string) error {
	if isCheckpointFile(filepath.Base(path)) {
		if !d.opts.json {
			fmt.Fprintf(d.w, "Dumping %s\n", path)
		}
		return d.dumpCheckpoint(fsys, path)
	}
	name, err := logfile.ParseFilename(filepath.Base(path))
	if err != nil {
		if filepath.Ext(path) != ".log" {
			return fmt.Errorf("%s: unsupported file (%w)", path, err)
		}
		name = logfile.Name{Kind: logfile.Log} // any .log file can be read
	}
	if !d.opts.json {
		fmt.Fprintf(d.w, "Dumping %s\n", path)
	}
	switch name.Kind {
	case logfile.Log:
		return d.dumpLog(fsys, path)
	case logfile.Index, logfile.TimeIndex, logfile.TxnIndex:
		return d.dumpIndex(fsys, path, name)
	case logfile.Snapshot:
		return d.dumpSnapshot(fsys, path)
	}
	return fmt.Errorf("%s: dump does not read %s files yet", path, name.Kind)
}

func (d *dumper) dumpLog(fsys vfs.FS, path string) error {
	f, err := fsys.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return err
	}
	s := record.NewScanner(f, 0, size)
	for s.Next() {
		b, err := s.Batch()
		if err != nil {
			break // the verdict below says why
		}
		d.batch(s.Pos(), b)
	}
	if s.Stop() == record.ReadFailed {
		return s.Err()
	}
	// The verdict comes from the code recovery runs.
	tail, err := segment.ScanLogFile(fsys, path, nil)
	if err != nil {
		var ce *seglog.CorruptionError
		if errors.As(err, &ce) {
			d.problem(ce.Offset, ce.Reason+" (recovery stops here and changes nothing)")
			return nil
		}
		return err
	}
	if tail.Kind != segment.CleanEnd {
		reason := fmt.Sprintf("recovery would cut %d bytes of %s from position %d", tail.Bytes(), tail.Kind, tail.Position)
		if tail.Err != nil {
			reason += ": " + tail.Err.Error()
		}
		d.problem(tail.Position, reason)
	}
	return nil
}

type batchLine struct {
	Kind                 string `json:"kind"`
	BaseOffset           int64  `json:"baseOffset"`
	LastOffset           int64  `json:"lastOffset"`
	Count                int32  `json:"count"`
	BaseSequence         int32  `json:"baseSequence"`
	LastSequence         int32  `json:"lastSequence"`
	ProducerID           int64  `json:"producerId"`
	ProducerEpoch        int16  `json:"producerEpoch"`
	PartitionLeaderEpoch int32  `json:"partitionLeaderEpoch"`
	IsTransactional      bool   `json:"isTransactional"`
	IsControl            bool   `json:"isControl"`
	Position             int64  `json:"position"`
	TimestampType        string `json:"timestampType"`
	Timestamp            int64  `json:"timestamp"`
	Size                 int    `json:"size"`
	Magic                int8   `json:"magic"`
	CompressCodec        string `json:"compresscodec"`
	CRC                  uint32 `json:"crc"`
	IsValid              bool   `json:"isvalid"`
}

func (l *batchLine) String() string {
	return fmt.Sprintf("baseOffset: %d lastOffset: %d count: %d baseSequence: %d lastSequence: %d "+
		"producerId: %d producerEpoch: %d partitionLeaderEpoch: %d isTransactional: %t isControl: %t "+
		"position: %d %s: %d size: %d magic: %d compresscodec: %s crc: %d isvalid: %t",
		l.BaseOffset, l.LastOffset, l.Count, l.BaseSequence, l.LastSequence, l.ProducerID, l.ProducerEpoch,
		l.PartitionLeaderEpoch, l.IsTransactional, l.IsControl, l.Position, l.TimestampType, l.Timestamp,
		l.Size, l.Magic, l.CompressCodec, l.CRC, l.IsValid)
}

type recordLine struct {
	Kind             string   `json:"kind"`
	Offset           int64    `json:"offset"`
	TimestampType    string   `json:"timestampType"`
	Timestamp        int64    `json:"timestamp"`
	KeySize          int      `json:"keySize"`
	ValueSize        int      `json:"valueSize"`
	Sequence         int32    `json:"sequence"`
	HeaderKeys       []string `json:"headerKeys"`
	Key              *string  `json:"key,omitempty"`
	Payload          *string  `json:"payload,omitempty"`
	EndTxnMarker     string   `json:"endTxnMarker,omitempty"`
	CoordinatorEpoch *int32   `json:"coordinatorEpoch,omitempty"`
	ControlType      string   `json:"controlType,omitempty"`
}

func (l *recordLine) String() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "| offset: %d %s: %d keySize: %d valueSize: %d sequence: %d headerKeys: [%s]",
		l.Offset, l.TimestampType, l.Timestamp, l.KeySize, l.ValueSize, l.Sequence, strings.Join(l.HeaderKeys, ","))
	switch {
	case l.EndTxnMarker != "":
		fmt.Fprintf(&sb, " endTxnMarker: %s coordinatorEpoch: %d", l.EndTxnMarker, *l.CoordinatorEpoch)
	case l.ControlType != "":
		fmt.Fprintf(&sb, " controlType: %s", l.ControlType)
	}
	if l.Key != nil {
		fmt.Fprintf(&sb, " key: %s", *l.Key)
	}
	if l.Payload != nil {
		fmt.Fprintf(&sb, " payload: %s", *l.Payload)
	}
	return sb.String()
}

type problemLine struct {
	Kind     string `json:"kind"`
	Position int64  `json:"position"`
	Slot     *int   `json:"slot,omitempty"`
	Reason   string `json:"reason"`
}

func (l *problemLine) String() string {
	if l.Slot != nil {
		return fmt.Sprintf("error at position %d (slot %d): %s", l.Position, *l.Slot, l.Reason)
	}
	if l.Position < 0 {
		return "error: " + l.Reason // the file as a whole
	}
	return fmt.Sprintf("error at position %d: %s", l.Position, l.Reason)
}

func (d *dumper) emit(line fmt.Stringer) {
	if d.opts.json {
		out, _ := json.Marshal(line)
		fmt.Fprintf(d.w, "%s\n", out)
		return
	}
	fmt.Fprintln(d.w, line.String())
}

func (d *dumper) problem(pos int64, reason string) {
	d.problems++
	d.emit(&problemLine{Kind: "error", Position: pos, Reason: reason})
}

func (d *dumper) batch(pos int64, b record.Batch) {
	valid := b.Verify() == nil
	d.emit(&batchLine{
		Kind: "batch", BaseOffset: b.BaseOffset(), LastOffset: b.LastOffset(), Count: b.NumRecords(),
		BaseSequence: b.BaseSequence(), LastSequence: b.LastSequence(), ProducerID: b.ProducerID(),
		ProducerEpoch: b.ProducerEpoch(), PartitionLeaderEpoch: b.PartitionLeaderEpoch(),
		IsTransactional: b.IsTransactional(), IsControl: b.IsControl(), Position: pos,
		TimestampType: b.TimestampType().String(), Timestamp: b.MaxTimestamp(), Size: b.Size(),
		Magic: b.Magic(), CompressCodec: b.Compression().String(), CRC: b.CRC(), IsValid: valid,
	})
	if !valid {
		d.problems++
		return // the records of a damaged batch are not to be trusted
	}
	if !d.opts.printData && !d.opts.deep && !d.opts.offsets {
		return
	}
	d.it.Reset(b, record.DefaultMaxUncompressed)
	for d.it.Next() {
		d.emit(d.recordLine(b, d.it.Record()))
	}
	if err := d.it.Err(); err != nil {
		d.problem(pos, fmt.Sprintf("records of the batch at position %d: %v", pos, err))
	}
}

func (d *dumper) recordLine(b record.Batch, r *record.Record) *recordLine {
	l := &recordLine{Kind: "record", Offset: r.Offset, TimestampType: b.TimestampType().String(),
		Timestamp: r.Timestamp, KeySize: fieldSize(r.Key), ValueSize: fieldSize(r.Value),
		Sequence: r.Sequence, HeaderKeys: []string{}}
	for _, h := range r.Headers {
		l.HeaderKeys = append(l.HeaderKeys, printable(h.Key))
	}
	if !b.IsControl() {
		switch {
		case d.opts.offsets:
			k, v, err := group.Format(r.Key, r.Value)
			if err != nil {
				d.problems++ // reported on the record's line, and in the exit status
				k, v = "invalid: "+err.Error(), printable(r.Value)
			}
			l.Key, l.Payload = &k, &v
		case d.opts.printData:
			l.Key, l.Payload = optPrintable(r.Key), optPrintable(r.Value)
		}
		return l
	}
	typ, err := record.ParseControlKey(r.Key)
	switch {
	case err != nil:
		l.ControlType = "invalid (" + err.Error() + ")"
	case typ == record.ControlCommit || typ == record.ControlAbort:
		if epoch, err := record.ParseEndTxnMarker(r.Value); err != nil {
			l.ControlType = typ.String() + " with an invalid value (" + err.Error() + ")"
		} else {
			l.EndTxnMarker, l.CoordinatorEpoch = typ.String(), &epoch
		}
	default:
		l.ControlType = typ.String()
	}
	return l
}

func fieldSize(b []byte) int {
	if b == nil {
		return -1
	}
	return len(b)
}

func optPrintable(b []byte) *string {
	if b == nil {
		return nil
	}
	s := printable(b)
	return &s
}

// printable returns UTF-8 text as it is and anything else as 0x-prefixed
// hex.
func printable(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return "0x" + hex.EncodeToString(b)
}

// lockDataDirsOf takes a shared lock on each data directory that holds one
// of the files (the file's directory, or the one above for a tablet's
// files): dump only reads, beside other readers, never beside a writer.
// Files outside any data directory are read without a lock.
func lockDataDirsOf(paths []string) (func(), error) {
	var locks []io.Closer
	unlock := func() {
		for _, l := range locks {
			l.Close()
		}
	}
	seen := map[string]bool{}
	for _, path := range paths {
		if isObjectArg(path) {
			continue
		}
		abs, err := filepath.Abs(path)
		if err != nil {
			continue
		}
		for _, dir := range []string{filepath.Dir(abs), filepath.Dir(filepath.Dir(abs))} {
			if seen[dir] || !isDataDir(dir) {
				continue
			}
			seen[dir] = true
			l, err := tablet.LockDir(vfs.OS, dir, true)
			if err != nil {
				unlock()
				return nil, err
			}
			locks = append(locks, l)
			break
		}
	}
	return unlock, nil
}

// isDataDir reports whether dir holds a data directory's meta.properties.
func isDataDir(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, checkpoint.MetaPropertiesFile))
	return err == nil
}
