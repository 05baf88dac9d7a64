package tablet

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/recovery"
	"github.com/seglog/seglog/segment"
	"github.com/seglog/seglog/vfs"
)

// ManagerOptions configure a data directory.
type ManagerOptions struct {
	// Config is the configuration of tablets created without one. The
	// default is DefaultConfig().
	Config *Config
	// Tablet are the options of every tablet. Their defaults are Options'.
	Tablet Options
	// Recovery configures loading. Its defaults are recovery.Options'.
	Recovery recovery.Options
	// FlushCheckInterval is how often tablets are checked for flush.ms.
	// The default is 1 s.
	FlushCheckInterval time.Duration
	// CheckpointInterval is how often the recovery-point, log-start and
	// high-watermark checkpoints are written. The default is 60 s
	// (Kafka's log.flush.offset.checkpoint.interval.ms).
	CheckpointInterval time.Duration
	// RetentionCheckInterval is how often retention runs. The default is
	// 5 min (log.retention.check.interval.ms).
	RetentionCheckInterval time.Duration
	// ProducerExpirationCheckInterval is how often idle producers are
	// forgotten. The default is 10 min
	// (producer.id.expiration.check.interval.ms).
	ProducerExpirationCheckInterval time.Duration
	// Cleaner configures the log cleaner of compacted tablets.
	Cleaner CleanerOptions
	// ClusterID and NodeID go into a new meta.properties. The defaults are
	// a random id and 0.
	ClusterID string
	NodeID    int32
	// FileMode and DirMode are the permissions of every file and
	// directory the manager creates (the process umask applies too). The
	// defaults are 0640 and 0750: the owner writes, its group reads.
	FileMode, DirMode os.FileMode
	// ReadOnly opens the data directory without changing a byte of it: a
	// shared lock (beside other readers, never beside a writer), every
	// change loading makes — recovery after an unclean shutdown included —
	// kept in memory (a vfs.Overlay; Loaded reports it as usual), no
	// background task, and Close writes nothing. Creating, deleting and
	// every change to a tablet fail with ErrReadOnly. The directory must
	// exist. The default is false.
	ReadOnly bool
}

// EnsureDefaults fills zero fields with their defaults.
func (o *ManagerOptions) EnsureDefaults() {
	if o.Config == nil {
		c := DefaultConfig()
		o.Config = &c
	}
	defaults := o.Config.Defaults() // a tablet created with them sets none of its own
	o.Config = &defaults
	o.Tablet.EnsureDefaults()
	if o.Recovery.Now == nil {
		o.Recovery.Now = o.Tablet.Now
	}
	if o.Recovery.WriterState.Now == nil {
		o.Recovery.WriterState = o.Tablet.WriterState
	}
	for _, d := range []struct {
		p *time.Duration
		v time.Duration
	}{{&o.FlushCheckInterval, time.Second}, {&o.CheckpointInterval, time.Minute},
		{&o.RetentionCheckInterval, 5 * time.Minute}, {&o.ProducerExpirationCheckInterval, 10 * time.Minute}} {
		if *d.p <= 0 {
			*d.p = d.v
		}
	}
	o.Cleaner.ensureDefaults()
	if o.FileMode == 0 {
		o.FileMode = vfs.DefaultFileMode
	}
	if o.DirMode == 0 {
		o.DirMode = vfs.DefaultDirMode
	}
	if o.ClusterID == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		o.ClusterID = checkpoint.TopicID(b).String()
	}
}

// Validate reports options out of range.
func (o *ManagerOptions) Validate() error {
	for name, d := range map[string]time.Duration{"FlushCheckInterval": o.FlushCheckInterval,
		"CheckpointInterval": o.CheckpointInterval, "RetentionCheckInterval": o.RetentionCheckInterval,
		"ProducerExpirationCheckInterval": o.ProducerExpirationCheckInterval, "Cleaner.Backoff": o.Cleaner.Backoff} {
		if d <= 0 {
			return fmt.Errorf("%w: %s %v is not positive", ErrConfig, name, d)
		}
	}
	if o.NodeID < 0 {
		return fmt.Errorf("%w: node id %d is negative", ErrConfig, o.NodeID)
	}
	if err := o.Cleaner.validate(); err != nil {
		return err
	}
	if o.FileMode&^os.ModePerm != 0 || o.DirMode&^os.ModePerm != 0 || o.FileMode&0o600 != 0o600 || o.DirMode&0o700 != 0o700 {
		return fmt.Errorf("%w: file mode %v and directory mode %v must be permission bits the owner can use",
			ErrConfig, o.FileMode, o.DirMode)
	}
	if o.Config != nil {
		return o.Config.Validate()
	}
	return nil
}

var (
	// ErrLocked is returned by OpenManager when another process (or
	// Manager) has the data directory open: a writer, or readers when this
	// open would write. The error names the holders' process ids when the
	// system tells them.
	ErrLocked = seglog.NewKafkaError("tablet: data directory is in use", 56)
	// ErrNotDataDir is returned by OpenManager for a directory that is not
	// a seglog or Kafka data directory — it holds files but none of a data
	// directory's (meta.properties, the offset checkpoints, the
	// clean-shutdown marker, .lock) — or, read-only, that does not exist.
	// Nothing is created in it.
	ErrNotDataDir = seglog.NewKafkaError("tablet: not a data directory", 56)
	// ErrExists is returned by Create for a tablet that exists.
	ErrExists = seglog.NewKafkaError("tablet: tablet exists", 36)
	// ErrNotFound is returned for a tablet that does not exist.
	ErrNotFound = seglog.NewKafkaError("tablet: no such tablet", 3)
)

// LockFile is the file a Manager holds a lock on (Kafka's), beside the
// data directory itself: exclusive for a writer, shared for a reader.
const LockFile = ".lock"

// dataDirMarks are the names only a data directory holds: one of them
// makes a directory with files in it a data directory.
var dataDirMarks = []string{checkpoint.MetaPropertiesFile, checkpoint.RecoveryPointFile, checkpoint.LogStartOffsetFile,
	checkpoint.ReplicationOffsetFile, checkpoint.CleanShutdownFile, LockFile}

// checkDataDir refuses a directory that is not a data directory: missing
// (unless create, which makes it), not a directory, or holding files but
// no mark of one.
func checkDataDir(fsys vfs.FS, dir string, create bool) error {
	info, err := fsys.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist) && create:
		if err := fsys.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("tablet: creating %s: %w", dir, err)
		}
		if err := fsys.SyncDir(filepath.Dir(dir)); err != nil { // a new data directory must survive a crash
			return fmt.Errorf("tablet: creating %s: %w", dir, err)
		}
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: %s does not exist", ErrNotDataDir, dir)
	case err != nil:
		return fmt.Errorf("tablet: %w", err)
	case !info.IsDir():
		return fmt.Errorf("%w: %s is not a directory", ErrNotDataDir, dir)
	}
	names, err := fsys.List(dir)
	if err != nil {
		return fmt.Errorf("tablet: %w", err)
	}
	if len(names) == 0 {
		return nil
	}
	for _, n := range dataDirMarks {
		if slices.Contains(names, n) {
			return nil
		}
	}
	return fmt.Errorf("%w: %s holds %d entries but no %s: it is not a seglog or Kafka data directory, and nothing was written to it",
		ErrNotDataDir, dir, len(names), checkpoint.MetaPropertiesFile)
}

// LockDir takes a data directory's lock as OpenManager does, for a program
// that reads a directory's files without loading it (a verifier, a
// dumper): it refuses a directory that is not a data directory, and locks
// the directory and its .lock — exclusively for a writer, shared for a
// reader (which creates nothing). Close releases it.
func LockDir(fsys vfs.FS, dir string, shared bool) (io.Closer, error) {
	fsys = vfs.OrOS(fsys)
	if err := checkDataDir(fsys, dir, false); err != nil {
		return nil, err
	}
	return lockDir(fsys, dir, shared)
}

// lockDir locks the data directory and its .lock: exclusively for a
// writer (creating .lock, as Kafka does), shared for a reader (creating
// nothing; .lock only if it exists, so that a Kafka broker holding it keeps
// readers out too).
func lockDir(fsys vfs.FS, dir string, shared bool) (io.Closer, error) {
	lockFile := filepath.Join(dir, LockFile)
	var locks []io.Closer
	release := func() error {
		var errs []error
		for _, l := range slices.Backward(locks) {
			errs = append(errs, l.Close())
		}
		return errors.Join(errs...)
	}
	take := func(name string) error {
		var l io.Closer
		var err error
		if shared {
			l, err = fsys.RLock(name)
		} else {
			l, err = fsys.Lock(name)
		}
		if err != nil {
			_ = release()
			if errors.Is(err, vfs.ErrLocked) {
				return lockedError(dir, lockFile, shared, err)
			}
			return fmt.Errorf("tablet: locking %s: %w", name, err)
		}
		locks = append(locks, l)
		return nil
	}
	if err := take(dir); err != nil {
		return nil, err
	}
	if _, err := fsys.Stat(lockFile); !shared || err == nil {
		if err := take(lockFile); err != nil {
			return nil, err
		}
	}
	return closerFunc(release), nil
}

// lockedError says who holds the data directory, when the system tells.
func lockedError(dir, lockFile string, shared bool, err error) error {
	var pids []string
	for _, name := range []string{dir, lockFile} {
		for _, pid := range vfs.LockHolders(name) {
			if p := strconv.Itoa(pid); !slices.Contains(pids, p) {
				pids = append(pids, p)
			}
		}
	}
	who := "another process"
	if len(pids) > 0 {
		who = "process " + strings.Join(pids, ", ")
	}
	mode := "a reader cannot open it beside a writer"
	if !shared {
		mode = "a writer needs it to itself"
	}
	return &lockedErr{msg: fmt.Sprintf("%s: %s is open in %s (%s)", ErrLocked, dir, who, mode), cause: err}
}

// lockedErr is ErrLocked with the lock's own error (the system's, which
// names the lock call) kept for errors.Is but not in the message.
type lockedErr struct {
	msg   string
	cause error
}

func (e *lockedErr) Error() string   { return e.msg }
func (e *lockedErr) Unwrap() []error { return []error{ErrLocked, e.cause} }

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// Manager is a data directory of tablets: it loads them (recovering after
// a crash), creates and deletes them, runs the background tasks (flush by
// time, checkpoints, retention, producer expiry, delayed file deletion)
// and closes them cleanly.
type Manager struct {
	fsys vfs.FS
	dir  string
	opts ManagerOptions
	lock io.Closer
	meta checkpoint.MetaProperties // read or written at open

	checkpointMu sync.Mutex // one writer of the checkpoint files at a time
	cleaning     cleaning   // the tablets the cleaner threads hold
	cleanerFile  bool       // cleaner-offset-checkpoint is written (under checkpointMu)

	// Loaded is what loading did, for reports.
	Loaded *recovery.Result

	// view is the tablets as readers see them: an immutable snapshot,
	// replaced whole by a writer (under mu) once its change is on disk.
	// Lookups take no lock and never wait for a tablet being created.
	view atomic.Pointer[tabletView]
	// defaults is the configuration of tablets created without one:
	// opts.Config, then what SetDefaults makes it.
	defaults atomic.Pointer[Config]
	mu       struct {
		sync.Mutex
		closed bool
		// creating are the tablets being created (their directories
		// written without the lock): closed when each is done.
		creating map[checkpoint.TopicPartition]chan struct{}
		// pendingIDs are the topic ids of topics whose first tablets are
		// being created, so their partitions share one.
		pendingIDs map[string]*pendingID
	}
	creates sync.WaitGroup // Creates under way; Close waits for them
	// removals are the background removals of deleted tablets' files
	// (DeleteInBackground), waited for by Close.
	removals sync.WaitGroup
	sched    *scheduler
	stop     chan struct{}
	wg       sync.WaitGroup
}

// OpenManager opens the data directory dir, creating it if it does not
// exist: it refuses a directory that is not a data directory
// (ErrNotDataDir), takes the lock (ErrLocked), writes meta.properties if
// there is none, loads every tablet (recovery.Load) and starts the
// background tasks. With ReadOnly it changes nothing on disk.
func OpenManager(fsys vfs.FS, dir string, opts ManagerOptions) (*Manager, error) {
	fsys = vfs.OrOS(fsys)
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if !opts.ReadOnly {
		fsys = vfs.WithModes(fsys, opts.FileMode, opts.DirMode)
	}
	if err := checkDataDir(fsys, dir, !opts.ReadOnly); err != nil {
		return nil, err
	}
	lock, err := lockDir(fsys, dir, opts.ReadOnly)
	if err != nil {
		return nil, err
	}
	if opts.ReadOnly {
		// From here on every change — the load's, the close's — stays in
		// memory: the directory itself is only ever read.
		fsys = vfs.NewOverlay(fsys)
		opts.Tablet.ReadOnly = true
	}
	m := &Manager{fsys: fsys, dir: dir, opts: opts, lock: lock, stop: make(chan struct{})}
	m.defaults.Store(opts.Config)
	m.view.Store(newTabletView())
	m.mu.creating = map[checkpoint.TopicPartition]chan struct{}{}
	m.mu.pendingIDs = map[string]*pendingID{}
	m.sched = newScheduler()
	m.opts.Tablet.Scheduler = m.sched
	if err := m.open(); err != nil {
		m.sched.stop()
		lock.Close()
		return nil, err
	}
	if !opts.ReadOnly {
		m.startTasks()
	}
	return m, nil
}

func (m *Manager) open() error {
	metaPath := filepath.Join(m.dir, checkpoint.MetaPropertiesFile)
	var created []recovery.Change
	if meta, ok, err := checkpoint.ReadMetaProperties(m.fsys, metaPath); err != nil {
		return err
	} else if ok {
		m.meta = meta
	} else {
		meta := checkpoint.MetaProperties{Version: 1, ClusterID: m.opts.ClusterID, NodeID: m.opts.NodeID,
			DirectoryID: checkpoint.NewTopicID().String()}
		if err := checkpoint.WriteMetaProperties(m.fsys, metaPath, meta); err != nil {
			return err
		}
		m.meta = meta
		if names, _ := m.fsys.List(m.dir); len(names) > 2 { // more than .lock and the new file: not a new directory
			created = append(created, recovery.Change{File: metaPath, Action: recovery.Created,
				Why: "missing: cluster id " + meta.ClusterID + ", node id " + strconv.Itoa(int(meta.NodeID))})
		}
	}
	ropts := m.opts.Recovery
	ropts.SegmentOptions = func(_ checkpoint.TopicPartition, dir string) (segment.Options, error) {
		cfg, err := ReadConfig(m.fsys, dir)
		o := cfg.segmentOptions()
		o.Now = m.opts.Tablet.Now
		return o, err
	}
	r, err := recovery.Load(m.fsys, m.dir, ropts)
	if err != nil {
		return err
	}
	r.Report = append(created, r.Report...) // nothing the open changed goes unsaid
	m.Loaded = r
	// The cleaner's checkpoint: a damaged one only makes the next
	// cleanings start from the log starts (recovery reported it).
	cleaned, _ := checkpoint.ReadOffsets(m.fsys, filepath.Join(m.dir, checkpoint.CleanerOffsetFile))
	m.cleanerFile = len(cleaned) > 0
	loaded := newTabletView()
	for _, rt := range r.Tablets {
		id, err := m.ensureTopicID(rt)
		var cfg Config
		if err == nil {
			cfg, err = ReadConfig(m.fsys, rt.Dir)
		}
		if err == nil {
			var t *Tablet
			if t, err = Open(m.fsys, rt, cfg, m.opts.Tablet); err == nil {
				t.afterTruncation, t.topicID = m.Checkpoint, id
				if o, ok := cleaned[rt.TopicPartition]; ok {
					t.SetCleanerCheckpoint(o)
				}
				loaded.add(t)
				continue
			}
		}
		r.Close()
		for _, t := range loaded.byTP {
			t.Close()
		}
		return fmt.Errorf("tablet: opening %s: %w", rt.Dir, err)
	}
	m.view.Store(loaded)
	if !r.CleanShutdown && !m.opts.ReadOnly {
		m.checkpointRecovered()
	}
	return nil
}

// checkpointRecovered makes what an unclean load recovered durable — each
// tablet flushed to its end, a few at a time, moving its recovery point —
// and writes the recovery-point checkpoint at once: a broker killed again
// before the periodic checkpoint does not re-read its whole log. A
// failure (a full disk) is logged; the checkpoint keeps the older point.
func (m *Manager) checkpointRecovered() {
	tablets := m.Tablets()
	work := make(chan *Tablet)
	var wg sync.WaitGroup
	for range min(len(tablets), 4*runtime.GOMAXPROCS(0)) {
		wg.Go(func() {
			for t := range work {
				if err := t.Flush(); err != nil {
					m.opts.Tablet.Logger.Warn("flushing a recovered tablet", "tablet", t.tp.String(), "err", err)
				}
			}
		})
	}
	for _, t := range tablets {
		if o := t.Offsets(); o.RecoveryPoint < o.LogEndOffset {
			work <- t
		}
	}
	close(work)
	wg.Wait()
	if err := m.Checkpoint(); err != nil {
		m.opts.Tablet.Logger.Warn("writing the checkpoints after a recovery", "dir", m.dir, "err", err)
	}
}

// ensureTopicID checks a loaded tablet's partition.metadata. A missing
// one (a crash before Create's first sync, or a directory written by
// something else) gets a new topic id, reported as a change; so does a
// damaged one, reported with what was wrong with it: the tablet's records
// are intact, and a tablet unreadable for its metadata would help nobody
// (Kafka rewrites it too). seglog verify keeps reporting the damaged file
// until a writer has rewritten it.
func (m *Manager) ensureTopicID(rt *recovery.Tablet) (checkpoint.TopicID, error) {
	path := filepath.Join(rt.Dir, checkpoint.PartitionMetadataFile)
	id, found, err := checkpoint.ReadPartitionMetadata(m.fsys, path)
	why := "missing: a new topic id assigned"
	var ce *seglog.CorruptionError
	switch {
	case errors.As(err, &ce):
		why = fmt.Sprintf("damaged (%s at byte %d): a new topic id assigned", ce.Reason, ce.Offset)
	case err != nil:
		return id, err
	case found:
		return id, nil
	}
	id = checkpoint.NewTopicID()
	if err := checkpoint.WritePartitionMetadata(m.fsys, path, id); err != nil {
		return id, err
	}
	rt.Report = append(rt.Report, recovery.Change{File: path, Action: recovery.Created, Why: why})
	return id, nil
}

// Dir returns the data directory.
func (m *Manager) Dir() string { return m.dir }

// Get returns a tablet.
func (m *Manager) Get(tp checkpoint.TopicPartition) (*Tablet, bool) {
	t, ok := m.view.Load().byTP[tp]
	return t, ok
}

// Meta is the data directory's meta.properties: its cluster id and node
// id (written when the directory was made, from ManagerOptions).
func (m *Manager) Meta() checkpoint.MetaProperties { return m.meta }

// FS is the filesystem the manager writes through: what is created in the
// data directory through it gets the directory's modes (FileMode,
// DirMode).
func (m *Manager) FS() vfs.FS { return m.fsys }

// DefaultConfig is the configuration of tablets created without one
// (ManagerOptions.Config).
func (m *Manager) DefaultConfig() Config { return *m.defaults.Load() }

// SetDefaults makes c the configuration of tablets created without one
// (a broker's dynamic defaults) and moves every tablet that follows the
// defaults with it: a key a tablet does not set itself (Config.IsSet) and
// whose value is the old default's takes the new default's value (still
// not set by the tablet). It returns the tablets' errors, joined; those
// that failed keep their config.
func (m *Manager) SetDefaults(c Config) error {
	if err := c.Validate(); err != nil {
		return err
	}
	c = c.Defaults()
	old := *m.defaults.Swap(&c)
	var changed []string
	for _, k := range ConfigKeys() {
		ov, _ := old.Get(k)
		if nv, _ := c.Get(k); nv != ov {
			changed = append(changed, k)
		}
	}
	if len(changed) == 0 {
		return nil
	}
	var errs []error
	for _, t := range m.Tablets() {
		cfg, moved := t.Config(), false
		for _, k := range changed {
			ov, _ := old.Get(k)
			if v, _ := cfg.Get(k); cfg.IsSet(k) || v != ov {
				continue // the tablet's own
			}
			nv, _ := c.Get(k)
			if err := cfg.Set(k, nv); err != nil {
				errs = append(errs, err)
				continue
			}
			cfg.Unset(k)
			moved = true
		}
		if moved && cfg.Validate() == nil {
			if err := t.SetConfig(cfg); err != nil {
				errs = append(errs, fmt.Errorf("tablet: %s: %w", t.TopicPartition(), err))
			}
		}
	}
	return errors.Join(errs...)
}

// TopicID returns a topic's id (its partitions' partition.metadata, read
// when they were loaded or written when created); false if it has no
// tablet.
func (m *Manager) TopicID(topic string) (checkpoint.TopicID, bool) {
	id, ok := m.view.Load().topics[topic]
	return id, ok
}

// TopicByID returns the topic whose id is id; false if no tablet has it.
func (m *Manager) TopicByID(id checkpoint.TopicID) (string, bool) {
	name, ok := m.view.Load().names[id]
	return name, ok
}

// TopicPartitions returns a topic's id and its number of partitions
// (tablets); false if it has none.
func (m *Manager) TopicPartitions(topic string) (checkpoint.TopicID, int32, bool) {
	v := m.view.Load()
	id, ok := v.topics[topic]
	return id, int32(v.counts[topic]), ok
}

// TopicNames returns every topic's name, sorted.
func (m *Manager) TopicNames() []string {
	v := m.view.Load()
	out := make([]string, 0, len(v.topics))
	for name := range v.topics {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// TopicsVersion changes whenever a tablet is created or deleted: a
// caller that resolved topics at one version need not look again while
// it stays the same.
func (m *Manager) TopicsVersion() uint64 { return m.view.Load().seq }

// Tablets returns every tablet, sorted by topic and partition.
func (m *Manager) Tablets() []*Tablet {
	v := m.view.Load()
	out := make([]*Tablet, 0, len(v.byTP))
	for _, t := range v.byTP {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b *Tablet) int { return a.tp.Compare(b.tp) })
	return out
}

// tabletView is a snapshot of the manager's tablets, never changed once
// published.
type tabletView struct {
	byTP   map[checkpoint.TopicPartition]*Tablet
	topics map[string]checkpoint.TopicID // each topic's id, which its partitions share
	names  map[checkpoint.TopicID]string // each id's topic
	counts map[string]int                // each topic's tablets
	seq    uint64                        // TopicsVersion: one more each publish
}

func newTabletView() *tabletView {
	return &tabletView{byTP: map[checkpoint.TopicPartition]*Tablet{}, topics: map[string]checkpoint.TopicID{},
		names: map[checkpoint.TopicID]string{}, counts: map[string]int{}}
}

func (v *tabletView) add(t *Tablet) {
	v.byTP[t.tp] = t
	v.topics[t.tp.Topic] = t.topicID
	v.names[t.topicID] = t.tp.Topic
	v.counts[t.tp.Topic]++
}

func (v *tabletView) remove(tp checkpoint.TopicPartition) {
	delete(v.byTP, tp)
	if v.counts[tp.Topic]--; v.counts[tp.Topic] <= 0 {
		delete(v.counts, tp.Topic)
		delete(v.names, v.topics[tp.Topic])
		delete(v.topics, tp.Topic) // a topic made again gets a new id
	}
}

// publishLocked replaces the view with a copy that change has changed.
func (m *Manager) publishLocked(change func(*tabletView)) {
	old := m.view.Load()
	v := &tabletView{byTP: maps.Clone(old.byTP), topics: maps.Clone(old.topics), names: maps.Clone(old.names),
		counts: maps.Clone(old.counts), seq: old.seq + 1}
	change(v)
	m.view.Store(v)
}

// pendingID is a topic id reserved by the Creates of a new topic's
// tablets.
type pendingID struct {
	id checkpoint.TopicID
	n  int
}

// Create creates a tablet with cfg (nil: the manager's default config).
// Its directory gets partition.metadata (a new topic id) and its config
// file before the first segment.
func (m *Manager) Create(tp checkpoint.TopicPartition, cfg *Config) (*Tablet, error) {
	return m.create(tp, cfg, nil)
}

// CreateWithID creates a tablet as Create does, of the topic with the
// given id (a cluster's, from its metadata): ErrExists if a tablet of the
// topic with another id is here.
func (m *Manager) CreateWithID(tp checkpoint.TopicPartition, cfg *Config, id checkpoint.TopicID) (*Tablet, error) {
	return m.create(tp, cfg, &id)
}

func (m *Manager) create(tp checkpoint.TopicPartition, cfg *Config, want *checkpoint.TopicID) (*Tablet, error) {
	if m.opts.ReadOnly {
		return nil, fmt.Errorf("%w: cannot create %s in %s", ErrReadOnly, tp.DirName(), m.dir)
	}
	if err := checkpoint.ValidateTopic(tp.Topic); err != nil {
		return nil, err
	}
	if tp.Partition < 0 {
		return nil, fmt.Errorf("tablet: negative partition %d", tp.Partition)
	}
	c := m.DefaultConfig()
	if cfg != nil {
		c = *cfg
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	id, err := m.reserve(tp, want)
	if err != nil {
		return nil, err
	}
	// The directory is written without the lock: lookups and the creation
	// of other tablets go on meanwhile.
	t, err := m.createDir(tp, c, id)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err == nil {
		m.publishLocked(func(v *tabletView) { v.add(t) })
	}
	close(m.mu.creating[tp])
	delete(m.mu.creating, tp)
	if p := m.mu.pendingIDs[tp.Topic]; p != nil {
		if p.n--; p.n == 0 {
			delete(m.mu.pendingIDs, tp.Topic)
		}
	}
	m.creates.Done()
	if err != nil {
		return nil, fmt.Errorf("tablet: creating %s: %w", tp, err)
	}
	return t, nil
}

// reserve takes tp for a Create: ErrExists if it exists, after a Create
// of it under way ends; its topic's id (a new one for a new topic, shared
// by its partitions created at the same time).
func (m *Manager) reserve(tp checkpoint.TopicPartition, want *checkpoint.TopicID) (checkpoint.TopicID, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for {
		if m.mu.closed {
			return checkpoint.TopicID{}, ErrClosed
		}
		if _, ok := m.view.Load().byTP[tp]; ok {
			return checkpoint.TopicID{}, fmt.Errorf("%w: %s", ErrExists, tp)
		}
		busy, ok := m.mu.creating[tp]
		if !ok {
			break
		}
		m.mu.Unlock()
		<-busy
		m.mu.Lock()
	}
	id, ok := m.view.Load().topics[tp.Topic]
	if p := m.mu.pendingIDs[tp.Topic]; !ok && p != nil {
		id = p.id
	}
	if want != nil && id != (checkpoint.TopicID{}) && id != *want {
		return checkpoint.TopicID{}, fmt.Errorf("%w: %s has topic id %s here, not %s", ErrExists, tp.Topic, id, *want)
	}
	m.mu.creating[tp] = make(chan struct{})
	m.creates.Add(1)
	if !ok {
		p := m.mu.pendingIDs[tp.Topic]
		if p == nil {
			p = &pendingID{id: checkpoint.NewTopicID()}
			if want != nil {
				p.id = *want
			}
			m.mu.pendingIDs[tp.Topic] = p
		}
		p.n++
		id = p.id
	}
	return id, nil
}

// createDir writes a new tablet's directory (partition.metadata, its
// config, made durable) and opens the tablet. A creation that fails (a
// full disk, no descriptors) removes what it wrote: the next Create of
// the partition starts afresh.
func (m *Manager) createDir(tp checkpoint.TopicPartition, c Config, id checkpoint.TopicID) (*Tablet, error) {
	dir := filepath.Join(m.dir, tp.DirName())
	if _, err := m.fsys.Stat(dir); err == nil {
		if err := m.clearUnfinishedCreate(dir); err != nil {
			return nil, err
		}
	}
	if err := m.fsys.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	t, err := m.fillDir(dir, tp, c, id)
	if err != nil {
		if rmErr := removeAll(m.fsys, dir); rmErr != nil {
			return nil, errors.Join(err, fmt.Errorf("removing %s after a failed creation: %w", dir, rmErr))
		}
		// The removal needs no durability: a crash leaves a directory
		// clearUnfinishedCreate or the load takes care of.
		_ = m.fsys.SyncDir(m.dir)
	}
	return t, err
}

func (m *Manager) fillDir(dir string, tp checkpoint.TopicPartition, c Config, id checkpoint.TopicID) (*Tablet, error) {
	err := checkpoint.WritePartitionMetadata(m.fsys, filepath.Join(dir, checkpoint.PartitionMetadataFile), id)
	if err == nil {
		err = writeConfig(m.fsys, filepath.Join(dir, ConfigFile), c)
	}
	if err == nil {
		err = m.fsys.SyncDir(m.dir)
	}
	if err != nil {
		return nil, err
	}
	ropts := m.opts.Recovery
	ropts.Segment = c.segmentOptions()
	rt, err := recovery.LoadTablet(m.fsys, dir, tp, true, 0, 0, ropts)
	if err != nil {
		return nil, err
	}
	t, err := Open(m.fsys, rt, c, m.opts.Tablet)
	if err != nil {
		rt.Close()
		return nil, err
	}
	t.afterTruncation, t.topicID = m.Checkpoint, id
	return t, nil
}

// clearUnfinishedCreate lets Create reuse a directory a crash left while
// creating the tablet: empty, or holding only the temporary files of its
// first writes (partition.metadata, the config), which are removed. Any
// other directory is in the way.
func (m *Manager) clearUnfinishedCreate(dir string) error {
	names, err := m.fsys.List(dir)
	if err != nil {
		return err
	}
	for _, n := range names {
		base, ok := strings.CutSuffix(n, vfs.TempSuffix)
		if !ok || base != checkpoint.PartitionMetadataFile && base != ConfigFile {
			return fmt.Errorf("%w: %s (a directory is in the way)", ErrExists, dir)
		}
	}
	for _, n := range names {
		if err := m.fsys.Remove(filepath.Join(dir, n)); err != nil {
			return err
		}
		m.opts.Tablet.Logger.Warn("removed a file left by a tablet creation a crash cut short", "file", filepath.Join(dir, n))
	}
	return nil
}

// GetOrCreate returns a tablet, creating it with cfg if it does not exist.
func (m *Manager) GetOrCreate(tp checkpoint.TopicPartition, cfg *Config) (*Tablet, error) {
	if t, ok := m.Get(tp); ok {
		return t, nil
	}
	t, err := m.Create(tp, cfg)
	if errors.Is(err, ErrExists) {
		if t, ok := m.Get(tp); ok {
			return t, nil
		}
	}
	return t, err
}

// Delete closes a tablet and deletes its directory: renamed with the
// -delete suffix first (a crash leaves it for the next load to remove),
// then removed.
func (m *Manager) Delete(tp checkpoint.TopicPartition) error {
	doomed, err := m.moveAside(tp, checkpoint.DeleteDirSuffix, "delete")
	if err != nil {
		return err
	}
	return removeAll(m.fsys, doomed)
}

// DeleteInBackground deletes a tablet as Delete does, but removes its
// files in the background once its directory is renamed for deletion
// (the partition is free at once; a load removes what a crash left): for
// a caller that must not wait on a large tablet's files, as a broker
// dropping a replica a reassignment moved away. Close waits for the
// removals.
func (m *Manager) DeleteInBackground(tp checkpoint.TopicPartition) error {
	doomed, err := m.moveAside(tp, checkpoint.DeleteDirSuffix, "delete")
	if err != nil {
		return err
	}
	m.removals.Add(1)
	go func() {
		defer m.removals.Done()
		if err := removeAll(m.fsys, doomed); err != nil {
			m.opts.Tablet.Logger.Warn("removing a deleted tablet's files; the next open removes them", "dir", doomed, "err", err)
		}
	}()
	return nil
}

// SetAside closes a tablet and renames its directory with the -stray
// suffix, as Kafka moves aside the log of a partition no longer assigned
// to the broker: out of the data directory's tablets (a load ignores it),
// its bytes kept for the operator. It returns the new path.
func (m *Manager) SetAside(tp checkpoint.TopicPartition) (string, error) {
	return m.moveAside(tp, checkpoint.StrayDirSuffix, "set aside")
}

// moveAside takes a tablet out of the manager, closes it and renames its
// directory <name>.<random hex><suffix>, durably.
func (m *Manager) moveAside(tp checkpoint.TopicPartition, suffix, doing string) (string, error) {
	if m.opts.ReadOnly {
		return "", fmt.Errorf("%w: cannot %s %s in %s", ErrReadOnly, doing, tp.DirName(), m.dir)
	}
	m.mu.Lock()
	t, ok := m.view.Load().byTP[tp]
	if ok {
		m.publishLocked(func(v *tabletView) { v.remove(tp) })
	}
	m.mu.Unlock()
	if !ok {
		return "", fmt.Errorf("%w: %s", ErrNotFound, tp)
	}
	if _, err := t.Close(); err != nil && !errors.Is(err, ErrClosed) {
		m.opts.Tablet.Logger.Warn("closing a tablet to "+doing+" it", "tablet", tp.String(), "err", err)
	}
	var id [16]byte
	_, _ = rand.Read(id[:])
	to := filepath.Join(m.dir, tp.DirName()+"."+hex.EncodeToString(id[:])+suffix)
	if err := m.fsys.Rename(t.dir, to); err != nil {
		return "", fmt.Errorf("tablet: %s %s: %w", doing, tp, err)
	}
	return to, m.fsys.SyncDir(m.dir)
}

// removeAll deletes a directory tree through fsys.
func removeAll(fsys vfs.FS, path string) error {
	names, err := fsys.List(path)
	if err != nil {
		return err
	}
	for _, n := range names {
		p := filepath.Join(path, n)
		if info, err := fsys.Stat(p); err == nil && info.IsDir() {
			if err := removeAll(fsys, p); err != nil {
				return err
			}
			continue
		}
		if err := fsys.Remove(p); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	return fsys.Remove(path)
}

// Checkpoint writes the recovery-point, log-start and high-watermark
// (replication-offset) checkpoints of every tablet, and the cleaner's.
func (m *Manager) Checkpoint() error {
	return m.writeCheckpoints(m.Tablets(), nil)
}

func (m *Manager) writeCheckpoints(tablets []*Tablet, offsets map[checkpoint.TopicPartition]Offsets) error {
	m.checkpointMu.Lock() // the background task and a truncation may write at once
	defer m.checkpointMu.Unlock()
	rp, ls, hw, co := checkpoint.Offsets{}, checkpoint.Offsets{}, checkpoint.Offsets{}, checkpoint.Offsets{}
	for _, t := range tablets {
		o, ok := offsets[t.tp]
		if !ok {
			o = t.Offsets()
		}
		rp[t.tp], ls[t.tp], hw[t.tp] = o.RecoveryPoint, o.LogStartOffset, o.HighWatermark
		if c := t.CleanerCheckpoint(); c >= 0 {
			co[t.tp] = c
		}
	}
	files := map[string]checkpoint.Offsets{checkpoint.RecoveryPointFile: rp,
		checkpoint.LogStartOffsetFile: ls, checkpoint.ReplicationOffsetFile: hw}
	// cleaner-offset-checkpoint once a tablet was cleaned (a directory
	// without compacted tablets gets none, as in Kafka).
	if len(co) > 0 || m.cleanerFile {
		files[checkpoint.CleanerOffsetFile] = co
		m.cleanerFile = true
	}
	for name, o := range files {
		if err := checkpoint.WriteOffsets(m.fsys, filepath.Join(m.dir, name), o); err != nil {
			return err
		}
	}
	return nil
}

// Close stops the background tasks, closes every tablet (flushed, writer
// state snapshotted), writes the checkpoints and then, if all of that
// worked, the clean-shutdown marker; and releases the lock.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.mu.closed {
		m.mu.Unlock()
		return ErrClosed
	}
	m.mu.closed = true
	m.mu.Unlock()
	m.creates.Wait() // a tablet being created is closed with the others
	m.removals.Wait()
	close(m.stop)
	m.wg.Wait()

	tablets := m.Tablets()
	offsets := map[checkpoint.TopicPartition]Offsets{}
	var errs []error
	var failed []checkpoint.TopicPartition
	for _, t := range tablets {
		o, err := t.Close()
		offsets[t.tp] = o
		if t.Failed() != nil {
			failed = append(failed, t.tp) // reported when it failed
			continue
		}
		errs = append(errs, err)
	}
	// The tablets are closed: files of deleted segments waiting out
	// file.delete.delay.ms for readers have none left, and go now rather
	// than at the next load.
	m.sched.drain(true)
	if err := errors.Join(errs...); err != nil || m.opts.ReadOnly {
		return errors.Join(err, m.lock.Close()) // no marker: the next open recovers (read-only: nothing is written)
	}
	err := m.writeCheckpoints(tablets, offsets)
	if err == nil && len(failed) > 0 {
		// Every other tablet is closed cleanly, its recovery point at its
		// end; without the marker, the next open recovers the failed ones
		// from theirs.
		err = &FailedTabletsError{Tablets: failed}
	} else if err == nil {
		err = checkpoint.WriteCleanShutdown(m.fsys, m.dir, 0)
	}
	if lockErr := m.lock.Close(); lockErr != nil {
		return errors.Join(err, lockErr)
	}
	return err // alone: a caller can tell a *FailedTabletsError from worse
}

// FailedTabletsError is Close's error when everything closed cleanly but
// tablets that had failed (a full disk, an I/O error; each reported when
// it failed): the clean-shutdown marker is left out, so the next open
// recovers them. It matches ErrFailed.
type FailedTabletsError struct {
	Tablets []checkpoint.TopicPartition
}

func (e *FailedTabletsError) Error() string {
	names := make([]string, len(e.Tablets))
	for i, tp := range e.Tablets {
		names[i] = tp.String()
	}
	return fmt.Sprintf("tablet: closed with %d failed tablets, recovered at the next open: %s", len(e.Tablets), strings.Join(names, ", "))
}

func (e *FailedTabletsError) Unwrap() error { return ErrFailed }

// report logs a periodic pass's error on a tablet. A failed tablet was
// reported when it failed (its error says so): the passes do not report
// it again.
func (m *Manager) report(what string, t *Tablet, err error) {
	if err != nil && !errors.Is(err, ErrFailed) {
		m.opts.Tablet.Logger.Error(what, "tablet", t.tp.String(), "err", err)
	}
}

// flushPass flushes the tablets whose flush.ms is due and parks idle ones.
func (m *Manager) flushPass() {
	for _, t := range m.Tablets() {
		m.report("flush", t, t.FlushIfDue())
		t.ParkIdle()
	}
}

// retentionPass applies retention to every tablet.
func (m *Manager) retentionPass() {
	for _, t := range m.Tablets() {
		_, err := t.ApplyRetention()
		m.report("retention", t, err)
	}
}

// startTasks runs the periodic tasks until Close.
func (m *Manager) startTasks() {
	task := func(every time.Duration, fn func()) {
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			tick := time.NewTicker(every)
			defer tick.Stop()
			for {
				select {
				case <-m.stop:
					return
				case <-tick.C:
					fn()
				}
			}
		}()
	}
	log := m.opts.Tablet.Logger
	task(m.opts.FlushCheckInterval, m.flushPass)
	task(m.opts.CheckpointInterval, func() {
		if err := m.Checkpoint(); err != nil {
			log.Error("checkpoint", "dir", m.dir, "err", err)
		}
	})
	task(m.opts.RetentionCheckInterval, m.retentionPass)
	task(m.opts.ProducerExpirationCheckInterval, func() {
		for _, t := range m.Tablets() {
			t.ExpireProducers()
		}
	})
	if !m.opts.Cleaner.Disable {
		for range m.opts.Cleaner.Threads {
			c := m.newCleanerThread()
			task(m.opts.Cleaner.Backoff, func() { c.runOnce() })
		}
	}
}

// FlushIfDue flushes if data has waited flush.ms since the last flush.
func (t *Tablet) FlushIfDue() error {
	cfg := t.Config()
	if cfg.FlushMs == math.MaxInt64 {
		return nil
	}
	v := t.view()
	if v.leo.offset > v.recoveryPoint && t.opts.Now().UnixMilli()-t.lastFlushMs.Load() >= cfg.FlushMs {
		return t.Flush()
	}
	return nil
}

// ExpireProducers forgets producers idle for producer.id.expiration.ms.
func (t *Tablet) ExpireProducers() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.usableLocked() == nil {
		t.mu.state.RemoveExpiredProducers(t.opts.Now().UnixMilli())
	}
}

// scheduler runs delayed work until stopped; stopped work is dropped (the
// next load removes what it would have).
type scheduler struct {
	mu      sync.Mutex // guards timers and stopped
	timers  map[*time.Timer]func()
	stopped bool
	running sync.WaitGroup // a timer scheduled and not yet stopped or run
}

func newScheduler() *scheduler { return &scheduler{timers: map[*time.Timer]func(){}} }

func (s *scheduler) After(d time.Duration, fn func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	s.running.Add(1)
	var tm *time.Timer
	tm = time.AfterFunc(d, func() {
		defer s.running.Done()
		s.mu.Lock()
		delete(s.timers, tm)
		s.mu.Unlock()
		fn()
	})
	s.timers[tm] = fn
}

// stop cancels what is pending and waits for what already runs.
func (s *scheduler) stop() { s.drain(false) }

// drain stops the scheduler and, when run is set, runs at once what was
// still pending (the unlinking of deleted segments at a clean close, when
// no reader is left) instead of dropping it; it returns when nothing
// scheduled is running.
func (s *scheduler) drain(run bool) {
	s.mu.Lock()
	s.stopped = true
	var pending []func()
	for tm, fn := range s.timers {
		if tm.Stop() { // it will not run: its turn is now or never
			pending = append(pending, fn)
			s.running.Done()
		}
	}
	clear(s.timers)
	s.mu.Unlock()
	if run {
		for _, fn := range pending {
			fn()
		}
	}
	s.running.Wait()
}
