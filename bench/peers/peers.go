// Package peers runs the same append, read and random-read workloads
// against seglog and against the Go log stores it is compared with, side by
// side in one run: liftbridge's commitlog (the Kafka-style peer),
// rosedblabs/wal, hashicorp/raft-wal, etcd's wal and tidwall/wal. It is its
// own module so that the engine never depends on its peers.
package peers

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"time"
)

// ErrUnsupported is returned by a store that cannot do a workload (etcd's
// wal only replays).
var ErrUnsupported = errors.New("peers: not supported by this store")

// Store is one log store under the workloads.
type Store interface {
	// Append appends one batch of records.
	Append(records [][]byte) error
	// ReadAll reads every record in order, calling fn with each.
	ReadAll(fn func(rec []byte)) error
	// ReadOne reads record i (0-based, in append order).
	ReadOne(i int64) ([]byte, error)
	Close() error
}

// Peer opens a store in a directory.
type Peer struct {
	Name string
	// Durability says what an append guarantees as configured here.
	Durability string
	Open       func(dir string) (Store, error)
}

// Options shape a run.
type Options struct {
	Dir          string
	Bytes        int64 // appended per store
	RecordSize   int
	BatchRecords int
	Reads        int // random reads timed
}

// Figures is what one store did.
type Figures struct {
	Name        string  `json:"name"`
	Durability  string  `json:"durability"`
	AppendMBps  float64 `json:"appendMBps"`
	ReadMBps    float64 `json:"readMBps"`
	RandomP50us float64 `json:"randomReadP50us,omitempty"`
	RandomP99us float64 `json:"randomReadP99us,omitempty"`
	Err         string  `json:"error,omitempty"`
}

// Run runs the three workloads against each peer, one after the other, on
// the same records.
func Run(o Options, peers []Peer, progress func(string)) []Figures {
	rng := rand.New(rand.NewPCG(1, 2))
	batch := make([][]byte, o.BatchRecords)
	for i := range batch {
		batch[i] = make([]byte, o.RecordSize)
		for j := range batch[i] {
			batch[i][j] = byte(rng.Uint32())
		}
	}
	batches := max(1, o.Bytes/int64(o.RecordSize*o.BatchRecords))
	total := float64(batches) * float64(o.RecordSize*o.BatchRecords)
	var out []Figures
	for _, p := range peers {
		progress(p.Name)
		f := Figures{Name: p.Name, Durability: p.Durability}
		if err := runOne(o, p, batch, batches, total, &f); err != nil {
			f.Err = err.Error()
		}
		out = append(out, f)
	}
	return out
}

func runOne(o Options, p Peer, batch [][]byte, batches int64, total float64, f *Figures) error {
	dir, err := os.MkdirTemp(o.Dir, "peer-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	s, err := p.Open(dir)
	if err != nil {
		return err
	}
	defer s.Close()
	start := time.Now()
	for range batches {
		if err := s.Append(batch); err != nil {
			return fmt.Errorf("append: %w", err)
		}
	}
	f.AppendMBps = total / time.Since(start).Seconds() / 1e6
	var n int64
	start = time.Now()
	if err := s.ReadAll(func(rec []byte) { n += int64(len(rec)) }); err != nil {
		return fmt.Errorf("read: %w", err)
	}
	f.ReadMBps = float64(n) / time.Since(start).Seconds() / 1e6
	if n != int64(total) {
		return fmt.Errorf("read %d bytes of %d", n, int64(total))
	}
	records := batches * int64(len(batch))
	rng := rand.New(rand.NewPCG(3, 4))
	var lat []float64
	for range o.Reads {
		i := rng.Int64N(records)
		start := time.Now()
		rec, err := s.ReadOne(i)
		if errors.Is(err, ErrUnsupported) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("random read %d: %w", i, err)
		}
		lat = append(lat, float64(time.Since(start).Nanoseconds())/1e3)
		if len(rec) != len(batch[0]) {
			return fmt.Errorf("random read %d: %d bytes", i, len(rec))
		}
	}
	slices.Sort(lat)
	f.RandomP50us, f.RandomP99us = lat[len(lat)/2], lat[len(lat)*99/100]
	return nil
}
