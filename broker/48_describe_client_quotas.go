package broker

// DescribeClientQuotas (key 48), versions 0-1.
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

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.DescribeClientQuotas.Int16(), 0, 1, handleDescribeClientQuotas) }

func handleDescribeClientQuotas(_ context.Context, _ *Server, r *Request) (Reply, error) {
	req := r.Msg.(*kmsg.DescribeClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	// authz: DESCRIBE_CONFIGS on CLUSTER, else CLUSTER_AUTHORIZATION_FAILED.
	resp.Entries = []kmsg.DescribeClientQuotasResponseEntry{}
	return resp, nil
}
