// Command seglog-peers runs the append, read and random-read workloads
// against seglog and its Go peers, one after the other on the same records,
// and prints them side by side (make bench-peers).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/seglog/seglog/bench/peers"
)

func main() {
	var o peers.Options
	var asJSON bool
	var mib int64
	var md string
	flag.StringVar(&o.Dir, "dir", os.TempDir(), "where to write (a directory per store, removed after)")
	flag.Int64Var(&mib, "mib", 256, "MiB appended per store")
	flag.IntVar(&o.RecordSize, "record-size", 1024, "record size in bytes")
	flag.IntVar(&o.BatchRecords, "batch-records", 100, "records per append")
	flag.IntVar(&o.Reads, "reads", 20000, "random reads timed")
	flag.BoolVar(&asJSON, "json", false, "print JSON")
	flag.StringVar(&md, "md", "", "also write the table as Markdown to this file")
	flag.Parse()
	o.Bytes = mib << 20
	figs := peers.Run(o, peers.All, func(name string) { fmt.Fprintln(os.Stderr, "running", name) })
	if asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(figs); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "store\tdurability\tappend MB/s\tread MB/s\trandom read p50 / p99 µs\n")
	for _, f := range figs {
		if f.Err != "" {
			fmt.Fprintf(tw, "%s\t%s\terror: %s\t\t\n", f.Name, f.Durability, f.Err)
			continue
		}
		random := "n/a (replay only)"
		if f.RandomP50us > 0 {
			random = fmt.Sprintf("%.1f / %.1f", f.RandomP50us, f.RandomP99us)
		}
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.0f\t%s\n", f.Name, f.Durability, f.AppendMBps, f.ReadMBps, random)
	}
	tw.Flush()
	note := fmt.Sprintf("%d MiB of %d-byte records, %d per append, one store after the other in one process.",
		mib, o.RecordSize, o.BatchRecords)
	fmt.Printf("\n%s\n", note)
	if md != "" {
		var sb strings.Builder
		sb.WriteString("# seglog and its peers\n\nWritten by `make bench-peers`. " + note + " seglog builds a Kafka batch " +
			"(CRC-32C included) from the records of each append; a random read returns the whole batch holding the " +
			"record, as a Kafka fetch does, and the record is found in it.\n\n")
		sb.WriteString("| store | durability | append MB/s | read MB/s | random read p50 / p99 µs |\n|---|---|---|---|---|\n")
		for _, f := range figs {
			random := "n/a (replay only)"
			if f.RandomP50us > 0 {
				random = fmt.Sprintf("%.1f / %.1f", f.RandomP50us, f.RandomP99us)
			}
			if f.Err != "" {
				fmt.Fprintf(&sb, "| %s | %s | error: %s | | |\n", f.Name, f.Durability, f.Err)
				continue
			}
			fmt.Fprintf(&sb, "| %s | %s | %.0f | %.0f | %s |\n", f.Name, f.Durability, f.AppendMBps, f.ReadMBps, random)
		}
		if err := os.WriteFile(md, []byte(sb.String()), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}
