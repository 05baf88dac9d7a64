package jepsen

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// batchAt is a batch as a replica holds it: its offsets and CRC.
type batchAt struct {
	base, last int64
	crc        int32
}

// replicaBatches reads a partition's log in one broker's data directory
// (its segments in offset order), decoding each batch with franz-go's
// kmsg, up to the first that does not decode (a torn tail).
func replicaBatches(dir string) ([]batchAt, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		return nil, err
	}
	sort.Strings(names) // (20-digit base offsets: name order is offset order)
	var out []batchAt
	for _, name := range names {
		data, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		for len(data) >= 12 {
			n := int(int32(binary.BigEndian.Uint32(data[8:12]))) + 12
			if n < 61 || n > len(data) {
				break
			}
			var b kmsg.RecordBatch
			if err := b.ReadFrom(data[:n]); err != nil {
				break
			}
			out = append(out, batchAt{base: b.FirstOffset, last: b.FirstOffset + int64(b.LastOffsetDelta), crc: b.CRC})
			data = data[n:]
		}
	}
	return out, nil
}

// CompareReplicas compares, for each partition of topic, the batches its
// replicas hold in the brokers' data directories (read after they
// stopped): wherever two replicas both hold an offset they must hold it
// in the same batch (same offsets, same CRC) — no two replicas may hold
// different records at one offset. (Beyond the high watermark a replica
// may hold what another lacks; it may not hold something else.) It
// returns each divergence found.
func CompareReplicas(brokerDirs []string, topic string, partitions int) ([]string, error) {
	var out []string
	for p := range partitions {
		type replica struct {
			name    string
			batches []batchAt
		}
		var rs []replica
		for _, bd := range brokerDirs {
			dir := filepath.Join(bd, fmt.Sprintf("%s-%d", topic, p))
			if _, err := os.Stat(dir); err != nil {
				continue // (no replica there)
			}
			bs, err := replicaBatches(dir)
			if err != nil {
				return nil, err
			}
			rs = append(rs, replica{filepath.Base(bd), bs})
		}
		for i := range rs {
			for j := i + 1; j < len(rs); j++ {
				a, b := rs[i], rs[j]
				k := 0
				for _, x := range a.batches {
					for k < len(b.batches) && b.batches[k].last < x.base {
						k++
					}
					if k == len(b.batches) {
						break
					}
					if y := b.batches[k]; y.base <= x.last && y != x {
						out = append(out, fmt.Sprintf("%s-%d: %s holds offsets %d-%d (crc %08x), %s %d-%d (crc %08x)", topic, p,
							a.name, x.base, x.last, uint32(x.crc), b.name, y.base, y.last, uint32(y.crc)))
					}
				}
			}
		}
	}
	return out, nil
}
