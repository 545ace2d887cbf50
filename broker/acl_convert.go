package broker

// Translation between the ACL APIs' kmsg messages and authz's bindings
// and filters (29_describe_acls.go, 30_create_acls.go, 31_delete_acls.go).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/authz"
)

// msgNoAuthorizer is Kafka's SECURITY_DISABLED message.
const msgNoAuthorizer = "No Authorizer is configured."

func bindingOfCreation(c *kmsg.CreateACLsRequestCreation) authz.Binding {
	return authz.Binding{
		ResourceType: authz.ResourceType(c.ResourceType),
		Name:         c.ResourceName,
		Pattern:      authz.PatternType(c.ResourcePatternType),
		Principal:    c.Principal,
		Host:         c.Host,
		Operation:    authz.Operation(c.Operation),
		Permission:   authz.Permission(c.PermissionType),
	}
}

func filterOf(rt kmsg.ACLResourceType, name *string, pt kmsg.ACLResourcePatternType, principal, host *string,
	op kmsg.ACLOperation, perm kmsg.ACLPermissionType) authz.Filter {
	return authz.Filter{
		ResourceType: authz.ResourceType(rt),
		Name:         name,
		Pattern:      authz.PatternType(pt),
		Principal:    principal,
		Host:         host,
		Operation:    authz.Operation(op),
		Permission:   authz.Permission(perm),
	}
}

// describeResources groups bindings (sorted by pattern) by their resource
// pattern, as Kafka's DescribeAclsResponse does.
func describeResources(bs []authz.Binding) []kmsg.DescribeACLsResponseResource {
	var out []kmsg.DescribeACLsResponseResource
	for _, b := range bs {
		n := len(out)
		if n == 0 || out[n-1].ResourceType != kmsg.ACLResourceType(b.ResourceType) || out[n-1].ResourceName != b.Name ||
			out[n-1].ResourcePatternType != kmsg.ACLResourcePatternType(b.Pattern) {
			r := kmsg.NewDescribeACLsResponseResource()
			r.ResourceType, r.ResourceName, r.ResourcePatternType = kmsg.ACLResourceType(b.ResourceType), b.Name, kmsg.ACLResourcePatternType(b.Pattern)
			out = append(out, r)
			n++
		}
		a := kmsg.NewDescribeACLsResponseResourceACL()
		a.Principal, a.Host, a.Operation, a.PermissionType = b.Principal, b.Host, kmsg.ACLOperation(b.Operation), kmsg.ACLPermissionType(b.Permission)
		out[n-1].ACLs = append(out[n-1].ACLs, a)
	}
	return out
}

func matchingACL(b authz.Binding) kmsg.DeleteACLsResponseResultMatchingACL {
	m := kmsg.NewDeleteACLsResponseResultMatchingACL()
	m.ResourceType, m.ResourceName, m.ResourcePatternType = kmsg.ACLResourceType(b.ResourceType), b.Name, kmsg.ACLResourcePatternType(b.Pattern)
	m.Principal, m.Host = b.Principal, b.Host
	m.Operation, m.PermissionType = kmsg.ACLOperation(b.Operation), kmsg.ACLPermissionType(b.Permission)
	return m
}

func aclStr(s string) *string { return &s }

// aclAdminRefusal is the refusal every result of a CreateAcls or DeleteAcls
// gets, if any: CLUSTER_AUTHORIZATION_FAILED without ALTER on CLUSTER,
// SECURITY_DISABLED without an authorizer.
func (s *Server) aclAdminRefusal(r *Request) (code int16, msg string, refused bool) {
	switch {
	case !s.authorizedCluster(r, authz.OpAlter):
		return kerr.ClusterAuthorizationFailed.Code, kerr.ClusterAuthorizationFailed.Message, true
	case s.acl == nil:
		return kerr.SecurityDisabled.Code, msgNoAuthorizer, true
	}
	return 0, "", false
}

// aclPersistFailed logs a failed write of the ACL file; the message is what
// every result is answered with (KAFKA_STORAGE_ERROR).
func (s *Server) aclPersistFailed(r *Request, err error) string {
	s.log.Error("persisting ACLs failed", "err", err, "client", r.ClientID)
	return "persisting the ACLs failed: " + err.Error()
}
