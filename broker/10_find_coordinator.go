package broker

// FindCoordinator (key 10), versions 0-6.
//
// Behaviour: this node coordinates every group and every transactional id
// (it leads every partition of __consumer_offsets and __transaction_state),
// so a lookup answers this broker's node id, host and port; the internal
// topic is created on the first lookup, as Kafka creates it. v4+ batched
// keys are answered one by one. Errors: a transactional id that is empty
// gets INVALID_REQUEST; share-group lookups (type 2, KIP-932) get
// INVALID_REQUEST (share groups are not served); COORDINATOR_NOT_AVAILABLE
// if the internal topic cannot be created.
//
// Authorization (with the authorizer on, authorize.go): DESCRIBE on the
// group or the transactional id.
//
// In cluster mode the coordinator is the leader of the internal topic's
// partition the key maps to (COORDINATOR_NOT_AVAILABLE while it has
// none), the internal topic created with offsets.topic.replication.factor
// (transaction.state.log.replication.factor) replicas, lowered to the
// registered broker count on a smaller cluster.
//
// Deviations from Apache Kafka: none known for groups and transactions.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/verbatim-kafka/verbatim/authz"
)

func init() { register(kmsg.FindCoordinator.Int16(), 0, 6, handleFindCoordinator) }

// findCoordinator answers one key.
func (s *Server) findCoordinator(l *Listener, key string, typ int8) (int32, string, int32, int16, *string) {
	var topic string
	switch typ {
	case 0:
		topic = offsetsTopic
	case 1:
		if key == "" {
			msg := "Transactional id must not be empty."
			return -1, "", -1, kerr.InvalidRequest.Code, &msg
		}
		topic = txnStateTopic
	default:
		msg := "Only group (0) and transaction (1) coordinators are served by this broker."
		return -1, "", -1, kerr.InvalidRequest.Code, &msg
	}
	if s.cm != nil {
		return s.clusterCoordinator(l, topic, key)
	}
	if _, err := s.internalTopic(topic); err != nil {
		msg := err.Error()
		return -1, "", -1, kerr.CoordinatorNotAvailable.Code, &msg
	}
	host, port := s.advertised(l)
	return s.cfg.NodeID, host, port, 0, nil
}

func handleFindCoordinator(_ context.Context, s *Server, r *Request) (Reply, error) {
	req := r.Msg.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	if req.Version < 4 {
		resp.NodeID, resp.Host, resp.Port, resp.ErrorCode, resp.ErrorMessage = s.findCoordinatorAuthorized(r, req.CoordinatorKey, req.CoordinatorType)
		return resp, nil
	}
	for _, key := range req.CoordinatorKeys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key = key
		c.NodeID, c.Host, c.Port, c.ErrorCode, c.ErrorMessage = s.findCoordinatorAuthorized(r, key, req.CoordinatorType)
		resp.Coordinators = append(resp.Coordinators, c)
	}
	return resp, nil
}

// findCoordinatorAuthorized is findCoordinator behind Kafka's checks:
// DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED) or on the
// transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
func (s *Server) findCoordinatorAuthorized(r *Request, key string, typ int8) (int32, string, int32, int16, *string) {
	switch {
	case typ == 0 && !s.authorized(r, authz.OpDescribe, authz.ResourceGroup, key):
		return -1, "", -1, kerr.GroupAuthorizationFailed.Code, nil
	case typ == 1 && !s.authorized(r, authz.OpDescribe, authz.ResourceTransactionalID, key):
		return -1, "", -1, kerr.TransactionalIDAuthorizationFailed.Code, nil
	}
	return s.findCoordinator(r.Listener, key, typ)
}
