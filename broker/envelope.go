package broker

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Envelope (KIP-590): a broker forwards a request it took for a principal
// to the broker that can answer it — the partition's leader, the group's
// or the transaction's coordinator — wrapped with the principal and the
// client's address; the receiver authorizes and answers the inner request
// as that principal's, and wraps the answer. Kafka's brokers forward so to
// the controller; seglog's console forwards so in a cluster
// (Broker.RequestTo), so that each broker's console shows the whole
// cluster under each user's own ACLs.
//
// Only a principal with ClusterAction on the cluster may send one (the
// brokers', as for replication), as Kafka requires: whoever holds it is
// trusted as a broker (it can already read every record as a follower and
// end any transaction). The inner principal is a User: one, or the
// brokers' Internal one (a console's sampler asking another broker); an
// envelope holds no envelope and no step of a SASL exchange.

func init() {
	register(api{key: 58, min: 0, max: 0, quota: quotaNone, handle: handler((*Broker).envelope),
		rule: clusterRule(kmsg.ACLOperationClusterAction, func(r *kmsg.EnvelopeRequest) kmsg.Response {
			resp := r.ResponseKind().(*kmsg.EnvelopeResponse)
			resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
			return resp
		})})
}

func (b *Broker) envelope(ctx context.Context, outer header, r *kmsg.EnvelopeRequest) *kmsg.EnvelopeResponse {
	resp := r.ResponseKind().(*kmsg.EnvelopeResponse)
	principal := string(r.RequestPrincipal)
	if !strings.HasPrefix(principal, "User:") && principal != Internal {
		resp.ErrorCode = kerr.PrincipalDeserializationFailure.Code
		return resp
	}
	var host string
	if ip := net.IP(r.ClientHostAddress); len(ip) == net.IPv4len || len(ip) == net.IPv6len {
		host = "/" + ip.String() // as a connection's host reads
	}
	h, req, body, err := parseHeader(r.RequestData)
	if a := apiFor(h.key); err != nil || h.key == r.Key() || a == nil || a.sasl { // (a connection's own steps stay its own)
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp
	}
	h.host, h.listener, h.sess = host, outer.listener, &session{principal: principal, authed: true}
	out, err := b.handleRecovering(ctx, h, req, body, b.opts.Logger)
	if fr, ok := out.(*fetchReply); ok && err == nil {
		out, err = fr.materialize(h)
	}
	switch {
	case errors.Is(err, errMalformed):
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp
	case err != nil || out == nil: // (an acks=0 produce has no answer to forward)
		resp.ErrorCode = kerr.UnknownServerError.Code
		return resp
	}
	out.SetVersion(h.version)
	resp.ResponseData = encodeResponse(h, out)[4:] // the answer without its size
	return resp
}

// RequestTo handles req for caller on broker node of the cluster: here
// (Request) when node is this broker, else
// forwarded to node in an envelope, which node authorizes as caller's. It
// is how the console asks a partition's leader or a group's coordinator.
func (b *Broker) RequestTo(ctx context.Context, caller Caller, node int32, req kmsg.Request) (kmsg.Response, error) {
	if node == b.opts.NodeID {
		return b.Request(ctx, caller, req)
	}
	env, err := wrap(caller, req)
	if err != nil {
		return nil, err
	}
	got, err := b.replicas.Send(ctx, node, env)
	if err == nil {
		var resp kmsg.Response
		if resp, err = unwrap(got.(*kmsg.EnvelopeResponse), req); err == nil {
			return resp, nil
		}
	}
	return nil, fmt.Errorf("broker: forwarding %s to broker %d: %w", kmsg.NameForKey(req.Key()), node, err)
}

// wrap is req, at the highest version both kmsg and the registry know,
// in an envelope for caller.
func wrap(caller Caller, req kmsg.Request) (*kmsg.EnvelopeRequest, error) {
	if req.Key() == 58 {
		return nil, fmt.Errorf("%w: an envelope in an envelope", ErrNotServed)
	}
	v, err := setVersion(req)
	if err != nil {
		return nil, err
	}
	inner := binary.BigEndian.AppendUint16(nil, uint16(req.Key()))
	inner = binary.BigEndian.AppendUint16(inner, uint16(v))
	inner = binary.BigEndian.AppendUint32(inner, 0) // the correlation id
	inner = binary.BigEndian.AppendUint16(inner, uint16(len(caller.ClientID)))
	inner = append(inner, caller.ClientID...)
	if req.IsFlexible() {
		inner = append(inner, 0) // no tagged fields
	}
	env := kmsg.NewPtrEnvelopeRequest()
	env.RequestData = req.AppendTo(inner)
	env.RequestPrincipal = []byte(cmp.Or(caller.Principal, Anonymous))
	if ip := net.ParseIP(strings.TrimPrefix(caller.Host, "/")); ip != nil {
		if v4 := ip.To4(); v4 != nil {
			ip = v4
		}
		env.ClientHostAddress = ip
	}
	return env, nil
}

// unwrap is the answer to req (wrapped) an envelope's response carries.
func unwrap(er *kmsg.EnvelopeResponse, req kmsg.Request) (kmsg.Response, error) {
	if err := kerr.ErrorForCode(er.ErrorCode); err != nil {
		return nil, err
	}
	data := er.ResponseData
	if len(data) < 4 {
		return nil, fmt.Errorf("a %d-byte answer", len(data))
	}
	data = data[4:] // the correlation id
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() && req.Key() != 18 { // (ApiVersions' header is never flexible)
		var err error
		if data, err = skipTags(data); err != nil {
			return nil, err
		}
	}
	if err := resp.ReadFrom(data); err != nil {
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	return resp, nil
}
