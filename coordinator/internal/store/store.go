// Package store is a coordinator's compacted internal topic
// (__consumer_offsets, __transaction_state): created on first use,
// appended to durably, replayed at start.
package store

import (
	"fmt"
	"sort"
	"sync"
	"time"
	"unicode/utf16"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/tablet"
)

// PartitionFor is the partition of a coordinator's key (a group id, a
// transactional id), by Kafka's rule: abs(key.hashCode()) % partitions,
// with Java's String hash over UTF-16 code units and Kafka's abs (MinInt32
// is 0).
func PartitionFor(key string, partitions int32) int32 {
	var h int32
	for _, u := range utf16.Encode([]rune(key)) {
		h = 31*h + int32(u)
	}
	switch {
	case h == -1<<31:
		h = 0
	case h < 0:
		h = -h
	}
	return h % partitions
}

// TopicExists is the coordinators' default check that a partition exists:
// the manager has its tablet.
func TopicExists(m *tablet.Manager) func(topic string, partition int32) bool {
	return func(topic string, partition int32) bool {
		_, ok := m.Get(checkpoint.TopicPartition{Topic: topic, Partition: partition})
		return ok
	}
}

// Log is an internal topic of a data directory.
type Log struct {
	m          *tablet.Manager
	topic      string
	cfg        tablet.Config
	partitions int32

	mu   sync.Mutex       // guards tabs and hooks
	tabs []*tablet.Tablet // by partition, once created
	// hooks, if set, make the topic a cluster's.
	hooks *Hooks
}

// Hooks make an internal topic a cluster's: its partitions are replicas
// this broker leads or not, created in the cluster's metadata.
type Hooks struct {
	// Tablet returns partition p's tablet if this broker leads it, else an
	// error (NOT_COORDINATOR's).
	Tablet func(p int32) (*tablet.Tablet, error)
	// Replicated returns once what was appended to t below end is on
	// the partition's in-sync replicas (acks=all), or an error.
	Replicated func(t *tablet.Tablet, end int64) error
	// Ensure creates the topic in the cluster if it does not exist.
	Ensure func() error
	// Partitions is the cluster topic's partition count (0: it does not
	// exist yet, and the configured count is used).
	Partitions func() int32
	// Elected, if set, reports whether the cluster's metadata names this
	// broker partition p's leader: a request for one of its keys before
	// the leadership is taken up and loaded is COORDINATOR_LOAD_IN_PROGRESS
	// (which clients retry), not NOT_COORDINATOR (which some hand to the
	// application).
	Elected func(p int32) bool
	// Leased, if set, reports whether this broker's session is certainly
	// alive. A coordinator whose broker may have lost it (a process
	// paused past its session and resumed, a broker cut off from etcd)
	// answers NOT_COORDINATOR for the partitions it owns: others may lead
	// them and have taken writes since, so its view of them may be stale
	// — an OffsetFetch from it read a group's offsets from before the
	// transactions a new coordinator had committed.
	Leased func() bool
}

// Code is Kafka's answer for a key of partition p of the ownership o (as
// Ownership.Code), NOT_COORDINATOR for an owned one while the broker is
// not certainly leased (Hooks.Leased).
func (l *Log) Code(o Ownership, p int32) int16 {
	code := o.Code(p)
	if code != 0 || o == nil {
		return code
	}
	l.mu.Lock()
	h := l.hooks
	l.mu.Unlock()
	if h != nil && h.Leased != nil && !h.Leased() {
		return kerr.NotCoordinator.Code
	}
	return 0
}

// Elected reports what the hooks' Elected says of partition p (false on
// a single node).
func (l *Log) Elected(p int32) bool {
	l.mu.Lock()
	h := l.hooks
	l.mu.Unlock()
	return h != nil && h.Elected != nil && h.Elected(p)
}

// Clustered makes the log a cluster's, of the configured partition count.
func (l *Log) Clustered(h *Hooks) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.hooks = h
	l.tabs = nil
}

// Ensure creates the topic (in the data directory, or the cluster).
func (l *Log) Ensure() error {
	if h := l.hooks; h != nil {
		return h.Ensure()
	}
	_, err := l.Tablet(0)
	return err
}

// Open returns the internal topic: its existing partitions (their count
// wins over partitions), or partitions of them when it is first used,
// compacted, of segmentBytes segments, never deleted by retention.
func Open(m *tablet.Manager, topic string, partitions int32, segmentBytes int64) *Log {
	cfg := m.DefaultConfig()
	cfg.CleanupPolicy = "compact"
	cfg.SegmentBytes = segmentBytes
	cfg.RetentionMs, cfg.RetentionBytes = -1, -1
	l := &Log{m: m, topic: topic, cfg: cfg, partitions: partitions}
	var existing []*tablet.Tablet
	for _, t := range m.Tablets() {
		if t.TopicPartition().Topic == topic {
			existing = append(existing, t)
		}
	}
	if len(existing) > 0 {
		sort.Slice(existing, func(i, j int) bool {
			return existing[i].TopicPartition().Partition < existing[j].TopicPartition().Partition
		})
		l.partitions = existing[len(existing)-1].TopicPartition().Partition + 1
		l.tabs = make([]*tablet.Tablet, l.partitions)
		for _, t := range existing {
			l.tabs[t.TopicPartition().Partition] = t
		}
	}
	return l
}

// Partitions is the topic's partition count.
func (l *Log) Partitions() int32 {
	if h := l.hooks; h != nil && h.Partitions != nil {
		if n := h.Partitions(); n > 0 {
			return n
		}
	}
	return l.partitions
}

// Existing returns the partitions' tablets that exist (nil where not).
func (l *Log) Existing() []*tablet.Tablet {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*tablet.Tablet(nil), l.tabs...)
}

// Tablet returns partition p's tablet, creating the topic on first use.
func (l *Log) Tablet(p int32) (*tablet.Tablet, error) {
	if h := l.hooks; h != nil {
		if p < 0 || p >= l.Partitions() {
			return nil, fmt.Errorf("store: %s has no partition %d", l.topic, p)
		}
		return h.Tablet(p)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tabs == nil {
		l.tabs = make([]*tablet.Tablet, l.partitions)
	}
	if p < 0 || p >= l.partitions {
		return nil, fmt.Errorf("store: %s has no partition %d", l.topic, p)
	}
	if t := l.tabs[p]; t != nil {
		return t, nil
	}
	for i := range l.partitions {
		if l.tabs[i] != nil {
			continue
		}
		cfg := l.cfg
		t, err := l.m.GetOrCreate(checkpoint.TopicPartition{Topic: l.topic, Partition: i}, &cfg)
		if err != nil {
			return nil, fmt.Errorf("store: creating %s: %w", l.topic, err)
		}
		l.tabs[i] = t
	}
	return l.tabs[p], nil
}

// KV is one record to append; a nil value deletes the key.
type KV struct{ Key, Value []byte }

// Producer marks a batch as a transactional producer's (the group
// coordinator's TxnOffsetCommit); the zero value is none.
type Producer struct {
	ID    int64
	Epoch int16
}

// Append writes records to partition p durably: it returns after the
// fsync that covers them.
func (l *Log) Append(p int32, now time.Time, recs ...KV) error {
	_, err := l.AppendAs(p, now, Producer{}, recs...)
	return err
}

// AppendLazy writes records to partition p without waiting for their
// fsync: the next durable append to the partition (or its flush) covers
// them. For a record whose loss a restart repairs (a transaction's
// completion: the restart completes it again).
func (l *Log) AppendLazy(p int32, now time.Time, recs ...KV) error {
	_, err := l.appendAs(p, now, Producer{}, false, recs...)
	return err
}

// AppendAs writes records durably as one batch, transactional for a
// producer (appended as the coordinator: no sequence), and returns the
// first one's offset.
func (l *Log) AppendAs(p int32, now time.Time, prod Producer, recs ...KV) (int64, error) {
	return l.appendAs(p, now, prod, true, recs...)
}

func (l *Log) appendAs(p int32, now time.Time, prod Producer, sync bool, recs ...KV) (int64, error) {
	if len(recs) == 0 {
		return -1, nil
	}
	t, err := l.Tablet(p)
	if err != nil {
		return -1, err
	}
	b := record.NewBuilder(record.None)
	opts := tablet.AppendOptions{Sync: sync}
	if prod.ID > 0 {
		b.SetProducer(prod.ID, prod.Epoch, -1)
		b.SetTransactional(true)
		opts.Origin = record.OriginCoordinator
	}
	for _, r := range recs {
		if err := b.Append(record.Record{Timestamp: now.UnixMilli(), Key: r.Key, Value: r.Value}); err != nil {
			return -1, err
		}
	}
	batch, err := b.Build()
	if err != nil {
		return -1, err
	}
	res, err := t.Append(batch.Bytes(), opts)
	if err == nil && l.hooks != nil && !res.Duplicate {
		err = l.hooks.Replicated(t, res.LastOffset+1)
	}
	return res.FirstOffset, err
}

// replayRead is what Replay reads at once, into a buffer the loads of
// many partitions share (a fresh one per partition costs its page faults,
// on a load of thousands of groups as much as the reading).
const replayRead = 1 << 20

var replayBufs = sync.Pool{New: func() any { b := make([]byte, 0, replayRead); return &b }}

// Replay reads a tablet from its log start to its log end, in order:
// data gets every record of the data batches (transactional or not),
// marker every COMMIT or ABORT marker. Every batch's CRC is checked.
func Replay(t *tablet.Tablet, data func(b record.Batch, r *record.Record) error, marker func(b record.Batch, commit bool) error) error {
	off := t.Offsets().LogStartOffset
	bp := replayBufs.Get().(*[]byte)
	buf := *bp
	defer func() {
		if cap(buf) <= replayRead {
			*bp = buf[:0]
			replayBufs.Put(bp)
		}
	}()
	var it record.Iter
	for off < t.Offsets().LogEndOffset {
		res, err := t.Read(off, tablet.ReadOptions{MaxBytes: replayRead, Isolation: tablet.ReadLogEnd, MinOneMessage: true})
		if err != nil {
			return err
		}
		buf, err = res.Records.AppendTo(buf[:0])
		res.Close()
		if err != nil {
			return err
		}
		if len(buf) == 0 {
			return nil
		}
		for rest := buf; len(rest) > 0; {
			b, next, err := record.ParseBatch(rest)
			if err != nil {
				return fmt.Errorf("store: %s at offset %d: %w", t.TopicPartition(), off, err)
			}
			rest = next
			if b.NextOffset() <= off {
				continue // the batch holding off began below it
			}
			if err := b.Verify(); err != nil {
				return fmt.Errorf("store: %s batch at offset %d: %w", t.TopicPartition(), b.BaseOffset(), err)
			}
			off = b.NextOffset()
			if b.IsControl() {
				if b.NumRecords() == 0 {
					continue // emptied by the cleaner
				}
				m, err := b.EndTxnMarker()
				if err != nil {
					return fmt.Errorf("store: %s marker at offset %d: %w", t.TopicPartition(), b.BaseOffset(), err)
				}
				if err := marker(b, m.Type == record.ControlCommit); err != nil {
					return err
				}
				continue
			}
			it.Reset(b, record.DefaultMaxUncompressed)
			for it.Next() {
				if err := data(b, it.Record()); err != nil {
					return err
				}
			}
			if err := it.Err(); err != nil {
				return fmt.Errorf("store: %s batch at offset %d: %w", t.TopicPartition(), b.BaseOffset(), err)
			}
		}
	}
	return nil
}
