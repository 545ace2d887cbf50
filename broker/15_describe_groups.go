package broker

// DescribeGroups (key 15), versions 0-6.
//
// Behaviour: state (Empty, PreparingRebalance, CompletingRebalance, Stable,
// Dead), protocol type, and members (member id, v4+ instance id, client id
// and host); in Stable the selected protocol and each member's metadata
// and assignment, as Kafka answers. An unknown group is answered as Kafka
// does: state Dead with no error before v6, GROUP_ID_NOT_FOUND from v6.
// v3+ authorized operations: -2147483648 (not computed) unless asked, then
// every group operation.
//
// Authorization (with the authorizer on, authorize.go): DESCRIBE on the
// group (GROUP_AUTHORIZATION_FAILED); the authorized operations are the
// principal's.
//
// Deviations from Apache Kafka: without the authorizer the authorized
// operations are READ, DELETE and DESCRIBE (Kafka answers every operation
// it supports on groups, DESCRIBE_CONFIGS and ALTER_CONFIGS included).

import (
	"context"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/verbatim-kafka/verbatim/authz"
)

func init() { register(kmsg.DescribeGroups.Int16(), 0, 6, handleDescribeGroups) }

// groupOperations is the bit set of Kafka ACL operations on a group:
// READ(3), DELETE(6), DESCRIBE(8).
const groupOperations = 1<<3 | 1<<6 | 1<<8

func handleDescribeGroups(_ context.Context, s *Server, r *Request) (Reply, error) {
	req := r.Msg.(*kmsg.DescribeGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, id := range req.Groups {
		dg := kmsg.NewDescribeGroupsResponseGroup()
		dg.Group = id
		dg.AuthorizedOperations = math.MinInt32
		if !s.authorized(r, authz.OpDescribe, authz.ResourceGroup, id) {
			dg.ErrorCode = kerr.GroupAuthorizationFailed.Code
			resp.Groups = append(resp.Groups, dg)
			continue
		}
		if req.IncludeAuthorizedOperations {
			dg.AuthorizedOperations = s.authorizedOps(r, authz.ResourceGroup, id, groupOperations)
		}
		found := s.groups.Describe(id, &dg)
		if !found && req.Version >= 6 {
			dg.ErrorCode = kerr.GroupIDNotFound.Code
			msg := "Group " + id + " not found."
			dg.ErrorMessage = &msg
		}
		if req.Version < 4 {
			for i := range dg.Members {
				dg.Members[i].InstanceID = nil
			}
		}
		resp.Groups = append(resp.Groups, dg)
	}
	return resp, nil
}
