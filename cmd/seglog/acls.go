package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/broker/auth"
)

type aclsFlags struct {
	dataDir                string
	client                 clientFlags
	list, add, remove      bool
	allow, deny            []string
	allowHosts, denyHosts  []string
	operations             []string
	topics, groups, txnIDs []string
	cluster                bool
	pattern                string
	principal              string
}

func newACLsCmd() *cobra.Command {
	var f aclsFlags
	cmd := &cobra.Command{
		Use:   "acls (--data-dir D | --bootstrap-server H:P) (--list | --add | --remove) [resources] [principals] [--operation OP]...",
		Short: "List, add and remove ACLs, like kafka-acls.sh",
		Long: `acls manages the ACLs a broker with authorizer.class.name set checks every
request against (Kafka's model: a principal may, or may not, do an operation on
topics, groups, the cluster or transactional ids, from a host). They are stored in
the data directory's seglog-acls.

  --add      --allow-principal User:bob | --deny-principal User:eve (repeatable)
             [--allow-host H | --deny-host H] (default *: any)
             --operation Read|Write|Create|Delete|Alter|Describe|DescribeConfigs|
                         AlterConfigs|IdempotentWrite|ClusterAction|All (repeatable)
             --topic T | --group G | --transactional-id X | --cluster (repeatable)
             [--resource-pattern-type literal|prefixed]
  --list     the ACLs of the resources given (all without one), of --principal P
             (--resource-pattern-type any (default), match, literal or prefixed)
  --remove   the ACLs the same selectors match (every operation without
             --operation, both permissions without a principal)

With --data-dir it changes the directory itself, so a broker must not be serving
it (it takes the data directory's lock). With --bootstrap-server it asks a
running broker (CreateAcls, DescribeAcls, DeleteAcls: Alter or Describe on the
cluster), with --command-config for the client's own security settings.

In a cluster (seglog.etcd.endpoints) the ACLs are the cluster's, kept in etcd:
change them with --bootstrap-server, through any broker, and every broker
enforces the change. A data directory's file only seeds a cluster that has none
yet.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			n := 0
			for _, a := range []bool{f.list, f.add, f.remove} {
				if a {
					n++
				}
			}
			switch {
			case n != 1:
				return errors.New("give one of --list, --add, --remove")
			case (f.dataDir == "") == (f.client.bootstrap == ""):
				return errors.New("give --data-dir or --bootstrap-server")
			}
			if f.add {
				acls, err := f.bindings()
				if err != nil {
					return err
				}
				return aclsAdd(cmd, f, acls)
			}
			filters, err := f.filters()
			if err != nil {
				return err
			}
			return aclsListOrRemove(cmd, f, filters)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.dataDir, "data-dir", "", "the data directory (no broker serving it)")
	f.client.add(cmd)
	fl.BoolVar(&f.list, "list", false, "list ACLs")
	fl.BoolVar(&f.add, "add", false, "add ACLs")
	fl.BoolVar(&f.remove, "remove", false, "remove ACLs")
	fl.StringArrayVar(&f.allow, "allow-principal", nil, "a principal the ACLs allow (User:name)")
	fl.StringArrayVar(&f.deny, "deny-principal", nil, "a principal the ACLs deny (User:name)")
	fl.StringArrayVar(&f.allowHosts, "allow-host", nil, "a host the allowing ACLs are for (default *)")
	fl.StringArrayVar(&f.denyHosts, "deny-host", nil, "a host the denying ACLs are for (default *)")
	fl.StringArrayVar(&f.operations, "operation", nil, "an operation (Read, Write, Create, Delete, Alter, Describe, DescribeConfigs, AlterConfigs, IdempotentWrite, ClusterAction, All)")
	fl.StringArrayVar(&f.topics, "topic", nil, "a topic (* for every topic)")
	fl.StringArrayVar(&f.groups, "group", nil, "a consumer group (* for every group)")
	fl.StringArrayVar(&f.txnIDs, "transactional-id", nil, "a transactional id (* for every one)")
	fl.BoolVar(&f.cluster, "cluster", false, "the cluster")
	fl.StringVar(&f.pattern, "resource-pattern-type", "", "literal (default for --add), prefixed; for --list and --remove also any (default) and match")
	fl.StringVar(&f.principal, "principal", "", "with --list: only this principal's ACLs")
	// kafka-acls.sh's --force answers its prompts; seglog acls never
	// prompts, so scripts written for it run unchanged.
	var force bool
	fl.BoolVar(&force, "force", false, "accepted as kafka-acls.sh's (seglog acls asks nothing: --remove removes at once)")
	return cmd
}

type resource struct {
	typ  kmsg.ACLResourceType
	name string
}

func (f aclsFlags) resources() []resource {
	var out []resource
	for _, t := range f.topics {
		out = append(out, resource{kmsg.ACLResourceTypeTopic, t})
	}
	for _, g := range f.groups {
		out = append(out, resource{kmsg.ACLResourceTypeGroup, g})
	}
	for _, x := range f.txnIDs {
		out = append(out, resource{kmsg.ACLResourceTypeTransactionalId, x})
	}
	if f.cluster {
		out = append(out, resource{kmsg.ACLResourceTypeCluster, auth.ClusterName})
	}
	return out
}

func parseOperation(s string) (kmsg.ACLOperation, error) {
	op, err := kmsg.ParseACLOperation(s) // Read, DescribeConfigs, IDEMPOTENT_WRITE: case and _ do not matter
	if err != nil || op == kmsg.ACLOperationUnknown || op == kmsg.ACLOperationAny {
		return 0, fmt.Errorf("--operation %s: not an operation", s)
	}
	return op, nil
}

func (f aclsFlags) patternType(def kmsg.ACLResourcePatternType) (kmsg.ACLResourcePatternType, error) {
	if f.pattern == "" {
		return def, nil
	}
	pt, err := kmsg.ParseACLResourcePatternType(f.pattern)
	if err != nil || pt == kmsg.ACLResourcePatternTypeUnknown {
		return 0, fmt.Errorf("--resource-pattern-type %s: literal, prefixed, any or match", f.pattern)
	}
	return pt, nil
}

// bindings are the ACLs --add creates: every principal, host, operation
// and resource given.
func (f aclsFlags) bindings() ([]auth.ACL, error) {
	res := f.resources()
	pt, err := f.patternType(kmsg.ACLResourcePatternTypeLiteral)
	switch {
	case err != nil:
		return nil, err
	case len(res) == 0:
		return nil, errors.New("--add needs a resource: --topic, --group, --transactional-id or --cluster")
	case len(f.allow)+len(f.deny) == 0:
		return nil, errors.New("--add needs --allow-principal or --deny-principal")
	case len(f.operations) == 0:
		return nil, errors.New("--add needs --operation")
	}
	var acls []auth.ACL
	for _, side := range []struct {
		principals, hosts []string
		perm              kmsg.ACLPermissionType
	}{{f.allow, f.allowHosts, kmsg.ACLPermissionTypeAllow}, {f.deny, f.denyHosts, kmsg.ACLPermissionTypeDeny}} {
		hosts := side.hosts
		if len(hosts) == 0 {
			hosts = []string{auth.Wildcard}
		}
		for _, p := range side.principals {
			for _, h := range hosts {
				for _, o := range f.operations {
					op, err := parseOperation(o)
					if err != nil {
						return nil, err
					}
					for _, r := range res {
						a := auth.ACL{ResourceType: r.typ, Name: r.name, Pattern: pt, Principal: p, Host: h, Operation: op, Permission: side.perm}
						if err := a.Check(); err != nil {
							return nil, err
						}
						acls = append(acls, a)
					}
				}
			}
		}
	}
	return acls, nil
}

// filters are what --list and --remove select: one per resource (or any
// resource), principal and operation given.
func (f aclsFlags) filters() ([]auth.Filter, error) {
	pt, err := f.patternType(kmsg.ACLResourcePatternTypeAny)
	if err != nil {
		return nil, err
	}
	res := f.resources()
	if len(res) == 0 {
		res = []resource{{typ: kmsg.ACLResourceTypeAny}}
	}
	type who struct {
		principal *string
		perm      kmsg.ACLPermissionType
	}
	var whos []who
	for _, p := range f.allow {
		whos = append(whos, who{&p, kmsg.ACLPermissionTypeAllow})
	}
	for _, p := range f.deny {
		whos = append(whos, who{&p, kmsg.ACLPermissionTypeDeny})
	}
	if f.principal != "" {
		whos = append(whos, who{&f.principal, kmsg.ACLPermissionTypeAny})
	}
	if len(whos) == 0 {
		whos = []who{{nil, kmsg.ACLPermissionTypeAny}}
	}
	ops := []kmsg.ACLOperation{kmsg.ACLOperationAny}
	if len(f.operations) > 0 {
		ops = ops[:0]
		for _, o := range f.operations {
			op, err := parseOperation(o)
			if err != nil {
				return nil, err
			}
			ops = append(ops, op)
		}
	}
	var out []auth.Filter
	for _, r := range res {
		for _, w := range whos {
			for _, op := range ops {
				flt := auth.Filter{ResourceType: r.typ, Pattern: pt, Principal: w.principal, Operation: op, Permission: w.perm}
				if r.typ != kmsg.ACLResourceTypeAny {
					name := r.name
					flt.Name = &name
				}
				out = append(out, flt)
			}
		}
	}
	return out, nil
}

func aclsAdd(cmd *cobra.Command, f aclsFlags, acls []auth.ACL) error {
	if f.client.bootstrap != "" {
		c, err := f.client.dial()
		if err != nil {
			return err
		}
		defer c.close()
		cl, ctx := c.cl, c.ctx
		req := kmsg.NewPtrCreateACLsRequest()
		for _, a := range acls {
			req.Creations = append(req.Creations, kmsg.CreateACLsRequestCreation{ResourceType: a.ResourceType, ResourceName: a.Name,
				ResourcePatternType: a.Pattern, Principal: a.Principal, Host: a.Host, Operation: a.Operation, PermissionType: a.Permission})
		}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		for i, r := range resp.Results {
			if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
				return fmt.Errorf("%s: %w%s", acls[i], err, message(r.ErrorMessage))
			}
		}
	} else {
		s, unlock, err := openSecurityFile(cmd, f.dataDir, auth.ACLFile, false, true, auth.OpenACLs)
		if err != nil {
			return err
		}
		defer unlock()
		errs, err := s.Create(acls)
		if err != nil {
			return err
		}
		for i, e := range errs {
			if e != nil {
				return fmt.Errorf("%s: %w", acls[i], e)
			}
		}
	}
	fmt.Fprintln(cmd.OutOrStdout(), "Adding ACLs:")
	printACLs(cmd.OutOrStdout(), acls)
	return nil
}

func message(m *string) string {
	if m == nil || *m == "" {
		return ""
	}
	return ": " + *m
}

func aclsListOrRemove(cmd *cobra.Command, f aclsFlags, filters []auth.Filter) error {
	var found []auth.ACL
	if f.client.bootstrap != "" {
		var err error
		if found, err = aclsOnline(f, filters); err != nil {
			return err
		}
	} else {
		s, unlock, err := openSecurityFile(cmd, f.dataDir, auth.ACLFile, f.list, !f.list, auth.OpenACLs)
		if err != nil {
			return err
		}
		defer unlock()
		if f.list {
			seen := map[auth.ACL]bool{}
			for _, flt := range filters {
				for _, a := range s.List(flt) {
					if !seen[a] {
						seen[a] = true
						found = append(found, a)
					}
				}
			}
		} else {
			deleted, err := s.Delete(filters)
			if err != nil {
				return err
			}
			for _, d := range deleted {
				found = append(found, d...)
			}
		}
	}
	if f.remove {
		fmt.Fprintln(cmd.OutOrStdout(), "Removed ACLs:")
	}
	printACLs(cmd.OutOrStdout(), found)
	return nil
}

// aclsOnline lists (DescribeAcls) or removes (DeleteAcls) through a
// running broker.
func aclsOnline(f aclsFlags, filters []auth.Filter) ([]auth.ACL, error) {
	c, err := f.client.dial()
	if err != nil {
		return nil, err
	}
	defer c.close()
	cl, ctx := c.cl, c.ctx
	var found []auth.ACL
	if f.list {
		seen := map[auth.ACL]bool{}
		for _, flt := range filters {
			req := kmsg.NewPtrDescribeACLsRequest()
			req.ResourceType, req.ResourceName, req.ResourcePatternType = flt.ResourceType, flt.Name, flt.Pattern
			req.Principal, req.Host, req.Operation, req.PermissionType = flt.Principal, flt.Host, flt.Operation, flt.Permission
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				return nil, err
			}
			if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
				return nil, fmt.Errorf("%w%s", err, message(resp.ErrorMessage))
			}
			for _, r := range resp.Resources {
				for _, a := range r.ACLs {
					acl := auth.ACL{ResourceType: r.ResourceType, Name: r.ResourceName, Pattern: r.ResourcePatternType,
						Principal: a.Principal, Host: a.Host, Operation: a.Operation, Permission: a.PermissionType}
					if !seen[acl] {
						seen[acl] = true
						found = append(found, acl)
					}
				}
			}
		}
		return found, nil
	}
	req := kmsg.NewPtrDeleteACLsRequest()
	for _, flt := range filters {
		req.Filters = append(req.Filters, kmsg.DeleteACLsRequestFilter{ResourceType: flt.ResourceType, ResourceName: flt.Name,
			ResourcePatternType: flt.Pattern, Principal: flt.Principal, Host: flt.Host, Operation: flt.Operation, PermissionType: flt.Permission})
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	for _, r := range resp.Results {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			return nil, fmt.Errorf("%w%s", err, message(r.ErrorMessage))
		}
		for _, a := range r.MatchingACLs {
			found = append(found, auth.ACL{ResourceType: a.ResourceType, Name: a.ResourceName, Pattern: a.ResourcePatternType,
				Principal: a.Principal, Host: a.Host, Operation: a.Operation, Permission: a.PermissionType})
		}
	}
	return found, nil
}

// printACLs prints ACLs by resource pattern, as kafka-acls.sh does.
func printACLs(w io.Writer, acls []auth.ACL) {
	type pattern struct {
		typ  kmsg.ACLResourceType
		name string
		pt   kmsg.ACLResourcePatternType
	}
	var order []pattern
	by := map[pattern][]auth.ACL{}
	for _, a := range acls {
		p := pattern{a.ResourceType, a.Name, a.Pattern}
		if by[p] == nil {
			order = append(order, p)
		}
		by[p] = append(by[p], a)
	}
	for _, p := range order {
		fmt.Fprintf(w, "Current ACLs for resource `ResourcePattern(resourceType=%s, name=%s, patternType=%s)`: \n", p.typ, p.name, p.pt)
		for _, a := range by[p] {
			fmt.Fprintf(w, " \t(principal=%s, host=%s, operation=%s, permissionType=%s)\n", a.Principal, a.Host, a.Operation, a.Permission)
		}
		fmt.Fprintln(w)
	}
}
