package broker

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// An envelope's inner request is authorized as the principal it names,
// not as the sender's: a super user forwarding for User:nobody gets
// nobody's refusal, forwarding for itself its answer. Only User:
// principals (and the brokers' Internal one) are taken, and nothing but a served, parseable request.
func TestEnvelope(t *testing.T) {
	b, _, _ := testBroker(t, Options{Authorizer: true, SuperUsers: []string{"User:admin"}})
	const admin = "User:admin"
	md := kmsg.NewPtrMetadataRequest()
	md.Topics, md.AllowAutoTopicCreation = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("secret")}}, true
	require.Zero(t, handleAs(t, b, admin, md, 12).(*kmsg.MetadataResponse).Topics[0].ErrorCode)

	forward := func(as Caller) (*kmsg.EnvelopeResponse, *kmsg.MetadataRequest) {
		inner := kmsg.NewPtrMetadataRequest()
		inner.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("secret")}}
		env, err := wrap(as, inner)
		require.NoError(t, err)
		return handleAs(t, b, admin, env, 0).(*kmsg.EnvelopeResponse), inner
	}
	for _, c := range []struct {
		caller Caller
		code   int16
	}{
		{Caller{Principal: "User:nobody", Host: "127.0.0.1", ClientID: "console"}, kerr.TopicAuthorizationFailed.Code},
		{Caller{Principal: admin, Host: "/::1"}, 0},
	} {
		er, inner := forward(c.caller)
		require.Zero(t, er.ErrorCode)
		resp, err := unwrap(er, inner)
		require.NoError(t, err)
		topics := resp.(*kmsg.MetadataResponse).Topics
		require.Len(t, topics, 1)
		require.Equal(t, c.code, topics[0].ErrorCode, "%s: %s", c.caller.Principal, errorName(topics[0].ErrorCode))
		if c.code == 0 {
			require.Len(t, topics[0].Partitions, 1)
		}
	}

	// An ApiVersions inside (whose answer's header is never flexible).
	av := kmsg.NewPtrApiVersionsRequest()
	av.ClientSoftwareName, av.ClientSoftwareVersion = "seglog", "1"
	env, err := wrap(Caller{Principal: "User:nobody"}, av)
	require.NoError(t, err)
	resp, err := unwrap(handleAs(t, b, admin, env, 0).(*kmsg.EnvelopeResponse), av)
	require.NoError(t, err)
	require.Zero(t, resp.(*kmsg.ApiVersionsResponse).ErrorCode, errorName(resp.(*kmsg.ApiVersionsResponse).ErrorCode))
	require.NotEmpty(t, resp.(*kmsg.ApiVersionsResponse).ApiKeys)

	refused := func(principal string, data []byte) int16 {
		env := kmsg.NewPtrEnvelopeRequest()
		env.RequestPrincipal, env.RequestData = []byte(principal), data
		return handleAs(t, b, admin, env, 0).(*kmsg.EnvelopeResponse).ErrorCode
	}
	good := env.RequestData
	require.Zero(t, refused(Internal, good), "the brokers' own principal is forwarded")
	require.Equal(t, kerr.PrincipalDeserializationFailure.Code, refused("Group:x", good))
	require.Equal(t, kerr.PrincipalDeserializationFailure.Code, refused("", good))
	require.Equal(t, kerr.InvalidRequest.Code, refused(admin, good[:3]), "a torn header")
	require.Equal(t, kerr.InvalidRequest.Code, refused(admin, append([]byte{0, 57}, good[2:]...)), "an API not served")
	require.Equal(t, kerr.InvalidRequest.Code, refused(admin, append([]byte{0, 17}, good[2:]...)), "a SASL handshake")
	inEnvelope := append([]byte{0, 58}, good[2:]...)
	require.Equal(t, kerr.InvalidRequest.Code, refused(admin, inEnvelope), "an envelope in an envelope")
	_, err = wrap(Caller{}, kmsg.NewPtrEnvelopeRequest())
	require.ErrorIs(t, err, ErrNotServed)
}
