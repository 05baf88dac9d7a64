package tiering

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/tablet"
	"github.com/seglog/seglog/vfs"
)

// ServiceOptions configure background tiering.
type ServiceOptions struct {
	// Tier are the options of each tablet's tier.
	Tier Options
	// Interval is how often each tablet is stepped (upload, local
	// deletion, retention). The default is 30 s.
	Interval time.Duration
	// GCInterval is how often garbage is collected. The default is 10
	// minutes.
	GCInterval time.Duration
	// Concurrency bounds the tablets stepped at once. The default is 4.
	Concurrency int
	// StoreURL is the store's URL (without credentials). When set, the
	// service binds each tablet it commits an object for to it (SaveStoreURL,
	// as seglog tier does, so every later opener attaches the tier), and
	// refuses to step a tablet bound to another store that holds committed
	// objects there (ErrOtherStore). The default is empty: no binding.
	StoreURL string
	// Fence, if set, makes the service a cluster broker's: each tablet's
	// tier gets its partition's fence (Options.Fence), and only the
	// partitions this broker leads are tiered; on the others the tier
	// follows the published manifest and deletes only what local
	// retention lets go below its tiered end. The default is nil: a
	// single node.
	Fence func(tp checkpoint.TopicPartition) Fence
}

// ErrOtherStore is a tablet tiered to another store than the service's.
var ErrOtherStore = seglog.NewKafkaError("tiering: the tablet is tiered to another store", -1)

func (o *ServiceOptions) ensureDefaults() {
	if o.Interval <= 0 {
		o.Interval = 30 * time.Second
	}
	if o.GCInterval <= 0 {
		o.GCInterval = 10 * time.Minute
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 4
	}
	o.Tier.EnsureDefaults()
}

// Service tiers every tablet of a Manager in the background: a tier per
// tablet, opened when first seen, stepped every Interval with bounded
// concurrency, garbage collected every GCInterval. Its Collector reports
// untiered bytes, so a store outage that makes local data grow is seen.
type Service struct {
	m     *tablet.Manager
	store ObjectStore
	opts  ServiceOptions

	mu    sync.Mutex // guards tiers and bound
	tiers map[checkpoint.TopicPartition]*Tier
	bound map[*Tier]bool // tiers whose tablet has the store's URL saved

	uploaded atomic.Int64
	failures atomic.Int64
	stop     chan struct{}
	wg       sync.WaitGroup
}

// NewService returns a service over m's tablets; Start runs it in the
// background, RunOnce steps every tablet once.
func NewService(m *tablet.Manager, store ObjectStore, o *ServiceOptions) *Service {
	var opts ServiceOptions
	if o != nil {
		opts = *o
	}
	opts.ensureDefaults()
	if opts.StoreURL != "" {
		if abs, err := AbsoluteStoreURL(opts.StoreURL); err == nil {
			opts.StoreURL = abs
			opts.Tier.StoreURL = abs // bound before a local deletion, not after the step
		}
	}
	return &Service{m: m, store: store, opts: opts, tiers: map[checkpoint.TopicPartition]*Tier{}, bound: map[*Tier]bool{},
		stop: make(chan struct{})}
}

// Tier returns the tier of a tablet, opening it on first use.
func (s *Service) Tier(ctx context.Context, t *tablet.Tablet) (*Tier, error) {
	if t == nil {
		return nil, errors.New("tiering: no tablet")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	tp := t.TopicPartition()
	if x, ok := s.tiers[tp]; ok && x.t == t {
		return x, nil
	}
	if err := s.checkBinding(t); err != nil {
		return nil, err
	}
	opts := s.opts.Tier
	if s.opts.Fence != nil {
		if opts.Fence = s.opts.Fence(tp); opts.Fence == nil {
			return nil, fmt.Errorf("%w: %s is not a replica of the cluster here", errNotLeading, tp)
		}
	}
	x, err := Open(ctx, t, tp.Topic, tp.Partition, s.store, &opts)
	if err != nil {
		return nil, err
	}
	s.tiers[tp] = x
	return x, nil
}

// checkBinding refuses a tablet bound to another store (CheckBinding).
func (s *Service) checkBinding(t *tablet.Tablet) error {
	if s.opts.StoreURL == "" {
		return nil
	}
	return CheckBinding(vfs.OrOS(s.opts.Tier.FS), t, s.opts.StoreURL)
}

// CheckBinding returns ErrOtherStore for a tablet bound to another store
// than storeURL with committed objects there: tiering it to storeURL would
// split its log across two stores (seglog tier --move-to moves it). A
// tablet bound to no store, or to one without a committed object, is
// free.
func CheckBinding(fsys vfs.FS, t *tablet.Tablet, storeURL string) error {
	abs, err := AbsoluteStoreURL(storeURL)
	if err != nil {
		return err
	}
	u, ok, err := StoreURL(fsys, t.Dir())
	if err != nil || !ok || u == abs || u == storeURL {
		return err
	}
	committed, err := CommittedObjects(t.Dir())
	if err != nil {
		return err
	}
	if committed > 0 {
		return fmt.Errorf("%w: %s is tiered to %s (%d committed object(s)), not %s; seglog tier --move-to moves it",
			ErrOtherStore, t.TopicPartition(), RedactURL(u), committed, RedactURL(storeURL))
	}
	return nil
}

// bind saves the store's URL in a tablet once its tier has a committed
// object there.
func (s *Service) bind(x *Tier) error {
	if s.opts.StoreURL == "" || len(x.Manifest().Visible()) == 0 {
		return nil
	}
	s.mu.Lock()
	done := s.bound[x]
	s.mu.Unlock()
	if done {
		return nil
	}
	if u, ok, err := StoreURL(vfs.OrOS(s.opts.Tier.FS), x.Tablet().Dir()); err != nil {
		return err
	} else if !ok || u != s.opts.StoreURL {
		if err := SaveStoreURL(vfs.OrOS(s.opts.Tier.FS), x.Tablet().Dir(), s.opts.StoreURL); err != nil {
			return err
		}
	}
	s.mu.Lock()
	s.bound[x] = true
	s.mu.Unlock()
	return nil
}

// wants is Wants, asking an open tier's manifest instead of replaying the
// manifest log from disk on every pass.
func (s *Service) wants(t *tablet.Tablet) (bool, error) {
	s.mu.Lock()
	x, ok := s.tiers[t.TopicPartition()]
	s.mu.Unlock()
	if !ok || x.t != t {
		return Wants(t)
	}
	return t.Config().RemoteStorageEnable || len(x.m.Visible()) > 0, nil
}

// RunOnce steps every tablet once (gc: and collects garbage), at most
// Concurrency at a time, and returns what each did.
func (s *Service) RunOnce(ctx context.Context, gc bool) (map[checkpoint.TopicPartition]StepResult, error) {
	if s.m == nil || s.store == nil {
		return nil, errors.New("tiering: the service needs a manager and a store")
	}
	var tablets []*tablet.Tablet
	for _, t := range s.m.Tablets() {
		if ok, err := s.wants(t); err != nil {
			return nil, err
		} else if ok {
			tablets = append(tablets, t)
		}
	}
	out := make(map[checkpoint.TopicPartition]StepResult, len(tablets))
	var mu sync.Mutex
	var errs []error
	sem := make(chan struct{}, s.opts.Concurrency)
	var wg sync.WaitGroup
	for _, t := range tablets {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			res, err := s.step(ctx, t, gc)
			mu.Lock()
			defer mu.Unlock()
			out[t.TopicPartition()] = res
			if err != nil {
				s.failures.Add(1)
				errs = append(errs, err)
			}
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

func (s *Service) step(ctx context.Context, t *tablet.Tablet, gc bool) (StepResult, error) {
	x, err := s.Tier(ctx, t)
	if err != nil {
		return StepResult{}, err
	}
	res, err := x.Step(ctx)
	if errors.Is(err, errNotLeading) { // (a cluster's follower)
		res.Local, err = x.Follow(ctx)
		return res, err
	}
	s.uploaded.Add(res.Upload.Bytes)
	err = errors.Join(err, s.bind(x))
	if err != nil {
		if _, total := x.Untiered(); total > 0 {
			s.opts.Tier.Logger.Warn("tiering is behind; untiered data stays local", "tablet", x.prefix, "untieredBytes", total, "err", err)
		}
		return res, err
	}
	if gc {
		_, err = x.CollectGarbage(ctx)
	}
	return res, err
}

// Start runs the service in the background until Close.
func (s *Service) Start() {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			<-s.stop
			cancel()
		}()
		step := time.NewTicker(s.opts.Interval)
		defer step.Stop()
		lastGC := time.Time{}
		for {
			gc := time.Since(lastGC) >= s.opts.GCInterval
			if gc {
				lastGC = time.Now()
			}
			if _, err := s.RunOnce(ctx, gc); err != nil && ctx.Err() == nil {
				s.opts.Tier.Logger.Error("tiering", "err", err)
			}
			select {
			case <-s.stop:
				return
			case <-step.C:
			}
		}
	}()
}

// Close stops the background work and closes the tiers' manifests. Close
// the Manager after it.
func (s *Service) Close() error {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for tp, x := range s.tiers {
		errs = append(errs, x.Close())
		delete(s.tiers, tp)
	}
	return errors.Join(errs...)
}

var (
	tierLabels     = []string{"topic", "partition"}
	descUntiered   = prometheus.NewDesc("seglog_tier_untiered_bytes", "Local bytes not yet in the object store (the active segment included).", tierLabels, nil)
	descEligible   = prometheus.NewDesc("seglog_tier_eligible_bytes", "Local bytes that could be uploaded now.", tierLabels, nil)
	descTieredEnd  = prometheus.NewDesc("seglog_tier_tiered_end_offset", "Offset below which the store holds the log.", tierLabels, nil)
	descObjects    = prometheus.NewDesc("seglog_tier_objects", "Visible objects.", tierLabels, nil)
	descUploaded   = prometheus.NewDesc("seglog_tier_uploaded_bytes_total", "Bytes uploaded.", nil, nil)
	descStepErrors = prometheus.NewDesc("seglog_tier_step_failures_total", "Tiering steps that failed.", nil, nil)
)

type serviceCollector struct{ s *Service }

// Collector reports the service's metrics.
func (s *Service) Collector() prometheus.Collector { return serviceCollector{s} }

func (c serviceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descUntiered, descEligible, descTieredEnd, descUploaded, descStepErrors,
		descFetchRequests, descFetchBytes, descFetchErrors, descRemoteSize, descObjects, descCopyLagBytes, descCopyLagSegs,
		descCacheHits, descCacheMisses} {
		ch <- d
	}
}

func (c serviceCollector) Collect(ch chan<- prometheus.Metric) {
	c.s.mu.Lock()
	tiers := make([]*Tier, 0, len(c.s.tiers))
	for _, x := range c.s.tiers {
		tiers = append(tiers, x)
	}
	c.s.mu.Unlock()
	for _, x := range tiers {
		lv := []string{x.topic, strconv.Itoa(int(x.partition))}
		eligible, total := x.Untiered()
		ch <- prometheus.MustNewConstMetric(descUntiered, prometheus.GaugeValue, float64(total), lv...)
		ch <- prometheus.MustNewConstMetric(descEligible, prometheus.GaugeValue, float64(eligible), lv...)
		ch <- prometheus.MustNewConstMetric(descTieredEnd, prometheus.GaugeValue, float64(x.m.TieredEnd()), lv...)
		collectTier(ch, x)
	}
	ch <- prometheus.MustNewConstMetric(descUploaded, prometheus.CounterValue, float64(c.s.uploaded.Load()))
	ch <- prometheus.MustNewConstMetric(descStepErrors, prometheus.CounterValue, float64(c.s.failures.Load()))
}
