package broker

// CreateAcls (key 30), versions 1-3 (v0 removed in Kafka 4.0, KIP-896).
//
// Behaviour: needs ALTER on CLUSTER (else every result
// CLUSTER_AUTHORIZATION_FAILED); with no authorizer configured every
// result is SECURITY_DISABLED. Each creation is validated as Kafka's
// controller does (authz.Binding.Validate: no UNKNOWN or ANY code, a
// LITERAL or PREFIXED pattern, a non-empty name, "kafka-cluster" for
// CLUSTER, a "Type:name" principal): INVALID_REQUEST with the reason,
// the others are still created. An ACL that already exists is a success.
// The ACL set is persisted (verbatim-meta/acls.json) before the answer;
// a failed write answers every creation with the storage error and
// changes nothing. In cluster mode each creation is one record of the
// cluster store (cluster_security.go), answered on its own: the store's
// failure as storeErr maps it (REQUEST_TIMED_OUT, UNKNOWN_SERVER_ERROR);
// the answer comes once this broker enforces the ACL, the other brokers
// enforce it once their snapshots have it.
//
// Deviations from Apache Kafka: none known.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/authz"
)

func init() { register(kmsg.CreateACLs.Int16(), 1, 3, handleCreateAcls) }

func handleCreateAcls(_ context.Context, s *Server, r *Request) (Reply, error) {
	req := r.Msg.(*kmsg.CreateACLsRequest)
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	resp.Results = make([]kmsg.CreateACLsResponseResult, len(req.Creations))
	// refuse answers every creation with one refusal, audited as the
	// request's.
	refuse := func(code int16, msg string) (Reply, error) {
		for i := range resp.Results {
			resp.Results[i] = kmsg.NewCreateACLsResponseResult()
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = code, aclStr(msg)
		}
		s.auditRecord(r, "create acls", "CLUSTER", "kafka-cluster", code)
		return resp, nil
	}
	if code, msg, refused := s.aclAdminRefusal(r); refused {
		return refuse(code, msg)
	}
	bs := make([]authz.Binding, len(req.Creations))
	for i := range req.Creations {
		bs[i] = bindingOfCreation(&req.Creations[i])
	}
	var errs []error
	if s.cm != nil {
		errs = s.cm.createAcls(bs) // cluster_security.go
	} else {
		var err error
		if errs, err = s.acl.Create(bs); err != nil {
			return refuse(kerr.KafkaStorageError.Code, s.aclPersistFailed(r, err))
		}
	}
	for i := range resp.Results {
		resp.Results[i] = kmsg.NewCreateACLsResponseResult()
		if errs[i] != nil {
			code, msg := aclCreationError(errs[i])
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = code, aclStr(msg)
		} else {
			s.log.Info("ACL created", "acl", bs[i].String(), "principal", r.Principal)
		}
		s.auditRecord(r, "create acl", "ACL", bs[i].String(), resp.Results[i].ErrorCode)
	}
	return resp, nil
}
