package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog/broker/auth"
)

// The client quota APIs: DescribeClientQuotas and AlterClientQuotas on the
// data directory's seglog-client-quotas (quota.go enforces them).

func init() {
	register(
		api{key: 48, min: 0, max: 1, handle: on(limitsOf, (*limits).describeClientQuotas),
			rule: clusterRule[*kmsg.DescribeClientQuotasRequest](opDescribeConfigs, nil)},
		api{key: 49, min: 0, max: 1, handle: on(limitsOf, (*limits).alterClientQuotas),
			rule: clusterRule(opAlterConfigs, func(r *kmsg.AlterClientQuotasRequest) kmsg.Response {
				resp := r.ResponseKind().(*kmsg.AlterClientQuotasResponse)
				for _, e := range r.Entries {
					res := kmsg.AlterClientQuotasResponseEntry{ErrorCode: kerr.ClusterAuthorizationFailed.Code}
					for _, c := range e.Entity {
						res.Entity = append(res.Entity, kmsg.AlterClientQuotasResponseEntryEntity{Type: c.Type, Name: c.Name})
					}
					resp.Entries = append(resp.Entries, res)
				}
				return resp
			})},
	)
}

// describeClientQuotas answers DescribeClientQuotas: the entities the
// components match (strictly: no other entity types), with their quotas.
func (l *limits) describeClientQuotas(r *kmsg.DescribeClientQuotasRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	seen := map[string]bool{}
	for _, c := range r.Components {
		if seen[c.EntityType] || c.MatchType == 0 && c.Match == nil || c.MatchType > 2 {
			resp.ErrorCode = kerr.InvalidRequest.Code
			resp.ErrorMessage = kmsg.StringPtr("an entity type twice, an exact match without a name, or an unknown match type")
			return resp
		}
		seen[c.EntityType] = true
	}
	for _, e := range l.quotas.Entries() {
		if !quotaMatches(e.Entity, r.Components, r.Strict) {
			continue
		}
		var entry kmsg.DescribeClientQuotasResponseEntry
		for typ, name := range e.Entity {
			entry.Entity = append(entry.Entity, kmsg.DescribeClientQuotasResponseEntryEntity{Type: typ, Name: name})
		}
		for k, v := range e.Values {
			entry.Values = append(entry.Values, kmsg.DescribeClientQuotasResponseEntryValue{Key: k, Value: v})
		}
		resp.Entries = append(resp.Entries, entry)
	}
	return resp
}

func quotaMatches(e auth.Entity, cs []kmsg.DescribeClientQuotasRequestComponent, strict bool) bool {
	if strict && len(e) != len(cs) {
		return false
	}
	for _, c := range cs {
		name, ok := e[c.EntityType]
		switch {
		case !ok:
			return false
		case c.MatchType == 0 && (name == nil || *name != *c.Match):
			return false
		case c.MatchType == 1 && name != nil:
			return false
		}
	}
	return true
}

// alterClientQuotas answers AlterClientQuotas: each entity's changes
// checked (INVALID_REQUEST with the reason) and applied durably before
// the answer, unless ValidateOnly.
func (l *limits) alterClientQuotas(r *kmsg.AlterClientQuotasRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	entities := make([]auth.Entity, len(r.Entries))
	ops := make([][]auth.QuotaOp, len(r.Entries))
	dup := make([]bool, len(r.Entries))
	for i, e := range r.Entries {
		entities[i] = auth.Entity{}
		for _, c := range e.Entity {
			if _, ok := entities[i][c.Type]; ok {
				dup[i] = true
			}
			entities[i][c.Type] = c.Name
		}
		if dup[i] {
			entities[i] = auth.Entity{} // refused by Alter's check: nothing of it applies
		}
		for _, op := range e.Ops {
			ops[i] = append(ops[i], auth.QuotaOp{Key: op.Key, Value: op.Value, Remove: op.Remove})
		}
	}
	errs, err := l.quotas.Alter(entities, ops, r.ValidateOnly)
	for i, e := range r.Entries {
		res := kmsg.AlterClientQuotasResponseEntry{}
		for _, c := range e.Entity {
			res.Entity = append(res.Entity, kmsg.AlterClientQuotasResponseEntryEntity{Type: c.Type, Name: c.Name})
		}
		switch {
		case dup[i]:
			res.ErrorCode, res.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr("an entity type given twice")
		case err != nil:
			res.ErrorCode, res.ErrorMessage = kerr.UnknownServerError.Code, kmsg.StringPtr("the quotas could not be saved")
		case errs[i] != nil:
			res.ErrorCode, res.ErrorMessage = kerr.InvalidRequest.Code, errMessage(errs[i])
		}
		resp.Entries = append(resp.Entries, res)
	}
	if err != nil {
		l.logger.Error("saving client quotas", "err", err)
	}
	return resp
}
