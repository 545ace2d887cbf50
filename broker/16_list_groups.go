package broker

// ListGroups (key 16), versions 0-5.
//
// Behaviour: every group this broker coordinates (all of them on a single
// node; in cluster mode those of the __consumer_offsets partitions it
// leads, COORDINATOR_LOAD_IN_PROGRESS with the groups loaded so far while
// a partition loads, as Kafka) with its protocol type; v4+ its state and the StatesFilter (case-insensitive, as
// Kafka); v5+ its type ("classic": only the classic protocol is served)
// and the TypesFilter (a filter without "classic" lists nothing).
//
// Authorization (with the authorizer on, authorize.go): DESCRIBE on
// CLUSTER lists every group, else only the groups the principal may
// describe.
//
// Deviations from Apache Kafka: none known.

import (
	"context"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/verbatim-kafka/verbatim/authz"
)

func init() { register(kmsg.ListGroups.Int16(), 0, 5, handleListGroups) }

func handleListGroups(_ context.Context, s *Server, r *Request) (Reply, error) {
	req := r.Msg.(*kmsg.ListGroupsRequest)
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	if req.Version >= 5 && len(req.TypesFilter) > 0 {
		ok := false
		for _, t := range req.TypesFilter {
			if strings.EqualFold(t, "classic") {
				ok = true
			}
		}
		if !ok {
			return resp, nil
		}
	}
	// Without DESCRIBE on CLUSTER only the groups the principal may
	// describe are listed.
	all := s.authorizedCluster(r, authz.OpDescribe)
	if s.groups.LoadInProgress() {
		resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
	}
	for _, g := range s.groups.List() {
		if !all && !s.authorized(r, authz.OpDescribe, authz.ResourceGroup, g.ID) {
			continue
		}
		if req.Version >= 4 && len(req.StatesFilter) > 0 {
			ok := false
			for _, st := range req.StatesFilter {
				if strings.EqualFold(st, g.State) {
					ok = true
				}
			}
			if !ok {
				continue
			}
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = g.ID, g.ProtocolType, g.State, "classic"
		resp.Groups = append(resp.Groups, lg)
	}
	return resp, nil
}
