package broker

import (
	"context"
	"regexp"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ApiVersions: the registry's APIs and versions, open to any client
// (before SASL too), outside the quotas. Its ranges are low enough for
// kafkajs, which never uses flexible versions and ignores the broker's
// minimum.

func init() {
	register(api{key: 18, min: 0, max: 3, beforeAuth: true, rule: anyone, quota: quotaNone,
		handle: handler((*Broker).apiVersions), unsupported: apiVersionsUnsupported})
}

// apiVersionsUnsupported answers a version this broker does not know as
// Kafka does: a v0 body, UNSUPPORTED_VERSION and the list.
func apiVersionsUnsupported(_ *Broker, _ header) kmsg.Response {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	resp.ApiKeys = servedVersions()
	return resp
}

// apiVersions lists the served APIs.
func (b *Broker) apiVersions(_ context.Context, h header, r *kmsg.ApiVersionsRequest) kmsg.Response {
	resp := r.ResponseKind().(*kmsg.ApiVersionsResponse)
	if h.version >= 3 && (!softwareName.MatchString(r.ClientSoftwareName) || !softwareName.MatchString(r.ClientSoftwareVersion)) {
		// Kafka validates the client's software name and version (KIP-511)
		// and answers INVALID_REQUEST without the list.
		resp.ErrorCode = kerr.InvalidRequest.Code
		b.opts.Logger.Warn("ApiVersions with an invalid client software name or version",
			"name", r.ClientSoftwareName, "version", r.ClientSoftwareVersion)
		return resp
	}
	resp.ApiKeys = servedVersions()
	return resp
}

// servedVersions is the registry's APIs with their version ranges.
func servedVersions() []kmsg.ApiVersionsResponseApiKey {
	var keys []kmsg.ApiVersionsResponseApiKey
	for _, a := range served() {
		k := kmsg.ApiVersionsResponseApiKey{ApiKey: a.key, MinVersion: a.min, MaxVersion: a.max}
		if a.listedFromV0 {
			k.MinVersion = 0
		}
		keys = append(keys, k)
	}
	return keys
}

// softwareName is what Kafka accepts as a client software name or version.
var softwareName = regexp.MustCompile(`^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$`)
