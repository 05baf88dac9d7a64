package tiering

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/tablet"
	"github.com/seglog/seglog/vfs"
)

// StoreURLFile, in a tablet's tier directory, names the store the tablet
// is tiered to (without credentials), so later opens attach the tier.
const StoreURLFile = "store.url"

// SaveStoreURL records the store a tablet is tiered to, a file:// one
// with its directory made absolute. A URL carrying credentials is refused:
// they come from the AWS chain or flags, never a file.
func SaveStoreURL(fsys vfs.FS, tabletDir, rawURL string) error {
	fsys = vfs.OrOS(fsys)
	if _, err := url.Parse(rawURL); err != nil {
		return fmt.Errorf("tiering: store URL %q is not a URL", RedactURL(rawURL))
	}
	if carriesSecret(rawURL) {
		return fmt.Errorf("tiering: the store URL %s carries credentials: they come from the AWS chain, the environment or a file, and are never saved",
			RedactURL(rawURL))
	}
	var err error
	if rawURL, err = AbsoluteStoreURL(rawURL); err != nil {
		return err
	}
	dir := filepath.Join(tabletDir, ManifestDir)
	if err := fsys.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	return vfs.WriteAtomic(fsys, filepath.Join(dir, StoreURLFile), []byte(rawURL+"\n"))
}

// StoreURL returns the store a tablet is tiered to, if any.
func StoreURL(fsys vfs.FS, tabletDir string) (string, bool, error) {
	fsys = vfs.OrOS(fsys)
	b, err := vfs.ReadFile(fsys, filepath.Join(tabletDir, ManifestDir, StoreURLFile))
	if errors.Is(err, os.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return strings.TrimSpace(string(b)), true, nil
}

// Attached are the tiers Attach opened; Close closes them and their stores.
type Attached struct {
	Tiers []*Tier
}

// Close closes the tiers' manifests.
func (a *Attached) Close() error {
	var errs []error
	for _, x := range a.Tiers {
		errs = append(errs, x.Close())
	}
	return errors.Join(errs...)
}

// Attach opens the tier of every tablet of m (only those match accepts,
// if match is set) that was tiered before, so that reads below the local
// log start work. A tier that cannot be attached — its store down, its
// manifest unreadable — does not stop the others: Attach returns the tiers
// it opened and every failure, joined, for the caller to report or refuse
// (a tablet without its tier keeps its log start and serves its local
// records; tablet.ErrTierNotAttached answers reads below). Close the
// tiers it returns in both cases.
func Attach(ctx context.Context, m *tablet.Manager, match func(checkpoint.TopicPartition) bool, s3opts *S3Options, o *Options) (*Attached, error) {
	if m == nil {
		return nil, errors.New("tiering: Attach needs a manager")
	}
	a := &Attached{}
	stores := map[string]ObjectStore{}
	var errs []error
	for _, t := range m.Tablets() {
		tp := t.TopicPartition()
		if match != nil && !match(tp) {
			continue
		}
		u, ok, err := StoreURL(vfs.OS, t.Dir())
		if err != nil {
			errs = append(errs, fmt.Errorf("tiering: attaching %s: %w", tp, err))
			continue
		}
		if !ok {
			continue
		}
		s, ok := stores[u]
		if !ok {
			if s, err = OpenStore(ctx, u, s3opts); err != nil {
				errs = append(errs, fmt.Errorf("tiering: attaching %s: %w", tp, err))
				continue
			}
			stores[u] = s
		}
		x, err := Open(ctx, t, tp.Topic, tp.Partition, s, o)
		if err != nil {
			errs = append(errs, fmt.Errorf("tiering: attaching %s: %w", tp, err))
			continue
		}
		a.Tiers = append(a.Tiers, x)
	}
	return a, errors.Join(errs...)
}

// Name names the tier's tablet: topic-partition.
func (x *Tier) Name() string { return fmt.Sprintf("%s-%d", x.topic, x.partition) }

// Tablet returns the tier's tablet.
func (x *Tier) Tablet() *tablet.Tablet { return x.t }

// ManifestInfo is a tablet's manifest as found by Manifests.
type ManifestInfo struct {
	Tablet string // topic-partition
	Source string // the mirror's key, or the local manifest's directory
	State  ManifestState
}

// Manifests returns, for each tablet with objects in the store, its
// manifest: the local one under dataDir if given and present, else the
// newest readable mirror among list (a listing of the whole store).
func Manifests(ctx context.Context, s ObjectStore, list []ObjectInfo, dataDir string) ([]ManifestInfo, error) {
	newest := map[string]ObjectInfo{}
	var order []string
	for _, o := range list {
		i := strings.LastIndex(o.Key, "/manifest-")
		if i < 0 || !strings.HasSuffix(o.Key, ".json") {
			continue
		}
		tp := o.Key[strings.LastIndex(o.Key[:i], "/")+1 : i]
		if _, ok := newest[tp]; !ok {
			order = append(order, tp)
		}
		if o.Key > newest[tp].Key {
			newest[tp] = o
		}
	}
	var out []ManifestInfo
	for _, tp := range order {
		if dataDir != "" {
			dir := filepath.Join(dataDir, tp, ManifestDir)
			if _, err := os.Stat(filepath.Join(dir, ManifestLog)); err == nil {
				m, err := OpenManifest(vfs.NewOverlay(nil), dir, 0) // read only: nothing of the manifest changes on disk
				if err != nil {
					return nil, err
				}
				out = append(out, ManifestInfo{Tablet: tp, Source: dir, State: m.State()})
				if err := m.Close(); err != nil {
					return nil, err
				}
				continue
			}
		}
		o := newest[tp]
		data, err := readAll(ctx, s, o.Key, o.Size)
		if err != nil {
			return nil, err
		}
		var st ManifestState
		if err := json.Unmarshal(data, &st); err != nil {
			return nil, fmt.Errorf("tiering: mirror %s: %w", o.Key, err)
		}
		out = append(out, ManifestInfo{Tablet: tp, Source: o.Key, State: st})
	}
	return out, nil
}

// CommittedObjects returns how many committed objects a tablet's manifest
// holds (0 when it has none, or no tier), reading it without a byte
// changing on disk.
func CommittedObjects(tabletDir string) (int, error) {
	dir := filepath.Join(tabletDir, ManifestDir)
	if _, err := os.Stat(filepath.Join(dir, ManifestLog)); errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	m, err := OpenManifest(vfs.NewOverlay(nil), dir, 0)
	if err != nil {
		return 0, err
	}
	defer m.Close()
	return len(m.Visible()), nil
}

// Wants reports whether a tablet is to be tiered: its topic config enables
// remote storage (remote.storage.enable=true, KIP-405), or its tier already
// holds committed objects (a tier is never dropped quietly: --detach does
// that).
func Wants(t *tablet.Tablet) (bool, error) {
	if t.Config().RemoteStorageEnable {
		return true, nil
	}
	n, err := CommittedObjects(t.Dir())
	return n > 0, err
}
