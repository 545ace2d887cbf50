package broker

// DeleteGroups (key 42), versions 0-2.
//
// Behaviour: deletes empty groups: tombstones for every committed offset
// and for the group metadata are written to __consumer_offsets, then the
// group is gone. Per group: GROUP_ID_NOT_FOUND (unknown), NON_EMPTY_GROUP
// (members), INVALID_GROUP_ID (empty id), as Kafka.
//
// Authorization (with the authorizer on, authorize.go): DELETE on the
// group (GROUP_AUTHORIZATION_FAILED).
//
// Deviations from Apache Kafka: none known.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/verbatim-kafka/verbatim/authz"
)

func init() { register(kmsg.DeleteGroups.Int16(), 0, 2, handleDeleteGroups) }

func handleDeleteGroups(_ context.Context, s *Server, r *Request) (Reply, error) {
	req := r.Msg.(*kmsg.DeleteGroupsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, g := range req.Groups {
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group = g
		if !s.authorized(r, authz.OpDelete, authz.ResourceGroup, g) {
			rg.ErrorCode = kerr.GroupAuthorizationFailed.Code
		} else {
			rg.ErrorCode = s.groups.DeleteGroup(g)
		}
		s.auditRecord(r, "delete group", "GROUP", g, rg.ErrorCode)
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil
}
