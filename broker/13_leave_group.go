package broker

// LeaveGroup (key 13), versions 0-5.
//
// Behaviour: removes members at once (no wait for the session timeout) and
// rebalances the group (groupcoord). v0-2: one member id. v3+
// (KIP-345): a batch of members by member id and/or group instance id,
// with per-member errors (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID when the
// instance is held by another member id). A member id handed out by
// KIP-394 but not yet joined is forgotten. v5 reasons are logged.
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
	"github.com/verbatim-kafka/verbatim/groupcoord"
)

func init() { register(kmsg.LeaveGroup.Int16(), 0, 5, handleLeaveGroup) }

func handleLeaveGroup(_ context.Context, s *Server, r *Request) (Reply, error) {
	req := r.Msg.(*kmsg.LeaveGroupRequest)
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	if !s.authorized(r, authz.OpRead, authz.ResourceGroup, req.Group) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil
	}
	if req.Version < 3 {
		code, ms := s.groups.Leave(req.Group, []groupcoord.LeaveMember{{MemberID: req.MemberID}})
		resp.ErrorCode = code
		if code == 0 && len(ms) == 1 {
			resp.ErrorCode = ms[0].Code
		}
		return resp, nil
	}
	in := make([]groupcoord.LeaveMember, len(req.Members))
	for i, m := range req.Members {
		in[i] = groupcoord.LeaveMember{MemberID: m.MemberID, InstanceID: m.InstanceID}
		if m.Reason != nil && *m.Reason != "" {
			s.log.Debug("leave group", "group", req.Group, "member", m.MemberID, "reason", *m.Reason)
		}
	}
	code, ms := s.groups.Leave(req.Group, in)
	resp.ErrorCode = code
	if code != 0 {
		return resp, nil
	}
	for _, m := range ms {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID, rm.ErrorCode = m.MemberID, m.InstanceID, m.Code
		resp.Members = append(resp.Members, rm)
	}
	return resp, nil
}
