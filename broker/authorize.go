package broker

// The authorizer (Kafka's StandardAuthorizer semantics, package authz) as
// handlers use it, and the mirror permission.
//
// With Config.Authorizer off (Kafka: no authorizer.class.name) every check
// here allows and costs one nil test; the ACL APIs answer
// SECURITY_DISABLED. With it on, the ACL set lives in
// "verbatim-meta/acls.json", rewritten atomically on every change before
// the change is visible, and read at start; in cluster mode it lives in
// the cluster store instead (cluster_security.go).
//
// The mirror permission is CLUSTER_ACTION on the CLUSTER resource (the
// operation Kafka asks of a follower fetch), on top of the ordinary
// per-topic operation each API checks: a principal that may write a
// topic (even with ALL on it) still cannot write at offsets of its
// choosing, move a mirror's log start, or create a mirror topic. The
// mirror lifecycle (stop, and changing, extending or deleting a mirror
// topic) accepts CLUSTER_ACTION or ALTER on CLUSTER. Neither is ever
// granted by allow.everyone.if.no.acl.found.

import (
	"errors"
	"fmt"
	"io/fs"
	"net"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/verbatim-kafka/verbatim/authz"
)

// aclFile is the persisted ACL set, under the data dir.
const aclFile = metaDirName + "/acls.json"

// openAuthorizer builds the authorizer from the config and the persisted
// ACLs, or returns nil when authorization is off.
func (s *Server) openAuthorizer() (*authz.Authorizer, error) {
	if !s.cfg.Authorizer {
		return nil, nil
	}
	for _, p := range s.cfg.SuperUsers {
		if err := authz.ValidPrincipal(p); err != nil {
			return nil, fmt.Errorf("broker: super.users: %v", err)
		}
	}
	if s.cm != nil {
		// Cluster mode: the ACLs are the cluster store's
		// (cluster_security.go).
		return s.cm.openAuthorizer(authz.Config{SuperUsers: s.cfg.SuperUsers, AllowEveryoneIfNoACLFound: s.cfg.AllowEveryoneIfNoACLFound}), nil
	}
	a := authz.New(authz.Config{
		SuperUsers:                s.cfg.SuperUsers,
		AllowEveryoneIfNoACLFound: s.cfg.AllowEveryoneIfNoACLFound,
		Persist: func(data []byte) error {
			return writeFileAtomic(s.fs, metaDirName, "acls.json", data)
		},
	})
	if len(s.cfg.aclSeed) > 0 {
		if _, err := a.Create(s.cfg.aclSeed); err != nil {
			return nil, err
		}
	}
	data, err := readFile(s.fs, aclFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return a, nil
	case err != nil:
		return nil, fmt.Errorf("broker: reading %s: %w", aclFile, err)
	}
	if err := a.Load(data); err != nil {
		return nil, fmt.Errorf("broker: %s: %w", aclFile, err)
	}
	return a, nil
}

// authorized reports whether the request's principal, from its host, may
// perform op on the resource (rt, name). Always true with the authorizer
// off.
func (s *Server) authorized(req *Request, op authz.Operation, rt authz.ResourceType, name string) bool {
	if s.acl == nil {
		return true
	}
	return s.acl.Authorize(req.Principal, req.Host, op, rt, name, true)
}

// authorizedCluster is authorized on the CLUSTER resource.
func (s *Server) authorizedCluster(req *Request, op authz.Operation) bool {
	return s.authorized(req, op, authz.ResourceCluster, authz.ClusterName)
}

// authorizedByType is Kafka's authorizeByResourceType: may the principal
// perform op on at least one resource of type rt.
func (s *Server) authorizedByType(req *Request, op authz.Operation, rt authz.ResourceType) bool {
	if s.acl == nil {
		return true
	}
	return s.acl.AuthorizeByResourceType(req.Principal, req.Host, op, rt)
}

// authorizedOps is the authorized-operations bit set of a resource
// (Metadata, DescribeGroups, DescribeCluster): the operations Kafka
// supports on its type that the principal may perform. With the
// authorizer off it is off, the bit set the broker always answered.
func (s *Server) authorizedOps(req *Request, rt authz.ResourceType, name string, off int32) int32 {
	if s.acl == nil {
		return off
	}
	return s.acl.AuthorizedOperations(req.Principal, req.Host, rt, name)
}

// mirrorPermitted reports whether the request's principal holds the
// mirror permission, CLUSTER_ACTION on CLUSTER, which
// allow.everyone.if.no.acl.found never grants. The caller checks the
// per-topic operation as well.
func (s *Server) mirrorPermitted(req *Request) bool {
	if s.acl == nil {
		return true
	}
	return s.acl.Authorize(req.Principal, req.Host, authz.OpClusterAction, authz.ResourceCluster, authz.ClusterName, false)
}

// mirrorAdminPermitted is the permission of the mirror lifecycle (stop,
// and altering, extending or deleting a mirror topic): CLUSTER_ACTION (the
// mirror permission) or ALTER on CLUSTER (the link admin permission), never
// granted by allow.everyone.if.no.acl.found.
func (s *Server) mirrorAdminPermitted(req *Request) bool {
	return s.mirrorPermitted(req) || s.linkAdminPermitted(req)
}

// errMirrorPermission is the refusal of an action that needs the mirror
// permission: CLUSTER_AUTHORIZATION_FAILED naming the missing ACL.
func errMirrorPermission(req *Request, action string) error {
	return kafkaErr(kerr.ClusterAuthorizationFailed, fmt.Sprintf(
		"%s needs the mirror permission: principal %s from host %s has no ALLOW ACL for CLUSTER_ACTION on the CLUSTER resource %s (kafka-acls.sh --add --allow-principal %s --operation ClusterAction --cluster)",
		action, req.Principal, req.Host, authz.ClusterName, req.Principal))
}

// errMirrorAdminPermission is the refusal of a mirror lifecycle action.
func errMirrorAdminPermission(req *Request, action string) error {
	return kafkaErr(kerr.ClusterAuthorizationFailed, fmt.Sprintf(
		"%s needs the mirror permission: principal %s from host %s has no ALLOW ACL for CLUSTER_ACTION or ALTER on the CLUSTER resource %s (kafka-acls.sh --add --allow-principal %s --operation ClusterAction --cluster)",
		action, req.Principal, req.Host, authz.ClusterName, req.Principal))
}

// testPrincipalFor is the principal tests give connections from a remote
// IP (Config.testPrincipals), or "" when none.
func (c Config) testPrincipalFor(host string) string {
	if c.testPrincipals == nil {
		return ""
	}
	return c.testPrincipals[host]
}

// principalOf is a new connection's principal: AnonymousPrincipal until it
// authenticates, or the one a test gave its address.
func principalOf(c Config, remote net.Addr) string {
	if p := c.testPrincipalFor(hostOf(remote)); p != "" {
		return p
	}
	return AnonymousPrincipal
}

// fetchAuthorized is Fetch's check, as Kafka's: a follower fetch (a
// replica id >= 0) needs CLUSTER_ACTION on CLUSTER, a consumer READ on the
// topic; either failing is TOPIC_AUTHORIZATION_FAILED for the partition.
func (op *fetchOp) fetchAuthorized(topic string) bool {
	replica := op.req.ReplicaID
	if op.req.Version >= 15 {
		replica = op.req.ReplicaState.ID
	}
	if replica >= 0 {
		return op.s.authorizedCluster(op.r, authz.OpClusterAction)
	}
	return op.s.authorized(op.r, authz.OpRead, authz.ResourceTopic, topic)
}

// alterTopicRefusal is the check of an API that changes a topic: op on the
// topic (TOPIC_AUTHORIZATION_FAILED) and, when the topic is a mirror
// topic, the mirror lifecycle permission (CLUSTER_AUTHORIZATION_FAILED
// naming it; action, followed by the topic's name, says what was refused).
func (s *Server) alterTopicRefusal(r *Request, topic string, op authz.Operation, action string) error {
	if s.acl == nil {
		return nil
	}
	if !s.authorized(r, op, authz.ResourceTopic, topic) {
		return kafkaErr(kerr.TopicAuthorizationFailed, kerr.TopicAuthorizationFailed.Message)
	}
	if t := s.cluster.topic(topic); t != nil && t.Config().Mirror && !s.mirrorAdminPermitted(r) {
		return errMirrorAdminPermission(r, action+topic)
	}
	return nil
}

// configsRefusal is the check of DescribeConfigs (alter false) and
// AlterConfigs / IncrementalAlterConfigs (alter true), as Kafka's
// KafkaApis does it: DESCRIBE_CONFIGS / ALTER_CONFIGS on the topic
// (TOPIC_AUTHORIZATION_FAILED), on CLUSTER for broker, broker-logger and
// client-metrics resources (CLUSTER_AUTHORIZATION_FAILED), on the group
// for group resources (GROUP_AUTHORIZATION_FAILED); altering a mirror
// topic (its policies, or mirror.mode: the mirror stop) also needs the
// mirror lifecycle permission. Other resource types are left to the
// handler.
func (s *Server) configsRefusal(r *Request, typ kmsg.ConfigResourceType, name string, alter bool) error {
	if s.acl == nil {
		return nil
	}
	op := authz.OpDescribeConfigs
	if alter {
		op = authz.OpAlterConfigs
	}
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		if alter {
			return s.alterTopicRefusal(r, name, op, "changing the configs of mirror topic ")
		}
		if !s.authorized(r, op, authz.ResourceTopic, name) {
			return kafkaErr(kerr.TopicAuthorizationFailed, kerr.TopicAuthorizationFailed.Message)
		}
	case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger, kmsg.ConfigResourceTypeClientMetrics:
		if !s.authorizedCluster(r, op) {
			return kafkaErr(kerr.ClusterAuthorizationFailed, kerr.ClusterAuthorizationFailed.Message)
		}
	case kmsg.ConfigResourceTypeGroupConfig:
		if !s.authorized(r, op, authz.ResourceGroup, name) {
			return kafkaErr(kerr.GroupAuthorizationFailed, kerr.GroupAuthorizationFailed.Message)
		}
	}
	return nil
}

// Authorizer is the broker's authorizer (nil when authorization is off),
// for tests that check what Kafka's tools configured.
func (s *Server) Authorizer() *authz.Authorizer { return s.acl }

// linkAdminPermitted is the permission of creating and deleting cluster
// links: ALTER on CLUSTER, never granted by
// allow.everyone.if.no.acl.found (a link creates mirror topics).
func (s *Server) linkAdminPermitted(req *Request) bool {
	if s.acl == nil {
		return true
	}
	return s.acl.Authorize(req.Principal, req.Host, authz.OpAlter, authz.ResourceCluster, authz.ClusterName, false)
}

// errLinkAdminPermission is the refusal of a link's creation or deletion.
func errLinkAdminPermission(req *Request, action string) error {
	return kafkaErr(kerr.ClusterAuthorizationFailed, fmt.Sprintf(
		"%s needs ALTER on the CLUSTER resource %s: principal %s from host %s has no ALLOW ACL for it (kafka-acls.sh --add --allow-principal %s --operation Alter --cluster)",
		action, authz.ClusterName, req.Principal, req.Host, req.Principal))
}

// mirrorTopicRefusal is the per-topic check of the link's topic requests
// (start, pause, resume, truncate): ALTER on an existing topic, CREATE
// (on the topic or on CLUSTER, as CreateTopics) for one a
// StartMirrorTopics creates; refused: TOPIC_AUTHORIZATION_FAILED. The
// caller checks the mirror lifecycle permission (mirrorAdminPermitted).
func (s *Server) mirrorTopicRefusal(req *Request, topic string, mayCreate bool) error {
	if s.acl == nil {
		return nil
	}
	if mayCreate && s.cluster.topic(topic) == nil {
		if s.authorizedCluster(req, authz.OpCreate) || s.authorized(req, authz.OpCreate, authz.ResourceTopic, topic) {
			return nil
		}
	} else if s.authorized(req, authz.OpAlter, authz.ResourceTopic, topic) {
		return nil
	}
	return kafkaErr(kerr.TopicAuthorizationFailed, kerr.TopicAuthorizationFailed.Message)
}

// keepTopicRefusal is the check of the topic a truncation keeps what it
// cuts in (keep, or "<topic>.truncated" when keep is empty): the broker
// writes batches there at offsets of the request's choosing, so the
// principal needs WRITE on it, and CREATE (on the topic or the cluster)
// when it does not exist yet, as a producer creating it would.
func (s *Server) keepTopicRefusal(req *Request, topic, keep string) error {
	if s.acl == nil {
		return nil
	}
	if keep == "" {
		keep = topic + ".truncated"
	}
	ok := s.authorized(req, authz.OpWrite, authz.ResourceTopic, keep)
	if ok && s.cluster.topic(keep) == nil {
		ok = s.authorizedCluster(req, authz.OpCreate) || s.authorized(req, authz.OpCreate, authz.ResourceTopic, keep)
	}
	if ok {
		return nil
	}
	return kafkaErr(kerr.TopicAuthorizationFailed, fmt.Sprintf("not authorized to write (and create) %s, the topic that keeps what truncating %s cuts", keep, topic))
}
