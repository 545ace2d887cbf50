package broker

// DescribeAcls (key 29), versions 1-3 (v0, without pattern types, was
// removed in Kafka 4.0 by KIP-896).
//
// Behaviour: needs DESCRIBE on CLUSTER (else CLUSTER_AUTHORIZATION_FAILED);
// with no authorizer configured SECURITY_DISABLED. The filter selects
// ACLs as Kafka's ResourcePatternFilter and AccessControlEntryFilter do
// (null strings and ANY match everything; MATCH selects every pattern
// that applies to the name: the literal name, the literal "*" and its
// prefixes); a filter with an UNKNOWN code is INVALID_REQUEST. The ACLs
// are answered grouped by resource pattern, sorted.
//
// Deviations from Apache Kafka: none known.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/authz"
)

func init() { register(kmsg.DescribeACLs.Int16(), 1, 3, handleDescribeAcls) }

func handleDescribeAcls(_ context.Context, s *Server, r *Request) (Reply, error) {
	req := r.Msg.(*kmsg.DescribeACLsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	f := filterOf(req.ResourceType, req.ResourceName, req.ResourcePatternType, req.Principal, req.Host, req.Operation, req.PermissionType)
	switch {
	case !s.authorizedCluster(r, authz.OpDescribe):
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		resp.ErrorMessage = aclStr(kerr.ClusterAuthorizationFailed.Message)
	case s.acl == nil:
		resp.ErrorCode, resp.ErrorMessage = kerr.SecurityDisabled.Code, aclStr(msgNoAuthorizer)
	case f.Unknown():
		resp.ErrorCode = kerr.InvalidRequest.Code
		resp.ErrorMessage = aclStr("The filter contains UNKNOWN elements")
	default:
		resp.Resources = describeResources(s.acl.Describe(f))
	}
	return resp, nil
}
