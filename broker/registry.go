package broker

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The API registry: every API the broker serves has one entry, kept in the
// file of its family beside its handler (produce.go, fetch.go,
// metadata.go, find_coordinator.go, group_*.go, init_producer_id.go,
// txn*.go, admin_topics.go, configs.go, acls.go, quotas.go, sasl.go,
// users.go, offsets.go, envelope.go, …). Dispatch, ApiVersions,
// authorization, quotas, request metrics and the null broker all read it;
// nothing else names APIs. With an authorizer on, an API whose entry has
// no authorization rule is refused (deny by default).

// An api is one served API.
type api struct {
	key      int16
	min, max int16
	// beforeAuth: answered on a SASL listener before the client
	// authenticates (ApiVersions, and the SASL exchange itself).
	beforeAuth bool
	// sasl: a step of the SASL exchange; the connection's reader waits
	// for its answer before reading on (the answer may turn the next
	// frames into bare tokens).
	sasl bool
	// rule is who may call it.
	rule rule
	// quota is what a call counts against a client's quotas.
	quota quotaClass
	// handle answers an authorized request; a nil response is none
	// (acks=0), an error closes the connection.
	handle func(b *Broker, ctx context.Context, h header, req kmsg.Request) (kmsg.Response, error)
	// null answers it on the null broker (NewNull); nil is an empty,
	// successful response.
	null func(b *Broker, h header, req kmsg.Request) kmsg.Response
	// unsupported answers a version above max (nil closes the connection,
	// as Kafka closes it for every API but ApiVersions).
	unsupported func(b *Broker, h header) kmsg.Response
	// listedFromV0: ApiVersions lists the API from version 0 although
	// versions below min are refused (closing the connection), as Kafka 4
	// lists Produce: librdkafka before 2.11.1 compresses only for a broker
	// that lists Produce v0 (KAFKA-18659).
	listedFromV0 bool
	// topicIDs resolves the topic ids of a request that names topics by
	// id (Produce and Fetch v13+) into their names, before authorization:
	// an unknown id is left with no name, which the handler answers with
	// UNKNOWN_TOPIC_ID.
	topicIDs func(b *Broker, h header, req kmsg.Request)
	// session is Fetch's incremental fetch sessions (KIP-227): before
	// authorization it answers a request of a session it cannot serve,
	// or makes an incremental request whole; after the handler (and the
	// authorization's after), after takes out what the session need not
	// be told.
	session func(b *Broker, h header, req kmsg.Request) (refused kmsg.Response, after func(kmsg.Response))
}

// A ruleKind is the resource an API's authorization rule checks first.
type ruleKind uint8

const (
	// ruleMissing is no rule: refused when an authorizer is on.
	ruleMissing ruleKind = iota
	// ruleAnyone: any principal (the SASL exchange and ApiVersions, which
	// come before there is a principal to check).
	ruleAnyone
	ruleTopic   // Kafka's TOPIC resources named in the request
	ruleGroup   // the group the request names
	ruleTxnID   // the transactional id the request names
	ruleCluster // the cluster (kafka-cluster)
)

func (k ruleKind) String() string {
	return [...]string{"missing", "anyone", "topic", "group", "transactional-id", "cluster"}[k]
}

// A rule is an API's authorization: the resource kind and operation it
// checks first, and check, which looks at the request. check returns a
// whole answer (refused) when nothing of the request may go on, or takes
// the refused resources out of the request and returns after, which puts
// their refusals into the handler's response.
type rule struct {
	kind  ruleKind
	op    kmsg.ACLOperation
	check func(g *guard, h header, req kmsg.Request) (refused kmsg.Response, after func(kmsg.Response))
}

// A quotaClass is what an API's calls count against a client's quotas.
type quotaClass uint8

const (
	// quotaRequest: request_percentage, the time its handling takes.
	quotaRequest quotaClass = iota
	// quotaNone: nothing (ApiVersions and the SASL exchange, before there
	// is a user to count against).
	quotaNone
	// quotaProduce: producer_byte_rate on its record bytes, and its time.
	quotaProduce
	// quotaFetch: consumer_byte_rate on the record bytes answered, and its
	// time; a client over its byte rate gets no records.
	quotaFetch
)

// registry holds the served APIs by key; register fills it at init.
var registry [maxAPIKey + 1]*api

const maxAPIKey = 127

// register adds an API to the registry (at init, from its family's file).
func register(as ...api) {
	for _, a := range as {
		if a.key < 0 || a.key > maxAPIKey || registry[a.key] != nil || a.handle == nil {
			panic(fmt.Sprintf("broker: API %d registered twice, out of range or without a handler", a.key))
		}
		registry[a.key] = &a
	}
}

// apiFor returns the registry's entry for a key, nil if not served.
func apiFor(key int16) *api {
	if key < 0 || key > maxAPIKey {
		return nil
	}
	return registry[key]
}

// served returns the registry's entries in key order.
func served() []*api {
	var out []*api
	for _, a := range registry {
		if a != nil {
			out = append(out, a)
		}
	}
	return out
}

// handler adapts a typed handler to the registry's.
func handler[R kmsg.Request, S kmsg.Response](f func(*Broker, context.Context, header, R) S) func(*Broker, context.Context, header, kmsg.Request) (kmsg.Response, error) {
	return func(b *Broker, ctx context.Context, h header, req kmsg.Request) (kmsg.Response, error) {
		resp := f(b, ctx, h, req.(R))
		if v := reflect.ValueOf(resp); !v.IsValid() || v.Kind() == reflect.Pointer && v.IsNil() {
			return nil, nil // no response (acks=0): the interface, not a typed nil
		}
		return resp, nil
	}
}

// on is the handler of an API that belongs to one part of the broker,
// which pick returns (its telemetry, limits, authenticator): the broker
// only routes the request to it.
func on[P any, R kmsg.Request, S kmsg.Response](pick func(*Broker) P, f func(P, R) S) func(*Broker, context.Context, header, kmsg.Request) (kmsg.Response, error) {
	return handler(func(b *Broker, _ context.Context, _ header, r R) S { return f(pick(b), r) })
}

// onCall is on for a part's method that takes the request's context and
// header too.
func onCall[P any, R kmsg.Request, S kmsg.Response](pick func(*Broker) P, f func(P, context.Context, header, R) S) func(*Broker, context.Context, header, kmsg.Request) (kmsg.Response, error) {
	return handler(func(b *Broker, ctx context.Context, h header, r R) S { return f(pick(b), ctx, h, r) })
}

// The parts of the broker that answer APIs of their own.
func txnsOf(b *Broker) *txnAPIs                { return b.txnAPI }
func configsOf(b *Broker) *configAPIs          { return b.configs }
func groupsOf(b *Broker) *groupAPIs            { return b.grp }
func telemetryOf(b *Broker) *telemetry         { return b.telemetry }
func guardOf(b *Broker) *guard                 { return b.guard }
func limitsOf(b *Broker) *limits               { return b.limits }
func authenticatorOf(b *Broker) *authenticator { return b.authn }

// ruleFor is a rule of kind and op whose check is a typed function.
func ruleFor[R kmsg.Request](kind ruleKind, op kmsg.ACLOperation, f func(*guard, header, R) (kmsg.Response, func(kmsg.Response))) rule {
	return rule{kind: kind, op: op, check: check(f)}
}

// check adapts a typed authorization check to the registry's.
func check[R kmsg.Request](f func(*guard, header, R) (kmsg.Response, func(kmsg.Response))) func(*guard, header, kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	return func(g *guard, h header, req kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
		return f(g, h, req.(R))
	}
}

// anyone is the rule of the APIs any principal may call.
var anyone = rule{kind: ruleAnyone, check: func(*guard, header, kmsg.Request) (kmsg.Response, func(kmsg.Response)) {
	return nil, nil
}}

// clusterRule is a rule needing op on the cluster; refuse answers a
// refused request as a whole (nil: CLUSTER_AUTHORIZATION_FAILED in the
// response's top-level error code).
func clusterRule[R kmsg.Request](op kmsg.ACLOperation, refuse func(R) kmsg.Response) rule {
	return rule{kind: ruleCluster, op: op, check: check(func(g *guard, h header, r R) (kmsg.Response, func(kmsg.Response)) {
		if g.mayCluster(h, op) {
			return nil, nil
		}
		if refuse == nil {
			resp, _ := refuseWhole(r)
			return resp, nil
		}
		return refuse(r), nil
	})}
}

// refuseWhole is the response to req with CLUSTER_AUTHORIZATION_FAILED in
// its top-level error code; false if it has none.
func refuseWhole(req kmsg.Request) (kmsg.Response, bool) {
	resp := req.ResponseKind()
	f := reflect.ValueOf(resp).Elem().FieldByName("ErrorCode")
	if !f.IsValid() || f.Kind() != reflect.Int16 {
		return nil, false
	}
	f.SetInt(int64(kerr.ClusterAuthorizationFailed.Code))
	return resp, true
}

// errNoRule closes a connection whose request has no authorization rule
// and no response that can say CLUSTER_AUTHORIZATION_FAILED as a whole.
var errNoRule = fmt.Errorf("%w: the API has no authorization rule", errUnauthenticated)

// refuseUnruled answers a request whose API has no rule, with an
// authorizer on: CLUSTER_AUTHORIZATION_FAILED in its response's top-level
// ErrorCode; without one, an error that closes the connection.
func refuseUnruled(req kmsg.Request) (kmsg.Response, error) {
	if resp, ok := refuseWhole(req); ok {
		return resp, nil
	}
	return nil, fmt.Errorf("%w (%s)", errNoRule, kmsg.NameForKey(req.Key()))
}

// handle answers one request; a nil response is none (acks=0). An error
// closes the connection. Its steps: the session's state, the registry's
// versions, decoding, authorization, quotas, the handler. Every answer
// of a served version — a handler's, a refusal's, an error path's that
// built a fresh response — is encoded at the request's version, set here
// and nowhere else (a JoinGroup sent to a non-coordinator was answered
// with a version 0 body).
func (b *Broker) handle(ctx context.Context, h header, req kmsg.Request, body []byte) (kmsg.Response, error) {
	resp, err := b.respond(ctx, h, req, body)
	if a := apiFor(h.key); resp != nil && a != nil && h.version >= a.min && h.version <= a.max {
		resp.SetVersion(h.version)
	}
	return resp, err
}

func (b *Broker) respond(ctx context.Context, h header, req kmsg.Request, body []byte) (kmsg.Response, error) {
	a := apiFor(h.key)
	if a == nil || !a.beforeAuth {
		if err := b.authn.checkSession(h); err != nil {
			return nil, err
		}
	}
	if a != nil && h.version > a.max && a.unsupported != nil {
		return a.unsupported(b, h), nil
	}
	if a == nil || h.version < a.min || h.version > a.max {
		return nil, fmt.Errorf("%w: %s v%d is not served", errMalformed, kmsg.NameForKey(h.key), h.version)
	}
	if err := req.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("%w: %s v%d: %v", errMalformed, kmsg.NameForKey(h.key), h.version, err)
	}
	if a.topicIDs != nil {
		a.topicIDs(b, h, req)
	}
	if b.null != nil && !a.sasl && a.rule.kind != ruleAnyone {
		if a.null != nil {
			return a.null(b, h, req), nil
		}
		return req.ResponseKind(), nil // an empty (successful) answer
	}
	var sessionAfter func(kmsg.Response)
	if a.session != nil {
		var refused kmsg.Response
		if refused, sessionAfter = a.session(b, h, req); refused != nil {
			return refused, nil
		}
	}
	var after func(kmsg.Response)
	if b.guard.authz != nil {
		if a.rule.check == nil {
			return refuseUnruled(req)
		}
		var refused kmsg.Response
		if refused, after = a.rule.check(b.guard, h, req); refused != nil {
			return refused, nil
		}
	}
	quotas := a.quota != quotaNone && b.quotas.Any() // without one, nothing to count or time
	if r, ok := req.(*kmsg.FetchRequest); ok && quotas && a.quota == quotaFetch {
		if resp := b.limits.fetchThrottled(h, r); resp != nil {
			if sessionAfter != nil {
				sessionAfter(resp) // the session's id, as Kafka's throttled answer carries it
			}
			return resp, nil
		}
	}
	var start time.Time
	if quotas {
		start = time.Now()
	}
	resp, err := a.handle(b, ctx, h, req)
	if err != nil {
		return nil, err
	}
	if after != nil {
		after(resp)
	}
	if sessionAfter != nil && resp != nil {
		sessionAfter(resp)
	}
	if quotas {
		b.limits.recordQuotas(h, a.quota, req, resp, time.Since(start))
	}
	return resp, nil
}
