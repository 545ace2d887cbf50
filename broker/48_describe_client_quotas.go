package broker

// DescribeClientQuotas (key 48), versions 0-1.
//
// Authorization: DESCRIBE_CONFIGS on CLUSTER, else
// CLUSTER_AUTHORIZATION_FAILED (Kafka's).
//
// Behaviour: Verbatim has no client quotas, so every filter matches
// nothing: NONE with no entries. kafka-configs.sh --describe
// --entity-type users asks this before the SCRAM credentials.
//
// Deviations from Apache Kafka: quotas cannot be set (AlterClientQuotas is
// not served), and the filter is not validated (Kafka answers
// INVALID_REQUEST for a malformed one; here the answer is empty either
// way).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/authz"
)

func init() { register(kmsg.DescribeClientQuotas.Int16(), 0, 1, handleDescribeClientQuotas) }

func handleDescribeClientQuotas(_ context.Context, s *Server, r *Request) (Reply, error) {
	req := r.Msg.(*kmsg.DescribeClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	if !s.authorizedCluster(r, authz.OpDescribeConfigs) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		resp.ErrorMessage = kmsgString(kerr.ClusterAuthorizationFailed.Message)
		return resp, nil
	}
	resp.Entries = []kmsg.DescribeClientQuotasResponseEntry{}
	return resp, nil
}
