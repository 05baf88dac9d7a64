package tiering

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// AuditResult is what an audit of a tier's store found.
type AuditResult struct {
	// Checked is how many committed objects were checked.
	Checked int
	// Missing are committed objects the store no longer holds: the records
	// they hold are lost unless a copy is found.
	Missing []Entry
	// Changed are committed objects whose size or footer checksum is not
	// what was committed, with why.
	Changed []AuditChange
	// Orphans are objects of the tablet that no manifest record names (a
	// PUT that landed after its upload was abandoned): garbage, collected
	// by the orphan scan.
	Orphans []ObjectInfo
}

// AuditChange is a committed object that is not what was committed.
type AuditChange struct {
	Entry  Entry
	Reason string
}

// OK reports whether every committed object is there, as committed.
func (r AuditResult) OK() bool { return len(r.Missing) == 0 && len(r.Changed) == 0 }

// Err is the audit's damage as an error (nil when OK): each missing or
// changed object with its key, offsets and reason.
func (r AuditResult) Err() error {
	var errs []error
	for _, e := range r.Missing {
		errs = append(errs, fmt.Errorf("committed object %s, holding offsets %d to %d, is missing from the store", e.Key, e.Base, e.End-1))
	}
	for _, c := range r.Changed {
		errs = append(errs, fmt.Errorf("committed object %s, holding offsets %d to %d, is not what was committed: %s",
			c.Entry.Key, c.Entry.Base, c.Entry.End-1, c.Reason))
	}
	return errors.Join(errs...)
}

// Audit checks the store against the manifest: every committed object is
// there with its size (HEAD) and its footer's checksum of index and aux (a
// 64-byte ranged GET), and every object of the tablet in the store is named
// by the manifest. It changes nothing.
func (x *Tier) Audit(ctx context.Context) (AuditResult, error) {
	var res AuditResult
	st := x.m.State()
	named := map[string]bool{}
	for _, e := range st.Objects {
		named[e.Key] = true
	}
	for _, e := range x.m.Visible() {
		if e.Key == "" {
			continue // a segment with no batch: no object
		}
		res.Checked++
		info, err := x.store.Head(ctx, e.Key)
		if errors.Is(err, ErrNotFound) {
			res.Missing = append(res.Missing, e)
			continue
		}
		if err != nil {
			return res, err
		}
		if info.Size != e.Size {
			res.Changed = append(res.Changed, AuditChange{e, fmt.Sprintf("%d bytes, committed with %d", info.Size, e.Size)})
			continue
		}
		if e.Size < footerSize {
			res.Changed = append(res.Changed, AuditChange{e, fmt.Sprintf("%d bytes: no room for a footer", e.Size)})
			continue
		}
		f, err := x.store.GetRange(ctx, e.Key, e.Size-footerSize, footerSize)
		if errors.Is(err, ErrNotFound) {
			res.Missing = append(res.Missing, e)
			continue
		}
		if err != nil {
			return res, err
		}
		if got := binary.BigEndian.Uint32(f[ftCRC:]); got != e.CRC {
			res.Changed = append(res.Changed, AuditChange{e, fmt.Sprintf("its footer's checksum is %08x, committed with %08x", got, e.CRC)})
		}
	}
	list, err := x.store.List(ctx, x.listPrefix())
	if err != nil {
		return res, err
	}
	for _, o := range list {
		if x.ownsKey(o.Key) && !named[o.Key] {
			res.Orphans = append(res.Orphans, o)
		}
	}
	slices.SortFunc(res.Orphans, func(a, b ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	return res, nil
}

// listPrefix is where a listing finds every object of the tier: keys
// start with a 4-character hash, so the whole store (under its prefix).
func (x *Tier) listPrefix() string { return "" }

// MoveResult is what CopyTo copied.
type MoveResult struct {
	Objects int
	Bytes   int64
	// Present are objects the destination held already, as committed.
	Present int
}

// CopyTo copies every committed object of the tier to dst under its key,
// streamed in ranged GETs, and checks each copy as the audit does (size and
// footer checksum), then mirrors the manifest there: what a move to
// another store needs before the tablet is switched to it (SaveStoreURL).
// The source is not changed. dst must name the same prefix, since keys
// carry it.
func (x *Tier) CopyTo(ctx context.Context, dst ObjectStore) (MoveResult, error) {
	var res MoveResult
	if dst.Prefix() != x.store.Prefix() {
		return res, fmt.Errorf("tiering: moving %s: the new store's prefix %q is not %q (object keys carry it)",
			x.Name(), dst.Prefix(), x.store.Prefix())
	}
	for _, e := range x.m.Visible() {
		if e.Key == "" {
			continue
		}
		if ok, err := committedCopy(ctx, dst, e); err != nil {
			return res, err
		} else if ok {
			res.Present++
			continue
		}
		src := &rangeReader{ctx: ctx, s: x.store, key: e.Key, size: e.Size}
		if _, err := Upload(ctx, dst, e.Key, src, e.Size); err != nil && !errors.Is(err, ErrExists) {
			return res, fmt.Errorf("tiering: copying %s: %w", e.Key, err)
		}
		if ok, err := committedCopy(ctx, dst, e); err != nil {
			return res, err
		} else if !ok {
			return res, fmt.Errorf("tiering: the copy of %s in %s is not what was committed", e.Key, dst)
		}
		res.Objects++
		res.Bytes += e.Size
	}
	st := x.m.State()
	data, err := json.Marshal(st)
	if err != nil {
		return res, err
	}
	if _, err := dst.Put(ctx, x.mirrorKey(st.Seq), data); err != nil && !errors.Is(err, ErrExists) {
		return res, fmt.Errorf("tiering: mirroring the manifest of %s: %w", x.Name(), err)
	}
	return res, nil
}

// committedCopy reports whether s holds e's object as committed: its size
// and its footer's checksum.
func committedCopy(ctx context.Context, s ObjectStore, e Entry) (bool, error) {
	info, err := s.Head(ctx, e.Key)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if info.Size != e.Size || e.Size < footerSize {
		return false, nil
	}
	f, err := s.GetRange(ctx, e.Key, e.Size-footerSize, footerSize)
	if err != nil {
		return false, err
	}
	return binary.BigEndian.Uint32(f[ftCRC:]) == e.CRC, nil
}

// rangeReader reads an object in 8 MiB ranged GETs.
type rangeReader struct {
	ctx       context.Context
	s         ObjectStore
	key       string
	off, size int64
	buf       []byte
}

func (r *rangeReader) Read(p []byte) (int, error) {
	if len(r.buf) == 0 {
		if r.off >= r.size {
			return 0, io.EOF
		}
		n := min(r.size-r.off, 8<<20)
		b, err := r.s.GetRange(r.ctx, r.key, r.off, int(n))
		if err != nil {
			return 0, err
		}
		r.buf, r.off = b, r.off+int64(len(b))
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}
