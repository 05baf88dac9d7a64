package auth

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func allow(rt kmsg.ACLResourceType, name string, pt kmsg.ACLResourcePatternType, principal string, op kmsg.ACLOperation) ACL {
	return ACL{ResourceType: rt, Name: name, Pattern: pt, Principal: principal, Host: Wildcard, Operation: op,
		Permission: kmsg.ACLPermissionTypeAllow}
}

func deny(a ACL) ACL {
	a.Permission = kmsg.ACLPermissionTypeDeny
	return a
}

const (
	topic    = kmsg.ACLResourceTypeTopic
	grp      = kmsg.ACLResourceTypeGroup
	cluster  = kmsg.ACLResourceTypeCluster
	literal  = kmsg.ACLResourcePatternTypeLiteral
	prefixed = kmsg.ACLResourcePatternTypePrefixed
)

// TestAuthorize: Kafka's rules, case by case.
func TestAuthorize(t *testing.T) {
	type check struct {
		principal, host string
		op              kmsg.ACLOperation
		rt              kmsg.ACLResourceType
		name            string
		want            bool
	}
	cases := []struct {
		name   string
		acls   []ACL
		super  []string
		open   bool
		checks []check
	}{
		{name: "no ACLs: closed", checks: []check{{"User:bob", "1.2.3.4", kmsg.ACLOperationRead, topic, "t", false}}},
		{name: "no ACLs, allow.everyone.if.no.acl.found", open: true,
			checks: []check{{"User:bob", "1.2.3.4", kmsg.ACLOperationWrite, topic, "t", true}}},
		{name: "an ACL on the resource closes it to the others, even when open", open: true,
			acls: []ACL{allow(topic, "t", literal, "User:alice", kmsg.ACLOperationRead)},
			checks: []check{
				{"User:alice", "h", kmsg.ACLOperationRead, topic, "t", true},
				{"User:bob", "h", kmsg.ACLOperationRead, topic, "t", false},
				{"User:bob", "h", kmsg.ACLOperationRead, topic, "u", true},
			}},
		{name: "super users", super: []string{"User:root"},
			acls:   []ACL{deny(allow(topic, "t", literal, "User:root", kmsg.ACLOperationAll))},
			checks: []check{{"User:root", "h", kmsg.ACLOperationDelete, topic, "t", true}}},
		{name: "implied operations",
			acls: []ACL{allow(topic, "t", literal, "User:bob", kmsg.ACLOperationWrite),
				allow(topic, "c", literal, "User:bob", kmsg.ACLOperationAlterConfigs)},
			checks: []check{
				{"User:bob", "h", kmsg.ACLOperationDescribe, topic, "t", true},
				{"User:bob", "h", kmsg.ACLOperationRead, topic, "t", false},
				{"User:bob", "h", kmsg.ACLOperationDescribeConfigs, topic, "c", true},
				{"User:bob", "h", kmsg.ACLOperationDescribe, topic, "c", false},
			}},
		{name: "ALL, wildcards and prefixes",
			acls: []ACL{allow(topic, "*", literal, "User:bob", kmsg.ACLOperationRead),
				allow(grp, "team-", prefixed, "User:*", kmsg.ACLOperationAll)},
			checks: []check{
				{"User:bob", "h", kmsg.ACLOperationRead, topic, "anything", true},
				{"User:carol", "h", kmsg.ACLOperationRead, topic, "anything", false},
				{"User:carol", "h", kmsg.ACLOperationDelete, grp, "team-a", true},
				{"User:carol", "h", kmsg.ACLOperationDelete, grp, "tea", false},
				{"User:carol", "h", kmsg.ACLOperationRead, topic, "team-a", false},
			}},
		{name: "DENY wins, but only its own operation",
			acls: []ACL{allow(topic, "t", prefixed, "User:bob", kmsg.ACLOperationAll),
				deny(allow(topic, "t1", literal, "User:bob", kmsg.ACLOperationWrite))},
			checks: []check{
				{"User:bob", "h", kmsg.ACLOperationWrite, topic, "t1", false},
				{"User:bob", "h", kmsg.ACLOperationRead, topic, "t1", true},
				{"User:bob", "h", kmsg.ACLOperationDescribe, topic, "t1", true},
				{"User:bob", "h", kmsg.ACLOperationWrite, topic, "t2", true},
			}},
		{name: "hosts",
			acls: []ACL{{ResourceType: cluster, Name: ClusterName, Pattern: literal, Principal: "User:bob", Host: "10.0.0.1",
				Operation: kmsg.ACLOperationAlter, Permission: kmsg.ACLPermissionTypeAllow}},
			checks: []check{
				{"User:bob", "10.0.0.1", kmsg.ACLOperationAlter, cluster, ClusterName, true},
				{"User:bob", "10.0.0.2", kmsg.ACLOperationAlter, cluster, ClusterName, false},
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := OpenACLs(nil, filepath.Join(t.TempDir(), ACLFile))
			require.NoError(t, err)
			errs, err := s.Create(c.acls)
			require.NoError(t, err)
			for _, e := range errs {
				require.NoError(t, e)
			}
			z := &Authorizer{ACLs: s, SuperUsers: c.super, AllowIfNoACL: c.open}
			for _, ch := range c.checks {
				require.Equal(t, ch.want, z.Authorize(ch.principal, ch.host, ch.op, ch.rt, ch.name), "%+v", ch)
			}
		})
	}
}

// TestAuthorizeAny: Kafka's authorizeByResourceType (an idempotent
// producer's Write on some topic).
func TestAuthorizeAny(t *testing.T) {
	s, err := OpenACLs(nil, filepath.Join(t.TempDir(), ACLFile))
	require.NoError(t, err)
	z := &Authorizer{ACLs: s}
	require.False(t, z.AuthorizeAny("User:bob", "h", kmsg.ACLOperationWrite, topic))
	_, err = s.Create([]ACL{allow(topic, "p-", prefixed, "User:bob", kmsg.ACLOperationWrite)})
	require.NoError(t, err)
	require.True(t, z.AuthorizeAny("User:bob", "h", kmsg.ACLOperationWrite, topic))
	require.False(t, z.AuthorizeAny("User:bob", "h", kmsg.ACLOperationRead, topic))
	require.False(t, z.AuthorizeAny("User:eve", "h", kmsg.ACLOperationWrite, topic))
	_, err = s.Create([]ACL{deny(allow(topic, "*", literal, "User:bob", kmsg.ACLOperationAll))})
	require.NoError(t, err)
	require.False(t, z.AuthorizeAny("User:bob", "h", kmsg.ACLOperationWrite, topic), "denied on every topic")
}

// TestACLStore: checks, filters (ANY, MATCH, LITERAL, PREFIXED), deletion,
// and the file surviving a reopen with owner-only permissions.
func TestACLStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), ACLFile)
	s, err := OpenACLs(nil, path)
	require.NoError(t, err)
	good := []ACL{allow(topic, "orders", literal, "User:bob", kmsg.ACLOperationRead),
		allow(topic, "ord", prefixed, "User:bob", kmsg.ACLOperationWrite),
		allow(topic, "*", literal, "User:carol", kmsg.ACLOperationDescribe),
		allow(grp, "orders", literal, "User:bob", kmsg.ACLOperationRead)}
	bad := []ACL{
		allow(kmsg.ACLResourceTypeAny, "x", literal, "User:bob", kmsg.ACLOperationRead),
		allow(topic, "x", kmsg.ACLResourcePatternTypeMatch, "User:bob", kmsg.ACLOperationRead),
		allow(topic, "", literal, "User:bob", kmsg.ACLOperationRead),
		allow(cluster, "other", literal, "User:bob", kmsg.ACLOperationAlter),
		allow(topic, "x", literal, "bob", kmsg.ACLOperationRead),
		allow(topic, "x", literal, "User:bob", kmsg.ACLOperationAny),
		allow(topic, "*", prefixed, "User:bob", kmsg.ACLOperationRead),
	}
	errs, err := s.Create(append(append([]ACL{}, good...), append(bad, good[0])...))
	require.NoError(t, err)
	for i, e := range errs {
		if i >= len(good) && i < len(good)+len(bad) {
			require.ErrorIs(t, e, ErrInvalidACL, "%v", bad[i-len(good)])
		} else {
			require.NoError(t, e)
		}
	}
	all := Filter{ResourceType: kmsg.ACLResourceTypeAny, Pattern: kmsg.ACLResourcePatternTypeAny,
		Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}
	require.Len(t, s.List(all), 4, "the duplicate is stored once")
	name := func(n string) *string { return &n }
	match := all
	match.ResourceType, match.Name, match.Pattern = topic, name("orders"), kmsg.ACLResourcePatternTypeMatch
	require.Len(t, s.List(match), 3, "literal, prefix and wildcard apply to orders")
	lit := match
	lit.Pattern = literal
	require.Len(t, s.List(lit), 1)
	pre := all
	pre.Pattern, pre.Principal = prefixed, name("User:bob")
	require.Len(t, s.List(pre), 1)

	deleted, err := s.Delete([]Filter{pre, {ResourceType: grp, Pattern: kmsg.ACLResourcePatternTypeAny,
		Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny}})
	require.NoError(t, err)
	require.Len(t, deleted[0], 1)
	require.Len(t, deleted[1], 1)
	s, err = OpenACLs(nil, path)
	require.NoError(t, err)
	require.Len(t, s.List(all), 2)
	info, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())

	require.NoError(t, os.WriteFile(path, []byte(`{"version":1,"acls":[{"resource_type":"TOPIC","name":"","pattern":"LITERAL"}]}`), 0o600))
	_, err = OpenACLs(nil, path)
	require.ErrorIs(t, err, ErrInvalidACL, "a damaged file is an error, never fewer ACLs")
	require.ErrorContains(t, err, path)
}
