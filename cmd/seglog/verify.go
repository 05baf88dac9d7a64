package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/recovery"
	"github.com/seglog/seglog/tablet"
	"github.com/seglog/seglog/vfs"
)

func newVerifyCmd() *cobra.Command {
	var (
		dataDir   string
		topic     string
		partition int32
		asJSON    bool
	)
	cmd := &cobra.Command{
		Use:   "verify --data-dir D [--topic T --partition P]",
		Short: "Check every invariant of a data directory without changing it; exit 1 on any violation",
		Long: `verify reads a data directory (or one tablet of it) and checks, without writing
anything:
  - every batch CRC-valid, its offsets increasing within and across segments,
    and each segment ending cleanly (no torn tail, no zeroes, no garbage); a
    gap in the offsets is a note, not a problem (a power cut may take a
    segment's unacknowledged tail while the next segment survives, and a
    replica of a compacted log has gaps);
  - the offset and time indexes against the batches (every entry where a batch
    starts, time entries at running maxima) and sealed indexes trimmed;
  - each transaction index equal to what a replay of the markers gives;
  - each producer-state snapshot equal to a replay of the log up to it;
  - the leader-epoch checkpoint against the epochs the batches carry;
  - the checkpoints against the log ends (the recovery point at the log end
    when the clean-shutdown marker is there), and no entry for a missing tablet;
  - partition.metadata and meta.properties readable;
  - no leftover (.deleted, .cleaned, .swap, .tmp, -delete), orphan index or file
    Kafka would not write.
Each file is read once. Every problem is printed with its file, the byte
position where it has one, and the reason.

It takes the directory's lock shared: it runs beside other readers, and is
refused while a writer has the directory open. The exit status is 1 when
anything is wrong.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dataDir == "" {
				return fmt.Errorf("--data-dir is required")
			}
			var opts recovery.VerifyOptions
			if cmd.Flags().Changed("topic") || cmd.Flags().Changed("partition") {
				if topic == "" {
					return fmt.Errorf("--partition needs --topic")
				}
				opts.Only = &checkpoint.TopicPartition{Topic: topic, Partition: partition}
			}
			if _, err := os.Stat(dataDir); err != nil {
				return fmt.Errorf("no data directory %s", dataDir)
			}
			lock, err := tablet.LockDir(vfs.OS, dataDir, true) // beside other readers, never beside a writer
			if err != nil {
				return err
			}
			defer lock.Close()
			r, err := recovery.Verify(vfs.OS, dataDir, opts)
			if err != nil {
				return err
			}
			if opts.Only != nil && len(r.Tablets) == 0 {
				return fmt.Errorf("%s has no tablet %s", dataDir, opts.Only)
			}
			if asJSON {
				if err := json.NewEncoder(cmd.OutOrStdout()).Encode(struct {
					*recovery.VerifyReport
					OK bool `json:"ok"`
				}{r, r.OK()}); err != nil {
					return err
				}
			} else {
				printVerifyReport(cmd.OutOrStdout(), r)
			}
			if !r.OK() {
				return &exitError{code: 1}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", "", "the data directory (holding topic-partition directories)")
	cmd.Flags().StringVar(&topic, "topic", "", "verify only this topic's tablet (with --partition)")
	cmd.Flags().Int32Var(&partition, "partition", 0, "the partition of --topic")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as one JSON object (with \"ok\")")
	return cmd
}

func printVerifyReport(w io.Writer, r *recovery.VerifyReport) {
	problems := len(r.Problems)
	for _, p := range r.Problems {
		fmt.Fprintf(w, "PROBLEM %s\n", p)
	}
	for _, t := range r.Tablets {
		status := "ok"
		if len(t.Problems) > 0 {
			status = fmt.Sprintf("%d problem(s)", len(t.Problems))
		}
		fmt.Fprintf(w, "%s: offsets %d..%d, %d segment(s), %d batch(es), %d record(s): %s\n",
			t.Tablet, t.LogStartOffset, t.LogEndOffset, t.Segments, t.Batches, t.Records, status)
		for _, p := range t.Problems {
			fmt.Fprintf(w, "  PROBLEM %s\n", p)
		}
		for _, p := range t.Notes {
			fmt.Fprintf(w, "  note %s\n", p)
		}
		problems += len(t.Problems)
	}
	secs := r.Duration.Seconds()
	rate := 0.0
	if secs > 0 {
		rate = float64(r.BytesRead) / secs / (1 << 30)
	}
	verdict := "OK"
	if problems > 0 {
		verdict = fmt.Sprintf("%d problem(s)", problems)
	}
	fmt.Fprintf(w, "%s: %d tablet(s), %d bytes of log read in %.3fs (%.2f GiB/s): %s\n",
		r.Dir, len(r.Tablets), r.BytesRead, secs, rate, verdict)
}
