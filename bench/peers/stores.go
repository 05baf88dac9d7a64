package peers

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"

	"github.com/hashicorp/raft"
	raftwal "github.com/hashicorp/raft-wal"
	"github.com/liftbridge-io/liftbridge/server/commitlog"
	rosewal "github.com/rosedblabs/wal"
	tidwal "github.com/tidwall/wal"
	etcdwal "go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/zap"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/record"
	"github.com/seglog/seglog/tablet"
	"github.com/seglog/seglog/vfs"
)

// All are the stores compared, seglog first.
var All = []Peer{
	{"seglog", "page cache (Sync per append available)", openSeglog},
	{"liftbridge commitlog v1.9.0", "page cache", openLiftbridge},
	{"rosedblabs/wal v1.3.8", "page cache (Sync: false)", openRose},
	{"hashicorp/raft-wal v0.4.0", "fsync per StoreLogs (always)", openRaftWAL},
	{"etcd wal v3.6.5", "page cache (SetUnsafeNoFsync)", openEtcd},
	{"tidwall/wal v1.2.1", "page cache (NoSync)", openTidwall},
}

// seglog through the tablet API: a producer's batch built from the
// records, appended, read back as a consumer does (CRC checked).
type seglogStore struct {
	m   *tablet.Manager
	t   *tablet.Tablet
	res tablet.FetchResult
	buf []byte
	it  record.Iter
	b   *record.Builder
	out []byte
}

func openSeglog(dir string) (Store, error) {
	m, err := tablet.OpenManager(vfs.OS, dir, tablet.ManagerOptions{Tablet: tablet.Options{
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}})
	if err != nil {
		return nil, err
	}
	cfg := tablet.DefaultConfig()
	cfg.SegmentBytes = 1 << 30
	t, err := m.Create(checkpoint.TopicPartition{Topic: "peers"}, &cfg)
	if err != nil {
		m.Close()
		return nil, err
	}
	return &seglogStore{m: m, t: t, buf: make([]byte, 1<<20), b: record.NewBuilder(record.None)}, nil
}

func (s *seglogStore) Append(records [][]byte) error {
	s.b.Reset() // a producer's builder and buffer, reused
	for _, r := range records {
		if err := s.b.Append(record.Record{Timestamp: 1_700_000_000_000, Value: r}); err != nil {
			return err
		}
	}
	var err error
	if s.out, err = s.b.AppendTo(s.out[:0]); err != nil {
		return err
	}
	_, err = s.t.Append(s.out, tablet.AppendOptions{})
	return err
}

func (s *seglogStore) ReadAll(fn func([]byte)) error {
	return s.t.Records(0, tablet.ReadLogEnd, func(_ record.Batch, r *record.Record) bool { fn(r.Value); return true })
}

func (s *seglogStore) ReadOne(i int64) ([]byte, error) {
	if err := s.t.ReadInto(&s.res, i, tablet.ReadOptions{MaxBytes: 1, MinOneMessage: true, Isolation: tablet.ReadLogEnd}); err != nil {
		return nil, err
	}
	defer s.res.Close()
	size := int(s.res.Records.Size())
	if _, err := s.res.Records.ReadAt(s.buf[:size], 0); err != nil && err != io.EOF {
		return nil, err
	}
	b, _, err := record.ParseBatch(s.buf[:size])
	if err != nil {
		return nil, err
	}
	s.it.Reset(b, record.DefaultMaxUncompressed)
	for s.it.Next() {
		if r := s.it.Record(); r.Offset == i {
			return r.Value, nil
		}
	}
	return nil, fmt.Errorf("offset %d not in its batch: %v", i, s.it.Err())
}

func (s *seglogStore) Close() error { return s.m.Close() }

// liftbridge's commitlog, the Kafka-style peer.
type liftStore struct {
	l    commitlog.CommitLog
	msgs []*commitlog.Message
}

func openLiftbridge(dir string) (Store, error) {
	l, err := commitlog.New(commitlog.Options{Name: "peers", Path: dir, MaxSegmentBytes: 1 << 30})
	if err != nil {
		return nil, err
	}
	return &liftStore{l: l}, nil
}

func (s *liftStore) Append(records [][]byte) error {
	s.msgs = s.msgs[:0]
	for _, r := range records {
		s.msgs = append(s.msgs, &commitlog.Message{Value: r, Timestamp: 1_700_000_000_000})
	}
	_, err := s.l.Append(s.msgs)
	return err
}

func (s *liftStore) ReadAll(fn func([]byte)) error {
	end := s.l.NewestOffset()
	r, err := s.l.NewReader(0, true)
	if err != nil {
		return err
	}
	headers := make([]byte, 28)
	for off := int64(0); off <= end; off++ {
		m, _, _, _, err := r.ReadMessage(context.Background(), headers)
		if err != nil {
			return err
		}
		fn(m.Value())
	}
	return nil
}

func (s *liftStore) ReadOne(i int64) ([]byte, error) {
	r, err := s.l.NewReader(i, true)
	if err != nil {
		return nil, err
	}
	m, _, _, _, err := r.ReadMessage(context.Background(), make([]byte, 28))
	if err != nil {
		return nil, err
	}
	return m.Value(), nil
}

func (s *liftStore) Close() error { return s.l.Close() }

// rosedblabs/wal: chunk positions kept for random reads.
type roseStore struct {
	w   *rosewal.WAL
	pos []*rosewal.ChunkPosition
}

func openRose(dir string) (Store, error) {
	w, err := rosewal.Open(rosewal.Options{DirPath: dir, SegmentSize: 1 << 30, SegmentFileExt: ".SEG"})
	if err != nil {
		return nil, err
	}
	return &roseStore{w: w}, nil
}

func (s *roseStore) Append(records [][]byte) error {
	for _, r := range records {
		s.w.PendingWrites(r)
	}
	pos, err := s.w.WriteAll()
	s.pos = append(s.pos, pos...)
	return err
}

func (s *roseStore) ReadAll(fn func([]byte)) error {
	r := s.w.NewReader()
	for {
		data, _, err := r.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		fn(data)
	}
}

func (s *roseStore) ReadOne(i int64) ([]byte, error) { return s.w.Read(s.pos[i]) }

func (s *roseStore) Close() error { return s.w.Close() }

// hashicorp/raft-wal: every StoreLogs is fsynced.
type raftWALStore struct {
	w    *raftwal.WAL
	next uint64
	logs []*raft.Log
	one  raft.Log
}

func openRaftWAL(dir string) (Store, error) {
	w, err := raftwal.Open(dir)
	if err != nil {
		return nil, err
	}
	return &raftWALStore{w: w, next: 1}, nil
}

func (s *raftWALStore) Append(records [][]byte) error {
	s.logs = s.logs[:0]
	for _, r := range records {
		s.logs = append(s.logs, &raft.Log{Index: s.next, Term: 1, Data: r})
		s.next++
	}
	return s.w.StoreLogs(s.logs)
}

func (s *raftWALStore) ReadAll(fn func([]byte)) error {
	for i := uint64(1); i < s.next; i++ {
		if err := s.w.GetLog(i, &s.one); err != nil {
			return err
		}
		fn(s.one.Data)
	}
	return nil
}

func (s *raftWALStore) ReadOne(i int64) ([]byte, error) {
	err := s.w.GetLog(uint64(i)+1, &s.one)
	return s.one.Data, err
}

func (s *raftWALStore) Close() error { return s.w.Close() }

// etcd's wal: a replay is its only read.
type etcdStore struct {
	dir  string
	w    *etcdwal.WAL
	next uint64
	ents []raftpb.Entry
}

func openEtcd(dir string) (Store, error) {
	dir = filepath.Join(dir, "wal")
	w, err := etcdwal.Create(zap.NewNop(), dir, nil)
	if err != nil {
		return nil, err
	}
	w.SetUnsafeNoFsync()
	return &etcdStore{dir: dir, w: w, next: 1}, nil
}

func (s *etcdStore) Append(records [][]byte) error {
	s.ents = s.ents[:0]
	for _, r := range records {
		s.ents = append(s.ents, raftpb.Entry{Index: s.next, Term: 1, Data: r})
		s.next++
	}
	return s.w.Save(raftpb.HardState{Term: 1, Commit: s.next - 1}, s.ents)
}

func (s *etcdStore) ReadAll(fn func([]byte)) error {
	if err := s.w.Close(); err != nil {
		return err
	}
	w, err := etcdwal.OpenForRead(zap.NewNop(), s.dir, walpb.Snapshot{})
	if err != nil {
		return err
	}
	s.w = w
	_, _, ents, err := w.ReadAll()
	for _, e := range ents {
		fn(e.Data)
	}
	return err
}

func (s *etcdStore) ReadOne(int64) ([]byte, error) { return nil, ErrUnsupported }

func (s *etcdStore) Close() error { return s.w.Close() }

// tidwall/wal: index-addressed entries.
type tidStore struct {
	l     *tidwal.Log
	next  uint64
	batch tidwal.Batch
}

func openTidwall(dir string) (Store, error) {
	l, err := tidwal.Open(dir, &tidwal.Options{NoSync: true, SegmentSize: 64 << 20, LogFormat: tidwal.Binary, NoCopy: true})
	if err != nil {
		return nil, err
	}
	return &tidStore{l: l, next: 1}, nil
}

func (s *tidStore) Append(records [][]byte) error {
	s.batch.Clear()
	for _, r := range records {
		s.batch.Write(s.next, r)
		s.next++
	}
	return s.l.WriteBatch(&s.batch)
}

func (s *tidStore) ReadAll(fn func([]byte)) error {
	for i := uint64(1); i < s.next; i++ {
		data, err := s.l.Read(i)
		if err != nil {
			return err
		}
		fn(data)
	}
	return nil
}

func (s *tidStore) ReadOne(i int64) ([]byte, error) { return s.l.Read(uint64(i) + 1) }

func (s *tidStore) Close() error { return s.l.Close() }
