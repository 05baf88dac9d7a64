package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/tablet"
	"github.com/seglog/seglog/tiering"
	"github.com/seglog/seglog/vfs"
)

// s3Flags are the credentials of an s3:// store given on the command line
// (otherwise the standard AWS chain is used: the environment's
// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, shared files, roles). A
// secret is never a flag's value, which every user of the machine sees in
// the process list: it comes from a file. Nothing of them is printed.
type s3Flags struct {
	accessKey, secretFile, tokenFile string
	instanceMetadata                 bool
}

func (f *s3Flags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.accessKey, "access-key-id", "", "S3 access key id, with --secret-access-key-file (default: the AWS credential chain)")
	cmd.Flags().StringVar(&f.secretFile, "secret-access-key-file", "", "a file holding the S3 secret access key (never a flag value: the process list shows those)")
	cmd.Flags().StringVar(&f.tokenFile, "session-token-file", "", "a file holding an S3 session token")
	cmd.Flags().BoolVar(&f.instanceMetadata, "instance-metadata", false, "let the AWS chain ask the EC2 instance-metadata endpoint for credentials even for a store that is not AWS")
}

func (f *s3Flags) options() (*tiering.S3Options, error) {
	o := &tiering.S3Options{InstanceMetadata: f.instanceMetadata}
	if f.accessKey == "" && f.secretFile == "" {
		return o, nil
	}
	if f.accessKey == "" || f.secretFile == "" {
		return nil, fmt.Errorf("--access-key-id and --secret-access-key-file go together")
	}
	secret, err := readSecret(f.secretFile)
	if err != nil {
		return nil, err
	}
	o.AccessKey, o.SecretKey = f.accessKey, secret
	if f.tokenFile != "" {
		if o.SessionToken, err = readSecret(f.tokenFile); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// readSecret reads a secret from a file, trimmed; the error names the file,
// never its content.
func readSecret(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading the secret file: %w", err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", fmt.Errorf("the secret file %s is empty", path)
	}
	return s, nil
}

func ctxOf(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}

// tierConfigKeys are the tier's own settings (the retention ones are topic
// configs under Kafka's names).
var tierConfigKeys = []string{"tier.block.bytes", "tier.index.cache.objects", "tier.block.cache.bytes",
	"tier.upload.timeout.ms", "tier.grace.period.ms", "tier.keep.local.segments"}

// splitConfigs applies tier.* keys to opts and returns the others.
func splitConfigs(kvs []string, opts *tiering.Options) ([]string, error) {
	var rest []string
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok || !strings.HasPrefix(k, "tier.") {
			rest = append(rest, kv)
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%w: %s=%q is not a non-negative integer", tablet.ErrConfig, k, v)
		}
		switch k {
		case "tier.block.bytes":
			opts.BlockSize = int(n)
		case "tier.index.cache.objects":
			opts.IndexCacheObjects = int(n)
		case "tier.block.cache.bytes":
			opts.BlockCacheBytes = n
		case "tier.upload.timeout.ms":
			opts.UploadTimeout = time.Duration(n) * time.Millisecond
		case "tier.grace.period.ms":
			opts.GracePeriod = time.Duration(n) * time.Millisecond
		case "tier.keep.local.segments":
			opts.KeepLocalSegments = int(n)
		default:
			return nil, fmt.Errorf("%w: unknown key %q (tier keys: %s)", tablet.ErrConfig, k, strings.Join(tierConfigKeys, ", "))
		}
	}
	return rest, nil
}

func newTierCmd() *cobra.Command {
	var (
		f        tabletFlags
		store    string
		once     bool
		interval time.Duration
		creds    s3Flags
		moveTo   string
		detach   bool
	)
	cmd := &cobra.Command{
		Use:   "tier --data-dir D [--topic T --partition P] --store URL [--once]",
		Short: "Upload sealed segments to an object store and delete them locally",
		Long: `tier moves each tablet's sealed segments (all tablets without --topic) to an
object store as stream objects (docs/tiering.md): a segment is uploaded once
it is wholly below the high watermark and the last stable offset, in offset
order; the upload is recorded in the tablet's manifest (tier/manifest.log)
before it starts and committed once the store holds it whole; then local
retention deletes the uploaded segments, and total retention retires the
oldest objects.

--store is file:///dir (a directory) or
s3://bucket/prefix?endpoint=URL&region=R&path-style=true. S3 credentials come
from the AWS credential chain (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY,
shared files, roles) or --access-key-id with --secret-access-key-file (a
secret is never a flag value: the process list shows those); they are never
printed or stored, and a URL that carries them is refused. The EC2
instance-metadata endpoint is asked only for AWS itself, or with
--instance-metadata. The
store URL is kept in the tablet (tier/store.url), so consume, offsets and the
other commands read the tiered part from then on.

--config sets topic configs as key=value: local.retention.bytes and
local.retention.ms (how much stays local once tiered; -2, the default, means
retention.bytes / retention.ms), retention.bytes and retention.ms (the whole
log, tier included), and the tier's own: ` + strings.Join(tierConfigKeys, ", ") + `.

With --once it makes one pass (upload with a progress bar, local deletion,
retention, garbage collection) and prints what it did; otherwise it repeats
every --interval until interrupted.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			switch {
			case moveTo != "" && detach:
				return errors.New("--move-to and --detach go one at a time")
			case moveTo != "":
				return tierMove(cmd, &f, moveTo, &creds)
			case detach:
				return tierDetach(cmd, &f)
			}
			if store == "" {
				return errors.New("--store is required")
			}
			if err := tiering.CheckStoreURL(store); err != nil {
				return err // no retry makes a bad URL work
			}
			var opts tiering.Options
			rest, err := splitConfigs(f.configs, &opts)
			if err != nil {
				return err
			}
			m, err := openManager(cmd, f.dataDir, write)
			if err != nil {
				return err
			}
			defer func() { err = errors.Join(err, m.Close()) }()
			ctx := ctxOf(cmd)
			opts3, err := creds.options()
			if err != nil {
				return err
			}
			// The store is opened in the passes: one that is down at the
			// start is retried like any other failure.
			var s tiering.ObjectStore
			opts.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
			var tiers []*tiering.Tier
			defer func() {
				for _, x := range tiers {
					err = errors.Join(err, x.Close())
				}
			}()
			absStore, err := tiering.AbsoluteStoreURL(store) // as saved: file:// stores by their absolute directory
			if err != nil {
				return err
			}
			opts.StoreURL = absStore     // each tier binds its tablet before deleting a local segment
			var pending []*tablet.Tablet // tablets whose tier could not be opened yet
			var skipped []string         // tablets whose topic does not enable remote storage
			for _, t := range m.Tablets() {
				tp := t.TopicPartition()
				if f.topic != "" && tp != f.tp() {
					continue
				}
				if len(rest) > 0 {
					cfg, err := applyConfigs(t.Config(), rest)
					if err != nil {
						return err
					}
					if err := t.SetConfig(cfg); err != nil {
						return err
					}
				}
				// Only the tablets whose topic enables remote storage (or
				// that are tiered already) are tiered.
				if ok, err := tiering.Wants(t); err != nil {
					return err
				} else if !ok {
					skipped = append(skipped, tp.String())
					continue
				}
				// A tablet is bound to a store by its first commit there,
				// not by a run that never committed.
				if err := tiering.CheckBinding(vfs.OS, t, store); err != nil {
					return err
				}
				pending = append(pending, t)
			}
			if len(pending) == 0 {
				if len(skipped) > 0 {
					return fmt.Errorf("no tablet to tier: %s do not set remote.storage.enable=true (enable the topics to tier with --config remote.storage.enable=true; it is kept in the tablet)",
						strings.Join(skipped, ", "))
				}
				if f.topic != "" {
					return fmt.Errorf("%w: %s in %s", tablet.ErrNotFound, f.tp(), f.dataDir)
				}
				return fmt.Errorf("no tablet in %s", f.dataDir)
			}
			// openPending opens the tiers not open yet: a store that is down
			// leaves them pending, for the next pass.
			openPending := func() error {
				if s == nil {
					opened, err := tiering.OpenStore(ctx, store, opts3)
					if err != nil {
						return err // s stays nil: opened may be a typed nil
					}
					s = opened
				}
				var errs []error
				left := pending[:0]
				for _, t := range pending {
					tp := t.TopicPartition()
					x, err := tiering.Open(ctx, t, tp.Topic, tp.Partition, s, &opts)
					if err != nil {
						errs = append(errs, fmt.Errorf("%s: %w", tp, err))
						left = append(left, t)
						continue
					}
					tiers = append(tiers, x)
				}
				pending = left
				return errors.Join(errs...)
			}
			// bind saves the store's URL in each tablet that has a committed
			// object there.
			bind := func() error {
				for _, x := range tiers {
					if len(x.Manifest().Visible()) == 0 {
						continue
					}
					if u, ok, _ := tiering.StoreURL(vfs.OS, x.Tablet().Dir()); ok && u == absStore {
						continue
					}
					if err := tiering.SaveStoreURL(vfs.OS, x.Tablet().Dir(), absStore); err != nil {
						return err
					}
				}
				return nil
			}
			pass := func() error {
				err := openPending()
				if s == nil {
					return err
				}
				err = errors.Join(err, tierPass(ctx, cmd, tiers))
				return errors.Join(err, bind())
			}
			if once {
				if err := pass(); err != nil {
					return err
				}
				// A committed object gone from the store is an error, not a
				// quiet hole for a later read to find.
				var errs []error
				for _, x := range tiers {
					res, err := x.Audit(ctx)
					if err != nil {
						errs = append(errs, fmt.Errorf("%s: auditing the store: %w", x.Name(), err))
						continue
					}
					if len(res.Orphans) > 0 {
						fmt.Fprintf(cmd.OutOrStdout(), "%s: %d orphan object(s) in the store (the orphan scan collects them)\n", x.Name(), len(res.Orphans))
					}
					if err := res.Err(); err != nil {
						errs = append(errs, fmt.Errorf("%s: %w", x.Name(), err))
					}
				}
				return errors.Join(errs...)
			}
			ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
			defer stop()
			wait := interval
			for {
				if err := pass(); err != nil {
					if ctx.Err() != nil {
						return nil
					}
					// Each failure is said, and the next pass comes sooner
					// (1 s, then twice as long each time, up to --interval):
					// a store back up is found quickly, a store down is not
					// hammered.
					if wait >= interval {
						wait = min(time.Second, interval)
					} else {
						wait = min(2*wait, interval)
					}
					fmt.Fprintf(cmd.ErrOrStderr(), "tier: %s (retrying in %s)\n", seglog.Humanize(err.Error()), wait)
				} else {
					wait = interval
				}
				timer := time.NewTimer(wait)
				select {
				case <-ctx.Done():
					timer.Stop()
					return nil
				case <-timer.C:
				}
			}
		},
	}
	f.registerTopic(cmd, true, "only this topic's tablet (every tiered tablet without it)")
	cmd.Flags().StringVar(&store, "store", "", "the object store URL: file:///dir or s3://bucket/prefix?endpoint=&region=&path-style=")
	cmd.Flags().BoolVar(&once, "once", false, "make one pass and exit")
	cmd.Flags().DurationVar(&interval, "interval", 30*time.Second, "time between passes without --once")
	cmd.Flags().StringVar(&moveTo, "move-to", "", "move each tiered tablet to this store: copy every committed object, check each copy, then switch (the old store is left as it is)")
	cmd.Flags().BoolVar(&detach, "detach", false, "drop each tablet's tier (its manifest and store URL; the store's objects stay), refused while records below the local log start are only in the store")
	creds.register(cmd)
	cmd.AddCommand(newTierLsCmd(), newTierVerifyCmd())
	return cmd
}

// tierPass uploads, deletes locally, applies retention and collects
// garbage for each tier, printing what happened.
func tierPass(ctx context.Context, cmd *cobra.Command, tiers []*tiering.Tier) error {
	w := cmd.OutOrStdout()
	var errs []error
	for _, x := range tiers {
		name := x.Name()
		eligible, _ := x.Untiered()
		bar := progressBar(cmd.ErrOrStderr(), eligible, "upload "+name)
		var err error
		for {
			var e tiering.Entry
			var ok bool
			e, ok, err = x.UploadNext(ctx, func(n int64) {
				if bar != nil {
					_ = bar.Add64(n)
				}
			})
			if err != nil || !ok {
				break
			}
			if e.Key == "" {
				fmt.Fprintf(w, "%s: skipped empty segment [%d, %d)\n", name, e.Base, e.End)
				continue
			}
			fmt.Fprintf(w, "%s: uploaded and committed %s offsets [%d, %d) %d bytes\n", name, e.Key, e.Base, e.End, e.Size)
		}
		if bar != nil {
			_ = bar.Finish()
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			continue
		}
		del, err := x.DeleteLocal()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			continue
		}
		if del.Segments > 0 {
			fmt.Fprintf(w, "%s: deleted %d local segment(s), %d bytes; the local log now starts at %d\n",
				name, del.Segments, del.Bytes, x.Tablet().Offsets().LocalLogStartOffset)
		}
		ret, err := x.ApplyRetention(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			continue
		}
		if ret.Retired > 0 || ret.Deleted > 0 {
			fmt.Fprintf(w, "%s: retention retired %d object(s) (log start %d), deleted %d from the store\n",
				name, ret.Retired, ret.LogStart, ret.Deleted)
		}
		gc, err := x.CollectGarbage(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			continue
		}
		if gc != (tiering.GCResult{}) {
			fmt.Fprintf(w, "%s: garbage: %d orphan(s), %d multipart upload(s), %d old mirror(s), %d stale upload(s)\n",
				name, gc.Orphans, gc.Multipart, gc.Mirrors, gc.Aborted)
		}
		off := x.Tablet().Offsets()
		fmt.Fprintf(w, "%s: tiered to %d; log start %d, local log start %d, log end %d\n",
			name, x.Manifest().TieredEnd(), off.LogStartOffset, off.LocalLogStartOffset, off.LogEndOffset)
	}
	return errors.Join(errs...)
}

// recoveryProgress returns a recovery.Options.Progress that draws a bar on
// w when it is a terminal, or nil.
func recoveryProgress(w io.Writer, dataDir string) func(done, total int64) {
	f, ok := w.(*os.File)
	if !ok || !isTerminal(f) {
		return nil
	}
	return barProgress(f, "recovering "+dataDir)
}

// barProgress draws a byte progress bar on w, made at the first call.
func barProgress(w io.Writer, what string) func(done, total int64) {
	var bar *progressbar.ProgressBar
	return func(done, total int64) {
		if bar == nil {
			bar = progressbar.NewOptions64(total, progressbar.OptionSetWriter(w), progressbar.OptionSetDescription(what),
				progressbar.OptionSetWidth(30), progressbar.OptionShowBytes(true),
				progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
		}
		_ = bar.Set64(done)
		if done >= total {
			_ = bar.Finish()
		}
	}
}

// progressBar returns a bar on a terminal, nil otherwise.
func progressBar(w io.Writer, total int64, what string) *progressbar.ProgressBar {
	f, ok := w.(*os.File)
	if !ok || total <= 0 || !isTerminal(f) {
		return nil
	}
	return progressbar.NewOptions64(total, progressbar.OptionSetWriter(f), progressbar.OptionSetDescription(what),
		progressbar.OptionSetWidth(30), progressbar.OptionShowBytes(true), progressbar.OptionClearOnFinish())
}

func newTierLsCmd() *cobra.Command {
	var (
		store   string
		topic   string
		part    int32
		dataDir string
		audit   bool
		creds   s3Flags
	)
	cmd := &cobra.Command{
		Use:   "ls --store URL [--topic T --partition P] [--data-dir D [--audit]]",
		Short: "List a store's objects and the manifests",
		Long: `ls lists the stream objects and manifest mirrors in the store (a tablet's with
--topic), then, for each tablet whose manifest is known (the store's newest
mirror, or with --data-dir the local manifest), its objects with their state
and offsets.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if store == "" {
				return errors.New("--store is required")
			}
			if dataDir != "" {
				// Read only: a shared lock, and the manifests read without a
				// byte changing.
				if _, err := os.Stat(dataDir); err != nil {
					return fmt.Errorf("no data directory %s", dataDir)
				}
				lock, err := tablet.LockDir(vfs.OS, dataDir, true)
				if err != nil {
					return err
				}
				defer lock.Close()
			}
			ctx := ctxOf(cmd)
			opts3, err := creds.options()
			if err != nil {
				return err
			}
			s, err := tiering.OpenStore(ctx, store, opts3)
			if err != nil {
				return err
			}
			list, err := s.List(ctx, "")
			if err != nil {
				return err
			}
			want := ""
			if topic != "" {
				want = "/" + checkpoint.TopicPartition{Topic: topic, Partition: part}.String() + "/"
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "KEY\tBYTES\tMODIFIED")
			for _, o := range list {
				if want != "" && !strings.Contains("/"+o.Key, want) {
					continue
				}
				fmt.Fprintf(tw, "%s\t%d\t%s\n", o.Key, o.Size, o.Modified.UTC().Format(time.RFC3339))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			states, err := tiering.Manifests(ctx, s, list, dataDir)
			if err != nil {
				return err
			}
			for _, ms := range states {
				if want != "" && !strings.Contains("/"+ms.Tablet+"/", want) {
					continue
				}
				fmt.Fprintf(cmd.OutOrStdout(), "\nmanifest of %s (%s): seq %d, tiered end %d, log start %d\n",
					ms.Tablet, ms.Source, ms.State.Seq, ms.State.TieredEnd, ms.State.LogStart)
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "STATE\tBASE\tEND\tBYTES\tKEY")
				for _, e := range ms.State.Objects {
					fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\n", e.State, e.Base, e.End, e.Size, e.Key)
				}
				if err := tw.Flush(); err != nil {
					return err
				}
			}
			if !audit {
				return nil
			}
			// The audit's verdict, as tier verify gives it.
			if dataDir == "" {
				return errors.New("--audit needs --data-dir: the manifests it audits against are the local ones")
			}
			m, err := openManager(cmd, dataDir, readOnly)
			if err != nil {
				return err
			}
			defer m.Close()
			a, err := tiering.Attach(ctx, m, nil, opts3, &tiering.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if a != nil {
				defer a.Close()
			}
			if err != nil {
				return err
			}
			bad := 0
			for _, x := range a.Tiers {
				res, err := x.Audit(ctx)
				if err != nil {
					return err
				}
				verdict := "every committed object there, as committed"
				if !res.OK() {
					verdict = fmt.Sprintf("%d missing, %d changed", len(res.Missing), len(res.Changed))
					bad++
				}
				fmt.Fprintf(cmd.OutOrStdout(), "\naudit of %s: %d committed object(s) checked: %s; %d orphan(s)\n", x.Name(), res.Checked, verdict, len(res.Orphans))
				printAudit(cmd.OutOrStdout(), res)
			}
			if bad > 0 {
				return &exitError{code: 1, msg: fmt.Sprintf("%d tablet(s) with missing or changed objects", bad)}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&store, "store", "", "the object store URL")
	cmd.Flags().StringVar(&topic, "topic", "", "only this topic's objects")
	cmd.Flags().Int32Var(&part, "partition", 0, "the partition, with --topic")
	cmd.Flags().StringVar(&dataDir, "data-dir", "", "read the local manifests of this data directory too")
	cmd.Flags().BoolVar(&audit, "audit", false, "with --data-dir: audit the store against each manifest (as tier verify) and show the verdict")
	creds.register(cmd)
	return cmd
}

func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

func newTierVerifyCmd() *cobra.Command {
	var (
		f     tabletFlags
		creds s3Flags
	)
	cmd := &cobra.Command{
		Use:   "verify --data-dir D [--topic T --partition P]",
		Short: "Audit the store of each tiered tablet: every committed object there, as committed",
		Long: `verify opens the data directory read-only (nothing on disk or in the store
changes), attaches the tier of each tiered tablet through its saved store URL,
and audits the store against the manifest: every committed object must be
there with its committed size (HEAD) and footer checksum (a 64-byte ranged
GET); every object of the tablet in the store must be named by the manifest.
It prints each missing, changed and orphan key with the offsets it holds, and
exits 1 if a committed object is missing or changed (orphans are garbage the
orphan scan collects, not damage).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			m, err := openManager(cmd, f.dataDir, readOnly)
			if err != nil {
				return err
			}
			defer func() { err = errors.Join(err, m.Close()) }()
			opts3, err := creds.options()
			if err != nil {
				return err
			}
			match := func(tp checkpoint.TopicPartition) bool { return f.topic == "" || tp == f.tp() }
			logger := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
			a, attachErr := tiering.Attach(ctxOf(cmd), m, match, opts3, &tiering.Options{Logger: logger})
			defer func() { err = errors.Join(err, a.Close()) }()
			if attachErr != nil {
				return attachErr // a tier that cannot be audited is no healthy one
			}
			if len(a.Tiers) == 0 {
				return fmt.Errorf("no tiered tablet in %s", f.dataDir)
			}
			w := cmd.OutOrStdout()
			bad := 0
			for _, x := range a.Tiers {
				res, err := x.Audit(ctxOf(cmd))
				if err != nil {
					return fmt.Errorf("%s: %w", x.Name(), err)
				}
				fmt.Fprintf(w, "%s: %d committed object(s) checked: %d missing, %d changed, %d orphan(s)\n",
					x.Name(), res.Checked, len(res.Missing), len(res.Changed), len(res.Orphans))
				printAudit(w, res)
				if !res.OK() {
					bad++
				}
			}
			if bad > 0 {
				return &exitError{code: 1, msg: fmt.Sprintf("%d tablet(s) with missing or changed objects", bad)}
			}
			return nil
		},
	}
	f.registerTopic(cmd, false, "only this topic's tablet (every tiered tablet without it)")
	creds.register(cmd)
	return cmd
}

// printAudit prints an audit's findings, one per line.
func printAudit(w io.Writer, res tiering.AuditResult) {
	for _, e := range res.Missing {
		fmt.Fprintf(w, "  MISSING %s (offsets %d to %d)\n", e.Key, e.Base, e.End-1)
	}
	for _, c := range res.Changed {
		fmt.Fprintf(w, "  CHANGED %s (offsets %d to %d): %s\n", c.Entry.Key, c.Entry.Base, c.Entry.End-1, c.Reason)
	}
	for _, o := range res.Orphans {
		fmt.Fprintf(w, "  orphan  %s (%d bytes, no manifest record names it)\n", o.Key, o.Size)
	}
}

// tierMove moves the tiered tablets to another store: every committed
// object copied and checked, the manifest mirrored there, then the tablet's
// store URL switched. Nothing is deleted from the old store.
func tierMove(cmd *cobra.Command, f *tabletFlags, moveTo string, creds *s3Flags) (err error) {
	if err := tiering.CheckStoreURL(moveTo); err != nil {
		return err
	}
	absTo, err := tiering.AbsoluteStoreURL(moveTo)
	if err != nil {
		return err
	}
	m, err := openManager(cmd, f.dataDir, write)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, m.Close()) }()
	ctx := ctxOf(cmd)
	opts3, err := creds.options()
	if err != nil {
		return err
	}
	dst, err := tiering.OpenStore(ctx, moveTo, opts3)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	moved := 0
	for _, t := range m.Tablets() {
		tp := t.TopicPartition()
		if f.topic != "" && tp != f.tp() {
			continue
		}
		from, ok, err := tiering.StoreURL(vfs.OS, t.Dir())
		if err != nil {
			return err
		}
		if !ok || from == absTo {
			continue
		}
		src, err := tiering.OpenStore(ctx, from, opts3)
		if err != nil {
			return fmt.Errorf("%s: opening its store: %w", tp, err)
		}
		x, err := tiering.Open(ctx, t, tp.Topic, tp.Partition, src, &tiering.Options{Logger: logger})
		if err != nil {
			return fmt.Errorf("%s: %w", tp, err)
		}
		res, err := x.CopyTo(ctx, dst)
		err = errors.Join(err, x.Close())
		if err != nil {
			return fmt.Errorf("%s: %w (the tablet stays on %s)", tp, err, tiering.RedactURL(from))
		}
		if err := tiering.SaveStoreURL(vfs.OS, t.Dir(), absTo); err != nil {
			return err
		}
		moved++
		fmt.Fprintf(cmd.OutOrStdout(), "%s: moved to %s: %d object(s) copied (%d bytes), %d there already, every copy checked; %s is left as it is\n",
			tp, tiering.RedactURL(absTo), res.Objects, res.Bytes, res.Present, tiering.RedactURL(from))
	}
	if moved == 0 {
		return fmt.Errorf("no tiered tablet to move in %s", f.dataDir)
	}
	return nil
}

// tierDetach drops the tier of each tiered tablet whose records are all
// local: its tier state is removed and remote.storage.enable turned off.
// The store's objects are left (delete them from the store if wanted).
func tierDetach(cmd *cobra.Command, f *tabletFlags) (err error) {
	m, err := openManager(cmd, f.dataDir, write)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, m.Close()) }()
	detached := 0
	for _, t := range m.Tablets() {
		tp := t.TopicPartition()
		if (f.topic != "" && tp != f.tp()) || !t.Tiered() {
			continue
		}
		o := t.Offsets()
		if o.LogStartOffset < o.LocalLogStartOffset {
			return fmt.Errorf("%s: offsets %d to %d are only in the store: detaching would lose them (the tier stays; seglog tier --move-to moves it)",
				tp, o.LogStartOffset, o.LocalLogStartOffset-1)
		}
		cfg := t.Config()
		cfg.RemoteStorageEnable = false
		if err := t.SetConfig(cfg); err != nil {
			return err
		}
		if err := os.RemoveAll(filepath.Join(t.Dir(), tablet.TierDir)); err != nil {
			return err
		}
		detached++
		fmt.Fprintf(cmd.OutOrStdout(), "%s: detached from its tier (remote.storage.enable=false); every record is local\n", tp)
	}
	if detached == 0 {
		return fmt.Errorf("no tiered tablet to detach in %s", f.dataDir)
	}
	return nil
}
