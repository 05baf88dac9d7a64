package tiering

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/seglog/seglog/tablet"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/vfs"
)

// Manifest files, under <tablet-dir>/tier/ (docs/tiering.md §2).
const (
	ManifestDir      = tablet.TierDir
	ManifestLog      = "manifest.log"
	ManifestSnapshot = "manifest.snapshot"
	recordHeaderSize = 9 // length u32, CRC-32C u32, type u8
	maxRecordSize    = 1 << 20
)

// RecordType is the type of a manifest record.
type RecordType uint8

// Manifest record types: part of the format; never change.
const (
	Prepare RecordType = 1
	Commit  RecordType = 2
	Abort   RecordType = 3
	Retire  RecordType = 4
	Gone    RecordType = 5
)

func (t RecordType) String() string {
	switch t {
	case Prepare:
		return "PREPARE"
	case Commit:
		return "COMMIT"
	case Abort:
		return "ABORT"
	case Retire:
		return "RETIRE"
	case Gone:
		return "GONE"
	}
	return fmt.Sprintf("RecordType(%d)", uint8(t))
}

// State is where an object is in its life.
type State string

const (
	StatePrepared  State = "prepared"  // an upload is intended; invisible
	StateCommitted State = "committed" // visible for [Base, End)
	StateAborted   State = "aborted"   // abandoned; its key awaits collection
	StateRetired   State = "retired"   // out of the visible set; deleted after a grace period
)

// Entry is what the manifest knows of one object.
type Entry struct {
	ID           string `json:"objectId"`
	Key          string `json:"key"`
	Base         int64  `json:"baseOffset"`
	End          int64  `json:"endOffset"`
	DeadlineMs   int64  `json:"deadline,omitempty"`
	Size         int64  `json:"size,omitempty"`
	CRC          uint32 `json:"crc,omitempty"`
	MaxTimestamp int64  `json:"maxTimestamp,omitempty"`
	RetiredMs    int64  `json:"retiredMs,omitempty"`
	AbortedMs    int64  `json:"abortedMs,omitempty"`
	State        State  `json:"state"`
}

// mrecord is a manifest record's payload: the fields its type needs.
type mrecord struct {
	Seq          int64  `json:"seq"`
	ID           string `json:"objectId"`
	Key          string `json:"key,omitempty"`
	Base         int64  `json:"baseOffset,omitempty"`
	End          int64  `json:"endOffset,omitempty"`
	DeadlineMs   int64  `json:"deadline,omitempty"`
	Size         int64  `json:"size,omitempty"`
	CRC          uint32 `json:"crc,omitempty"`
	MaxTimestamp int64  `json:"maxTimestamp,omitempty"`
	TimeMs       int64  `json:"time,omitempty"`
}

// ManifestState is the manifest as a whole: what the snapshot and the
// store's mirror hold.
type ManifestState struct {
	// Seq is the sequence number of the last record applied.
	Seq       int64 `json:"seq"`
	TieredEnd int64 `json:"tieredEnd"`
	// LogStart is where the tier's log starts after retention: the end of
	// the newest retired object (0 before any).
	LogStart int64   `json:"logStart"`
	Objects  []Entry `json:"objects"`
}

// Errors of manifest changes.
var (
	// ErrWrongBase: a COMMIT whose base is not the tiered end (uploads go in
	// offset order).
	ErrWrongBase = seglog.NewKafkaError("tiering: commit base is not the tiered end", -1)
	// ErrUnknownObject: a record names an object the manifest does not hold
	// in the state the change needs.
	ErrUnknownObject = seglog.NewKafkaError("tiering: unknown object", 56)
	// ErrManifestFailed: a manifest write or fsync failed before; the
	// manifest refuses every change from then on.
	ErrManifestFailed = seglog.NewKafkaError("tiering: manifest failed", 56)
)

// Manifest is a tablet's tiering manifest: an append-only file of fsynced
// records over a compacted snapshot. It is safe for concurrent use.
type Manifest struct {
	fsys    vfs.FS
	dir     string
	visible atomic.Pointer[[]Entry] // see Visible
	mu      struct {
		sync.Mutex
		f       vfs.File
		size    int64
		st      ManifestState
		objs    map[string]*Entry
		records int // in the log since the snapshot
		failed  error
	}
}

// OpenManifest opens (creating) the manifest in dir, whose tiered end
// starts at start when the manifest is new. A torn last record is dropped;
// a damaged record followed by good ones is a *seglog.CorruptionError.
func OpenManifest(fsys vfs.FS, dir string, start int64) (*Manifest, error) {
	fsys = vfs.OrOS(fsys)
	m := &Manifest{fsys: fsys, dir: dir}
	if err := fsys.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("tiering: manifest dir: %w", err)
	}
	m.mu.st.TieredEnd = start
	m.mu.objs = map[string]*Entry{}
	snap := filepath.Join(dir, ManifestSnapshot)
	if data, err := vfs.ReadFile(fsys, snap); err == nil {
		var st ManifestState
		if err := json.Unmarshal(data, &st); err != nil {
			return nil, &seglog.CorruptionError{Path: snap, Offset: -1, Reason: "manifest snapshot is not valid JSON", Err: err}
		}
		m.loadLocked(st)
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	_ = fsys.Remove(snap + vfs.TempSuffix) // a compaction that never renamed
	path := filepath.Join(dir, ManifestLog)
	f, err := fsys.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("tiering: opening %s: %w", path, err)
	}
	m.mu.f = f
	// The directory and the file must survive a crash before any record
	// in it is relied on.
	if err := errors.Join(fsys.SyncDir(dir), fsys.SyncDir(filepath.Dir(dir))); err != nil {
		f.Close()
		return nil, fmt.Errorf("tiering: syncing %s: %w", dir, err)
	}
	if err := m.replay(path); err != nil {
		f.Close()
		return nil, err
	}
	if m.mu.size == 0 && m.mu.st.Seq == 0 && len(m.mu.objs) == 0 {
		// A new manifest: its start must be durable before any COMMIT
		// relies on it.
		if _, err := fsys.Stat(snap); err != nil {
			if err := m.Compact(); err != nil {
				f.Close()
				return nil, err
			}
		}
	}
	return m, nil
}

// replay applies the log's records after the snapshot's sequence number.
func (m *Manifest) replay(path string) error {
	f := m.mu.f
	size, err := f.Size()
	if err != nil {
		return err
	}
	data := make([]byte, size)
	if _, err := f.ReadAt(data, 0); err != nil && size > 0 {
		return fmt.Errorf("tiering: reading %s: %w", path, err)
	}
	pos := int64(0)
	for pos < size {
		typ, payload, n, ok := parseRecord(data[pos:])
		if !ok {
			if m.hasRecordAfter(data[pos+1:]) {
				return &seglog.CorruptionError{Path: path, Offset: pos, Reason: "damaged manifest record followed by good ones"}
			}
			// A torn last record: the write it belongs to never returned.
			if err := f.Truncate(pos); err != nil {
				return err
			}
			if err := f.Sync(); err != nil {
				return err
			}
			break
		}
		var r mrecord
		if err := json.Unmarshal(payload, &r); err != nil {
			return &seglog.CorruptionError{Path: path, Offset: pos, Reason: "manifest record payload", Err: err}
		}
		if r.Seq > m.mu.st.Seq {
			if err := m.applyLocked(typ, r); err != nil {
				return &seglog.CorruptionError{Path: path, Offset: pos, Reason: fmt.Sprintf("%s of %s", typ, r.ID), Err: err}
			}
		}
		m.mu.records++
		pos += n
	}
	m.mu.size = pos
	return nil
}

// parseRecord decodes the record at the start of b: its type, payload and
// total size, or false when b does not start with a whole good record.
func parseRecord(b []byte) (RecordType, []byte, int64, bool) {
	if len(b) < recordHeaderSize {
		return 0, nil, 0, false
	}
	n := binary.BigEndian.Uint32(b)
	if n > maxRecordSize || int(n) > len(b)-recordHeaderSize {
		return 0, nil, 0, false
	}
	body := b[8 : recordHeaderSize+int(n)] // type ‖ payload
	if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(b[4:]) {
		return 0, nil, 0, false
	}
	return RecordType(b[8]), b[recordHeaderSize : recordHeaderSize+int(n)], int64(recordHeaderSize + n), true
}

// hasRecordAfter reports whether a whole good record that the snapshot
// does not already hold starts anywhere in b.
func (m *Manifest) hasRecordAfter(b []byte) bool {
	for i := range b {
		if _, payload, _, ok := parseRecord(b[i:]); ok {
			var r mrecord
			if json.Unmarshal(payload, &r) == nil && r.Seq > m.mu.st.Seq {
				return true
			}
		}
	}
	return false
}

func appendRecord(dst []byte, typ RecordType, payload []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(payload)))
	body := append([]byte{byte(typ)}, payload...)
	dst = binary.BigEndian.AppendUint32(dst, crc32.Checksum(body, castagnoli))
	return append(dst, body...)
}

// checkLocked reports whether a record may change the state, changing
// nothing.
func (m *Manifest) checkLocked(typ RecordType, r mrecord) error {
	e := m.mu.objs[r.ID]
	switch typ {
	case Prepare:
		if e != nil {
			return fmt.Errorf("%w: %s prepared twice", ErrUnknownObject, r.ID)
		}
	case Commit:
		switch {
		case e == nil || e.State != StatePrepared:
			return fmt.Errorf("%w: commit of %s", ErrUnknownObject, r.ID)
		case e.Base != m.mu.st.TieredEnd:
			return fmt.Errorf("%w: %s starts at %d, the tiered end is %d", ErrWrongBase, r.ID, e.Base, m.mu.st.TieredEnd)
		}
	case Abort:
		if e == nil || e.State != StatePrepared {
			return fmt.Errorf("%w: abort of %s", ErrUnknownObject, r.ID)
		}
	case Retire:
		if e == nil || e.State != StateCommitted {
			return fmt.Errorf("%w: retire of %s", ErrUnknownObject, r.ID)
		}
	case Gone:
		if e == nil || (e.State != StateRetired && e.State != StateAborted) {
			return fmt.Errorf("%w: gone of %s", ErrUnknownObject, r.ID)
		}
	default:
		return fmt.Errorf("unknown record type %d", typ)
	}
	return nil
}

// applyLocked changes the state by one record.
func (m *Manifest) applyLocked(typ RecordType, r mrecord) error {
	if err := m.checkLocked(typ, r); err != nil {
		return err
	}
	e := m.mu.objs[r.ID]
	switch typ {
	case Prepare:
		m.mu.objs[r.ID] = &Entry{ID: r.ID, Key: r.Key, Base: r.Base, End: r.End, DeadlineMs: r.DeadlineMs, State: StatePrepared}
	case Commit:
		e.State, e.Size, e.CRC, e.MaxTimestamp = StateCommitted, r.Size, r.CRC, r.MaxTimestamp
		m.mu.st.TieredEnd = e.End
	case Abort:
		e.State, e.AbortedMs = StateAborted, r.TimeMs
	case Retire:
		e.State, e.RetiredMs = StateRetired, r.TimeMs
		m.mu.st.LogStart = max(m.mu.st.LogStart, e.End)
	case Gone:
		delete(m.mu.objs, r.ID)
	}
	m.mu.st.Seq = r.Seq
	if typ == Commit || typ == Retire {
		m.publishVisibleLocked()
	}
	return nil
}

// publishVisibleLocked rebuilds the visible set readers load without a
// lock: the committed objects by base offset.
func (m *Manifest) publishVisibleLocked() {
	vis := make([]Entry, 0, len(m.mu.objs))
	for _, e := range m.mu.objs {
		if e.State == StateCommitted {
			vis = append(vis, *e)
		}
	}
	slices.SortFunc(vis, func(a, b Entry) int { return cmp.Compare(a.Base, b.Base) })
	m.visible.Store(&vis)
}

// write appends a record, fsyncs it and applies it. A failed write or
// fsync fails the manifest for good: an outcome is never left unknown.
func (m *Manifest) write(typ RecordType, r mrecord) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.failed != nil {
		return m.mu.failed
	}
	r.Seq = m.mu.st.Seq + 1
	if err := m.checkLocked(typ, r); err != nil {
		return err // a refused change writes nothing
	}
	payload, _ := json.Marshal(r)
	buf := appendRecord(nil, typ, payload)
	if _, err := m.mu.f.WriteAt(buf, m.mu.size); err != nil {
		return m.failLocked(fmt.Errorf("tiering: writing the manifest: %w", err))
	}
	if err := m.mu.f.Sync(); err != nil {
		return m.failLocked(fmt.Errorf("tiering: syncing the manifest: %w", err))
	}
	m.mu.size += int64(len(buf))
	m.mu.records++
	return m.applyLocked(typ, r)
}

func (m *Manifest) failLocked(err error) error {
	m.mu.failed = fmt.Errorf("%w: %w", ErrManifestFailed, err)
	return m.mu.failed
}

// Prepare records an intended upload of [base, end) under key.
func (m *Manifest) Prepare(id, key string, base, end, deadlineMs int64) error {
	return m.write(Prepare, mrecord{ID: id, Key: key, Base: base, End: end, DeadlineMs: deadlineMs})
}

// Commit makes a prepared object visible and advances the tiered end. A
// commit of an object already committed is a no-op success; one whose base
// is not the tiered end fails with ErrWrongBase.
func (m *Manifest) Commit(id string, size int64, crc uint32, maxTimestamp int64) error {
	if e, ok := m.Get(id); ok && e.State == StateCommitted {
		return nil
	}
	return m.write(Commit, mrecord{ID: id, Size: size, CRC: crc, MaxTimestamp: maxTimestamp})
}

// Abort abandons a prepared upload; its key goes to garbage collection.
func (m *Manifest) Abort(id string, nowMs int64) error {
	return m.write(Abort, mrecord{ID: id, TimeMs: nowMs})
}

// Retire takes a committed object out of the visible set.
func (m *Manifest) Retire(id string, nowMs int64) error {
	return m.write(Retire, mrecord{ID: id, TimeMs: nowMs})
}

// MarkGone records that a retired or aborted object's key was deleted.
func (m *Manifest) MarkGone(id string) error {
	return m.write(Gone, mrecord{ID: id})
}

// Get returns the entry of an object.
func (m *Manifest) Get(id string) (Entry, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.mu.objs[id]
	if !ok {
		return Entry{}, false
	}
	return *e, true
}

// TieredEnd is the offset below which every offset is in a committed
// object (or was, before retention).
func (m *Manifest) TieredEnd() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.st.TieredEnd
}

// State returns the whole manifest, objects ordered by base offset.
func (m *Manifest) State() ManifestState {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.mu.st
	st.Objects = make([]Entry, 0, len(m.mu.objs))
	for _, e := range m.mu.objs {
		st.Objects = append(st.Objects, *e)
	}
	slices.SortFunc(st.Objects, func(a, b Entry) int {
		return cmp.Or(cmp.Compare(a.Base, b.Base), cmp.Compare(a.ID, b.ID))
	})
	return st
}

// Visible returns the committed objects, by base offset, without taking
// the manifest's lock (reads call it): the slice is shared and must not be
// changed.
func (m *Manifest) Visible() []Entry {
	if v := m.visible.Load(); v != nil {
		return *v
	}
	return nil
}

// LogStart is where the tier's log starts after retention.
func (m *Manifest) LogStart() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.st.LogStart
}

// Records returns how many records the log holds since the snapshot.
func (m *Manifest) Records() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.records
}

// Compact writes the state as the snapshot (temp file, fsync, rename,
// directory fsync) and empties the log. A crash between the two leaves
// records the snapshot already holds; replay skips them by sequence.
func (m *Manifest) Compact() error {
	st := m.State()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.failed != nil {
		return m.mu.failed
	}
	data, _ := json.MarshalIndent(st, "", " ")
	if err := vfs.WriteAtomic(m.fsys, filepath.Join(m.dir, ManifestSnapshot), data); err != nil {
		return m.failLocked(err)
	}
	// An empty log replaces the old one by rename: old or new after a
	// crash, never a torn mix.
	path := filepath.Join(m.dir, ManifestLog)
	if err := vfs.WriteAtomic(m.fsys, path, nil); err != nil {
		return m.failLocked(err)
	}
	f, err := m.fsys.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return m.failLocked(err)
	}
	old := m.mu.f
	m.mu.f, m.mu.size, m.mu.records = f, 0, 0
	if err := old.Close(); err != nil {
		return m.failLocked(err)
	}
	return nil
}

// Restore replaces an empty manifest's state with st (rebuilt from the
// store's mirror) and compacts it.
func (m *Manifest) Restore(st ManifestState) error {
	m.mu.Lock()
	if len(m.mu.objs) != 0 || m.mu.st.Seq != 0 {
		m.mu.Unlock()
		return fmt.Errorf("tiering: restoring over a manifest that is not empty")
	}
	m.loadLocked(st)
	m.mu.Unlock()
	return m.Compact()
}

// Adopt replaces the manifest's state with st, a newer one a cluster's
// leader published (a replica taking its partition's tier as it is now;
// what this manifest held besides is left to garbage collection), and
// compacts it.
func (m *Manifest) Adopt(st ManifestState) error {
	m.mu.Lock()
	m.mu.objs = map[string]*Entry{}
	m.loadLocked(st)
	m.mu.Unlock()
	return m.Compact()
}

// loadLocked takes a whole state (a snapshot or a mirror): the objects go
// to the map, which State rebuilds the list from.
func (m *Manifest) loadLocked(st ManifestState) {
	for i := range st.Objects {
		e := st.Objects[i]
		m.mu.objs[e.ID] = &e
	}
	st.Objects = nil
	m.mu.st = st
	m.publishVisibleLocked()
}

// Close closes the log file.
func (m *Manifest) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.f.Close()
}
