package broker

// Heartbeat (key 12), versions 0-4.
//
// Behaviour: keeps a member's session alive (groupcoord). NONE in
// Stable and CompletingRebalance, REBALANCE_IN_PROGRESS while the group is
// rejoining (the member must rejoin), UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID
// (v3+), ILLEGAL_GENERATION, as Kafka.
//
// Authorization (with the authorizer on, authorize.go): READ on the group
// (GROUP_AUTHORIZATION_FAILED).
//
// Deviations from Apache Kafka: none known.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/verbatim-kafka/verbatim/authz"
)

func init() { register(kmsg.Heartbeat.Int16(), 0, 4, handleHeartbeat) }

func handleHeartbeat(_ context.Context, s *Server, r *Request) (Reply, error) {
	req := r.Msg.(*kmsg.HeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	if !s.authorized(r, authz.OpRead, authz.ResourceGroup, req.Group) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil
	}
	inst := req.InstanceID
	if req.Version < 3 {
		inst = nil
	}
	resp.ErrorCode = s.groups.Heartbeat(req.Group, req.MemberID, inst, req.Generation)
	return resp, nil
}
