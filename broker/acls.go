package broker

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/broker/auth"
)

// The ACL APIs, on the data directory's seglog-acls: CreateAcls and
// DeleteAcls need Alter on the cluster, DescribeAcls Describe.

func init() {
	register(
		api{key: 29, min: 0, max: 3, handle: on(guardOf, (*guard).describeACLs),
			rule: clusterRule(opDescribe, func(r *kmsg.DescribeACLsRequest) kmsg.Response {
				resp := r.ResponseKind().(*kmsg.DescribeACLsResponse)
				resp.ErrorCode, resp.ErrorMessage = kerr.ClusterAuthorizationFailed.Code, aclsRefused
				return resp
			})},
		api{key: 30, min: 0, max: 3, handle: on(guardOf, (*guard).createACLs),
			rule: clusterRule(opAlter, func(r *kmsg.CreateACLsRequest) kmsg.Response {
				resp := r.ResponseKind().(*kmsg.CreateACLsResponse)
				for range r.Creations {
					resp.Results = append(resp.Results, kmsg.CreateACLsResponseResult{ErrorCode: kerr.ClusterAuthorizationFailed.Code,
						ErrorMessage: aclsRefused})
				}
				return resp
			})},
		api{key: 31, min: 0, max: 3, handle: on(guardOf, (*guard).deleteACLs),
			rule: clusterRule(opAlter, func(r *kmsg.DeleteACLsRequest) kmsg.Response {
				resp := r.ResponseKind().(*kmsg.DeleteACLsResponse)
				for range r.Filters {
					resp.Results = append(resp.Results, kmsg.DeleteACLsResponseResult{ErrorCode: kerr.ClusterAuthorizationFailed.Code,
						ErrorMessage: aclsRefused})
				}
				return resp
			})},
	)
}

// aclsRefused is the message of a refused ACL request.
var aclsRefused = kmsg.StringPtr("the principal may not manage ACLs (Alter on the cluster) or describe them (Describe on the cluster)")

// securityDisabled is the answer to an ACL request with no authorizer on,
// as Kafka's.
var securityDisabled = kmsg.StringPtr("no authorizer is configured on the broker (authorizer.class.name)")

// createACLs answers CreateAcls: each ACL checked (INVALID_REQUEST with
// the reason), the valid ones stored durably before the answer.
func (g *guard) createACLs(r *kmsg.CreateACLsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.CreateACLsResponse)
	if g.authz == nil {
		for range r.Creations {
			resp.Results = append(resp.Results, kmsg.CreateACLsResponseResult{ErrorCode: kerr.SecurityDisabled.Code, ErrorMessage: securityDisabled})
		}
		return resp
	}
	acls := make([]auth.ACL, len(r.Creations))
	for i, c := range r.Creations {
		acls[i] = auth.ACL{ResourceType: c.ResourceType, Name: c.ResourceName, Pattern: c.ResourcePatternType,
			Principal: c.Principal, Host: c.Host, Operation: c.Operation, Permission: c.PermissionType}
		if r.Version == 0 { // v0 has no pattern type: literal
			acls[i].Pattern = kmsg.ACLResourcePatternTypeLiteral
		}
	}
	errs, err := g.authz.ACLs.Create(acls)
	for i := range acls {
		res := kmsg.CreateACLsResponseResult{}
		switch {
		case errs[i] != nil:
			res.ErrorCode, res.ErrorMessage = kerr.InvalidRequest.Code, errMessage(errs[i])
		case err != nil:
			res.ErrorCode, res.ErrorMessage = kerr.UnknownServerError.Code, kmsg.StringPtr("the ACLs could not be saved")
		}
		resp.Results = append(resp.Results, res)
	}
	if err != nil {
		g.logger.Error("saving ACLs", "err", err)
	} else {
		for i, a := range acls {
			if errs[i] == nil {
				g.logger.Info("ACL created", "acl", a.String())
			}
		}
	}
	return resp
}

// filterOf is a request's ACL filter.
func filterOf(rt kmsg.ACLResourceType, name *string, pt kmsg.ACLResourcePatternType, principal, host *string,
	op kmsg.ACLOperation, perm kmsg.ACLPermissionType, version int16) auth.Filter {
	if version == 0 { // v0 has no pattern type: literal
		pt = kmsg.ACLResourcePatternTypeLiteral
	}
	return auth.Filter{ResourceType: rt, Name: name, Pattern: pt, Principal: principal, Host: host, Operation: op, Permission: perm}
}

// describeACLs answers DescribeAcls: the ACLs the filter selects, by
// resource pattern.
func (g *guard) describeACLs(r *kmsg.DescribeACLsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.DescribeACLsResponse)
	if g.authz == nil {
		resp.ErrorCode, resp.ErrorMessage = kerr.SecurityDisabled.Code, securityDisabled
		return resp
	}
	f := filterOf(r.ResourceType, r.ResourceName, r.ResourcePatternType, r.Principal, r.Host, r.Operation, r.PermissionType, r.Version)
	for _, a := range g.authz.ACLs.List(f) {
		i := slices.IndexFunc(resp.Resources, func(res kmsg.DescribeACLsResponseResource) bool {
			return res.ResourceType == a.ResourceType && res.ResourceName == a.Name && res.ResourcePatternType == a.Pattern
		})
		if i < 0 {
			resp.Resources = append(resp.Resources, kmsg.DescribeACLsResponseResource{ResourceType: a.ResourceType,
				ResourceName: a.Name, ResourcePatternType: a.Pattern})
			i = len(resp.Resources) - 1
		}
		resp.Resources[i].ACLs = append(resp.Resources[i].ACLs, kmsg.DescribeACLsResponseResourceACL{Principal: a.Principal,
			Host: a.Host, Operation: a.Operation, PermissionType: a.Permission})
	}
	return resp
}

// deleteACLs answers DeleteAcls: each filter's matches, deleted durably
// before the answer.
func (g *guard) deleteACLs(r *kmsg.DeleteACLsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.DeleteACLsResponse)
	if g.authz == nil {
		for range r.Filters {
			resp.Results = append(resp.Results, kmsg.DeleteACLsResponseResult{ErrorCode: kerr.SecurityDisabled.Code, ErrorMessage: securityDisabled})
		}
		return resp
	}
	filters := make([]auth.Filter, len(r.Filters))
	for i, f := range r.Filters {
		filters[i] = filterOf(f.ResourceType, f.ResourceName, f.ResourcePatternType, f.Principal, f.Host, f.Operation, f.PermissionType, r.Version)
	}
	deleted, err := g.authz.ACLs.Delete(filters)
	for i := range filters {
		res := kmsg.DeleteACLsResponseResult{}
		if err != nil {
			res.ErrorCode, res.ErrorMessage = kerr.UnknownServerError.Code, kmsg.StringPtr("the ACLs could not be saved")
		} else {
			for _, a := range deleted[i] {
				res.MatchingACLs = append(res.MatchingACLs, kmsg.DeleteACLsResponseResultMatchingACL{ResourceType: a.ResourceType,
					ResourceName: a.Name, ResourcePatternType: a.Pattern, Principal: a.Principal, Host: a.Host,
					Operation: a.Operation, PermissionType: a.Permission})
				g.logger.Info("ACL deleted", "acl", a.String())
			}
		}
		resp.Results = append(resp.Results, res)
	}
	if err != nil {
		g.logger.Error("saving ACLs", "err", err)
	}
	return resp
}
