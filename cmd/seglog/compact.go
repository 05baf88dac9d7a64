package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/tablet"
)

func newCompactCmd() *cobra.Command {
	var f tabletFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "compact --data-dir D [--topic T --partition P]",
		Short: "Run one cleaning of the compacted tablets (cleanup.policy=compact), or of one",
		Long: `compact runs the log cleaner once, as the broker's does in the background: for
each tablet whose cleanup.policy holds compact (or the one --topic names), the
last offset of every key in its dirty section is mapped, and the log is recopied
from its start keeping the last record of each key, tombstones within
delete.retention.ms, no aborted transaction's records, and each producer's last
batch; the cleaned segments replace the old ones with Kafka's .cleaned → .swap →
.deleted protocol, so a crash at any point leaves one set or the other.
Whatever is dirty is cleaned, whatever min.cleanable.dirty.ratio says. The
active segment, and records above the last stable offset, are never cleaned.

It takes the directory's lock: a broker serving it cleans it itself.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			m, err := openManager(cmd, f.dataDir, write)
			if err != nil {
				return err
			}
			defer func() { err = errors.Join(err, m.Close()) }()
			var tabs []*tablet.Tablet
			for _, t := range m.Tablets() {
				tp := t.TopicPartition()
				switch {
				case f.topic != "" && tp != f.tp():
				case f.topic != "" || t.Config().Compacted():
					tabs = append(tabs, t)
				}
			}
			if f.topic != "" && len(tabs) == 0 {
				return fmt.Errorf("%w: %s in %s", tablet.ErrNotFound, f.tp(), f.dataDir)
			}
			type report struct {
				Topic     string `json:"topic"`
				Partition int32  `json:"partition"`
				tablet.CleanResult
				Millis float64 `json:"ms"`
			}
			reports := []report{}
			for _, t := range tabs {
				res, err := t.Clean(tablet.CleanOptions{})
				if err != nil {
					return fmt.Errorf("%s: %w", t.TopicPartition(), err)
				}
				tp := t.TopicPartition()
				reports = append(reports, report{Topic: tp.Topic, Partition: tp.Partition, CleanResult: res,
					Millis: float64(res.Took) / float64(time.Millisecond)})
				if !asJSON {
					printCleaning(cmd, tp, res)
				}
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), reports)
			}
			if len(reports) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "no compacted tablet")
			}
			return nil
		},
	}
	f.registerTopic(cmd, false, "only this topic's tablet (every compacted tablet without it)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the reports as JSON")
	return cmd
}

func printCleaning(cmd *cobra.Command, tp checkpoint.TopicPartition, r tablet.CleanResult) {
	w := cmd.OutOrStdout()
	if r.CleanedTo == r.FirstDirty && r.BytesRead == 0 {
		fmt.Fprintf(w, "%s: nothing dirty (cleaned to %d; the dirty section starts at the active segment or the last stable offset)\n", tp, r.CleanedTo)
		return
	}
	fmt.Fprintf(w, "%s: offsets %d to %d cleaned in %v: read %d bytes (%d to map %d keys), wrote %d; removed %d of %d records (%d batches, %d of them not read again; %d kept empty); %d cleaned segment(s)\n",
		tp, r.FirstDirty, r.CleanedTo, r.Took.Round(time.Microsecond), r.MapBytesRead+r.BytesRead, r.MapBytesRead, r.Keys,
		r.BytesWritten, r.RecordsRemoved, r.RecordsRead, r.BatchesRemoved, r.BatchesSkipped, r.BatchesEmptied, r.Groups)
}
