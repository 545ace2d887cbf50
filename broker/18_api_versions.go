package broker

// ApiVersions (key 18), versions 0-4.
//
// Behaviour:
//   - Lists every registered API key with its advertised range; the ranges
//     come from the register() calls beside each handler, so they cannot
//     drift from what is implemented. Ranges advertised but refused
//     (Produce v0-v2, as Kafka 4.x, KAFKA-18659) are listed as advertised.
//   - A request of a version above 4 is answered (not closed) with a v0
//     body carrying UNSUPPORTED_VERSION and the ranges, as Kafka does
//     (conn.go); the response header is always v0 (KIP-511).
//   - v3+: ClientSoftwareName/Version are validated as Kafka validates them
//     (INVALID_REQUEST when malformed).
//   - Features (v3+ tagged fields): the supported features are Verbatim's
//     verbatim.mirror.produce (0-1) and verbatim.mirror.topic.id (0-0),
//     docs/protocol.md (names and versions: wireext's Feature constants);
//     none is finalized, and FinalizedFeaturesEpoch is -1. With a link
//     service installed (SetLinkService) verbatim.mirror.link (0-0) as
//     well: the cluster link's admin requests (link_admin.go), whose keys
//     are not listed in ApiKeys. Clients then fall
//     back to their pre-feature behaviour: producers use transaction
//     protocol v1 (transaction.version is not finalized), which is what
//     this broker will serve first. metadata.version is not advertised
//     because nothing a client does depends on it.
//
// Deviations from Apache Kafka: no Kafka features advertised. v5 (KIP-1242:
// ClusterID/NodeID checks, REBOOTSTRAP_REQUIRED) is not served yet.

import (
	"context"
	"regexp"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.ApiVersions.Int16(), 0, 4, handleApiVersions) }

// softwareNameRe is Kafka's rule for client software names and versions.
var softwareNameRe = regexp.MustCompile(`^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$`)

func handleApiVersions(_ context.Context, s *Server, r *Request) (Reply, error) {
	req := r.Msg.(*kmsg.ApiVersionsRequest)
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	if req.Version >= 3 && (!softwareNameRe.MatchString(req.ClientSoftwareName) || !softwareNameRe.MatchString(req.ClientSoftwareVersion)) {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp, nil
	}
	resp.ApiKeys = advertisedAPIs()
	if req.Version >= 3 {
		// Verbatim's mirror produce (docs/protocol.md, 00_produce.go).
		resp.SupportedFeatures = append(resp.SupportedFeatures, mirrorProduceFeature(), mirrorTopicIDFeature())
		if s.linkSvc() != nil {
			resp.SupportedFeatures = append(resp.SupportedFeatures, mirrorLinkFeature())
		}
	}
	return resp, nil
}
