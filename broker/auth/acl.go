package auth

import (
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/internal/docstore"
	"github.com/seglog/seglog/vfs"
)

// ClusterName is the one name of the CLUSTER resource, as Kafka names it.
const ClusterName = "kafka-cluster"

// Wildcard is the resource name, principal name and host that match any.
const Wildcard = "*"

// ACL is one access control entry bound to a resource pattern, Kafka's
// AclBinding: Principal may (Allow) or may not (Deny) do Operation on the
// resources Pattern and Name select, from Host.
type ACL struct {
	ResourceType kmsg.ACLResourceType        `json:"resource_type"`
	Name         string                      `json:"name"`
	Pattern      kmsg.ACLResourcePatternType `json:"pattern"`
	Principal    string                      `json:"principal"`
	Host         string                      `json:"host"`
	Operation    kmsg.ACLOperation           `json:"operation"`
	Permission   kmsg.ACLPermissionType      `json:"permission"`
}

func (a ACL) String() string {
	return fmt.Sprintf("(principal=%s, host=%s, operation=%s, permissionType=%s) on %s:%s:%s", a.Principal, a.Host,
		a.Operation, a.Permission, a.ResourceType, a.Pattern, a.Name)
}

// ErrInvalidACL is the cause of an ACL CreateACLs refuses.
var ErrInvalidACL = seglog.NewKafkaError("auth: invalid ACL", 42)

// Check returns why a cannot be created, or nil: what Kafka refuses with
// INVALID_REQUEST.
func (a ACL) Check() error {
	typ, name, ok := strings.Cut(a.Principal, ":")
	switch {
	case !slices.Contains(resourceTypes, a.ResourceType):
		return fmt.Errorf("%w: resource type %s", ErrInvalidACL, a.ResourceType)
	case a.Pattern != kmsg.ACLResourcePatternTypeLiteral && a.Pattern != kmsg.ACLResourcePatternTypePrefixed:
		return fmt.Errorf("%w: pattern type %s: LITERAL or PREFIXED", ErrInvalidACL, a.Pattern)
	case a.Name == "":
		return fmt.Errorf("%w: an empty resource name", ErrInvalidACL)
	case a.ResourceType == kmsg.ACLResourceTypeCluster && a.Name != ClusterName:
		return fmt.Errorf("%w: the only valid name for the CLUSTER resource is %s", ErrInvalidACL, ClusterName)
	case a.Pattern == kmsg.ACLResourcePatternTypePrefixed && a.Name == Wildcard:
		return fmt.Errorf("%w: a PREFIXED pattern of %q: use a LITERAL one", ErrInvalidACL, Wildcard)
	case !ok || typ == "" || name == "":
		return fmt.Errorf("%w: principal %q is not Type:name (User:alice)", ErrInvalidACL, a.Principal)
	case a.Host == "":
		return fmt.Errorf("%w: an empty host (use %q for any)", ErrInvalidACL, Wildcard)
	case a.Operation <= kmsg.ACLOperationAny || a.Operation > kmsg.ACLOperationDescribeTokens:
		return fmt.Errorf("%w: operation %s", ErrInvalidACL, a.Operation)
	case a.Permission != kmsg.ACLPermissionTypeAllow && a.Permission != kmsg.ACLPermissionTypeDeny:
		return fmt.Errorf("%w: permission %s: ALLOW or DENY", ErrInvalidACL, a.Permission)
	}
	return nil
}

var resourceTypes = []kmsg.ACLResourceType{kmsg.ACLResourceTypeTopic, kmsg.ACLResourceTypeGroup, kmsg.ACLResourceTypeCluster,
	kmsg.ACLResourceTypeTransactionalId, kmsg.ACLResourceTypeDelegationToken, kmsg.ACLResourceTypeUser}

// Filter selects ACLs, as DescribeAcls and DeleteAcls carry it: ANY (and
// a nil name, principal or host) matches every value; the pattern MATCH
// selects the ACLs that apply to the resource Name names (literal, the
// wildcard, and prefixes of it).
type Filter struct {
	ResourceType    kmsg.ACLResourceType
	Name            *string
	Pattern         kmsg.ACLResourcePatternType
	Principal, Host *string
	Operation       kmsg.ACLOperation
	Permission      kmsg.ACLPermissionType
}

// Matches reports whether the filter selects a.
func (f Filter) Matches(a ACL) bool {
	if f.ResourceType != kmsg.ACLResourceTypeAny && f.ResourceType != a.ResourceType ||
		f.Principal != nil && *f.Principal != a.Principal || f.Host != nil && *f.Host != a.Host ||
		f.Operation != kmsg.ACLOperationAny && f.Operation != a.Operation ||
		f.Permission != kmsg.ACLPermissionTypeAny && f.Permission != a.Permission {
		return false
	}
	switch f.Pattern {
	case kmsg.ACLResourcePatternTypeAny:
		return f.Name == nil || *f.Name == a.Name
	case kmsg.ACLResourcePatternTypeMatch:
		return f.Name == nil || appliesTo(a, *f.Name)
	default:
		return f.Pattern == a.Pattern && (f.Name == nil || *f.Name == a.Name)
	}
}

// appliesTo reports whether a's pattern selects the resource name.
func appliesTo(a ACL, name string) bool {
	if a.Pattern == kmsg.ACLResourcePatternTypePrefixed {
		return strings.HasPrefix(name, a.Name)
	}
	return a.Name == name || a.Name == Wildcard
}

type aclFile struct {
	Version int   `json:"version"`
	ACLs    []ACL `json:"acls"`
}

func (f *aclFile) version() int { return f.Version }

// ACLs are the ACLs of a data directory (or, in a cluster, of every
// broker), safe for concurrent use; every change is stored before it
// returns.
type ACLs struct {
	state *docstore.Doc[aclState]
}

// aclState is the ACLs at one time, never changed once published.
type aclState struct {
	acls []ACL
	// index has the ACLs by resource type: literal ones by name, the
	// others (the wildcard, prefixes) in a list — what Authorize looks
	// through, built with each state.
	index map[kmsg.ACLResourceType]*typeIndex
}

type typeIndex struct {
	literal map[string][]ACL
	other   []ACL // the literal wildcard, and prefixed patterns
}

// newACLState indexes acls.
func newACLState(acls []ACL) *aclState {
	s := &aclState{acls: acls, index: map[kmsg.ACLResourceType]*typeIndex{}}
	for _, a := range acls {
		ti := s.index[a.ResourceType]
		if ti == nil {
			ti = &typeIndex{literal: map[string][]ACL{}}
			s.index[a.ResourceType] = ti
		}
		if a.Pattern == kmsg.ACLResourcePatternTypeLiteral && a.Name != Wildcard {
			ti.literal[a.Name] = append(ti.literal[a.Name], a)
		} else {
			ti.other = append(ti.other, a)
		}
	}
	return s
}

// OpenACLs reads the ACLs at path; a missing file is none.
func OpenACLs(fsys vfs.FS, path string) (*ACLs, error) { return NewACLs(FileStore(fsys, path)) }

// NewACLs reads the ACLs from store.
func NewACLs(store Store) (*ACLs, error) {
	d, err := docstore.Open(store, decodeACLs)
	if err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	return &ACLs{state: d}, nil
}

func decodeACLs(data []byte) (*aclState, error) {
	var f aclFile
	if ok, err := decodeJSON(data, &f); !ok {
		return newACLState(nil), err
	}
	for i, a := range f.ACLs {
		if err := a.Check(); err != nil {
			return nil, fmt.Errorf("ACL %d: %w", i, err)
		}
	}
	return newACLState(f.ACLs), nil
}

// Refresh loads the ACLs again from their store, if another broker
// changed them.
func (s *ACLs) Refresh() (bool, error) { return s.state.Refresh() }

// List returns the ACLs the filter selects.
func (s *ACLs) List(f Filter) []ACL {
	var out []ACL
	for _, a := range s.state.Load().acls {
		if f.Matches(a) {
			out = append(out, a)
		}
	}
	return out
}

// Create adds the ACLs that pass their check (one already there is not
// added twice), durably, and returns each one's error.
func (s *ACLs) Create(acls []ACL) ([]error, error) {
	errs := make([]error, len(acls))
	return errs, s.state.Update(func(cur *aclState) (*aclState, []byte, error) {
		next := slices.Clone(cur.acls)
		for i, a := range acls {
			if errs[i] = a.Check(); errs[i] == nil && !slices.Contains(next, a) {
				next = append(next, a)
			}
		}
		return s.save(next)
	})
}

// Delete removes the ACLs each filter selects, durably, and returns them
// by filter.
func (s *ACLs) Delete(filters []Filter) ([][]ACL, error) {
	out := make([][]ACL, len(filters))
	return out, s.state.Update(func(cur *aclState) (*aclState, []byte, error) {
		clear(out)
		var next []ACL
		for _, a := range cur.acls {
			keep := true
			for i, f := range filters {
				if f.Matches(a) {
					out[i] = append(out[i], a)
					keep = false
				}
			}
			if keep {
				next = append(next, a)
			}
		}
		return s.save(next)
	})
}

// save returns the state of the next ACLs and their document.
func (s *ACLs) save(next []ACL) (*aclState, []byte, error) {
	if next == nil {
		next = []ACL{}
	}
	data, err := encodeJSON(aclFile{Version: fileVersion, ACLs: next})
	if err != nil {
		return nil, nil, fmt.Errorf("auth: saving ACLs: %w", err)
	}
	return newACLState(next), data, nil
}

// Authorizer decides requests by the ACLs, as Kafka's StandardAuthorizer
// does: a super user may do anything; a DENY that matches wins over any
// ALLOW; an operation is allowed by an ALLOW of it or of ALL (DESCRIBE
// also by READ, WRITE, DELETE or ALTER; DESCRIBE_CONFIGS by
// ALTER_CONFIGS); a resource no ACL applies to is allowed only with
// AllowIfNoACL.
type Authorizer struct {
	ACLs         *ACLs
	SuperUsers   []string // principals, User:name
	AllowIfNoACL bool     // allow.everyone.if.no.acl.found
}

// implied are the operations whose ALLOW also allows the key.
var implied = map[kmsg.ACLOperation][]kmsg.ACLOperation{
	kmsg.ACLOperationDescribe:        {kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationDelete, kmsg.ACLOperationAlter},
	kmsg.ACLOperationDescribeConfigs: {kmsg.ACLOperationAlterConfigs},
}

// Authorize reports whether principal, connected from host, may do op on
// the resource.
func (z *Authorizer) Authorize(principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	if slices.Contains(z.SuperUsers, principal) {
		return true
	}
	ti := z.ACLs.state.Load().index[rt]
	if ti == nil {
		return z.AllowIfNoACL
	}
	applies, allowed := false, false
	for _, list := range [2][]ACL{ti.literal[name], ti.other} {
		for _, a := range list {
			if !appliesTo(a, name) {
				continue
			}
			applies = true
			if a.Principal != principal && a.Principal != "User:"+Wildcard || a.Host != host && a.Host != Wildcard {
				continue
			}
			switch {
			case a.Permission == kmsg.ACLPermissionTypeDeny && (a.Operation == op || a.Operation == kmsg.ACLOperationAll):
				return false
			case a.Permission == kmsg.ACLPermissionTypeAllow &&
				(a.Operation == op || a.Operation == kmsg.ACLOperationAll || slices.Contains(implied[op], a.Operation)):
				allowed = true
			}
		}
	}
	return allowed || !applies && z.AllowIfNoACL
}

// AuthorizeAny reports whether principal may do op on some resource of
// type rt: an ALLOW of it (or ALL, or an operation that implies it) on any
// pattern of that type, and no DENY of it on every resource of the type
// (a LITERAL "*"), as Kafka's authorizeByResourceType decides; with no
// ACL of the type at all, AllowIfNoACL decides.
func (z *Authorizer) AuthorizeAny(principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType) bool {
	if slices.Contains(z.SuperUsers, principal) {
		return true
	}
	typed, allowed := false, false
	for _, a := range z.ACLs.state.Load().acls {
		typed = typed || a.ResourceType == rt
		if a.ResourceType != rt || a.Principal != principal && a.Principal != "User:"+Wildcard || a.Host != host && a.Host != Wildcard {
			continue
		}
		switch {
		case a.Permission == kmsg.ACLPermissionTypeDeny && a.Name == Wildcard && a.Pattern == kmsg.ACLResourcePatternTypeLiteral &&
			(a.Operation == op || a.Operation == kmsg.ACLOperationAll):
			return false
		case a.Permission == kmsg.ACLPermissionTypeAllow &&
			(a.Operation == op || a.Operation == kmsg.ACLOperationAll || slices.Contains(implied[op], a.Operation)):
			allowed = true
		}
	}
	return allowed || !typed && z.AllowIfNoACL
}
