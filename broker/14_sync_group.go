package broker

// SyncGroup (key 14), versions 0-5.
//
// Behaviour: the sync phase of Kafka's classic rebalance
// (groupcoord). The leader's assignments are stored (group
// metadata record in __consumer_offsets) and every member gets its own
// once they are durable; followers wait (deferred) for the leader. Errors
// as Kafka: UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID (v3+ instance ids),
// ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS (the group is rejoining),
// INCONSISTENT_GROUP_PROTOCOL (v5+ protocol type/name mismatch). Members
// that do not sync within the rebalance timeout are removed and the group
// rebalances.
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

func init() { register(kmsg.SyncGroup.Int16(), 0, 5, handleSyncGroup) }

func handleSyncGroup(_ context.Context, s *Server, r *Request) (Reply, error) {
	req := r.Msg.(*kmsg.SyncGroupRequest)
	if !s.authorized(r, authz.OpRead, authz.ResourceGroup, req.Group) {
		return syncResponse(req, groupcoord.SyncResult{Code: kerr.GroupAuthorizationFailed.Code}), nil
	}
	sr := groupcoord.SyncRequest{Group: req.Group, MemberID: req.MemberID, InstanceID: req.InstanceID, Generation: req.Generation,
		Assignments: make(map[string][]byte, len(req.GroupAssignment))}
	if req.Version >= 5 {
		sr.ProtocolType, sr.Protocol = req.ProtocolType, req.Protocol
	}
	if req.Version < 3 {
		sr.InstanceID = nil
	}
	for _, a := range req.GroupAssignment {
		sr.Assignments[a.MemberID] = a.MemberAssignment
	}
	res, ch := s.groups.Sync(sr)
	if ch == nil {
		return syncResponse(req, res), nil
	}
	return Defer(syncAwait{req: req, ch: ch}), nil
}

type syncAwait struct {
	req *kmsg.SyncGroupRequest
	ch  chan groupcoord.SyncResult
}

func (a syncAwait) Await(ctx context.Context) (Reply, error) {
	res, err := awaitGroupResult(ctx, a.ch, groupcoord.SyncResult{Code: kerr.RebalanceInProgress.Code})
	if err != nil {
		return nil, err
	}
	return syncResponse(a.req, res), nil
}

func syncResponse(req *kmsg.SyncGroupRequest, res groupcoord.SyncResult) *kmsg.SyncGroupResponse {
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	resp.ErrorCode = res.Code
	if res.Code == 0 {
		pt, p := res.ProtocolType, res.Protocol
		resp.ProtocolType, resp.Protocol = &pt, &p
		resp.MemberAssignment = res.Assignment
		if resp.MemberAssignment == nil {
			resp.MemberAssignment = []byte{}
		}
	}
	return resp
}
