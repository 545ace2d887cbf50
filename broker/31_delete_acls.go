package broker

// DeleteAcls (key 31), versions 1-3 (v0 removed in Kafka 4.0, KIP-896).
//
// Behaviour: needs ALTER on CLUSTER (else every filter's result
// CLUSTER_AUTHORIZATION_FAILED); with no authorizer configured every
// result is SECURITY_DISABLED. Each filter deletes every ACL it matches
// (as DescribeAcls matches them) and lists them as its matching ACLs; a
// filter with an UNKNOWN code is INVALID_REQUEST and deletes nothing. The
// ACL set is persisted before the answer; a failed write answers every
// filter with the storage error and deletes nothing. In cluster mode the
// filters match the cluster store's ACLs as they are (not this broker's
// applied copy) and each match is one record deleted; a binding another
// request deleted first is not listed; a store failure midway answers
// every filter with it though the deletions before it stand.
//
// Deviations from Apache Kafka: none known.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/authz"
)

func init() { register(kmsg.DeleteACLs.Int16(), 1, 3, handleDeleteAcls) }

func handleDeleteAcls(_ context.Context, s *Server, r *Request) (Reply, error) {
	req := r.Msg.(*kmsg.DeleteACLsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	resp.Results = make([]kmsg.DeleteACLsResponseResult, len(req.Filters))
	for i := range resp.Results {
		resp.Results[i] = kmsg.NewDeleteACLsResponseResult()
	}
	// refuse answers every filter with one refusal, audited as the
	// request's.
	refuse := func(code int16, msg string) (Reply, error) {
		for i := range resp.Results {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = code, aclStr(msg)
		}
		s.auditRecord(r, "delete acls", "CLUSTER", "kafka-cluster", code)
		return resp, nil
	}
	if code, msg, refused := s.aclAdminRefusal(r); refused {
		return refuse(code, msg)
	}
	fs := make([]authz.Filter, len(req.Filters))
	for i := range req.Filters {
		f := &req.Filters[i]
		fs[i] = filterOf(f.ResourceType, f.ResourceName, f.ResourcePatternType, f.Principal, f.Host, f.Operation, f.PermissionType)
	}
	var matched [][]authz.Binding
	var err error
	if s.cm != nil {
		matched, err = s.cm.deleteAcls(fs) // cluster_security.go
	} else {
		matched, err = s.acl.Delete(fs)
	}
	if err != nil {
		return refuse(kerr.KafkaStorageError.Code, s.aclPersistFailed(r, err))
	}
	for i := range resp.Results {
		if fs[i].Unknown() {
			resp.Results[i].ErrorCode = kerr.InvalidRequest.Code
			resp.Results[i].ErrorMessage = aclStr("The filter contains UNKNOWN elements")
			s.auditRecord(r, "delete acls", "ACL_FILTER", "", resp.Results[i].ErrorCode)
			continue
		}
		for _, b := range matched[i] {
			resp.Results[i].MatchingACLs = append(resp.Results[i].MatchingACLs, matchingACL(b))
			s.log.Info("ACL deleted", "acl", b.String(), "principal", r.Principal)
			s.auditRecord(r, "delete acl", "ACL", b.String(), 0)
		}
	}
	return resp, nil
}
