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
	register(api{key: 18, min: 0, max: 4, beforeAuth: true, rule: anyone, quota: quotaNone,
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
	if h.version >= 3 {
		// The features the broker finalizes, as Kafka 4.1 reports them.
		for _, f := range finalizedFeatures {
			resp.SupportedFeatures = append(resp.SupportedFeatures,
				kmsg.ApiVersionsResponseSupportedFeature{Name: f.name, MinVersion: f.min, MaxVersion: f.level})
			resp.FinalizedFeatures = append(resp.FinalizedFeatures,
				kmsg.ApiVersionsResponseFinalizedFeature{Name: f.name, MinVersionLevel: f.level, MaxVersionLevel: f.level})
		}
		resp.FinalizedFeaturesEpoch = finalizedFeaturesEpoch
	}
	return resp
}

// finalizedFeatures are the feature levels every client is told, with the
// lowest level supported:
//   - group.version 1: KIP-848 consumer groups (ConsumerGroupHeartbeat);
//   - metadata.version 27, Kafka 4.1-IV1's, whose APIs this broker serves
//     (7, 3.3-IV3, is the lowest Kafka 4 supports);
//   - transaction.version 2: transactions v2 (KIP-890 part 2: an epoch
//     bump per transaction, no AddPartitionsToTxn from Produce v12 on).
var finalizedFeatures = []struct {
	name       string
	min, level int16
}{{"group.version", 0, 1}, {"metadata.version", 7, 27}, {"transaction.version", 0, 2}}

// finalizedFeaturesEpoch is the epoch of finalizedFeatures: it changes
// only with a release of seglog that changes them.
const finalizedFeaturesEpoch = 2

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
