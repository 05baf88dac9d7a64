package broker

import (
	"errors"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/seglog/seglog"
	"github.com/seglog/seglog/broker/auth"
)

// The SCRAM credential APIs, on the data directory's
// seglog-scram-credentials: Describe needs Describe on the cluster, Alter
// Alter.

func init() {
	register(
		api{key: 50, min: 0, max: 0, handle: on(authenticatorOf, (*authenticator).describeUserSCRAM),
			rule: clusterRule[*kmsg.DescribeUserSCRAMCredentialsRequest](opDescribe, nil)},
		api{key: 51, min: 0, max: 0, handle: on(authenticatorOf, (*authenticator).alterUserSCRAM), rule: clusterRule(opAlter, refuseAlterUserSCRAM)},
	)
}

// refuseAlterUserSCRAM answers every user of a refused
// AlterUserScramCredentials, once each.
func refuseAlterUserSCRAM(r *kmsg.AlterUserSCRAMCredentialsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	seen := map[string]bool{}
	add := func(user string) {
		if !seen[user] {
			seen[user] = true
			resp.Results = append(resp.Results, kmsg.AlterUserSCRAMCredentialsResponseResult{User: user,
				ErrorCode: kerr.ClusterAuthorizationFailed.Code})
		}
	}
	for _, d := range r.Deletions {
		add(d.Name)
	}
	for _, u := range r.Upsertions {
		add(u.Name)
	}
	return resp
}

// describeUserSCRAM answers DescribeUserScramCredentials: every user's
// mechanisms and iteration counts (never a salt or a key), or the users
// asked for.
func (a *authenticator) describeUserSCRAM(r *kmsg.DescribeUserSCRAMCredentialsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	users := a.creds.Users()
	names := slices.Sorted(maps.Keys(users))
	asked := map[string]int{}
	if len(r.Users) > 0 {
		names = names[:0]
		for _, u := range r.Users {
			if asked[u.Name]++; asked[u.Name] == 1 {
				names = append(names, u.Name)
			}
		}
	}
	for _, name := range names {
		res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		res.User = name
		mechs, ok := users[name]
		switch {
		case asked[name] > 1:
			res.ErrorCode, res.ErrorMessage = kerr.DuplicateResource.Code, kmsg.StringPtr("Cannot describe SCRAM credentials for the same user twice in a single request: "+name)
		case !ok:
			res.ErrorCode, res.ErrorMessage = kerr.ResourceNotFound.Code, kmsg.StringPtr("Attempt to describe a user credential that does not exist: "+name)
		}
		for _, mech := range slices.Sorted(maps.Keys(mechs)) {
			if res.ErrorCode == 0 {
				res.CredentialInfos = append(res.CredentialInfos, kmsg.DescribeUserSCRAMCredentialsResponseResultCredentialInfo{
					Mechanism: auth.MechanismNumber(mech), Iterations: int32(mechs[mech])})
			}
		}
		resp.Results = append(resp.Results, res)
	}
	return resp
}

// alterUserSCRAM answers AlterUserScramCredentials as Kafka does: one
// result per user; a user with any bad change has none applied; the
// others' changes are applied together, durably, before the answer.
func (a *authenticator) alterUserSCRAM(r *kmsg.AlterUserSCRAMCredentialsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	var order []string
	changes := map[string][]auth.Change{}
	seen := map[[2]string]bool{}
	failed := map[string]*kmsg.AlterUserSCRAMCredentialsResponseResult{}
	fail := func(user string, code int16, msg string) {
		if failed[user] == nil {
			failed[user] = &kmsg.AlterUserSCRAMCredentialsResponseResult{User: user, ErrorCode: code, ErrorMessage: kmsg.StringPtr(msg)}
		}
	}
	add := func(ch auth.Change, mech int8) {
		if _, ok := changes[ch.User]; !ok {
			order = append(order, ch.User)
			changes[ch.User] = nil
		}
		name, known := auth.Mechanisms[mech]
		ch.Mechanism = name
		key := [2]string{ch.User, name}
		switch err := ch.Check(); {
		case !known:
			fail(ch.User, kerr.UnsupportedSaslMechanism.Code, "Unknown SCRAM mechanism")
		case seen[key]:
			fail(ch.User, kerr.DuplicateResource.Code, "A user credential cannot be altered twice in the same request")
		case errors.Is(err, auth.ErrEmptyUser):
			fail(ch.User, kerr.UnacceptableCredential.Code, "Username must not be empty")
		case err != nil:
			fail(ch.User, kerr.UnacceptableCredential.Code, seglog.Message(err))
		case ch.SaltedPassword == nil:
			if _, ok := a.creds.Lookup(ch.User, name); !ok {
				fail(ch.User, kerr.ResourceNotFound.Code, "Attempt to delete a user credential that does not exist")
			}
		}
		seen[key] = true
		changes[ch.User] = append(changes[ch.User], ch)
	}
	for _, d := range r.Deletions {
		add(auth.Change{User: d.Name}, d.Mechanism)
	}
	for _, u := range r.Upsertions {
		salted := u.SaltedPassword
		if salted == nil {
			salted = []byte{}
		}
		add(auth.Change{User: u.Name, Salt: u.Salt, Iterations: int(u.Iterations), SaltedPassword: salted}, u.Mechanism)
	}
	var apply []auth.Change
	for _, user := range order {
		if failed[user] == nil {
			apply = append(apply, changes[user]...)
		}
	}
	var applyErr error
	if len(apply) > 0 {
		_, applyErr = a.creds.Apply(apply) // every change was checked above
	}
	for _, user := range order {
		res := kmsg.AlterUserSCRAMCredentialsResponseResult{User: user}
		switch {
		case failed[user] != nil:
			res = *failed[user]
		case applyErr != nil:
			a.opts.Logger.Error("saving SCRAM credentials", "err", applyErr)
			res.ErrorCode, res.ErrorMessage = kerr.UnknownServerError.Code, kmsg.StringPtr("the credentials could not be saved")
		}
		resp.Results = append(resp.Results, res)
	}
	return resp
}
