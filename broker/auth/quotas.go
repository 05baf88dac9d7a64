package auth

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/checkpoint"
	"github.com/seglog/seglog/internal/docstore"
	"github.com/seglog/seglog/vfs"
)

// QuotasFile holds the client quotas (Kafka's AlterClientQuotas): part of
// the on-disk format; never change.
const QuotasFile = checkpoint.ClientQuotasFile

// Quota entity types and keys, as Kafka names them.
const (
	EntityUser     = "user"
	EntityClientID = "client-id"
	EntityIP       = "ip"

	ProducerByteRate       = "producer_byte_rate"
	ConsumerByteRate       = "consumer_byte_rate"
	RequestPercentage      = "request_percentage"
	ControllerMutationRate = "controller_mutation_rate"
	ConnectionCreationRate = "connection_creation_rate"
)

// ErrInvalidQuota is the cause of a quota change AlterClientQuotas
// refuses.
var ErrInvalidQuota = seglog.NewKafkaError("auth: invalid client quota", 42)

// Entity names what a quota applies to: a user, a client id, both, or an
// IP; a nil name is the entity type's default (every user, …).
type Entity map[string]*string

// Key is the entity's canonical form: its types in order, each with its
// name or the default (NUL-separated: a name may hold anything).
func (e Entity) Key() string {
	var parts []string
	for _, typ := range slices.Sorted(maps.Keys(e)) {
		name := "\x01<default>"
		if e[typ] != nil {
			name = "\x02" + *e[typ]
		}
		parts = append(parts, typ+name)
	}
	return strings.Join(parts, "\x00")
}

// Check returns why the entity cannot hold quotas: Kafka's combinations
// are user, client-id, user and client-id, or ip alone.
func (e Entity) Check() error {
	_, user := e[EntityUser]
	_, client := e[EntityClientID]
	_, ip := e[EntityIP]
	switch {
	case len(e) == 0 || len(e) > 2:
		return fmt.Errorf("%w: an entity is a user, a client-id, both, or an ip", ErrInvalidQuota)
	case ip && len(e) > 1:
		return fmt.Errorf("%w: an ip quota cannot be combined with another entity type", ErrInvalidQuota)
	case ip && e[EntityIP] != nil && net.ParseIP(*e[EntityIP]) == nil:
		return fmt.Errorf("%w: %q is not an IP address", ErrInvalidQuota, *e[EntityIP])
	case !ip && len(e) == 2 && !(user && client):
		return fmt.Errorf("%w: entity types %v", ErrInvalidQuota, slices.Sorted(maps.Keys(e)))
	case len(e) == 1 && !user && !client && !ip:
		return fmt.Errorf("%w: unknown entity type %v", ErrInvalidQuota, slices.Sorted(maps.Keys(e)))
	}
	return nil
}

// checkKey returns why key cannot be set on the entity.
func (e Entity) checkKey(key string, value float64) error {
	_, ip := e[EntityIP]
	switch key {
	case ProducerByteRate, ConsumerByteRate, RequestPercentage, ControllerMutationRate:
		if ip {
			return fmt.Errorf("%w: %s is not an ip quota", ErrInvalidQuota, key)
		}
	case ConnectionCreationRate:
		if !ip {
			return fmt.Errorf("%w: %s is an ip quota", ErrInvalidQuota, key)
		}
	default:
		return fmt.Errorf("%w: unknown quota %q", ErrInvalidQuota, key)
	}
	if value <= 0 {
		return fmt.Errorf("%w: %s must be positive", ErrInvalidQuota, key)
	}
	return nil
}

// QuotaEntry is one entity's quotas.
type QuotaEntry struct {
	Entity Entity             `json:"entity"`
	Values map[string]float64 `json:"values"`
}

type quotasFile struct {
	Version int          `json:"version"`
	Entries []QuotaEntry `json:"entries"`
}

func (f *quotasFile) version() int { return f.Version }

// Quotas are the client quotas of a data directory (or, in a cluster, of
// every broker), safe for concurrent use; every change is stored before it
// returns. The zero Quotas has none and takes no change.
type Quotas struct {
	state *docstore.Doc[map[string]QuotaEntry] // by Entity.Key; never changed once published
}

// OpenQuotas reads the quotas at path; a missing file is none.
func OpenQuotas(fsys vfs.FS, path string) (*Quotas, error) { return NewQuotas(FileStore(fsys, path)) }

// NewQuotas reads the quotas from store.
func NewQuotas(store Store) (*Quotas, error) {
	d, err := docstore.Open(store, decodeQuotas)
	if err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	return &Quotas{state: d}, nil
}

func decodeQuotas(data []byte) (*map[string]QuotaEntry, error) {
	m := map[string]QuotaEntry{}
	var f quotasFile
	if ok, err := decodeJSON(data, &f); !ok {
		return &m, err
	}
	for i, e := range f.Entries {
		err := e.Entity.Check()
		for k, v := range e.Values {
			err = errors.Join(err, e.Entity.checkKey(k, v))
		}
		if err != nil {
			return nil, fmt.Errorf("entry %d: %w", i, err)
		}
		m[e.Entity.Key()] = e
	}
	return &m, nil
}

// Refresh loads the quotas again from their store, if another broker
// changed them.
func (q *Quotas) Refresh() (bool, error) {
	if q.state == nil {
		return false, nil
	}
	return q.state.Refresh()
}

// QuotaOp sets (or with Remove, removes) one quota of an entity.
type QuotaOp struct {
	Key    string
	Value  float64
	Remove bool
}

// Alter applies each entity's operations, durably (none of an entity's if
// one is invalid; nothing if validateOnly), and returns each entity's
// error.
func (q *Quotas) Alter(entities []Entity, ops [][]QuotaOp, validateOnly bool) ([]error, error) {
	errs := make([]error, len(entities))
	if q.state == nil {
		return nil, errors.New("auth: no quota store")
	}
	err := q.state.Update(func(cur *map[string]QuotaEntry) (*map[string]QuotaEntry, []byte, error) {
		var m map[string]QuotaEntry
		if cur != nil {
			m = *cur
		}
		return q.alter(m, entities, ops, validateOnly, errs)
	})
	if err != nil {
		return nil, err
	}
	return errs, nil
}

// alter applies the operations to a copy of cur (errs says each entity's
// refusal) and returns it with its document, unless validateOnly (nil:
// nothing to publish).
func (q *Quotas) alter(cur map[string]QuotaEntry, entities []Entity, ops [][]QuotaOp, validateOnly bool, errs []error) (*map[string]QuotaEntry, []byte, error) {
	next := maps.Clone(cur)
	if next == nil {
		next = map[string]QuotaEntry{}
	}
	for i, e := range entities {
		if errs[i] = e.Check(); errs[i] != nil {
			continue
		}
		entry := QuotaEntry{Entity: e, Values: map[string]float64{}}
		if old, ok := next[e.Key()]; ok {
			entry.Values = maps.Clone(old.Values)
		}
		for _, op := range ops[i] {
			if op.Remove {
				delete(entry.Values, op.Key)
				continue
			}
			if errs[i] = e.checkKey(op.Key, op.Value); errs[i] != nil {
				break
			}
			entry.Values[op.Key] = op.Value
		}
		if errs[i] != nil {
			continue
		}
		if len(entry.Values) == 0 {
			delete(next, e.Key())
		} else {
			next[e.Key()] = entry
		}
	}
	if validateOnly {
		return nil, nil, nil
	}
	f := quotasFile{Version: fileVersion, Entries: []QuotaEntry{}}
	for _, k := range slices.Sorted(maps.Keys(next)) {
		f.Entries = append(f.Entries, next[k])
	}
	data, err := encodeJSON(f)
	if err != nil {
		return nil, nil, fmt.Errorf("auth: saving client quotas: %w", err)
	}
	return &next, data, nil
}

// Any reports whether any quota is set: without one, a request has
// nothing to count.
func (q *Quotas) Any() bool { return len(q.current()) > 0 }

// current is the quotas now (none for a zero Quotas).
func (q *Quotas) current() map[string]QuotaEntry {
	if q.state == nil {
		return nil
	}
	if p := q.state.Load(); p != nil {
		return *p
	}
	return nil
}

// Entries are every entity's quotas.
func (q *Quotas) Entries() []QuotaEntry {
	m := q.current()
	out := make([]QuotaEntry, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, m[k])
	}
	return out
}

func strp(s string) *string { return &s }

// Resolve returns the quota key that applies to a user's client (and the
// entity it comes from, for sharing a rate among the clients it covers),
// in Kafka's order of precedence: user and client, user and default
// client, user, default user and client, default user and default client,
// default user, client, default client. 0 is none.
func (q *Quotas) Resolve(user, clientID, key string) (float64, string) {
	m := q.current()
	if len(m) == 0 {
		return 0, ""
	}
	for _, e := range []Entity{
		{EntityUser: strp(user), EntityClientID: strp(clientID)},
		{EntityUser: strp(user), EntityClientID: nil},
		{EntityUser: strp(user)},
		{EntityUser: nil, EntityClientID: strp(clientID)},
		{EntityUser: nil, EntityClientID: nil},
		{EntityUser: nil},
		{EntityClientID: strp(clientID)},
		{EntityClientID: nil},
	} {
		k := e.Key()
		if v, ok := m[k].Values[key]; ok {
			return v, k
		}
	}
	return 0, ""
}

// ConnectionRate is the connection_creation_rate of an IP: its own, or
// the default IP's; 0 is none.
func (q *Quotas) ConnectionRate(ip string) float64 {
	m := q.current()
	if len(m) == 0 {
		return 0
	}
	if v, ok := m[Entity{EntityIP: strp(ip)}.Key()].Values[ConnectionCreationRate]; ok {
		return v
	}
	return m[Entity{EntityIP: nil}.Key()].Values[ConnectionCreationRate]
}
